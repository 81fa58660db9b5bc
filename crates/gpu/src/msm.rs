//! Safe launch wrappers for `kernels/msm.cu` (Pippenger MSM; driven by `cuzk-msm`), plus the
//! two memory helpers chunked MSM needs: scoped asynchronous uploads of host sub-ranges and a
//! two-slot ring of pinned result buffers.
//!
//! Every wrapper checks that each buffer is large enough for what the kernel touches given the
//! other arguments; kernels additionally clamp data-dependent indices (sorted entries, keys),
//! so garbage device contents give wrong sums, never out-of-bounds accesses.

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use cuzk_vram::{DeviceBuffer, MemoryBackend, PinnedBuffer};

use crate::device::{Event, Gpu, Stream};
use crate::error::{GpuError, Result};
use crate::module::{KernelArg, LaunchConfig};

const MODULE: &str = "msm";

/// The curve group an MSM kernel works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    G1,
    G2,
}

impl Curve {
    /// Bytes of one affine point (blst_p1_affine / blst_p2_affine).
    pub const fn affine_bytes(self) -> usize {
        match self {
            Curve::G1 => 96,
            Curve::G2 => 192,
        }
    }
    /// Bytes of one Jacobian point (blst_p1 / blst_p2).
    pub const fn jacobian_bytes(self) -> usize {
        self.affine_bytes() / 2 * 3
    }
    /// u64 words of one device XYZZ point (X, Y, ZZ, ZZZ); XYZZ buffers are `DeviceBuffer<u64>`.
    pub const fn xyzz_words(self) -> usize {
        self.affine_bytes() * 2 / 8
    }
    fn suffix(self) -> &'static str {
        match self {
            Curve::G1 => "g1",
            Curve::G2 => "g2",
        }
    }
    /// Threads per block of the point kernels (their `__launch_bounds__`).
    const fn block(self) -> u32 {
        match self {
            Curve::G1 => 128,
            Curve::G2 => 128,
        }
    }
    /// Threads per SM that `msm_accumulate_*` keeps resident (block × the min-blocks of its
    /// `__launch_bounds__` in kernels/msm.cu): one full wave of equal slices.
    pub const fn resident_threads_per_sm(self) -> usize {
        match self {
            Curve::G1 => 3 * 128,
            Curve::G2 => 2 * 128,
        }
    }
}

/// Which build of `msm_accumulate_*` runs (kernels/msm.cu). Only G1 has a variant; for G2
/// every choice is the regular kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Accumulate {
    /// `msm_accumulate_g1`: 3 blocks of 128 per SM at 168 registers.
    Regular,
    /// `msm_accumulate_g1_occ4`: 4 blocks of 128 per SM at 128 registers (small spill); the
    /// default from H200 run 4 (G1 2^24 135.0 vs 141.7 ms, 2^26 495 vs 513 ms) to run 10.
    Occupancy4,
    /// `msm_accumulate_g1_pair`: the mixed addition as five out-of-line calls of two
    /// interleaved Fp products (small code, two multiplications in flight); 4 blocks of 128
    /// per SM. The default since H200 run 10 (accumulation at 2^24 94.3 vs 97.2 ms, at 2^26
    /// 372.4 vs 397.4 ms).
    #[default]
    Paired,
}

impl Accumulate {
    /// Every variant, for tests, benches and the scratch bound.
    pub const ALL: [Self; 3] = [Self::Regular, Self::Occupancy4, Self::Paired];

    /// Parses `regular` / `occ4` / `pair` (the `CUZK_MSM_ACCUMULATE` values).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "regular" => Some(Self::Regular),
            "occ4" => Some(Self::Occupancy4),
            "pair" => Some(Self::Paired),
            _ => None,
        }
    }

    /// The `CUZK_MSM_ACCUMULATE` value naming this variant.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Regular => "regular",
            Self::Occupancy4 => "occ4",
            Self::Paired => "pair",
        }
    }
    fn effective(self, curve: Curve) -> Self {
        match curve {
            Curve::G1 => self,
            Curve::G2 => Self::Regular,
        }
    }
    /// Threads per SM the kernel keeps resident (one full wave of equal slices).
    pub const fn resident_threads_per_sm(self, curve: Curve) -> usize {
        match (curve, self) {
            (Curve::G1, Self::Occupancy4 | Self::Paired) => 4 * 128,
            _ => curve.resident_threads_per_sm(),
        }
    }
    fn kernel(self, curve: Curve) -> String {
        match self.effective(curve) {
            Self::Occupancy4 => "msm_accumulate_g1_occ4".into(),
            Self::Paired => "msm_accumulate_g1_pair".into(),
            Self::Regular => format!("msm_accumulate_{}", curve.suffix()),
        }
    }
}

/// Bytes of a scalar (Fr: 8 × u32).
pub const SCALAR_BYTES: usize = 32;
/// Most entries a [`scan`] accepts.
pub const MAX_SCAN_LEN: usize = 1 << 26;

fn invalid(kernel: &str, reason: String) -> GpuError {
    GpuError::InvalidLaunch {
        kernel: format!("{MODULE}::{kernel}"),
        reason,
    }
}

fn u32_of(kernel: &str, what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| invalid(kernel, format!("{what} = {v} does not fit in u32")))
}

fn need(kernel: &str, what: &str, have: usize, want: usize) -> Result<()> {
    if have < want {
        return Err(invalid(
            kernel,
            format!("{what} holds {have} elements, needs {want}"),
        ));
    }
    Ok(())
}

fn elem<T>(kernel: &str, what: &str, bytes: usize) -> Result<()> {
    if size_of::<T>() != bytes {
        return Err(invalid(
            kernel,
            format!(
                "{what} elements are {} bytes, expected {bytes}",
                size_of::<T>()
            ),
        ));
    }
    Ok(())
}

fn xyzz_len(
    kernel: &str,
    what: &str,
    curve: Curve,
    buf: &DeviceBuffer<u64>,
    points: usize,
) -> Result<()> {
    need(kernel, what, buf.len() / curve.xyzz_words(), points)
}

/// Grid for a grid-stride kernel: enough blocks to cover `n`, capped (the loop does the rest).
fn stride_cfg(n: usize, block: u32) -> Result<LaunchConfig> {
    LaunchConfig::for_elements(n.min(1 << 26), block)
}

/// Which points are the identity: `bits[i / 32]` bit `i % 32` for `points[i]`, `i < n`
/// (made once per resident point set; [`prepare`] then treats their scalars as zero; with
/// precomputed copies, copy 0's bits serve every copy, see [`precompute_copies`]).
/// Asynchronous.
pub fn identity_bits<P: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    points: &DeviceBuffer<P>,
    n: usize,
    bits: &mut DeviceBuffer<u32>,
) -> Result<()> {
    let k = format!("msm_identity_bits_{}", curve.suffix());
    elem::<P>(&k, "points", curve.affine_bytes())?;
    need(&k, "points", points.len(), n)?;
    need(&k, "bits", bits.len(), n.div_ceil(32))?;
    if n == 0 {
        return Ok(());
    }
    // The kernel rounds n up to a multiple of 32 (whole warps); that must fit in u32 too.
    u32_of(&k, "n rounded up to 32", n.next_multiple_of(32))?;
    let n32 = n as u32;
    // SAFETY: reads points[< n]; the lane 0 of each warp-round writes bits[i / 32] for its
    // i < n rounded up to 32, i.e. below ceil(n / 32) <= bits.len().
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            stride_cfg(n, 256)?,
            &[points, &n32, &*bits],
        )
    }
}

