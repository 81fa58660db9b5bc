//! GPU MSM against the CPU MSM. Needs a GPU: `cargo test --release -p cuzk-msm --test gpu --
//! --ignored` (panics without one). The timings are `benches/benches/gpu_msm*.rs`.

use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_gpu::Gpu;
use cuzk_msm::gpu::{CanonicalScalars, GpuMsm, Plan, Precompute};
use cuzk_msm::kernels::Windows;
use cuzk_msm::{MsmPoint, cpu, testing};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn gpu() -> Gpu {
    Gpu::first().expect("these tests need a CUDA GPU and built kernels")
}

use testing::ScalarKind as Kind;

fn scalars(n: usize, kind: Kind, rng: &mut ChaCha20Rng) -> Vec<Fr> {
    testing::random_scalars(n, kind, rng)
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
    let canonical = canonical(gpu, &padded);
    assert_eq!(
        ctx.msm_canonical_at(&canonical, 3).unwrap(),
        want,
        "canonical device scalars at an offset, n = {}",
        points.len()
    );
    assert!(
        ctx.msm_canonical_at(&canonical, 5).is_err(),
        "range past the end"
    );
}

/// `scalars` on the device, made canonical there.
fn canonical(gpu: &Gpu, scalars: &[Fr]) -> CanonicalScalars {
    let dev = gpu.vram().from_host(scalars).unwrap();
    let stream = gpu.stream("test-canonical").unwrap();
    CanonicalScalars::from_montgomery(gpu, &stream, dev).unwrap()
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

/// A context with `copies` precomputed copies (window `c`, else the context's choice for n
/// general scalars) against the CPU for each scalar vector in turn (repeated MSMs over one
/// context; host and device scalars). Where the call's plan picks the copies' window (always
/// with an explicit `c`) the profile shows the folded bucket sets; otherwise it ran unfolded.
fn check_precomputed<P: MsmPoint>(
    gpu: &Gpu,
    points: &[P],
    copies: usize,
    c: Option<u32>,
    runs: &[Vec<Fr>],
) {
    let n = points.len();
    let pre = c.map_or(Precompute::copies(copies), |c| {
        Precompute::copies(copies).with_window_bits(c)
    });
    let ctx = GpuMsm::resident_precomputed(gpu, points, pre).unwrap();
    let info = ctx.precomputed().expect("precomputed context");
    assert_eq!(ctx.len(), n);
    let nwin = 256usize.div_ceil(info.c as usize);
    assert_eq!(info.sets, nwin.div_ceil(copies.min(nwin)));
    assert_eq!(info.copies, nwin.div_ceil(info.sets));
    if let Some(c) = c {
        assert_eq!(info.c, c);
    }
    assert_eq!(
        ctx.resident_bytes(),
        GpuMsm::<P>::resident_bytes_for(n, info.copies).unwrap()
    );
    for (i, s) in runs.iter().enumerate() {
        let what = format!("{:?} n {n} copies {copies} c {c:?} run {i}", P::GROUP);
        let want = cpu::msm(points, s).unwrap();
        assert_eq!(ctx.msm(s).unwrap(), want, "{what}: host scalars");
        let dev = gpu.vram().from_host(s).unwrap();
        let (got, prof) = ctx.msm_device_profiled(&dev).unwrap();
        assert_eq!(got, want, "{what}: device scalars");
        assert_eq!(
            ctx.msm_canonical_at(&canonical(gpu, s), 0).unwrap(),
            want,
            "{what}: canonical device scalars"
        );
        if prof.general > 0 {
            let folded = prof.c == info.c && info.copies > 1;
            assert_eq!(
                prof.sets,
                if folded { info.sets } else { prof.nwin },
                "{what}"
            );
            if c.is_some() {
                assert!(folded, "{what}: an explicit window must fold every call");
            }
        }
    }
}

fn copies_strategy() -> impl Strategy<Value = usize> {
    // 2, 3, and more than any window count: one bucket set (full folding)
    prop_oneof![Just(2usize), Just(3), Just(256)]
}

fn window_strategy() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![Just(None), (3u32..=16).prop_map(Some)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    #[ignore = "gpu"]
    fn gpu_precomputed_matches_cpu_g1(
        seed in any::<u64>(),
        log in 0u32..=14,
        kind in kind_strategy(),
        copies in copies_strategy(),
        c in window_strategy(),
    ) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let n = rng.gen_range(0..=1usize << log);
        let p: Vec<G1Affine> = points(n, &mut rng);
        let runs = [scalars(n, kind, &mut rng), scalars(n, Kind::Random, &mut rng)];
        check_precomputed(&gpu(), &p, copies, c, &runs);
    }

    #[test]
    #[ignore = "gpu"]
    fn gpu_precomputed_matches_cpu_g2(
        seed in any::<u64>(),
        log in 0u32..=12,
        kind in kind_strategy(),
        copies in copies_strategy(),
        c in window_strategy(),
    ) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let n = rng.gen_range(0..=1usize << log);
        let p: Vec<G2Affine> = points(n, &mut rng);
        let runs = [scalars(n, kind, &mut rng), scalars(n, Kind::Random, &mut rng)];
        check_precomputed(&gpu(), &p, copies, c, &runs);
    }
}

