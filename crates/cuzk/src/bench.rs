//! `cuzk bench`: proofs of a demo circuit through the proving engine, J in flight, each one
//! verified; then where the time went and how busy the GPU was.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cuzk_groth16::BackendChoice;
use cuzk_scheduler::{
    Engine, EngineConfig, JobHandle, JobOutput, JobSpec, KeySource, SpanKind, WitnessSource,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::{MIB, ms, peak_host_bytes, print_table};

pub(crate) struct Args {
    pub log_constraints: u32,
    pub boolean_percent: u32,
    pub proofs: usize,
    pub public_inputs: usize,
    pub seed: u64,
    pub workers: usize,
    pub concurrency: usize,
    pub split: usize,
    pub choice: BackendChoice,
}

/// Phases in the order a job runs them (the table's rows).
const PHASES: [&str; 12] = [
    "read witness",
    "upload z",
    "witness map",
    "MSM A",
    "MSM B (G1)",
    "MSM B (G2)",
    "MSM L",
    "upload a,b,c",
    "quotient",
    "MSM H",
    "assembly",
    "verify",
];

pub(crate) fn run(a: Args) -> Result<()> {
    let engine = Engine::new(EngineConfig {
        backend: a.choice,
        workers_per_device: a.workers,
        split: a.split,
        ..EngineConfig::from_env()?
    })?;
    let devices = engine.devices();
    let on_gpu = devices.iter().any(|(_, gpu)| *gpu);
    println!(
        "cuzk bench: 2^{} constraints, {}% boolean, {} proofs, {} in flight, {} workers per device",
        a.log_constraints, a.boolean_percent, a.proofs, a.concurrency, a.workers
    );
    for (i, (name, _)) in devices.iter().enumerate() {
        println!("  device {i}: {name}");
    }
    let mut rng = ChaCha20Rng::seed_from_u64(a.seed);
    let (circuit, witness) = cuzk_groth16::demo::circuit_with(
        a.log_constraints,
        a.public_inputs,
        a.boolean_percent,
        &mut rng,
    )?;
    let tw = cuzk_groth16::ToxicWaste::random(&mut rng);
    let start = Instant::now();
    // The GPU makes the key when the GPU proves (same key as the CPU setup).
    let (pk, setup_where) = if on_gpu {
        let gpu = cuzk_gpu::Gpu::first()?;
        let (pk, _) = cuzk_groth16::setup_gpu::generate_parameters_gpu(&gpu, &circuit, &tw)?;
        (pk, "gpu")
    } else {
        let (pk, _) = cuzk_groth16::generate_parameters_with_toxic_waste(&circuit, &tw)?;
        (pk, "cpu")
    };
    let setup = start.elapsed();
    let pvk = cuzk_groth16::prepare_verifying_key(&pk.vk);
    let start = Instant::now();
    engine.load_key(
        "bench",
        KeySource::Memory {
            pk: Arc::new(pk),
            r1cs: Arc::new(circuit),
        },
        None,
    )?;
    let load = start.elapsed();
    let witness = Arc::new(witness);
    let spec = || JobSpec::new("bench", WitnessSource::Memory(witness.clone()));
    let check = |h: JobHandle| -> Result<JobOutput> {
        let out = match h.wait(None) {
            Some(Ok(o)) => o,
            Some(Err(e)) => bail!("proof {} failed: {e}", h.id()),
            None => bail!("proof {} did not finish", h.id()),
        };
        cuzk_groth16::verify_proof(&pvk, &out.proof, &out.public_inputs)
            .with_context(|| format!("proof {} does not verify", h.id()))?;
        Ok(out)
    };

    // Warm-up: one proof per worker, so every worker's buffers exist before timing.
    let warm: Vec<_> = (0..a.workers * devices.len())
        .map(|_| engine.submit(spec()))
        .collect::<Result<_, _>>()?;
    for h in warm {
        check(h)?;
    }

    let busy_before: Vec<f64> = engine
        .status()
        .devices
        .iter()
        .map(|d| d.busy_seconds)
        .collect();
    let t0 = engine.now();
    let start = Instant::now();
    let mut live: VecDeque<JobHandle> = VecDeque::new();
    let mut outs = Vec::with_capacity(a.proofs);
    for _ in 0..a.proofs {
        if live.len() >= a.concurrency {
            outs.push(check(live.pop_front().expect("a job in flight"))?);
        }
        live.push_back(engine.submit(spec())?);
    }
    while let Some(h) = live.pop_front() {
        outs.push(check(h)?);
    }
    let wall = start.elapsed().as_secs_f64();
    let t1 = engine.now();
    let st = engine.status();

    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let rows = PHASES
        .iter()
        .filter(|p| {
            outs.iter()
                .any(|o| o.timings.spans.iter().any(|s| s.phase == **p))
        })
        .map(|&p| (p, median(outs.iter().map(|o| o.timings.phase(p)).collect())));
    print_table(&format!("phases (median of {})", a.proofs), rows);
    let mut lat: Vec<Duration> = outs
        .iter()
        .map(|o| o.timings.queue_wait + o.timings.run)
        .collect();
    lat.sort();
    let pct = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize];
    print_table(
        "latency",
        [
            ("p50", pct(0.5)),
            ("p95", pct(0.95)),
            ("max", pct(1.0)),
            (
                "GPU lock wait p50",
                median(outs.iter().map(|o| o.timings.lock_wait).collect()),
            ),
            (
                "memory wait p50",
                median(outs.iter().map(|o| o.timings.memory_wait).collect()),
            ),
        ],
    );
    let n = a.proofs as f64;
    println!("\nwall                      {:>12.2} s", wall);
    println!(
        "throughput                {:>12.3} proofs/s ({:.1} proofs/min)",
        n / wall,
        60.0 * n / wall
    );
    let mut limit = 0.0;
    for (d, before) in st.devices.iter().zip(&busy_before) {
        let busy = d.busy_seconds - before;
        let count = outs.iter().filter(|o| o.device == d.index).count();
        // What the device alone needs per proof: its device phases only.
        let per_proof = device_seconds(&engine, d.index, t0, t1) / count.max(1) as f64;
        if count > 0 {
            limit += 1.0 / per_proof.max(1e-9);
        }
        println!(
            "device {} ({count} proofs)   GPU lock held {:.1}% of wall, device phases {:.1} ms per proof",
            d.index,
            100.0 * busy / wall,
            per_proof * 1e3
        );
        println!(
            "device {} peak budget      {:>12.1} MiB of {:.1} MiB",
            d.index,
            d.budget_peak as f64 / MIB,
            d.budget_total as f64 / MIB
        );
    }
    println!(
        "GPU-bound limit           {:>12.3} proofs/s (throughput is {:.1}% of it)",
        limit,
        100.0 * (n / wall) / limit.max(1e-9)
    );
    println!("setup ({setup_where})               {:>12.1} ms", ms(setup));
    println!("load key                  {:>12.1} ms", ms(load));
    match peak_host_bytes() {
        Some(b) => println!("peak host memory (VmHWM)  {:>12.1} MiB", b as f64 / MIB),
        None => println!("peak host memory (VmHWM)            n/a"),
    }
    println!(
        "all {} proofs verified ({} failed, {} self-check failures)",
        a.proofs + a.workers * devices.len(),
        st.counters.failed,
        st.counters.self_check_failed
    );
    Ok(())
}

/// Seconds device `d` spent in device phases between `t0` and `t1` (engine clock).
fn device_seconds(engine: &Engine, d: usize, t0: f64, t1: f64) -> f64 {
    engine
        .timeline()
        .iter()
        .filter(|s| s.device == d && s.kind == SpanKind::Device)
        .map(|s| (s.end.min(t1) - s.start.max(t0)).max(0.0))
        .sum()
}
