//! Launch wrappers for the NTT kernels of `kernels/ntt/ntt.cu` (algorithm and table layout in
//! `kernels/ntt/ntt.cuh`), embedded by this crate's build script; the only module of cuzk-ntt
//! allowed `unsafe`. The planning (which passes, flags and tables) lives in `plan.rs`; these
//! functions only check that every access a kernel makes stays inside its buffers.
//!
//! Generic over any [`Pod`] element of 32 bytes, so this crate does not depend on the field
//! crate: `cuzk_field::Fr` has exactly the layout the kernels use (8 little-endian u32 limbs,
//! Montgomery form). Inputs must be canonical; outputs are canonical.

use bytemuck::Pod;
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, LaunchConfig, Module, Result, Stream};

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

const MODULE: &Module = &NTT;

/// The table buffer's layout, in elements (values: `kernels/cuzk_shared.h`; meaning:
/// `kernels/ntt/ntt.cuh`).
pub mod layout {
    use cuzk_gpu::shared as c;

    pub const SPLIT_BITS: u32 = c::CUZK_NTT_SPLIT_BITS;
    pub const SPLIT: usize = c::CUZK_NTT_SPLIT as usize;
    pub const MAX_LG: u32 = c::CUZK_NTT_MAX_LG;
    pub const INT_LG: u32 = c::CUZK_NTT_INT_LG;
    pub const INT_LEN: usize = c::CUZK_NTT_INT_LEN as usize;
    pub const T_FWD_LO: usize = c::CUZK_NTT_T_FWD_LO as usize;
    pub const T_INV_LO: usize = c::CUZK_NTT_T_INV_LO as usize;
    pub const T_G_LO: usize = c::CUZK_NTT_T_G_LO as usize;
    pub const T_GI_LO: usize = c::CUZK_NTT_T_GI_LO as usize;
    pub const T_FWD_INT: usize = c::CUZK_NTT_T_FWD_INT as usize;
    pub const T_INV_INT: usize = c::CUZK_NTT_T_INV_INT as usize;
    pub const T_NINV: usize = c::CUZK_NTT_T_NINV as usize;
    /// The H pipeline's quotient constants K_L = 1/(Z·n^3) and n = 2^L, L = 0..=MAX_LG.
    pub const T_HK: usize = c::CUZK_NTT_T_HK as usize;
    pub const T_HN: usize = c::CUZK_NTT_T_HN as usize;
    pub const DIRECT_LG: u32 = c::CUZK_NTT_DIRECT_LG;
    pub const DIRECT_N: usize = c::CUZK_NTT_DIRECT_N as usize;
    pub const T_FWD_DIR: usize = c::CUZK_NTT_T_FWD_DIR as usize;
    pub const T_INV_DIR: usize = c::CUZK_NTT_T_INV_DIR as usize;
    /// Offset of size 2^lg's scaled HI table inside T_GN_HI / T_GIN_HI (the kernels' `gn_off`).
    pub const fn gn_off(lg: u32) -> usize {
        if lg <= 15 {
            lg as usize
        } else {
            (1 << (lg - 14)) + 13
        }
    }
    pub const GN_LEN: usize = c::CUZK_NTT_GN_LEN as usize;
    const _: () = assert!(gn_off(MAX_LG + 1) == GN_LEN);
    pub const T_GN_HI: usize = c::CUZK_NTT_T_GN_HI as usize;
    pub const T_GIN_HI: usize = c::CUZK_NTT_T_GIN_HI as usize;
    /// The H pipeline's quotient constants folded into to_coset's first twiddle (`F_TW_FOLD`):
    /// for L < MAX_LG and polynomial y (a, b, c) at `T_HTW + ((3·L + y) << INT_LG)`,
    /// s_y·w_(2^(INT_LG+1))^j, j < 2^INT_LG, s_a = K_L, s_b = 1, s_c = n·K_L.
    pub const HTW_LEN: usize = c::CUZK_NTT_HTW_LEN as usize;
    pub const T_HTW: usize = c::CUZK_NTT_T_HTW as usize;
    /// Elements in the table buffer every NTT kernel reads.
    pub const T_LEN: usize = c::CUZK_NTT_T_LEN as usize;
}

/// Pass flags (values: `kernels/cuzk_shared.h`; meaning: `kernels/ntt/ntt.cuh`).
pub mod flags {
    use cuzk_gpu::shared as c;

