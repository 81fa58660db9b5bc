//! End-to-end proving bench: 2^20 realistic on the CPU and the GPU, 2^24 realistic (70%
//! boolean witness), 2^24 full-width, 2^26 realistic (host RAM and time permitting); one
//! warm-up and three proofs per row, every proof verified (the first before any row is
//! timed); per-phase medians, peak budget, then a summary table.
//! `cargo bench -p cuzk-benches --bench gpu_prove` (needs a GPU).

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use cuzk_benches::{Summary, check, gpu};
use cuzk_groth16::testing::demo::Fixture;
use cuzk_groth16::{GpuBackend, ProofTimings, ProverBackend, prepare_verifying_key, verify_proof};

const GIB: u64 = 1 << 30;

struct Row {
    name: String,
    setup: String,
    total: Duration,
    phases: Vec<(&'static str, Duration)>,
    peak: u64,
}

fn medians(runs: &[ProofTimings]) -> Vec<(&'static str, Duration)> {
    // Every run on one backend has the same rows (uploads only where it uploads).
    let names: Vec<&'static str> = runs[0].rows().into_iter().map(|(n, _)| n).collect();
    names
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut v: Vec<Duration> = runs.iter().map(|t| t.rows()[i].1).collect();
            v.sort();
            (n, v[v.len() / 2])
        })
        .collect()
}

/// One warm-up and three proofs on `b`, each verified (the warm-up's before any timing); the
/// median row.
fn bench_row(name: &str, b: &dyn ProverBackend, f: &Fixture) -> Row {
    let mut runs = Vec::new();
    for seed in 0..4u64 {
        let (p, t) = f.prove(b, 100 + seed).expect("bench proof");
        let ok = verify_proof(
            &prepare_verifying_key(&f.pk.vk),
            &p,
            f.witness.public_inputs(),
        );
        if seed == 0 {
            check(ok.is_ok(), &format!("{name}: the proof verifies"));
        }
        ok.expect("the proof verifies");
        if seed > 0 {
            runs.push(t);
        }
    }
    let phases = medians(&runs);
    let total = phases
        .iter()
        .find(|(n, _)| *n == "total")
        .map_or(Duration::ZERO, |p| p.1);
    let row = Row {
        name: name.to_owned(),
        setup: format!("{:.1} s ({})", f.setup.as_secs_f64(), f.setup_on),
        total,
        phases,
        peak: gpu().vram().budget().peak(),
    };
    println!(
        "\n{name}: setup {}, median prove {:.1} ms",
        row.setup,
        ms(total)
    );
    for (n, d) in &row.phases {
        println!("  {n:<14} {:>9.1} ms", ms(*d));
    }
    row
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let started = Instant::now();
    let g = gpu();
    println!("device: {} ({} SMs)", g.info().name, g.info().sm_count);
    let mut rows = Vec::new();

    let f20 = Fixture::new(20, 70, 200, None);
    rows.push(bench_row(
        "2^20 realistic, CPU",
        &cuzk_groth16::CpuBackend,
        &f20,
    ));
    rows.push(bench_row(
        "2^20 realistic, GPU",
        &GpuBackend::new(g.clone()),
        &f20,
    ));
    drop(f20);

    rows.push(bench_row(
        "2^24 realistic (70% bits)",
        &GpuBackend::new(g.clone()),
        &Fixture::new(24, 70, 24, Some(&g)),
    ));
    {
        let f = Fixture::new(24, 0, 240, Some(&g));
        rows.push(bench_row(
            "2^24 full-width",
            &GpuBackend::new(g.clone()),
            &f,
        ));
    }
    let ram = cuzk_vram::physical_ram();
    let elapsed = started.elapsed();
    if elapsed > Duration::from_secs(200) {
        println!(
            "\n2^26 realistic: skipped ({:.0} s into the run; time limit)",
            elapsed.as_secs_f64()
        );
    } else if ram.is_some_and(|r| r < 100 * GIB) {
        println!("\n2^26 realistic: skipped (host RAM {:?} < 100 GiB)", ram);
    } else {
        let f = Fixture::new(26, 70, 260, Some(&g));
        if f.setup_on == "gpu" {
            rows.push(bench_row("2^26 realistic", &GpuBackend::new(g.clone()), &f));
        } else {
            println!("\n2^26 realistic: skipped (GPU setup unavailable)");
        }
    }

    // (phase in ProofTimings::rows, column title)
    let cols = [
        ("witness map", "wmap"),
        ("upload z", "up z"),
        ("upload a,b,c", "up abc"),
        ("quotient H", "H"),
        ("MSM A (G1)", "A"),
        ("MSM B (G1)", "B1"),
        ("MSM B (G2)", "B2"),
        ("MSM H (G1)", "Hmsm"),
        ("MSM L (G1)", "L"),
    ];
    print!("\n{:<28} {:>14} {:>10}", "row", "setup", "prove ms");
    for (_, title) in cols {
        print!(" {title:>8}");
    }
    println!(" {:>9}", "peak GiB");
    for r in &rows {
        print!("{:<28} {:>14} {:>10.1}", r.name, r.setup, ms(r.total));
        for (phase, _) in cols {
            let d = r
                .phases
                .iter()
                .find(|(p, _)| *p == phase)
                .map_or(0.0, |p| ms(p.1));
            print!(" {d:>8.1}");
        }
        println!(" {:>9.2}", r.peak as f64 / GIB as f64);
    }
    println!("(the witness map runs at the same time as the A, B and L MSMs)");
    if let (Some(cpu), Some(gpu)) = (rows.first(), rows.get(1)) {
        println!(
            "CPU/GPU ratio at 2^20: {:.1}x (peak GiB is the process-wide budget peak so far)",
            cpu.total.as_secs_f64() / gpu.total.as_secs_f64().max(1e-9)
        );
    }
    // bellperson 0.27 + supraseal-c2 on this H200 (/work/shared/GPU-WORKFLOW.md): 2^24 75%
    // boolean witness 12.0-14.0 s prover time, full-width 2^24 ~60 s (its G2 MSM on the CPU).
    let mut summary = Summary::default();
    for r in rows.iter().skip(1) {
        let peer = match r.name.as_str() {
            "2^24 realistic (70% bits)" => Some(12_000.0),
            "2^24 full-width" => Some(60_000.0),
            _ => None,
        };
        summary.add(format!("prove {}", r.name), ms(r.total), peer);
    }
    summary.print("prove (peer: bellperson + supraseal-c2)");
}