/// The identity mask of [`identity_bits`] for the scalars of a [`prepare`] call: scalar `i`
/// pairs with bit `at + i`.
#[derive(Debug, Clone, Copy)]
pub struct Skip<'a> {
    pub bits: &'a DeviceBuffer<u32>,
    pub at: usize,
}

/// (pointer, offset) kernel arguments of an optional [`Skip`] covering `n` scalars.
fn skip_args(kernel: &str, skip: Option<Skip<'_>>, n: usize) -> Result<(u64, u32)> {
    let Some(sk) = skip else {
        return Ok((0, 0));
    };
    let end = sk
        .at
        .checked_add(n)
        .ok_or_else(|| invalid(kernel, "skip range overflows".into()))?;
    need(
        kernel,
        "skip bits (× 32)",
        sk.bits.len().saturating_mul(32),
        end,
    )?;
    Ok((sk.bits.device_ptr(), u32_of(kernel, "skip offset", sk.at)?))
}

/// Scalars Montgomery → canonical, `dst[0..n) = canon(src[src_start..src_start+n))` (0 where
/// `skip` marks the point as the identity), and `counters[0] += #scalars neither 0 nor 1`,
/// `counters[1] += #ones`.
#[allow(clippy::too_many_arguments)]
pub fn prepare<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    src: &DeviceBuffer<S>,
    src_start: usize,
    dst: &mut DeviceBuffer<S>,
    n: usize,
    counters: &mut DeviceBuffer<u32>,
    skip: Option<Skip<'_>>,
) -> Result<()> {
    let end = src_start
        .checked_add(n)
        .ok_or_else(|| invalid(PREPARE, "range overflows".into()))?;
    need(PREPARE, "src", src.len(), end)?;
    let src_ptr = src.device_ptr() + (src_start * SCALAR_BYTES) as u64;
    launch_prepare(gpu, stream, src_ptr, dst, "dst", n, counters, skip)
}

/// As [`prepare`] with the scalars converted in place.
pub fn prepare_in_place<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    scalars: &mut DeviceBuffer<S>,
    n: usize,
    counters: &mut DeviceBuffer<u32>,
    skip: Option<Skip<'_>>,
) -> Result<()> {
    let src_ptr = scalars.device_ptr();
    launch_prepare(gpu, stream, src_ptr, scalars, "scalars", n, counters, skip)
}

const PREPARE: &str = "msm_prepare";

/// `msm_prepare` from `src_ptr` (n scalars the caller checked, or `dst` itself) into `dst`.
#[allow(clippy::too_many_arguments)]
fn launch_prepare<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    src_ptr: u64,
    dst: &mut DeviceBuffer<S>,
    dst_name: &str,
    n: usize,
    counters: &mut DeviceBuffer<u32>,
    skip: Option<Skip<'_>>,
) -> Result<()> {
    elem::<S>(PREPARE, "scalars", SCALAR_BYTES)?;
    need(PREPARE, dst_name, dst.len(), n)?;
    need(PREPARE, "counters", counters.len(), 2)?;
    if n == 0 {
        return Ok(());
    }
    let (skip_ptr, skip_at) = skip_args(PREPARE, skip, n)?;
    let n32 = u32_of(PREPARE, "n", n)?;
    // SAFETY: reads n scalars at src_ptr (a range of a live buffer the caller checked, or dst
    // itself: each thread reads element i before it writes it), writes dst[0..n) and
    // counters[0..2), reads skip words below ceil((skip_at + n) / 32) when skip_ptr != 0;
    // lengths checked.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            PREPARE,
            stride_cfg(n, 256)?,
            &[&src_ptr, &*dst, &n32, &*counters, &skip_ptr, &skip_at],
        )
    }
}

/// The digit → (bucket key, point index) mapping of the sort kernels (`fold_t` in
/// kernels/msm/sort.cuh): `nwin` signed digits of `c` bits per scalar; the digit of window w
/// of scalar i goes to bucket set `w mod sets`, key `(w mod sets) · 2^(c−1) + |digit| − 1`, and
/// to point `i + stride · (w / sets)`. Unfolded ([`Self::unfolded`]): one set per window, point
/// i. Folded ([`Self::folded`], precomputed copies): copy j of the points, at `j · stride`,
/// holds `[2^(c · sets · j)] P_i`, so the windows of a set sum to the right multiple and only
/// `sets · 2^(c−1)` buckets remain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Windows {
    pub c: u32,
    pub nwin: u32,
    pub sets: u32,
    pub stride: usize,
}

impl Windows {
    /// Windows of `c` bits over a 256-bit scalar, one bucket set each.
    pub const fn unfolded(c: u32) -> Self {
        let nwin = 256u32.div_ceil(c);
        Self {
            c,
            nwin,
            sets: nwin,
            stride: 0,
        }
    }

    /// Over `copies` (>= 1) precomputed copies of `stride` points: ⌈nwin / copies⌉ sets (a
    /// request beyond what that many sets need uses fewer copies, see [`Self::copies`]);
    /// unfolded if that is one set per window.
    pub fn folded(c: u32, copies: usize, stride: usize) -> Self {
        let u = Self::unfolded(c);
        let sets = u.nwin.div_ceil(copies.clamp(1, u.nwin as usize) as u32);
        if sets == u.nwin {
            return u;
        }
        Self { sets, stride, ..u }
    }

    /// Point copies the windows use: ⌈nwin / sets⌉ (1 unfolded).
    pub const fn copies(&self) -> usize {
        self.nwin.div_ceil(self.sets) as usize
    }

    /// Buckets: `sets · 2^(c−1)`.
    pub const fn nkeys(&self) -> usize {
        (self.sets as usize) << (self.c - 1)
    }

    /// Bound of the point indices of `n` scalars' entries: `n + stride · (copies − 1)`.
    pub const fn index_bound(&self, n: usize) -> usize {
        n + self.stride * (self.copies() - 1)
    }

    /// Whether the entries of `n` scalars can carry their point indices: below 2^31, the sign
    /// bit above them.
    pub const fn indices_fit(&self, n: usize) -> bool {
        self.index_bound(n) <= 1 << 31
    }

    /// Keys of the top bucket set that canonical scalars reach: [`top_window_keys`] when
    /// unfolded; all of them when folded (the top window shares its set with a lower window).
    pub fn top_set_keys(&self) -> usize {
        if self.sets == self.nwin {
            top_window_keys(self.c)
        } else {
            1 << (self.c - 1)
        }
    }

