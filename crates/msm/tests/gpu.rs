//! GPU MSM against the CPU MSM. Needs a GPU: `cargo test --release -p cuzk-msm --test gpu --
//! --ignored` (panics without one). `gpu_bench_msm` prints the benchmark rows (`--nocapture`).

use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_gpu::Gpu;
use cuzk_msm::gpu::GpuMsm;
use cuzk_msm::{MsmPoint, cpu, testing};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn gpu() -> Gpu {
    Gpu::first().expect("these tests need a CUDA GPU and built kernels")
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Random,
    Small,
    Sparse,
    Edge,
}

fn scalars(n: usize, kind: Kind, rng: &mut ChaCha20Rng) -> Vec<Fr> {
    (0..n)
        .map(|_| match kind {
            Kind::Random => Fr::random(rng),
            Kind::Small => Fr::from_u64(rng.gen_range(0..1 << 12)),
            Kind::Sparse => match rng.gen_range(0..10) {
                0..=4 => Fr::ZERO,
                5..=8 => Fr::ONE,
                _ => Fr::random(rng),
            },
            Kind::Edge => match rng.gen_range(0..5) {
                0 => Fr::ZERO,
                1 => Fr::ONE,
                2 => -Fr::ONE,
                3 => Fr::from_u64(2),
                _ => Fr::random(rng),
            },
        })
        .collect()
}

fn points<P: MsmPoint>(n: usize, rng: &mut ChaCha20Rng) -> Vec<P> {
    let mut p: Vec<P> = testing::random_points(n, rng);
    for i in 0..n {
        match rng.gen_range(0..16) {
            0 => p[i] = P::default(),
            1 if i > 0 => p[i] = p[rng.gen_range(0..i)],
            2 if i > 0 => p[i] = -p[rng.gen_range(0..i)],
            _ => {}
        }
    }
    p
}

fn check<P: MsmPoint>(gpu: &Gpu, points: &[P], scalars: &[Fr]) {
    let want = cpu::msm(points, scalars).unwrap();
    let ctx = GpuMsm::resident(gpu, points).unwrap();
    assert_eq!(
        ctx.msm(scalars).unwrap(),
        want,
        "resident, n = {}",
        points.len()
    );
    let dev = gpu.vram().from_host(scalars).unwrap();
    assert_eq!(
        ctx.msm_device(&dev).unwrap(),
        want,
        "device scalars, n = {}",
        points.len()
    );
    // The same scalars at an offset inside a longer device buffer (one shared upload).
    let mut padded = vec![Fr::from_u64(7); 3];
    padded.extend_from_slice(scalars);
    padded.push(Fr::from_u64(9));
    let dev = gpu.vram().from_host(&padded).unwrap();
    assert_eq!(
        ctx.msm_device_at(&dev, 3).unwrap(),
        want,
        "device scalars at an offset, n = {}",
        points.len()
    );
    assert!(ctx.msm_device_at(&dev, 5).is_err(), "range past the end");
}

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Random),
        Just(Kind::Small),
        Just(Kind::Sparse),
        Just(Kind::Edge)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    #[ignore = "gpu"]
    fn gpu_matches_cpu_g1(seed in any::<u64>(), log in 0u32..=16, kind in kind_strategy()) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let n = rng.gen_range(0..=1usize << log);
        let p: Vec<G1Affine> = points(n, &mut rng);
        check(&gpu(), &p, &scalars(n, kind, &mut rng));
    }

    #[test]
    #[ignore = "gpu"]
    fn gpu_matches_cpu_g2(seed in any::<u64>(), log in 0u32..=14, kind in kind_strategy()) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let n = rng.gen_range(0..=1usize << log);
        let p: Vec<G2Affine> = points(n, &mut rng);
        check(&gpu(), &p, &scalars(n, kind, &mut rng));
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_edge_cases() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for n in [0usize, 1, 2, 3, 255, 1000] {
        let p: Vec<G1Affine> = points(n, &mut rng);
        for kind in [Kind::Random, Kind::Edge, Kind::Sparse] {
            check(&g, &p, &scalars(n, kind, &mut rng));
        }
        check(&g, &p, &vec![Fr::ZERO; n]);
        check(&g, &p, &vec![Fr::ONE; n]);
        check(&g, &p, &vec![-Fr::ONE; n]);
        check(&g, &p, &vec![Fr::from_u64(5); n]); // every entry in one bucket
    }
    // P with -P and repeated points under one scalar: cancellations inside a bucket.
    let a: Vec<G1Affine> = testing::random_points(64, &mut rng);
    let mut p = a.clone();
    p.extend(a.iter().map(|&x| -x));
    p.extend_from_slice(&a);
    check(&g, &p, &vec![Fr::from_u64(77); p.len()]);
    let g2: Vec<G2Affine> = points(300, &mut rng);
    check(&g, &g2, &vec![Fr::from_u64(3); 300]);
    let ctx = GpuMsm::resident(&g, &g2).unwrap();
    assert!(
        ctx.msm(&[Fr::ONE]).is_err(),
        "length mismatch must be an error"
    );
}

