//! snarkjs's evaluation domain for BLS12-381's scalar field.
//!
//! ffjavascript (`wasm_field1.js`) takes its roots of unity from the smallest quadratic
//! non-residue g of r (found by counting up from 2 with Euler's criterion; 5 for BLS12-381):
//! w[s] = g^t with r − 1 = 2^s·t, t odd, and w[k] = w[k+1]². cuzk-ntt's domain uses 7's roots
//! (blst, bellperson, arkworks), a different set of generators of the same subgroups, and the
//! GPU plans bake those in; zkey H points are defined over snarkjs's, so this module has its
//! own CPU transform.

use cuzk_field::Fr;
use rayon::prelude::*;

/// The domain of size 2^log_n with snarkjs's roots.
#[derive(Clone, Debug)]
pub struct SnarkjsDomain {
    log_n: u32,
    /// ω_n^j for j < n/2.
    twiddles: Vec<Fr>,
    twiddles_inv: Vec<Fr>,
    /// ω_2n, the odd-coset shift (snarkjs's `Fr.w[power + 1]`).
    shift: Fr,
}

/// r − 1 = 2^32 · t.
fn odd_part() -> [u64; 4] {
    let mut e = Fr::MODULUS;
    e[0] -= 1;
    [
        (e[0] >> 32) | (e[1] << 32),
        (e[1] >> 32) | (e[2] << 32),
        (e[2] >> 32) | (e[3] << 32),
        e[3] >> 32,
    ]
}

/// The smallest quadratic non-residue of r, as ffjavascript finds it.
pub fn smallest_non_residue() -> Fr {
    let mut half = Fr::MODULUS;
    // (r − 1) / 2: r is odd, so shifting r right by one gives it.
    for i in 0..4 {
        half[i] = (half[i] >> 1) | if i < 3 { half[i + 1] << 63 } else { 0 };
    }
    let minus_one = -Fr::ONE;
    let mut g = Fr::from_u64(2);
    while g.pow(&half) != minus_one {
        g += Fr::ONE;
    }
    g
}

/// snarkjs's primitive 2^k-th root of unity, k ≤ 32.
pub fn snarkjs_root(k: u32) -> Option<Fr> {
    if k > Fr::TWO_ADICITY {
        return None;
    }
    let mut w = smallest_non_residue().pow(&odd_part());
    for _ in k..Fr::TWO_ADICITY {
        w = w.square();
    }
    Some(w)
}

impl SnarkjsDomain {
    /// Sizes up to 2^31 (the odd coset needs the 2n-th root; snarkjs's 2^32 case uses another
    /// shift, and nothing here holds such a vector).
    pub fn new(log_n: u32) -> Result<Self, String> {
        if log_n >= Fr::TWO_ADICITY || log_n == 0 {
            return Err(format!("domain 2^{log_n} is outside 2^1..=2^31"));
        }
        let n = 1usize << log_n;
        let w = snarkjs_root(log_n).expect("checked above");
        let shift = snarkjs_root(log_n + 1).expect("checked above");
        let w_inv = w.inverse().expect("a root is non-zero");
        Ok(Self {
            log_n,
            twiddles: powers(w, n / 2),
            twiddles_inv: powers(w_inv, n / 2),
            shift,
        })
    }

    pub fn size(&self) -> usize {
        1 << self.log_n
    }

    /// ω_n (the generator of the domain).
    pub fn generator(&self) -> Fr {
        if self.log_n == 1 {
            -Fr::ONE
        } else {
            self.twiddles[1]
        }
    }

    /// Evaluations at ω^j from coefficients, natural order in and out.
    pub fn fft(&self, v: &mut [Fr]) {
        transform(v, self.log_n, &self.twiddles);
    }

    /// Coefficients from evaluations at ω^j.
    pub fn ifft(&self, v: &mut [Fr]) {
        transform(v, self.log_n, &self.twiddles_inv);
        let n_inv = Fr::from_u64(v.len() as u64).inverse().expect("n < r");
        v.par_iter_mut().for_each(|x| *x *= n_inv);
    }

