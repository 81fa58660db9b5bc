//! A host's worker: claims jobs from the queue into its engine as the engine has room, renews
//! their leases, stops the ones cancelled on the row (or whose lease went to another host),
//! and writes each result back in the statement that marks the job done.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cuzk_formats::cuzk::{self, FileKind};
use cuzk_groth16::Witness;
use cuzk_scheduler::{Engine, JobError, JobHandle, JobOutput, JobSpec, WitnessSource};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, watch};

use crate::config::QueueConfig;
use crate::db::{Claimed, Outcome, Queue, QueueError, WitnessRef};

/// Maps a witness path named by a job to the file this host reads (a host may keep witness
/// paths inside one directory); the error says why the path is refused.
pub type WitnessResolver = Arc<dyn Fn(&str) -> Result<PathBuf, String> + Send + Sync>;

/// The longest pause between retries of a failed database call.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// hex SHA-256 of a verifying key's cuzk encoding: the name by which jobs ask for a key, so
/// a host whose key file differs from the submitter's never proves for it.
pub fn key_digest(vk: &cuzk_groth16::VerifyingKey) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    cuzk::write_verifying_key(&mut bytes, vk)?;
    Ok(hex(&Sha256::digest(&bytes)))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A cuzk witness file's checksum: the BLAKE3 of its contents that ends the file. A job names
/// its witness file by it; the host compares it when the job starts, and the engine checks the
/// contents against it in the one pass that reads the file, so no host hashes a file twice.
pub fn witness_checksum(path: &std::path::Path) -> std::io::Result<[u8; 32]> {
    let mut f = std::fs::File::open(path)?;
    // Magic, kind, format version (whose checksum is BLAKE3); then the body and the checksum.
    let mut head = [0u8; 9];
    f.read_exact(&mut head)?;
    if head[..4] != cuzk::MAGIC
        || head[4] != FileKind::Witness as u8
        || head[5..] != cuzk::FORMAT_VERSION.to_le_bytes()
        || f.metadata()?.len() < 9 + 16 + 32
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not a cuzk witness file of format version {}",
                cuzk::FORMAT_VERSION
            ),
        ));
    }
    f.seek(SeekFrom::End(-32))?;
    let mut sum = [0u8; 32];
    f.read_exact(&mut sum)?;
    Ok(sum)
}

/// A job this host holds the lease of.
#[derive(Default)]
struct Held {
    handle: Option<JobHandle>,
    /// Cancel asked on the row: stop it and record it cancelled.
    cancel: bool,
    /// The lease went to another host: stop it and write nothing.
    lost: bool,
}

struct Inner {
    queue: Queue,
    engine: Arc<Engine>,
    config: QueueConfig,
    host: String,
    /// This run of the host: a restarted daemon never mistakes its old leases for its own.
    owner: String,
    resolve: WitnessResolver,
    held: Mutex<HashMap<(i64, i32), Held>>,
    /// Claimed jobs not yet in the engine (witness being checked).
    preparing: AtomicUsize,
    freed: Notify,
}

/// Stops a worker's claiming; cheap to clone.
#[derive(Debug, Clone)]
pub struct Stopper(Arc<watch::Sender<bool>>);

impl Stopper {
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}

/// A running worker; [`WorkerHandle::finish`] stops it.
pub struct WorkerHandle {
    inner: Arc<Inner>,
    stop: Stopper,
    claimer: tokio::task::JoinHandle<()>,
    heartbeat: tokio::task::JoinHandle<()>,
    listener: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for WorkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle")
            .field("owner", &self.inner.owner)
            .field("held", &self.inner.held.lock().len())
            .finish()
    }
}

/// Starts claiming into `engine` (on the current tokio runtime).
pub fn spawn(
    queue: Queue,
    engine: Arc<Engine>,
    config: QueueConfig,
    resolve: WitnessResolver,
) -> WorkerHandle {
    let host = config.host_name();
    let owner = format!("{host}#{:08x}", rand::random::<u32>());
    tracing::info!(%owner, "queue worker starting");
    let inner = Arc::new(Inner {
        queue,
        engine,
        config,
        host,
        owner,
        resolve,
        held: Mutex::new(HashMap::new()),
        preparing: AtomicUsize::new(0),
        freed: Notify::new(),
    });
    let (stop, stop_rx) = watch::channel(false);
    let claimer = tokio::spawn(claim_loop(inner.clone(), stop_rx.clone()));
    let heartbeat = tokio::spawn(heartbeat_loop(inner.clone(), stop_rx));
    let listener = tokio::spawn(listen_loop(inner.clone()));
    WorkerHandle {
        inner,
        stop: Stopper(Arc::new(stop)),
        claimer,
        heartbeat,
        listener,
    }
}

