//! GPU NTT bench: forward transforms 2^20..2^26, the coset forward 2^24 and the H pipeline
//! 2^24..2^27, each checked once against the CPU reference, then timed; pass-split sweeps and a
//! summary table last. `cargo bench -p cuzk-benches --bench gpu_ntt [-- GROUP...]` (needs a GPU;
//! groups: `forward 2^20`..`forward 2^26`, `H pipeline 2^24`, `H pipeline 2^26`, `H pipeline 2^27`).

#![forbid(unsafe_code)]

use std::time::Instant;

use cuzk_benches::{Only, Summary, check, gpu};
use cuzk_field::Fr;
use cuzk_gpu::{Gpu, Stream};
use cuzk_ntt::gpu::{check_fits, configured_split};
use cuzk_ntt::testing::random_fr;
use cuzk_ntt::{Domain, Order, Transform};
use rayon::prelude::*;

fn median_ms(g: &Gpu, stream: &Stream, runs: usize, f: impl FnMut()) -> f64 {
    g.median_ms(stream, runs, f).unwrap()
}

/// Device time between events, median of 11 after a warm-up (H pipeline from 2^26: 5), random
/// inputs already on the device, each row's result checked once against the CPU reference
/// first. The floor is IMAD throughput scaled from 3.2 ms per 2^24 forward; CPU is one run of
/// the CPU reference on this machine (sizes ≤ 2^24 unless CUZK_BENCH_CPU_ALL=1). Under the H
/// 2^24 and 2^27 rows the per-step device times (`  H steps: ...`, medians, events between the
/// steps; `back` includes the host's wait for the quotient before b and c are freed). After the
/// default rows, sweep rows of alternative pass splits (`CUZK_NTT_SPLIT`, DIF-order bits) for
/// forward 2^24 / 2^26 N->BR and H 2^24 / 2^27: `  split a,b,c  <ms> (+x.x% vs default row)`,
/// median of 10 after a warm-up; then the summary table.
fn main() {
    let g = gpu();
    let mut summary = Summary::default();
    let forward_sizes = [(20u32, None), (22, None), (24, Some(4.0)), (26, Some(17.0))];
    let h_sizes = [(24u32, Some(30.0)), (26, None), (27, Some(280.0))];
    let forward_group = |lg: u32| format!("forward 2^{lg}");
    let h_group = |lg: u32| format!("H pipeline 2^{lg}");
    let groups: Vec<String> = (forward_sizes.iter().map(|s| forward_group(s.0)))
        .chain(h_sizes.iter().map(|s| h_group(s.0)))
        .collect();
    let only = Only::from_args(&groups);
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
    if let Some(v) = std::env::var_os("CUZK_NTT_SPLIT") {
        println!("CUZK_NTT_SPLIT={v:?} (default rows of that size use this pass split)");
    }
    if let Some(v) = std::env::var_os("CUZK_NTT_ROOTS_LG") {
        println!("CUZK_NTT_ROOTS_LG={v:?} (cap on the roots table's order; 0: none)");
    }
    // Registers and spills of the radix-4 kernels for this device.
    let (major, minor) = g.info().compute_capability;
    let arch = format!("sm_{major}{minor}");
    for l in cuzk_ntt::kernels::KERNELS.ptxas_report().lines() {
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
        let mut v = random_fr(1 << lg, 9);
        let t = Instant::now();
        f(&d, &mut v);
        Some(t.elapsed().as_secs_f64() * 1e3)
    };
    // Default-row times of the swept forward rows (what, ms), of the H rows (lg, ms), and the
    // sweep's results (what, split, ms), printed after all default rows.
    let mut defaults: Vec<(String, f64)> = Vec::new();
    let mut h_sweeps: Vec<(u32, f64)> = Vec::new();
    let mut sweep_rows: Vec<(String, &'static str, f64)> = Vec::new();
    for (lg, target) in forward_sizes {
        if !only.runs(&forward_group(lg)) {
            continue;
        }
        let d = Domain::new(lg).unwrap();
        let x = random_fr(d.size(), 11);
        let mut dev = g.vram().from_host(&x).unwrap();
        let mut fft = x.clone();
        d.fft_in_place(&mut fft).unwrap();
        for (input, output) in [
            (Order::Natural, Order::BitReversed),
            (Order::Natural, Order::Natural),
        ] {
            let mut want = fft.clone();
            if output == Order::BitReversed {
                d.bit_reverse_in_place(&mut want).unwrap();
            }
            let mut once = g.vram().from_host(&x).unwrap();
            d.gpu_transform(&g, &stream, &mut once, Transform::Forward, input, output)
                .unwrap();
            stream.synchronize().unwrap();
            let what = format!("forward 2^{lg} {input:?}->{output:?}");
            check(once.to_vec().unwrap() == want, &what);
            drop(once);
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
                let peer = if lg == 24 { 4.446 } else { 20.942 };
                summary.add(format!("NTT forward 2^{lg} (sppark NR)"), ms, Some(peer));
                defaults.push((format!("forward 2^{lg}"), ms));
                for &split in split_sweep(&format!("forward 2^{lg}")) {
                    let over = bits(split);
                    let t = median_ms(&g, &stream, 10, || {
                        d.gpu_transform_split(
                            &g,
                            &stream,
                            &mut dev,
                            Transform::Forward,
                            input,
                            output,
                            Some(&over),
                        )
                        .unwrap();
                    });
                    sweep_rows.push((format!("forward 2^{lg}"), split, t));
                }
            }
        }
        if lg == 24 {
            let mut want = x.clone();
            d.coset_fft_in_place(&mut want).unwrap();
            let mut once = g.vram().from_host(&x).unwrap();
            let (t, n) = (Transform::CosetForward, Order::Natural);
            d.gpu_transform(&g, &stream, &mut once, t, n, n).unwrap();
            stream.synchronize().unwrap();
            check(once.to_vec().unwrap() == want, "coset forward 2^24 N->N");
            drop(once);
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
    for (lg, target) in h_sizes {
        if !only.runs(&h_group(lg)) {
            continue;
        }
        let d = Domain::new(lg).unwrap();
        let n = d.size();
        // One random source vector on the device, three working vectors refilled from it.
        if check_fits(g.vram(), "bench", 4, n).is_err() {
            println!("H pipeline 2^{lg}: does not fit the VRAM budget, skipped");
            continue;
        }
        let a = random_fr(n, 1);
        let src = g.vram().from_host(&a).unwrap();
        // The pipeline once on a satisfied system (c = a·b on H, as every real witness),
        // against the CPU quotient.
        {
            let b = random_fr(n, 2);
            let c: Vec<Fr> = a.par_iter().zip(&b).map(|(x, y)| *x * y).collect();
            let want = d.quotient(&a, &b, &c).unwrap();
            let mut da = g.vram().from_host(&a).unwrap();
            let (db, dc) = (
                g.vram().from_host(&b).unwrap(),
                g.vram().from_host(&c).unwrap(),
            );
            d.gpu_quotient(&g, &stream, &mut da, db, dc).unwrap();
            stream.synchronize().unwrap();
            check(da.to_vec().unwrap() == want, &format!("H pipeline 2^{lg}"));
        }
        let runs = if lg >= 26 { 5 } else { 11 };
        // Median of `runs` after a warm-up, per step (to_coeffs, to_coset, quotient, back) and
        // in total. The pipeline consumes b and c: each run refills a, b, c on the device with
        // -src (canonical; the pipeline's time does not depend on the values), outside the
        // events.
        let time_h_steps = |runs: usize, split: Option<Vec<u32>>| {
            let mut times: [Vec<f64>; 5] = Default::default();
            for r in 0..=runs {
                let mut v: Vec<_> = (0..3).map(|_| g.alloc::<Fr>(n).unwrap()).collect();
                for x in &mut v {
                    use cuzk_test_kernels::ff::{Field, UnaryOp, field_unary};
                    field_unary(&g, &stream, Field::Fr, UnaryOp::Neg, &src, x).unwrap();
                }
                let (dc, db, mut da) = (v.pop().unwrap(), v.pop().unwrap(), v.pop().unwrap());
                let ev: Vec<_> = (0..5).map(|_| g.event().unwrap()).collect();
                stream.record(&ev[0]).unwrap();
                let split = split.as_deref();
                d.gpu_quotient_split(&g, &stream, &mut da, db, dc, split, &mut |step| {
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
        let steps = time_h_steps(runs, configured_split());
        let ms = steps[4];
        let cpu_ms = if lg <= 24 || cpu_all {
            let (b, c) = (random_fr(n, 2), random_fr(n, 3));
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
            summary.add(format!("NTT H pipeline 2^{lg}"), ms, None);
            h_sweeps.push((lg, ms));
        }
        // The pass-split sweep of this size, timed here (this size's vectors) and printed after
        // every default row.
        for &split in split_sweep(&format!("H 2^{lg}")) {
            let t = time_h_steps(10, Some(bits(split)))[4];
            sweep_rows.push((format!("H 2^{lg}"), split, t));
        }
    }
    print_sweeps(&defaults, &h_sweeps, &sweep_rows);
    summary.print("NTT");
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
