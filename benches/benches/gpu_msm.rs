//! GPU MSM bench: G1 2^20, 2^24, 2^26 and G2 2^24 (resident, scratch freed per call,
//! precomputed copies, host scalars, sparse, streamed), each size checked once against the CPU
//! MSM, then timed; per-phase profiles (`msm_profile` lines) and a summary table.
//! `cargo bench -p cuzk-benches --bench gpu_msm [-- GROUP...]` (needs a GPU; groups: `G1 2^20`,
//! `G1 2^24`, `G1 2^26`, `G2 2^24`).

#![forbid(unsafe_code)]

use cuzk_benches::{Only, Summary, check, gpu};
use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_gpu::Gpu;
use cuzk_msm::gpu::{GpuMsm, MsmProfile, Precompute};
use cuzk_msm::testing::{self, ScalarKind};
use cuzk_msm::{MsmPoint, cpu};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn median_ms(stream: &cuzk_gpu::Stream, g: &Gpu, f: impl FnMut()) -> f64 {
    g.median_ms(stream, 7, f).unwrap()
}

/// One profiled MSM of the median total among 3 (after a warm-up), and a check that profiling
/// does not change the result.
fn profile<P: MsmPoint>(ctx: &GpuMsm<P>, dev: &cuzk_gpu::DeviceBuffer<Fr>, name: &str) {
    let want = ctx.msm_device(dev).unwrap();
    let mut runs: Vec<MsmProfile> = (0..3)
        .map(|_| {
            let (r, p) = ctx.msm_device_profiled(dev).unwrap();
            assert_eq!(r, want, "{name}: profiled result differs");
            p
        })
        .collect();
    runs.sort_by(|a, b| a.total_ms.total_cmp(&b.total_ms));
    println!("msm_profile {name}: {}", runs[1]);
}

fn row(name: &str, ms: f64, target: f64) {
    println!(
        "{name:<40} {ms:>9.2} ms  target {target:>6.1} ms  ratio {:.2}",
        ms / target
    );
}

/// Bench row of a context with `copies` precomputed copies (the window the context picks for
/// n general scalars), checked against `want`, with its profile and precompute time.
fn bench_precomputed<P: MsmPoint>(
    g: &Gpu,
    points: &[P],
    copies: usize,
    dev: &cuzk_gpu::DeviceBuffer<Fr>,
    want: P::Projective,
    name: &str,
    target: f64,
) {
    let ctx = GpuMsm::resident_precomputed(g, points, Precompute::copies(copies)).unwrap();
    let info = ctx.precomputed().unwrap();
    println!(
        "msm_precompute {name}: c={} copies={} sets={} precompute={:.1} ms resident={:.2} GiB",
        info.c,
        info.copies,
        info.sets,
        info.precompute_ms,
        ctx.resident_bytes() as f64 / (1u64 << 30) as f64
    );
    assert_eq!(ctx.msm_device(dev).unwrap(), want, "{name}");
    let ms = median_ms(ctx.stream(), g, || {
        ctx.msm_device(dev).unwrap();
    });
    row(name, ms, target);
    profile(&ctx, dev, name);
}

