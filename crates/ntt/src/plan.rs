//! What the GPU kernels are asked to do: the pass sequence, flags and device table contents
//! (see `kernels/ntt/ntt.cuh`). Pure host logic, always compiled, so the plan is checked on the
//! CPU by an emulator of the kernels (tests below) even on machines without a GPU.

use cuzk_field::Fr;

use crate::Order;

/// Which transform to run; the same semantics as the CPU calls of [`crate::Domain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    /// Coefficients → evaluations on H (`fft_in_place`).
    Forward,
    /// Evaluations on H → coefficients (`ifft_in_place`).
    Inverse,
    /// Coefficients → evaluations on g·H (`coset_fft_in_place`).
    CosetForward,
    /// Evaluations on g·H → coefficients (`coset_ifft_in_place`).
    CosetInverse,
}

impl Transform {
    pub const ALL: [Transform; 4] = [
        Self::Forward,
        Self::Inverse,
        Self::CosetForward,
        Self::CosetInverse,
    ];
}

// Mirrors of the layout and flags in kernels/ntt/ntt.cuh (asserted equal to cuzk-gpu's copy in
// gpu.rs).
pub(crate) const SPLIT_BITS: u32 = 14;
pub(crate) const SPLIT: usize = 1 << SPLIT_BITS;
pub(crate) const MAX_LG: u32 = 28;
pub(crate) const INT_LG: u32 = 10;
pub(crate) const INT_LEN: usize = 1 << (INT_LG - 1);
pub(crate) const T_FWD_LO: usize = 0;
pub(crate) const T_INV_LO: usize = 2 * SPLIT;
pub(crate) const T_G_LO: usize = 4 * SPLIT;
pub(crate) const T_GI_LO: usize = 6 * SPLIT;
pub(crate) const T_FWD_INT: usize = 8 * SPLIT;
pub(crate) const T_INV_INT: usize = T_FWD_INT + INT_LEN;
pub(crate) const T_NINV: usize = T_INV_INT + INT_LEN;
pub(crate) const T_HK: usize = T_NINV + MAX_LG as usize + 1;
pub(crate) const T_HN: usize = T_HK + MAX_LG as usize + 1;
pub(crate) const DIRECT_LG: u32 = 19;
pub(crate) const DIRECT_N: usize = 1 << DIRECT_LG;
pub(crate) const T_FWD_DIR: usize = T_HN + MAX_LG as usize + 1;
pub(crate) const T_INV_DIR: usize = T_FWD_DIR + DIRECT_N;
/// Offset of size 2^lg's scaled HI table (g^(h·2^14)/2^lg) inside T_GN_HI / T_GIN_HI.
pub(crate) const fn gn_off(lg: u32) -> usize {
    if lg <= 15 {
        lg as usize
    } else {
        (1 << (lg - 14)) + 13
    }
}
pub(crate) const GN_LEN: usize = gn_off(MAX_LG + 1);
pub(crate) const T_GN_HI: usize = T_INV_DIR + DIRECT_N;
pub(crate) const T_GIN_HI: usize = T_GN_HI + GN_LEN;
/// The H pipeline's quotient constants folded into to_coset's first twiddle (`F_TW_FOLD`): for
/// L < MAX_LG and polynomial y (a, b, c) at `T_HTW + ((3·L + y) << INT_LG)`,
/// s_y·w_(2^(INT_LG+1))^j, j < 2^INT_LG, s_a = K_L, s_b = 1, s_c = n·K_L.
pub(crate) const HTW_LEN: usize = (3 * MAX_LG as usize) << INT_LG;
pub(crate) const T_HTW: usize = T_GIN_HI + GN_LEN;
pub(crate) const T_LEN: usize = T_HTW + HTW_LEN;
pub(crate) const TILE_LG: u32 = 10;

/// Run passes with `k >= 2` on the radix-4 kernel (`cuzk_ntt_pass4`: four elements per thread,
/// two stages per shared-memory round trip). `false` falls back to the radix-2 kernel
/// (`cuzk_ntt_pass`) everywhere; both give the same result bit for bit.
pub(crate) const RADIX4: bool = true;

/// Environment switches for A/B runs on a GPU without a rebuild (read on every plan; both
/// variants give the same result): `CUZK_NTT_RADIX2=1` runs every pass on the radix-2 kernel,
/// `CUZK_NTT_SIMPLE_BITREV=1` every permutation on the element-wise kernel; the opt-in
/// `CUZK_NTT_WIDE=1` and the opt-out `CUZK_NTT_SPECIALIZED=0` below.
fn env_set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether passes with `k >= 2` use the radix-4 kernel.
pub(crate) fn radix4_enabled() -> bool {
    RADIX4 && !env_set("CUZK_NTT_RADIX2")
}

/// The opt-in wide plan (`CUZK_NTT_WIDE=1`, or forced by the `*_plan` calls of `gpu.rs`):
/// from 2^WIDE_MIN_LG up, every pass runs on `cuzk_ntt_pass_wide` with tiles of up to
/// 2^WIDE_TILE_LG elements (128 KiB of shared memory) and k <= WIDE_TILE_LG: 2^20..2^24 in two
/// passes (10+10, 11+11, 12+12), 2^26..2^28 in three with wider column chunks. Same result.
pub(crate) const WIDE_TILE_LG: u32 = 12;
pub(crate) const WIDE_MIN_LG: u32 = 16;

/// Whether the environment asks for the wide plan.
pub(crate) fn wide_enabled() -> bool {
    env_set("CUZK_NTT_WIDE")
}

/// Whether radix-4 passes launch the specialized kernels (the default; or forced by the
/// `*_variant` calls of `gpu.rs`): every radix-4 pass runs the `cuzk_ntt_pass4_*` kernel
/// compiled for its flags (direction, twiddle, pre/post scaling; 4 blocks per SM) instead of the
/// generic `cuzk_ntt_pass4` (2 blocks per SM), whose inlined alternatives overflow the
/// instruction cache and whose register use halves the occupancy. `CUZK_NTT_SPECIALIZED=0`
/// runs every radix-4 pass on the generic kernel (A/B runs, debugging); unset, empty or any
/// other value keeps the default. Same result.
pub(crate) fn specialized_enabled() -> bool {
    specialized_from(std::env::var_os("CUZK_NTT_SPECIALIZED").as_deref())
}

fn specialized_from(v: Option<&std::ffi::OsStr>) -> bool {
    v.is_none_or(|v| v.to_str().map(str::trim) != Some("0"))
}

/// The roots table (kernels' `ROOTS_LG`, `cuzk_gpu::ntt::Twiddles`): an inter-pass twiddle of
/// order DIRECT_LG < ord <= D is one load from a table of w_(2^D)^i, i < 2^(D-1) (2^(D+4) bytes),
/// instead of the product of two split-table values. `CUZK_NTT_ROOTS_LG` caps D (read on every
/// transform; default MAX_LG; 0, or any value up to DIRECT_LG, turns the table off; a value that
/// is not a number keeps the default). Same result either way.
pub(crate) fn roots_cap() -> u32 {
    roots_cap_from(std::env::var("CUZK_NTT_ROOTS_LG").ok().as_deref())
}

fn roots_cap_from(v: Option<&str>) -> u32 {
    v.and_then(|v| v.trim().parse::<u32>().ok())
        .map_or(MAX_LG, |lg| lg.min(MAX_LG))
}

/// The roots table order `passes` can use under `cap`: the largest order of their store-side
/// twiddles above DIRECT_LG (at most `cap`), 0 when none is above it.
pub(crate) fn roots_order(passes: &[Pass], cap: u32) -> u32 {
    passes
        .iter()
        .filter(|p| p.flags & F_TWIDDLE != 0 && p.flags & F_TW_FOLD == 0)
        .map(|p| {
            let (tk, tr) = tw_fields(p.flags);
            tk + tr + u32::from(p.flags & (F_ODD_ROW | F_ODD_COL) != 0)
        })
        .filter(|&ord| ord > DIRECT_LG && ord <= cap)
        .max()
        .unwrap_or(0)
}

/// Smallest size for the tiled bit-reversal kernel (`cuzk_ntt_bit_reverse_tiled`).
pub(crate) const TILED_BITREV_MIN_LG: u32 = 10;
/// Permute with the tiled kernel from 2^10 up; `false` falls back to the element-wise
/// `cuzk_ntt_bit_reverse` everywhere (same result).
pub(crate) const TILED_BITREV: bool = true;

/// Whether a bit-reversal of 2^lg_n runs on the tiled kernel.
pub(crate) fn tiled_bitrev(lg_n: u32) -> bool {
    TILED_BITREV && lg_n >= TILED_BITREV_MIN_LG && !env_set("CUZK_NTT_SIMPLE_BITREV")
}

pub(crate) const F_DIT: u32 = 1 << 0;
pub(crate) const F_INVERSE: u32 = 1 << 1;
pub(crate) const F_TWIDDLE: u32 = 1 << 2;
pub(crate) const F_PRE_G: u32 = 1 << 3;
pub(crate) const F_PRE_GI: u32 = 1 << 4;
pub(crate) const F_PRE_NINV: u32 = 1 << 5;
pub(crate) const F_POST_G: u32 = 1 << 6;
pub(crate) const F_POST_GI: u32 = 1 << 7;
pub(crate) const F_POST_NINV: u32 = 1 << 8;
pub(crate) const F_ODD_ROW: u32 = 1 << 9;
pub(crate) const F_ODD_COL: u32 = 1 << 10;
pub(crate) const F_POST_ROW: u32 = 1 << 11;
pub(crate) const F_TW_INV: u32 = 1 << 12;
/// The kernels' `F_TW_FOLD`: to_coeffs' last store (H pipeline, half-root coset, k ≤ INT_LG)
/// reads to_coset's R = 0 twiddle pre-scaled by polynomial y's quotient constant (`T_HTW`), and
/// the quotient kernels then write a·b − c.
pub(crate) const F_TW_FOLD: u32 = 1 << 13;
pub(crate) const TW_K_SHIFT: u32 = 16;
pub(crate) const TW_R_SHIFT: u32 = 20;
/// The kernels' `tw_geometry`: the pass geometry (k row bits, r column bits) of the inter-pass
/// twiddle that `F_TWIDDLE` multiplies at the store.
pub(crate) const fn tw_geometry(k: u32, r: u32) -> u32 {
    (k << TW_K_SHIFT) | (r << TW_R_SHIFT)
}
pub(crate) const TW_FIELDS: u32 = tw_geometry(15, 31);
/// (k, r) of the [`tw_geometry`] fields of `flags`.
pub(crate) const fn tw_fields(flags: u32) -> (u32, u32) {
    ((flags >> TW_K_SHIFT) & 15, (flags >> TW_R_SHIFT) & 31)
}
/// Every bit that describes an inter-pass twiddle.
const TW_BITS: u32 = F_TWIDDLE | F_ODD_ROW | F_ODD_COL | F_TW_INV | F_TW_FOLD | TW_FIELDS;

