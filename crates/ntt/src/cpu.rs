//! The parallel CPU transform: bit-reversal, then iterative radix-2 decimation in time. The
//! first stages run block by block (each block stays in L1/L2); the later ones are split into
//! chunks of butterflies so both cores share every stage.

use cuzk_field::Fr;
use rayon::prelude::*;

use crate::Domain;
use crate::arith::{self, L};

fn raw(v: &mut [Fr]) -> &mut [L] {
    bytemuck::cast_slice_mut(v)
}

/// Elements per parallel work item (128 KiB of Fr): large enough to amortize rayon's overhead.
pub(crate) const CHUNK: usize = 1 << 12;
/// Elements per cache block in which all early stages run before moving on (64 KiB).
const BLOCK: usize = 1 << 11;

/// Twiddle factors of one domain.
pub(crate) struct Twiddles {
    /// ω^j for j < n/2; stage with half-size m reads it at stride n/(2m).
    half: Vec<L>,
    /// The tables of the in-block stages, contiguous: stage m at [m − 1, 2m − 1).
    small: Vec<L>,
}

impl Twiddles {
    pub(crate) fn new(log_n: u32, omega: Fr) -> Self {
        let n = 1usize << log_n;
        let mut half = vec![Fr::ZERO; n / 2];
        fill_powers(&mut half, Fr::ONE, omega);
        let half: Vec<L> = half.into_iter().map(arith::limbs).collect();
        let block = n.min(BLOCK);
        let mut small = Vec::with_capacity(block.saturating_sub(1));
        let mut m = 1;
        while m < block {
            let stride = n / (2 * m);
            small.extend((0..m).map(|j| half[j * stride]));
            m *= 2;
        }
        Self { half, small }
    }
}

/// `out[i] = start · base^i`, in parallel.
pub(crate) fn fill_powers(out: &mut [Fr], start: Fr, base: Fr) {
    let b = arith::limbs(base);
    raw(out)
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut acc = arith::limbs(start * base.pow(&[(k * CHUNK) as u64]));
            for slot in chunk {
                *slot = acc;
                acc = arith::mul(&acc, &b);
            }
        });
}

/// `v[i] *= start · base^i`.
pub(crate) fn scale_by_powers(v: &mut [Fr], start: Fr, base: Fr) {
    let b = arith::limbs(base);
    raw(v)
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut acc = arith::limbs(start * base.pow(&[(k * CHUNK) as u64]));
            for x in chunk {
                *x = arith::mul(x, &acc);
                acc = arith::mul(&acc, &b);
            }
        });
}

/// `i` with its low `bits` bits reversed.
pub fn bit_reverse_index(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

pub(crate) fn bit_reverse(v: &mut [Fr], log_n: u32) {
    bit_reverse_raw(raw(v), log_n);
}

fn bit_reverse_raw(v: &mut [L], log_n: u32) {
    let n = v.len();
    if n <= CHUNK {
        for i in 0..n {
            let j = bit_reverse_index(i, log_n);
            if i < j {
                v.swap(i, j);
            }
        }
        return;
    }
    // Safe parallel permutation: gather from a copy.
    let src = v.to_vec();
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(k, chunk)| {
        for (j, x) in chunk.iter_mut().enumerate() {
            *x = src[bit_reverse_index(k * CHUNK + j, log_n)];
        }
    });
}

/// v[k] ← s·v[(n − k) mod n]: turns a forward transform into s·n times the inverse one.
pub(crate) fn reverse_tail_and_scale(v: &mut [Fr], s: Fr) {
    let scale = s != Fr::ONE;
    let s = arith::limbs(s);
    let v = raw(v);
    let n = v.len();
    if n >= 2 {
        let (head, tail) = v.split_at_mut(n / 2);
        let (mid, hi) = tail.split_at_mut(1);
        let lo = &mut head[1..];
        if scale {
            mid[0] = arith::mul(&mid[0], &s);
        }
        lo.par_chunks_mut(CHUNK)
            .zip(hi.par_rchunks_mut(CHUNK))
            .for_each(|(l, h)| {
                for (x, y) in l.iter_mut().zip(h.iter_mut().rev()) {
                    let (a, b) = (*x, *y);
                    if scale {
                        *x = arith::mul(&b, &s);
                        *y = arith::mul(&a, &s);
                    } else {
                        *x = b;
                        *y = a;
                    }
                }
            });
    }
    if scale {
        v[0] = arith::mul(&v[0], &s);
    }
}

/// The forward DFT X_k = Σ x_j ω^(jk), natural order in and out.
pub(crate) fn forward(domain: &Domain, v: &mut [Fr]) {
    let n = v.len();
    debug_assert_eq!(n, domain.size());
    if n == 1 {
        return;
    }
    let tw = domain.twiddles();
    let v = raw(v);
    bit_reverse_raw(v, domain.log_size());
    let block = n.min(BLOCK);
    v.par_chunks_mut(block)
        .for_each(|blk| block_stages(blk, &tw.small));
    let mut m = block;
    while m < n {
        let stride = n / (2 * m);
        v.par_chunks_mut(2 * m).for_each(|chunk| {
            let (lo, hi) = chunk.split_at_mut(m);
            lo.par_chunks_mut(CHUNK)
                .zip(hi.par_chunks_mut(CHUNK))
                .enumerate()
                .for_each(|(k, (lo, hi))| {
                    let first = k * CHUNK;
                    for (j, (x, y)) in lo.iter_mut().zip(hi).enumerate() {
                        butterfly(x, y, &tw.half[(first + j) * stride]);
                    }
                });
        });
        m *= 2;
    }
}

/// All stages whose butterflies stay inside `blk`.
fn block_stages(blk: &mut [L], small: &[L]) {
    for pair in blk.chunks_exact_mut(2) {
        let (x, y) = (pair[0], pair[1]);
        pair[0] = arith::add(&x, &y);
        pair[1] = arith::sub(&x, &y);
    }
    let mut m = 2;
    while m < blk.len() {
        let tws = &small[m - 1..2 * m - 1];
        for chunk in blk.chunks_exact_mut(2 * m) {
            let (lo, hi) = chunk.split_at_mut(m);
            // ω^0 = 1: skip the multiplication.
            let (x, y) = (lo[0], hi[0]);
            lo[0] = arith::add(&x, &y);
            hi[0] = arith::sub(&x, &y);
            for ((x, y), w) in lo.iter_mut().zip(hi.iter_mut()).zip(tws).skip(1) {
                butterfly(x, y, w);
            }
        }
        m *= 2;
    }
}

#[inline(always)]
fn butterfly(x: &mut L, y: &mut L, w: &L) {
    let t = arith::mul(y, w);
    *y = arith::sub(x, &t);
    *x = arith::add(x, &t);
}

/// `a[i] = (a[i]·b[i] − c[i])·z_inv`.
pub(crate) fn pointwise_quotient(a: &mut [Fr], b: &[Fr], c: &[Fr], z_inv: Fr) {
    let z = arith::limbs(z_inv);
    let b: &[L] = bytemuck::cast_slice(b);
    let c: &[L] = bytemuck::cast_slice(c);
    raw(a)
        .par_chunks_mut(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .zip(c.par_chunks(CHUNK))
        .for_each(|((a, b), c)| {
            for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                *a = arith::mul(&arith::sub(&arith::mul(a, b), c), &z);
            }
        });
}