impl WorkerHandle {
    /// The lease owner this run writes (host name and a random run id).
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Claims no more jobs; those held run on (the daemon's drain decides for how long).
    pub fn stop_claiming(&self) {
        self.stop.stop();
    }

    /// A handle that stops the claiming from elsewhere (a shutdown signal's task).
    pub fn stopper(&self) -> Stopper {
        self.stop.clone()
    }

    /// Stops claiming, waits up to `timeout` for the held jobs' results to be written (or the
    /// jobs given back), then stops the heartbeat and marks the host as having no capacity.
    pub async fn finish(self, timeout: Duration) {
        self.stop_claiming();
        let _ = self.claimer.await;
        self.listener.abort();
        let deadline = Instant::now() + timeout;
        while !self.inner.held.lock().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.heartbeat.abort();
        let left = self.inner.held.lock().len();
        if left > 0 {
            tracing::warn!(
                left,
                "queue worker stopped with jobs held; their leases will expire"
            );
        }
        let i = &self.inner;
        if let Err(e) = i
            .queue
            .heartbeat(&i.host, &i.owner, &[], i.config.lease(), (0, &[]))
            .await
        {
            tracing::warn!(error = %e, "could not mark the host stopped");
        }
    }
}

impl Inner {
    /// Jobs the engine can start now (its workers, plus the prefetch) less those it has.
    fn free_slots(&self) -> usize {
        let st = self.engine.status();
        let workers: usize = st.devices.iter().map(|d| d.workers.len()).sum();
        let queued: usize = st.queued.iter().map(|q| q.1).sum();
        let busy = st.running + queued + self.preparing.load(Ordering::SeqCst);
        (workers + self.config.prefetch).saturating_sub(busy)
    }

    /// The keys this host proves for: (id, digest).
    fn keys(&self) -> Vec<(String, String)> {
        self.engine
            .keys()
            .into_iter()
            .filter_map(|(id, _, _)| {
                let vk = self.engine.verifying_key(&id)?;
                match key_digest(&vk) {
                    Ok(d) => Some((id, d)),
                    Err(e) => {
                        tracing::warn!(key = %id, error = %e, "cannot digest the key; not claiming its jobs");
                        None
                    }
                }
            })
            .collect()
    }

    fn capacity(&self) -> i32 {
        let st = self.engine.status();
        st.devices.iter().map(|d| d.workers.len()).sum::<usize>() as i32
    }