    /// Doublings from one copy to the next: `c · sets`.
    pub const fn copy_doublings(&self) -> u32 {
        self.c * self.sets
    }
}

/// Checks `win` and `n` scalars' indices (< 2^31: a sign bit above them); returns the key count.
fn check_windows(kernel: &str, win: &Windows, n: usize) -> Result<usize> {
    let Windows { c, nwin, sets, .. } = *win;
    if !(2..=24).contains(&c)
        || nwin == 0
        || c as u64 * nwin as u64 > 512
        || sets == 0
        || sets > nwin
    {
        return Err(invalid(
            kernel,
            format!("window bits {c} × {nwin} windows in {sets} sets out of range"),
        ));
    }
    if !win.indices_fit(n) {
        return Err(invalid(
            kernel,
            format!("point indices up to {} exceed 2^31", win.index_bound(n)),
        ));
    }
    Ok(win.nkeys())
}

/// `counts[key] += 1` per non-zero signed digit (key: see [`Windows`]) of each canonical
/// general scalar in `canon[0..n)`. `counts` must be zeroed first.
pub fn histogram<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    canon: &DeviceBuffer<S>,
    n: usize,
    win: &Windows,
    counts: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "msm_histogram";
    elem::<S>(K, "scalars", SCALAR_BYTES)?;
    let nkeys = check_windows(K, win, n)?;
    need(K, "canon", canon.len(), n)?;
    need(K, "counts", counts.len(), nkeys)?;
    if n == 0 {
        return Ok(());
    }
    let (n32, st) = (u32_of(K, "n", n)?, u32_of(K, "stride", win.stride)?);
    // SAFETY: reads canon[0..n), increments counts[key] with key < nkeys (checked above).
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            K,
            stride_cfg(n, 256)?,
            &[canon, &n32, &win.c, &win.nwin, &win.sets, &st, &*counts],
        )
    }
}

/// Counts per tile of the device scan (`SCAN_TILE` in kernels/msm/scan.cuh).
const SCAN_TILE: usize = 512;
/// Threads of the scan's middle launch (`SCAN_TOP_THREADS`).
const SCAN_TOP_THREADS: u32 = 1024;

fn check_scan(
    k: &str,
    counts: &DeviceBuffer<u32>,
    len: usize,
    offsets: &DeviceBuffer<u32>,
    cursors: &DeviceBuffer<u32>,
) -> Result<u32> {
    need(k, "counts", counts.len(), len)?;
    need(k, "offsets", offsets.len(), len + 1)?;
    need(k, "cursors", cursors.len(), len)?;
    if len > MAX_SCAN_LEN {
        return Err(invalid(k, format!("{len} keys exceed {MAX_SCAN_LEN}")));
    }
    u32_of(k, "len", len)
}

/// Exclusive prefix sum: `offsets[0..=len]` (`offsets[len]` = total) and `cursors[0..len)`
/// (the same values). Device-wide reduce-then-scan in three launches over tiles of 512 counts
/// (kernels/msm/scan.cuh; the first cursor of each tile holds its partial sum in between).
/// Nothing past `offsets[len]` / `cursors[len - 1]` is written.
pub fn scan(
    gpu: &Gpu,
    stream: &Stream,
    counts: &DeviceBuffer<u32>,
    len: usize,
    offsets: &mut DeviceBuffer<u32>,
    cursors: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "msm_scan_tiles";
    let len32 = check_scan(K, counts, len, offsets, cursors)?;
    let tiles = u32_of(K, "tiles", len.div_ceil(SCAN_TILE))?;
    let tile_cfg = LaunchConfig {
        grid: (tiles, 1, 1),
        block: (SCAN_TILE as u32, 1, 1),
        shared_bytes: 0,
    };
    if tiles > 0 {
        // SAFETY: block b reads counts[b*512 ..< len] and writes cursors[b*512] (< len).
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                "msm_scan_tile_sums",
                tile_cfg,
                &[counts, &len32, &*cursors],
            )?
        }
    }
    let top = LaunchConfig {
        grid: (1, 1, 1),
        block: (SCAN_TOP_THREADS, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: one block rewrites cursors[b*512] (b < tiles, so < len) and writes offsets[len].
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            "msm_scan_tile_bases",
            top,
            &[&len32, &*offsets, &*cursors],
        )?
    }
    if tiles > 0 {
        // SAFETY: block b reads counts and cursors[b*512], writes offsets/cursors[b*512 ..< len].
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                K,
                tile_cfg,
                &[counts, &len32, &*offsets, &*cursors],
            )?
        }
    }
    Ok(())
}

/// Counting-sort scatter: `sorted[cursors[key]++] = index | sign << 31` (key and index: see
/// [`Windows`]; writes past `sorted.len()` are dropped; size it for every entry).
pub fn scatter<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    canon: &DeviceBuffer<S>,
    n: usize,
    win: &Windows,
    cursors: &mut DeviceBuffer<u32>,
    sorted: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "msm_scatter";
    elem::<S>(K, "scalars", SCALAR_BYTES)?;
    let nkeys = check_windows(K, win, n)?;
    need(K, "canon", canon.len(), n)?;
    need(K, "cursors", cursors.len(), nkeys)?;
    if n == 0 {
        return Ok(());
    }
    let (n32, st) = (u32_of(K, "n", n)?, u32_of(K, "stride", win.stride)?);
    let cap = u32_of(K, "sorted.len()", sorted.len())?;
    // SAFETY: reads canon[0..n), atomics on cursors[key < nkeys], writes sorted[pos < cap].
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            K,
            stride_cfg(n, 256)?,
            &[
                canon, &n32, &win.c, &win.nwin, &win.sets, &st, &*cursors, &*sorted, &cap,
            ],
        )
    }
}

/// Entries a bin may hold to be sorted in shared memory (`SORT_TILE`, kernels/msm/sort.cuh);
/// larger bins take the per-key atomic path of `msm_sort_oversize`.
pub const SORT_TILE: usize = 8192;
/// Largest fine-bit count of [`bin_sort`] (`SORT_MAX_FINE_BITS`).
pub const SORT_MAX_FINE_BITS: u32 = 10;
/// Threads of `msm_sort_fine` (`SORT_FINE_THREADS`).
const SORT_FINE_THREADS: u32 = 256;
/// Most blocks of `msm_sort_fine` (each strides over the bins).
const SORT_FINE_MAX_BLOCKS: usize = 1 << 20;

