//! The queue's clients: `submit`, `await`, `cancel` and `status` with `--queue URL` talk to
//! the PostgreSQL queue (`cuzk-queue`) instead of one daemon; `bench --queue` times proofs
//! across every host that claims from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use cuzk_formats::cuzk;
use cuzk_queue::{CancelOutcome, Job, NewJob, Queue, State, WitnessRef};
use cuzk_scheduler::Priority;

/// How long a client waits for the database to answer a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a client awaiting jobs reads their states.
const POLL: Duration = Duration::from_millis(50);

/// The queue's database.
#[derive(Args, Debug, Clone)]
pub struct QueueUrl {
    /// Work through the PostgreSQL queue at this URL (postgres://user@host/db) instead of one
    /// daemon.
    #[arg(long, env = "CUZK_QUEUE")]
    pub queue: Option<String>,
}

/// What a queued job names besides the key id and the witness.
#[derive(Args, Debug, Clone)]
pub struct QueueJob {
    /// The key's verifying key (`cuzk setup --vk`): the job asks for the key of this digest.
    #[arg(long, conflicts_with = "key_digest")]
    pub vk: Option<PathBuf>,
    /// The key's digest (hex SHA-256 of its verifying key file) instead of --vk.
    #[arg(long)]
    pub key_digest: Option<String>,
    /// Store the witness's bytes in the job row (small witnesses) instead of its path, which
    /// every host must be able to read (shared storage).
    #[arg(long)]
    pub inline: bool,
    /// Failed runs (or expired leases) after which the job fails for good.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=100))]
    pub max_failures: i32,
}

/// What to prove.
#[derive(Debug, Clone)]
pub struct Work {
    pub key: String,
    pub witness: PathBuf,
    pub priority: Priority,
}

pub async fn connect(url: &str, pool: usize) -> Result<Queue> {
    Queue::connect(url, pool, CONNECT_TIMEOUT)
        .await
        .context("cannot reach the queue's database")
}

fn read_vk(p: &Path) -> Result<cuzk_groth16::VerifyingKey> {
    crate::read_file(p, cuzk::read_verifying_key)
}

fn digest(job: &QueueJob) -> Result<String> {
    match (&job.vk, &job.key_digest) {
        (Some(p), _) => Ok(cuzk_queue::key_digest(&read_vk(p)?)?),
        (None, Some(d)) => {
            if d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!("--key-digest {d:?}: expected 64 hex digits");
            }
            Ok(d.to_ascii_lowercase())
        }
        (None, None) => bail!("a queued job names its key by digest: give --vk or --key-digest"),
    }
}

/// The job row of a piece of work.
fn new_job(work: &Work, job: &QueueJob, request_id: Option<String>) -> Result<NewJob> {
    let witness = if job.inline {
        WitnessRef::Inline(
            std::fs::read(&work.witness)
                .with_context(|| format!("cannot read {}", work.witness.display()))?,
        )
    } else {
        let p = std::path::absolute(&work.witness)
            .with_context(|| format!("{}", work.witness.display()))?;
        let checksum = cuzk_queue::witness_checksum(&p)
            .with_context(|| format!("cannot read {}", p.display()))?;
        WitnessRef::Path {
            path: p.to_string_lossy().into_owned(),
            checksum,
        }
    };
    Ok(NewJob {
        request_id: request_id.filter(|r| !r.is_empty()),
        key_id: work.key.clone(),
        key_digest: digest(job)?,
        priority: work.priority,
        witness,
        max_failures: job.max_failures,
    })
}

fn parse_id(s: &str) -> Result<i64> {
    s.parse()
        .with_context(|| format!("job id {s:?}: a queue job id is a number"))
}

/// A finished job's proof, or why there is none.
fn proof_of(j: &Job) -> Result<(&[u8], &[u8])> {
    match (j.state, &j.proof, &j.public_inputs) {
        (State::Done, Some(p), Some(i)) => Ok((p, i)),
        (State::Done, _, _) => bail!("job {} is done but its row holds no proof", j.id),
        (State::Cancelled, _, _) => bail!("job {} was cancelled", j.id),
        (State::Failed, _, _) => bail!(
            "job {} failed after {} attempt(s): {}",
            j.id,
            j.attempt,
            j.last_error.as_deref().unwrap_or("no error recorded")
        ),
        (s, _, _) => bail!("job {} is still {}; await it again", j.id, s.name()),
    }
}

fn write_proof(j: &Job, proof: &Path, public: Option<&Path>) -> Result<()> {
    let (p, i) = proof_of(j)?;
    std::fs::write(proof, p).with_context(|| format!("cannot write {}", proof.display()))?;
    if let Some(path) = public {
        std::fs::write(path, i).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn proof_line(j: &Job) -> String {
    let t = j.timings.clone().unwrap_or_default();
    let f = |k: &str| t.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    format!(
        "ok job {}  {:.2} s  host {}  attempt {}  run {:.2} s  engine queue {:.0} ms",
        j.id,
        j.latency_s.unwrap_or(0.0),
        j.done_by.as_deref().unwrap_or("?"),
        j.attempt,
        f("run_s"),
        f("queue_wait_s") * 1e3
    )
}

/// `cuzk submit --queue`: prints the job id (the first job's, for a known request id).
pub async fn submit(
    url: &str,
    work: &Work,
    job: &QueueJob,
    request_id: Option<String>,
    wait: Option<(&Path, Option<&Path>)>,
) -> Result<()> {
    let q = connect(url, 2).await?;
    let s = q.submit(&new_job(work, job, request_id)?).await?;
    let Some((proof, public)) = wait else {
        println!("{}", s.id);
        return Ok(());
    };
    let j = q
        .wait(s.id, None, POLL)
        .await?
        .context("the job did not finish")?;
    write_proof(&j, proof, public)?;
    println!("{}", proof_line(&j));
    Ok(())
}

/// `cuzk await --queue`.
pub async fn await_job(
    url: &str,
    id: &str,
    timeout_ms: u64,
    proof: &Path,
    public: Option<&Path>,
) -> Result<()> {
    let q = connect(url, 2).await?;
    let id = parse_id(id)?;
    let timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms));
    let Some(j) = q.wait(id, timeout, POLL).await? else {
        let j = q.job(id).await?;
        bail!("job {id} is still {}; await it again", j.state.name());
    };
    write_proof(&j, proof, public)?;
    println!("{}", proof_line(&j));
    Ok(())
}