    pub const F_DIT: u32 = c::CUZK_NTT_F_DIT;
    pub const F_INVERSE: u32 = c::CUZK_NTT_F_INVERSE;
    pub const F_TWIDDLE: u32 = c::CUZK_NTT_F_TWIDDLE;
    pub const F_PRE_G: u32 = c::CUZK_NTT_F_PRE_G;
    pub const F_PRE_GI: u32 = c::CUZK_NTT_F_PRE_GI;
    pub const F_PRE_NINV: u32 = c::CUZK_NTT_F_PRE_NINV;
    pub const F_POST_G: u32 = c::CUZK_NTT_F_POST_G;
    pub const F_POST_GI: u32 = c::CUZK_NTT_F_POST_GI;
    pub const F_POST_NINV: u32 = c::CUZK_NTT_F_POST_NINV;
    /// Half-root coset twiddles: with `F_TWIDDLE`, the exponent of w_2M gains bitrev(row)
    /// (`F_ODD_ROW`) and / or the column (`F_ODD_COL`).
    pub const F_ODD_ROW: u32 = c::CUZK_NTT_F_ODD_ROW;
    pub const F_ODD_COL: u32 = c::CUZK_NTT_F_ODD_COL;
    /// Store: x *= w_(2^(k+1))^(±row) (a post-scaling).
    pub const F_POST_ROW: u32 = c::CUZK_NTT_F_POST_ROW;
    /// `F_TWIDDLE` is multiplied at the store, as the inter-pass twiddle of the pass geometry
    /// in the fields [`tw_geometry`] (k bits, r column bits), over w^-1 with `F_TW_INV`.
    pub const F_TW_INV: u32 = c::CUZK_NTT_F_TW_INV;
    /// With `F_TWIDDLE` on the H pipeline's to_coeffs' last store (geometry (k ≤ 10, 0),
    /// `F_ODD_ROW`, forward, lg_n < MAX_LG, three polynomials): the twiddle comes pre-scaled
    /// by polynomial y's quotient constant from `T_HTW`.
    pub const F_TW_FOLD: u32 = c::CUZK_NTT_F_TW_FOLD;
    pub const F_ALL: u32 = c::CUZK_NTT_F_ALL;
    pub const TW_K_SHIFT: u32 = c::CUZK_NTT_TW_K_SHIFT;
    pub const TW_R_SHIFT: u32 = c::CUZK_NTT_TW_R_SHIFT;
    /// The store-side twiddle's pass geometry: k (< 16) row bits, r (< 32) column bits.
    pub const fn tw_geometry(k: u32, r: u32) -> u32 {
        (k << TW_K_SHIFT) | (r << TW_R_SHIFT)
    }
    /// The bits of the [`tw_geometry`] fields.
    pub const TW_FIELDS: u32 = tw_geometry(15, 31);
    /// The roots table's order D (bits 25..29; 0 = no table): set by the launcher from
    /// [`super::Twiddles`], never by callers.
    pub const ROOTS_SHIFT: u32 = c::CUZK_NTT_ROOTS_SHIFT;
    /// (k, r) of the [`tw_geometry`] fields of `flags`.
    pub const fn tw_fields(flags: u32) -> (u32, u32) {
        ((flags >> TW_K_SHIFT) & 15, (flags >> TW_R_SHIFT) & 31)
    }
}

/// log2 of the largest tile (rows × columns) of one pass.
pub const TILE_LG: u32 = cuzk_gpu::shared::CUZK_NTT_TILE_LG;

fn invalid(kernel: &str, reason: String) -> GpuError {
    GpuError::InvalidLaunch {
        kernel: kernel.to_string(),
        reason,
    }
}

fn check_elem<T: Pod>(kernel: &str) -> Result<()> {
    if std::mem::size_of::<T>() != 32 {
        return Err(invalid(
            kernel,
            format!(
                "element type has {} bytes, Fr has 32",
                std::mem::size_of::<T>()
            ),
        ));
    }
    Ok(())
}

/// `data.len() == batch << lg_n` with `1 <= batch <= 65535`; returns the batch.
fn check_batch<T: Pod>(kernel: &str, data: &DeviceBuffer<T>, lg_n: u32) -> Result<u32> {
    if lg_n > layout::MAX_LG {
        return Err(invalid(
            kernel,
            format!("2^{lg_n} exceeds the largest size 2^{}", layout::MAX_LG),
        ));
    }
    let n = 1usize << lg_n;
    let batch = data.len() / n;
    if batch == 0 || !data.len().is_multiple_of(n) || batch > 65535 {
        return Err(invalid(
            kernel,
            format!(
                "buffer of {} elements is not 1..=65535 polynomials of 2^{lg_n}",
                data.len()
            ),
        ));
    }
    Ok(batch as u32)
}