/// 16-bit shared counters per block of `msm_sort_bin_histogram_smem` (112 KiB: two blocks of
/// [`SORT_HIST_THREADS`] fit an SM).
pub const SORT_HIST_COUNTERS: usize = 56 * 1024;
/// Threads of `msm_sort_bin_histogram_smem` (its launch bounds: 512 threads, 2 blocks per SM).
const SORT_HIST_THREADS: u32 = 512;
/// Most scalars a block counts between flushes (a 16-bit counter takes one entry per scalar).
const SORT_HIST_CHUNK: usize = 65535;
/// From this n on the bin histogram counts in shared memory (where its groups fit): ~nbins
/// global atomics per block instead of one per entry. (The scatter counted and reserved the
/// same way measured 13.6 ms against 5.8 at 2^24, H200 run 22, and was removed.)
pub const SORT_HIST_SMEM_MIN: usize = 1 << 22;
/// Most window groups for the shared-memory histogram: each group reads every scalar again
/// (H200 run 21: 2^24 in one group 0.68 ms against 2.67 with global atomics; 2^26 in five
/// groups 10.9 ms against 8.8, ~2.2 ms per group).
pub const SORT_HIST_MAX_GROUPS: u32 = 2;

/// Bucket-set groups of the shared-memory bin histogram: `(sets per group, groups, shared
/// counters per block)`, every group's bins within [`SORT_HIST_COUNTERS`] (the top set's up
/// to the keys canonical scalars reach, [`Windows::top_set_keys`]); `None` if one set's bins do
/// not fit.
pub fn hist_groups(win: &Windows, fine_bits: u32, top_fine_bits: u32) -> Option<(u32, u32, usize)> {
    let sets = win.sets.max(1);
    (1..=sets)
        .rev()
        .map(|spg| (spg, hist_counters(win, fine_bits, top_fine_bits, spg)))
        .find(|&(_, cnt)| cnt <= SORT_HIST_COUNTERS)
        .map(|(spg, cnt)| (spg, sets.div_ceil(spg), cnt.max(1)))
}

/// Shared counters the largest group of `spg` sets needs (see [`hist_groups`]).
fn hist_counters(win: &Windows, fine_bits: u32, top_fine_bits: u32, spg: u32) -> usize {
    let (b, sets) = (win.c.saturating_sub(1), win.sets);
    let per_set = 1usize << (b - fine_bits.min(b));
    let top = win.top_set_keys().div_ceil(1 << top_fine_bits.min(b));
    (0..sets)
        .step_by(spg.max(1) as usize)
        .map(|s0| {
            let s1 = (s0 + spg).min(sets);
            let low = (s1 - s0 - u32::from(s1 == sets)) as usize;
            low * per_set + if s1 == sets { top } else { 0 }
        })
        .max()
        .unwrap_or(0)
}

/// Bits of a point index below `n` (entries carry the fine key above them in [`bin_sort`]).
pub fn index_bits(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

/// Largest fine-bit count [`bin_sort`] accepts for point indices below `index_bound`
/// ([`Windows::index_bound`]) and window bits `c`.
pub fn max_fine_bits(index_bound: usize, c: u32) -> u32 {
    c.saturating_sub(1)
        .min(SORT_MAX_FINE_BITS)
        .min(31u32.saturating_sub(index_bits(index_bound)))
}

/// Bins of the binned sort: the bucket sets below the top one in bins of 2^fine_bits keys,
/// the top set in bins of 2^top_fine_bits keys.
pub fn sort_bins(c: u32, sets: u32, fine_bits: u32, top_fine_bits: u32) -> usize {
    let b = c - 1;
    ((sets.max(1) as usize - 1) << (b - fine_bits.min(b))) + (1usize << (b - top_fine_bits.min(b)))
}

/// Keys of the top window (of `c`-bit windows) that canonical scalars (< r) can reach: the top
/// digit is at most `(r - 1) >> (c · (nwin − 1))` plus a carry (never above 2^(c-1)).
pub fn top_window_keys(c: u32) -> usize {
    // the top 64 bits of r - 1 (bits 192..256): every top window starts at bit >= 192
    const R_TOP: u64 = 0x73ed_a753_299d_7d48;
    let nwin = 256u32.div_ceil(c);
    let start = c * (nwin - 1);
    let top = if start >= 256 {
        0
    } else {
        R_TOP >> (start - 192)
    };
    (top as usize + 1).min(1 << (c - 1))
}

/// Binned counting sort (kernels/msm/sort.cuh), the same result as [`histogram`] + [`scan`] +
/// [`scatter`]: `offsets[0..=nkeys]` = exclusive prefix sums of the per-key entry counts and
/// `sorted[offsets[k]..offsets[k+1])` = the entries of key k (any order; keys and indices: see
/// [`Windows`]). Bins of 2^fine_bits keys (2^top_fine_bits in the top set, whose digit range is
/// smaller when unfolded): a histogram of bins,
/// their scan (`bins[0..=nbins]`, `bins[nbins + 1]` is a flag), a
/// scatter into the bins, a shared-memory sort per bin that writes `offsets`, and a per-key
/// atomic pass for bins of more than [`SORT_TILE`] entries. `counts` (>= nbins; zeroed here)
/// and `cursors` (>= nkeys) are scratch. `phase(i)` runs after launch group i = 1 (histogram),
/// 2 (scan), 3 (scatter) for profiling marks.
#[allow(clippy::too_many_arguments)]
pub fn bin_sort<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    canon: &DeviceBuffer<S>,
    n: usize,
    win: &Windows,
    fine_bits: u32,
    top_fine_bits: u32,
    counts: &mut DeviceBuffer<u32>,
    bins: &mut DeviceBuffer<u32>,
    cursors: &mut DeviceBuffer<u32>,
    sorted: &mut DeviceBuffer<u32>,
    offsets: &mut DeviceBuffer<u32>,
    mut phase: impl FnMut(u32) -> Result<()>,
) -> Result<()> {
    const K: &str = "msm_sort_bin_scatter";
    elem::<S>(K, "scalars", SCALAR_BYTES)?;
    let nkeys = check_windows(K, win, n)?;
    let (c, nwin, sets, bound) = (win.c, win.nwin, win.sets, win.index_bound(n));
    if fine_bits > max_fine_bits(bound, c) || top_fine_bits > fine_bits {
        return Err(invalid(
            K,
            format!(
                "fine bits {fine_bits} (top {top_fine_bits}): at most {} (indices < {bound}, c = {c}), top <= fine",
                max_fine_bits(bound, c)
            ),
        ));
    }
    let nbins = sort_bins(c, sets, fine_bits, top_fine_bits);
    need(K, "canon", canon.len(), n)?;
    need(K, "counts", counts.len(), nbins)?;
    need(K, "bins", bins.len(), nbins + 2)?;
    need(K, "cursors", cursors.len(), nkeys)?;
    need(K, "offsets", offsets.len(), nkeys + 1)?;
    let (n32, nb32, f32_, ft32, ib32, st) = (
        u32_of(K, "n", n)?,
        u32_of(K, "nbins", nbins)?,
        fine_bits,
        top_fine_bits,
        index_bits(bound),
        u32_of(K, "stride", win.stride)?,
    );
    let cap = u32_of(K, "sorted.len()", sorted.len())?;
    let flag_ptr = bins.device_ptr() + (4 * (nbins + 1)) as u64;
    counts.fill_bytes_async(0, stream.cuda())?;
    let smem_groups = (n >= SORT_HIST_SMEM_MIN)
        .then(|| hist_groups(win, fine_bits, top_fine_bits))
        .flatten()
        .filter(|&(_, groups, _)| groups <= SORT_HIST_MAX_GROUPS);
    let max_shared = gpu.info().max_shared_per_block as usize;
    if let Some((spg, groups, ncnt)) = smem_groups.filter(|g| g.2.div_ceil(2) * 4 <= max_shared) {
        let sm = gpu.info().sm_count.max(1);
        let blocks = (2 * sm).div_ceil(groups).max(1);
        // a 16-bit counter takes at most one entry per scalar and copy
        let chunk = n
            .div_ceil(blocks as usize)
            .clamp(1, SORT_HIST_CHUNK / win.copies());
        let cfg = LaunchConfig {
            grid: (blocks, groups, 1),
            block: (SORT_HIST_THREADS, 1, 1),
            shared_bytes: u32_of(K, "shared bytes", ncnt.div_ceil(2) * 4)?,
        };
        let (ncnt32, chunk32) = (u32_of(K, "counters", ncnt)?, u32_of(K, "chunk", chunk)?);
        // SAFETY: reads canon[0..n); shared counters: ceil(ncnt / 2) words, indices checked
        // against ncnt; atomics on counts[bin < nbins] (the groups' bins tile the nbins bins);
        // writes the flag word (inside bins: len checked).
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                "msm_sort_bin_histogram_smem",
                cfg,
                &[
                    canon, &n32, &c, &nwin, &sets, &f32_, &ft32, &spg, &ncnt32, &chunk32, &*counts,
                    &flag_ptr,
                ],
            )?
        }
    } else {
        // SAFETY: reads canon[0..n), atomics on counts[bin < nbins] (the bins tile the nkeys
        // keys), writes bins[nbins + 1] (the flag word, inside bins: len checked).
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                "msm_sort_bin_histogram",
                stride_cfg(n, 256)?,
                &[
                    canon, &n32, &c, &nwin, &sets, &f32_, &ft32, &*counts, &flag_ptr,
                ],
            )?
        }
    }
    phase(1)?;
    // bins[0..=nbins] = exclusive prefix of counts; cursors[0..nbins) the same (bin cursors)
    scan(gpu, stream, counts, nbins, bins, cursors)?;
    phase(2)?;
    // SAFETY: reads canon[0..n), atomics on cursors[bin < nbins], writes sorted[pos < cap].
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            K,
            stride_cfg(n, 256)?,
            &[
                canon, &n32, &c, &nwin, &sets, &st, &f32_, &ft32, &ib32, &*cursors, &*sorted, &cap,
            ],
        )?
    }
    phase(3)?;
    let fine_cfg = LaunchConfig {
        grid: (
            u32_of(K, "blocks", nbins.clamp(1, SORT_FINE_MAX_BLOCKS))?,
            1,
            1,
        ),
        block: (SORT_FINE_THREADS, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: reads bins[0..=nbins], reads/writes sorted inside [bins[b], bins[b+1]) clamped to
    // cap, writes offsets[0..=nkeys] (the bins' keys tile 0..nkeys), cursors[< nkeys] and the
    // flag word.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            "msm_sort_fine",
            fine_cfg,
            &[
                &*bins, &nb32, &f32_, &ft32, &ib32, &c, &sets, &*sorted, &cap, &*offsets,
                &*cursors, &flag_ptr,
            ],
        )?
    }
    // SAFETY: reads canon[0..n), counts[bin < nbins] and the flag word; atomics on
    // cursors[key < nkeys]; writes sorted[pos < cap].
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            "msm_sort_oversize",
            stride_cfg(n, 256)?,
            &[
                canon, &n32, &c, &nwin, &sets, &st, &f32_, &ft32, &*counts, &flag_ptr, &*cursors,
                &*sorted, &cap,
            ],
        )
    }
}