/// 2^k distinct random points cheaply (runs of start + j·step on the CPU, all cores).
fn big_points(log: u32, seed: u64) -> Vec<G1Affine> {
    testing::random_points(1 << log, &mut ChaCha20Rng::seed_from_u64(seed))
}

#[test]
#[ignore = "gpu"]
fn gpu_fixed_2_20() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(20);
    let p = big_points(20, 20);
    for kind in [Kind::Random, Kind::Sparse] {
        let s = scalars(p.len(), kind, &mut rng);
        assert_eq!(
            GpuMsm::resident(&g, &p).unwrap().msm(&s).unwrap(),
            cpu::msm(&p, &s).unwrap(),
            "{kind:?}"
        );
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_fixed_2_24() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(24);
    let p = big_points(24, 24);
    let s = scalars(p.len(), Kind::Random, &mut rng);
    assert_eq!(
        GpuMsm::resident(&g, &p).unwrap().msm(&s).unwrap(),
        cpu::msm(&p, &s).unwrap()
    );
}

#[test]
#[ignore = "gpu"]
fn gpu_chunked_equals_resident() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let n = 200_003;
    let p: Vec<G1Affine> = points(n, &mut rng);
    for kind in [Kind::Random, Kind::Sparse, Kind::Edge] {
        let s = scalars(n, kind, &mut rng);
        let resident = GpuMsm::resident(&g, &p).unwrap().msm(&s).unwrap();
        let mut pinned = g.vram().pinned::<G1Affine>(n).unwrap();
        pinned.copy_from_slice(&p);
        // A 64 MiB limit forces several chunks (the resident run needs far more).
        let streamed = GpuMsm::streamed(&g, pinned)
            .unwrap()
            .with_vram_limit(64 << 20);
        assert!(!streamed.is_resident());
        assert_eq!(streamed.msm(&s).unwrap(), resident, "{kind:?}");
        let dev = g.vram().from_host(&s).unwrap();
        assert_eq!(
            streamed.msm_device(&dev).unwrap(),
            resident,
            "{kind:?} device scalars"
        );
        // Odd chunk length: last chunk shorter, many ring turns.
        let mut pinned = g.vram().pinned::<G1Affine>(n).unwrap();
        pinned.copy_from_slice(&p);
        let odd = GpuMsm::streamed(&g, pinned).unwrap().with_chunk_len(30_001);
        assert_eq!(odd.msm(&s).unwrap(), resident, "{kind:?} chunk 30001");
    }
    let g2: Vec<G2Affine> = points(20_000, &mut rng);
    let s = scalars(20_000, Kind::Random, &mut rng);
    let mut pinned = g.vram().pinned::<G2Affine>(g2.len()).unwrap();
    pinned.copy_from_slice(&g2);
    let streamed = GpuMsm::streamed(&g, pinned).unwrap().with_chunk_len(6_000);
    assert_eq!(streamed.msm(&s).unwrap(), cpu::msm(&g2, &s).unwrap());
}

