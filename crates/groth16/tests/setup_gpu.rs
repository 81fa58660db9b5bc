//! GPU parameter generation: the key must be bit-identical to the CPU key for the same toxic
//! waste, and proofs made with it must verify. Run on a GPU machine with
//! `cargo test --release -p cuzk-groth16 --test setup_gpu -- --ignored --nocapture`.

use cuzk_gpu::Gpu;
use cuzk_groth16::setup_gpu::generate_parameters_gpu;
use cuzk_groth16::{
    ToxicWaste, create_proof, demo, generate_parameters_with_toxic_waste, prepare_verifying_key,
    verify_proof,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn gpu() -> Gpu {
    Gpu::first().expect("gpu tests need an NVIDIA GPU")
}

#[test]
#[ignore = "gpu"]
fn gpu_setup_matches_cpu_key() {
    let gpu = gpu();
    for (log, public, seed) in [
        (4u32, 1usize, 1u64),
        (5, 2, 2),
        (6, 3, 3),
        (8, 1, 4),
        (9, 5, 5),
        (10, 2, 6),
        (11, 4, 7),
        (12, 3, 8),
        (12, 1, 9),
    ] {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let (r1cs, _) = demo::circuit(log, public, &mut rng).unwrap();
        let tw = ToxicWaste::random(&mut rng);
        let (cpu, _) = generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap();
        let (key, _) = generate_parameters_gpu(&gpu, &r1cs, &tw).unwrap();
        // Variables used only in C (packed values) have u = v = 0: identity points.
        let identities = key.a_query.iter().filter(|p| p.is_identity()).count()
            + key.b_g2_query.iter().filter(|p| p.is_identity()).count();
        assert!(
            identities > 0,
            "2^{log}: expected identity points in the key"
        );
        assert_eq!(key.a_query, cpu.a_query, "a_query 2^{log} seed {seed}");
        assert_eq!(
            key.b_g1_query, cpu.b_g1_query,
            "b_g1_query 2^{log} seed {seed}"
        );
        assert_eq!(
            key.b_g2_query, cpu.b_g2_query,
            "b_g2_query 2^{log} seed {seed}"
        );
        assert_eq!(key.h_query, cpu.h_query, "h_query 2^{log} seed {seed}");
        assert_eq!(key.l_query, cpu.l_query, "l_query 2^{log} seed {seed}");
        assert_eq!(key.vk, cpu.vk, "vk 2^{log} seed {seed}");
        assert_eq!(key, cpu, "whole key 2^{log} seed {seed}");
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_setup_key_proves_and_verifies() {
    let gpu = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let (r1cs, w) = demo::circuit(10, 3, &mut rng).unwrap();
    let tw = ToxicWaste::random(&mut rng);
    let (pk, _) = generate_parameters_gpu(&gpu, &r1cs, &tw).unwrap();
    let proof = create_proof(&pk, &r1cs, &w, &mut rng).unwrap();
    let pvk = prepare_verifying_key(&pk.vk);
    assert_eq!(verify_proof(&pvk, &proof, w.public_inputs()), Ok(()));
}