/// Level 0 of the bucket accumulation: `nthreads` equal slices of the `offsets[nkeys]` sorted
/// entries; writes `2 · nthreads` partials and the buckets of runs inside a slice.
/// `buckets` holds `nkeys + 1` XYZZ points (the last is a dump slot); the buckets of keys with
/// entries are written once (here or by the last [`merge`] level), the others are left as
/// they were ([`bucket_reduce`] skips them); `variant` picks the G1 kernel build.
#[allow(clippy::too_many_arguments)]
pub fn accumulate<P: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    variant: Accumulate,
    points: &DeviceBuffer<P>,
    npoints: usize,
    sorted: &DeviceBuffer<u32>,
    offsets: &DeviceBuffer<u32>,
    nkeys: usize,
    nthreads: usize,
    pkeys: &mut DeviceBuffer<u32>,
    ppts: &mut DeviceBuffer<u64>,
    buckets: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let k = variant.kernel(curve);
    elem::<P>(&k, "points", curve.affine_bytes())?;
    need(&k, "points", points.len(), npoints)?;
    need(&k, "offsets", offsets.len(), nkeys + 1)?;
    need(&k, "pkeys", pkeys.len(), 2 * nthreads)?;
    xyzz_len(&k, "ppts", curve, ppts, 2 * nthreads)?;
    xyzz_len(&k, "buckets", curve, buckets, nkeys + 1)?;
    if nthreads == 0 {
        return Err(invalid(&k, "no threads".into()));
    }
    let (np, cap, nk, nt) = (
        u32_of(&k, "npoints", npoints)?,
        u32_of(&k, "sorted.len()", sorted.len())?,
        u32_of(&k, "nkeys", nkeys)?,
        u32_of(&k, "nthreads", nthreads)?,
    );
    let cfg = LaunchConfig::for_elements(nthreads, curve.block())?;
    let args: [&dyn KernelArg; 10] = [
        points, &np, sorted, &cap, offsets, &nk, &nt, &*pkeys, &*ppts, &*buckets,
    ];
    // SAFETY: thread t < nthreads reads sorted[< min(offsets[nkeys], cap)], points[< npoints],
    // offsets[0..=nkeys]; writes pkeys/ppts[2t, 2t+1] and buckets[<= nkeys] (keys clamped).
    unsafe { gpu.launch(stream, MODULE, &k, cfg, &args) }
}

