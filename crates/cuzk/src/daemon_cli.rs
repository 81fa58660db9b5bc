//! The daemon and its client commands: `cuzk daemon` runs the proving service
//! (`cuzk-daemon`); `submit`, `await`, `cancel`, `status`, `keys` and `bench-daemon` (its run
//! in `bench_daemon.rs`) talk to one. Each runs on a tokio runtime made here, so the rest of
//! the binary stays synchronous.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use cuzk_daemon::client::Client;
use cuzk_daemon::{Daemon, DaemonConfig, DaemonOverrides, pb};
use cuzk_groth16::BackendChoice;

use crate::daemon_client::{Conn, Work, connect, runtime, stream};
use crate::queue_cli::{self, QueueJob, QueueUrl};

#[derive(Args, Debug, Clone)]
pub struct JobRef {
    /// The job id Submit printed.
    #[arg(long)]
    job: String,
    /// The job's token Submit printed (not with --queue).
    #[arg(long, required_unless_present = "queue")]
    token: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum DaemonCommand {
    /// Run the proving service: keys loaded once, proofs over gRPC (cuzk.v1) on a unix socket
    /// (default) or TCP, metrics; SIGTERM or SIGINT drains and exits 0.
    Daemon {
        /// The TOML configuration (see cuzk.example.toml); absent: the defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Overrides `listen`.
        #[arg(long)]
        listen: Option<String>,
        /// Overrides `param_dir`.
        #[arg(long)]
        param_dir: Option<PathBuf>,
        /// Overrides `http_listen`.
        #[arg(long)]
        http: Option<String>,
        /// Overrides `workers_per_device`.
        #[arg(long)]
        workers: Option<usize>,
        /// Overrides `drain_timeout_s`.
        #[arg(long)]
        drain_timeout: Option<f64>,
        /// Overrides `token_file`.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Queue mode: also claim jobs from this PostgreSQL queue (sets `queue.url`).
        #[arg(long)]
        queue: Option<String>,
        /// Sets `filecoin_generate_keys`: Filecoin keys missing from the parameter directory
        /// are made at their first proof (on the GPU, held there) and only their `.vk` written.
        /// For benchmarks, tests and private networks.
        #[arg(long)]
        filecoin_generate_keys: bool,
    },
    /// Submit a proof to a daemon; prints the job id and its token (or, with --wait, the proof).
    /// With --queue: queue it for any host; prints the job id.
    Submit {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        queue: QueueUrl,
        #[command(flatten)]
        queued: QueueJob,
        #[command(flatten)]
        work: Work,
        /// Makes resubmission idempotent: the same id answers the first job.
        #[arg(long)]
        request_id: Option<String>,
        /// Wait for the proof and write it to --proof.
        #[arg(long, requires = "proof")]
        wait: bool,
        #[arg(long)]
        proof: Option<PathBuf>,
        /// Also write the public inputs (for `cuzk verify --public`).
        #[arg(long)]
        public_out: Option<PathBuf>,
    },
    /// Wait for a job and write its proof.
    Await {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        queue: QueueUrl,
        #[command(flatten)]
        job: JobRef,
        /// Milliseconds to wait; 0: the daemon's longest.
        #[arg(long, default_value_t = 0)]
        timeout_ms: u64,
        #[arg(long)]
        proof: PathBuf,
        #[arg(long)]
        public_out: Option<PathBuf>,
    },
    /// Cancel a job, queued or running (with --queue: on whichever host runs it).
    Cancel {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        queue: QueueUrl,
        #[command(flatten)]
        job: JobRef,
    },
    /// A daemon's devices, workers, keys, queue and memory (with --queue: the queue's jobs by
    /// state and its hosts with their last heartbeat and capacity).
    Status {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        queue: QueueUrl,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a daemon's keys; or load or unload one.
    Keys {
        #[command(flatten)]
        conn: Conn,
        /// Load a key under this id (with --pk and --r1cs, under the daemon's param_dir).
        #[arg(long, requires_all = ["pk", "r1cs"])]
        load: Option<String>,
        #[arg(long)]
        pk: Option<String>,
        #[arg(long)]
        r1cs: Option<String>,
        /// Check the key's points on the curve only, not for the subgroup (~10x faster; for
        /// key files you made).
        #[arg(long, requires = "load")]
        trusted: bool,
        /// Unload the key with this id.
        #[arg(long, conflicts_with = "load")]
        unload: Option<String>,
    },
    /// Time N proofs through a daemon, J at a time: one line per proof, then wall time,
    /// proofs/min, latency p50/p95/max, failures and the GPU busy share.
    BenchDaemon {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        work: Work,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
        concurrency: u32,
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
        proofs: u32,
        /// A verifying key to check every proof with on the client too.
        #[arg(long)]
        vk: Option<PathBuf>,
        /// Write the run's spans and per-proof results as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw the run's timeline (each device's GPU lock and workers as lanes of phases).
        #[arg(long)]
        timeline: Option<PathBuf>,
    },
}

pub fn run(command: DaemonCommand, choice: BackendChoice) -> Result<()> {
    run_command(command, choice).map_err(|e| {
        // A call refused at the TLS layer (a client certificate the daemon did not take shows
        // only at the first call) gets one line instead of a transport error.
        let tls = e
            .chain()
            .find_map(|c| cuzk_daemon::tls::explain_chain(c, cuzk_daemon::tls::Peer::Daemon));
        match tls {
            Some(line) => anyhow::anyhow!(line),
            None => e,
        }
    })
}

fn run_command(command: DaemonCommand, choice: BackendChoice) -> Result<()> {
    let rt = runtime(64)?;
    match command {
        DaemonCommand::Daemon {
            config,
            listen,
            param_dir,
            http,
            workers,
            drain_timeout,
            token_file,
            queue,
            filecoin_generate_keys,
        } => {
            let mut c = match &config {
                Some(p) => DaemonConfig::load(p)?,
                None => DaemonConfig::default(),
            };
            c.apply(DaemonOverrides {
                listen,
                param_dir,
                http_listen: http,
                workers_per_device: workers,
                drain_timeout_s: drain_timeout,
                token_file,
                queue_url: queue,
                filecoin_generate_keys,
                // --backend is global and defaults to auto: only cpu or gpu overrides the file.
                backend: (choice != BackendChoice::Auto).then_some(choice),
            });
            c.validate()?;
            runtime(c.blocking_threads())?.block_on(serve(c))
        }
        DaemonCommand::Submit {
            queue: QueueUrl { queue: Some(url) },
            queued,
            work,
            request_id,
            wait,
            proof,
            public_out,
            ..
        } => {
            if work.by_path || work.device.is_some() {
                bail!("--by-path and --device do not apply to --queue (see --inline)");
            }
            let w = queue_cli::Work {
                key: work.key,
                witness: work.witness,
                priority: work.priority,
            };
            let wait = match (wait, &proof) {
                (true, Some(p)) => Some((p.as_path(), public_out.as_deref())),
                _ => None,
            };
            rt.block_on(queue_cli::submit(&url, &w, &queued, request_id, wait))
        }
        DaemonCommand::Submit {
            conn,
            work,
            request_id,
            wait,
            proof,
            public_out,
            ..
        } => rt.block_on(async {
            let mut c = connect(&conn).await?;
            let s = submit(&mut c, &work, request_id.unwrap_or_default()).await?;
            if !wait {
                println!("{} {}", s.job_id, s.job_token);
                return Ok(());
            }
            let r = await_done(&mut c, &s.job_id, &s.job_token, 0).await?;
            let path = proof.expect("clap requires --proof with --wait");
            write_result(&r, &path, public_out.as_deref())?;
            println!("{}", proof_line(&r));
            Ok(())
        }),
        DaemonCommand::Await {
            queue: QueueUrl { queue: Some(url) },
            job,
            timeout_ms,
            proof,
            public_out,
            ..
        } => rt.block_on(queue_cli::await_job(
            &url,
            &job.job,
            timeout_ms,
            &proof,
            public_out.as_deref(),
        )),
        DaemonCommand::Await {
            conn,
            job,
            timeout_ms,
            proof,
            public_out,
            ..
        } => rt.block_on(async {
            let mut c = connect(&conn).await?;
            let token = job.token.context("--token is required")?;
            let r = await_done(&mut c, &job.job, &token, timeout_ms).await?;
            write_result(&r, &proof, public_out.as_deref())?;
            println!("{}", proof_line(&r));
            Ok(())
        }),
        DaemonCommand::Cancel {
            queue: QueueUrl { queue: Some(url) },
            job,
            ..
        } => rt.block_on(queue_cli::cancel(&url, &job.job)),
        DaemonCommand::Cancel { conn, job, .. } => rt.block_on(async {
            let mut c = connect(&conn).await?;
            let r = c
                .cancel(pb::CancelRequest {
                    job_id: job.job.clone(),
                    job_token: job.token.context("--token is required")?,
                })
                .await?
                .into_inner();
            if r.cancelled {
                println!("cancelled {}", job.job);
            } else {
                println!("{} had already finished", job.job);
            }
            Ok(())
        }),
        DaemonCommand::Status {
            queue: QueueUrl { queue: Some(url) },
            json,
            ..
        } => rt.block_on(queue_cli::status(&url, json)),
        DaemonCommand::Status { conn, json, .. } => rt.block_on(async {
            let mut c = connect(&conn).await?;
            let s = c.status(pb::StatusRequest {}).await?.into_inner();
            if json {
                println!("{:#}", cuzk_daemon::status_json(&s));
            } else {
                print!("{}", status_text(&s));
            }
            Ok(())
        }),
        DaemonCommand::Keys {
            conn,
            load,
            pk,
            r1cs,
            trusted,
            unload,
        } => rt.block_on(async {
            let mut c = connect(&conn).await?;
            if let Some(id) = load {
                let bar = crate::progress::spinner(format!("loading key {id} in the daemon"));
                let r = c
                    .load_key(pb::LoadKeyRequest {
                        key_id: id.clone(),
                        pk_path: pk.unwrap_or_default(),
                        r1cs_path: r1cs.unwrap_or_default(),
                        devices: vec![],
                        trusted,
                    })
                    .await?
                    .into_inner();
                crate::progress::done(
                    bar,
                    format!("loaded {id} in {:.2} s", r.load_ms as f64 / 1e3),
                );
            }
            if let Some(id) = unload {
                c.unload_key(pb::UnloadKeyRequest { key_id: id.clone() })
                    .await?;
                println!("unloaded {id}");
            }
            let keys = c.list_keys(pb::ListKeysRequest {}).await?.into_inner().keys;
            for k in keys {
                println!(
                    "{}  constraints {}  devices {:?}  witness {} bytes",
                    k.key_id, k.constraints, k.devices, k.witness_size
                );
            }
            Ok(())
        }),
        DaemonCommand::BenchDaemon {
            conn,
            work,
            concurrency,
            proofs,
            vk,
            json,
            timeline,
        } => rt.block_on(crate::bench_daemon::bench(
            conn,
            work,
            (concurrency, proofs),
            vk,
            (json, timeline),
        )),
    }
}

async fn serve(config: DaemonConfig) -> Result<()> {
    let engine_config = config.engine()?;
    cuzk_daemon::priority::nice_compute_pool();
    // Opening devices, starting workers and a JIT compile of the kernels block; keep them off
    // the runtime's threads.
    let (engine, fits) = tokio::task::spawn_blocking(move || {
        let engine = cuzk_scheduler::Engine::new(engine_config)?;
        // A card with no machine code in this build runs the PTX compiled at the first load:
        // pay that here, at start, and say so, instead of in the first proof.
        let fits: Vec<Option<String>> = (0..engine.devices().len())
            .map(|i| {
                engine
                    .gpu(i)
                    .map(|g| cuzk_gpu::kernel_fit_line(&g, &cuzk_groth16::kernel_sets()))
            })
            .collect();
        anyhow::Ok((engine, fits))
    })
    .await??;
    for ((name, gpu), fit) in engine.devices().into_iter().zip(fits) {
        match fit {
            Some(fit) => eprintln!("cuzk daemon: device {name}; {fit}"),
            None if gpu => eprintln!("cuzk daemon: device {name}"),
            None => eprintln!("cuzk daemon: device {name} (CPU backend)"),
        }
    }
    // Synthesis writes gigabytes of fresh memory per partition: on 4 KiB pages the faults
    // take about as long as the writing (crates/bellpepper/PERF-NOTES.md, session 44).
    match cuzk_vram::transparent_huge_pages().as_deref() {
        Some("never") => eprintln!(
            "cuzk daemon: transparent huge pages are off (mode `never`): witnesses are faulted \
             in 4 KiB at a time, which slows synthesis; `madvise` lets cuzk use huge pages"
        ),
        Some(mode) => {
            eprintln!("cuzk daemon: allocations of 32 MiB and up on huge pages (THP mode `{mode}`)")
        }
        None => {}
    }
    let n = config.keys.len();
    let queue = config.queue.clone();
    let daemon = Daemon::bind(config, engine).await?;
    if n > 0 {
        eprintln!("cuzk daemon: preloading {n} key(s)");
    }
    daemon.preload().await?;
    eprintln!("cuzk daemon: listening on {}", daemon.address());
    if let Some(a) = daemon.http_address() {
        eprintln!("cuzk daemon: http on {a} (/metrics, /status, /timeline)");
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    if let Some(q) = &queue {
        eprintln!(
            "cuzk daemon: claiming from the queue as {} (lease {} s)",
            q.host_name(),
            q.lease_s
        );
    }
    cuzk_daemon::queue_mode::run(daemon, async move {
        tokio::select! {
            _ = term.recv() => eprintln!("cuzk daemon: SIGTERM, draining"),
            _ = tokio::signal::ctrl_c() => eprintln!("cuzk daemon: SIGINT, draining"),
        }
    })
    .await?;
    eprintln!("cuzk daemon: stopped");
    Ok(())
}

/// Submits one job; a streamed witness's upload rate goes to stderr (the daemon answers once
/// the whole witness is in and parsed).
async fn submit(c: &mut Client, work: &Work, request_id: String) -> Result<pb::SubmitResponse> {
    let s = stream(work, request_id).await?;
    let t = Instant::now();
    let r = c.submit(s).await?.into_inner();
    if !work.by_path
        && let Ok(m) = std::fs::metadata(&work.witness)
    {
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "uploaded {:.1} MiB in {:.3} s ({:.2} GB/s)",
            m.len() as f64 / (1u64 << 20) as f64,
            secs,
            m.len() as f64 / secs / 1e9
        );
    }
    Ok(r)
}

async fn await_done(
    c: &mut Client,
    id: &str,
    token: &str,
    timeout_ms: u64,
) -> Result<pb::ProofResponse> {
    let r = c
        .r#await(pb::AwaitRequest {
            job_id: id.into(),
            job_token: token.into(),
            timeout_ms,
        })
        .await?
        .into_inner();
    if r.state != pb::JobState::Done as i32 {
        bail!(
            "job {id} is still {} (phase {:?}); await it again",
            if r.state == pb::JobState::Running as i32 {
                "running"
            } else {
                "queued"
            },
            r.phase
        );
    }
    Ok(r)
}

