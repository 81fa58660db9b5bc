//! Test and benchmark data.

use cuzk_field::Fr;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;
use rayon::prelude::*;

/// `n` random field elements from `seed`, generated in parallel (chunks of 2^14, each with its
/// own stream of the seed).
pub fn random_fr(n: usize, seed: u64) -> Vec<Fr> {
    (0..n)
        .into_par_iter()
        .chunks(1 << 14)
        .map(|c| {
            let mut rng = ChaCha20Rng::seed_from_u64(
                seed ^ (c[0] as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            c.iter().map(|_| Fr::random(&mut rng)).collect::<Vec<_>>()
        })
        .flatten()
        .collect()
}
