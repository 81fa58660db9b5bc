//! CPU MSM against the double-and-add oracle (small n) and against one unsplit blst Pippenger
//! call (large n, where the parallel and sparse paths split the work).

use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_msm::{MsmError, MsmPoint, cpu, testing};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// Points with the awkward cases mixed in: identities, repeats, and negations of earlier points.
fn edgy_points<P: MsmPoint>(n: usize, rng: &mut ChaCha20Rng) -> Vec<P> {
    let mut points: Vec<P> = testing::random_points(n, rng);
    for i in 0..n {
        match rng.gen_range(0..8) {
            0 => points[i] = P::default(),
            1 if i > 0 => points[i] = points[rng.gen_range(0..i)],
            2 if i > 0 => points[i] = -points[rng.gen_range(0..i)],
            _ => {}
        }
    }
    points
}

/// Scalars drawn from the kinds that stress an MSM: 0, 1, r-1, small, small negative, random.
fn edgy_scalars(n: usize, rng: &mut ChaCha20Rng) -> Vec<Fr> {
    (0..n)
        .map(|_| match rng.gen_range(0..6) {
            0 => Fr::ZERO,
            1 => Fr::ONE,
            2 => -Fr::ONE,
            3 => Fr::from_u64(rng.gen_range(0..32)),
            4 => -Fr::from_u64(rng.gen_range(0..32)),
            _ => Fr::random(rng),
        })
        .collect()
}

fn check_against_oracle<P: MsmPoint>(points: &[P], scalars: &[Fr]) {
    let got = cpu::msm(points, scalars).unwrap();
    let want = cpu::naive_msm(points, scalars).unwrap();
    assert_eq!(got, want, "n = {}", points.len());
}

fn check_against_blst<P: MsmPoint>(points: &[P], scalars: &[Fr]) {
    let got = cpu::msm(points, scalars).unwrap();
    let want = P::pippenger(points, scalars).unwrap();
    assert_eq!(got, want, "n = {}", points.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn g1_matches_oracle(seed in any::<u64>(), n in 0usize..48) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let points: Vec<G1Affine> = edgy_points(n, &mut rng);
        check_against_oracle(&points, &edgy_scalars(n, &mut rng));
    }

    #[test]
    fn g2_matches_oracle(seed in any::<u64>(), n in 0usize..24) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let points: Vec<G2Affine> = edgy_points(n, &mut rng);
        check_against_oracle(&points, &edgy_scalars(n, &mut rng));
    }
}

#[test]
fn empty_is_identity_and_mismatch_is_an_error() {
    assert_eq!(cpu::msm::<G1Affine>(&[], &[]).unwrap(), Default::default());
    assert_eq!(cpu::msm::<G2Affine>(&[], &[]).unwrap(), Default::default());
    let p = [G1Affine::generator()];
    assert!(matches!(
        cpu::msm(&p, &[]),
        Err(MsmError::LengthMismatch {
            points: 1,
            scalars: 0
        })
    ));
    assert!(matches!(
        cpu::naive_msm(&p, &[Fr::ONE, Fr::ONE]),
        Err(MsmError::LengthMismatch {
            points: 1,
            scalars: 2
        })
    ));
}

#[test]
fn single_terms() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let g = G1Affine::generator();
    let s = Fr::random(&mut rng);
    assert_eq!(cpu::msm(&[g], &[s]).unwrap(), g * s);
    assert_eq!(cpu::msm(&[g], &[Fr::ONE]).unwrap(), g.into());
    assert_eq!(cpu::msm(&[g], &[-Fr::ONE]).unwrap(), (-g).into());
    assert!(cpu::msm(&[g], &[Fr::ZERO]).unwrap().is_identity());
    assert!(
        cpu::msm(&[G1Affine::identity()], &[s])
            .unwrap()
            .is_identity()
    );
    let h = G2Affine::generator();
    assert_eq!(cpu::msm(&[h], &[-Fr::ONE]).unwrap(), (-h).into());
    assert_eq!(cpu::msm(&[h, -h], &[s, s]).unwrap(), Default::default());
}

#[test]
fn fixed_seed_regressions() {
    for (seed, n) in [(0u64, 31usize), (7, 33), (2024, 40)] {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let points: Vec<G1Affine> = edgy_points(n, &mut rng);
        check_against_oracle(&points, &edgy_scalars(n, &mut rng));
    }
}

#[test]
fn all_zero_and_all_one_scalars() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let n = 9_001;
    let points: Vec<G1Affine> = testing::random_points(n, &mut rng);
    assert!(cpu::msm(&points, &vec![Fr::ZERO; n]).unwrap().is_identity());
    let sum: <G1Affine as MsmPoint>::Projective = points.iter().map(|&p| p.into()).sum();
    assert_eq!(cpu::msm(&points, &vec![Fr::ONE; n]).unwrap(), sum);
    check_against_blst(&points, &vec![Fr::ONE; n]);
}

#[test]
fn large_dense_and_sparse_split_across_threads() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let n = 20_011; // not a power of two, several classification chunks
    let mut points: Vec<G1Affine> = testing::random_points(n, &mut rng);
    points[5] = G1Affine::identity();
    points[6] = -points[7];
    points[100] = points[101];
    let dense: Vec<Fr> = (0..n).map(|_| Fr::random(&mut rng)).collect();
    check_against_blst(&points, &dense);
    let sparse: Vec<Fr> = (0..n)
        .map(|_| match rng.gen_range(0..10) {
            0..=4 => Fr::ZERO,
            5..=8 => Fr::ONE,
            _ => Fr::random(&mut rng),
        })
        .collect();
    check_against_blst(&points, &sparse);

    let g2: Vec<G2Affine> = testing::random_points(3_001, &mut rng);
    check_against_blst(&g2, &sparse[..3_001]);
    check_against_blst(&g2, &dense[..3_001]);
}

#[test]
fn random_points_are_valid_and_distinct() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let points: Vec<G1Affine> = testing::random_points(5_000, &mut rng);
    assert!(points.iter().all(|p| !p.is_identity() && p.is_on_curve()));
    let mut keys: Vec<[u8; 48]> = points.iter().map(|p| p.to_compressed()).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), points.len());
    let g2: Vec<G2Affine> = testing::random_points(100, &mut rng);
    assert!(g2.iter().all(|p| p.is_on_curve() && p.is_torsion_free()));
    // Deterministic in the rng.
    let again: Vec<G1Affine> = testing::random_points(5_000, &mut ChaCha20Rng::seed_from_u64(4));
    assert_eq!(again, points);
}