/// One launch of `cuzk_ntt_pass` (or `cuzk_ntt_pass4` when `radix4`, `cuzk_ntt_pass_wide`
/// when `wide`, which overrides `radix4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub s0: u32,
    pub k: u32,
    pub lg_c: u32,
    pub flags: u32,
    pub radix4: bool,
    pub wide: bool,
}

/// A whole transform: optional bit-reversal before, passes, optional bit-reversal after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub permute_before: bool,
    pub passes: Vec<Pass>,
    pub permute_after: bool,
}

/// Bits per pass, in DIF order: as few passes of ≤ TILE_LG bits as possible, balanced, the
/// larger ones last (on the R = 0 side): 2^26 runs 8,9,9 (H200 run 35: 17.35 ms against 17.55
/// for 9,9,8; likewise 2^24 7,8,9 +0.5% against 9,8,7 +2.6% and H 2^27 9,10,8 +1.5% against
/// 10,9,8 +3.4%, each against the balanced 8,8,8 / 9,9,9).
fn split(lg_n: u32) -> Vec<u32> {
    let mut bits = split_max(lg_n, TILE_LG);
    bits.reverse();
    bits
}

/// `CUZK_NTT_SPLIT` (read on every plan, for measuring splits on a GPU without a rebuild):
/// the pass bits in DIF order (the first pass executed by a DIF network, the last by a DIT),
/// comma-separated, e.g. `CUZK_NTT_SPLIT=10,8,6` for 2^24. Used by every transform plan and the
/// H pipeline of the size the bits sum to; ignored (the default split) for any other size,
/// under the wide plan, or when malformed: empty, a field that is not a number, or a pass of
/// fewer than 2 bits (the radix-4 kernels' minimum) or more than TILE_LG (10).
pub(crate) fn split_override() -> Option<Vec<u32>> {
    std::env::var("CUZK_NTT_SPLIT")
        .ok()
        .and_then(|v| parse_split(&v))
}

/// The bits of a `CUZK_NTT_SPLIT` value, or `None` when malformed (empty, a field that is not a
/// number, a pass outside `2..=TILE_LG`).
pub(crate) fn parse_split(v: &str) -> Option<Vec<u32>> {
    let bits: Vec<u32> = v
        .split(',')
        .map(|f| f.trim().parse::<u32>().ok())
        .collect::<Option<_>>()?;
    (!bits.is_empty() && bits.iter().all(|&k| (2..=TILE_LG).contains(&k))).then_some(bits)
}

/// The split of a non-wide network of 2^lg_n: `over` where its bits sum to `lg_n`, else the
/// default.
fn split_for(lg_n: u32, over: Option<&[u32]>) -> Vec<u32> {
    match over {
        Some(b) if b.iter().sum::<u32>() == lg_n => b.to_vec(),
        _ => split(lg_n),
    }
}

/// Balanced passes of ≤ `max` bits, the larger ones first.
fn split_max(lg_n: u32, max: u32) -> Vec<u32> {
    let passes = lg_n.div_ceil(max);
    (0..passes)
        .map(|i| lg_n / passes + u32::from(i < lg_n % passes))
        .collect()
}

/// `lg_c` of a pass: the tile's columns (R = lg_n − s0 − k > 0: up to R), or for the R = 0
/// pass of a non-wide plan its groups (consecutive 2^k-element groups, up to all 2^s0 of them;
/// kernels/ntt/ntt.cuh `pass`), so that pass too runs full tiles of 2^tile_lg elements.
fn tile_cols(lg_n: u32, s0: u32, k: u32, tile_lg: u32, wide: bool) -> u32 {
    let r = lg_n - s0 - k;
    if r == 0 && !wide {
        (tile_lg - k).min(s0)
    } else {
        r.min(tile_lg - k)
    }
}

/// The passes of a DIF (natural → bit-reversed) or DIT (bit-reversed → natural) network,
/// with `pre` flags on the first pass executed and `post` flags on the last; every inter-pass
/// twiddle at a store ([`store_twiddles`]).
#[allow(dead_code)] // the default plan's entry; gpu.rs calls the _with forms
pub(crate) fn network(lg_n: u32, dit: bool, inverse: bool, pre: u32, post: u32) -> Vec<Pass> {
    let over = split_override();
    network_split(
        lg_n,
        dit,
        inverse,
        pre,
        post,
        wide_enabled(),
        over.as_deref(),
    )
}

/// [`network`] with the wide plan chosen (where `lg_n >= WIDE_MIN_LG`) or not and the split
/// override `over` (DIF-order pass bits, used where they sum to `lg_n` and the plan is not wide).
pub(crate) fn network_split(
    lg_n: u32,
    dit: bool,
    inverse: bool,
    pre: u32,
    post: u32,
    wide: bool,
    over: Option<&[u32]>,
) -> Vec<Pass> {
    let mut passes = network_own(lg_n, dit, inverse, pre, post, wide, over);
    store_twiddles(lg_n, &mut passes);
    passes
}

/// [`network_split`] with each pass's inter-pass twiddle described on the pass it belongs to
/// (`F_TWIDDLE`, plus `F_ODD_*` where a caller adds them): a DIF pass multiplies its output,
/// a DIT pass its input. Not launchable before [`store_twiddles`].
fn network_own(
    lg_n: u32,
    dit: bool,
    inverse: bool,
    pre: u32,
    post: u32,
    wide: bool,
    over: Option<&[u32]>,
) -> Vec<Pass> {
    let mut passes = Vec::new();
    let radix4 = radix4_enabled();
    let wide = wide && lg_n >= WIDE_MIN_LG;
    let tile_lg = if wide { WIDE_TILE_LG } else { TILE_LG };
    let bits = if wide {
        split_max(lg_n, tile_lg)
    } else {
        split_for(lg_n, over)
    };
    let mut s0 = 0;
    for k in bits {
        let r = lg_n - s0 - k;
        let mut flags = if inverse { F_INVERSE } else { 0 };
        if dit {
            flags |= F_DIT;
        }
        if r > 0 {
            flags |= F_TWIDDLE;
        }
        passes.push(Pass {
            s0,
            k,
            lg_c: tile_cols(lg_n, s0, k, tile_lg, wide),
            flags,
            radix4: radix4 && k >= 2,
            wide,
        });
        s0 += k;
    }
    if dit {
        passes.reverse();
    }
    if let Some(first) = passes.first_mut() {
        first.flags |= pre;
    }
    if let Some(last) = passes.last_mut() {
        last.flags |= post;
    }
    passes
}

/// Puts every inter-pass twiddle of `passes` (executed in this order, one kernel after the
/// other on the same data; each twiddle as [`network_own`] describes it, `F_TWIDDLE` and
/// `F_ODD_*` on the pass it belongs to) at a store, as the kernels take it: `F_TWIDDLE` with the
/// geometry of the pass it belongs to (`tw_geometry(k, R)`) and its direction (`F_TW_INV`), on
/// that pass itself if it is a DIF pass (its output), on the pass before it if it is a DIT pass
/// (the store that writes its input; crates/ntt/PERF-NOTES.md session 9). The twiddle is a
/// function of the element's position alone, so either store gives the same product. Panics if
/// the first pass is a DIT pass with a twiddle (nothing writes its input) or a pass would get
/// two twiddles.
pub(crate) fn store_twiddles(lg_n: u32, passes: &mut [Pass]) {
    let own: Vec<u32> = passes
        .iter()
        .map(|p| {
            if p.flags & F_TWIDDLE == 0 {
                return 0;
            }
            let dir = if p.flags & F_INVERSE != 0 {
                F_TW_INV
            } else {
                0
            };
            F_TWIDDLE
                | (p.flags & (F_ODD_ROW | F_ODD_COL))
                | dir
                | tw_geometry(p.k, lg_n - p.s0 - p.k)
        })
        .collect();
    for p in passes.iter_mut() {
        assert_eq!(
            p.flags & (F_TW_INV | F_TW_FOLD | TW_FIELDS),
            0,
            "twiddle already placed"
        );
        p.flags &= !TW_BITS;
    }
    for (i, &tw) in own.iter().enumerate() {
        if tw == 0 {
            continue;
        }
        let at = if passes[i].flags & F_DIT != 0 {
            assert!(i > 0, "a DIT pass's twiddle needs the kernel before it");
            i - 1
        } else {
            i
        };
        assert_eq!(passes[at].flags & F_TWIDDLE, 0, "two twiddles at one store");
        passes[at].flags |= tw;
    }
}

#[allow(dead_code)] // the default plan's entry; gpu.rs calls the _with forms
pub(crate) fn plan(lg_n: u32, t: Transform, input: Order, output: Order) -> Plan {
    plan_with(lg_n, t, input, output, wide_enabled())
}

/// [`plan`] with the wide plan chosen or not (and the `CUZK_NTT_SPLIT` override).
pub(crate) fn plan_with(lg_n: u32, t: Transform, input: Order, output: Order, wide: bool) -> Plan {
    plan_split(lg_n, t, input, output, wide, split_override().as_deref())
}

/// [`plan_with`] with the split override `over` (DIF-order pass bits, used where they sum to
/// `lg_n` and the plan is not wide).
pub(crate) fn plan_split(
    lg_n: u32,
    t: Transform,
    input: Order,
    output: Order,
    wide: bool,
    over: Option<&[u32]>,
) -> Plan {
    let inverse = matches!(t, Transform::Inverse | Transform::CosetInverse);
    let pre = if t == Transform::CosetForward {
        F_PRE_G
    } else {
        0
    };
    let post = match t {
        Transform::Forward | Transform::CosetForward => 0,
        Transform::Inverse => F_POST_NINV,
        Transform::CosetInverse => F_POST_GI | F_POST_NINV,
    };
    if lg_n == 0 {
        // Size 1: every transform is the identity (g^0 = 1, 1/n = 1).
        return Plan {
            permute_before: false,
            passes: Vec::new(),
            permute_after: false,
        };
    }
    // DIF takes natural input, DIT bit-reversed; one extra permutation when the output order
    // is not the network's.
    let dit = input == Order::BitReversed;
    let native_out = if dit {
        Order::Natural
    } else {
        Order::BitReversed
    };
    Plan {
        permute_before: false,
        passes: network_split(lg_n, dit, inverse, pre, post, wide, over),
        permute_after: output != native_out,
    }
}

/// The largest size whose H pipeline runs on the half-root coset s = w_2N (the odd twiddles
/// need w_2M, M ≤ 2^lg_n, to be a power of W = w_(2^MAX_LG)); 2^MAX_LG runs on the g coset.
pub(crate) const H_HALF_ROOT_MAX_LG: u32 = MAX_LG - 1;

