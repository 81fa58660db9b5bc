//! GPU parameter generation: the key must be bit-identical to the CPU key for the same toxic
//! waste, and proofs made with it must verify. Run on a GPU machine with
//! `cargo test --release -p cuzk-groth16 --test setup_gpu -- --ignored --nocapture`.

use cuzk_gpu::Gpu;
use cuzk_groth16::setup::gpu::generate_parameters_gpu;
use cuzk_groth16::testing::demo;
use cuzk_groth16::{
    ToxicWaste, create_proof, generate_parameters_with_toxic_waste, prepare_verifying_key,
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
        let identities = key.a_query().iter().filter(|p| p.is_identity()).count()
            + key.b_g2_query().iter().filter(|p| p.is_identity()).count();
        assert!(
            identities > 0,
            "2^{log}: expected identity points in the key"
        );
        assert_eq!(key.a_query(), cpu.a_query(), "a_query 2^{log} seed {seed}");
        assert_eq!(
            key.b_g1_query(),
            cpu.b_g1_query(),
            "b_g1_query 2^{log} seed {seed}"
        );
        assert_eq!(
            key.b_g2_query(),
            cpu.b_g2_query(),
            "b_g2_query 2^{log} seed {seed}"
        );
        assert_eq!(key.h_query(), cpu.h_query(), "h_query 2^{log} seed {seed}");
        assert_eq!(key.l_query(), cpu.l_query(), "l_query 2^{log} seed {seed}");
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

/// A key made on the device under a VRAM cap too small to hold it: the queries a proof's plan
/// cannot keep resident go to page-locked host memory the backend owns and streams from (no
/// other host copy); the proof equals the CPU prover's for the same r and s and verifies.
/// `CUZK_HELD_LOG=K` (default 16), `CUZK_HELD_CONSTRAINTS=N` (N rows in the 2^K domain) and
/// `CUZK_HELD_CAP_GIB=C` (default: the proof's work room plus half the key) size it; above
/// 2^20 the CPU comparison is skipped (the pairing check remains) and each proof's time is
/// printed.
#[test]
#[ignore = "gpu"]
fn gpu_held_key_streams_what_the_cap_leaves_out_from_pinned_memory() {
    use cuzk_groth16::gpu::MemoryPlan;
    use cuzk_groth16::{Fr, GpuBackend, Query, create_proof_with_backend};
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let log = env("CUZK_HELD_LOG").unwrap_or(16) as u32;
    let rows = env("CUZK_HELD_CONSTRAINTS").map_or(1usize << log, |n| n as usize);
    let mut rng = ChaCha20Rng::seed_from_u64(31);
    let t = std::time::Instant::now();
    let (r1cs, w) = demo::circuit_with_rows(rows, 4, 75, &mut rng).unwrap();
    let tw = ToxicWaste::random(&mut rng);
    let (m, n) = (r1cs.num_variables(), r1cs.domain_size());
    let lens = [
        (Query::A, m),
        (Query::BG1, m),
        (Query::H, n - 1),
        (Query::L, r1cs.num_private()),
        (Query::BG2, m),
    ];
    let whole = MemoryPlan::new(n, &lens, u64::MAX, 132).unwrap();
    let key: u64 = whole.queries.iter().map(|q| q.point_bytes).sum();
    let cap = env("CUZK_HELD_CAP_GIB").map_or(whole.work_bytes + key / 2, |g| g << 30);
    let mut cfg = cuzk_vram::BudgetConfig::from_lookup(|k| std::env::var(k).ok()).unwrap();
    cfg.vram_limit = Some(cap);
    let gpu = Gpu::open(0, &cfg).expect("gpu tests need an NVIDIA GPU");
    let (backend, pk, setup) = GpuBackend::generate_key(&gpu, &r1cs, &tw).unwrap();
    let streamed: Vec<Query> = Query::ALL
        .into_iter()
        .filter(|&q| backend.residency(q) == Some(false))
        .collect();
    println!(
        "{rows} rows (2^{log} domain), cap {:.2} GiB: circuit and key in {:.1} s (setup {:.1} s); resident {:.2} GiB, streamed from pinned memory: {streamed:?}",
        cap as f64 / (1u64 << 30) as f64,
        t.elapsed().as_secs_f64(),
        setup.total.as_secs_f64(),
        backend.resident_bytes() as f64 / (1u64 << 30) as f64,
    );
    assert!(!streamed.is_empty(), "the cap leaves some query streamed");
    let pvk = prepare_verifying_key(&pk.vk);
    let cpu_key =
        (rows <= 1 << 20).then(|| generate_parameters_with_toxic_waste(&r1cs, &tw).unwrap().0);
    for i in 0..3 {
        let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
        let (proof, times) = create_proof_with_backend(&backend, &pk, &r1cs, &w, r, s).unwrap();
        assert_eq!(
            verify_proof(&pvk, &proof, w.public_inputs()),
            Ok(()),
            "proof {i}"
        );
        if let Some(cpu_key) = &cpu_key {
            let cpu = cuzk_groth16::create_proof_with_randomness(cpu_key, &r1cs, &w, r, s).unwrap();
            assert_eq!(proof, cpu, "proof {i} = the CPU prover's for the same r, s");
        }
        print!("proof {i}: {:.1} ms;", times.total.as_secs_f64() * 1e3);
        for (name, d) in times.rows() {
            print!(" {name} {:.1}", d.as_secs_f64() * 1e3);
        }
        println!(
            "; device peak {:.2} GiB of {:.2}",
            gpu.vram().budget().peak() as f64 / (1u64 << 30) as f64,
            gpu.vram().budget().total() as f64 / (1u64 << 30) as f64
        );
    }
    assert!(gpu.vram().budget().peak() <= gpu.vram().budget().total());
    drop(backend);
    gpu.drop_cached();
    gpu.vram().budget().reclaim_all();
    assert_eq!(gpu.vram().budget().in_use(), 0, "device budget back to 0");
}