#[test]
#[ignore = "gpu"]
fn gpu_alloc_failure_restores_budget() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let n = 1 << 16;
    let p: Vec<G1Affine> = points(n, &mut rng);
    let s = scalars(n, Kind::Random, &mut rng);
    let ctx = GpuMsm::resident(&g, &p).unwrap();
    let want = ctx.msm(&s).unwrap();
    let budget = g.vram().budget().clone();
    let before = budget.in_use();
    let available = budget.available();
    let mut failures = 0;
    // Leave successively more room: some runs fail in the middle of their allocations.
    for room in [
        0u64,
        4 << 10,
        1 << 20,
        8 << 20,
        32 << 20,
        64 << 20,
        128 << 20,
    ] {
        let hog = budget
            .try_acquire(available.saturating_sub(room))
            .expect("hog");
        match ctx.msm(&s) {
            Ok(r) => assert_eq!(r, want),
            Err(_) => failures += 1,
        }
        drop(hog);
        assert_eq!(
            budget.in_use(),
            before,
            "budget changed after room = {room}"
        );
    }
    assert!(
        failures > 0,
        "no allocation failed: the test did not test anything"
    );
    assert_eq!(ctx.msm(&s).unwrap(), want);
}

fn median_ms(stream: &cuzk_gpu::Stream, g: &Gpu, f: impl FnMut()) -> f64 {
    g.median_ms(stream, 7, f).unwrap()
}

/// Benchmark rows of issue 5 (device time between events on the MSM stream, median of 7 after
/// a warm-up; scalars already on the device unless noted).
#[test]
#[ignore = "gpu"]
fn gpu_bench_msm() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let row = |name: &str, ms: f64, target: f64| {
        println!(
            "{name:<40} {ms:>9.2} ms  target {target:>6.1} ms  ratio {:.2}",
            ms / target
        );
    };
    let g1 = big_points(26, 26);
    for (log, target) in [(20u32, 12.0), (24, 110.0), (26, 420.0)] {
        let n = 1usize << log;
        let s = scalars(n, Kind::Random, &mut rng);
        let dev = g.vram().from_host(&s).unwrap();
        let ctx = GpuMsm::resident(&g, &g1[..n]).unwrap();
        let ms = median_ms(ctx.stream(), &g, || {
            ctx.msm_device(&dev).unwrap();
        });
        row(&format!("G1 2^{log} random, resident"), ms, target);
        if log == 24 {
            let ms = median_ms(ctx.stream(), &g, || {
                ctx.msm(&s).unwrap();
            });
            row("G1 2^24 random, host scalars", ms, target);
            let sparse = scalars(n, Kind::Sparse, &mut rng);
            let dev = g.vram().from_host(&sparse).unwrap();
            let ms = median_ms(ctx.stream(), &g, || {
                ctx.msm_device(&dev).unwrap();
            });
            row("G1 2^24 90% 0/1, resident", ms, 30.0);
            drop(ctx);
            let mut pinned = g.vram().pinned::<G1Affine>(n).unwrap();
            pinned.copy_from_slice(&g1[..n]);
            let streamed = GpuMsm::streamed(&g, pinned).unwrap();
            let ms = median_ms(streamed.stream(), &g, || {
                streamed.msm(&s).unwrap();
            });
            row("G1 2^24 random, streamed from pinned", ms, 164.0);
        }
    }
    drop(g1);
    let n = 1usize << 24;
    let g2: Vec<G2Affine> = testing::random_points(n, &mut rng);
    let s = scalars(n, Kind::Random, &mut rng);
    let dev = g.vram().from_host(&s).unwrap();
    let ctx = GpuMsm::resident(&g, &g2).unwrap();
    let ms = median_ms(ctx.stream(), &g, || {
        ctx.msm_device(&dev).unwrap();
    });
    row("G2 2^24 random, resident", ms, 330.0);
}