/// The Groth16 quotient, H = (A·B − C)/Z, which does not depend on the coset it is evaluated
/// on (when Z divides A·B − C, as for every satisfied witness): per input an unscaled inverse
/// DIF (natural → bit-reversed, n times the coefficients) and a forward DIT onto the half-root
/// coset s = w_2N (→ natural, n times the coset evaluations): s^i is folded into the inter-pass
/// twiddles of every pass (`F_TWIDDLE | F_ODD_ROW`, the first executed pass included: its
/// twiddle is multiplied at the store of to_coeffs' last pass, like every DIT twiddle at the
/// store of the pass before, see [`store_twiddles`]), no pre-scaling. The point-wise step
/// (`cuzk_ntt_quotient_bitrev[_tiled]`) writes (a·b − n·c)·K, K = 1/(Z·n^3), Z = s^N − 1 = −2,
/// bit-reversed; where to_coeffs' last pass has k ≤ INT_LG (not the wide plan's k > 10) K and
/// n·K are folded into that store's twiddle for a and c (`F_TW_FOLD`, `T_HTW`) and it writes
/// a·b − c; `back` is an unscaled inverse DIT whose last
/// pass (s0 = 0) folds s^-i into its twiddle (`F_ODD_COL`) and a per-row factor
/// w_(2^(k+1))^-row (`F_POST_ROW`). At 2^MAX_LG (no w_(2^29)) the same steps run on the g coset:
/// g^i fused into to_coset's first load, g^-i into back's last store, K = 1/((g^N − 1)·n^3).
/// The gpu.rs pipeline runs each pass of `to_coeffs` and `to_coset` once over a, b and c
/// together (grid.y = 3).
#[allow(dead_code)] // the default plan's entry; gpu.rs calls the _with forms
pub(crate) fn quotient_plan(lg_n: u32) -> (Vec<Pass>, Vec<Pass>, Vec<Pass>) {
    quotient_plan_with(lg_n, wide_enabled())
}

/// [`quotient_plan`] with the wide plan chosen or not (and the `CUZK_NTT_SPLIT` override).
pub(crate) fn quotient_plan_with(lg_n: u32, wide: bool) -> (Vec<Pass>, Vec<Pass>, Vec<Pass>) {
    quotient_plan_split(lg_n, wide, split_override().as_deref())
}

/// [`quotient_plan_with`] with the split override `over`.
pub(crate) fn quotient_plan_split(
    lg_n: u32,
    wide: bool,
    over: Option<&[u32]>,
) -> (Vec<Pass>, Vec<Pass>, Vec<Pass>) {
    quotient_plan_coset(lg_n, wide, over, lg_n <= H_HALF_ROOT_MAX_LG)
}

/// [`quotient_plan_split`] on the half-root coset (`half_root`, lg_n ≤ H_HALF_ROOT_MAX_LG) or the
/// g coset (what 2^MAX_LG runs; the tests run it at every size).
pub(crate) fn quotient_plan_coset(
    lg_n: u32,
    wide: bool,
    over: Option<&[u32]>,
    half_root: bool,
) -> (Vec<Pass>, Vec<Pass>, Vec<Pass>) {
    assert!(
        !half_root || lg_n <= H_HALF_ROOT_MAX_LG,
        "no w_2N in the tables"
    );
    let to_coeffs = network_own(lg_n, false, true, 0, 0, wide, over);
    let (mut to_coset, mut back) = if half_root {
        let mut to_coset = network_own(lg_n, true, false, 0, 0, wide, over);
        for p in &mut to_coset {
            p.flags |= F_TWIDDLE | F_ODD_ROW;
        }
        let mut back = network_own(lg_n, true, true, 0, 0, wide, over);
        if let Some(last) = back.last_mut() {
            // s0 = 0: the twiddle (where R > 0; with R = 0 the column is 0 and the odd twiddle 1)
            // and the row factor.
            if last.flags & F_TWIDDLE != 0 {
                last.flags |= F_ODD_COL;
            }
            last.flags |= F_POST_ROW;
        }
        (to_coset, back)
    } else {
        (
            network_own(lg_n, true, false, F_PRE_G, 0, wide, over),
            network_own(lg_n, true, true, 0, F_POST_GI, wide, over),
        )
    };
    // to_coeffs and to_coset run one after the other on the same buffers: the twiddle of
    // to_coset's first pass (half-root: R = 0, F_ODD_ROW) goes to to_coeffs' last store.
    let first_coset = to_coeffs.len();
    let mut inputs = [to_coeffs, to_coset].concat();
    store_twiddles(lg_n, &mut inputs);
    to_coset = inputs.split_off(first_coset);
    // Half-root coset: fold the quotient's constants into that store (T_HTW, one table load in
    // place of the internal / direct one), where its pass has k ≤ INT_LG (the wide plan's k may
    // reach 12: it keeps (a·b − n·c)·K). The g coset (2^MAX_LG) folds nothing.
    if let Some(last) = inputs.last_mut() {
        let want = F_TWIDDLE | F_ODD_ROW | tw_geometry(last.k, 0);
        if half_root && last.k <= INT_LG && last.flags & TW_BITS == want {
            last.flags |= F_TW_FOLD;
        }
    }
    store_twiddles(lg_n, &mut back);
    (inputs, to_coset, back)
}

/// The device table buffer (layout in `kernels/ntt/ntt.cuh`), shared by all sizes ≤ 2^28.
pub(crate) fn tables() -> Vec<Fr> {
    let w = Fr::root_of_unity_of_order(MAX_LG).expect("2^28 divides r - 1");
    let w_inv = w.inverse().expect("non-zero");
    let g = Fr::multiplicative_generator();
    let g_inv = g.inverse().expect("non-zero");
    let mut t = Vec::with_capacity(T_LEN);
    for base in [w, w_inv, g, g_inv] {
        // LO[i] = base^i, HI[i] = base^(i·2^14).
        let step = base.pow(&[SPLIT as u64]);
        for b in [base, step] {
            let mut acc = Fr::ONE;
            for _ in 0..SPLIT {
                t.push(acc);
                acc *= b;
            }
        }
    }
    for base in [w, w_inv] {
        // w_1024^q = w^(q·2^18).
        let root = base.pow(&[1 << (MAX_LG - INT_LG)]);
        let mut acc = Fr::ONE;
        for _ in 0..INT_LEN {
            t.push(acc);
            acc *= root;
        }
    }
    let two_inv = Fr::from_u64(2).inverse().expect("non-zero");
    let (w_dir, w_inv_dir) = (
        w.pow(&[1 << (MAX_LG - DIRECT_LG)]),
        w_inv.pow(&[1 << (MAX_LG - DIRECT_LG)]),
    );
    let mut acc = Fr::ONE;
    for _ in 0..=MAX_LG {
        t.push(acc);
        acc *= two_inv;
    }
    // T_HK: K_L = 1/(Z·n^3), Z = −2 on the half-root coset (L ≤ H_HALF_ROOT_MAX_LG), g^n − 1
    // on the g coset (2^MAX_LG); T_HN: n = 2^L.
    let g_n = g.pow(&[1 << MAX_LG]);
    let mut n_inv = Fr::ONE;
    for lg in 0..=MAX_LG {
        let z = if lg <= H_HALF_ROOT_MAX_LG {
            -Fr::from_u64(2)
        } else {
            debug_assert_eq!(lg, MAX_LG);
            g_n - Fr::ONE
        };
        t.push(z.inverse().expect("Z is not zero") * n_inv * n_inv * n_inv);
        n_inv *= two_inv;
    }
    let mut n = Fr::ONE;
    for _ in 0..=MAX_LG {
        t.push(n);
        n = n + n;
    }
    for root in [w_dir, w_inv_dir] {
        // w_(2^19)^i = w^(i·2^9).
        let mut acc = Fr::ONE;
        for _ in 0..DIRECT_N {
            t.push(acc);
            acc *= root;
        }
    }
    for base in [g, g_inv] {
        // For each L: g^(h·2^14) / 2^L, h < max(1, 2^(L-14)).
        let step = base.pow(&[SPLIT as u64]);
        let mut ninv = Fr::ONE;
        for lg in 0..=MAX_LG {
            debug_assert_eq!(
                t.len() - if base == g { T_GN_HI } else { T_GIN_HI },
                gn_off(lg)
            );
            let mut acc = ninv;
            for _ in 0..gn_off(lg + 1) - gn_off(lg) {
                t.push(acc);
                acc *= step;
            }
            ninv *= two_inv;
        }
    }
    // T_HTW: for L < MAX_LG and y = a, b, c: s_y·w_2048^j, s_a = K_L, s_b = 1, s_c = n·K_L.
    let w_fold = w.pow(&[1 << (MAX_LG - INT_LG - 1)]);
    for lg in 0..MAX_LG as usize {
        let (k, n) = (t[T_HK + lg], t[T_HN + lg]);
        for s in [k, Fr::ONE, n * k] {
            let mut acc = s;
            for _ in 0..1 << INT_LG {
                t.push(acc);
                acc *= w_fold;
            }
        }
    }
    debug_assert_eq!(t.len(), T_LEN);
    t
}

/// A CPU emulator of the kernels of `kernels/ntt.cu`, statement for statement, to check the
/// plan and the index arithmetic without a GPU.
#[cfg(test)]
pub(crate) mod emu {
    use super::*;
    use crate::bit_reverse_index as bitrev;

    fn split_pow(t: &[Fr], lo_off: usize, e: u32) -> Fr {
        let lo = t[lo_off + (e as usize & (SPLIT - 1))];
        let h = (e >> SPLIT_BITS) as usize;
        if h == 0 {
            lo
        } else {
            lo * t[lo_off + SPLIT + h]
        }
    }

    fn scale(mut x: Fr, t: &[Fr], flags: u32, bits: (u32, u32, u32), idx: u32, lg_n: u32) -> Fr {
        let lo = idx as usize & (SPLIT - 1);
        let hn = gn_off(lg_n) + (idx >> SPLIT_BITS) as usize;
        assert!(
            hn < gn_off(lg_n + 1),
            "scaled HI index inside its size's table"
        );
        let mut ninv = flags & bits.2 != 0;
        if flags & bits.0 != 0 {
            if ninv {
                x *= t[T_G_LO + lo] * t[T_GN_HI + hn];
                ninv = false;
            } else {
                x *= split_pow(t, T_G_LO, idx);
            }
        }
        if flags & bits.1 != 0 {
            if ninv {
                x *= t[T_GI_LO + lo] * t[T_GIN_HI + hn];
                ninv = false;
            } else {
                x *= split_pow(t, T_GI_LO, idx);
            }
        }
        if ninv {
            x *= t[T_NINV + lg_n as usize];
        }
        x
    }