/// Device time between events on the MSM stream, median of 7 after a warm-up; scalars already
/// on the device unless noted. Each size's result is checked once against the CPU MSM, every
/// other row against that. The precomputed rows (x m: m copies of the points, window folding)
/// print the precomputation's time in `msm_precompute` lines.
fn main() {
    let g = gpu();
    let mut summary = Summary::default();
    let g1_sizes = [(20u32, 12.0), (24, 110.0), (26, 420.0)];
    let g1_group = |log: u32| format!("G1 2^{log}");
    let groups: Vec<String> = (g1_sizes.iter().map(|s| g1_group(s.0)))
        .chain([G2_GROUP.to_string()])
        .collect();
    let only = Only::from_args(&groups);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let g1_sizes: Vec<(u32, f64)> = g1_sizes
        .into_iter()
        .filter(|&(log, _)| only.runs(&g1_group(log)))
        .collect();
    let g1_len = g1_sizes.last().map_or(0, |(log, _)| 1usize << log);
    let g1: Vec<G1Affine> = testing::random_points(g1_len, &mut ChaCha20Rng::seed_from_u64(26));
    for (log, target) in g1_sizes {
        let n = 1usize << log;
        let s = testing::random_scalars(n, ScalarKind::Random, &mut rng);
        let dev = g.vram().from_host(&s).unwrap();
        let ctx = GpuMsm::resident(&g, &g1[..n]).unwrap();
        let want = cpu::msm(&g1[..n], &s).unwrap();
        check(
            ctx.msm_device(&dev).unwrap() == want,
            &format!("G1 2^{log} random"),
        );
        let ms = median_ms(ctx.stream(), &g, || {
            ctx.msm_device(&dev).unwrap();
        });
        row(&format!("G1 2^{log} random, resident"), ms, target);
        let sppark = match log {
            20 => 20.9,
            24 => 164.0,
            _ => 596.0,
        };
        summary.add(format!("MSM G1 2^{log} (sppark, pinned)"), ms, Some(sppark));
        profile(&ctx, &dev, &format!("G1 2^{log} random"));
        // The same context without a kept scratch: the cost of allocating and freeing it.
        let ctx = ctx.keep_scratch(false);
        assert_eq!(
            ctx.msm_device(&dev).unwrap(),
            want,
            "scratch freed per call"
        );
        let ms = median_ms(ctx.stream(), &g, || {
            ctx.msm_device(&dev).unwrap();
        });
        row(
            &format!("G1 2^{log} random, scratch freed per call"),
            ms,
            target,
        );
        profile(&ctx, &dev, &format!("G1 2^{log} random freed-scratch"));
        let ctx = ctx.keep_scratch(true);
        if log >= 24 {
            bench_precomputed(
                &g,
                &g1[..n],
                2,
                &dev,
                want,
                &format!("G1 2^{log} precomputed x2"),
                target,
            );
        }
        if log == 24 {
            let name = "G1 2^24 precomputed x13";
            bench_precomputed(&g, &g1[..n], 13, &dev, want, name, target);
        }
        if log == 24 {
            assert_eq!(ctx.msm(&s).unwrap(), want, "host scalars");
            let ms = median_ms(ctx.stream(), &g, || {
                ctx.msm(&s).unwrap();
            });
            row("G1 2^24 random, host scalars", ms, target);
            let sparse = testing::random_scalars(n, ScalarKind::Sparse, &mut rng);
            let dev = g.vram().from_host(&sparse).unwrap();
            let sparse_want = cpu::msm(&g1[..n], &sparse).unwrap();
            check(
                ctx.msm_device(&dev).unwrap() == sparse_want,
                "G1 2^24 90% 0/1",
            );
            let ms = median_ms(ctx.stream(), &g, || {
                ctx.msm_device(&dev).unwrap();
            });
            row("G1 2^24 90% 0/1, resident", ms, 30.0);
            drop(ctx);
            let mut pinned = g.vram().pinned::<G1Affine>(n).unwrap();
            pinned.copy_from_slice(&g1[..n]);
            let streamed = GpuMsm::streamed(&g, pinned).unwrap();
            assert_eq!(streamed.msm(&s).unwrap(), want, "streamed");
            let ms = median_ms(streamed.stream(), &g, || {
                streamed.msm(&s).unwrap();
            });
            row("G1 2^24 random, streamed from pinned", ms, 164.0);
        }
    }
    drop(g1);
    if only.runs(G2_GROUP) {
        bench_g2(&g, &mut rng, &mut summary);
    }
    summary.print("MSM");
}

const G2_GROUP: &str = "G2 2^24";

/// G2 2^24: resident, precomputed copies, scratch freed per call.
fn bench_g2(g: &Gpu, rng: &mut ChaCha20Rng, summary: &mut Summary) {
    let n = 1usize << 24;
    let g2: Vec<G2Affine> = testing::random_points(n, rng);
    let s = testing::random_scalars(n, ScalarKind::Random, rng);
    let dev = g.vram().from_host(&s).unwrap();
    let ctx = GpuMsm::resident(g, &g2).unwrap();
    let want = cpu::msm(&g2, &s).unwrap();
    check(ctx.msm_device(&dev).unwrap() == want, "G2 2^24 random");
    let ms = median_ms(ctx.stream(), g, || {
        ctx.msm_device(&dev).unwrap();
    });
    row("G2 2^24 random, resident", ms, 330.0);
    summary.add("MSM G2 2^24 (target)", ms, Some(330.0));
    profile(&ctx, &dev, "G2 2^24 random");
    bench_precomputed(g, &g2, 2, &dev, want, "G2 2^24 precomputed x2", 330.0);
    bench_precomputed(g, &g2, 4, &dev, want, "G2 2^24 precomputed x4", 330.0);
    let ctx = ctx.keep_scratch(false);
    let ms = median_ms(ctx.stream(), g, || {
        ctx.msm_device(&dev).unwrap();
    });
    row("G2 2^24 random, scratch freed per call", ms, 330.0);
    profile(&ctx, &dev, "G2 2^24 random freed-scratch");
}
