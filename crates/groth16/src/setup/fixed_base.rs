//! Windowed fixed-base scalar multiplication: many `s_i · G` for one base G.
//!
//! The scalar is cut into w-bit digits; a table holds `d · 2^(w·k) · G` for every window k and
//! digit d ≠ 0, so each product costs at most ⌈255/w⌉ additions and no doublings (blst's
//! `mult` costs ~255 doublings plus additions). The additions are done in affine coordinates
//! for a whole chunk of scalars at once, window by window, sharing one field inversion per
//! window (Montgomery's trick): about 6 multiplications per addition instead of the 11 of a
//! mixed Jacobian addition, and the results come out affine with no conversion.

use core::ops::{Add, Mul, Neg, Sub};

use cuzk_field::{Fp, Fp2, Fr, G1Affine, G2Affine};
use cuzk_msm::MsmPoint;
use rayon::prelude::*;

/// Affine coordinates of a point type, for the batched affine additions.
pub(crate) trait AffinePoint: MsmPoint {
    type F: Copy
        + PartialEq
        + Send
        + Sync
        + Add<Output = Self::F>
        + Sub<Output = Self::F>
        + Mul<Output = Self::F>
        + Neg<Output = Self::F>;
    const ONE: Self::F;
    fn xy(&self) -> (Self::F, Self::F);
    fn from_xy(x: Self::F, y: Self::F) -> Self;
    fn square(f: Self::F) -> Self::F;
    fn inverse(f: Self::F) -> Option<Self::F>;
}

macro_rules! affine_point {
    ($p:ident, $f:ident) => {
        impl AffinePoint for $p {
            type F = $f;
            const ONE: $f = $f::ONE;
            fn xy(&self) -> ($f, $f) {
                (self.x(), self.y())
            }
            fn from_xy(x: $f, y: $f) -> Self {
                // Sums of subgroup points by the group law: valid by construction.
                $p::from_xy_unchecked(x, y)
            }
            fn square(f: $f) -> $f {
                f.square()
            }
            fn inverse(f: $f) -> Option<$f> {
                f.inverse()
            }
        }
    };
}
affine_point!(G1Affine, Fp);
affine_point!(G2Affine, Fp2);

const SCALAR_BITS: usize = 255;
/// Scalars per task; also the batch size of the shared-inversion affine conversion.
const CHUNK: usize = 1 << 10;
/// Largest window: 2^16 points per window is already ~100 MB of G2 table.
const MAX_WINDOW: usize = 16;

pub(crate) struct FixedBaseTable<P: AffinePoint> {
    window: usize,
    windows: usize,
    /// Window k, digit d (1 ≤ d < 2^w) at `k · (2^w − 1) + d − 1`.
    table: Vec<P>,
}

/// The window minimizing table building plus multiplication work for `count` products.
pub(crate) fn best_window(count: usize) -> usize {
    (1..=MAX_WINDOW)
        .min_by_key(|&w| SCALAR_BITS.div_ceil(w) * ((1usize << w) + count))
        .unwrap_or(1)
}

impl<P: AffinePoint> FixedBaseTable<P> {
    /// A table for `generator`, sized for about `count` multiplications.
    pub(crate) fn new(generator: P::Projective, count: usize) -> Self {
        Self::with_window(generator, best_window(count))
    }

    pub(crate) fn with_window(generator: P::Projective, window: usize) -> Self {
        let windows = SCALAR_BITS.div_ceil(window);
        let per_window = (1usize << window) - 1;
        let mut bases = Vec::with_capacity(windows);
        let mut base = generator;
        for _ in 0..windows {
            bases.push(base);
            for _ in 0..window {
                base = P::double(&base);
            }
        }
        let bases = P::batch_to_affine(&bases);
        let rows: Vec<Vec<P>> = bases
            .par_iter()
            .map(|b| {
                let mut multiples = Vec::with_capacity(per_window);
                let mut acc = P::Projective::default();
                for _ in 0..per_window {
                    acc += *b;
                    multiples.push(acc);
                }
                P::batch_to_affine(&multiples)
            })
            .collect();
        Self {
            window,
            windows,
            table: rows.concat(),
        }
    }