fn check_tables<T: Pod>(kernel: &str, tables: &DeviceBuffer<T>) -> Result<()> {
    if tables.len() != layout::T_LEN {
        return Err(invalid(
            kernel,
            format!(
                "table buffer has {} elements, expected {}",
                tables.len(),
                layout::T_LEN
            ),
        ));
    }
    Ok(())
}

/// The orders a roots table may have: above the direct table's (whose twiddles stay there,
/// in L2), up to the largest root.
pub const ROOTS_LG: std::ops::RangeInclusive<u32> = layout::DIRECT_LG + 1..=layout::MAX_LG;

/// Elements of a roots table of order `lg`: w_(2^lg)^i for i < 2^(lg-1).
pub const fn roots_len(lg: u32) -> usize {
    1 << (lg - 1)
}

/// The twiddle tables a pass reads: the table buffer ([`layout`]) and optionally a roots
/// table of order `lg` in [`ROOTS_LG`] (made by [`roots`]): inter-pass twiddles of order
/// DIRECT_LG < ord <= lg are then one load from it instead of a product of two table values.
/// The result is the same with or without it.
pub struct Twiddles<'a, T: Pod> {
    pub tables: &'a DeviceBuffer<T>,
    pub roots: Option<(&'a DeviceBuffer<T>, u32)>,
}

impl<T: Pod> std::fmt::Debug for Twiddles<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Twiddles")
            .field("tables", &self.tables.len())
            .field("roots_lg", &self.roots.map(|(_, lg)| lg))
            .finish()
    }
}

/// A roots table of `len` elements has order `lg` in [`ROOTS_LG`].
fn check_roots(kernel: &str, len: usize, lg: u32) -> Result<()> {
    if !ROOTS_LG.contains(&lg) || len != roots_len(lg) {
        return Err(invalid(
            kernel,
            format!("roots table of {len} elements for order 2^{lg}"),
        ));
    }
    Ok(())
}

impl<T: Pod> Twiddles<'_, T> {
    fn check(&self, kernel: &str) -> Result<()> {
        check_tables(kernel, self.tables)?;
        match self.roots {
            Some((r, lg)) => check_roots(kernel, r.len(), lg),
            None => Ok(()),
        }
    }

    /// The kernel's `roots` argument and the flag bits naming its order.
    fn roots_arg(&self) -> (u64, u32) {
        self.roots
            .map_or((0, 0), |(r, lg)| (r.device_ptr(), lg << flags::ROOTS_SHIFT))
    }
}

