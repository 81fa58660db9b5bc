//! GPU transforms and the quotient pipeline against the CPU, bit for bit. Needs a GPU:
//! `cargo test --release -p cuzk-ntt --test gpu -- --ignored` (panics without
//! one). `gpu_bench_ntt` prints the benchmark rows (`--nocapture`).

use std::time::Instant;

use cuzk_field::Fr;
use cuzk_gpu::{Gpu, Stream};
use cuzk_ntt::gpu::{KernelChoice, RootsCache, check_fits, device_tables, split_from_env};
use cuzk_ntt::{Domain, NttError, Order, Transform};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

fn gpu() -> Gpu {
    Gpu::first().expect("these tests need a CUDA GPU and built kernels")
}

fn random(n: usize, seed: u64) -> Vec<Fr> {
    (0..n)
        .into_par_iter()
        .chunks(1 << 14)
        .map(|c| {
            let mut rng = ChaCha20Rng::seed_from_u64(
                seed ^ (c[0] as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            c.iter().map(|_| Fr::random(&mut rng)).collect::<Vec<_>>()
        })
        .flatten()
        .collect()
}

fn cpu(d: &Domain, v: &mut [Fr], t: Transform) {
    match t {
        Transform::Forward => d.fft_in_place(v),
        Transform::Inverse => d.ifft_in_place(v),
        Transform::CosetForward => d.coset_fft_in_place(v),
        Transform::CosetInverse => d.coset_ifft_in_place(v),
    }
    .unwrap()
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

        // Device API: b and c come back to the budget; the environment's kernels, then the
        // default ones forced.
        for choice in [None, Some(KernelChoice::default())] {
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
            match choice {
                None => d.gpu_quotient(g, &stream, &mut da, db, dc),
                Some(ch) => d.gpu_quotient_variant(
                    g,
                    &stream,
                    &mut da,
                    db,
                    dc,
                    ch,
                    split_from_env().as_deref(),
                    &mut |_| Ok(()),
                ),
            }
            .unwrap();
            assert_eq!(held(), with_all - 2 * one, "b and c released");
            stream.synchronize().unwrap();
            assert_eq!(da.to_vec().unwrap(), want, "2^{lg} device {choice:?}");
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

/// The opt-in wide plan (`cuzk_ntt_pass_wide`, tiles of 2^12, >48 KiB of shared memory),
/// forced here whatever `CUZK_NTT_WIDE` says: 2^20..2^24 (two passes, k up to 12) in every
/// transform and both DIF and DIT, then the H pipeline at 2^22, against the CPU.
#[test]
#[ignore = "gpu"]
fn gpu_wide_plan_matches_cpu() {
    let g = gpu();
    let stream = g.stream("wide").unwrap();
    for lg in 20u32..=24 {
        let d = Domain::new(lg).unwrap();
        let cases: &[(Transform, Order, Order)] = if lg == 20 || lg == 24 {
            &[
                (Transform::Forward, Order::Natural, Order::BitReversed),
                (Transform::Forward, Order::Natural, Order::Natural),
                (Transform::Inverse, Order::BitReversed, Order::Natural),
                (Transform::CosetForward, Order::BitReversed, Order::Natural),
                (Transform::CosetInverse, Order::Natural, Order::Natural),
            ]
        } else {
            &[
                (Transform::Forward, Order::Natural, Order::Natural),
                (
                    Transform::CosetInverse,
                    Order::BitReversed,
                    Order::BitReversed,
                ),
            ]
        };
        for (i, &case) in cases.iter().enumerate() {
            let seed = 500 + u64::from(lg) * 10 + i as u64;
            check_variant(&g, &stream, &d, case, seed, &[WIDE]);
        }
    }
    let d = Domain::new(22).unwrap();
    check_quotient_variant(&g, &stream, &d, [61, 62, 63], &[WIDE]);
}

const WIDE: KernelChoice = KernelChoice {
    wide: true,
    specialized: true,
};

/// The default plan on the specialized radix-4 kernels (the default) and on the generic
/// `cuzk_ntt_pass4` (`CUZK_NTT_SPECIALIZED=0`).
const SPECIALIZED: KernelChoice = KernelChoice {
    wide: false,
    specialized: true,
};
const GENERIC: KernelChoice = KernelChoice {
    wide: false,
    specialized: false,
};

/// Both radix-4 kernel choices, forced here whatever the environment says: the specialized
/// `cuzk_ntt_pass4_{dif,dit}[_tw][_pre|_post]` (4 blocks per SM, the default) and the generic
/// `cuzk_ntt_pass4` (2 blocks per SM, `CUZK_NTT_SPECIALIZED=0`). Every transform in both
/// directions (DIF and DIT, every fused scaling) at 2^10 (one pass), 2^17, 2^20 and 2^22, then
/// the H pipeline at those sizes and at 2^1, 2^4, 2^9, 2^11, 2^13 (half-root coset: odd
/// twiddles on every to_coset pass, the row factor on back's last pass), against the CPU
/// (computed once per case): together these launch all ten specialized kernels, the generic
/// one and every quotient kernel.
#[test]
#[ignore = "gpu"]
fn gpu_kernel_choices_match_cpu() {
    let g = gpu();
    let stream = g.stream("radix4-kernels").unwrap();
    let choices = [SPECIALIZED, GENERIC];
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
            check_variant(&g, &stream, &d, case, seed, &choices);
        }
        let seeds = [71, 72, 73].map(|s| s + u64::from(lg));
        check_quotient_variant(&g, &stream, &d, seeds, &H_CHOICES);
    }
    // The H pipeline below the tiled minimum (element-wise fused quotient), at it and at odd
    // sizes.
    for lg in [1u32, 4, 9, 11, 13] {
        let d = Domain::new(lg).unwrap();
        let seeds = [81, 82, 83].map(|s| s + u64::from(lg));
        check_quotient_variant(&g, &stream, &d, seeds, &H_CHOICES);
    }
}

/// The H pipeline on both radix-4 kernel choices.
const H_CHOICES: [KernelChoice; 2] = [SPECIALIZED, GENERIC];

/// One transform of random input (`seed`) on each of `choices`, against the CPU.
fn check_variant(
    g: &Gpu,
    stream: &Stream,
    d: &Domain,
    (t, input, output): (Transform, Order, Order),
    seed: u64,
    choices: &[KernelChoice],
) {
    let x = random(d.size(), seed);
    let mut staged = x.clone();
    reorder(&mut staged, input, d);
    let mut want = x;
    cpu(d, &mut want, t);
    reorder(&mut want, output, d);
    let lg = d.log_size();
    for &choice in choices {
        let mut dev = g.vram().from_host(&staged).unwrap();
        d.gpu_transform_variant(
            g,
            stream,
            &mut dev,
            t,
            input,
            output,
            choice,
            split_from_env().as_deref(),
        )
        .unwrap();
        stream.synchronize().unwrap();
        let got = dev.to_vec().unwrap();
        assert!(got == want, "{choice:?} 2^{lg} {t:?} {input:?}->{output:?}");
    }
}

/// The H pipeline on random a, b, c (`seeds`) on each of `choices`, against the CPU quotient on
/// the pipeline's coset.
fn check_quotient_variant(
    g: &Gpu,
    stream: &Stream,
    d: &Domain,
    seeds: [u64; 3],
    choices: &[KernelChoice],
) {
    let [a, b, c] = seeds.map(|s| random(d.size(), s));
    let want = d.gpu_coset_quotient(&a, &b, &c).unwrap();
    let lg = d.log_size();
    for &choice in choices {
        let mut da = g.vram().from_host(&a).unwrap();
        let (db, dc) = (
            g.vram().from_host(&b).unwrap(),
            g.vram().from_host(&c).unwrap(),
        );
        d.gpu_quotient_variant(
            g,
            stream,
            &mut da,
            db,
            dc,
            choice,
            split_from_env().as_deref(),
            &mut |_| Ok(()),
        )
        .unwrap();
        stream.synchronize().unwrap();
        assert!(da.to_vec().unwrap() == want, "{choice:?} H pipeline 2^{lg}");
    }
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
            d.gpu_transform_variant(
                &g,
                &stream,
                &mut dev,
                t,
                input,
                output,
                SPECIALIZED,
                Some(split),
            )
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
            d.gpu_quotient_variant(
                &g,
                &stream,
                &mut da,
                db,
                dc,
                SPECIALIZED,
                Some(split),
                &mut |_| Ok(()),
            )
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

fn median_ms(g: &Gpu, stream: &Stream, runs: usize, f: impl FnMut()) -> f64 {
    g.median_ms(stream, runs, f).unwrap()
}

/// An A/B row under a default row timed at `base` ms: `  {label} {what}`, the median of
/// `time(choice)` and the difference in %.
fn ab_row(
    label: &str,
    choice: KernelChoice,
    what: &str,
    base: f64,
    mut time: impl FnMut(KernelChoice) -> f64,
) {
    let ms = time(choice);
    println!(
        "{:<28} {ms:>9.3} ms ({:+.1}% vs default row)",
        format!("  {label} {what}"),
        100.0 * (ms / base - 1.0)
    );
}

/// The A/B row of the generic radix-4 kernel (`CUZK_NTT_SPECIALIZED=0`, default plan).
fn generic_row(what: &str, base: f64, time: impl FnMut(KernelChoice) -> f64) {
    ab_row("generic", GENERIC, what, base, time);
}

/// Benchmark rows of issue 4: device time between events, median of 11 after a warm-up (H
/// pipeline from 2^26: 5), random inputs already on the device. The floor is IMAD throughput
/// scaled from 3.2 ms per 2^24 forward; CPU is one run of the CPU reference on this machine
/// (sizes ≤ 2^24 unless CUZK_BENCH_CPU_ALL=1). Under the 2^24 and 2^26 N->BR rows and the H
/// 2^24 and 2^27 rows, the same on the generic radix-4 kernel ([`generic_row`]); under the H
/// 2^24 and 2^27 rows the per-step device times (`  H steps: ...`, medians, events between the
/// steps; `back` includes the host's wait for the quotient before b and c are freed). After the
/// default rows, sweep rows of alternative pass splits (`CUZK_NTT_SPLIT`, DIF-order bits) for
/// forward 2^24 / 2^26 N->BR and H 2^24 / 2^27: `  split a,b,c  <ms> (+x.x% vs default row)`,
/// median of 10 after a warm-up.
#[test]
#[ignore = "gpu"]
fn gpu_bench_ntt() {
    let g = gpu();
    let stream = g.stream("bench").unwrap();
    let cpu_all = std::env::var_os("CUZK_BENCH_CPU_ALL").is_some();
    let floor_fwd =
        |lg: u32| 3.2 * f64::from(lg) / 24.0 * (1u64 << lg) as f64 / (1u64 << 24) as f64;
    let row = |name: String, ms: f64, floor: f64, target: Option<f64>, cpu_ms: Option<f64>| {
        let target = target.map_or("      -".into(), |t| format!("{t:>7.1}"));
        let cpu = cpu_ms.map_or("      -".into(), |c| {
            format!("{c:>9.1} ms (x{:.0})", c / ms)
        });
        println!(
            "{name:<28} {ms:>9.3} ms  floor {floor:>7.2} ms ({:.2}x)  target {target} ms  cpu {cpu}",
            ms / floor
        );
    };
    println!("device: {:?}", g.info().name);
    for var in ["CUZK_NTT_RADIX2", "CUZK_NTT_SIMPLE_BITREV"] {
        if let Some(v) = std::env::var_os(var) {
            println!("{var}={v:?} (fallback kernels selected)");
        }
    }
    if let Some(v) = std::env::var_os("CUZK_NTT_WIDE") {
        println!("CUZK_NTT_WIDE={v:?} (wide plan: 2^12 tiles, cuzk_ntt_pass_wide, from 2^16)");
    }
    if let Some(v) = std::env::var_os("CUZK_NTT_SPLIT") {
        println!("CUZK_NTT_SPLIT={v:?} (default rows of that size use this pass split)");
    }
    if let Some(v) = std::env::var_os("CUZK_NTT_ROOTS_LG") {
        println!("CUZK_NTT_ROOTS_LG={v:?} (cap on the roots table's order; 0: none)");
    }
    if let Some(v) = std::env::var_os("CUZK_NTT_SPECIALIZED") {
        println!("CUZK_NTT_SPECIALIZED={v:?} (=0: default rows use the generic radix-4 kernel)");
    }
    println!("default rows: {:?}", KernelChoice::from_env());
    // Registers and spills of the radix-4 kernels for this device.
    let (major, minor) = g.info().compute_capability;
    let arch = format!("sm_{major}{minor}");
    for l in cuzk_gpu::ptxas_report().lines() {
        let mut f = l.split_whitespace();
        if f.next().is_some_and(|k| k.starts_with("cuzk_ntt_pass4")) && f.next() == Some(&*arch) {
            println!("ptxas {}", l.trim());
        }
    }
    let time_cpu = |lg: u32, f: &dyn Fn(&Domain, &mut Vec<Fr>)| -> Option<f64> {
        if lg > 24 && !cpu_all {
            return None;
        }
        let d = Domain::new(lg).unwrap();
        let mut v = random(1 << lg, 9);
        let t = Instant::now();
        f(&d, &mut v);
        Some(t.elapsed().as_secs_f64() * 1e3)
    };
    // Default-row times of the swept forward rows (what, ms), of the H rows (lg, ms), and the
    // sweep's results (what, split, ms), printed after all default rows.
    let mut defaults: Vec<(String, f64)> = Vec::new();
    let mut h_sweeps: Vec<(u32, f64)> = Vec::new();
    let mut sweep_rows: Vec<(String, &'static str, f64)> = Vec::new();
    for (lg, target) in [(20u32, None), (22, None), (24, Some(4.0)), (26, Some(17.0))] {
        let d = Domain::new(lg).unwrap();
        let mut dev = g.vram().from_host(&random(d.size(), 11)).unwrap();
        for (input, output) in [
            (Order::Natural, Order::BitReversed),
            (Order::Natural, Order::Natural),
        ] {
            let ms = median_ms(&g, &stream, 11, || {
                d.gpu_transform(&g, &stream, &mut dev, Transform::Forward, input, output)
                    .unwrap();
            });
            let cpu_ms = if output == Order::Natural {
                time_cpu(lg, &|d, v| d.fft_in_place(v).unwrap())
            } else {
                None
            };
            row(
                format!("forward 2^{lg} {input:?}->{output:?}"),
                ms,
                floor_fwd(lg),
                target,
                cpu_ms,
            );
            if lg >= 24 && output == Order::BitReversed {
                defaults.push((format!("forward 2^{lg}"), ms));
                for &split in split_sweep(&format!("forward 2^{lg}")) {
                    let over = bits(split);
                    let t = median_ms(&g, &stream, 10, || {
                        d.gpu_transform_variant(
                            &g,
                            &stream,
                            &mut dev,
                            Transform::Forward,
                            input,
                            output,
                            KernelChoice::from_env(),
                            Some(&over),
                        )
                        .unwrap();
                    });
                    sweep_rows.push((format!("forward 2^{lg}"), split, t));
                }
                generic_row(&format!("2^{lg} N->BR"), ms, |choice| {
                    median_ms(&g, &stream, 11, || {
                        d.gpu_transform_variant(
                            &g,
                            &stream,
                            &mut dev,
                            Transform::Forward,
                            input,
                            output,
                            choice,
                            split_from_env().as_deref(),
                        )
                        .unwrap();
                    })
                });
            }
        }
        if lg == 24 {
            let ms = median_ms(&g, &stream, 11, || {
                d.gpu_transform(
                    &g,
                    &stream,
                    &mut dev,
                    Transform::CosetForward,
                    Order::Natural,
                    Order::Natural,
                )
                .unwrap();
            });
            let cpu_ms = time_cpu(lg, &|d, v| d.coset_fft_in_place(v).unwrap());
            row(
                format!("coset forward 2^{lg} N->N"),
                ms,
                floor_fwd(lg),
                None,
                cpu_ms,
            );
        }
    }
    for (lg, target) in [(24u32, Some(30.0)), (26, None), (27, Some(280.0))] {
        let d = Domain::new(lg).unwrap();
        let n = d.size();
        // One random source vector on the device, three working vectors refilled from it.
        if check_fits(g.vram(), "bench", 4, n).is_err() {
            println!("H pipeline 2^{lg}: does not fit the VRAM budget, skipped");
            continue;
        }
        let a = random(n, 1);
        let src = g.vram().from_host(&a).unwrap();
        let runs = if lg >= 26 { 5 } else { 11 };
        // Median of `runs` after a warm-up, per step (to_coeffs, to_coset, quotient, back) and
        // in total. The pipeline consumes b and c: each run refills a, b, c on the device with
        // -src (canonical; the pipeline's time does not depend on the values), outside the
        // events.
        let time_h_steps = |choice: KernelChoice, runs: usize, split: Option<Vec<u32>>| {
            let mut times: [Vec<f64>; 5] = Default::default();
            for r in 0..=runs {
                let mut v: Vec<_> = (0..3).map(|_| g.alloc::<Fr>(n).unwrap()).collect();
                for x in &mut v {
                    use cuzk_gpu::ff::{Field, UnaryOp, field_unary};
                    field_unary(&g, &stream, Field::Fr, UnaryOp::Neg, &src, x).unwrap();
                }
                let (dc, db, mut da) = (v.pop().unwrap(), v.pop().unwrap(), v.pop().unwrap());
                let ev: Vec<_> = (0..5).map(|_| g.event().unwrap()).collect();
                stream.record(&ev[0]).unwrap();
                let split = split.as_deref();
                d.gpu_quotient_variant(&g, &stream, &mut da, db, dc, choice, split, &mut |step| {
                    Ok(stream.record(&ev[step + 1])?)
                })
                .unwrap();
                ev[4].synchronize().unwrap();
                if r == 0 {
                    continue; // warm-up
                }
                for (i, t) in times.iter_mut().take(4).enumerate() {
                    t.push(f64::from(ev[i].elapsed_ms(&ev[i + 1]).unwrap()));
                }
                times[4].push(f64::from(ev[0].elapsed_ms(&ev[4]).unwrap()));
            }
            times.map(|mut t| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            })
        };
        let time_h =
            |choice: KernelChoice| -> f64 { time_h_steps(choice, runs, split_from_env())[4] };
        let steps = time_h_steps(KernelChoice::from_env(), runs, split_from_env());
        let ms = steps[4];
        let cpu_ms = if lg <= 24 || cpu_all {
            let (b, c) = (random(n, 2), random(n, 3));
            let t = Instant::now();
            let _ = d.quotient(&a, &b, &c).unwrap();
            Some(t.elapsed().as_secs_f64() * 1e3)
        } else {
            None
        };
        row(
            format!("H pipeline 2^{lg}"),
            ms,
            7.0 * floor_fwd(lg),
            target,
            cpu_ms,
        );
        if lg != 26 {
            println!(
                "  H steps: to_coeffs {:.2}  to_coset {:.2}  quotient {:.2}  back {:.2} ms",
                steps[0], steps[1], steps[2], steps[3]
            );
            generic_row(&format!("H 2^{lg}"), ms, time_h);
            h_sweeps.push((lg, ms));
        }
        // The pass-split sweep of this size, timed here (this size's vectors) and printed after
        // every default row.
        for &split in split_sweep(&format!("H 2^{lg}")) {
            let t = time_h_steps(KernelChoice::from_env(), 10, Some(bits(split)))[4];
            sweep_rows.push((format!("H 2^{lg}"), split, t));
        }
    }
    print_sweeps(&defaults, &h_sweeps, &sweep_rows);
}

/// The alternative pass splits (DIF-order bits, as `CUZK_NTT_SPLIT`) the bench sweeps for a row.
fn split_sweep(what: &str) -> &'static [&'static str] {
    match what {
        "forward 2^24" | "H 2^24" => &["7,8,9", "9,8,7", "8,9,7", "7,9,8", "6,8,10"],
        "forward 2^26" => &["8,9,9", "9,8,9", "8,8,10", "10,8,8"],
        "H 2^27" => &["8,9,10", "10,9,8", "9,10,8"],
        _ => &[],
    }
}

fn bits(split: &str) -> Vec<u32> {
    split.split(',').map(|b| b.parse().unwrap()).collect()
}

/// The sweep rows after the default rows: per swept row its default time, then
/// `  split a,b,c  <ms> (+x.x% vs default row)`.
fn print_sweeps(forward: &[(String, f64)], h: &[(u32, f64)], rows: &[(String, &'static str, f64)]) {
    let bases = forward
        .iter()
        .cloned()
        .chain(h.iter().map(|&(lg, ms)| (format!("H 2^{lg}"), ms)));
    for (what, base) in bases {
        let mine: Vec<_> = rows.iter().filter(|r| r.0 == what).collect();
        if mine.is_empty() {
            continue;
        }
        println!("{what} split sweep (CUZK_NTT_SPLIT, median of 10; default row {base:.3} ms):");
        for (_, split, ms) in mine {
            println!(
                "{:<28} {ms:>9.3} ms ({:+.1}% vs default row)",
                format!("  split {split}"),
                100.0 * (ms / base - 1.0)
            );
        }
    }
}