fn write_result(r: &pb::ProofResponse, proof: &Path, public: Option<&Path>) -> Result<()> {
    std::fs::write(proof, &r.proof).with_context(|| format!("cannot write {}", proof.display()))?;
    if let Some(p) = public {
        std::fs::write(p, &r.public_inputs)
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

fn proof_line(r: &pb::ProofResponse) -> String {
    let t = r.timings.clone().unwrap_or_default();
    format!(
        "ok {:.2} s  queue {:.0} ms  run {:.2} s  lock wait {:.0} ms  device {} worker {}",
        r.latency_s,
        t.queue_wait_s * 1e3,
        t.run_s,
        t.lock_wait_s * 1e3,
        r.device,
        r.worker
    )
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

fn status_text(s: &pb::StatusResponse) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    for d in &s.devices {
        let vram = match (d.vram_free, d.vram_total) {
            (Some(f), Some(t)) => format!("vram {} free of {}  ", gib(f), gib(t)),
            _ => String::new(),
        };
        let limit = if d.budget_limit < d.budget_total {
            format!(
                " (limit {}: memory held by another process)",
                gib(d.budget_limit)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "device {} {}: {vram}budget {} of {}{limit} used (peak {}{})  staging {} of {}  pinned {}  busy {:.1} s  keys {:?}",
            d.index,
            d.name,
            gib(d.budget_used),
            gib(d.budget_total),
            gib(d.budget_peak),
            d.unexplained_peak.map_or(String::new(), |u| format!(
                "; driver {:.0} MiB, unexplained peak {:.0} MiB, limit lowered {} times",
                d.driver_bytes as f64 / (1u64 << 20) as f64,
                u as f64 / (1u64 << 20) as f64,
                d.limit_lowered
            )),
            gib(d.staging_used),
            gib(d.staging_capacity),
            gib(d.pinned_used),
            d.busy_seconds,
            d.keys
        );
        for w in &d.workers {
            let job = if w.job_id.is_empty() {
                "idle"
            } else {
                &w.job_id
            };
            let _ = writeln!(o, "  worker {}: {job} {}", w.worker, w.phase);
        }
    }
    let q: Vec<String> = s
        .queue
        .iter()
        .map(|q| {
            let p = pb::Priority::try_from(q.priority).unwrap_or(pb::Priority::Normal);
            format!(
                "{} {}",
                p.as_str_name()
                    .trim_start_matches("PRIORITY_")
                    .to_lowercase(),
                q.depth
            )
        })
        .collect();
    let _ = writeln!(
        o,
        "queue: {}  running {}  jobs {}\nhost memory {} of {}  uploads {}\ncompleted {}  failed {}  cancelled {}  self-check failed {}  uptime {:.0} s",
        q.join(", "),
        s.running,
        s.jobs,
        gib(s.host_used),
        gib(s.host_capacity),
        gib(s.upload_bytes),
        s.completed,
        s.failed,
        s.cancelled,
        s.self_check_failed,
        s.uptime_s
    );
    o
}
