//! GPU parameter generation bench: the 2^20 key is checked once against the CPU key for the
//! same toxic waste, then GPU setup is timed at 2^20, 2^22, 2^24 (2^26 too with
//! `CUZK_SETUP_BENCH_MAX_LOG=26`), per phase, and against the CPU at 2^20.
//! `cargo bench -p cuzk-benches --bench gpu_setup` (needs a GPU).

#![forbid(unsafe_code)]

use std::time::Instant;

use cuzk_benches::{Summary, check, gpu};
use cuzk_groth16::setup::gpu::generate_parameters_gpu;
use cuzk_groth16::testing::demo;
use cuzk_groth16::{ToxicWaste, generate_parameters_with_toxic_waste};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn main() {
    let gpu = gpu();
    let max_log: u32 = std::env::var("CUZK_SETUP_BENCH_MAX_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut rng = ChaCha20Rng::seed_from_u64(31);
    // Warm-up: module load and first allocations.
    let (small, _) = demo::circuit(8, 1, &mut rng).unwrap();
    generate_parameters_gpu(&gpu, &small, &ToxicWaste::random(&mut rng)).unwrap();
    // The check, and the CPU time of the 2^20 row.
    let (r1cs, _) = demo::circuit(20, 4, &mut rng).unwrap();
    let tw = ToxicWaste::random(&mut rng);
    let t = Instant::now();
    let (cpu, _) = generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap();
    let cpu_t = t.elapsed();
    let (key, _) = generate_parameters_gpu(&gpu, &r1cs, &tw).unwrap();
    check(key == cpu, "GPU key 2^20 = CPU key");
    drop((r1cs, cpu, key));
    let mut summary = Summary::default();
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
            pk.a_query().len()
                + pk.b_g1_query().len()
                + pk.vk.ic.len()
                + pk.l_query().len()
                + pk.h_query().len(),
            pk.b_g2_query().len()
        );
        for (phase, d) in timings.rows() {
            println!("    {phase:<22} {:9.1} ms", d.as_secs_f64() * 1e3);
        }
        summary.add(
            format!("GPU setup 2^{log}"),
            total.as_secs_f64() * 1e3,
            None,
        );
        if log == 20 {
            gpu_20 = Some(total);
        }
    }
    if let Some(gpu_t) = gpu_20 {
        println!(
            "CPU setup 2^20: {:.3} s; GPU is {:.1}x faster",
            cpu_t.as_secs_f64(),
            cpu_t.as_secs_f64() / gpu_t.as_secs_f64()
        );
        summary.add(
            "GPU setup 2^20 (CPU setup)",
            gpu_t.as_secs_f64() * 1e3,
            Some(cpu_t.as_secs_f64() * 1e3),
        );
    }
    summary.print("setup");
}