    /// From evaluations on the domain to evaluations at ω_2n·ω_n^j (snarkjs's ifft,
    /// `batchApplyKey(1, ω_2n)`, fft).
    pub fn to_odd_coset(&self, v: &mut [Fr]) {
        self.ifft(v);
        let shift = self.shift;
        const CHUNK: usize = 1 << 12;
        v.par_chunks_mut(CHUNK).enumerate().for_each(|(k, c)| {
            let mut p = shift.pow(&[(k * CHUNK) as u64]);
            for x in c {
                *x *= p;
                p *= shift;
            }
        });
        self.fft(v);
    }
}

fn powers(base: Fr, count: usize) -> Vec<Fr> {
    let mut out = Vec::with_capacity(count);
    let mut p = Fr::ONE;
    for _ in 0..count {
        out.push(p);
        p *= base;
    }
    out
}

/// Iterative radix-2 decimation in time: bit-reversal, then stages of butterflies; each stage
/// runs its blocks in parallel, or the butterflies of its one block when blocks are few.
fn transform(v: &mut [Fr], log_n: u32, tw: &[Fr]) {
    let n = v.len();
    debug_assert_eq!(n, 1 << log_n);
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - log_n);
        if i < j {
            v.swap(i, j);
        }
    }
    let mut m = 1;
    while m < n {
        let stride = n / (2 * m);
        let butterfly = |lo: &mut [Fr], hi: &mut [Fr], j0: usize| {
            for (j, (x, y)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                let t = *y * tw[(j0 + j) * stride];
                *y = *x - t;
                *x += t;
            }
        };
        if n / (2 * m) >= 64 {
            v.par_chunks_mut(2 * m).for_each(|blk| {
                let (lo, hi) = blk.split_at_mut(m);
                butterfly(lo, hi, 0);
            });
        } else {
            const PIECE: usize = 1 << 10;
            for blk in v.chunks_mut(2 * m) {
                let (lo, hi) = blk.split_at_mut(m);
                lo.par_chunks_mut(PIECE)
                    .zip(hi.par_chunks_mut(PIECE))
                    .enumerate()
                    .for_each(|(k, (l, h))| butterfly(l, h, k * PIECE));
            }
        }
        m *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snarkjs_generator_is_five_and_roots_have_their_order() {
        assert_eq!(smallest_non_residue(), Fr::from_u64(5));
        for k in [1u32, 2, 8, 20, 32] {
            let w = snarkjs_root(k).unwrap();
            let mut x = w;
            for _ in 0..k - 1 {
                x = x.square();
            }
            assert_eq!(x, -Fr::ONE, "w_2^{k} has order exactly 2^{k}");
        }
        // A different primitive root than blst's 7-based one.
        assert_ne!(snarkjs_root(16), Fr::root_of_unity_of_order(16));
    }

    #[test]
    fn fft_matches_direct_evaluation_and_inverts() {
        let d = SnarkjsDomain::new(5).unwrap();
        let coeffs: Vec<Fr> = (0..32u64).map(|i| Fr::from_u64(i * i + 3)).collect();
        let mut v = coeffs.clone();
        d.fft(&mut v);
        let w = d.generator();
        for (j, e) in v.iter().enumerate() {
            let x = w.pow(&[j as u64]);
            let direct = coeffs.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + *c);
            assert_eq!(*e, direct, "evaluation {j}");
        }
        d.ifft(&mut v);
        assert_eq!(v, coeffs);
        let mut odd = coeffs.clone();
        d.fft(&mut odd);
        d.to_odd_coset(&mut odd);
        let s = snarkjs_root(6).unwrap();
        for (j, e) in odd.iter().enumerate() {
            let x = s * w.pow(&[j as u64]);
            let direct = coeffs.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + *c);
            assert_eq!(*e, direct, "odd coset evaluation {j}");
        }
    }
}