/// Fills `out` with the roots table of order `lg` ([`Twiddles`]) from the table buffer.
/// Asynchronous.
pub fn roots<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    out: &mut DeviceBuffer<T>,
    tables: &DeviceBuffer<T>,
    lg: u32,
) -> Result<()> {
    const K: &str = "cuzk_ntt_roots";
    check_elem::<T>(K)?;
    check_tables(K, tables)?;
    check_roots(K, out.len(), lg)?;
    let cfg = LaunchConfig {
        grid: ((roots_len(lg) / 256).min(1 << 16) as u32, 1, 1),
        block: (256, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: the kernel writes out[i] for i < 2^(lg-1) = out.len() and reads the split tables
    // (indices < 2^14 in each half) of a checked table buffer.
    unsafe { gpu.launch(stream, MODULE, K, cfg, &[&*out, tables, &lg]) }
}

/// The kernels that run one pass; both give the same result bit for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKernel {
    /// `cuzk_ntt_pass`: radix-2 stages, two elements per thread (the one-bit pass of 2^1).
    Radix2,
    /// The radix-4 pass (four elements per thread, two stages per shared-memory round trip;
    /// needs `k >= 2`) specialized at compile time for the pass's flags
    /// (`cuzk_ntt_pass4_{dif,dit}[_tw][_pre|_post]`, see [`specialized_name`]): only the
    /// direction and the fused multiplications the flags select are in the kernel, built for 4
    /// resident blocks per SM.
    Radix4,
}

/// The specialized radix-4 kernel for `pass_flags`: direction from `F_DIT`, `_tw` with the
/// (store-side) inter-pass twiddle, `_pre` / `_post` with pre- / post-scaling. Only the
/// combinations the plans produce are built (a pass with the twiddle is never the last of its
/// transform, so never post-scales, and no pass both pre- and post-scales); `None` for others.
pub fn specialized_name(pass_flags: u32) -> Option<&'static str> {
    use flags::*;
    let pre = pass_flags & (F_PRE_G | F_PRE_GI | F_PRE_NINV) != 0;
    let post = pass_flags & (F_POST_G | F_POST_GI | F_POST_NINV | F_POST_ROW) != 0;
    let tw = pass_flags & F_TWIDDLE != 0;
    Some(match (pass_flags & F_DIT != 0, tw, pre, post) {
        (_, _, true, true) | (_, true, false, true) => return None,
        (false, false, false, false) => "cuzk_ntt_pass4_dif",
        (false, false, true, false) => "cuzk_ntt_pass4_dif_pre",
        (false, false, false, true) => "cuzk_ntt_pass4_dif_post",
        (false, true, false, false) => "cuzk_ntt_pass4_dif_tw",
        (false, true, true, false) => "cuzk_ntt_pass4_dif_tw_pre",
        (true, false, false, false) => "cuzk_ntt_pass4_dit",
        (true, false, true, false) => "cuzk_ntt_pass4_dit_pre",
        (true, false, false, true) => "cuzk_ntt_pass4_dit_post",
        (true, true, false, false) => "cuzk_ntt_pass4_dit_tw",
        (true, true, true, false) => "cuzk_ntt_pass4_dit_tw_pre",
    })
}

impl PassKernel {
    fn name(self, pass_flags: u32) -> Result<&'static str> {
        match self {
            Self::Radix2 => Ok("cuzk_ntt_pass"),
            Self::Radix4 => specialized_name(pass_flags).ok_or_else(|| {
                invalid(
                    "cuzk_ntt_pass4",
                    format!("no specialized kernel for flags {pass_flags:#x}"),
                )
            }),
        }
    }

    /// (log2 of elements per thread, smallest k).
    fn shape(self) -> (u32, u32) {
        match self {
            Self::Radix2 => (1, 1),
            Self::Radix4 => (2, 2),
        }
    }
}

/// One radix-2^k pass over every polynomial of `data` (`batch` × 2^lg_n elements, in place):
/// bits `[s0, s0 + k)` of the transform, tiles of 2^k rows × 2^lg_c columns (for the pass with
/// s0 + k = lg_n: 2^lg_c consecutive groups), on `kernel`.
/// Asynchronous.
#[allow(clippy::too_many_arguments)]
pub fn pass<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    kernel: PassKernel,
    data: &mut DeviceBuffer<T>,
    tw: &Twiddles<'_, T>,
    lg_n: u32,
    s0: u32,
    k: u32,
    lg_c: u32,
    pass_flags: u32,
) -> Result<()> {
    let name = kernel.name(pass_flags)?;
    check_elem::<T>(name)?;
    let batch = check_batch(name, data, lg_n)?;
    // Polynomials 1 and 2 of the contiguous batch (kernels/ntt/ntt.cuh `poly_base`); addresses
    // only, past the buffer when the batch is shorter (the kernel then never uses them).
    let p = data.device_ptr();
    let (p1, p2) = (p.wrapping_add(32 << lg_n), p.wrapping_add(64 << lg_n));
    let geometry = (lg_n, s0, k, lg_c, pass_flags);
    launch_pass(gpu, stream, kernel, [p, p1, p2], batch, tw, geometry)
}

/// [`pass`] over one to three separate buffers of one polynomial (2^lg_n elements) each, in
/// one launch (grid.y = `polys.len()`): the same pass and flags on each, in place, each result
/// what [`pass`] gives on that buffer alone. Asynchronous.
#[allow(clippy::too_many_arguments)]
pub fn pass_many<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    kernel: PassKernel,
    polys: &mut [&mut DeviceBuffer<T>],
    tw: &Twiddles<'_, T>,
    lg_n: u32,
    s0: u32,
    k: u32,
    lg_c: u32,
    pass_flags: u32,
) -> Result<()> {
    let name = kernel.name(pass_flags)?;
    check_elem::<T>(name)?;
    if polys.is_empty() || polys.len() > 3 {
        return Err(invalid(
            name,
            format!("{} buffers, expected 1 to 3", polys.len()),
        ));
    }
    for p in polys.iter() {
        if check_batch(name, p, lg_n)? != 1 {
            return Err(invalid(
                name,
                format!(
                    "a buffer of {} elements is not one polynomial of 2^{lg_n}",
                    p.len()
                ),
            ));
        }
    }
    let ptr = |i: usize| polys[i.min(polys.len() - 1)].device_ptr();
    let geometry = (lg_n, s0, k, lg_c, pass_flags);
    let batch = polys.len() as u32;
    launch_pass(
        gpu,
        stream,
        kernel,
        [ptr(0), ptr(1), ptr(2)],
        batch,
        tw,
        geometry,
    )
}