    fn pass_twiddle(t: &[Fr], inv: bool, ord: u32, ex: u32) -> Fr {
        if ord <= INT_LG && (ex >> (MAX_LG - INT_LG)) < INT_LEN as u32 {
            return t[if inv { T_INV_INT } else { T_FWD_INT } + (ex >> (MAX_LG - INT_LG)) as usize];
        }
        if ord <= DIRECT_LG {
            t[if inv { T_INV_DIR } else { T_FWD_DIR } + (ex >> (MAX_LG - DIRECT_LG)) as usize]
        } else {
            split_pow(t, if inv { T_INV_LO } else { T_FWD_LO }, ex)
        }
    }

    /// The kernels' roots-table branch of `pass_twiddle`: W^(±ex) from the table of order
    /// `lg` (`roots[i] = w_(2^lg)^i`, i < 2^(lg-1)), for a twiddle of order at most `lg`.
    pub(crate) fn roots_twiddle(roots: &[Fr], lg: u32, inv: bool, ex: u32) -> Fr {
        let (mask, half) = ((1u32 << lg) - 1, 1u32 << (lg - 1));
        let mut i = ex >> (MAX_LG - lg);
        if inv {
            i = i.wrapping_neg() & mask;
        }
        let w = roots[(i & (half - 1)) as usize];
        if i & half != 0 { -w } else { w }
    }

    /// The kernels' `twiddle_exp`: (ord, ex) of the inter-pass twiddle of (row, col).
    fn twiddle_exp(flags: u32, m_lg: u32, k: u32, row: u32, col: u32) -> (u32, u32) {
        let br = bitrev(row as usize, k) as u32;
        let odd = u32::from(flags & (F_ODD_ROW | F_ODD_COL) != 0);
        assert!(m_lg + odd <= MAX_LG, "odd twiddle needs w_2M");
        let mut e = (col * br) << odd;
        if flags & F_ODD_ROW != 0 {
            e += br;
        }
        if flags & F_ODD_COL != 0 {
            e += col;
        }
        let ord = m_lg + odd;
        (ord, e << (MAX_LG - ord))
    }

    fn bfly(tile: &mut [Fr], dit: bool, e0: usize, e1: usize, w: Option<Fr>) {
        let (x, mut y) = (tile[e0], tile[e1]);
        if dit {
            if let Some(w) = w {
                y *= w;
            }
            tile[e0] = x + y;
            tile[e1] = x - y;
        } else {
            tile[e0] = x + y;
            tile[e1] = match w {
                Some(w) => (x - y) * w,
                None => x - y,
            };
        }
    }

    /// The kernels' group remap of a radix-4 step (`pass` in kernels/ntt/ntt.cuh): where the
    /// group index bits above a warp's 32 lanes leave room, q is rotated so that the group's
    /// offset j (its low `lg_lo` bits) comes from warp-uniform bits; the warps whose j is 0 skip
    /// the w = 1 products. Returns q unchanged where the kernel does not remap.
    pub(crate) fn remap_group(q: u32, k: u32, lg_lo: u32, lg_c: u32, nthr: u32) -> u32 {
        let qb = k - 2;
        let lane_q = 5u32.saturating_sub(lg_c);
        if lg_lo >= 2 && nthr >= 32 && lg_lo + lane_q <= qb {
            ((q & ((1 << (qb - lg_lo)) - 1)) << lg_lo) | (q >> (qb - lg_lo))
        } else {
            q
        }
    }

    pub(crate) fn pass(data: &mut [Fr], t: &[Fr], lg_n: u32, p: Pass) {
        let Pass {
            s0,
            k,
            lg_c,
            flags,
            radix4,
            wide,
        } = p;
        // The wide kernel runs the radix-4 steps, eight elements per thread.
        let radix4 = radix4 || wide;
        assert!(k >= if radix4 { 2 } else { 1 }, "kernel precondition");
        let tile_lg = k + lg_c;
        assert!(
            tile_lg <= if wide { WIDE_TILE_LG } else { TILE_LG } && (!wide || tile_lg >= 3),
            "kernel precondition"
        );
        let tile_n = 1usize << tile_lg;
        let ept = if wide {
            8
        } else if radix4 {
            4
        } else {
            2
        };
        let nthr = tile_n / ept;
        let r_bits = lg_n - s0 - k;
        let dit = flags & F_DIT != 0;
        let inv = flags & F_INVERSE != 0;
        let cmask = (1u32 << lg_c) - 1;
        for (y, poly) in data.chunks_mut(1 << lg_n).enumerate() {
            for blk in 0..(1u32 << (lg_n - tile_lg)) {
                // R = 0: the tile's columns are 2^lg_c consecutive groups.
                let groups = r_bits == 0;
                let base = if groups {
                    blk << tile_lg
                } else {
                    let chunks_lg = r_bits - lg_c;
                    let group = blk >> chunks_lg;
                    let col0 = (blk & ((1 << chunks_lg) - 1)) << lg_c;
                    (group << (lg_n - s0)) + col0
                };
                let pos_of = |row: u32, cl: u32| {
                    if groups {
                        base + (cl << k) + row
                    } else {
                        base + (row << r_bits) + cl
                    }
                };
                let mut tile = vec![Fr::ZERO; tile_n];
                // Every element of the tile once, in the kernels' (thread, u) enumeration.
                for e in (0..ept).flat_map(|u| (0..nthr).map(move |th| (th + u * nthr) as u32)) {
                    let (row, cl) = (e >> lg_c, e & cmask);
                    let pos = pos_of(row, cl);
                    let mut x = poly[pos as usize];
                    let idx = if dit {
                        bitrev(pos as usize, lg_n) as u32
                    } else {
                        pos
                    };
                    x = scale(x, t, flags, (F_PRE_G, F_PRE_GI, F_PRE_NINV), idx, lg_n);
                    tile[e as usize] = x;
                }
                let itw = if inv { T_INV_INT } else { T_FWD_INT };
                let dtw = if inv { T_INV_DIR } else { T_FWD_DIR };
                // w_(2h)^j from the internal table (the direct table for h >= 2^INT_LG, wide
                // kernel only); None for the h = 1 stage (w = 1).
                let tw = |lg_h: u32, j: u32| {
                    (lg_h > 0).then(|| {
                        if wide && lg_h >= INT_LG {
                            t[dtw + (j << (DIRECT_LG - 1 - lg_h)) as usize]
                        } else {
                            assert!(lg_h < INT_LG, "internal table index");
                            t[itw + (j << (INT_LG - 1 - lg_h)) as usize]
                        }
                    })
                };
                if !radix4 {
                    for st in 0..k {
                        let lg_h = if dit { st } else { k - 1 - st };
                        let h = 1u32 << lg_h;
                        let mut touched = vec![0u8; tile_n];
                        for th in 0..nthr as u32 {
                            let (cl, q) = (th & cmask, th >> lg_c);
                            let j = q & (h - 1);
                            let r = ((q >> lg_h) << (lg_h + 1)) | j;
                            let e0 = ((r << lg_c) | cl) as usize;
                            let e1 = e0 + (h << lg_c) as usize;
                            bfly(&mut tile, dit, e0, e1, tw(lg_h, j));
                            touched[e0] += 1;
                            touched[e1] += 1;
                        }
                        assert!(
                            touched.iter().all(|&c| c == 1),
                            "radix-2 stage {st} of {p:?}"
                        );
                    }
                } else {
                    let odd = k & 1 == 1;
                    for s in 0..k.div_ceil(2) {
                        let lg_hi = match (dit, odd) {
                            (true, true) => 2 * s,
                            (true, false) => 2 * s + 1,
                            (false, _) => k - 1 - 2 * s,
                        };
                        // Each step's threads must touch disjoint elements covering the tile.
                        let mut touched = vec![0u8; tile_n];
                        // Radix-4 group g = thread + rep * nthr, reps in order per thread.
                        let groups = (0..nthr as u32).flat_map(|th| {
                            (0..(ept / 4) as u32).map(move |rep| th + rep * nthr as u32)
                        });
                        for g in groups {
                            let (cl, q) = (g & cmask, g >> lg_c);
                            if lg_hi == 0 {
                                for v in 0..2 {
                                    let qq = q + (v << (k - 2));
                                    let e0 = (((qq << 1) << lg_c) | cl) as usize;
                                    bfly(&mut tile, dit, e0, e0 + (1 << lg_c), None);
                                    touched[e0] += 1;
                                    touched[e0 + (1 << lg_c)] += 1;
                                }
                                continue;
                            }
                            let lg_lo = lg_hi - 1;
                            let hh = 1u32 << lg_lo;
                            let q = remap_group(q, k, lg_lo, lg_c, nthr as u32);
                            let j = q & (hh - 1);
                            let r = ((q >> lg_lo) << (lg_hi + 1)) | j;
                            let e0 = ((r << lg_c) | cl) as usize;
                            let d = (hh << lg_c) as usize;
                            let [e1, e2, e3] = [e0 + d, e0 + 2 * d, e0 + 3 * d];
                            for e in [e0, e1, e2, e3] {
                                touched[e] += 1;
                            }
                            let (wa, wb, wc) = (tw(lg_hi, j), tw(lg_hi, j + hh), tw(lg_lo, j));
                            if dit {
                                bfly(&mut tile, dit, e0, e1, wc);
                                bfly(&mut tile, dit, e2, e3, wc);
                                bfly(&mut tile, dit, e0, e2, wa);
                                bfly(&mut tile, dit, e1, e3, wb);
                            } else {
                                bfly(&mut tile, dit, e0, e2, wa);
                                bfly(&mut tile, dit, e1, e3, wb);
                                bfly(&mut tile, dit, e0, e1, wc);
                                bfly(&mut tile, dit, e2, e3, wc);
                            }
                        }
                        assert!(touched.iter().all(|&c| c == 1), "radix-4 step {s} of {p:?}");
                    }
                }
                for e in (0..ept).flat_map(|u| (0..nthr).map(move |th| (th + u * nthr) as u32)) {
                    let (row, c) = (e >> lg_c, e & cmask);
                    let pos = pos_of(row, c);
                    let mut x = tile[e as usize];
                    if flags & F_TWIDDLE != 0 {
                        // The inter-pass twiddle of the pass geometry (tk, tr) at pos.
                        let (tk, tr) = tw_fields(flags);
                        assert!(tk + tr <= lg_n, "twiddle geometry inside the polynomial");
                        let (row_t, col_t) = ((pos >> tr) & ((1 << tk) - 1), pos & ((1 << tr) - 1));
                        if flags & F_TW_FOLD != 0 {
                            // The R = 0 odd-row forward twiddle pre-scaled for polynomial y.
                            assert!(
                                tr == 0
                                    && tk <= INT_LG
                                    && y < 3
                                    && lg_n < MAX_LG
                                    && flags & (F_ODD_ROW | F_ODD_COL | F_TW_INV) == F_ODD_ROW,
                                "kernel precondition of F_TW_FOLD"
                            );
                            let j = (bitrev(row_t as usize, tk) as u32) << (INT_LG - tk);
                            x *= t[T_HTW + ((((3 * lg_n) as usize + y) << INT_LG) | j as usize)];
                        } else {
                            let (ord, ex) = twiddle_exp(flags, tk + tr, tk, row_t, col_t);
                            x *= pass_twiddle(t, flags & F_TW_INV != 0, ord, ex);
                        }
                    }
                    if dit && flags & F_POST_ROW != 0 {
                        x *= t[if inv { T_INV_DIR } else { T_FWD_DIR }
                            + (row << (DIRECT_LG - 1 - k)) as usize];
                    }
                    let idx = if dit {
                        pos
                    } else {
                        bitrev(pos as usize, lg_n) as u32
                    };
                    poly[pos as usize] =
                        scale(x, t, flags, (F_POST_G, F_POST_GI, F_POST_NINV), idx, lg_n);
                }
            }
        }
    }

