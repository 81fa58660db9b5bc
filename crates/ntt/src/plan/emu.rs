//! The kernels of `kernels/ntt/ntt.cu` on the CPU, statement for statement.

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
    let radix4 = p.radix4();
    let Pass { s0, k, lg_c, flags } = p;
    assert!(k >= 1, "kernel precondition");
    let tile_lg = k + lg_c;
    assert!(tile_lg <= TILE_LG, "kernel precondition");
    let tile_n = 1usize << tile_lg;
    let ept = if radix4 { 4 } else { 2 };
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
            // w_(2h)^j from the internal table; None for the h = 1 stage (w = 1).
            let tw = |lg_h: u32, j: u32| {
                (lg_h > 0).then(|| {
                    assert!(lg_h < INT_LG, "internal table index");
                    t[itw + (j << (INT_LG - 1 - lg_h)) as usize]
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
                    let s =
                        (bitrev(b as usize, T) as u32 * P + bitrev(a as usize, T) as u32) as usize;
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
pub(crate) fn quotient_permute(a: &mut [Fr], b: &[Fr], c: &[Fr], nk: Option<(Fr, Fr)>, lg_n: u32) {
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
