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
pub(crate) const T_ZINV: usize = T_NINV + MAX_LG as usize + 1;
pub(crate) const T_LEN: usize = T_ZINV + MAX_LG as usize + 1;
pub(crate) const TILE_LG: u32 = 10;

pub(crate) const F_DIT: u32 = 1 << 0;
pub(crate) const F_INVERSE: u32 = 1 << 1;
pub(crate) const F_TWIDDLE: u32 = 1 << 2;
pub(crate) const F_PRE_G: u32 = 1 << 3;
pub(crate) const F_PRE_GI: u32 = 1 << 4;
pub(crate) const F_PRE_NINV: u32 = 1 << 5;
pub(crate) const F_POST_G: u32 = 1 << 6;
pub(crate) const F_POST_GI: u32 = 1 << 7;
pub(crate) const F_POST_NINV: u32 = 1 << 8;

/// One launch of `cuzk_ntt_pass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub s0: u32,
    pub k: u32,
    pub lg_c: u32,
    pub flags: u32,
}

/// A whole transform: optional bit-reversal before, passes, optional bit-reversal after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub permute_before: bool,
    pub passes: Vec<Pass>,
    pub permute_after: bool,
}

/// Bits per pass, in DIF order: as few passes of ≤ TILE_LG bits as possible, balanced.
fn split(lg_n: u32) -> Vec<u32> {
    let passes = lg_n.div_ceil(TILE_LG);
    (0..passes)
        .map(|i| lg_n / passes + u32::from(i < lg_n % passes))
        .collect()
}