    pub(crate) fn bit_reverse(data: &mut [Fr], lg_n: u32) {
        for poly in data.chunks_mut(1 << lg_n) {
            for i in 0..poly.len() {
                let j = bitrev(i, lg_n);
                if i < j {
                    poly.swap(i, j);
                }
            }
        }
    }

    /// `cuzk_ntt_bit_reverse_tiled`, block by block, thread by thread.
    pub(crate) fn bit_reverse_tiled(data: &mut [Fr], lg_n: u32) {
        bit_reverse_tiled_with(data, lg_n, |_, x| x);
    }

    /// The kernels' `bit_reverse_tiled<QUOT>`: every element x loaded from index i (within its
    /// polynomial) is staged as `f(i, x)`.
    fn bit_reverse_tiled_with(data: &mut [Fr], lg_n: u32, f: impl Fn(usize, Fr) -> Fr) {
        const T: u32 = 5;
        const W: u32 = 1 << T;
        const P: u32 = W + 1;
        assert!(lg_n >= 2 * T, "kernel precondition");
        let mid = lg_n - 2 * T;
        let a_shift = lg_n - T;
        for poly in data.chunks_mut(1 << lg_n) {
            let mut written = vec![0u8; poly.len()];
            for m in 0..1u32 << mid {
                let mr = bitrev(m as usize, mid) as u32;
                if mr < m {
                    continue;
                }
                let at = |a: u32, set: u32, b: u32| ((a << a_shift) | (set << T) | b) as usize;
                let ab = |e: u32| (e >> T, e & (W - 1));
                // ra/rb: the registers of all 256 threads x 4, indexed by e = t + 256 u.
                let load = |set: u32, e: u32| {
                    let i = at(ab(e).0, set, ab(e).1);
                    f(i, poly[i])
                };
                let ra: Vec<Fr> = (0..W * W).map(|e| load(m, e)).collect();
                let rb: Vec<Fr> = (0..W * W)
                    .map(|e| if mr != m { load(mr, e) } else { Fr::ZERO })
                    .collect();
                let stage = |regs: &[Fr]| {
                    let mut tile = vec![None; (W * P) as usize];
                    for e in 0..W * W {
                        let (a, b) = ab(e);
                        let s = (bitrev(b as usize, T) as u32 * P + bitrev(a as usize, T) as u32)
                            as usize;
                        assert!(tile[s].is_none(), "shared slot written twice");
                        tile[s] = Some(regs[e as usize]);
                    }
                    (0..W * W)
                        .map(|e| tile[(ab(e).0 * P + ab(e).1) as usize].expect("slot not written"))
                        .collect::<Vec<Fr>>()
                };
                let out_a = stage(&ra);
                if mr != m {
                    let out_b = stage(&rb);
                    for e in 0..W * W {
                        let i = at(ab(e).0, m, ab(e).1);
                        poly[i] = out_b[e as usize];
                        written[i] += 1;
                    }
                }
                for e in 0..W * W {
                    let i = at(ab(e).0, mr, ab(e).1);
                    poly[i] = out_a[e as usize];
                    written[i] += 1;
                }
            }
            assert!(
                written.iter().all(|&w| w == 1),
                "every element written once"
            );
        }
    }

    /// The kernels' `hq`: (a·b − n·c)·K, `nk` = Some((n, K)), or (folded, `F_TW_FOLD`) a·b − c
    /// for `nk` = None.
    pub(crate) fn hq(a: Fr, b: Fr, c: Fr, nk: Option<(Fr, Fr)>) -> Fr {
        match nk {
            Some((n, k)) => (a * b - c * n) * k,
            None => a * b - c,
        }
    }

    /// `cuzk_ntt_quotient_bitrev`: a[bitrev i] = hq(a[i], b[i], c[i]), pair by pair.
    pub(crate) fn quotient_bit_reverse(
        a: &mut [Fr],
        b: &[Fr],
        c: &[Fr],
        nk: Option<(Fr, Fr)>,
        lg_n: u32,
    ) {
        for i in 0..a.len() {
            let j = bitrev(i, lg_n);
            if i > j {
                continue;
            }
            let qi = hq(a[i], b[i], c[i], nk);
            if i != j {
                a[i] = hq(a[j], b[j], c[j], nk);
            }
            a[j] = qi;
        }
    }

    /// `cuzk_ntt_quotient_bitrev_tiled`: the tiled permutation with the quotient on each load.
    pub(crate) fn quotient_bit_reverse_tiled(
        a: &mut [Fr],
        b: &[Fr],
        c: &[Fr],
        nk: Option<(Fr, Fr)>,
        lg_n: u32,
    ) {
        assert_eq!(a.len(), 1 << lg_n, "one polynomial");
        bit_reverse_tiled_with(a, lg_n, |i, x| hq(x, b[i], c[i], nk));
    }

    /// The fused quotient kernel the GPU code selects for 2^lg_n.
    pub(crate) fn quotient_permute(
        a: &mut [Fr],
        b: &[Fr],
        c: &[Fr],
        nk: Option<(Fr, Fr)>,
        lg_n: u32,
    ) {
        if tiled_bitrev(lg_n) {
            quotient_bit_reverse_tiled(a, b, c, nk, lg_n);
        } else {
            quotient_bit_reverse(a, b, c, nk, lg_n);
        }
    }

    /// The bit-reversal kernel the GPU code selects for 2^lg_n.
    pub(crate) fn permute(data: &mut [Fr], lg_n: u32) {
        if tiled_bitrev(lg_n) {
            bit_reverse_tiled(data, lg_n);
        } else {
            bit_reverse(data, lg_n);
        }
    }

