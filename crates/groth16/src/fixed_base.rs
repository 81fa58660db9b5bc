//! Windowed fixed-base scalar multiplication: many `s_i · G` for one base G.
//!
//! The scalar is cut into w-bit digits; a table holds `d · 2^(w·k) · G` for every window k and
//! digit d ≠ 0, so each product costs at most ⌈255/w⌉ mixed additions and no doublings (blst's
//! `mult` costs ~255 doublings plus additions). Results are converted to affine in chunks with
//! one inversion each.

use cuzk_field::Fr;
use cuzk_msm::MsmPoint;
use rayon::prelude::*;

const SCALAR_BITS: usize = 255;
/// Scalars per task; also the batch size of the shared-inversion affine conversion.
const CHUNK: usize = 1 << 10;
/// Largest window: 2^16 points per window is already ~100 MB of G2 table.
const MAX_WINDOW: usize = 16;

pub(crate) struct FixedBaseTable<P: MsmPoint> {
    window: usize,
    windows: usize,
    /// Window k, digit d (1 ≤ d < 2^w) at `k · (2^w − 1) + d − 1`.
    table: Vec<P>,
}

/// The window minimizing table building plus multiplication work for `count` products.
fn best_window(count: usize) -> usize {
    (1..=MAX_WINDOW)
        .min_by_key(|&w| SCALAR_BITS.div_ceil(w) * ((1usize << w) + count))
        .unwrap_or(1)
}

impl<P: MsmPoint> FixedBaseTable<P> {
    /// A table for `generator`, sized for about `count` multiplications.
    pub(crate) fn new(generator: P::Projective, count: usize) -> Self {
        let window = best_window(count);
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
            .for_each(|(out, scalars)| {
                let proj: Vec<P::Projective> = scalars.iter().map(|s| self.mul(s)).collect();
                out.copy_from_slice(&P::batch_to_affine(&proj));
            });
        out
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
        }
        let h = G2Projective::generator();
        let t = FixedBaseTable::<G2Affine>::new(h, 100);
        for (s, p) in scalars.iter().zip(t.batch_mul(&scalars)) {
            assert_eq!(p, (h * *s).to_affine());
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
