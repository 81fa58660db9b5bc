//! The queue's rows and the statements on them. Each claim, result, failure and cancel is one
//! statement, so one transaction; the lease (owner, attempt) guards every write a host makes.

use std::time::Duration;

use cuzk_scheduler::Priority;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// An arbitrary constant: the advisory lock that serializes hosts migrating at once.
const MIGRATION_LOCK: i64 = 0x6375_7a6b_5f71; // "cuzk_q"

/// Why a queue operation failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("bad database URL: {0}")]
    Url(String),
    #[error("database pool: {0}")]
    Pool(String),
    #[error("database: {0}")]
    Db(#[from] tokio_postgres::Error),
    #[error("schema migration: {0}")]
    Migrate(String),
    #[error("{0}")]
    Invalid(String),
    #[error("no job {0}")]
    NoJob(i64),
}

impl From<deadpool_postgres::PoolError> for QueueError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        QueueError::Pool(crate::tls::explain(&e).unwrap_or_else(|| e.to_string()))
    }
}

/// Where a job's witness is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WitnessRef {
    /// A cuzk witness file on storage every host reads, and its checksum
    /// ([`crate::witness_checksum`]).
    Path { path: String, checksum: [u8; 32] },
    /// The witness file's bytes, for small witnesses.
    Inline(Vec<u8>),
}

/// A job to queue.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// Makes resubmission idempotent; `None`: every submit is a new job.
    pub request_id: Option<String>,
    pub key_id: String,
    /// [`crate::key_digest`] of the key's verifying key.
    pub key_digest: String,
    pub priority: Priority,
    pub witness: WitnessRef,
    /// Failed runs (and expired leases) after which the job fails for good.
    pub max_failures: i32,
}

/// What a submit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    pub id: i64,
    /// False: the request id was known and this is the first submit's job.
    pub created: bool,
}

/// A job a host claimed: it holds the lease (its owner, this attempt) until it writes a
/// result, fails it, or lets the lease expire.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: i64,
    pub attempt: i32,
    pub key_id: String,
    pub key_digest: String,
    pub priority: Priority,
    /// Why the row's witness cannot be used, when it cannot (the host fails the job with it).
    pub witness: Result<WitnessRef, String>,
}

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

impl State {
    pub const ALL: [State; 5] = [
        State::Queued,
        State::Running,
        State::Done,
        State::Failed,
        State::Cancelled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Result<Self, QueueError> {
        State::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| QueueError::Invalid(format!("unknown job state {s:?} in the database")))
    }

    pub fn finished(self) -> bool {
        matches!(self, State::Done | State::Failed | State::Cancelled)
    }
}

/// A job as the database holds it.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub request_id: Option<String>,
    pub key_id: String,
    pub priority: Priority,
    pub state: State,
    pub attempt: i32,
    pub failures: i32,
    pub owner: Option<String>,
    pub cancel_requested: bool,
    pub last_error: Option<String>,
    /// cuzk proof bytes (`cuzk_formats::cuzk::write_proof`), when done.
    pub proof: Option<Vec<u8>>,
    /// The public inputs as a cuzk witness file with no private part, when done.
    pub public_inputs: Option<Vec<u8>>,
    pub timings: Option<serde_json::Value>,
    pub done_by: Option<String>,
    /// Seconds from submit to the result, when finished.
    pub latency_s: Option<f64>,
}

/// A successful run's result.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub proof: Vec<u8>,
    pub public_inputs: Vec<u8>,
    pub timings: serde_json::Value,
}

/// What a cancel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It was queued and is now cancelled.
    Cancelled,
    /// It is running; the host holding it stops it at its next heartbeat.
    Requested,
    /// It had already finished (or been cancelled).
    Finished,
}

/// One host as its heartbeat last wrote it.
#[derive(Debug, Clone)]
pub struct HostRow {
    pub host: String,
    pub owner: String,
    /// Seconds since its last heartbeat.
    pub age_s: f64,
    pub capacity: i32,
    pub running: i32,
    pub keys: Vec<String>,
}

/// Jobs by state, and the hosts.
#[derive(Debug, Clone)]
pub struct QueueStatus {
    pub jobs: Vec<(State, i64)>,
    pub hosts: Vec<HostRow>,
}

impl QueueStatus {
    pub fn count(&self, s: State) -> i64 {
        self.jobs
            .iter()
            .find(|(x, _)| *x == s)
            .map_or(0, |(_, n)| *n)
    }
}