/// Level ≥ 1: `ceil(count / fan_in)` threads each reduce `fan_in` key-sorted partials, writing
/// 2 partials per thread, or (with `final_level`, one thread) every run to its bucket.
#[allow(clippy::too_many_arguments)]
pub fn merge(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    in_keys: &DeviceBuffer<u32>,
    in_pts: &DeviceBuffer<u64>,
    count: usize,
    fan_in: usize,
    out_keys: &mut DeviceBuffer<u32>,
    out_pts: &mut DeviceBuffer<u64>,
    buckets: &mut DeviceBuffer<u64>,
    nkeys: usize,
    final_level: bool,
) -> Result<()> {
    let k = format!("msm_merge_{}", curve.suffix());
    if count == 0 || fan_in == 0 {
        return Err(invalid(&k, "empty merge".into()));
    }
    let threads = count.div_ceil(fan_in);
    if final_level && threads != 1 {
        return Err(invalid(&k, "the final level must be one thread".into()));
    }
    need(&k, "in_keys", in_keys.len(), count)?;
    xyzz_len(&k, "in_pts", curve, in_pts, count)?;
    if !final_level {
        need(&k, "out_keys", out_keys.len(), 2 * threads)?;
        xyzz_len(&k, "out_pts", curve, out_pts, 2 * threads)?;
    }
    xyzz_len(&k, "buckets", curve, buckets, nkeys + 1)?;
    let (c32, f32_, nk, fl) = (
        u32_of(&k, "count", count)?,
        u32_of(&k, "fan_in", fan_in)?,
        u32_of(&k, "nkeys", nkeys)?,
        final_level as u32,
    );
    let cfg = LaunchConfig::for_elements(threads, curve.block())?;
    let args: [&dyn KernelArg; 9] = [
        in_keys, in_pts, &c32, &f32_, &*out_keys, &*out_pts, &*buckets, &nk, &fl,
    ];
    // SAFETY: thread t reads in[t*fan_in ..< count], writes out[2t, 2t+1] (not at the final
    // level) and buckets[<= nkeys] (keys clamped in the kernel).
    unsafe { gpu.launch(stream, MODULE, &k, cfg, &args) }
}

/// Bucket reduction: thread (w, g) of `nwin · G`, `G = ⌈b / l⌉`, writes
/// `out[w·G + g] = Σ_{j < min(l, b − g·l)} (g·l + j + 1) · buckets[w·b + g·l + j]`.
#[allow(clippy::too_many_arguments)]
pub fn bucket_reduce(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    buckets: &DeviceBuffer<u64>,
    offsets: &DeviceBuffer<u32>,
    b: usize,
    nwin: usize,
    l: usize,
    out: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let k = format!("msm_bucket_reduce_{}", curve.suffix());
    if l == 0 || l > b {
        return Err(invalid(
            &k,
            format!("group size {l} is not in 1..={b} (the buckets per window)"),
        ));
    }
    let threads = nwin * b.div_ceil(l);
    xyzz_len(&k, "buckets", curve, buckets, nwin * b)?;
    need(&k, "offsets", offsets.len(), nwin * b + 1)?;
    xyzz_len(&k, "out", curve, out, threads)?;
    let (b32, w32, l32) = (
        u32_of(&k, "b", b)?,
        u32_of(&k, "nwin", nwin)?,
        u32_of(&k, "l", l)?,
    );
    let cfg = LaunchConfig::for_elements(threads, curve.block())?;
    // SAFETY: reads buckets[0..nwin*b) (where offsets say the key has entries) and
    // offsets[0..=nwin*b), writes out[0..threads).
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            cfg,
            &[buckets, offsets, &b32, &w32, &l32, &*out],
        )
    }
}

/// One tree-sum step in each of `nseg` segments `pts[s·stride ..]` of `count` points: the
/// first `count − count/2` now hold the sums. Repeat until `count == 1`.
pub fn sum_halves(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    pts: &mut DeviceBuffer<u64>,
    stride: usize,
    nseg: usize,
    count: usize,
) -> Result<()> {
    let k = format!("msm_sum_halves_{}", curve.suffix());
    if count > stride || nseg == 0 {
        return Err(invalid(
            &k,
            format!("count {count} > stride {stride} or no segment"),
        ));
    }
    xyzz_len(&k, "pts", curve, pts, (nseg - 1) * stride + count)?;
    let work = nseg * (count / 2);
    if work == 0 {
        return Ok(());
    }
    let (s32, n32, c32) = (
        u32_of(&k, "stride", stride)?,
        u32_of(&k, "nseg", nseg)?,
        u32_of(&k, "count", count)?,
    );
    // SAFETY: touches pts[s*stride + j], j < count, s < nseg.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            stride_cfg(work, curve.block())?,
            &[&*pts, &s32, &n32, &c32],
        )
    }
}

/// `out[t] = Σ points[i]` over `i ≡ t (mod nthreads)`, `i < n`, with canonical scalar one.
#[allow(clippy::too_many_arguments)]
pub fn ones<P: Pod, S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    points: &DeviceBuffer<P>,
    canon: &DeviceBuffer<S>,
    n: usize,
    nthreads: usize,
    out: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let k = format!("msm_ones_{}", curve.suffix());
    elem::<P>(&k, "points", curve.affine_bytes())?;
    elem::<S>(&k, "scalars", SCALAR_BYTES)?;
    need(&k, "points", points.len(), n)?;
    need(&k, "canon", canon.len(), n)?;
    xyzz_len(&k, "out", curve, out, nthreads)?;
    if nthreads == 0 {
        return Err(invalid(&k, "no threads".into()));
    }
    let (n32, t32) = (u32_of(&k, "n", n)?, u32_of(&k, "nthreads", nthreads)?);
    let cfg = LaunchConfig::for_elements(nthreads, curve.block())?;
    // SAFETY: reads points/canon[0..n), writes out[0..nthreads).
    unsafe { gpu.launch(stream, MODULE, &k, cfg, &[points, canon, &n32, &t32, &*out]) }
}

/// `out[out_base + s] = Jacobian(input[s · stride])` for `s < nseg` (blst layout).
#[allow(clippy::too_many_arguments)]
pub fn to_jacobian<J: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    input: &DeviceBuffer<u64>,
    stride: usize,
    nseg: usize,
    out: &mut DeviceBuffer<J>,
    out_base: usize,
) -> Result<()> {
    let k = format!("msm_to_jacobian_{}", curve.suffix());
    elem::<J>(&k, "out", curve.jacobian_bytes())?;
    if nseg == 0 {
        return Ok(());
    }
    xyzz_len(&k, "input", curve, input, (nseg - 1) * stride + 1)?;
    need(&k, "out", out.len(), out_base + nseg)?;
    let (s32, n32, b32) = (
        u32_of(&k, "stride", stride)?,
        u32_of(&k, "nseg", nseg)?,
        u32_of(&k, "out_base", out_base)?,
    );
    // SAFETY: reads input[s*stride], writes out[out_base + s], s < nseg.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            stride_cfg(nseg, 128)?,
            &[input, &s32, &n32, &*out, &b32],
        )
    }
}

/// Affine points per thread of `msm_to_affine_*` (one Fp inversion per this many).
const AFFINE_PER_THREAD: u32 = 32;