    /// The table, window k digit d (1 ≤ d < 2^w) at `k · (2^w − 1) + d − 1`.
    pub(crate) fn points(&self) -> &[P] {
        &self.table
    }

    #[cfg(test)]
    fn mul(&self, s: &Fr) -> P::Projective {
        let limbs = s.to_canonical();
        let per_window = (1usize << self.window) - 1;
        let mut acc = P::Projective::default();
        for k in 0..self.windows {
            let d = digit(&limbs, k * self.window, self.window);
            if d != 0 {
                acc += self.table[k * per_window + d - 1];
            }
        }
        acc
    }

    /// `s · G` for every scalar, in affine form, in parallel.
    pub(crate) fn batch_mul(&self, scalars: &[Fr]) -> Vec<P> {
        let mut out = vec![P::default(); scalars.len()];
        out.par_chunks_mut(CHUNK)
            .zip(scalars.par_chunks(CHUNK))
            .for_each(|(out, scalars)| self.batch_mul_affine(scalars, out));
        out
    }

    /// The reference path: one Jacobian accumulator per scalar (used by tests).
    #[cfg(test)]
    fn batch_mul_jacobian(&self, scalars: &[Fr]) -> Vec<P> {
        let proj: Vec<P::Projective> = scalars.iter().map(|s| self.mul(s)).collect();
        P::batch_to_affine(&proj)
    }

    /// One chunk: window by window, add the table entry of every non-zero digit to its
    /// accumulator with affine formulas and one shared inversion.
    fn batch_mul_affine(&self, scalars: &[Fr], out: &mut [P]) {
        let per_window = (1usize << self.window) - 1;
        let limbs: Vec<[u64; 4]> = scalars.iter().map(Fr::to_canonical).collect();
        // out[i] is meaningful only once `started[i]`; identity until then.
        let mut started = vec![false; scalars.len()];
        let mut pending: Vec<(usize, P)> = Vec::with_capacity(scalars.len());
        let mut denominators: Vec<P::F> = Vec::with_capacity(scalars.len());
        let mut scratch: Vec<P::F> = Vec::with_capacity(scalars.len());
        for k in 0..self.windows {
            pending.clear();
            denominators.clear();
            for (i, l) in limbs.iter().enumerate() {
                let d = digit(l, k * self.window, self.window);
                if d == 0 {
                    continue;
                }
                let t = self.table[k * per_window + d - 1];
                if !started[i] {
                    out[i] = t;
                    started[i] = true;
                    continue;
                }
                let (x1, x2) = (out[i].xy().0, t.xy().0);
                if x1 == x2 {
                    // Doubling or P + (−P): impossible for canonical scalars (the accumulator's
                    // scalar is below 2^(w·k)), kept so the function is total.
                    let sum = P::to_affine(&(P::Projective::from(out[i]) + P::Projective::from(t)));
                    started[i] = !sum.is_identity();
                    out[i] = sum;
                    continue;
                }
                pending.push((i, t));
                denominators.push(x2 - x1);
            }
            if pending.is_empty() {
                continue;
            }
            batch_invert::<P>(&mut denominators, &mut scratch);
            for (&(i, t), &inv) in pending.iter().zip(&denominators) {
                let (x1, y1) = out[i].xy();
                let (x2, y2) = t.xy();
                let lambda = (y2 - y1) * inv;
                let x3 = P::square(lambda) - x1 - x2;
                let y3 = lambda * (x1 - x3) - y1;
                out[i] = P::from_xy(x3, y3);
            }
        }
        for (o, s) in out.iter_mut().zip(&started) {
            if !s {
                *o = P::default();
            }
        }
    }
}

/// Inverts every element (all non-zero) with one field inversion.
fn batch_invert<P: AffinePoint>(values: &mut [P::F], prefix: &mut Vec<P::F>) {
    prefix.clear();
    let mut acc = P::ONE;
    for v in values.iter() {
        prefix.push(acc);
        acc = acc * *v;
    }
    // Every denominator is x2 − x1 with x1 ≠ x2, so the product is non-zero.
    let Some(mut inv) = P::inverse(acc) else {
        return;
    };
    for (v, before) in values.iter_mut().zip(prefix.iter()).rev() {
        let next = inv * *v;
        *v = inv * *before;
        inv = next;
    }
}

