//! The scale simulation: many simulated hosts claim jobs of a fixed duration from one queue
//! (no proving), each claim timed, every claim checked against every other.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cuzk_scheduler::Priority;
use cuzk_scheduler::stats::quantile;
use parking_lot::Mutex;

use crate::db::{NewJob, Outcome, Queue, QueueError, WitnessRef};

/// One simulation's shape.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub hosts: usize,
    pub jobs: usize,
    /// Jobs one host runs at once.
    pub slots: usize,
    /// How long each simulated job runs.
    pub job_time: Duration,
    /// Pause of a host whose claim came back empty.
    pub poll: Duration,
}

/// What a simulation measured.
#[derive(Debug, Clone)]
pub struct SimReport {
    pub claims: u64,
    /// Claim calls that came back empty (queue drained or every row skipped).
    pub empty_claims: u64,
    /// From the first claim to the last job written done.
    pub wall: Duration,
    /// Jobs claimed per second of `wall`.
    pub claims_per_s: f64,
    pub latency_p50: Duration,
    pub latency_p99: Duration,
    pub latency_max: Duration,
    /// A job id handed to two hosts, as the hosts saw it.
    pub double_claims_seen: u64,
    /// Jobs with more than one row in `cuzk_claims`.
    pub double_claims_recorded: i64,
    /// Jobs the database holds as done at the end.
    pub done: i64,
}

impl std::fmt::Display for SimReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "{} claims in {:.2} s: {:.0} claims/s; claim latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {} empty claims; double claims: {} seen, {} recorded; {} done",
            self.claims,
            self.wall.as_secs_f64(),
            self.claims_per_s,
            ms(self.latency_p50),
            ms(self.latency_p99),
            ms(self.latency_max),
            self.empty_claims,
            self.double_claims_seen,
            self.double_claims_recorded,
            self.done
        )
    }
}

const SIM_KEY: (&str, &str) = ("sim", "0000");

/// Queues `config.jobs` jobs of a simulated key, runs `config.hosts` hosts until all are
/// done, and reports. The queue should be empty of other jobs of the key `sim`.
pub async fn simulate(queue: &Queue, config: &SimConfig) -> Result<SimReport, QueueError> {
    let jobs: Vec<NewJob> = (0..config.jobs)
        .map(|i| NewJob {
            request_id: None,
            key_id: SIM_KEY.0.into(),
            key_digest: SIM_KEY.1.into(),
            priority: Priority::ALL[i % 3],
            witness: WitnessRef::Inline(vec![0]),
            max_failures: 3,
        })
        .collect();
    queue.submit_many(&jobs).await?;
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let doubles = Arc::new(AtomicU64::new(0));
    let empty = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(config.jobs)));
    let keys = vec![(SIM_KEY.0.to_owned(), SIM_KEY.1.to_owned())];
    let lease = Duration::from_secs(60);
    let total = config.jobs as u64;
    // The hosts' connections are opened at their start, before the clock.
    queue.warm().await?;
    let start = Instant::now();
    let mut hosts = tokio::task::JoinSet::new();
    for h in 0..config.hosts {
        let (queue, config, keys) = (queue.clone(), config.clone(), keys.clone());
        let (seen, doubles, empty, finished, latencies) = (
            seen.clone(),
            doubles.clone(),
            empty.clone(),
            finished.clone(),
            latencies.clone(),
        );
        hosts.spawn(async move {
            let owner = format!("sim-{h}");
            let mut running = tokio::task::JoinSet::new();
            while finished.load(Ordering::SeqCst) < total {
                let free = config.slots - running.len();
                if free > 0 {
                    let t = Instant::now();
                    let got = queue.claim(&owner, &keys, free, lease).await?;
                    latencies.lock().push(t.elapsed());
                    if got.is_empty() {
                        empty.fetch_add(1, Ordering::Relaxed);
                    }
                    for j in got {
                        if !seen.lock().insert(j.id) {
                            doubles.fetch_add(1, Ordering::SeqCst);
                        }
                        let (queue, owner, finished) =
                            (queue.clone(), owner.clone(), finished.clone());
                        running.spawn(async move {
                            tokio::time::sleep(config.job_time).await;
                            let out = Outcome {
                                proof: vec![1],
                                public_inputs: vec![],
                                timings: serde_json::json!({}),
                            };
                            if queue
                                .complete(j.id, (&owner, j.attempt), &owner, &out)
                                .await?
                            {
                                finished.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok::<_, QueueError>(())
                        });
                    }
                }
                if running.len() == config.slots || free == 0 {
                    if let Some(r) = running.join_next().await {
                        r.map_err(|e| QueueError::Invalid(e.to_string()))??;
                    }
                } else if running.is_empty() {
                    tokio::time::sleep(config.poll).await;
                } else {
                    tokio::select! {
                        r = running.join_next() => if let Some(r) = r {
                            r.map_err(|e| QueueError::Invalid(e.to_string()))??;
                        },
                        _ = tokio::time::sleep(config.poll) => {}
                    }
                }
            }
            while let Some(r) = running.join_next().await {
                r.map_err(|e| QueueError::Invalid(e.to_string()))??;
            }
            Ok::<_, QueueError>(())
        });
    }
    while let Some(r) = hosts.join_next().await {
        r.map_err(|e| QueueError::Invalid(e.to_string()))??;
    }
    let wall = start.elapsed();
    let mut lat = std::mem::take(&mut *latencies.lock());
    lat.sort();
    let claims = seen.lock().len() as u64 + doubles.load(Ordering::SeqCst);
    Ok(SimReport {
        claims,
        empty_claims: empty.load(Ordering::SeqCst),
        wall,
        claims_per_s: claims as f64 / wall.as_secs_f64(),
        latency_p50: quantile(&lat, 0.5).unwrap_or_default(),
        latency_p99: quantile(&lat, 0.99).unwrap_or_default(),
        latency_max: lat.last().copied().unwrap_or_default(),
        double_claims_seen: doubles.load(Ordering::SeqCst),
        double_claims_recorded: queue
            .count(
                "SELECT count(*) FROM (SELECT job_id FROM cuzk_claims c JOIN cuzk_jobs j
                 ON j.id = c.job_id WHERE j.key_id = 'sim'
                 GROUP BY job_id HAVING count(*) > 1) d",
            )
            .await?,
        done: queue
            .count("SELECT count(*) FROM cuzk_jobs WHERE key_id = 'sim' AND state = 'done'")
            .await?,
    })
}