/// Precomputed copies at 2^20 (G1): the context's own window (c = 16, 8 sets at 2 copies) with
/// random scalars folds; sparse scalars (general ≈ n / 10) pick a smaller window and run over
/// copy 0; then full folding at c = 20 (13 copies, one set) and 3 copies at c = 13; many MSMs
/// over one context. Plus a fixed-window context whose calls are overridden to another window
/// (`set_window_bits`): unfolded, still correct.
#[test]
#[ignore = "gpu"]
fn gpu_precomputed_2_20() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(2020);
    let p = big_points(20, 20);
    let n = p.len();
    let runs = vec![
        scalars(n, Kind::Random, &mut rng),
        scalars(n, Kind::Sparse, &mut rng),
        scalars(n, Kind::Edge, &mut rng),
        scalars(n, Kind::Mostly01, &mut rng),
    ];
    check_precomputed(&g, &p, 2, None, &runs);
    check_precomputed(&g, &p, 13, Some(20), &runs[..2]);
    check_precomputed(&g, &p, 3, Some(13), &runs[..2]);
    let mut ctx =
        GpuMsm::resident_precomputed(&g, &p, Precompute::copies(2).with_window_bits(16)).unwrap();
    ctx.set_window_bits(Some(12));
    let (got, prof) = ctx.msm_profiled(&runs[0]).unwrap();
    assert_eq!(
        (prof.c, prof.sets),
        (12, prof.nwin),
        "another window: unfolded"
    );
    assert_eq!(got, cpu::msm(&p, &runs[0]).unwrap());
    ctx.set_window_bits(Some(16));
    let (got, prof) = ctx.msm_profiled(&runs[2]).unwrap();
    assert_eq!((prof.c, prof.sets), (16, 8), "the copies' window: folded");
    assert_eq!(got, cpu::msm(&p, &runs[2]).unwrap());
}

/// A budget too small for the copies (or for the precomputation's scratch) fails the
/// construction cleanly and leaves the budget exactly as it was; with room it succeeds.
#[test]
#[ignore = "gpu"]
fn gpu_precomputed_budget() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(77);
    let n = 100_000;
    let p: Vec<G1Affine> = points(n, &mut rng);
    let s = scalars(n, Kind::Random, &mut rng);
    let budget = g.vram().budget().clone();
    let before = budget.in_use();
    let available = budget.available();
    let need = GpuMsm::<G1Affine>::resident_bytes_for(n, 3).unwrap();
    let (mut failures, mut successes) = (0, 0);
    // room for: the points only, two copies, three copies but not the scratch, plenty
    for room in [0, need / 3, need * 2 / 3, need + (1 << 20), need * 4] {
        let hog = budget
            .try_acquire(available.saturating_sub(room))
            .expect("hog");
        let held = budget.in_use();
        match GpuMsm::resident_precomputed(&g, &p, Precompute::copies(3).with_window_bits(12)) {
            Ok(ctx) => {
                assert!(room >= need, "room {room} < {need}: cannot hold the copies");
                assert_eq!(ctx.msm(&s).unwrap(), cpu::msm(&p, &s).unwrap());
                successes += 1;
            }
            Err(e) => {
                failures += 1;
                assert_eq!(budget.in_use(), held, "room {room}: {e}");
            }
        }
        drop(hog);
        assert_eq!(budget.in_use(), before, "room {room}: budget changed");
    }
    assert!(failures >= 3, "{failures}: too little room must fail");
    assert_eq!(successes, 1, "plenty of room must succeed");
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