/// A lease renewal's answer for one job the host holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    pub attempt: i32,
    pub cancel_requested: bool,
}

fn priority_code(p: Priority) -> i16 {
    match p {
        Priority::Low => 0,
        Priority::Normal => 1,
        Priority::High => 2,
    }
}

fn priority_of(code: i16) -> Priority {
    match code {
        0 => Priority::Low,
        2 => Priority::High,
        _ => Priority::Normal,
    }
}

/// A witness as the columns (path, checksum, inline).
fn witness_columns(w: &WitnessRef) -> (Option<&str>, Option<&[u8]>, Option<&[u8]>) {
    match w {
        WitnessRef::Path { path, checksum } => (Some(path.as_str()), Some(&checksum[..]), None),
        WitnessRef::Inline(b) => (None, None, Some(&b[..])),
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A pool of connections to the queue's database. Cheap to clone. A connection that broke
/// (the server restarted) is dropped when returned and a new one is dialled on the next use,
/// so callers only retry.
#[derive(Clone)]
pub struct Queue {
    pool: Pool,
    /// For the LISTEN connection, which lives outside the pool.
    pg: tokio_postgres::Config,
    tls: MakeRustlsConnect,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.pool.status();
        f.debug_struct("Queue")
            .field("size", &s.size)
            .field("max_size", &s.max_size)
            .finish()
    }
}

impl Queue {
    /// A pool of up to `size` connections to `url` (`postgres://user@host:port/db` or a
    /// key=value string, with libpq's `sslmode` and `sslrootcert`: see [`crate::SslMode`]);
    /// nothing is dialled yet.
    pub fn open(url: &str, size: usize, connect_timeout: Duration) -> Result<Self, QueueError> {
        Self::open_with(url, size, connect_timeout, false)
    }

    /// [`Queue::open`] for a host. Its connections commit asynchronously (the server
    /// acknowledges a claim, heartbeat or result before its WAL is on disk, so commits do not
    /// queue on the disk's flushes). A server crash can then lose the last fraction of a second
    /// of a host's writes, and that only makes work run again: a lost claim puts the job back
    /// in the queue and the lease guard refuses the first host's result; a lost result leaves
    /// a lease that expires. A client's submit ([`Queue::open`]) stays synchronous, so an
    /// acknowledged job is never lost. And its plans never sort where an index gives the
    /// order: a claim must walk the queued index from its head whatever the statistics say
    /// (on a table loaded faster than ANALYZE runs, the planner otherwise sorts every queued
    /// row on every claim: 16 ms instead of 0.2 ms at 10,000 rows).
    pub fn open_host(
        url: &str,
        size: usize,
        connect_timeout: Duration,
    ) -> Result<Self, QueueError> {
        Self::open_with(url, size, connect_timeout, true)
    }

    fn open_with(
        url: &str,
        size: usize,
        connect_timeout: Duration,
        host: bool,
    ) -> Result<Self, QueueError> {
        let crate::tls::Connection {
            config: mut pg,
            connector: tls,
        } = crate::tls::connection(url).map_err(QueueError::Url)?;
        pg.connect_timeout(connect_timeout);
        if pg.get_application_name().is_none() {
            pg.application_name("cuzk");
        }
        if host {
            // No JIT: the sort's penalty cost would otherwise buy a JIT compile per claim.
            let ours = "-c synchronous_commit=off -c enable_sort=off -c jit=off";
            let options = match pg.get_options() {
                Some(o) => format!("{o} {ours}"),
                None => ours.to_owned(),
            };
            pg.options(&options);
        }
        let mgr = Manager::from_config(
            pg.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(connect_timeout * 2))
            .create_timeout(Some(connect_timeout))
            .recycle_timeout(Some(connect_timeout))
            .build()
            .map_err(|e| QueueError::Pool(e.to_string()))?;
        Ok(Self { pool, pg, tls })
    }

    /// Calls `wake` whenever jobs are queued (submitted, or back after a failure or an
    /// expired lease: the schema's triggers NOTIFY `cuzk_jobs`), and once when listening
    /// starts, on a connection of its own; returns only when that connection fails.
    pub async fn listen(&self, wake: impl Fn()) -> QueueError {
        let (client, mut conn) = match self.pg.connect(self.tls.clone()).await {
            Ok(c) => c,
            Err(e) => {
                return match crate::tls::explain(&e) {
                    Some(line) => QueueError::Pool(line),
                    None => e.into(),
                };
            }
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // Polling the connection's messages is what drives it, queries included.
        let driver = tokio::spawn(async move {
            loop {
                match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                    Some(Ok(AsyncMessage::Notification(_))) => {
                        if tx.send(()).is_err() {
                            return None;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Some(e),
                    None => return None,
                }
            }
        });
        if let Err(e) = client.batch_execute("LISTEN cuzk_jobs").await {
            driver.abort();
            return e.into();
        }
        // Jobs queued before the LISTEN took effect sent no notification this connection saw.
        wake();
        while rx.recv().await.is_some() {
            wake();
        }
        match driver.await {
            Ok(Some(e)) => e.into(),
            _ => QueueError::Pool("the LISTEN connection closed".into()),
        }
    }

    /// [`Queue::open`], then applies the schema's migrations (hosts starting together take
    /// turns under an advisory lock).
    pub async fn connect(
        url: &str,
        size: usize,
        connect_timeout: Duration,
    ) -> Result<Self, QueueError> {
        let q = Self::open(url, size, connect_timeout)?;
        q.migrate().await?;
        Ok(q)
    }

    /// Opens every connection of the pool now (a host's start), so no claim waits on one
    /// being dialled.
    pub async fn warm(&self) -> Result<(), QueueError> {
        let mut held = Vec::new();
        for _ in 0..self.pool.status().max_size {
            let c = self.pool.get().await?;
            c.simple_query("").await?;
            held.push(c);
        }
        Ok(())
    }

    /// Applies the migrations not yet applied.
    pub async fn migrate(&self) -> Result<(), QueueError> {
        let mut c = self.pool.get().await?;
        c.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        let client: &mut tokio_postgres::Client = &mut c;
        let r = embedded::migrations::runner().run_async(client).await;
        c.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await?;
        let report = r.map_err(|e| QueueError::Migrate(e.to_string()))?;
        for m in report.applied_migrations() {
            tracing::info!(migration = %m, "applied");
        }
        Ok(())
    }

    /// Queues a job, or answers the job of an earlier submit with the same request id.
    pub async fn submit(&self, job: &NewJob) -> Result<Submitted, QueueError> {
        if job.max_failures < 1 {
            return Err(QueueError::Invalid(
                "max_failures must be at least 1".into(),
            ));
        }
        let (path, sum, inline) = witness_columns(&job.witness);
        let c = self.pool.get().await?;
        let row = c
            .query_opt(
                "INSERT INTO cuzk_jobs (request_id, key_id, key_digest, priority, witness_path,
                                        witness_checksum, witness_inline, max_failures)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (request_id) DO NOTHING RETURNING id",
                &[
                    &job.request_id,
                    &job.key_id,
                    &job.key_digest,
                    &priority_code(job.priority),
                    &path,
                    &sum,
                    &inline,
                    &job.max_failures,
                ],
            )
            .await?;
        if let Some(r) = row {
            return Ok(Submitted {
                id: r.get(0),
                created: true,
            });
        }
        // Only a known request id conflicts.
        let r = c
            .query_one(
                "SELECT id FROM cuzk_jobs WHERE request_id = $1",
                &[&job.request_id],
            )
            .await?;
        Ok(Submitted {
            id: r.get(0),
            created: false,
        })
    }

    /// Queues many jobs in one transaction (all or none); the answers come back in order.
    pub async fn submit_many(&self, jobs: &[NewJob]) -> Result<Vec<Submitted>, QueueError> {
        let mut c = self.pool.get().await?;
        let tx = c.transaction().await?;
        let st = tx
            .prepare(
                "INSERT INTO cuzk_jobs (request_id, key_id, key_digest, priority, witness_path,
                                        witness_checksum, witness_inline, max_failures)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (request_id) DO UPDATE SET request_id = EXCLUDED.request_id
                 RETURNING id, xmax = 0",
            )
            .await?;
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            if job.max_failures < 1 {
                return Err(QueueError::Invalid(
                    "max_failures must be at least 1".into(),
                ));
            }
            let (path, sum, inline) = witness_columns(&job.witness);
            let r = tx
                .query_one(
                    &st,
                    &[
                        &job.request_id,
                        &job.key_id,
                        &job.key_digest,
                        &priority_code(job.priority),
                        &path,
                        &sum,
                        &inline,
                        &job.max_failures,
                    ],
                )
                .await?;
            out.push(Submitted {
                id: r.get(0),
                created: r.get(1),
            });
        }
        tx.commit().await?;
        Ok(out)
    }

    /// Claims up to `n` queued jobs of the given (key id, key digest) pairs, highest priority
    /// first and FIFO within a level, for `owner` with a lease of `lease`; rows other hosts are
    /// claiming at the same moment are skipped, not waited for. Each claim is also recorded in
    /// `cuzk_claims`.
    pub async fn claim(
        &self,
        owner: &str,
        keys: &[(String, String)],
        n: usize,
        lease: Duration,
    ) -> Result<Vec<Claimed>, QueueError> {
        if n == 0 || keys.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = keys.iter().map(|k| k.0.as_str()).collect();
        let digests: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
        let c = self.pool.get().await?;
        let st = c
            .prepare_cached(
                "WITH picked AS (
                     SELECT id FROM cuzk_jobs
                     WHERE state = 'queued'
                       AND (key_id, key_digest) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                     ORDER BY priority DESC, id
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED
                 ), claimed AS (
                     UPDATE cuzk_jobs j
                     SET state = 'running', attempt = j.attempt + 1, owner = $4,
                         lease_until = now() + make_interval(secs => $5), claimed_at = now()
                     FROM picked WHERE j.id = picked.id
                     RETURNING j.id, j.attempt, j.key_id, j.key_digest, j.priority,
                               j.witness_path, j.witness_checksum, j.witness_inline,
                               j.witness_sha256 IS NOT NULL
                 ), history AS (
                     INSERT INTO cuzk_claims (job_id, attempt, owner)
                     SELECT id, attempt, $4 FROM claimed
                 )
                 SELECT * FROM claimed ORDER BY priority DESC, id",
            )
            .await?;
        let rows = c
            .query(&st, &[&ids, &digests, &(n as i64), &owner, &secs(lease)])
            .await?;
        rows.iter()
            .map(|r| {
                let witness = match (
                    r.get::<_, Option<String>>(5),
                    r.get::<_, Option<Vec<u8>>>(6),
                    r.get::<_, Option<Vec<u8>>>(7),
                ) {
                    (Some(path), Some(sum), None) => Ok(WitnessRef::Path {
                        path,
                        checksum: sum.try_into().map_err(|_| {
                            QueueError::Invalid("a witness_checksum is not 32 bytes".into())
                        })?,
                    }),
                    (None, None, Some(b)) => Ok(WitnessRef::Inline(b)),
                    (Some(_), None, None) if r.get::<_, bool>(8) => Err(
                        "queued by an older cuzk with a SHA-256 witness digest; submit it again"
                            .to_owned(),
                    ),
                    _ => Err("the job names no witness".to_owned()),
                };
                Ok(Claimed {
                    id: r.get(0),
                    attempt: r.get(1),
                    key_id: r.get(2),
                    key_digest: r.get(3),
                    priority: priority_of(r.get(4)),
                    witness,
                })
            })
            .collect()
    }

    /// Renews the leases `owner` holds on `held` (job id, attempt) and writes its host row.
    /// Returns the leases still held, with their cancel flags; a job missing from the answer
    /// is no longer this host's (its lease expired and it went back to the queue).
    pub async fn heartbeat(
        &self,
        host: &str,
        owner: &str,
        held: &[(i64, i32)],
        lease: Duration,
        (capacity, keys): (i32, &[String]),
    ) -> Result<Vec<Lease>, QueueError> {
        let ids: Vec<i64> = held.iter().map(|h| h.0).collect();
        let attempts: Vec<i32> = held.iter().map(|h| h.1).collect();
        let mut c = self.pool.get().await?;
        let tx = c.transaction().await?;
        let rows = tx
            .query(
                "UPDATE cuzk_jobs SET lease_until = now() + make_interval(secs => $4)
                 WHERE state = 'running' AND owner = $1
                   AND (id, attempt) IN (SELECT * FROM unnest($2::int8[], $3::int4[]))
                 RETURNING id, attempt, cancel_requested",
                &[&owner, &ids, &attempts, &secs(lease)],
            )
            .await?;
        tx.execute(
            "INSERT INTO cuzk_hosts (host, owner, last_seen, capacity, running, keys)
             VALUES ($1, $2, now(), $3, $4, $5)
             ON CONFLICT (host) DO UPDATE SET owner = $2, last_seen = now(), capacity = $3,
                 running = $4, keys = $5",
            &[&host, &owner, &capacity, &(rows.len() as i32), &keys],
        )
        .await?;
        tx.commit().await?;
        Ok(rows
            .iter()
            .map(|r| Lease {
                id: r.get(0),
                attempt: r.get(1),
                cancel_requested: r.get(2),
            })
            .collect())
    }

    /// Returns every job whose lease has expired to the queue (or fails it, at its last
    /// allowed failure, or cancels it if a cancel was asked), with the reason kept as its last
    /// error. Any host may run this; the count of jobs handled comes back.
    pub async fn requeue_expired(&self) -> Result<u64, QueueError> {
        let c = self.pool.get().await?;
        let st = c
            .prepare_cached(
                "UPDATE cuzk_jobs SET
                     failures = failures + 1,
                     state = CASE WHEN cancel_requested THEN 'cancelled'
                                  WHEN failures + 1 >= max_failures THEN 'failed'
                                  ELSE 'queued' END,
                     finished_at = CASE WHEN cancel_requested OR failures + 1 >= max_failures
                                        THEN now() END,
                     last_error = 'the lease of ' || owner || ' expired (attempt ' || attempt || ')',
                     lease_until = NULL
                 WHERE state = 'running' AND lease_until < now()",
            )
            .await?;
        Ok(c.execute(&st, &[]).await?)
    }

    /// Marks a job done with its result, if `owner` still holds attempt `attempt`; false when
    /// the lease was lost (the result is not written: another host has or will have one).
    pub async fn complete(
        &self,
        id: i64,
        (owner, attempt): (&str, i32),
        host: &str,
        out: &Outcome,
    ) -> Result<bool, QueueError> {
        let c = self.pool.get().await?;
        let st = c
            .prepare_cached(
                "UPDATE cuzk_jobs SET state = 'done', proof = $4, public_inputs = $5,
                     timings = $6, done_by = $7, finished_at = now(), lease_until = NULL
                 WHERE id = $1 AND owner = $2 AND attempt = $3 AND state = 'running'",
            )
            .await?;
        let n = c
            .execute(
                &st,
                &[
                    &id,
                    &owner,
                    &attempt,
                    &out.proof,
                    &out.public_inputs,
                    &out.timings,
                    &host,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    /// Records a failed run: back to the queue while failures remain, else failed for good
    /// (cancelled when a cancel was asked); `error` is kept. False when the lease was lost.
    pub async fn fail(
        &self,
        id: i64,
        (owner, attempt): (&str, i32),
        error: &str,
    ) -> Result<bool, QueueError> {
        let c = self.pool.get().await?;
        let n = c
            .execute(
                "UPDATE cuzk_jobs SET
                     failures = failures + CASE WHEN cancel_requested THEN 0 ELSE 1 END,
                     state = CASE WHEN cancel_requested THEN 'cancelled'
                                  WHEN failures + 1 >= max_failures THEN 'failed'
                                  ELSE 'queued' END,
                     finished_at = CASE WHEN cancel_requested OR failures + 1 >= max_failures
                                        THEN now() END,
                     last_error = $4, lease_until = NULL
                 WHERE id = $1 AND owner = $2 AND attempt = $3 AND state = 'running'",
                &[&id, &owner, &attempt, &error],
            )
            .await?;
        Ok(n == 1)
    }

    /// Gives a job back to the queue without counting a failure (the host is shutting down
    /// before it ran it to the end). False when the lease was lost.
    pub async fn release(
        &self,
        id: i64,
        (owner, attempt): (&str, i32),
    ) -> Result<bool, QueueError> {
        let c = self.pool.get().await?;
        let n = c
            .execute(
                "UPDATE cuzk_jobs SET
                     state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,
                     finished_at = CASE WHEN cancel_requested THEN now() END,
                     lease_until = NULL
                 WHERE id = $1 AND owner = $2 AND attempt = $3 AND state = 'running'",
                &[&id, &owner, &attempt],
            )
            .await?;
        Ok(n == 1)
    }

    /// Cancels a job: a queued one at once; a running one is flagged, and the host holding it
    /// stops it when its heartbeat sees the flag.
    pub async fn cancel(&self, id: i64) -> Result<CancelOutcome, QueueError> {
        let c = self.pool.get().await?;
        let row = c
            .query_opt(
                "WITH old AS (SELECT id, state FROM cuzk_jobs WHERE id = $1 FOR UPDATE)
                 UPDATE cuzk_jobs j SET cancel_requested = true,
                     state = CASE WHEN old.state = 'queued' THEN 'cancelled' ELSE old.state END,
                     finished_at = CASE WHEN old.state = 'queued' THEN now() ELSE j.finished_at END
                 FROM old WHERE j.id = old.id AND old.state IN ('queued', 'running')
                 RETURNING old.state",
                &[&id],
            )
            .await?;
        match row {
            Some(r) if r.get::<_, &str>(0) == "queued" => Ok(CancelOutcome::Cancelled),
            Some(_) => Ok(CancelOutcome::Requested),
            None => {
                self.job(id).await?;
                Ok(CancelOutcome::Finished)
            }
        }
    }

    /// A job's row.
    pub async fn job(&self, id: i64) -> Result<Job, QueueError> {
        let c = self.pool.get().await?;
        let r = c
            .query_opt(
                "SELECT id, request_id, key_id, priority, state, attempt, failures, owner,
                        cancel_requested, last_error, proof, public_inputs, timings, done_by,
                        EXTRACT(EPOCH FROM finished_at - submitted_at)::float8
                 FROM cuzk_jobs WHERE id = $1",
                &[&id],
            )
            .await?
            .ok_or(QueueError::NoJob(id))?;
        Ok(Job {
            id: r.get(0),
            request_id: r.get(1),
            key_id: r.get(2),
            priority: priority_of(r.get(3)),
            state: State::parse(r.get(4))?,
            attempt: r.get(5),
            failures: r.get(6),
            owner: r.get(7),
            cancel_requested: r.get(8),
            last_error: r.get(9),
            proof: r.get(10),
            public_inputs: r.get(11),
            timings: r.get(12),
            done_by: r.get(13),
            latency_s: r.get(14),
        })
    }

    /// The states of the given jobs (one query, for clients awaiting many).
    pub async fn states(&self, ids: &[i64]) -> Result<Vec<(i64, State)>, QueueError> {
        let c = self.pool.get().await?;
        let rows = c
            .query(
                "SELECT id, state FROM cuzk_jobs WHERE id = ANY($1)",
                &[&ids],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.get(0), State::parse(r.get(1))?)))
            .collect()
    }

    /// Waits until a job has finished, polling every `poll`; `None` when `timeout` passed.
    pub async fn wait(
        &self,
        id: i64,
        timeout: Option<Duration>,
        poll: Duration,
    ) -> Result<Option<Job>, QueueError> {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        loop {
            let j = self.job(id).await?;
            if j.state.finished() {
                return Ok(Some(j));
            }
            if deadline.is_some_and(|d| tokio::time::Instant::now() + poll > d) {
                return Ok(None);
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Jobs by state and the hosts with their last heartbeat.
    pub async fn status(&self) -> Result<QueueStatus, QueueError> {
        let c = self.pool.get().await?;
        let mut jobs = Vec::new();
        for r in c
            .query("SELECT state, count(*) FROM cuzk_jobs GROUP BY state", &[])
            .await?
        {
            jobs.push((State::parse(r.get(0))?, r.get(1)));
        }
        jobs.sort_by_key(|(s, _)| State::ALL.iter().position(|x| x == s));
        let hosts = c
            .query(
                "SELECT host, owner, EXTRACT(EPOCH FROM now() - last_seen)::float8, capacity,
                        running, keys
                 FROM cuzk_hosts ORDER BY host",
                &[],
            )
            .await?
            .iter()
            .map(|r| HostRow {
                host: r.get(0),
                owner: r.get(1),
                age_s: r.get(2),
                capacity: r.get(3),
                running: r.get(4),
                keys: r.get(5),
            })
            .collect();
        Ok(QueueStatus { jobs, hosts })
    }

    /// Runs a read-only SQL query returning one bigint (tests and tools check the tables).
    pub async fn count(&self, sql: &str) -> Result<i64, QueueError> {
        let c = self.pool.get().await?;
        Ok(c.query_one(sql, &[]).await?.get(0))
    }
}