/// The launch of [`pass`] and [`pass_many`]: polynomial y < `batch` of the grid starts at
/// `ptrs[y]` for y < 2, at `ptrs[2] + (y - 2) << lg_n` elements from there (`poly_base`); the
/// callers have checked that each lies inside a buffer they hold mutably.
fn launch_pass<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    kernel: PassKernel,
    ptrs: [u64; 3],
    batch: u32,
    tw: &Twiddles<'_, T>,
    (lg_n, s0, k, lg_c, pass_flags): (u32, u32, u32, u32, u32),
) -> Result<()> {
    let name = kernel.name(pass_flags)?;
    let (ept_lg, min_k) = kernel.shape();
    tw.check(name)?;
    let tile_lg = k + lg_c;
    // The store-side twiddle's geometry: a pass of 2^lg_n or less (w_M, M = 2^(tk + tr)), w_2M
    // with the odd bits (a power of W = w_(2^MAX_LG) only for M < 2^MAX_LG).
    let (tk, tr) = flags::tw_fields(pass_flags);
    let odd = u32::from(pass_flags & (flags::F_ODD_ROW | flags::F_ODD_COL) != 0);
    // The folded twiddle (T_HTW): index (3·lg_n + y) << 10 | j needs lg_n < MAX_LG, y < 3,
    // the R = 0 odd-row forward geometry with k ≤ INT_LG.
    let bad_fold = pass_flags & flags::F_TW_FOLD != 0
        && (pass_flags
            & (flags::F_TWIDDLE | flags::F_ODD_ROW | flags::F_ODD_COL | flags::F_TW_INV)
            != flags::F_TWIDDLE | flags::F_ODD_ROW
            || tr != 0
            || tk > layout::INT_LG
            || lg_n >= layout::MAX_LG
            || batch != 3);
    if k < min_k
        || bad_fold
        || tile_lg < ept_lg
        || tile_lg > TILE_LG
        || s0 + k > lg_n
        || (s0 + k < lg_n && s0 + tile_lg > lg_n)
        || tile_lg > lg_n
        || pass_flags & !(flags::F_ALL | flags::TW_FIELDS) != 0
        || (pass_flags & flags::F_TWIDDLE != 0
            && (tk + tr > lg_n || tk + tr + odd > layout::MAX_LG))
    {
        return Err(invalid(
            name,
            format!(
                "bad pass geometry lg_n={lg_n} s0={s0} k={k} lg_c={lg_c} flags={pass_flags:#x}"
            ),
        ));
    }
    let cfg = LaunchConfig {
        grid: (1 << (lg_n - tile_lg), batch, 1),
        block: (1 << (tile_lg - ept_lg), 1, 1),
        shared_bytes: 32 << tile_lg,
    };
    let [p0, p1, p2] = ptrs;
    let (roots, roots_flags) = tw.roots_arg();
    let pass_flags = pass_flags | roots_flags;
    // SAFETY: with the geometry checked above (lg_c ≤ R, or for R = 0 a tile of 2^lg_c whole
    // groups, k + lg_c ≤ lg_n) every block touches only its own tile inside
    // polynomial blockIdx.y < batch, which starts at ptrs[y] (y < 2) or ptrs[2] + (y - 2) <<
    // lg_n: inside the buffer its caller checked and holds mutably (`pass`: the contiguous
    // batch, batch << lg_n == data.len(); `pass_many`: one polynomial per buffer, distinct
    // buffers as they are distinct &mut borrows), and reads `tables` below T_LEN (exponents
    // < 2^ord <= 2^28 (ord = tk + tr, + 1 with the odd flags, checked above) split 14/14,
    // direct index < 2^19 only for powers of w_(2^ord), ord <= 19 (the row factor
    // row << (18 - k) < 2^18 for row < 2^k), scaled HI index
    // gn_off(lg_n) + (i >> 14) < gn_off(lg_n + 1) for i < 2^lg_n, lg_n <= 28, internal index
    // < 512; with TW_FOLD T_HTW + ((3·lg_n + y) << 10 | j),
    // lg_n < MAX_LG, y < 3, j < 2^10, checked above); a roots table of order D (checked:
    // 2^(D-1) elements) only at index i & (2^(D-1) - 1); the buffers stay borrowed mutably for the launch
    // and stream order protects them afterwards.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            name,
            cfg,
            &[
                &p0,
                &p1,
                &p2,
                tw.tables,
                &roots,
                &lg_n,
                &s0,
                &k,
                &lg_c,
                &pass_flags,
            ],
        )
    }
}