/// Precomputed copies: for j in `1..copies`, `points[j·n + i] = [2^doublings] points[(j−1)·n +
/// i]` (i < n), each copy from the previous one: `msm_double_*` into the XYZZ scratch `tmp`,
/// then `msm_to_affine_*` (kernels/ec/batch_affine.cuh, one Fp inversion per 32 points), in
/// chunks of as many points as `tmp` holds. Both curve groups have odd order (odd cofactors),
/// so `[2^k] P` is the identity only if P is: copy 0's identity bits ([`identity_bits`]) hold
/// for every copy. Asynchronous.
#[allow(clippy::too_many_arguments)]
pub fn precompute_copies<P: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    points: &mut DeviceBuffer<P>,
    n: usize,
    copies: usize,
    doublings: u32,
    tmp: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let (kd, ka) = (
        format!("msm_double_{}", curve.suffix()),
        format!("msm_to_affine_{}", curve.suffix()),
    );
    elem::<P>(&kd, "points", curve.affine_bytes())?;
    let total = n
        .checked_mul(copies)
        .ok_or_else(|| invalid(&kd, "n × copies overflows".into()))?;
    need(&kd, "points", points.len(), total)?;
    let chunk = tmp.len() / curve.xyzz_words();
    if n == 0 || copies < 2 {
        return Ok(());
    }
    if chunk == 0 {
        return Err(invalid(&kd, "tmp holds no XYZZ point".into()));
    }
    let bytes = curve.affine_bytes() as u64;
    let at = |j: usize, i: usize| points.device_ptr() + (j * n + i) as u64 * bytes;
    for j in 1..copies {
        for start in (0..n).step_by(chunk) {
            let len = chunk.min(n - start);
            let (src, dst) = (at(j - 1, start), at(j, start));
            let len32 = u32_of(&kd, "chunk", len)?;
            // SAFETY: reads points (j−1)·n + start + [0, len) (inside the buffer: (j+1)·n <=
            // total <= len, checked), writes tmp points [0, len) (len <= chunk, its capacity).
            unsafe {
                gpu.launch(
                    stream,
                    MODULE,
                    &kd,
                    stride_cfg(len, curve.block())?,
                    &[&src, &len32, &doublings, &*tmp],
                )?
            }
            let threads = len.div_ceil(AFFINE_PER_THREAD as usize);
            // SAFETY: thread t handles points t + k·T (T = launched threads >= threads,
            // k < 32) below len: reads tmp point i, writes the affine point at dst + i, inside
            // copy j (checked as above). `points` is borrowed mutably for the call.
            unsafe {
                gpu.launch(
                    stream,
                    MODULE,
                    &ka,
                    LaunchConfig::for_elements(threads, curve.block())?,
                    &[&dst, &*tmp, &len32, &AFFINE_PER_THREAD],
                )?
            }
        }
    }
    Ok(())
}

/// Runs `f` with an [`Uploader`] that enqueues asynchronous copies from `src` on `stream`;
/// when this returns (or unwinds), `stream` has been synchronized, so no copy outlives the
/// borrow of `src`. Copies are truly asynchronous when `src` is pinned.
pub fn with_uploads<'a, T: Pod, R>(
    gpu: &Gpu,
    stream: &Stream,
    src: &'a [T],
    f: impl FnOnce(&Uploader<'a, '_, T>) -> Result<R>,
) -> Result<R> {
    struct SyncOnDrop<'s>(&'s Stream);
    impl Drop for SyncOnDrop<'_> {
        fn drop(&mut self) {
            let _ = self.0.synchronize();
        }
    }
    let guard = SyncOnDrop(stream);
    let up = Uploader {
        src,
        stream,
        backend: gpu.vram().backend().clone(),
        _p: PhantomData,
    };
    let r = f(&up);
    drop(guard);
    let synced = stream.synchronize();
    let r = r?;
    synced?;
    Ok(r)
}

/// See [`with_uploads`].
#[derive(Debug)]
pub struct Uploader<'a, 's, T: Pod> {
    src: &'a [T],
    stream: &'s Stream,
    backend: Arc<dyn MemoryBackend>,
    _p: PhantomData<&'a T>,
}

impl<T: Pod> Uploader<'_, '_, T> {
    /// Enqueues `dst[0..len) = src[start..start+len)` on the scope's stream. `dst` must not be
    /// used by other streams until they wait for an event recorded after this.
    pub fn upload(&self, start: usize, len: usize, dst: &mut DeviceBuffer<T>) -> Result<()> {
        let end = start.checked_add(len).filter(|&e| e <= self.src.len());
        let Some(end) = end else {
            return Err(invalid(
                "upload",
                format!("range {start}+{len} outside {} elements", self.src.len()),
            ));
        };
        need("upload", "dst", dst.len(), len)?;
        if len == 0 {
            return Ok(());
        }
        let part = &self.src[start..end];
        // SAFETY: dst[0..len) lies in dst's live allocation; `part` is borrowed for the scope
        // lifetime 'a and with_uploads synchronizes the stream before that borrow ends.
        unsafe {
            self.backend.copy_htod(
                dst.device_ptr(),
                part.as_ptr().cast(),
                size_of_val(part),
                Some(self.stream.cuda()),
            )
        }
        .map_err(GpuError::from)
    }
}

/// Two pinned host buffers of `len` elements used in turn for device → host results: a copy
/// into one slot overlaps the caller's use of the other. Reading a slot waits for its copy.
#[derive(Debug)]
pub struct ResultRing<T: Pod> {
    slots: [PinnedBuffer<T>; 2],
    done: [Event; 2],
    pending: [bool; 2],
    stream: Stream,
}

impl<T: Pod> ResultRing<T> {
    pub fn new(gpu: &Gpu, stream: &Stream, len: usize) -> Result<Self> {
        Ok(Self {
            slots: [gpu.vram().pinned(len)?, gpu.vram().pinned(len)?],
            done: [gpu.event()?, gpu.event()?],
            pending: [false; 2],
            stream: stream.clone(),
        })
    }

    /// Enqueues `slot ← src` (whole buffer, same length) on the ring's stream. Fails if the
    /// slot still holds an unread result.
    pub fn push(&mut self, slot: usize, src: &DeviceBuffer<T>) -> Result<()> {
        let s = slot % 2;
        if self.pending[s] {
            return Err(invalid(
                "ResultRing::push",
                format!("slot {s} was not read"),
            ));
        }
        need("ResultRing::push", "slot", self.slots[s].len(), src.len())?;
        let dst = &mut self.slots[s][..src.len()];
        // SAFETY: the pinned slot is owned by `self`; it is only read through `take`, which
        // waits for `done[s]` first, and Drop synchronizes before freeing it.
        unsafe { src.copy_to_host_async(dst, self.stream.cuda())? };
        self.stream.record(&self.done[s])?;
        self.pending[s] = true;
        Ok(())
    }

    /// Waits for the copy into `slot` and returns its contents (and frees the slot).
    pub fn take(&mut self, slot: usize) -> Result<&[T]> {
        let s = slot % 2;
        if !self.pending[s] {
            return Err(invalid("ResultRing::take", format!("slot {s} is empty")));
        }
        self.done[s].synchronize()?;
        self.pending[s] = false;
        Ok(&self.slots[s])
    }

    pub fn is_pending(&self, slot: usize) -> bool {
        self.pending[slot % 2]
    }
}

