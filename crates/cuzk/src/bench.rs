//! `cuzk bench`: proofs of a demo circuit through the proving engine, J in flight, each one
//! verified; then where the time went and how busy the GPU was.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cuzk_groth16::BackendChoice;
use cuzk_scheduler::{
    Engine, EngineConfig, JobHandle, JobOutput, JobSpec, KeySource, SpanKind, WitnessSource, stats,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::{MIB, ms, peak_host_bytes, print_table, progress};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The circuit has 2^K constraints.
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..=28),
          required_unless_present_any = ["sizes", "queue"])]
    log_constraints: Option<u32>,
    #[command(flatten)]
    pub queue: crate::queue_cli::QueueUrl,
    /// With --queue: the key id the hosts hold.
    #[arg(long, requires = "queue")]
    pub key: Option<String>,
    /// With --queue: the witness file to prove (its path on shared storage, or --inline).
    #[arg(long, requires_all = ["queue", "key"])]
    pub witness: Option<PathBuf>,
    #[command(flatten)]
    pub queued: crate::queue_cli::QueueJob,
    /// Bench each of these sizes in turn (log2 of the constraints, e.g. 20,22,24).
    #[arg(long, value_delimiter = ',', conflicts_with = "log_constraints",
          value_parser = clap::value_parser!(u32).range(4..=28))]
    sizes: Vec<u32>,
    /// Percent of the constraints that are bit decompositions (70 realistic, 0 full-width).
    #[arg(long, default_value_t = 70, value_parser = clap::value_parser!(u32).range(0..=100))]
    boolean_percent: u32,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub proofs: u32,
    #[arg(long, default_value_t = 4)]
    public_inputs: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// GPU workers per device; default: what each device's memory admits for the key, at most 2.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    workers: Option<u32>,
    /// Proofs in flight at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
    /// Split each device into this many logical devices, each with an equal budget share.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    split: u32,
    /// Hand each job its witness as a file path (written once to a temporary file and read by
    /// the engine for every job), as a same-host daemon client does with `bench-daemon
    /// --by-path`; without it the jobs share one witness in memory.
    #[arg(long, conflicts_with = "queue")]
    by_path: bool,
    /// Exactly N constraints instead of 2^K, in the same 2^K domain (N in (2^(K-1), 2^K]): a
    /// 32 GiB PoRep partition has ~130M in 2^27.
    #[arg(long, requires = "log_constraints")]
    constraints: Option<usize>,
    /// Make the key on GPU 0 and keep its points only there, never on the host (for keys
    /// larger than host memory beside their circuit: 72 GiB at 2^27). Its jobs run on that
    /// GPU, whose budget must hold every point.
    #[arg(long, conflicts_with_all = ["queue", "split"])]
    key_on_device: bool,
    /// Evaluate a, b, c on the host even where the device could hold the circuit (the engine's
    /// `witness_map_on_device = false`; for comparison).
    #[arg(long)]
    host_witness_map: bool,
    /// Draw time per proof against size (SVG).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Draw the timed run's timeline (SVG; the last size's with `--sizes`).
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Write each size's figures as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What one size measured.
struct SizeResult {
    log: u32,
    throughput: f64,
    p50: Duration,
    p95: Duration,
    gpu_bound: f64,
    spans: Vec<cuzk_daemon::pb::Span>,
}

