//! What the GPU kernels are asked to do: the pass sequence, flags and device table contents
//! (see `kernels/ntt/ntt.cuh`). Pure host logic, always compiled, so the plan is checked on the
//! CPU by an emulator of the kernels (tests below) even on machines without a GPU.

use cuzk_field::Fr;
use cuzk_gpu::Config;

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

// The kernels' table layout, flags and tile size (kernels/cuzk_shared.h).
pub(crate) use crate::kernels::TILE_LG;
pub(crate) use crate::kernels::flags::*;
pub(crate) use crate::kernels::layout::*;

/// The roots table (kernels' `ROOTS_LG`, `kernels::Twiddles`): an inter-pass twiddle of
/// order DIRECT_LG < ord <= D is one load from a table of w_(2^D)^i, i < 2^(D-1) (2^(D+4) bytes),
/// instead of the product of two split-table values. `CUZK_NTT_ROOTS_LG` caps D (default
/// MAX_LG; 0, or any value up to DIRECT_LG, turns the table off). Same result either way.
pub(crate) fn roots_cap() -> u32 {
    roots_cap_from(Config::get().ok().and_then(|c| c.ntt_roots_lg))
}

fn roots_cap_from(v: Option<u32>) -> u32 {
    v.map_or(MAX_LG, |lg| lg.min(MAX_LG))
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

/// Smallest size of the tiled bit-reversal kernels (`cuzk_ntt_bit_reverse_tiled`, the tiled
/// quotient); smaller sizes permute element by element.
pub(crate) const TILED_BITREV_MIN_LG: u32 = 10;

/// Whether a bit-reversal of 2^lg_n runs on the tiled kernel.
pub(crate) fn tiled_bitrev(lg_n: u32) -> bool {
    lg_n >= TILED_BITREV_MIN_LG
}

/// Every bit that describes an inter-pass twiddle.
const TW_BITS: u32 = F_TWIDDLE | F_ODD_ROW | F_ODD_COL | F_TW_INV | F_TW_FOLD | TW_FIELDS;

/// One launch of a pass kernel: `cuzk_ntt_pass4_*` (radix-4 steps) for `k >= 2`, the radix-2
/// `cuzk_ntt_pass` for the one-bit pass of a size-2 transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub s0: u32,
    pub k: u32,
    pub lg_c: u32,
    pub flags: u32,
}

impl Pass {
    /// Whether the pass runs on the radix-4 kernels (they need two bits at least).
    pub(crate) fn radix4(&self) -> bool {
        self.k >= 2
    }
}

/// A whole transform: optional bit-reversal before, passes, optional bit-reversal after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub permute_before: bool,
    pub passes: Vec<Pass>,
    pub permute_after: bool,
}

/// Bits per pass, in DIF order: as few passes of ≤ TILE_LG bits as possible, balanced, the
/// larger ones last (on the R = 0 side: 2^26 runs 8,9,9), which measured fastest
/// (crates/ntt/PERF-NOTES.md, session 10).
fn split(lg_n: u32) -> Vec<u32> {
    let mut bits = split_max(lg_n, TILE_LG);
    bits.reverse();
    bits
}

/// `CUZK_NTT_SPLIT` (for measuring splits on a GPU without a rebuild): the pass bits in DIF
/// order (the first pass executed by a DIF network, the last by a DIT), e.g. `10,8,6` for 2^24.
/// Used by every transform plan and the H pipeline of the size the bits sum to; ignored (the
/// default split) for any other size or when a pass is outside [`valid_split`]'s range.
pub(crate) fn split_override() -> Option<Vec<u32>> {
    Config::get()
        .ok()
        .and_then(|c| c.ntt_split.clone())
        .filter(|b| valid_split(b))
}

/// Whether every pass of a split has 2 (the radix-4 kernels' minimum) to TILE_LG bits.
pub(crate) fn valid_split(bits: &[u32]) -> bool {
    !bits.is_empty() && bits.iter().all(|&k| (2..=TILE_LG).contains(&k))
}

/// The split of a network of 2^lg_n: `over` where its bits sum to `lg_n`, else the default.
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
/// pass its groups (consecutive 2^k-element groups, up to all 2^s0 of them;
/// kernels/ntt/ntt.cuh `pass`), so that pass too runs full tiles of 2^tile_lg elements.
fn tile_cols(lg_n: u32, s0: u32, k: u32) -> u32 {
    let r = lg_n - s0 - k;
    if r == 0 {
        (TILE_LG - k).min(s0)
    } else {
        r.min(TILE_LG - k)
    }
}

