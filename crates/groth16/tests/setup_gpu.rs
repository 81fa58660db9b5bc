//! GPU parameter generation: the key must be bit-identical to the CPU key for the same toxic
//! waste, and proofs made with it must verify. Run on a GPU machine with
//! `cargo test --release -p cuzk-groth16 --test setup_gpu -- --ignored --nocapture`.

use std::time::Instant;

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

/// Prints GPU setup times for 2^20, 2^22, 2^24 demo circuits (2^26 too with
/// `CUZK_SETUP_BENCH_MAX_LOG=26`) and the CPU time at 2^20.
#[test]
#[ignore = "gpu"]
fn gpu_bench_setup() {
    let gpu = gpu();
    let max_log: u32 = std::env::var("CUZK_SETUP_BENCH_MAX_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut rng = ChaCha20Rng::seed_from_u64(31);
    // Warm-up: module load and first allocations.
    let (small, _) = demo::circuit(8, 1, &mut rng).unwrap();
    generate_parameters_gpu(&gpu, &small, &ToxicWaste::random(&mut rng)).unwrap();
    let mut gpu_20 = None;
    for log in [20u32, 22, 24, 26].into_iter().filter(|&l| l <= max_log) {
        let (r1cs, _) = demo::circuit(log, 4, &mut rng).unwrap();
        let tw = ToxicWaste::random(&mut rng);
        let t = Instant::now();
        let (pk, timings) = generate_parameters_gpu(&gpu, &r1cs, &tw).unwrap();
        let total = t.elapsed();
        println!(
            "GPU setup 2^{log}: {:.3} s ({} G1 + {} G2 points)",
            total.as_secs_f64(),
            pk.a_query.len()
                + pk.b_g1_query.len()
                + pk.vk.ic.len()
                + pk.l_query.len()
                + pk.h_query.len(),
            pk.b_g2_query.len()
        );
        for (phase, d) in timings.rows() {
            println!("    {phase:<22} {:9.1} ms", d.as_secs_f64() * 1e3);
        }
        if log == 20 {
            gpu_20 = Some((r1cs, tw, total));
        }
    }
    if let Some((r1cs, tw, gpu_t)) = gpu_20 {
        let t = Instant::now();
        let (cpu, _) = generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap();
        let cpu_t = t.elapsed();
        let (key, _) = generate_parameters_gpu(&gpu, &r1cs, &tw).unwrap();
        assert_eq!(key, cpu, "2^20 GPU key differs from the CPU key");
        println!(
            "CPU setup 2^20: {:.3} s; GPU is {:.1}x faster",
            cpu_t.as_secs_f64(),
            cpu_t.as_secs_f64() / gpu_t.as_secs_f64()
        );
    }
}