/// A temporary file, removed when the bench is done with it.
struct RemoveOnDrop(PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Phases in the order a job runs them (the table's rows).
const PHASES: [&str; 16] = [
    "read ahead",
    "read witness",
    "witness map ahead",
    "map ahead",
    "upload z",
    "witness map (device)",
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

pub(crate) fn run(a: Args, choice: BackendChoice) -> Result<()> {
    let sizes = match a.log_constraints {
        Some(k) => vec![k],
        None => a.sizes.clone(),
    };
    let engine = Engine::new(EngineConfig {
        backend: choice,
        workers_per_device: match a.workers {
            Some(n) => cuzk_scheduler::Workers::Fixed(n as usize),
            None => cuzk_scheduler::Workers::Auto,
        },
        split: a.split as usize,
        witness_map_on_device: !a.host_witness_map,
        ..EngineConfig::from_env()?
    })?;
    let mut results = Vec::new();
    for &log in &sizes {
        results.push(run_size(&engine, &a, log)?);
    }
    if sizes.len() > 1 {
        println!(
            "
{:<8} {:>14} {:>12} {:>12} {:>16}",
            "size", "ms per proof", "p50 ms", "p95 ms", "GPU-bound share"
        );
        for r in &results {
            println!(
                "2^{:<6} {:>14.1} {:>12.1} {:>12.1} {:>15.1}%",
                r.log,
                1e3 / r.throughput,
                ms(r.p50),
                ms(r.p95),
                100.0 * r.throughput / r.gpu_bound.max(1e-9)
            );
        }
    }
    if let Some(p) = &a.plot {
        let points: Vec<_> = results
            .iter()
            .map(|r| crate::svg::ScalingPoint {
                log: r.log,
                ms_per_proof: 1e3 / r.throughput,
                p50_ms: ms(r.p50),
            })
            .collect();
        let title = format!(
            "cuzk bench: {} workers, {} in flight, {}% boolean",
            a.workers.map_or("auto".into(), |n| n.to_string()),
            a.concurrency,
            a.boolean_percent
        );
        std::fs::write(p, crate::svg::scaling(&points, &title)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        println!("plot: {}", p.display());
    }
    if let (Some(p), Some(last)) = (&a.timeline, results.last()) {
        let names: Vec<String> = engine.devices().into_iter().map(|(n, _)| n).collect();
        std::fs::write(p, crate::svg::timeline(&last.spans, &names)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        println!("timeline: {}", p.display());
    }
    if let Some(p) = &a.json {
        let rows: Vec<_> = results
            .iter()
            .map(|r| {
                serde_json::json!({
                    "log_constraints": r.log,
                    "proofs_per_s": r.throughput,
                    "p50_ms": ms(r.p50),
                    "p95_ms": ms(r.p95),
                    "gpu_bound_proofs_per_s": r.gpu_bound,
                })
            })
            .collect();
        std::fs::write(p, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        println!("json: {}", p.display());
    }
    Ok(())
}

fn run_size(engine: &Engine, a: &Args, log_constraints: u32) -> Result<SizeResult> {
    let (proofs, concurrency) = (a.proofs as usize, a.concurrency as usize);
    let devices = engine.devices();
    let on_gpu = devices.iter().any(|(_, gpu)| *gpu);
    let size = match a.constraints {
        Some(n) => format!("{n} constraints (domain 2^{log_constraints})"),
        None => format!("2^{log_constraints} constraints"),
    };
    println!(
        "cuzk bench: {size}, {}% boolean, {proofs} proofs, {concurrency} in flight",
        a.boolean_percent
    );
    for (i, (name, _)) in devices.iter().enumerate() {
        println!("  device {i}: {name}");
    }
    let mut rng = ChaCha20Rng::seed_from_u64(a.seed);
    let pb = progress::spinner(format!("2^{log_constraints}: circuit and key"));
    let rows = match a.constraints {
        None => 1usize << log_constraints,
        Some(n) if n > (1 << log_constraints) / 2 && n <= 1 << log_constraints => n,
        Some(n) => bail!(
            "--constraints {n} is not in (2^{0}/2, 2^{0}]",
            log_constraints
        ),
    };
    let (circuit, witness) = cuzk_groth16::testing::demo::circuit_with_rows(
        rows,
        a.public_inputs,
        a.boolean_percent,
        &mut rng,
    )?;
    let tw = cuzk_groth16::ToxicWaste::random(&mut rng);
    let start = Instant::now();
    let circuit = Arc::new(circuit);
    // The GPU makes the key when the GPU proves (same key as the CPU setup).
    let (source, vk, setup_where) = if a.key_on_device {
        let gpu = engine
            .gpu(0)
            .context("--key-on-device needs a GPU as device 0")?;
        let (backend, pk, _) = cuzk_groth16::GpuBackend::generate_key(&gpu, &circuit, &tw)?;
        let vk = pk.vk.clone();
        let source = KeySource::Held {
            pk: Arc::new(pk),
            r1cs: circuit.clone(),
            backend: Arc::new(backend),
            device: 0,
        };
        (source, vk, "gpu, kept there")
    } else {
        let pk = if on_gpu {
            let gpu = cuzk_gpu::Gpu::first()?;
            cuzk_groth16::setup::gpu::generate_parameters_gpu(&gpu, &circuit, &tw)?.0
        } else {
            cuzk_groth16::generate_parameters_with_toxic_waste(&circuit, &tw)?.0
        };
        let vk = pk.vk.clone();
        let source = KeySource::Memory {
            pk: Arc::new(pk),
            r1cs: circuit.clone(),
        };
        (source, vk, if on_gpu { "gpu" } else { "cpu" })
    };
    let setup = start.elapsed();
    progress::done(
        pb,
        format!(
            "2^{log_constraints}: key made on the {setup_where} in {:.1} s",
            setup.as_secs_f64()
        ),
    );
    let pvk = cuzk_groth16::prepare_verifying_key(&vk);
    let start = Instant::now();
    engine.load_key("bench", source, None)?;
    let load = start.elapsed();
    // Under the auto rule the key's memory plan decides the workers; report what ran.
    let workers: Vec<usize> = engine
        .status()
        .devices
        .iter()
        .map(|d| d.workers.len())
        .collect();
    println!("  workers per device: {workers:?}");
    let warm_count: usize = workers.iter().sum();
    let witness = Arc::new(witness);
    let file = if a.by_path {
        let path = std::env::temp_dir().join(format!(
            "cuzk-bench-{}-2^{log_constraints}.wit",
            std::process::id()
        ));
        let guard = RemoveOnDrop(path.clone());
        let mut w = std::io::BufWriter::new(
            std::fs::File::create(&path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        );
        cuzk_formats::cuzk::write_witness(&mut w, &witness)
            .with_context(|| format!("cannot write {}", path.display()))?;
        std::io::Write::flush(&mut w)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("witness by path: {}", path.display());
        Some(guard)
    } else {
        None
    };
    let spec = || {
        let source = match &file {
            Some(f) => WitnessSource::File(f.0.clone()),
            None => WitnessSource::Memory(witness.clone()),
        };
        JobSpec::new("bench", source)
    };
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
    let warm: Vec<_> = (0..warm_count)
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
    let mut outs = Vec::with_capacity(proofs);
    let pb = progress::bar(proofs as u64, &format!("2^{log_constraints}"));
    let finish = |h: JobHandle, outs: &mut Vec<JobOutput>| -> Result<()> {
        let o = check(h)?;
        pb.inc(1);
        progress::line(
            &pb,
            format!(
                "[{}/{proofs}] ok {:.3} s  queue {:.0} ms  gpu {} worker {}",
                outs.len() + 1,
                (o.timings.queue_wait + o.timings.run).as_secs_f64(),
                ms(o.timings.queue_wait),
                o.device,
                o.worker
            ),
        );
        outs.push(o);
        Ok(())
    };
    for _ in 0..proofs {
        if live.len() >= concurrency {
            finish(live.pop_front().expect("a job in flight"), &mut outs)?;
        }
        live.push_back(engine.submit(spec())?);
    }
    while let Some(h) = live.pop_front() {
        finish(h, &mut outs)?;
    }
    pb.finish_and_clear();
    let wall = start.elapsed().as_secs_f64();
    let t1 = engine.now();
    let st = engine.status();

    let median = |mut v: Vec<Duration>| {
        v.sort();
        stats::median(&v).unwrap_or_default()
    };
    let rows = PHASES
        .iter()
        .filter(|p| {
            outs.iter()
                .any(|o| o.timings.spans.iter().any(|s| s.phase == **p))
        })
        .map(|&p| (p, median(outs.iter().map(|o| o.timings.phase(p)).collect())));
    print_table(&format!("phases (median of {proofs})"), rows);
    let mut lat: Vec<Duration> = outs
        .iter()
        .map(|o| o.timings.queue_wait + o.timings.run)
        .collect();
    lat.sort();
    let pct = |q: f64| stats::quantile(&lat, q).unwrap_or_default();
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
    let n = proofs as f64;
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
        let per_proof = device_seconds(engine, d.index, t0, t1) / count.max(1) as f64;
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
        if let Some(u) = d.unexplained_peak {
            println!(
                "device {} driver (kernels, page tables) {:>6.1} MiB",
                d.index,
                d.driver_bytes as f64 / MIB
            );
            println!(
                "device {} unexplained peak {:>12.1} MiB (limit lowered {} times)",
                d.index,
                u as f64 / MIB,
                d.limit_lowered
            );
        }
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
        proofs + warm_count,
        st.counters.failed,
        st.counters.self_check_failed
    );
    let spans = engine
        .timeline()
        .iter()
        .filter(|s| s.end >= t0 && s.start <= t1)
        .map(|s| cuzk_daemon::pb::Span {
            job_id: s.job.to_string(),
            device: s.device as u32,
            worker: s.worker as u32,
            phase: s.phase.to_owned(),
            kind: s.kind.name().into(),
            start_s: s.start,
            end_s: s.end,
        })
        .collect();
    engine.unload_key("bench")?;
    Ok(SizeResult {
        log: log_constraints,
        throughput: n / wall,
        p50: pct(0.5),
        p95: pct(0.95),
        gpu_bound: limit,
        spans,
    })
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