/// Bits `[start, start + width)` of a 256-bit little-endian number (width ≤ 16).
fn digit(limbs: &[u64; 4], start: usize, width: usize) -> usize {
    let (limb, shift) = (start / 64, start % 64);
    let mut v = limbs[limb] >> shift;
    if shift + width > 64 && limb + 1 < 4 {
        v |= limbs[limb + 1] << (64 - shift);
    }
    (v & ((1u64 << width) - 1)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_field::{G1Affine, G1Projective, G2Affine, G2Projective};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn matches_blst_scalar_multiplication() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut scalars: Vec<Fr> = (0..40).map(|_| Fr::random(&mut rng)).collect();
        scalars.extend([Fr::ZERO, Fr::ONE, -Fr::ONE, Fr::from_u64(1 << 40)]);
        for count in [1usize, 50, 5000] {
            let g = G1Projective::random(&mut rng);
            let t = FixedBaseTable::<G1Affine>::new(g, count);
            let got = t.batch_mul(&scalars);
            for (s, p) in scalars.iter().zip(&got) {
                assert_eq!(*p, (g * *s).to_affine(), "window {}", t.window);
            }
            assert_eq!(t.batch_mul_jacobian(&scalars), got);
        }
        let h = G2Projective::generator();
        let t = FixedBaseTable::<G2Affine>::new(h, 100);
        for (s, p) in scalars.iter().zip(t.batch_mul(&scalars)) {
            assert_eq!(p, (h * *s).to_affine());
        }
    }

    #[test]
    fn equal_x_falls_back_to_the_general_addition() {
        // With canonical scalars an accumulator never equals ± a table entry (its scalar is
        // below 2^(w·k)), so build a table whose windows all hold multiples of G itself:
        // digits (1, 1) then need G + G, a doubling.
        let g = G1Projective::generator();
        let row: Vec<G1Projective> = (1..=3u64).map(|d| g * Fr::from_u64(d)).collect();
        let row = G1Projective::batch_to_affine(&row);
        let t = FixedBaseTable::<G1Affine> {
            window: 2,
            windows: 128,
            table: row.repeat(128),
        };
        let scalars = [
            Fr::from_u64(0b0101),
            Fr::from_u64(0b1111),
            Fr::from_u64(0b0111_0110),
        ];
        let got = t.batch_mul(&scalars);
        assert_eq!(got, t.batch_mul_jacobian(&scalars));
        assert_eq!(got[0], (g * Fr::from_u64(2)).to_affine());
        assert_eq!(got[1], (g * Fr::from_u64(6)).to_affine());
    }

    /// Window sweep for tuning `best_window` (a benchmark):
    /// `cargo test --release -p cuzk-groth16 --lib window_sweep -- --ignored --nocapture`
    #[test]
    #[ignore = "benchmark"]
    fn window_sweep() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let scalars: Vec<Fr> = (0..1 << 18).map(|_| Fr::random(&mut rng)).collect();
        for w in [8, 10, 12, 13, 14, 15, 16] {
            let t0 = std::time::Instant::now();
            let t = FixedBaseTable::<G1Affine>::with_window(G1Projective::generator(), w);
            let t1 = std::time::Instant::now();
            let out = t.batch_mul(&scalars);
            let t2 = std::time::Instant::now();
            println!(
                "G1 2^18 w={w:2}: table {:7.1} ms, mul {:7.1} ms ({} points)",
                (t1 - t0).as_secs_f64() * 1e3,
                (t2 - t1).as_secs_f64() * 1e3,
                out.len()
            );
        }
    }

    #[test]
    fn digits_cross_limb_boundaries() {
        let limbs = [u64::MAX << 60, 0b1011, 0, 1 << 62];
        assert_eq!(digit(&limbs, 60, 8), 0b1011_1111);
        assert_eq!(digit(&limbs, 254, 8), 1);
        assert_eq!(best_window(1 << 16), 13);
    }
}