/// Identity points are dropped before the sort: the profile counts only the general scalars
/// of non-identity points, and the result still equals the CPU's (G1 and G2, n not a multiple
/// of 32, scalars at an offset, Montgomery scalars copied or canonical ones read in place).
#[test]
#[ignore = "gpu"]
fn gpu_identity_points_are_skipped() {
    fn case<P: MsmPoint>(g: &Gpu, n: usize, rng: &mut ChaCha20Rng) {
        let mut p: Vec<P> = testing::random_points(n, rng);
        for (i, x) in p.iter_mut().enumerate() {
            if i % 3 == 0 || (i / 64) % 5 == 0 {
                *x = P::default();
            }
        }
        let s = scalars(n, Kind::Random, rng);
        let live = (0..n)
            .filter(|&i| p[i] != P::default() && s[i] != Fr::ZERO && s[i] != Fr::ONE)
            .count();
        let ctx = GpuMsm::resident(g, &p).unwrap();
        let mut padded = vec![Fr::from_u64(7); 5];
        padded.extend_from_slice(&s);
        let dev = g.vram().from_host(&padded).unwrap();
        let want = cpu::msm(&p, &s).unwrap();
        assert_eq!(
            ctx.msm_device_at(&dev, 5).unwrap(),
            want,
            "{:?} n = {n}",
            P::GROUP
        );
        // Ones among the scalars of identity points must not be summed either.
        let mut ones = padded.clone();
        for x in ones.iter_mut().skip(5).step_by(2) {
            *x = Fr::ONE;
        }
        assert_eq!(
            ctx.msm_canonical_at(&canonical(g, &ones), 5).unwrap(),
            cpu::msm(&p, &ones[5..]).unwrap(),
            "{:?} n = {n} canonical",
            P::GROUP
        );
        let (got, prof) = ctx.msm_profiled(&s).unwrap();
        assert_eq!(got, want, "{:?} n = {n} host", P::GROUP);
        assert_eq!(prof.general, live, "{:?} n = {n}: general count", P::GROUP);
    }
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(31);
    for n in [1usize, 33, 1000, 65_537] {
        case::<G1Affine>(&g, n, &mut rng);
    }
    case::<G2Affine>(&g, 4099, &mut rng);
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
        let mut padded = vec![Fr::from_u64(3); 2];
        padded.extend_from_slice(&s);
        assert_eq!(
            streamed
                .msm_canonical_at(&canonical(&g, &padded), 2)
                .unwrap(),
            resident,
            "{kind:?} canonical device scalars"
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
    // Nothing kept between calls, so the budget must come back to exactly the points.
    let ctx = GpuMsm::resident(&g, &p).unwrap().keep_scratch(false);
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

/// The G1 accumulation against the CPU (sizes from one thread's slice to many slices per
/// bucket; host and device scalars; streamed too).
#[test]
#[ignore = "gpu"]
fn gpu_accumulate_matches_cpu() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(44);
    for n in [1usize, 3, 1000, 70_001, 1 << 20] {
        let p: Vec<G1Affine> = points(n, &mut rng);
        let ctx = GpuMsm::resident(&g, &p).unwrap();
        for kind in [Kind::Random, Kind::Mostly01, Kind::Edge] {
            let s = scalars(n, kind, &mut rng);
            let want = cpu::msm(&p, &s).unwrap();
            assert_eq!(ctx.msm(&s).unwrap(), want, "n = {n} {kind:?}");
            let dev = g.vram().from_host(&s).unwrap();
            assert_eq!(
                ctx.msm_device(&dev).unwrap(),
                want,
                "n = {n} {kind:?} device"
            );
        }
        let five = vec![Fr::from_u64(5); n];
        assert_eq!(
            ctx.msm(&five).unwrap(),
            cpu::msm(&p, &five).unwrap(),
            "one bucket"
        );
    }
    let n = 200_003;
    let p: Vec<G1Affine> = points(n, &mut rng);
    let s = scalars(n, Kind::Random, &mut rng);
    let mut pinned = g.vram().pinned::<G1Affine>(n).unwrap();
    pinned.copy_from_slice(&p);
    let streamed = GpuMsm::streamed(&g, pinned).unwrap().with_chunk_len(70_000);
    assert_eq!(
        streamed.msm(&s).unwrap(),
        cpu::msm(&p, &s).unwrap(),
        "streamed"
    );
}

/// A context that keeps its scratch: results equal the CPU's across plans that grow and
/// shrink (dense, sparse, all-ones), host scalars staged through pinned memory in several
/// slots, and the budget is exactly restored by release_scratch and by drop.
#[test]
#[ignore = "gpu"]
fn gpu_kept_scratch_matches_cpu() {
    let g = gpu();
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let budget = g.vram().budget().clone();
    // > 2^19 (one staging slot): the host path uses both slots and a short last piece.
    let n = 600_001;
    let p: Vec<G1Affine> = points(n, &mut rng);
    let before = budget.in_use();
    let ctx = GpuMsm::resident(&g, &p).unwrap(); // keeps its scratch by default
    let base = budget.in_use();
    assert_eq!(ctx.kept_bytes(), 0);
    for kind in [
        Kind::Sparse,
        Kind::Random,
        Kind::Mostly01,
        Kind::Small,
        Kind::Edge,
        Kind::Random,
    ] {
        let s = scalars(n, kind, &mut rng);
        let want = cpu::msm(&p, &s).unwrap();
        assert_eq!(ctx.msm(&s).unwrap(), want, "{kind:?} host scalars");
        let dev = g.vram().from_host(&s).unwrap();
        assert_eq!(
            ctx.msm_device(&dev).unwrap(),
            want,
            "{kind:?} device scalars"
        );
        let (r, prof) = ctx.msm_device_profiled(&dev).unwrap();
        assert_eq!(r, want, "{kind:?} profiled");
        assert_eq!(prof.n, n);
        assert!(ctx.kept_bytes() > 0, "{kind:?}: nothing kept");
        drop(dev);
        assert_eq!(
            budget.in_use(),
            base + ctx.kept_bytes(),
            "{kind:?}: budget is points + kept buffers"
        );
    }
    let ones = vec![Fr::ONE; n];
    assert_eq!(
        ctx.msm(&ones).unwrap(),
        cpu::msm(&p, &ones).unwrap(),
        "all ones"
    );
    ctx.release_scratch();
    assert_eq!(ctx.kept_bytes(), 0);
    assert_eq!(budget.in_use(), base, "release_scratch restores the budget");
    // Kept buffers count as available and are given back to a request that needs them.
    let s = scalars(n, Kind::Random, &mut rng);
    let want = ctx.msm(&s).unwrap();
    let kept = ctx.kept_bytes();
    assert_eq!(budget.available(), budget.free() + kept);
    let hog = budget
        .try_acquire(budget.available())
        .expect("hog takes the kept bytes");
    assert_eq!((ctx.kept_bytes(), budget.in_use()), (0, budget.total()));
    assert!(ctx.msm(&s).is_err(), "no room: must fail");
    drop(hog);
    assert_eq!(budget.in_use(), base, "failure kept nothing");
    assert_eq!(ctx.msm(&s).unwrap(), want);
    assert_eq!(ctx.kept_bytes(), kept);
    // An allocation failure with kept buffers: the budget is restored once they are released.
    ctx.release_scratch();
    let hog = budget.try_acquire(budget.available()).expect("hog");
    assert!(ctx.msm(&s).is_err(), "no room: must fail");
    drop(hog);
    assert_eq!(budget.in_use(), base, "failure left the budget changed");
    assert_eq!(ctx.msm(&s).unwrap(), want);
    assert_eq!(ctx.kept_bytes(), kept);
    drop(ctx);
    assert_eq!(budget.in_use(), before, "drop frees everything");
}

/// The device-wide bucket-count scan (`cuzk_msm::kernels::scan`, three launches) against a host
/// prefix sum: random counts, tile edges (512) and the
/// middle launch's 1024 threads, 13 · 2^19 (c = 20), 12 · 2^21 (c = 22), the largest allowed;
/// nothing past `offsets[len]` / `cursors[len - 1]` may be written.
#[test]
#[ignore = "gpu"]
fn gpu_scan_matches_host_prefix_sum() {
    use cuzk_msm::kernels::{MAX_SCAN_LEN, scan};
    let g = gpu();
    let s = g.stream("scan-test").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(77);
    const POISON: u32 = 0xdead_beef;
    let lens = [
        0usize,
        1,
        2,
        511,
        512,
        513,
        1023,
        1024,
        1025,
        512 * 1024 + 777,
        13 << 19,
        12 << 21,
        MAX_SCAN_LEN,
    ];
    for (case, &len) in lens.iter().enumerate() {
        // mostly small counts, some zero runs, an occasional large one (u32 sum stays < 2^32)
        let counts: Vec<u32> = (0..len)
            .map(|_| match rng.gen_range(0..16) {
                0..=3 => 0,
                4 => rng.gen_range(0..1000),
                _ => rng.gen_range(0..40),
            })
            .collect();
        let mut want = Vec::with_capacity(len + 1);
        let mut run = 0u32;
        for &c in &counts {
            want.push(run);
            run = run.wrapping_add(c);
        }
        want.push(run);
        let dcounts = g.vram().from_host(&counts).unwrap();
        {
            let mut offsets = g.vram().from_host(&vec![POISON; len + 3]).unwrap();
            let mut cursors = g.vram().from_host(&vec![POISON; len + 2]).unwrap();
            scan(&g, &s, &dcounts, len, &mut offsets, &mut cursors).unwrap();
            let mut o = vec![0u32; len + 3];
            let mut c = vec![0u32; len + 2];
            offsets.copy_to_host_on(&mut o, s.cuda()).unwrap();
            cursors.copy_to_host_on(&mut c, s.cuda()).unwrap();
            let what = format!("case {case}: len {len}");
            if let Some(i) = (0..=len).find(|&i| o[i] != want[i]) {
                panic!("{what}: offsets[{i}] = {} want {}", o[i], want[i]);
            }
            if let Some(i) = (0..len).find(|&i| c[i] != want[i]) {
                panic!("{what}: cursors[{i}] = {} want {}", c[i], want[i]);
            }
            assert_eq!(
                &o[len + 1..],
                &[POISON; 2],
                "{what}: offsets written past len"
            );
            assert_eq!(&c[len..], &[POISON; 2], "{what}: cursors written past len");
        }
    }
    let dcounts = g.vram().alloc::<u32>(MAX_SCAN_LEN + 1).unwrap();
    let mut o = g.vram().alloc::<u32>(MAX_SCAN_LEN + 2).unwrap();
    let mut c = g.vram().alloc::<u32>(MAX_SCAN_LEN + 1).unwrap();
    assert!(
        scan(&g, &s, &dcounts, MAX_SCAN_LEN + 1, &mut o, &mut c).is_err(),
        "too long"
    );
    assert!(scan(&g, &s, &dcounts, 10, &mut o, &mut c).is_ok());
    let mut short = g.vram().alloc::<u32>(10).unwrap();
    assert!(
        scan(&g, &s, &dcounts, 10, &mut short, &mut c).is_err(),
        "offsets needs len + 1"
    );
}

/// Host reference of the sort: per key ((w mod sets) · 2^(c-1) + |digit| − 1 for window w),
/// the sorted entries `index | sign << 31` (index i + stride · (w / sets)) of the general
/// scalars (neither 0 nor 1); unfolded: sets = nwin.
fn host_sort(scalars: &[Fr], win: &Windows) -> Vec<Vec<u32>> {
    let (c, nwin, sets) = (win.c, win.nwin, win.sets);
    let half = 1u64 << (c - 1);
    let mut keys = vec![Vec::new(); win.nkeys()];
    for (i, s) in scalars.iter().enumerate() {
        let l = s.to_canonical();
        if l == [0; 4] || l == [1, 0, 0, 0] {
            continue;
        }
        let bits = |off: u32| -> u64 {
            let mut v = 0u64;
            for b in 0..c {
                let p = off + b;
                if p < 256 {
                    v |= ((l[(p / 64) as usize] >> (p % 64)) & 1) << b;
                }
            }
            v
        };
        let mut carry = 0u64;
        for w in 0..nwin {
            let mut v = bits(w * c) + carry;
            let neg = v > half;
            if neg {
                carry = 1;
                v = (1u64 << c) - v;
            } else {
                carry = 0;
            }
            if v != 0 {
                let key = (w % sets) as u64 * half + v - 1;
                let index = i + win.stride * (w / sets) as usize;
                keys[key as usize].push(index as u32 | if neg { 1 << 31 } else { 0 });
            }
        }
    }
    for k in &mut keys {
        k.sort_unstable();
    }
    keys
}

/// The binned sort gives the `offsets` and the entries per key of a host reference, for random, sparse, all-equal, small-range and 0/1
/// scalars, n not a power of two, c from 2 to 22, the plan's fine bits and the extremes (F = 0:
/// one key per bin; the largest F: bins far over the shared tile for equal scalars and the top
/// window), unfolded and folded (precomputed copies: 2, 3 and one set for all windows); and
/// whole MSMs equal the CPU MSM.
#[test]
#[ignore = "gpu"]
fn gpu_bin_sort_matches_host_sort() {
    use cuzk_msm::kernels::{Scalars, bin_sort, max_fine_bits, prepare, sort_bins};
    let g = gpu();
    let st = g.stream("sort-test").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    let eq = Fr::random(&mut rng);
    #[derive(Debug, Clone, Copy)]
    enum S {
        Random,
        Sparse,
        Equal,
        SmallRange,
        ZeroOne,
    }
    // (n, scalars, c, copies): 1 = unfolded
    let cases: &[(usize, S, u32, usize)] = &[
        (100_003, S::Random, 16, 1),
        (100_003, S::Random, 20, 1),
        (70_001, S::Random, 22, 1),
        (30_001, S::Random, 2, 1),
        (30_001, S::Random, 9, 1),
        (100_003, S::Sparse, 13, 1),
        (100_003, S::Sparse, 20, 1),
        (20_000, S::Equal, 16, 1),
        (20_000, S::Equal, 20, 1),
        (50_000, S::SmallRange, 20, 1),
        (50_000, S::SmallRange, 11, 1),
        (4_097, S::ZeroOne, 16, 1),
        (1, S::Random, 10, 1),
        (1 << 20, S::Random, 20, 1),
        // from SORT_HIST_SMEM_MIN: the bin histogram in shared memory
        ((1 << 22) + 9, S::Random, 20, 1),
        ((1 << 22) + 1, S::SmallRange, 16, 1),
        // precomputed copies: 2 (n · 2 past a power of two), 3, one set for all windows
        (65_537, S::Random, 20, 2),
        (100_003, S::Sparse, 13, 3),
        (20_000, S::Equal, 16, 2),
        (30_001, S::Random, 11, 24),
        ((1 << 22) + 9, S::Random, 20, 2),
    ];
    for &(n, kind, c, copies) in cases {
        let sc: Vec<Fr> = (0..n)
            .map(|_| match kind {
                S::Random => Fr::random(&mut rng),
                S::Sparse => match rng.gen_range(0..10) {
                    0..=4 => Fr::ZERO,
                    5..=7 => Fr::ONE,
                    8 => Fr::from_u64(rng.gen_range(2..1 << 20)),
                    _ => Fr::random(&mut rng),
                },
                S::Equal => eq,
                S::SmallRange => Fr::from_u64(rng.gen_range(0..1 << 14)),
                S::ZeroOne => {
                    if rng.gen_bool(0.5) {
                        Fr::ONE
                    } else {
                        Fr::ZERO
                    }
                }
            })
            .collect();
        let win = Windows::folded(c, copies, n);
        let want = host_sort(&sc, &win);
        let nwin = win.nwin;
        let nkeys = want.len();
        let total: usize = want.iter().map(Vec::len).sum();
        let v = g.vram();
        let dev = v.from_host(&sc).unwrap();
        let mut canon = v.alloc::<Fr>(n).unwrap();
        let mut counters = v.from_host(&[0u32; 2][..]).unwrap();
        prepare(&g, &st, &dev, 0, &mut canon, n, &mut counters, None).unwrap();
        let general = sc.iter().filter(|s| !s.is_zero() && **s != Fr::ONE).count();
        let cap = (general * nwin as usize).max(1);
        let download = |b: &cuzk_gpu::DeviceBuffer<u32>| {
            let mut h = vec![0u32; b.len()];
            b.copy_to_host_on(&mut h, st.cuda()).unwrap();
            h
        };
        let compare = |what: &str, off: &[u32], sorted: &[u32]| {
            let mut run = 0usize;
            for (k, w) in want.iter().enumerate() {
                assert_eq!(off[k] as usize, run, "{what}: offsets[{k}]");
                let mut got = sorted[off[k] as usize..off[k + 1] as usize].to_vec();
                got.sort_unstable();
                assert_eq!(&got, w, "{what}: entries of key {k}");
                run += w.len();
            }
            assert_eq!(off[nkeys] as usize, total, "{what}: offsets[nkeys]");
        };
        let mut counts = v.alloc::<u32>(nkeys).unwrap();
        let mut cursors = v.alloc::<u32>(nkeys).unwrap();
        // the binned sort at the plan's (F, Ft) and the extremes
        let cv = cuzk_msm::kernels::Curve::G1;
        let plan = Plan::folded(general, n, c, copies, 132, cv);
        assert_eq!(plan.windows(n), win);
        let fmax = max_fine_bits(win.index_bound(n), c);
        let mut fs = vec![
            (plan.sort_fine_bits, plan.sort_top_fine_bits),
            (0, 0),
            (fmax, fmax),
            (fmax, 0),
        ];
        fs.sort_unstable();
        fs.dedup();
        for (f, ft) in fs {
            let nbins = sort_bins(c, win.sets, f, ft);
            if nbins > 1 << 22 {
                continue; // F = 0 at c = 20, 22: millions of one-key bins, covered by the host emulation
            }
            let mut bins = v.alloc::<u32>(nbins + 2).unwrap();
            let mut offsets = v.alloc::<u32>(nkeys + 1).unwrap();
            let mut sorted = v.alloc::<u32>(cap).unwrap();
            bin_sort(
                &g,
                &st,
                Scalars {
                    buf: &canon,
                    at: 0,
                    skip: None,
                },
                n,
                &win,
                f,
                ft,
                &mut counts,
                &mut bins,
                &mut cursors,
                &mut sorted,
                &mut offsets,
                |_| Ok(()),
            )
            .unwrap();
            let what = format!("bins n {n} {kind:?} c {c} copies {copies} F {f} Ft {ft}");
            let (o, so) = (download(&offsets), download(&sorted));
            compare(&what, &o, &so);
        }
    }
    // Whole MSMs against the CPU (n not a power of two, several kinds).
    for (log, kind) in [(12u32, Kind::Random), (14, Kind::Sparse), (13, Kind::Edge)] {
        let n = (1usize << log) + 17;
        let pts: Vec<G1Affine> = points(n, &mut rng);
        let mut sc = scalars(n, kind, &mut rng);
        sc[..n / 8].fill(eq); // a run of equal scalars: oversized bins
        let want = cpu::msm(&pts, &sc).unwrap();
        for c in [None, Some(13), Some(22)] {
            let mut ctx = GpuMsm::resident(&g, &pts).unwrap();
            ctx.set_window_bits(c);
            assert_eq!(ctx.msm(&sc).unwrap(), want, "c {c:?} n {n} {kind:?}");
        }
    }
}

/// The one call (`cuzk_msm::msm`) runs on the GPU above its threshold and gives the CPU's
/// point, G1 and G2.
#[test]
#[ignore = "gpu"]
fn gpu_one_call_msm_matches_cpu() {
    assert!(
        Gpu::available().is_some(),
        "these tests need a CUDA GPU and built kernels"
    );
    let mut rng = ChaCha20Rng::seed_from_u64(77);
    for n in [1 << 12, (1 << 14) + 3] {
        let s = scalars(n, Kind::Random, &mut rng);
        let p1: Vec<G1Affine> = points(n, &mut rng);
        assert_eq!(
            cuzk_msm::msm(&p1, &s).unwrap(),
            cpu::msm(&p1, &s).unwrap(),
            "G1 {n}"
        );
        let p2: Vec<G2Affine> = points(n, &mut rng);
        assert_eq!(
            cuzk_msm::msm(&p2, &s).unwrap(),
            cpu::msm(&p2, &s).unwrap(),
            "G2 {n}"
        );
    }
    let p: Vec<G1Affine> = points(1 << 12, &mut rng);
    assert!(cuzk_msm::msm(&p, &[Fr::ONE; 3]).is_err(), "lengths differ");
}