/// The passes of a DIF (natural → bit-reversed) or DIT (bit-reversed → natural) network,
/// with `pre` flags on the first pass executed and `post` flags on the last.
pub(crate) fn network(lg_n: u32, dit: bool, inverse: bool, pre: u32, post: u32) -> Vec<Pass> {
    let mut passes = Vec::new();
    let mut s0 = 0;
    for k in split(lg_n) {
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
            lg_c: r.min(TILE_LG - k),
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

pub(crate) fn plan(lg_n: u32, t: Transform, input: Order, output: Order) -> Plan {
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
        passes: network(lg_n, dit, inverse, pre, post),
        permute_after: output != native_out,
    }
}

/// The Groth16 quotient: per input, an inverse DIF (natural → bit-reversed coefficients) and a
/// coset DIT with 1/n and g^i fused into its load (→ natural evaluations on g·H); after the
/// point-wise step, an inverse DIF with g^-i/n fused into its store, then one permutation.
pub(crate) fn quotient_plan(lg_n: u32) -> (Vec<Pass>, Vec<Pass>, Vec<Pass>) {
    let to_coeffs = network(lg_n, false, true, 0, 0);
    let to_coset = network(lg_n, true, false, F_PRE_G | F_PRE_NINV, 0);
    let back = network(lg_n, false, true, 0, F_POST_GI | F_POST_NINV);
    (to_coeffs, to_coset, back)
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
    let mut acc = Fr::ONE;
    for _ in 0..=MAX_LG {
        t.push(acc);
        acc *= two_inv;
    }
    let mut g_pow = g; // g^(2^L)
    for _ in 0..=MAX_LG {
        t.push(
            (g_pow - Fr::ONE)
                .inverse()
                .expect("g is not a root of unity"),
        );
        g_pow = g_pow.square();
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
        if flags & bits.0 != 0 {
            x *= split_pow(t, T_G_LO, idx);
        }
        if flags & bits.1 != 0 {
            x *= split_pow(t, T_GI_LO, idx);
        }
        if flags & bits.2 != 0 {
            x *= t[T_NINV + lg_n as usize];
        }
        x
    }

    pub(crate) fn pass(data: &mut [Fr], t: &[Fr], lg_n: u32, p: Pass) {
        let Pass { s0, k, lg_c, flags } = p;
        let tile_lg = k + lg_c;
        let tile_n = 1usize << tile_lg;
        let half = tile_n / 2;
        let r_bits = lg_n - s0 - k;
        let chunks_lg = r_bits - lg_c;
        let dit = flags & F_DIT != 0;
        let inv = flags & F_INVERSE != 0;
        let cmask = (1u32 << lg_c) - 1;
        for poly in data.chunks_mut(1 << lg_n) {
            for blk in 0..(1u32 << (lg_n - tile_lg)) {
                let group = blk >> chunks_lg;
                let col0 = (blk & ((1 << chunks_lg) - 1)) << lg_c;
                let base = (group << (lg_n - s0)) + col0;
                let mut tile = vec![Fr::ZERO; tile_n];
                for e in 0..tile_n as u32 {
                    let (row, cl) = (e >> lg_c, e & cmask);
                    let pos = base + (row << r_bits) + cl;
                    let mut x = poly[pos as usize];
                    let idx = if dit {
                        bitrev(pos as usize, lg_n) as u32
                    } else {
                        pos
                    };
                    x = scale(x, t, flags, (F_PRE_G, F_PRE_GI, F_PRE_NINV), idx, lg_n);
                    if dit && flags & F_TWIDDLE != 0 {
                        let ex =
                            ((col0 + cl) * bitrev(row as usize, k) as u32) << (MAX_LG - lg_n + s0);
                        x *= split_pow(t, if inv { T_INV_LO } else { T_FWD_LO }, ex);
                    }
                    tile[e as usize] = x;
                }
                let itw = if inv { T_INV_INT } else { T_FWD_INT };
                for st in 0..k {
                    let lg_h = if dit { st } else { k - 1 - st };
                    let h = 1u32 << lg_h;
                    for th in 0..half as u32 {
                        let (cl, q) = (th & cmask, th >> lg_c);
                        let j = q & (h - 1);
                        let r = ((q >> lg_h) << (lg_h + 1)) | j;
                        let e0 = ((r << lg_c) | cl) as usize;
                        let e1 = e0 + (h << lg_c) as usize;
                        let w = t[itw + (j << (INT_LG - 1 - lg_h)) as usize];
                        let (x, mut y) = (tile[e0], tile[e1]);
                        if dit {
                            y *= w;
                            tile[e0] = x + y;
                            tile[e1] = x - y;
                        } else {
                            tile[e0] = x + y;
                            tile[e1] = (x - y) * w;
                        }
                    }
                }
                for e in 0..tile_n as u32 {
                    let (row, c) = (e >> lg_c, e & cmask);
                    let pos = base + (row << r_bits) + c;
                    let mut x = tile[e as usize];
                    if !dit && flags & F_TWIDDLE != 0 {
                        let ex =
                            ((col0 + c) * bitrev(row as usize, k) as u32) << (MAX_LG - lg_n + s0);
                        x *= split_pow(t, if inv { T_INV_LO } else { T_FWD_LO }, ex);
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

    pub(crate) fn run(data: &mut [Fr], t: &[Fr], lg_n: u32, plan: &Plan) {
        if plan.permute_before {
            bit_reverse(data, lg_n);
        }
        for p in &plan.passes {
            pass(data, t, lg_n, *p);
        }
        if plan.permute_after {
            bit_reverse(data, lg_n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Domain, bit_reverse_index};
    use rand::SeedableRng;

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
    fn splits_are_balanced() {
        assert_eq!(split(24), vec![8, 8, 8]);
        assert_eq!(split(26), vec![9, 9, 8]);
        assert_eq!(split(28), vec![10, 9, 9]);
        assert_eq!(split(10), vec![10]);
        assert_eq!(split(11), vec![6, 5]);
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
            t[T_ZINV + 16],
            Domain::new(16).unwrap().vanishing_on_coset_inverse()
        );
    }

    fn emu_pow(t: &[Fr], off: usize, e: u32) -> Fr {
        let lo = t[off + (e as usize & (SPLIT - 1))];
        lo * t[off + SPLIT + (e >> SPLIT_BITS) as usize]
    }

    /// Every transform, every order pair, sizes covering one, two and three passes, batches.
    #[test]
    fn emulated_kernels_match_cpu() {
        let t = tables();
        for lg_n in [1u32, 2, 3, 5, 10, 11, 12, 21] {
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
                        if lg_n == 21 && !big_ok {
                            continue;
                        }
                        let x = random(n * batch, u64::from(lg_n) * 31 + tr as u64);
                        let mut dev: Vec<Fr> =
                            x.chunks(n).flat_map(|p| reorder(p, input, lg_n)).collect();
                        emu::run(&mut dev, &t, lg_n, &plan(lg_n, tr, input, output));
                        for (b, poly) in x.chunks(n).enumerate() {
                            let mut want = poly.to_vec();
                            cpu(&d, &mut want, tr);
                            let want = reorder(&want, output, lg_n);
                            assert!(
                                dev[b * n..(b + 1) * n] == want[..],
                                "2^{lg_n} {tr:?} {input:?}->{output:?} poly {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn emulated_quotient_matches_cpu() {
        let t = tables();
        for lg_n in [1u32, 4, 12] {
            let d = Domain::new(lg_n).unwrap();
            let n = d.size();
            let (a, b, c) = (random(n, 1), random(n, 2), random(n, 3));
            let want = d.quotient(&a, &b, &c).unwrap();
            let (to_coeffs, to_coset, back) = quotient_plan(lg_n);
            let mut bufs = [a, b, c];
            for v in bufs.iter_mut() {
                for p in to_coeffs.iter().chain(&to_coset) {
                    emu::pass(v, &t, lg_n, *p);
                }
            }
            let [mut a, b, c] = bufs;
            let z = t[T_ZINV + lg_n as usize];
            for i in 0..n {
                a[i] = (a[i] * b[i] - c[i]) * z;
            }
            for p in &back {
                emu::pass(&mut a, &t, lg_n, *p);
            }
            emu::bit_reverse(&mut a, lg_n);
            assert_eq!(a, want, "2^{lg_n}");
        }
    }
}