/// `cuzk cancel --queue`.
pub async fn cancel(url: &str, id: &str) -> Result<()> {
    let q = connect(url, 2).await?;
    let id = parse_id(id)?;
    match q.cancel(id).await? {
        CancelOutcome::Cancelled => println!("cancelled {id}"),
        CancelOutcome::Requested => {
            println!(
                "cancel requested for {id}: the host running it stops it at its next heartbeat"
            )
        }
        CancelOutcome::Finished => println!("{id} had already finished"),
    }
    Ok(())
}

/// `cuzk status --queue`: jobs by state, then one line per host.
pub async fn status(url: &str, json: bool) -> Result<()> {
    let q = connect(url, 2).await?;
    let s = q.status().await?;
    if json {
        let v = serde_json::json!({
            "jobs": State::ALL.iter().map(|st| (st.name(), s.count(*st))).collect::<BTreeMap<_, _>>(),
            "hosts": s.hosts.iter().map(|h| serde_json::json!({
                "host": h.host, "owner": h.owner, "last_heartbeat_s": h.age_s,
                "capacity": h.capacity, "running": h.running, "keys": h.keys,
            })).collect::<Vec<_>>(),
        });
        println!("{v:#}");
        return Ok(());
    }
    let jobs: Vec<String> = State::ALL
        .iter()
        .map(|st| format!("{} {}", st.name(), s.count(*st)))
        .collect();
    println!("jobs: {}", jobs.join(", "));
    for h in &s.hosts {
        println!(
            "host {} ({}): last heartbeat {:.1} s ago  capacity {}  running {}  keys {}",
            h.host,
            h.owner,
            h.age_s,
            h.capacity,
            h.running,
            h.keys.join(" ")
        );
    }
    Ok(())
}

/// `cuzk bench --queue`: N proofs through the queue, J in flight, each checked with the
/// verifying key; then wall time, proofs/min, latency and the proofs each host made.
pub async fn bench(
    url: &str,
    work: Work,
    job: QueueJob,
    (proofs, concurrency): (usize, usize),
) -> Result<()> {
    let vk_path = job
        .vk
        .clone()
        .context("bench --queue checks every proof: give --vk")?;
    let pvk = Arc::new(cuzk_groth16::prepare_verifying_key(&read_vk(&vk_path)?));
    let row = Arc::new(new_job(&work, &job, None)?);
    let q = connect(url, concurrency.clamp(2, 16)).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.min(proofs) {
        let (q, next, row, pvk) = (q.clone(), next.clone(), row.clone(), pvk.clone());
        tasks.spawn(async move {
            let mut out = Vec::new();
            while next.fetch_add(1, Ordering::SeqCst) < proofs {
                let t = Instant::now();
                let r: Result<Job> = async {
                    let id = q.submit(&row).await?.id;
                    let j = q.wait(id, None, POLL).await?.context("no result")?;
                    let (p, i) = proof_of(&j)?;
                    let proof = cuzk::read_proof("proof", p)?;
                    let public = cuzk::read_witness("public inputs", i)?;
                    cuzk_groth16::verify_proof(&pvk, &proof, public.public_inputs())
                        .with_context(|| format!("the proof of job {id} does not verify"))?;
                    Ok(j)
                }
                .await;
                let secs = t.elapsed().as_secs_f64();
                match &r {
                    Ok(j) => println!("{}", proof_line(j)),
                    Err(e) => println!("FAILED {secs:.2} s  {e:#}"),
                }
                out.push((secs, r.map(|j| j.done_by.unwrap_or_default())));
            }
            out
        });
    }
    let mut results = Vec::new();
    while let Some(r) = tasks.join_next().await {
        results.extend(r?);
    }
    let wall = start.elapsed().as_secs_f64();
    let mut lat: Vec<f64> = results
        .iter()
        .filter(|r| r.1.is_ok())
        .map(|r| r.0)
        .collect();
    lat.sort_by(f64::total_cmp);
    let mut by_host: BTreeMap<String, usize> = BTreeMap::new();
    for (_, r) in &results {
        if let Ok(h) = r {
            *by_host.entry(h.clone()).or_default() += 1;
        }
    }
    let failures = results.len() - lat.len();
    crate::bench_daemon::print_run_line(wall, &lat, failures);
    for (h, n) in &by_host {
        println!("host {h}: {n} proofs");
    }
    if failures > 0 {
        bail!("{failures} of {proofs} proofs failed");
    }
    Ok(())
}