    /// Retries a database write until it answers, or `give_up` passes (the lease will have
    /// expired by then and another host redoes the job).
    async fn retry<T, F, Fut>(&self, what: &str, mut f: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, QueueError>>,
    {
        let give_up = Instant::now() + (self.config.lease() * 3).max(Duration::from_secs(30));
        let mut backoff = Duration::from_millis(50);
        loop {
            match f().await {
                Ok(v) => return Some(v),
                Err(e) if Instant::now() < give_up => {
                    tracing::warn!(error = %e, "{what}; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(e) => {
                    tracing::error!(error = %e, "{what}; giving up (the lease will expire)");
                    return None;
                }
            }
        }
    }
}

async fn claim_loop(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let mut backoff = inner.config.poll();
    loop {
        if *stop.borrow() {
            return;
        }
        let free = inner.free_slots();
        let mut wait = inner.config.poll();
        if free > 0 {
            let keys = inner.keys();
            match inner
                .queue
                .claim(&inner.owner, &keys, free, inner.config.lease())
                .await
            {
                Ok(jobs) => {
                    backoff = inner.config.poll();
                    let got = jobs.len();
                    for j in jobs {
                        tracing::debug!(job = j.id, attempt = j.attempt, key = %j.key_id, "claimed");
                        inner.held.lock().insert((j.id, j.attempt), Held::default());
                        inner.preparing.fetch_add(1, Ordering::SeqCst);
                        tokio::spawn(run_job(inner.clone(), j));
                    }
                    if got == free {
                        // Maybe more room; ask again at once.
                        continue;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, backoff_ms = backoff.as_millis() as u64, "claim failed; retrying");
                    wait = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        tokio::select! {
            _ = inner.freed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Wakes the claim loop when jobs are queued; while the notifications are down (the database
/// restarted), the claim loop's poll finds the jobs.
async fn listen_loop(inner: Arc<Inner>) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let since = Instant::now();
        let e = inner.queue.listen(|| inner.freed.notify_one()).await;
        if since.elapsed() > MAX_BACKOFF * 2 {
            backoff = Duration::from_millis(200);
        }
        tracing::warn!(error = %e, backoff_ms = backoff.as_millis() as u64, "no queue notifications; claiming by polling meanwhile");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn heartbeat_loop(inner: Arc<Inner>, stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(inner.config.heartbeat());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let held: Vec<(i64, i32)> = inner.held.lock().keys().copied().collect();
        let keys: Vec<String> = inner
            .keys()
            .into_iter()
            .map(|(id, d)| format!("{id}:{d}"))
            .collect();
        let capacity = if *stop.borrow() { 0 } else { inner.capacity() };
        match inner
            .queue
            .heartbeat(
                &inner.host,
                &inner.owner,
                &held,
                inner.config.lease(),
                (capacity, &keys),
            )
            .await
        {
            Ok(leases) => {
                let answer: HashMap<(i64, i32), bool> = leases
                    .iter()
                    .map(|l| ((l.id, l.attempt), l.cancel_requested))
                    .collect();
                let mut map = inner.held.lock();
                for key in held {
                    let Some(h) = map.get_mut(&key) else {
                        continue; // finished meanwhile
                    };
                    match answer.get(&key) {
                        None if !h.lost => {
                            tracing::warn!(
                                job = key.0,
                                attempt = key.1,
                                "lease lost; stopping the job"
                            );
                            h.lost = true;
                        }
                        Some(true) if !h.cancel => {
                            tracing::info!(
                                job = key.0,
                                "cancel asked on the queue; stopping the job"
                            );
                            h.cancel = true;
                        }
                        _ => continue,
                    }
                    if let Some(handle) = &h.handle {
                        handle.cancel();
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed; leases not renewed"),
        }
        match inner.queue.requeue_expired().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(jobs = n, "expired leases returned to the queue"),
            Err(e) => tracing::warn!(error = %e, "expired-lease sweep failed"),
        }
    }
}

/// Decrements the preparing count once, when the job is in the engine or has failed.
struct Preparing<'a>(Option<&'a AtomicUsize>);

impl Preparing<'_> {
    fn done(&mut self) {
        if let Some(c) = self.0.take() {
            c.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Preparing<'_> {
    fn drop(&mut self) {
        self.done();
    }
}

async fn run_job(inner: Arc<Inner>, job: Claimed) {
    let key = (job.id, job.attempt);
    let lease = (inner.owner.as_str(), job.attempt);
    let mut preparing = Preparing(Some(&inner.preparing));
    let result = match start(&inner, &job).await {
        Ok(handle) => {
            preparing.done();
            let cancel_now = {
                let mut map = inner.held.lock();
                let h = map.entry(key).or_default();
                h.handle = Some(handle.clone());
                h.cancel || h.lost
            };
            if cancel_now {
                handle.cancel();
            }
            let r = match tokio::task::spawn_blocking(move || handle.wait(None)).await {
                Ok(Some(r)) => r,
                Ok(None) => Err(JobError::Shutdown),
                Err(e) => Err(JobError::Failed {
                    phase: "wait",
                    message: e.to_string(),
                }),
            };
            // The engine has a free slot now: claim its next job while this result is written.
            inner.freed.notify_one();
            r
        }
        Err(e) => Err(e),
    };
    preparing.done();
    let lost = inner.held.lock().get(&key).is_some_and(|h| h.lost);
    let q = &inner.queue;
    let written = if lost {
        None
    } else {
        match result {
            Ok(out) => match outcome(&out) {
                Ok(o) => {
                    inner
                        .retry("writing a result", || {
                            q.complete(job.id, lease, &inner.host, &o)
                        })
                        .await
                }
                Err(m) => {
                    let m = format!("{}: {m}", inner.host);
                    inner
                        .retry("recording a failure", || q.fail(job.id, lease, &m))
                        .await
                }
            },
            Err(JobError::Shutdown) => {
                inner
                    .retry("giving a job back", || q.release(job.id, lease))
                    .await
            }
            Err(e) => {
                let m = format!("{}: {e}", inner.host);
                tracing::warn!(job = job.id, error = %m, "job failed");
                inner
                    .retry("recording a failure", || q.fail(job.id, lease, &m))
                    .await
            }
        }
    };
    match written {
        Some(true) => tracing::debug!(job = job.id, "result written"),
        Some(false) | None if !lost => {
            tracing::warn!(
                job = job.id,
                attempt = job.attempt,
                "lease lost before the result was written; another host has the job"
            );
        }
        _ => {}
    }
    inner.held.lock().remove(&key);
    inner.freed.notify_one();
}

/// Checks the job's key and witness against this host, and hands it to the engine.
async fn start(inner: &Arc<Inner>, job: &Claimed) -> Result<JobHandle, JobError> {
    let have = inner
        .engine
        .verifying_key(&job.key_id)
        .ok_or_else(|| JobError::UnknownKey(job.key_id.clone()))?;
    let have = key_digest(&have).map_err(|e| JobError::Failed {
        phase: "key",
        message: e.to_string(),
    })?;
    if have != job.key_digest {
        return Err(JobError::Failed {
            phase: "key",
            message: format!(
                "key {:?} here has digest {have}, the job asks for {}",
                job.key_id, job.key_digest
            ),
        });
    }
    let witness = job
        .witness
        .as_ref()
        .map_err(|e| JobError::Witness(e.clone()))?;
    let source = match witness {
        WitnessRef::Inline(bytes) => {
            let bytes = bytes.clone();
            let w = tokio::task::spawn_blocking(move || {
                cuzk::read_witness("inline witness", &bytes[..])
            })
            .await
            .map_err(|e| JobError::Witness(e.to_string()))?
            .map_err(|e| JobError::Witness(e.to_string()))?;
            WitnessSource::Memory(Arc::new(w))
        }
        WitnessRef::Path { path, checksum } => {
            let file = (inner.resolve)(path).map_err(JobError::Witness)?;
            let f = file.clone();
            let got = tokio::task::spawn_blocking(move || witness_checksum(&f))
                .await
                .map_err(|e| JobError::Witness(e.to_string()))?
                .map_err(|e| JobError::Witness(format!("{path}: {e}")))?;
            if got != *checksum {
                return Err(JobError::Witness(format!(
                    "{path}: checksum {} differs from the job's {}",
                    hex(&got),
                    hex(checksum)
                )));
            }
            WitnessSource::File(file)
        }
    };
    inner
        .engine
        .submit(JobSpec::new(job.key_id.clone(), source).priority(job.priority))
}

/// The row's form of a proof: its bytes, the public inputs as a witness file, the timings.
fn outcome(out: &JobOutput) -> Result<Outcome, String> {
    let mut proof = Vec::new();
    cuzk::write_proof(&mut proof, &out.proof).map_err(|e| e.to_string())?;
    let mut public_inputs = Vec::new();
    cuzk::write_witness(&mut public_inputs, &Witness::new(&out.public_inputs, &[]))
        .map_err(|e| e.to_string())?;
    let t = &out.timings;
    let timings = serde_json::json!({
        "device": out.device,
        "worker": out.worker,
        "queue_wait_s": t.queue_wait.as_secs_f64(),
        "lock_wait_s": t.lock_wait.as_secs_f64(),
        "lock_hold_s": t.lock_hold.as_secs_f64(),
        "memory_wait_s": t.memory_wait.as_secs_f64(),
        "run_s": t.run.as_secs_f64(),
        "phases": t.spans.iter().map(|s| serde_json::json!({
            "phase": s.phase, "kind": s.kind.name(), "start_s": s.start, "end_s": s.end,
        })).collect::<Vec<_>>(),
    });
    Ok(Outcome {
        proof,
        public_inputs,
        timings,
    })
}