    pub(crate) fn run(data: &mut [Fr], t: &[Fr], lg_n: u32, plan: &Plan) {
        if plan.permute_before {
            permute(data, lg_n);
        }
        for p in &plan.passes {
            pass(data, t, lg_n, *p);
        }
        if plan.permute_after {
            permute(data, lg_n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Domain, bit_reverse_index};
    use rand::SeedableRng;

    /// The kernels' thread mappings (kernels/ntt/ntt.cuh `pass`), for every tile geometry
    /// k + lg_c = TILE_LG: where the radix-4 group remap applies, each warp's 32 groups share
    /// j (so the j = 0 warps skip their w = 1 products) and the step still covers the tile
    /// once; the load / store order of an R = 0 tile of groups puts each quarter-warp's
    /// 16-byte accesses on 8 distinct bank groups and its global reads in runs.
    #[test]
    fn remapped_offsets_are_warp_uniform_and_group_tiles_conflict_free() {
        use emu::remap_group;
        let mut remapped = 0;
        for k in 2..=TILE_LG {
            let lg_c = TILE_LG - k;
            let nthr = 1u32 << (TILE_LG - 2);
            let odd = k & 1 == 1;
            for s in 0..k.div_ceil(2) {
                let lg_hi = k - 1 - 2 * s + u32::from(odd);
                if (odd && s == 0) || lg_hi < 3 {
                    continue;
                }
                let lg_lo = lg_hi - 1;
                let hh = 1u32 << lg_lo;
                let q_of = |t: u32| remap_group(t >> lg_c, k, lg_lo, lg_c, nthr);
                if q_of(1 << lg_c) == 1 {
                    continue; // not remapped
                }
                remapped += 1;
                let mut seen = vec![false; 1 << (k - 2 + lg_c)];
                for t in 0..nthr {
                    let q = q_of(t);
                    let i = ((q << lg_c) | (t & ((1 << lg_c) - 1))) as usize;
                    assert!(!seen[i], "remap is a permutation");
                    seen[i] = true;
                    let warp0 = t & !31;
                    assert_eq!(q & (hh - 1), q_of(warp0) & (hh - 1), "j uniform per warp");
                }
            }
            // The groups' load / store order (glo = 3 - lg_c low row bits first).
            let glo = 3u32.saturating_sub(lg_c);
            let place = |i: u32| {
                let row = ((i >> (glo + lg_c)) << glo) | (i & ((1 << glo) - 1));
                let cl = (i >> glo) & ((1 << lg_c) - 1);
                (row, cl)
            };
            let mut seen = vec![false; 1 << TILE_LG];
            for i in 0..1u32 << TILE_LG {
                let (row, cl) = place(i);
                let e = ((row << lg_c) | cl) as usize;
                assert!(!seen[e], "k {k}: the order covers the tile once");
                seen[e] = true;
            }
            for quarter in 0..(1u32 << TILE_LG) / 8 {
                let banks: std::collections::BTreeSet<u32> = (0..8)
                    .map(|i| {
                        let (row, cl) = place(quarter * 8 + i);
                        ((row << lg_c) | cl) & 7
                    })
                    .collect();
                assert!(lg_c > 3 || banks.len() == 8, "k {k}: bank conflict");
            }
        }
        // the (8, 4) step of every tile with k >= 7, among others
        assert!(remapped >= 4, "{remapped}");
    }

    fn random(n: usize, seed: u64) -> Vec<Fr> {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        (0..n).map(|_| Fr::random(&mut rng)).collect()
    }

    fn cpu(d: &Domain, v: &mut [Fr], t: Transform) {
        match t {
            Transform::Forward => d.fft_in_place(v),
            Transform::Inverse => d.ifft_in_place(v),
            Transform::CosetForward => d.coset_fft_in_place(v),
            Transform::CosetInverse => d.coset_ifft_in_place(v),
        }
        .unwrap()
    }

    fn reorder(v: &[Fr], order: Order, lg_n: u32) -> Vec<Fr> {
        match order {
            Order::Natural => v.to_vec(),
            Order::BitReversed => (0..v.len())
                .map(|i| v[bit_reverse_index(i, lg_n)])
                .collect(),
        }
    }

    #[test]
    fn split_override_parses_and_applies_to_its_size_only() {
        assert_eq!(parse_split("10,8,6"), Some(vec![10, 8, 6]));
        assert_eq!(parse_split(" 7, 7,10 "), Some(vec![7, 7, 10]));
        for bad in [
            "",
            "10,,6",
            "10,8,x",
            "11,7,6",
            "1,10,10,3",
            "-1,25",
            "10;8;6",
        ] {
            assert_eq!(parse_split(bad), None, "{bad:?}");
        }
        let over = [10u32, 8, 6];
        let bits = |lg: u32, dit: bool| -> Vec<u32> {
            let mut v: Vec<u32> = network_split(lg, dit, false, 0, 0, false, Some(&over))
                .iter()
                .map(|p| p.k)
                .collect();
            if dit {
                v.reverse();
            }
            v
        };
        assert_eq!(bits(24, false), vec![10, 8, 6]);
        assert_eq!(bits(24, true), vec![10, 8, 6]);
        assert_eq!(bits(26, false), split(26));
        // The wide plan ignores it.
        assert!(
            network_split(24, false, false, 0, 0, true, Some(&over))
                .iter()
                .all(|p| p.wide && p.k == 12)
        );
        let (a, b, c) = quotient_plan_split(24, false, Some(&over));
        for net in [a, b, c] {
            let mut ks: Vec<u32> = net.iter().map(|p| p.k).collect();
            if net[0].flags & F_DIT != 0 {
                ks.reverse();
            }
            assert_eq!(ks, vec![10, 8, 6]);
        }
    }

    #[test]
    fn splits_are_balanced() {
        assert_eq!(split(24), vec![8, 8, 8]);
        assert_eq!(split(26), vec![8, 9, 9]);
        assert_eq!(split(28), vec![9, 9, 10]);
        assert_eq!(split(10), vec![10]);
        assert_eq!(split(11), vec![5, 6]);
        assert_eq!(split(1), vec![1]);
        for lg in 1..=28 {
            let s = split(lg);
            assert_eq!(s.iter().sum::<u32>(), lg);
            assert!(s.iter().all(|&k| (1..=TILE_LG).contains(&k)));
        }
    }

    #[test]
    fn tables_have_the_layout_of_the_kernels() {
        let t = tables();
        assert_eq!(t.len(), T_LEN);
        let w = Fr::root_of_unity_of_order(MAX_LG).unwrap();
        assert_eq!(emu_pow(&t, T_FWD_LO, 123_456_789), w.pow(&[123_456_789]));
        assert_eq!(emu_pow(&t, T_INV_LO, 5) * w.pow(&[5]), Fr::ONE);
        assert_eq!(
            emu_pow(&t, T_G_LO, (1 << 28) - 1),
            Fr::from_u64(7).pow(&[(1 << 28) - 1])
        );
        assert_eq!(t[T_FWD_INT + 1], Fr::root_of_unity_of_order(10).unwrap());
        assert_eq!(t[T_NINV + 20] * Fr::from_u64(1 << 20), Fr::ONE);
        assert_eq!(
            t[T_FWD_DIR + 12_345],
            w.pow(&[12_345 << (MAX_LG - DIRECT_LG)])
        );
        assert_eq!(t[T_INV_DIR + 777] * t[T_FWD_DIR + 777], Fr::ONE);
        assert_eq!(GN_LEN, (1 << 15) + 13);
        let (g, n_inv) = (Fr::from_u64(7), |lg: u32| {
            Fr::from_u64(1 << lg).inverse().unwrap()
        });
        assert_eq!(t[T_GN_HI + gn_off(3)], n_inv(3));
        assert_eq!(
            t[T_GN_HI + gn_off(20) + 5],
            g.pow(&[5 << SPLIT_BITS]) * n_inv(20)
        );
        assert_eq!(
            t[T_GIN_HI + gn_off(28) + (1 << 14) - 1] * g.pow(&[((1 << 14) - 1) << SPLIT_BITS]),
            n_inv(28)
        );
        assert_eq!(
            t[T_FWD_DIR + 1],
            Fr::root_of_unity_of_order(DIRECT_LG).unwrap()
        );
        // K_L = 1/(Z·n^3): Z = −2 (half-root coset) up to 2^27, g^n − 1 at 2^28; n = 2^L.
        let n_inv3 = |lg: u32| n_inv(lg) * n_inv(lg) * n_inv(lg);
        assert_eq!(t[T_HK + 16] * -Fr::from_u64(2), n_inv3(16));
        assert_eq!(t[T_HK + 27] * -Fr::from_u64(2), n_inv3(27));
        assert_eq!(
            t[T_HK + 28],
            Domain::new(28).unwrap().vanishing_on_coset_inverse() * n_inv3(28)
        );
        assert_eq!(t[T_HN + 20], Fr::from_u64(1 << 20));
        // T_HTW: the quotient constants times w_2048^j for a, b, c of each L < MAX_LG, after
        // everything else.
        assert_eq!(T_HTW + HTW_LEN, T_LEN);
        assert_eq!(HTW_LEN, 3 * 28 * 1024);
        let w2048 = Fr::root_of_unity_of_order(INT_LG + 1).unwrap();
        for (lg, j) in [(0usize, 0u64), (1, 1), (16, 513), (24, 1000), (27, 1023)] {
            let at = |y: usize| t[T_HTW + ((3 * lg + y) << INT_LG) + j as usize];
            let (k, n) = (t[T_HK + lg], Fr::from_u64(1 << lg));
            assert_eq!(at(0), k * w2048.pow(&[j]), "a 2^{lg} j {j}");
            assert_eq!(at(1), w2048.pow(&[j]), "b 2^{lg} j {j}");
            assert_eq!(at(2), n * k * w2048.pow(&[j]), "c 2^{lg} j {j}");
        }
        // The unscaled entries agree with the internal table on the even exponents.
        assert_eq!(t[T_HTW + (1 << INT_LG) + 2 * 77], t[T_FWD_INT + 77]);
        // w_2N for N = 2^27 is in the direct table's range of orders.
        assert_eq!(
            t[T_FWD_DIR + (1 << (DIRECT_LG - 1))],
            -Fr::ONE,
            "w_(2^DIRECT_LG)^(2^(DIRECT_LG-1)) = -1"
        );
    }

    /// The roots table's index math (kernels' `pass_twiddle`, mirrored by `emu::roots_twiddle`)
    /// against the split tables, at order 20 for every twiddle order it serves, both ways.
    #[test]
    fn roots_table_gives_the_split_twiddles() {
        let t = tables();
        let lg = DIRECT_LG + 1;
        let w = Fr::root_of_unity_of_order(lg).unwrap();
        let mut roots = vec![Fr::ONE; 1 << (lg - 1)];
        for i in 1..roots.len() {
            roots[i] = roots[i - 1] * w;
        }
        let mut x = 0x9e37_79b9_u32;
        for ord in [1, DIRECT_LG, lg] {
            for j in 0..200u32 {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let e = match j {
                    0 => 0,
                    1 => 1 << (ord - 1), // -1
                    _ => x >> (32 - ord),
                };
                let ex = e << (MAX_LG - ord);
                for inv in [false, true] {
                    let want = emu_pow(&t, if inv { T_INV_LO } else { T_FWD_LO }, ex);
                    let got = emu::roots_twiddle(&roots, lg, inv, ex);
                    assert_eq!(got, want, "ord {ord} e {e} inv {inv}");
                }
            }
        }
    }

    /// Which order of roots table a plan asks for: the largest store-side twiddle order above
    /// DIRECT_LG, under the cap.
    #[test]
    fn roots_order_of_plans() {
        use crate::Order::*;
        let fwd = |lg| plan_split(lg, Transform::Forward, Natural, BitReversed, false, None).passes;
        assert_eq!(roots_order(&fwd(19), MAX_LG), 0);
        assert_eq!(roots_order(&fwd(20), MAX_LG), 20);
        assert_eq!(roots_order(&fwd(24), MAX_LG), 24);
        assert_eq!(roots_order(&fwd(26), MAX_LG), 26);
        assert_eq!(
            roots_order(&fwd(26), 25),
            0,
            "only the first pass is above 19"
        );
        let h = |lg| {
            let (a, b, c) = quotient_plan_split(lg, false, None);
            roots_order(&[a, b, c].concat(), MAX_LG)
        };
        assert_eq!(
            h(24),
            25,
            "the half-root coset's odd twiddles are of order 2N"
        );
        assert_eq!(h(27), 28);
        assert_eq!(roots_cap_from(None), MAX_LG);
        assert_eq!(roots_cap_from(Some("0")), 0);
        assert_eq!(roots_cap_from(Some(" 24 ")), 24);
        assert_eq!(roots_cap_from(Some("40")), MAX_LG);
        assert_eq!(roots_cap_from(Some("x")), MAX_LG);
    }

    fn emu_pow(t: &[Fr], off: usize, e: u32) -> Fr {
        let lo = t[off + (e as usize & (SPLIT - 1))];
        lo * t[off + SPLIT + (e >> SPLIT_BITS) as usize]
    }

    /// The plan with the radix-4 kernel chosen (where `k >= 2`) or not.
    fn with_radix4(mut p: Plan, radix4: bool) -> Plan {
        for pass in &mut p.passes {
            pass.radix4 = radix4 && pass.k >= 2;
        }
        p
    }

    /// Test vectors for `kernels/ntt/host_emu` (the CUDA sources run on the host with emulated
    /// threads): `CUZK_NTT_DUMP=dir cargo test --release -p cuzk-ntt dump_host_emu_vectors --
    /// --ignored`. Writes the table buffer and, per case, the plan, input and CPU result.
    #[test]
    #[ignore = "writes files for kernels/ntt/host_emu"]
    fn dump_host_emu_vectors() {
        use std::io::Write;
        let dir = std::path::PathBuf::from(std::env::var("CUZK_NTT_DUMP").expect("CUZK_NTT_DUMP"));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = |v: &[Fr]| -> Vec<u8> { bytemuck::cast_slice(v).to_vec() };
        std::fs::write(dir.join("tables.bin"), bytes(&tables())).unwrap();
        let mut list = std::fs::File::create(dir.join("cases.txt")).unwrap();
        // "id lg_n batch permute_before permute_after passes (radix4 s0 k lg_c flags)*"
        let write_case =
            |list: &mut std::fs::File, i: usize, lg_n: u32, batch: usize, p: &Plan, spec: bool| {
                write!(
                    list,
                    "{i} {lg_n} {batch} {} {} {}",
                    u8::from(p.permute_before),
                    u8::from(p.permute_after),
                    p.passes.len()
                )
                .unwrap();
                for q in &p.passes {
                    // 0 radix-2, 1 radix-4, 2 wide, 3 radix-4 specialized for the flags.
                    let r4 = match (q.wide, q.radix4, spec) {
                        (true, _, _) => 2,
                        (false, true, true) => 3,
                        (false, r4, _) => u8::from(r4),
                    };
                    write!(list, " {r4} {} {} {} {}", q.s0, q.k, q.lg_c, q.flags).unwrap();
                }
                writeln!(list).unwrap();
            };
        let cases = [
            (2u32, Transform::Forward, Order::Natural, Order::BitReversed),
            (3, Transform::Inverse, Order::BitReversed, Order::Natural),
            (5, Transform::CosetForward, Order::Natural, Order::Natural),
            (
                10,
                Transform::CosetInverse,
                Order::BitReversed,
                Order::BitReversed,
            ),
            (11, Transform::Forward, Order::Natural, Order::Natural),
            (12, Transform::CosetInverse, Order::Natural, Order::Natural),
            (
                13,
                Transform::CosetForward,
                Order::BitReversed,
                Order::Natural,
            ),
            (16, Transform::Forward, Order::Natural, Order::Natural),
            // The pre-scaled DIF pass with the twiddle (cuzk_ntt_pass4_dif_tw_pre).
            (14, Transform::CosetForward, Order::Natural, Order::Natural),
            (
                17,
                Transform::CosetInverse,
                Order::BitReversed,
                Order::Natural,
            ),
            (19, Transform::Inverse, Order::Natural, Order::Natural),
            (
                20,
                Transform::CosetForward,
                Order::BitReversed,
                Order::BitReversed,
            ),
            // Wide: 11 + 10, the top DIT stages' twiddles from the direct table.
            (21, Transform::Forward, Order::BitReversed, Order::Natural),
        ];
        for (i, (lg_n, tr, input, output)) in cases.into_iter().enumerate() {
            let d = Domain::new(lg_n).unwrap();
            let n = d.size();
            // Batches of 2 to 4: polynomials 1, 2 and 3 reach the kernels through the data1 and
            // data2 arguments (`poly_base`).
            let batch = match lg_n {
                0..=5 => 4,
                6..=10 => 3,
                11..=12 => 2,
                _ => 1,
            };
            let x = random(n * batch, 1000 + i as u64);
            let dev: Vec<Fr> = x.chunks(n).flat_map(|p| reorder(p, input, lg_n)).collect();
            let want: Vec<Fr> = x
                .chunks(n)
                .flat_map(|p| {
                    let mut w = p.to_vec();
                    cpu(&d, &mut w, tr);
                    reorder(&w, output, lg_n)
                })
                .collect();
            std::fs::write(dir.join(format!("in{i}.bin")), bytes(&dev)).unwrap();
            std::fs::write(dir.join(format!("want{i}.bin")), bytes(&want)).unwrap();
            for (radix4, spec) in [(false, false), (true, false), (true, true)] {
                let p = with_radix4(plan_with(lg_n, tr, input, output, false), radix4);
                write_case(&mut list, i, lg_n, batch, &p, spec);
            }
            if lg_n >= WIDE_MIN_LG {
                write_case(
                    &mut list,
                    i,
                    lg_n,
                    batch,
                    &plan_with(lg_n, tr, input, output, true),
                    false,
                );
            }
        }
        // The quotient pipeline: two "Q"-prefixed lines per case: the passes run once over
        // a, b, c (grid.y = 3, three separate buffers), the fused quotient with bit-reversed
        // output (element-wise, and tiled from 2^10, both checked), the DIT back. Satisfied
        // inputs (c = a∘b, so Z divides A·B − C and H does not depend on the coset) against
        // `Domain::quotient` (g coset), odd ones (random c) against the half-root reference.
        // Last field: a split override (DIF-order bits) or none.
        let quotient_cases: [(usize, u32, bool, &[u32]); 9] = [
            (110, 4, true, &[]),
            (111, 9, true, &[]),
            (112, 10, true, &[]),
            (113, 11, true, &[]),
            (114, 12, false, &[]),
            (115, 17, true, &[]),
            (116, 13, true, &[3, 6, 4]),
            (117, 14, false, &[2, 10, 2]),
            (118, 15, true, &[7, 8]),
        ];
        for (i, lg_n, satisfied, over) in quotient_cases {
            let d = Domain::new(lg_n).unwrap();
            let n = d.size();
            let (a, b, c) = quotient_inputs(n, 7 + i as u64, satisfied);
            let want = if satisfied {
                d.quotient(&a, &b, &c).unwrap()
            } else {
                d.gpu_coset_quotient(&a, &b, &c).unwrap()
            };
            for (name, v) in [("a", &a), ("b", &b), ("c", &c), ("want", &want)] {
                std::fs::write(dir.join(format!("{name}{i}.bin")), bytes(v)).unwrap();
            }
            let over = (!over.is_empty()).then_some(over);
            for (wide, radix4, spec) in [
                (false, false, false),
                (false, true, false),
                (false, true, true),
                (true, true, false),
            ] {
                if wide && lg_n < WIDE_MIN_LG {
                    continue;
                }
                let (to_coeffs, to_coset, back) = quotient_plan_split(lg_n, wide, over);
                for passes in [[to_coeffs, to_coset].concat(), back] {
                    let p = with_radix4(
                        Plan {
                            permute_before: false,
                            passes,
                            permute_after: false,
                        },
                        radix4 || wide,
                    );
                    write!(list, "Q ").unwrap();
                    write_case(&mut list, i, lg_n, 1, &p, spec);
                }
            }
        }
    }

    /// Inputs of the quotient tests: random a, b and c, or (`satisfied`) c = a∘b, so that Z
    /// divides A·B − C (as for every satisfied Groth16 witness) and H is the same on every coset.
    fn quotient_inputs(n: usize, seed: u64, satisfied: bool) -> (Vec<Fr>, Vec<Fr>, Vec<Fr>) {
        let (a, b) = (random(n, seed), random(n, seed + 1));
        let c = if satisfied {
            a.iter().zip(&b).map(|(x, y)| *x * *y).collect()
        } else {
            random(n, seed + 2)
        };
        (a, b, c)
    }

    #[test]
    fn tiled_bit_reverse_is_the_permutation() {
        for lg_n in [10u32, 11, 12, 13, 16] {
            let n = 1usize << lg_n;
            let x = random(2 * n, u64::from(lg_n));
            let mut got = x.clone();
            emu::bit_reverse_tiled(&mut got, lg_n);
            let mut want = x;
            emu::bit_reverse(&mut want, lg_n);
            assert!(got == want, "2^{lg_n}");
        }
    }

    #[test]
    fn specialized_is_the_default_and_0_turns_it_off() {
        use std::ffi::OsStr;
        assert!(specialized_from(None));
        for v in ["", "1", "yes", "00"] {
            assert!(specialized_from(Some(OsStr::new(v))), "{v:?}");
        }
        for v in ["0", " 0 "] {
            assert!(!specialized_from(Some(OsStr::new(v))), "{v:?}");
        }
    }

    /// Every radix-4 pass of every plan has its own specialized kernel (the default; none
    /// falls back to the generic `cuzk_ntt_pass4`, which only `CUZK_NTT_SPECIALIZED=0` runs).
    #[test]
    fn every_plan_pass_has_a_specialized_kernel() {
        let mut passes = Vec::new();
        for lg in 1..=28 {
            for tr in Transform::ALL {
                for input in [Order::Natural, Order::BitReversed] {
                    for output in [Order::Natural, Order::BitReversed] {
                        passes.extend(plan_with(lg, tr, input, output, false).passes);
                    }
                }
            }
            for half_root in [false, lg <= H_HALF_ROOT_MAX_LG] {
                let (a, b, c) = quotient_plan_coset(lg, false, None, half_root);
                passes.extend(a.into_iter().chain(b).chain(c));
            }
        }
        for p in passes.iter().filter(|p| p.radix4 && !p.wide) {
            let name = cuzk_gpu::ntt::specialized_name(p.flags);
            assert_ne!(name, "cuzk_ntt_pass4", "{p:?}");
        }
    }

    #[test]
    fn radix4_is_used_where_allowed() {
        for lg in 1..=28 {
            for p in plan(lg, Transform::Forward, Order::Natural, Order::Natural).passes {
                assert_eq!(p.radix4, radix4_enabled() && p.k >= 2, "2^{lg} {p:?}");
            }
        }
    }

    /// Every transform, every order pair, sizes covering one, two and three passes, batches,
    /// on both the radix-2 and the radix-4 kernel.
    #[test]
    fn emulated_kernels_match_cpu() {
        for radix4 in [false, true] {
            emulated_kernels_match_cpu_with(radix4);
        }
    }

    fn emulated_kernels_match_cpu_with(radix4: bool) {
        let t = tables();
        // 16 = 8+8 and 18 = 9+9 are the pass sizes of 2^24 and 2^26/2^27.
        for lg_n in [1u32, 2, 3, 4, 5, 10, 11, 12, 16, 18, 21] {
            let d = Domain::new(lg_n).unwrap();
            let n = d.size();
            let batch = if lg_n <= 11 { 3 } else { 1 };
            for tr in Transform::ALL {
                for input in [Order::Natural, Order::BitReversed] {
                    for output in [Order::Natural, Order::BitReversed] {
                        // The three-pass size once for DIF and once for DIT, all fused scalings.
                        let big_ok = (tr, input, output)
                            == (Transform::CosetInverse, Order::Natural, Order::Natural)
                            || (tr, input, output)
                                == (Transform::CosetForward, Order::BitReversed, Order::Natural);
                        if lg_n >= 16 && !big_ok {
                            continue;
                        }
                        let x = random(n * batch, u64::from(lg_n) * 31 + tr as u64);
                        let mut dev: Vec<Fr> =
                            x.chunks(n).flat_map(|p| reorder(p, input, lg_n)).collect();
                        let p = with_radix4(plan(lg_n, tr, input, output), radix4);
                        emu::run(&mut dev, &t, lg_n, &p);
                        for (b, poly) in x.chunks(n).enumerate() {
                            let mut want = poly.to_vec();
                            cpu(&d, &mut want, tr);
                            let want = reorder(&want, output, lg_n);
                            assert!(
                                dev[b * n..(b + 1) * n] == want[..],
                                "2^{lg_n} {tr:?} {input:?}->{output:?} poly {b} radix4 {radix4}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn wide_plan_shapes() {
        let shape = |lg: u32| -> Vec<(u32, u32)> {
            plan_with(
                lg,
                Transform::Forward,
                Order::Natural,
                Order::BitReversed,
                true,
            )
            .passes
            .iter()
            .map(|p| {
                assert!(p.wide && p.k >= 2 && p.k + p.lg_c <= WIDE_TILE_LG && p.k + p.lg_c >= 3);
                (p.k, p.lg_c)
            })
            .collect()
        };
        assert_eq!(shape(24), vec![(12, 0), (12, 0)]);
        assert_eq!(shape(22), vec![(11, 1), (11, 0)]);
        assert_eq!(shape(20), vec![(10, 2), (10, 0)]);
        assert_eq!(shape(26), vec![(9, 3), (9, 3), (8, 0)]);
        assert_eq!(shape(27), vec![(9, 3), (9, 3), (9, 0)]);
        // Below WIDE_MIN_LG the wide request falls back to the default plan.
        for lg in 1..WIDE_MIN_LG {
            assert!(
                plan_with(lg, Transform::Forward, Order::Natural, Order::Natural, true)
                    .passes
                    .iter()
                    .all(|p| !p.wide)
            );
        }
        for lg in 1..=28 {
            assert!(
                plan_with(
                    lg,
                    Transform::Inverse,
                    Order::Natural,
                    Order::Natural,
                    false
                )
                .passes
                .iter()
                .all(|p| !p.wide)
            );
        }
    }

    /// The wide plan (k up to 12: internal twiddles of the top stages from the direct table)
    /// against the CPU: DIF and DIT, fused scalings, 2^16..2^24, and the quotient at 2^17.
    #[test]
    fn emulated_wide_plan_matches_cpu() {
        let t = tables();
        let cases = [
            (
                16u32,
                Transform::CosetInverse,
                Order::Natural,
                Order::Natural,
            ),
            (
                17,
                Transform::CosetForward,
                Order::BitReversed,
                Order::Natural,
            ),
            (19, Transform::Forward, Order::Natural, Order::BitReversed),
            (21, Transform::Inverse, Order::BitReversed, Order::Natural),
            (22, Transform::CosetForward, Order::Natural, Order::Natural),
            (
                23,
                Transform::CosetInverse,
                Order::BitReversed,
                Order::BitReversed,
            ),
            (24, Transform::Forward, Order::Natural, Order::Natural),
            (
                24,
                Transform::CosetForward,
                Order::BitReversed,
                Order::Natural,
            ),
        ];
        for (i, (lg_n, tr, input, output)) in cases.into_iter().enumerate() {
            let d = Domain::new(lg_n).unwrap();
            let x = random(d.size(), 700 + i as u64);
            let mut dev = reorder(&x, input, lg_n);
            let p = plan_with(lg_n, tr, input, output, true);
            assert!(p.passes.iter().all(|q| q.wide));
            emu::run(&mut dev, &t, lg_n, &p);
            let mut want = x;
            cpu(&d, &mut want, tr);
            assert!(
                dev == reorder(&want, output, lg_n),
                "wide 2^{lg_n} {tr:?} {input:?}->{output:?}"
            );
        }
        let lg_n = 17;
        let d = Domain::new(lg_n).unwrap();
        for satisfied in [true, false] {
            let (a, b, c) = quotient_inputs(d.size(), 41, satisfied);
            for half_root in [true, false] {
                let want = if satisfied || !half_root {
                    d.quotient(&a, &b, &c).unwrap()
                } else {
                    d.gpu_coset_quotient(&a, &b, &c).unwrap()
                };
                let got = emulated_quotient(&t, lg_n, [&a, &b, &c], true, None, half_root);
                assert_eq!(
                    got, want,
                    "wide 2^{lg_n} half-root {half_root} sat {satisfied}"
                );
            }
        }
    }

    /// The H pipeline as gpu.rs runs it, on the emulated kernels: the inputs' passes, the fused
    /// quotient with its bit-reversed output, the DIT `back`; on the half-root coset or (what
    /// 2^28 runs, here at any size with K computed for the size) the g coset.
    fn emulated_quotient(
        t: &[Fr],
        lg_n: u32,
        [a, b, c]: [&[Fr]; 3],
        wide: bool,
        over: Option<&[u32]>,
        half_root: bool,
    ) -> Vec<Fr> {
        let (to_coeffs, to_coset, back) = quotient_plan_coset(lg_n, wide, over, half_root);
        assert!(back.iter().chain(&to_coset).all(|p| p.flags & F_DIT != 0));
        assert!(to_coeffs.iter().all(|p| p.flags & F_DIT == 0));
        // No 1/n anywhere in the passes: it is in K.
        let all = to_coeffs.iter().chain(&to_coset).chain(&back);
        assert!(
            all.clone()
                .all(|p| p.flags & (F_PRE_NINV | F_POST_NINV) == 0)
        );
        // Every twiddle at a store: the last pass of each transform stores none, except
        // to_coeffs' on the half-root coset (to_coset's R = 0 twiddle, forward, odd rows).
        for net in [&to_coset, &back] {
            assert_eq!(net.last().unwrap().flags & F_TWIDDLE, 0);
        }
        let tw_last = to_coeffs.last().unwrap().flags;
        // The quotient's constants folded into that store (k ≤ INT_LG on the half-root coset).
        let fold = tw_last & F_TW_FOLD != 0;
        assert!(all.clone().filter(|p| p.flags & F_TW_FOLD != 0).count() <= 1);
        if half_root {
            assert!(all.clone().all(|p| p.flags & (F_PRE_G | F_POST_GI) == 0));
            let last_k = to_coeffs.last().unwrap().k;
            assert_eq!(fold, last_k <= INT_LG);
            assert_eq!(
                tw_last & TW_BITS & !F_TW_FOLD,
                F_TWIDDLE | F_ODD_ROW | tw_geometry(last_k, 0)
            );
            let n = to_coset.len();
            assert!(to_coset[..n - 1].iter().all(|p| p.flags & F_ODD_ROW != 0));
            assert!(to_coset.iter().all(|p| p.flags & F_TW_INV == 0));
            assert!(back.last().unwrap().flags & F_POST_ROW != 0);
        } else {
            assert_eq!(tw_last & F_TWIDDLE, 0);
        }
        // The passes run over a, b, c as polynomials 0, 1, 2 of one launch (grid.y = 3).
        let n = 1usize << lg_n;
        let mut abc = [a, b, c].concat();
        for p in to_coeffs.iter().chain(&to_coset) {
            assert_eq!(p.wide, wide && lg_n >= WIDE_MIN_LG);
            emu::pass(&mut abc, t, lg_n, *p);
        }
        let (mut a, b, c) = (
            abc[..n].to_vec(),
            abc[n..2 * n].to_vec(),
            abc[2 * n..].to_vec(),
        );
        let nk = if fold {
            None
        } else if half_root {
            Some((t[T_HN + lg_n as usize], t[T_HK + lg_n as usize]))
        } else {
            let d = Domain::new(lg_n).unwrap();
            let n_inv = Fr::from_u64(1 << lg_n).inverse().unwrap();
            Some((
                Fr::from_u64(1 << lg_n),
                d.vanishing_on_coset_inverse() * n_inv * n_inv * n_inv,
            ))
        };
        emu::quotient_permute(&mut a, &b, &c, nk, lg_n);
        for p in &back {
            emu::pass(&mut a, t, lg_n, *p);
        }
        a
    }

    #[test]
    fn emulated_quotient_matches_cpu() {
        let t = tables();
        // Below (element-wise fused kernel) and above (tiled) TILED_BITREV_MIN_LG, odd sizes,
        // one to three passes; satisfied inputs against `Domain::quotient` on both cosets,
        // random ones against the reference of each coset.
        for lg_n in [1u32, 2, 3, 4, 9, 10, 11, 12, 13, 21] {
            let d = Domain::new(lg_n).unwrap();
            let n = d.size();
            assert_eq!(
                tiled_bitrev(lg_n),
                lg_n >= 10 && TILED_BITREV && !env_set("CUZK_NTT_SIMPLE_BITREV")
            );
            for satisfied in [true, false] {
                if lg_n == 21 && !satisfied {
                    continue;
                }
                let (a, b, c) = quotient_inputs(n, u64::from(lg_n), satisfied);
                let want_g = d.quotient(&a, &b, &c).unwrap();
                let want_s = if satisfied {
                    want_g.clone()
                } else {
                    d.gpu_coset_quotient(&a, &b, &c).unwrap()
                };
                for (half_root, want) in [(true, &want_s), (false, &want_g)] {
                    let got = emulated_quotient(&t, lg_n, [&a, &b, &c], false, None, half_root);
                    assert!(
                        got == *want,
                        "2^{lg_n} half-root {half_root} satisfied {satisfied}"
                    );
                }
            }
        }
        // Split overrides (odd pass sizes in every position, the radix-2 minimum excluded).
        for (lg_n, over) in [
            (13u32, &[3u32, 6, 4][..]),
            (12, &[2, 8, 2]),
            (11, &[4, 7]),
            (14, &[5, 2, 2, 5]),
        ] {
            let d = Domain::new(lg_n).unwrap();
            let (a, b, c) = quotient_inputs(d.size(), 90 + u64::from(lg_n), true);
            let want = d.quotient(&a, &b, &c).unwrap();
            for half_root in [true, false] {
                let got = emulated_quotient(&t, lg_n, [&a, &b, &c], false, Some(over), half_root);
                assert!(got == want, "2^{lg_n} split {over:?} half-root {half_root}");
            }
        }
    }

    /// `F_TW_FOLD` is on to_coeffs' last pass exactly on the half-root coset with k ≤ INT_LG:
    /// not on the wide plan's 12-bit passes (2^24: 12 + 12) nor the g coset, and on no other pass.
    #[test]
    fn tw_fold_only_where_its_table_reaches() {
        for (lg_n, wide, half_root, folds) in [
            (24u32, false, true, true),
            (24, true, true, false),
            (23, true, true, false),
            (17, true, true, true),
            (27, false, true, true),
            (24, false, false, false),
            (1, false, true, true),
        ] {
            let (to_coeffs, to_coset, back) = quotient_plan_coset(lg_n, wide, None, half_root);
            let last = to_coeffs.last().unwrap();
            assert_eq!(last.flags & F_TW_FOLD != 0, folds, "2^{lg_n} wide {wide}");
            assert_eq!(folds, half_root && last.k <= INT_LG);
            let n = to_coeffs.len();
            let others = to_coeffs[..n - 1].iter().chain(&to_coset).chain(&back);
            assert!(others.clone().all(|p| p.flags & F_TW_FOLD == 0));
        }
    }

    /// Both fused quotient kernels are the quotient followed by the bit reversal, in place.
    #[test]
    fn fused_quotient_bit_reverse_is_quotient_then_permutation() {
        for lg_n in [0u32, 1, 3, 10, 11, 14] {
            let n = 1usize << lg_n;
            let (a, b, c) = (random(n, 11), random(n, 12), random(n, 13));
            let (nn, kk) = (random(1, 14)[0], random(1, 15)[0]);
            for nk in [Some((nn, kk)), None] {
                let mut want: Vec<Fr> = (0..n)
                    .map(|i| match nk {
                        Some(_) => (a[i] * b[i] - c[i] * nn) * kk,
                        None => a[i] * b[i] - c[i],
                    })
                    .collect();
                emu::bit_reverse(&mut want, lg_n);
                let mut got = a.clone();
                emu::quotient_bit_reverse(&mut got, &b, &c, nk, lg_n);
                assert!(got == want, "element-wise 2^{lg_n} {nk:?}");
                if lg_n >= TILED_BITREV_MIN_LG {
                    let mut got = a.clone();
                    emu::quotient_bit_reverse_tiled(&mut got, &b, &c, nk, lg_n);
                    assert!(got == want, "tiled 2^{lg_n} {nk:?}");
                }
            }
        }
    }
}
