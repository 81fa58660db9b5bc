//! Test and benchmark data: many distinct random points without a scalar multiplication each,
//! and scalar vectors of the shapes MSMs meet.

use cuzk_field::Fr;
use rand_core::RngCore;
use rayon::prelude::*;

use crate::MsmPoint;

/// The shape of a scalar vector ([`random_scalars`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarKind {
    /// Uniform in Fr.
    Random,
    /// Below 2^12.
    Small,
    /// 50% zero, 40% one, 10% full width.
    Sparse,
    /// 0, 1, −1, 2 and full width, 20% each.
    Edge,
    /// 35% zero, 35% one, 30% full width (a Groth16 witness: general count ≈ 0.3 n).
    Mostly01,
}

/// `n` scalars of `kind` from `rng`.
pub fn random_scalars(n: usize, kind: ScalarKind, rng: &mut impl RngCore) -> Vec<Fr> {
    (0..n)
        .map(|_| match kind {
            ScalarKind::Random => Fr::random(rng),
            ScalarKind::Small => Fr::from_u64(u64::from(rng.next_u32() % (1 << 12))),
            ScalarKind::Sparse => match rng.next_u32() % 10 {
                0..=4 => Fr::ZERO,
                5..=8 => Fr::ONE,
                _ => Fr::random(rng),
            },
            ScalarKind::Mostly01 => match rng.next_u32() % 20 {
                0..=6 => Fr::ZERO,
                7..=13 => Fr::ONE,
                _ => Fr::random(rng),
            },
            ScalarKind::Edge => match rng.next_u32() % 5 {
                0 => Fr::ZERO,
                1 => Fr::ONE,
                2 => -Fr::ONE,
                3 => Fr::from_u64(2),
                _ => Fr::random(rng),
            },
        })
        .collect()
}

/// Points per run of the progression; each run costs two scalar multiplications.
const RUN: usize = 1 << 12;

/// `n` pseudo-random, pairwise distinct (with overwhelming probability), non-identity points:
/// runs of `start + j · step` with a random `start` and `step` per run, so the cost is one
/// addition per point instead of one scalar multiplication.
pub fn random_points<P: MsmPoint>(n: usize, rng: &mut impl RngCore) -> Vec<P> {
    let runs = n.div_ceil(RUN);
    // Drawn sequentially so the output depends only on the rng, not the thread count.
    let seeds: Vec<[u64; 2]> = (0..runs)
        .map(|_| [rng.next_u64(), rng.next_u64()])
        .collect();
    let mut out = vec![P::default(); n];
    out.par_chunks_mut(RUN)
        .zip(seeds)
        .for_each(|(chunk, seed)| {
            let mut run_rng = SplitMix(seed[0] ^ seed[1].rotate_left(32));
            let start = P::random(&mut run_rng);
            let step = P::to_affine(&P::random(&mut run_rng));
            let mut acc = start;
            let mut proj = Vec::with_capacity(chunk.len());
            for _ in 0..chunk.len() {
                proj.push(acc);
                acc += step;
            }
            chunk.copy_from_slice(&P::batch_to_affine(&proj));
        });
    out
}

/// A tiny seedable generator so this module needs no RNG crate at run time.
struct SplitMix(u64);

impl RngCore for SplitMix {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        rand_core::impls::fill_bytes_via_next(self, dest);
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}
