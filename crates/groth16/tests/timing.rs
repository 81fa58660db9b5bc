//! Per-phase CPU timings of setup and proving (a benchmark, not a check):
//! `cargo test --release -p cuzk-groth16 --test timing -- --ignored --nocapture`
//! Sizes from `CUZK_TIMING_LOGS` (comma-separated log2 constraint counts, default "14,16").

use std::time::Instant;

use cuzk_field::Fr;
use cuzk_groth16::testing::demo;
use cuzk_groth16::{
    CpuBackend, create_proof_with_backend, generate_parameters_with_toxic_waste,
    prepare_verifying_key, setup::ToxicWaste, verify_proof,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

#[test]
#[ignore = "benchmark: run explicitly with --ignored --nocapture"]
fn cpu_setup_and_prove_timings() {
    let logs = std::env::var("CUZK_TIMING_LOGS").unwrap_or_else(|_| "14,16".into());
    for k in logs.split(',').filter_map(|s| s.trim().parse::<u32>().ok()) {
        let mut rng = ChaCha20Rng::seed_from_u64(k.into());
        let t = Instant::now();
        let (r1cs, w) = demo::circuit(k, 4, &mut rng).unwrap();
        let t_circuit = t.elapsed();
        let tw = ToxicWaste::random(&mut rng);
        let (pk, setup) = generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap();
        println!(
            "\n2^{k}: {} rows, {} variables, nnz A/B/C {}/{}/{}; circuit generated in {:.1} ms",
            r1cs.num_constraints(),
            r1cs.num_variables(),
            r1cs.a().nnz(),
            r1cs.b().nnz(),
            r1cs.c().nnz(),
            t_circuit.as_secs_f64() * 1e3
        );
        println!("setup:");
        for (name, d) in setup.rows() {
            println!("  {name:<22} {:>9.1} ms", d.as_secs_f64() * 1e3);
        }
        let pvk = prepare_verifying_key(&pk.vk);
        for run in 0..3 {
            let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
            let (proof, timings) =
                create_proof_with_backend(&CpuBackend, &pk, &r1cs, &w, r, s).unwrap();
            println!("prove (run {run}):");
            for (name, d) in timings.rows() {
                println!("  {name:<22} {:>9.1} ms", d.as_secs_f64() * 1e3);
            }
            let t = Instant::now();
            verify_proof(&pvk, &proof, w.public_inputs()).unwrap();
            println!(
                "  {:<22} {:>9.1} ms",
                "(verify)",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}