/// The passes of a DIF (natural → bit-reversed) or DIT (bit-reversed → natural) network,
/// with `pre` flags on the first pass executed and `post` flags on the last; every inter-pass
/// twiddle at a store ([`store_twiddles`]); the split override `over` (DIF-order pass bits) is
/// used where its bits sum to `lg_n`, else the default split.
pub(crate) fn network_split(
    lg_n: u32,
    dit: bool,
    inverse: bool,
    pre: u32,
    post: u32,
    over: Option<&[u32]>,
) -> Vec<Pass> {
    let mut passes = network_own(lg_n, dit, inverse, pre, post, over);
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
    over: Option<&[u32]>,
) -> Vec<Pass> {
    let mut passes = Vec::new();
    let mut s0 = 0;
    for k in split_for(lg_n, over) {
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
            lg_c: tile_cols(lg_n, s0, k),
            flags,
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

/// The plan of transform `t` of 2^lg_n between the orders `input` and `output`, with the split
/// override `over` (as [`network_split`]).
pub(crate) fn plan_split(
    lg_n: u32,
    t: Transform,
    input: Order,
    output: Order,
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
        passes: network_split(lg_n, dit, inverse, pre, post, over),
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
/// bit-reversed; on the half-root coset K and n·K are folded into that store's twiddle for a and c (`F_TW_FOLD`, `T_HTW`) and it writes
/// a·b − c; `back` is an unscaled inverse DIT whose last
/// pass (s0 = 0) folds s^-i into its twiddle (`F_ODD_COL`) and a per-row factor
/// w_(2^(k+1))^-row (`F_POST_ROW`). At 2^MAX_LG (no w_(2^29)) the same steps run on the g coset:
/// g^i fused into to_coset's first load, g^-i into back's last store, K = 1/((g^N − 1)·n^3).
/// The gpu.rs pipeline runs each pass of `to_coeffs` and `to_coset` once over a, b and c
/// together (grid.y = 3). `over`: the split override (as [`network_split`]).
pub(crate) fn quotient_plan_split(
    lg_n: u32,
    over: Option<&[u32]>,
) -> (Vec<Pass>, Vec<Pass>, Vec<Pass>) {
    quotient_plan_coset(lg_n, over, lg_n <= H_HALF_ROOT_MAX_LG)
}

/// [`quotient_plan_split`] on the half-root coset (`half_root`, lg_n ≤ H_HALF_ROOT_MAX_LG) or the
/// g coset (what 2^MAX_LG runs; the tests run it at every size).
pub(crate) fn quotient_plan_coset(
    lg_n: u32,
    over: Option<&[u32]>,
    half_root: bool,
) -> (Vec<Pass>, Vec<Pass>, Vec<Pass>) {
    assert!(
        !half_root || lg_n <= H_HALF_ROOT_MAX_LG,
        "no w_2N in the tables"
    );
    let to_coeffs = network_own(lg_n, false, true, 0, 0, over);
    let (mut to_coset, mut back) = if half_root {
        let mut to_coset = network_own(lg_n, true, false, 0, 0, over);
        for p in &mut to_coset {
            p.flags |= F_TWIDDLE | F_ODD_ROW;
        }
        let mut back = network_own(lg_n, true, true, 0, 0, over);
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
            network_own(lg_n, true, false, F_PRE_G, 0, over),
            network_own(lg_n, true, true, 0, F_POST_GI, over),
        )
    };
    // to_coeffs and to_coset run one after the other on the same buffers: the twiddle of
    // to_coset's first pass (half-root: R = 0, F_ODD_ROW) goes to to_coeffs' last store.
    let first_coset = to_coeffs.len();
    let mut inputs = [to_coeffs, to_coset].concat();
    store_twiddles(lg_n, &mut inputs);
    to_coset = inputs.split_off(first_coset);
    // Half-root coset: fold the quotient's constants into that store (T_HTW, one table load in
    // place of the internal / direct one; its pass has k ≤ TILE_LG = INT_LG). The g coset
    // (2^MAX_LG) folds nothing.
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

/// A CPU emulator of the kernels of `kernels/ntt/ntt.cu`, statement for statement, to check the
/// plan and the index arithmetic without a GPU.
#[cfg(test)]
pub(crate) mod emu;

#[cfg(test)]
mod tests;
