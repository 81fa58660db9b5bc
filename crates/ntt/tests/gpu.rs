//! GPU transforms and the quotient pipeline against the CPU, bit for bit. Needs a GPU:
//! `cargo test --release -p cuzk-ntt --test gpu -- --ignored` (panics without
//! one). The timings are `benches/benches/gpu_ntt.rs`.

use cuzk_field::Fr;
use cuzk_gpu::{Gpu, Stream};
use cuzk_ntt::gpu::{RootsCache, check_fits, device_tables};
use cuzk_ntt::{Domain, NttError, Order, Transform};
use proptest::prelude::*;

fn gpu() -> Gpu {
    Gpu::first().expect("these tests need a CUDA GPU and built kernels")
}

fn random(n: usize, seed: u64) -> Vec<Fr> {
    cuzk_ntt::testing::random_fr(n, seed)
}

fn cpu(d: &Domain, v: &mut [Fr], t: Transform) {
    d.transform_in_place(v, t).unwrap()
}

fn reorder(v: &mut [Fr], order: Order, d: &Domain) {
    if order == Order::BitReversed {
        d.bit_reverse_in_place(v).unwrap();
    }
}

/// GPU result of `t` on each polynomial of `x` (natural order), given and returned in the
/// requested orders, compared with the CPU.
fn check(g: &Gpu, d: &Domain, x: &[Fr], t: Transform, input: Order, output: Order) {
    let n = d.size();
    let mut staged = x.to_vec();
    for p in staged.chunks_mut(n) {
        reorder(p, input, d);
    }
    let mut dev = g.vram().from_host(&staged).unwrap();
    let stream = g.stream("test").unwrap();
    d.gpu_transform(g, &stream, &mut dev, t, input, output)
        .unwrap();
    stream.synchronize().unwrap();
    let got = dev.to_vec().unwrap();
    for (b, p) in x.chunks(n).enumerate() {
        let mut want = p.to_vec();
        cpu(d, &mut want, t);
        reorder(&mut want, output, d);
        assert!(
            got[b * n..(b + 1) * n] == want[..],
            "2^{} {t:?} {input:?}->{output:?} poly {b}",
            d.log_size()
        );
    }
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::Natural), Just(Order::BitReversed)]
}
fn transform() -> impl Strategy<Value = Transform> {
    prop_oneof![
        Just(Transform::Forward),
        Just(Transform::Inverse),
        Just(Transform::CosetForward),
        Just(Transform::CosetInverse)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    #[ignore = "gpu"]
    fn gpu_matches_cpu(lg in 1u32..=20, t in transform(), input in order(), output in order(), batch in 1usize..=3, seed: u64) {
        let g = gpu();
        let d = Domain::new(lg).unwrap();
        let batch = if lg <= 14 { batch } else { 1 };
        check(&g, &d, &random(d.size() * batch, seed), t, input, output);
    }
}

/// Every size, transform and order pair once (the proptest samples; this sweeps).
#[test]
#[ignore = "gpu"]
fn gpu_sweep_small_sizes() {
    let g = gpu();
    for lg in 1..=12 {
        let d = Domain::new(lg).unwrap();
        for t in Transform::ALL {
            for input in [Order::Natural, Order::BitReversed] {
                for output in [Order::Natural, Order::BitReversed] {
                    check(
                        &g,
                        &d,
                        &random(d.size() * 2, u64::from(lg)),
                        t,
                        input,
                        output,
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_fixed_2_24() {
    let g = gpu();
    let d = Domain::new(24).unwrap();
    let x = random(d.size(), 24);
    check(
        &g,
        &d,
        &x,
        Transform::Forward,
        Order::Natural,
        Order::Natural,
    );
    check(
        &g,
        &d,
        &x,
        Transform::CosetInverse,
        Order::BitReversed,
        Order::Natural,
    );
}

#[test]
#[ignore = "gpu"]
fn gpu_fixed_2_26() {
    let g = gpu();
    let d = Domain::new(26).unwrap();
    let x = random(d.size(), 26);
    check(
        &g,
        &d,
        &x,
        Transform::Forward,
        Order::Natural,
        Order::BitReversed,
    );
    check(
        &g,
        &d,
        &x,
        Transform::CosetForward,
        Order::Natural,
        Order::Natural,
    );
}

#[test]
#[ignore = "gpu"]
fn gpu_host_convenience() {
    let g = gpu();
    let d = Domain::new(13).unwrap();
    let x = random(d.size() * 3, 7);
    let mut got = x.clone();
    d.gpu_transform_host(
        &g,
        &mut got,
        Transform::CosetForward,
        Order::Natural,
        Order::Natural,
    )
    .unwrap();
    for (b, p) in x.chunks(d.size()).enumerate() {
        let mut want = p.to_vec();
        d.coset_fft_in_place(&mut want).unwrap();
        assert_eq!(&got[b * d.size()..(b + 1) * d.size()], &want[..]);
    }
    d.gpu_transform_host(
        &g,
        &mut got,
        Transform::CosetInverse,
        Order::Natural,
        Order::Natural,
    )
    .unwrap();
    assert_eq!(got, x);
}

fn quotient_case(g: &Gpu, lg: u32) {
    let d = Domain::new(lg).unwrap();
    let n = d.size();
    // A satisfied system (c = a·b on H) like a real witness, against `Domain::quotient`, and an
    // unsatisfied one, against the quotient on the pipeline's coset.
    let a = random(n, 1);
    let b = random(n, 2);
    let sat: Vec<Fr> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
    for (satisfied, c) in [(true, sat), (false, random(n, 3))] {
        let want = if satisfied {
            d.quotient(&a, &b, &c).unwrap()
        } else {
            d.gpu_coset_quotient(&a, &b, &c).unwrap()
        };
        assert_eq!(
            d.gpu_quotient_host(g, &a, &b, &c).unwrap(),
            want,
            "2^{lg} host"
        );

        // Device API: b and c come back to the budget.
        {
            let budget = g.vram().budget().clone();
            let stream = g.stream("quotient").unwrap();
            let mut da = g.vram().from_host(&a).unwrap();
            let (db, dc) = (
                g.vram().from_host(&b).unwrap(),
                g.vram().from_host(&c).unwrap(),
            );
            // Held by callers (not the roots table, a cache that comes and goes).
            let held = || budget.in_use() - budget.reclaimable();
            let with_all = held();
            let one = da.reserved_bytes();
            d.gpu_quotient(g, &stream, &mut da, db, dc).unwrap();
            assert_eq!(held(), with_all - 2 * one, "b and c released");
            stream.synchronize().unwrap();
            assert_eq!(da.to_vec().unwrap(), want, "2^{lg} device");
        }
    }
}

#[test]
#[ignore = "gpu"]
fn gpu_quotient_2_16() {
    quotient_case(&gpu(), 16);
}

#[test]
#[ignore = "gpu"]
fn gpu_quotient_2_22() {
    quotient_case(&gpu(), 22);
}

/// Every transform in both directions (DIF and DIT, every fused scaling) at 2^10 (one pass),
/// 2^17, 2^20 and 2^22, then the H pipeline at those sizes and at 2^1, 2^4, 2^9, 2^11, 2^13
/// (half-root coset: odd twiddles on every to_coset pass, the row factor on back's last pass),
/// against the CPU (computed once per case): together these launch all ten specialized
/// radix-4 kernels and every quotient kernel.
#[test]
#[ignore = "gpu"]
fn gpu_specialized_kernels_match_cpu() {
    let g = gpu();
    let stream = g.stream("radix4-kernels").unwrap();
    for lg in [10u32, 17, 20, 22] {
        let d = Domain::new(lg).unwrap();
        let cases = [
            (Transform::Forward, Order::Natural, Order::BitReversed),
            (Transform::Forward, Order::BitReversed, Order::Natural),
            (Transform::Inverse, Order::Natural, Order::Natural),
            (Transform::Inverse, Order::BitReversed, Order::Natural),
            (Transform::CosetForward, Order::Natural, Order::Natural),
            (Transform::CosetForward, Order::BitReversed, Order::Natural),
            (Transform::CosetInverse, Order::Natural, Order::Natural),
            (
                Transform::CosetInverse,
                Order::BitReversed,
                Order::BitReversed,
            ),
        ];
        for (i, &case) in cases.iter().enumerate() {
            let seed = 900 + u64::from(lg) * 10 + i as u64;
            check_transform(&g, &stream, &d, case, seed);
        }
        let seeds = [71, 72, 73].map(|s| s + u64::from(lg));
        check_quotient(&g, &stream, &d, seeds);
    }
    // The H pipeline below the tiled minimum (element-wise fused quotient), at it and at odd
    // sizes.
    for lg in [1u32, 4, 9, 11, 13] {
        let d = Domain::new(lg).unwrap();
        let seeds = [81, 82, 83].map(|s| s + u64::from(lg));
        check_quotient(&g, &stream, &d, seeds);
    }
}

/// One transform of random input (`seed`) against the CPU.
fn check_transform(
    g: &Gpu,
    stream: &Stream,
    d: &Domain,
    (t, input, output): (Transform, Order, Order),
    seed: u64,
) {
    let x = random(d.size(), seed);
    let mut staged = x.clone();
    reorder(&mut staged, input, d);
    let mut want = x;
    cpu(d, &mut want, t);
    reorder(&mut want, output, d);
    let lg = d.log_size();
    let mut dev = g.vram().from_host(&staged).unwrap();
    d.gpu_transform(g, stream, &mut dev, t, input, output)
        .unwrap();
    stream.synchronize().unwrap();
    let got = dev.to_vec().unwrap();
    assert!(got == want, "2^{lg} {t:?} {input:?}->{output:?}");
}

/// The H pipeline on random a, b, c (`seeds`) against the CPU quotient on the pipeline's
/// coset.
fn check_quotient(g: &Gpu, stream: &Stream, d: &Domain, seeds: [u64; 3]) {
    let [a, b, c] = seeds.map(|s| random(d.size(), s));
    let want = d.gpu_coset_quotient(&a, &b, &c).unwrap();
    let lg = d.log_size();
    let mut da = g.vram().from_host(&a).unwrap();
    let (db, dc) = (
        g.vram().from_host(&b).unwrap(),
        g.vram().from_host(&c).unwrap(),
    );
    d.gpu_quotient(g, stream, &mut da, db, dc).unwrap();
    stream.synchronize().unwrap();
    assert!(da.to_vec().unwrap() == want, "H pipeline 2^{lg}");
}

/// Explicit pass splits (what `CUZK_NTT_SPLIT` selects; the bench sweeps them) against the CPU:
/// transforms in both directions and the H pipeline, odd and uneven passes.
#[test]
#[ignore = "gpu"]
fn gpu_split_override_matches_cpu() {
    let g = gpu();
    let stream = g.stream("split").unwrap();
    for (lg, split) in [
        (17u32, &[5u32, 7, 5][..]),
        (20, &[10, 4, 6]),
        (24, &[6, 8, 10]),
    ] {
        let d = Domain::new(lg).unwrap();
        for (i, (t, input, output)) in [
            (Transform::Forward, Order::Natural, Order::BitReversed),
            (Transform::CosetForward, Order::BitReversed, Order::Natural),
            (Transform::CosetInverse, Order::Natural, Order::Natural),
        ]
        .into_iter()
        .enumerate()
        {
            let x = random(d.size(), 300 + u64::from(lg) + i as u64);
            let mut staged = x.clone();
            reorder(&mut staged, input, &d);
            let mut want = x;
            cpu(&d, &mut want, t);
            reorder(&mut want, output, &d);
            let mut dev = g.vram().from_host(&staged).unwrap();
            d.gpu_transform_split(&g, &stream, &mut dev, t, input, output, Some(split))
                .unwrap();
            stream.synchronize().unwrap();
            assert!(
                dev.to_vec().unwrap() == want,
                "2^{lg} split {split:?} {t:?}"
            );
        }
        if lg <= 20 {
            let [a, b, c] = [1u64, 2, 3].map(|s| random(d.size(), 310 + s));
            let want = d.gpu_coset_quotient(&a, &b, &c).unwrap();
            let mut da = g.vram().from_host(&a).unwrap();
            let (db, dc) = (
                g.vram().from_host(&b).unwrap(),
                g.vram().from_host(&c).unwrap(),
            );
            d.gpu_quotient_split(&g, &stream, &mut da, db, dc, Some(split), &mut |_| Ok(()))
                .unwrap();
            stream.synchronize().unwrap();
            assert!(da.to_vec().unwrap() == want, "H 2^{lg} split {split:?}");
        }
    }
}

/// The roots table: built from free bytes at the order a transform needs (a larger one
/// replaces it, and serves smaller transforms; a smaller one serves where a larger does not
/// fit), not built when the bytes are not free (the transform multiplies split-table values
/// instead), given back to any request of the budget (after the kernels that read it:
/// reclaimed while a 2^24 transform runs, the result is still right). Every result against
/// the CPU.
#[test]
#[ignore = "gpu"]
fn gpu_roots_table_is_a_cache() {
    let g = gpu();
    let budget = g.vram().budget().clone();
    let cache = RootsCache::of(&g);
    budget.reclaim_all();
    assert_eq!(cache.order(), 0);
    let (n, b, r) = (Order::Natural, Order::BitReversed, Transform::Inverse);
    check(
        &g,
        &Domain::new(19).unwrap(),
        &random(1 << 19, 1),
        Transform::Forward,
        n,
        b,
    );
    assert_eq!(
        cache.order(),
        0,
        "2^19's twiddles are all in the direct table"
    );
    check(
        &g,
        &Domain::new(20).unwrap(),
        &random(1 << 20, 2),
        Transform::Forward,
        n,
        b,
    );
    assert_eq!(cache.order(), 20);
    let bytes = budget.reclaimable();
    assert_eq!(bytes, 32 << 19);
    check(&g, &Domain::new(22).unwrap(), &random(1 << 22, 3), r, b, n);
    assert_eq!(cache.order(), 22);
    check(
        &g,
        &Domain::new(21).unwrap(),
        &random(1 << 21, 4),
        Transform::CosetForward,
        n,
        n,
    );
    assert_eq!(cache.order(), 22, "the larger table serves 2^21");
    // A request that needs its bytes takes them back.
    let hog = budget
        .try_acquire(budget.available() - (16 << 20))
        .expect("hog");
    assert_eq!(cache.order(), 0);
    drop(hog);
    // Without the free bytes for a larger one, a smaller one held serves (the twiddles above
    // its order from the split tables); without any, none is built. Same results.
    check(&g, &Domain::new(20).unwrap(), &random(1 << 20, 5), r, b, n);
    assert_eq!(cache.order(), 20);
    let hog = budget
        .try_acquire(budget.free() - (140 << 20))
        .expect("hog");
    check(&g, &Domain::new(22).unwrap(), &random(1 << 22, 6), r, b, n);
    assert_eq!(
        cache.order(),
        20,
        "12 MiB free beside 128 for the data: 16 held + 12 < 64"
    );
    budget.reclaim_all();
    check(&g, &Domain::new(22).unwrap(), &random(1 << 22, 7), r, b, n);
    assert_eq!(cache.order(), 0, "28 MiB free beside the data, 64 needed");
    drop(hog);
    // Given back while a transform that reads it runs.
    let d = Domain::new(24).unwrap();
    let x = random(1 << 24, 8);
    let mut want = x.clone();
    d.fft_in_place(&mut want).unwrap();
    let stream = g.stream("roots").unwrap();
    let mut dev = g.vram().from_host(&x).unwrap();
    d.gpu_transform(&g, &stream, &mut dev, Transform::Forward, n, n)
        .unwrap();
    assert_eq!(cache.order(), 24);
    budget.reclaim_all();
    assert_eq!(cache.order(), 0);
    stream.synchronize().unwrap();
    assert!(
        dev.to_vec().unwrap() == want,
        "2^24 with the table reclaimed in flight"
    );
}

/// Budget left for only some of the pipeline's allocations: the call fails cleanly and gives
/// back exactly what it took.
#[test]
#[ignore = "gpu"]
fn gpu_alloc_failure_restores_budget() {
    let g = gpu();
    let d = Domain::new(16).unwrap();
    let n = d.size();
    let (a, b, c) = (random(n, 4), random(n, 5), random(n, 6));
    let want = d.gpu_coset_quotient(&a, &b, &c).unwrap();
    device_tables(&g).unwrap(); // the per-device tables stay allocated: take them first
    let budget = g.vram().budget().clone();
    budget.reclaim_all(); // a roots table of an earlier, larger transform
    let before = budget.in_use();
    let one = cuzk_gpu::Vram::bytes_for::<Fr>(n).unwrap();
    let mut failures = 0;
    for room in [0, one / 2, one + one / 2, 2 * one + one / 2, 4 * one] {
        let hog = budget.try_acquire(budget.available() - room).expect("hog");
        match d.gpu_quotient_host(&g, &a, &b, &c) {
            Ok(h) => assert_eq!(h, want),
            Err(e) => {
                assert!(matches!(e, NttError::Gpu(_)), "{e}");
                failures += 1;
            }
        }
        drop(hog);
        assert_eq!(budget.in_use(), before, "budget changed with room {room}");
    }
    assert_eq!(failures, 4, "every run short of 3 vectors must fail");
    assert_eq!(d.gpu_quotient_host(&g, &a, &b, &c).unwrap(), want);
}

#[test]
#[ignore = "gpu"]
fn gpu_errors_are_clear() {
    let g = gpu();
    let d = Domain::new(10).unwrap();
    let stream = g.stream("errors").unwrap();
    let mut odd = g.vram().from_host(&random(1025, 1)).unwrap();
    let e = d.gpu_transform(
        &g,
        &stream,
        &mut odd,
        Transform::Forward,
        Order::Natural,
        Order::Natural,
    );
    assert_eq!(e, Err(NttError::BadBatch { n: 1024, got: 1025 }));
    let mut a = g.vram().from_host(&random(1024, 2)).unwrap();
    let b = g.vram().from_host(&random(1024, 3)).unwrap();
    let c = g.vram().from_host(&random(1023, 4)).unwrap();
    assert_eq!(
        d.gpu_quotient(&g, &stream, &mut a, b, c),
        Err(NttError::LengthMismatch {
            expected: 1024,
            got: 1023
        })
    );
    // 2^28 Fr is 8 GiB: far more of them than any budget holds.
    let e = check_fits(g.vram(), "the test", 1 << 12, 1 << 28).unwrap_err();
    assert!(matches!(e, NttError::DoesNotFit { .. }), "{e}");
    assert!(e.to_string().contains("VRAM budget"), "{e}");
}

/// A logical device's tables and roots table go with it: made under its own budget, they would
/// otherwise stay allocated for the process, outside every budget that is still alive (the
/// engine's memory watch then counted them as memory another process took).
#[test]
#[ignore = "gpu"]
fn gpu_a_logical_devices_tables_are_freed_with_it() {
    let g = gpu();
    let free = || g.mem_info().unwrap().free;
    let d = Domain::new(24).unwrap();
    let x = random(d.size(), 7);
    let before = free();
    for _ in 0..3 {
        let part = g.logical(g.vram().budget().total() / 2);
        check(
            &part,
            &d,
            &x,
            Transform::Forward,
            Order::Natural,
            Order::Natural,
        );
        assert!(RootsCache::of(&part).order() > 0, "a roots table was made");
        drop(part);
    }
    let after = free();
    assert!(
        after + (64 << 20) >= before,
        "{} MiB of device memory stayed allocated after three logical devices were dropped",
        (before - after) >> 20
    );
}

/// The one call (`cuzk_ntt::transform`) runs on the GPU from 2^14 and gives the CPU's result
/// for every transform; a length that is not a power of two is refused.
#[test]
#[ignore = "gpu"]
fn gpu_one_call_transform_matches_cpu() {
    assert!(
        Gpu::available().is_some(),
        "these tests need a CUDA GPU and built kernels"
    );
    for log in [14u32, 17] {
        let d = Domain::new(log).unwrap();
        let x = random(d.size(), u64::from(log));
        for t in [
            Transform::Forward,
            Transform::Inverse,
            Transform::CosetForward,
            Transform::CosetInverse,
        ] {
            let mut want = x.clone();
            cpu(&d, &mut want, t);
            let mut got = x.clone();
            cuzk_ntt::transform(&mut got, t).unwrap();
            assert!(got == want, "2^{log} {t:?}");
        }
    }
    let mut odd = random(3 << 12, 1);
    assert!(cuzk_ntt::transform(&mut odd, Transform::Forward).is_err());
}