/// Bit-reversal permutation of every polynomial of `data`, in place. Asynchronous.
pub fn bit_reverse<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    data: &mut DeviceBuffer<T>,
    lg_n: u32,
) -> Result<()> {
    const K: &str = "cuzk_ntt_bit_reverse";
    check_elem::<T>(K)?;
    let batch = check_batch(K, data, lg_n)?;
    let blocks = ((1usize << lg_n).div_ceil(256)).min(1 << 16) as u32;
    let cfg = LaunchConfig {
        grid: (blocks, batch, 1),
        block: (256, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: indices i and bitrev(i) are below 2^lg_n inside polynomial blockIdx.y < batch.
    unsafe { gpu.launch(stream, MODULE, K, cfg, &[&*data, &lg_n]) }
}

/// [`bit_reverse`] by 32 × 32 tiles staged in shared memory (rows of 1 KiB read and written
/// whole); needs `lg_n >= 10`. Asynchronous.
pub fn bit_reverse_tiled<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    data: &mut DeviceBuffer<T>,
    lg_n: u32,
) -> Result<()> {
    const K: &str = "cuzk_ntt_bit_reverse_tiled";
    check_elem::<T>(K)?;
    let batch = check_batch(K, data, lg_n)?;
    if lg_n < 10 {
        return Err(invalid(
            K,
            format!("2^{lg_n} is below the tiled minimum 2^10"),
        ));
    }
    let cfg = LaunchConfig {
        grid: (1 << (lg_n - 10), batch, 1),
        block: (256, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: block (m, y) touches indices (a << (lg_n-5)) | (m' << 5) | b < 2^lg_n, m' in
    // {m, bitrev(m)} < 2^(lg_n-10), a, b < 32, inside polynomial y < batch; the sets of
    // different blocks are disjoint and each block reads all its elements before writing.
    unsafe { gpu.launch(stream, MODULE, K, cfg, &[&*data, &lg_n]) }
}

/// Checks of the quotient kernels: Fr-sized elements, the table buffer, three buffers of
/// exactly 2^lg_n elements.
fn check_quotient<T: Pod>(
    kernel: &str,
    a: &DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    c: &DeviceBuffer<T>,
    tables: &DeviceBuffer<T>,
    lg_n: u32,
) -> Result<()> {
    check_elem::<T>(kernel)?;
    check_tables(kernel, tables)?;
    if lg_n > layout::MAX_LG || [a.len(), b.len(), c.len()].iter().any(|&l| l != 1 << lg_n) {
        return Err(invalid(
            kernel,
            format!(
                "buffers of {}, {}, {} elements for size 2^{lg_n}",
                a.len(),
                b.len(),
                c.len()
            ),
        ));
    }
    Ok(())
}

/// The H pipeline's quotient written bit-reversed, in place on `a`: `a[bitrev(i)] = (a[i]·b[i]
/// − n·c[i])·K` with `n = tables[T_HN + lg_n]`, `K = tables[T_HK + lg_n]` (inputs n times the
/// coset evaluations; K = 1/(Z·n^3) includes the unscaled back transform's 1/n), or with `fold`
/// `a[i]·b[i] − c[i]` (a and c already times K and n·K: to_coeffs' last store had
/// `flags::F_TW_FOLD`), element-wise (any size; each thread owns a pair (i, bitrev i)).
/// Asynchronous.
#[allow(clippy::too_many_arguments)]
pub fn quotient_bit_reverse<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    a: &mut DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    c: &DeviceBuffer<T>,
    tables: &DeviceBuffer<T>,
    lg_n: u32,
    fold: bool,
) -> Result<()> {
    const K: &str = "cuzk_ntt_quotient_bitrev";
    check_quotient(K, a, b, c, tables, lg_n)?;
    let blocks = ((1usize << lg_n).div_ceil(256)).min(1 << 16) as u32;
    let cfg = LaunchConfig {
        grid: (blocks, 1, 1),
        block: (256, 1, 1),
        shared_bytes: 0,
    };
    let fold = u32::from(fold);
    // SAFETY: indices i and bitrev(i) are below 2^lg_n == len of a, b, c; the pair (i,
    // bitrev i) is read and written by one thread only; tables[T_HN / T_HK + lg_n] < T_LEN.
    unsafe { gpu.launch(stream, MODULE, K, cfg, &[&*a, b, c, tables, &lg_n, &fold]) }
}

/// [`quotient_bit_reverse`] through the 32 × 32 tiles of [`bit_reverse_tiled`] (one memory
/// pass: read a, b, c once, write a once); needs `lg_n >= 10`. Asynchronous.
#[allow(clippy::too_many_arguments)]
pub fn quotient_bit_reverse_tiled<T: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    a: &mut DeviceBuffer<T>,
    b: &DeviceBuffer<T>,
    c: &DeviceBuffer<T>,
    tables: &DeviceBuffer<T>,
    lg_n: u32,
    fold: bool,
) -> Result<()> {
    const K: &str = "cuzk_ntt_quotient_bitrev_tiled";
    check_quotient(K, a, b, c, tables, lg_n)?;
    if lg_n < 10 {
        return Err(invalid(
            K,
            format!("2^{lg_n} is below the tiled minimum 2^10"),
        ));
    }
    let cfg = LaunchConfig {
        grid: (1 << (lg_n - 10), 1, 1),
        block: (256, 1, 1),
        shared_bytes: 0,
    };
    let fold = u32::from(fold);
    // SAFETY: block m touches indices (a << (lg_n-5)) | (m' << 5) | b < 2^lg_n == len of a,
    // b, c, m' in {m, bitrev(m)}; the sets of different blocks are disjoint and each block
    // reads all its elements of a (and b, c, never written) before writing a;
    // tables[T_HN / T_HK + lg_n] < T_LEN.
    unsafe { gpu.launch(stream, MODULE, K, cfg, &[&*a, b, c, tables, &lg_n, &fold]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag set a kernel covers maps to one whose compiled-in code covers it: the
    /// direction matches, and the twiddle / pre / post code is present where the flags ask for
    /// it; the sets no plan makes (both scalings, twiddle with post-scaling) map to none.
    #[test]
    fn specialized_name_covers_the_flags() {
        use flags::*;
        let mut used = std::collections::BTreeSet::new();
        for f in 0..=F_ALL {
            let pre = f & (F_PRE_G | F_PRE_GI | F_PRE_NINV) != 0;
            let post = f & (F_POST_G | F_POST_GI | F_POST_NINV | F_POST_ROW) != 0;
            let Some(name) = specialized_name(f) else {
                assert!(post && (pre || f & F_TWIDDLE != 0), "{f:#x}");
                continue;
            };
            used.insert(name);
            let suffix = name.strip_prefix("cuzk_ntt_pass4_").unwrap();
            let parts: Vec<&str> = suffix.split('_').collect();
            assert_eq!(parts[0] == "dit", f & F_DIT != 0, "{name} {f:#x}");
            assert_eq!(parts.contains(&"tw"), f & F_TWIDDLE != 0, "{name} {f:#x}");
            // The twiddle's geometry fields do not change the choice.
            assert_eq!(specialized_name(f | tw_geometry(9, 17)), Some(name));
            assert_eq!(parts.contains(&"pre"), pre, "{name} {f:#x}");
            assert_eq!(parts.contains(&"post"), post, "{name} {f:#x}");
        }
        // The ten specialized kernels of kernels/ntt/ntt.cu, each built there.
        assert_eq!(used.len(), 10);
        let src = include_str!("../../../kernels/ntt/ntt.cu");
        for name in used {
            assert!(
                src.contains(&format!("CUZK_NTT_PASS4_SPEC({name}, ")),
                "{name}"
            );
        }
        assert_eq!(PassKernel::Radix2.name(0), Ok("cuzk_ntt_pass"));
    }
}