impl<T: Pod> Drop for ResultRing<T> {
    fn drop(&mut self) {
        for s in 0..2 {
            if self.pending[s] {
                let _ = self.done[s].synchronize();
            }
        }
    }
}

/// Two pinned host slots of `slot_len` elements for staging pageable host data into a device
/// buffer: the caller's copy into one slot (e.g. a parallel memcpy) overlaps the DMA from the
/// other. A pageable `cuMemcpyHtoD` runs at ~7 GB/s through the driver's own small staging
/// buffers; a pinned DMA runs at PCIe speed, so the host memcpy becomes the limit.
#[derive(Debug)]
pub struct Staging<T: Pod> {
    slots: [PinnedBuffer<T>; 2],
    done: [Event; 2],
    pending: [bool; 2],
    backend: Arc<dyn MemoryBackend>,
}

impl<T: Pod> Staging<T> {
    pub fn new(gpu: &Gpu, slot_len: usize) -> Result<Self> {
        let slot_len = slot_len.max(1);
        Ok(Self {
            slots: [gpu.vram().pinned(slot_len)?, gpu.vram().pinned(slot_len)?],
            done: [gpu.event()?, gpu.event()?],
            pending: [false; 2],
            backend: gpu.vram().backend().clone(),
        })
    }

    /// Elements per slot.
    pub fn slot_len(&self) -> usize {
        self.slots[0].len()
    }

    /// Enqueues `dst[dst_start..dst_start + src.len()) = src` on `stream` in slot-sized pieces;
    /// `fill(slot, piece)` must copy `piece` into `slot` (same length). Returns once the last
    /// piece is enqueued: `src` is no longer needed, later work on `stream` sees the data, and
    /// the next use of a slot (or dropping `self`) waits for its DMA.
    pub fn upload(
        &mut self,
        stream: &Stream,
        src: &[T],
        dst: &mut DeviceBuffer<T>,
        dst_start: usize,
        mut fill: impl FnMut(&mut [T], &[T]),
    ) -> Result<()> {
        let end = dst_start.checked_add(src.len());
        if end.is_none_or(|e| e > dst.len()) {
            return Err(invalid(
                "Staging::upload",
                format!(
                    "{} elements at {dst_start} do not fit {} elements",
                    src.len(),
                    dst.len()
                ),
            ));
        }
        let slot_len = self.slot_len();
        for (i, piece) in src.chunks(slot_len).enumerate() {
            let b = i % 2;
            if self.pending[b] {
                self.done[b].synchronize()?;
                self.pending[b] = false;
            }
            let slot = &mut self.slots[b][..piece.len()];
            fill(slot, piece);
            let at = dst.device_ptr() + ((dst_start + i * slot_len) * size_of::<T>()) as u64;
            // SAFETY: the destination range lies inside dst's live allocation (checked above);
            // the source is the pinned slot owned by self, which is not written again before
            // `done[b]` (recorded right after this copy) completes, and Drop waits for it.
            unsafe {
                self.backend.copy_htod(
                    at,
                    slot.as_ptr().cast(),
                    size_of_val(slot),
                    Some(stream.cuda()),
                )
            }
            .map_err(GpuError::from)?;
            stream.record(&self.done[b])?;
            self.pending[b] = true;
        }
        Ok(())
    }
}

impl<T: Pod> Drop for Staging<T> {
    fn drop(&mut self) {
        for s in 0..2 {
            if self.pending[s] {
                let _ = self.done[s].synchronize();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_groups_fit_the_shared_counters_and_cover_every_window() {
        // The 2^24 and 2^26 plans at c = 20: one group, and five groups of three windows.
        let w20 = Windows::unfolded(20);
        assert_eq!(hist_groups(&w20, 7, 3), Some((13, 1, 12 * 4096 + 3710)));
        assert_eq!(hist_groups(&w20, 5, 1), Some((3, 5, 3 * 16384)));
        // 2 copies at 2^24: 7 full sets at F = 6 fill the counters exactly
        let f20 = Windows::folded(20, 2, 1 << 24);
        assert_eq!(hist_groups(&f20, 6, 6), Some((7, 1, 7 * 8192)));
        for c in 2..=22u32 {
            let u = Windows::unfolded(c);
            for win in [u, Windows::folded(c, 2, 100), Windows::folded(c, 3, 100)] {
                let sets = win.sets;
                for f in 0..=(c - 1).min(SORT_MAX_FINE_BITS) {
                    // folded sets are full: the plan keeps Ft = F
                    let ft0 = if sets < win.nwin { f } else { 0 };
                    for ft in ft0..=f {
                        let per_set = 1usize << (c - 1 - f);
                        match hist_groups(&win, f, ft) {
                            Some((spg, groups, cnt)) => {
                                assert!(cnt <= SORT_HIST_COUNTERS, "c {c} F {f}");
                                assert_eq!(groups, sets.div_ceil(spg), "c {c} F {f}");
                                if spg < sets {
                                    let more = hist_counters(&win, f, ft, spg + 1);
                                    assert!(
                                        more > SORT_HIST_COUNTERS,
                                        "c {c} F {f}: groups too small"
                                    );
                                }
                            }
                            None => assert!(per_set > SORT_HIST_COUNTERS, "c {c} F {f}"),
                        }
                    }
                }
            }
        }
    }

    /// The folded mapping: sets, copies actually used, keys, index bound and top-set reach.
    #[test]
    fn windows_fold() {
        let u = Windows::unfolded(20);
        assert_eq!(
            (u.nwin, u.sets, u.copies(), u.nkeys()),
            (13, 13, 1, 13 << 19)
        );
        assert_eq!(u.index_bound(1000), 1000);
        assert_eq!(u.top_set_keys(), top_window_keys(20));
        let n = 1 << 24;
        let f2 = Windows::folded(20, 2, n);
        assert_eq!((f2.sets, f2.copies(), f2.nkeys()), (7, 2, 7 << 19));
        assert_eq!((f2.index_bound(n), f2.copy_doublings()), (2 * n, 140));
        assert_eq!(f2.top_set_keys(), 1 << 19);
        let f3 = Windows::folded(20, 3, n);
        assert_eq!((f3.sets, f3.copies()), (5, 3));
        // 8 copies need only 7: 2 sets cover 13 windows in 7 copies
        assert_eq!(Windows::folded(20, 8, n).copies(), 7);
        let full = Windows::folded(20, 13, n);
        assert_eq!(
            (full.sets, full.copies(), full.copy_doublings()),
            (1, 13, 20)
        );
        assert_eq!(Windows::folded(20, 100, n), full);
        assert_eq!(Windows::folded(20, 1, n), u);
        assert_eq!(Windows::folded(20, 0, n), u);
        for c in 2..=22 {
            for m in 1..=130 {
                let w = Windows::folded(c, m, 77);
                assert!(w.copies() <= m.max(1) && w.copies() as u32 * w.sets >= w.nwin);
                assert!((w.copies() as u32 - 1) * w.sets < w.nwin, "no idle copy");
            }
        }
    }
}
