//! The `cuzk.v1.Prover` handlers: each translates a request into engine calls and the answer
//! back; the engine does the work.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cuzk_formats::{PointChecks, cuzk};
use cuzk_groth16::{Fr, Witness};
use cuzk_scheduler::{
    Engine, EngineError, JobError, JobHandle, JobId, JobOutput, JobSpec, JobStatus, KeySource,
    Priority, WitnessSource,
};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::same;
use crate::config::DaemonConfig;
use crate::filecoin::{Finished, ProofError, Queued};
use crate::metrics::Metrics;
use crate::paths::resolve_inside;
use crate::pb;
use crate::status::job_status;
use crate::upload::{self, ChunkReader};

/// What a tracked job is: one engine job, or a Filecoin proof's partitions.
#[derive(Clone)]
enum Work {
    Job(JobHandle),
    Filecoin(Queued),
}

impl Work {
    /// Its engine jobs (a Filecoin proof's once its circuit is loaded).
    fn handles(&self) -> Vec<JobHandle> {
        match self {
            Work::Job(h) => vec![h.clone()],
            Work::Filecoin(q) => q.partitions(),
        }
    }

    fn status(&self) -> JobStatus {
        match self {
            Work::Job(h) => h.status(),
            Work::Filecoin(q) => q.status(),
        }
    }

    /// False when it had already finished.
    fn cancel(&self) -> bool {
        match self {
            Work::Job(h) => h.cancel(),
            Work::Filecoin(q) => q.cancel(),
        }
    }
}

#[allow(clippy::large_enum_variant)] // one per job, behind an Arc
enum Done {
    Job(Result<JobOutput, JobError>),
    Filecoin(Result<Finished, ProofError>),
}

type Outcome = Arc<Done>;

/// One job the daemon tracks.
struct Entry {
    token: String,
    work: Work,
    result: watch::Receiver<Option<Outcome>>,
    received: Instant,
    request_id: String,
    finished: Option<Instant>,
}

#[derive(Default)]
struct Jobs {
    by_id: HashMap<String, Entry>,
    by_request: HashMap<String, String>,
}

impl Jobs {
    /// Drops finished results older than `ttl`.
    fn prune(&mut self, ttl: Duration) {
        let now = Instant::now();
        let old: Vec<String> = self
            .by_id
            .iter()
            .filter(|(_, e)| e.finished.is_some_and(|f| now.duration_since(f) >= ttl))
            .map(|(id, _)| id.clone())
            .collect();
        for id in old {
            if let Some(e) = self.by_id.remove(&id) {
                self.by_request.remove(&e.request_id);
            }
        }
    }
}

/// State shared by the gRPC handlers, the HTTP server and the shutdown path.
pub struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) config: DaemonConfig,
    param_dir: PathBuf,
    jobs: Mutex<Jobs>,
    pub(crate) metrics: Metrics,
    upload_bytes: AtomicU64,
    /// No new jobs (shutting down).
    pub(crate) closing: AtomicBool,
    /// The daemon's main runtime: work that outlives the call that started it runs here, not
    /// on the connection's runtime, which ends with its connection.
    pub(crate) runtime: tokio::runtime::Handle,
    /// Filecoin circuits and the jobs of curio's service.
    pub(crate) filecoin: Arc<crate::filecoin::Filecoin>,
    pub(crate) curio: Mutex<crate::curio_jobs::CurioJobs>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("param_dir", &self.param_dir)
            .finish_non_exhaustive()
    }
}

/// Witness bytes held by one Submit stream; returned when dropped (the stream ended, failed,
/// or its client went away).
struct UploadPermit<'a> {
    counter: &'a AtomicU64,
    bytes: u64,
}

impl Drop for UploadPermit<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

/// The most bytes a Filecoin proof's streamed input may have: a 64 GiB sector's C1 output is
/// ~100 MB, a full WindowPoSt partition's vanilla proofs a few hundred.
pub const MAX_FILECOIN_INPUT: u64 = 1 << 30;

/// Random 128 bits as hex: job ids and tokens (rand's thread RNG is a CSPRNG).
pub(crate) fn random_hex() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Bytes of a cuzk witness file of `len` entries (the leading one included), `np` public.
pub fn witness_file_size(np: usize, len: usize) -> u64 {
    let mut small = Vec::new();
    let w = Witness::new(&vec![Fr::ONE; np], &[]);
    cuzk::write_witness(&mut small, &w).expect("writing to memory");
    small.len() as u64 + (len.saturating_sub(np + 1) as u64) * 32
}

/// A stream's error; tonic reports a message above the size limit as OUT_OF_RANGE, which
/// clients know as RESOURCE_EXHAUSTED.
fn stream_error(s: Status, max: usize) -> Status {
    if s.code() == tonic::Code::OutOfRange {
        Status::resource_exhausted(format!(
            "a Submit message is larger than max_message_bytes = {max}: {}",
            s.message()
        ))
    } else {
        s
    }
}

/// A Submit whose header says everything must end there.
async fn no_chunks(
    stream: &mut Streaming<pb::SubmitRequest>,
    max: usize,
    refusal: &'static str,
) -> Result<(), Status> {
    match stream.message().await.map_err(|e| stream_error(e, max))? {
        Some(_) => Err(Status::invalid_argument(refusal)),
        None => Ok(()),
    }
}

fn valid_key_id(id: &str) -> Result<(), Status> {
    if id.is_empty()
        || id.len() > 128
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(Status::invalid_argument(format!(
            "key id {id:?}: use 1 to 128 of A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

fn priority(p: i32) -> Result<Priority, Status> {
    match pb::Priority::try_from(p) {
        Ok(pb::Priority::Unspecified | pb::Priority::Normal) => Ok(Priority::Normal),
        Ok(pb::Priority::Low) => Ok(Priority::Low),
        Ok(pb::Priority::High) => Ok(Priority::High),
        Err(_) => Err(Status::invalid_argument(format!("unknown priority {p}"))),
    }
}

fn pb_priority(p: Priority) -> pb::Priority {
    match p {
        Priority::Low => pb::Priority::Low,
        Priority::Normal => pb::Priority::Normal,
        Priority::High => pb::Priority::High,
    }
}

fn engine_status(e: &EngineError) -> Status {
    let m = e.to_string();
    match e {
        EngineError::KeyExists(_) => Status::already_exists(m),
        EngineError::UnknownKey(_) => Status::not_found(m),
        EngineError::File(_) | EngineError::Open { .. } | EngineError::Mismatch { .. } => {
            Status::invalid_argument(m)
        }
        EngineError::NoRoom { .. } | EngineError::Host(_) => Status::resource_exhausted(m),
        EngineError::Shutdown => Status::unavailable(m),
        _ => Status::internal(m),
    }
}

/// The timings of a job's engine jobs (a Filecoin proof's partitions, in order): the first
/// one's queue wait, the others summed, every phase.
fn timings<'a>(ts: impl IntoIterator<Item = &'a cuzk_scheduler::JobTimings>) -> pb::Timings {
    let mut out = pb::Timings::default();
    for (k, t) in ts.into_iter().enumerate() {
        if k == 0 {
            out.queue_wait_s = t.queue_wait.as_secs_f64();
        }
        out.lock_wait_s += t.lock_wait.as_secs_f64();
        out.lock_hold_s += t.lock_hold.as_secs_f64();
        out.memory_wait_s += t.memory_wait.as_secs_f64();
        out.run_s += t.run.as_secs_f64();
        out.phases.extend(t.spans.iter().map(|s| pb::PhaseTiming {
            phase: s.phase.into(),
            kind: s.kind.name().into(),
            start_s: s.start,
            end_s: s.end,
        }));
    }
    out
}

impl Shared {
    pub fn new(
        config: DaemonConfig,
        engine: Engine,
        runtime: tokio::runtime::Handle,
    ) -> std::io::Result<Self> {
        let param_dir = config.param_dir.canonicalize().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("parameter directory {}: {e}", config.param_dir.display()),
            )
        })?;
        let filecoin = crate::filecoin::Filecoin::new(
            config.filecoin_params(),
            config.filecoin_generate_keys,
        )?;
        let filecoin = Arc::new(filecoin);
        Ok(Self {
            engine: Arc::new(engine),
            config,
            param_dir,
            jobs: Mutex::new(Jobs::default()),
            metrics: Metrics::default(),
            upload_bytes: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            runtime,
            filecoin,
            curio: Mutex::default(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn reject(&self, s: Status) -> Status {
        self.metrics.rejected(code_name(s.code()));
        s
    }

    /// Loads a key from files under the parameter directory (blocking: call off the runtime).
    pub fn load_key_files(
        &self,
        id: &str,
        pk: &str,
        r1cs: &str,
        devices: Option<&[usize]>,
        trusted: bool,
    ) -> Result<(), Status> {
        valid_key_id(id)?;
        let at = |name: &str, what: &str| {
            resolve_inside(&self.param_dir, name)
                .map_err(|e| Status::invalid_argument(format!("{what}: {e}")))
        };
        let source = KeySource::Files {
            pk: at(pk, "proving key")?,
            r1cs: at(r1cs, "circuit")?,
            checks: if trusted {
                PointChecks::OnCurve
            } else {
                PointChecks::Full
            },
        };
        if let Some(ds) = devices {
            let n = self.engine.devices().len();
            if let Some(d) = ds.iter().find(|&&d| d >= n) {
                return Err(Status::invalid_argument(format!(
                    "device {d}: the daemon has {n} devices"
                )));
            }
        }
        self.engine
            .load_key(id, source, devices)
            .map_err(|e| engine_status(&e))
    }

    fn key_info(&self, id: &str) -> Option<pb::KeyInfo> {
        let (kid, constraints, on) = self.engine.keys().into_iter().find(|k| k.0 == id)?;
        let r1cs = self.engine.circuit(id)?;
        Some(pb::KeyInfo {
            key_id: kid,
            constraints: constraints as u64,
            devices: on.into_iter().map(|d| d as u32).collect(),
            witness_size: witness_file_size(r1cs.num_public(), r1cs.num_variables()),
        })
    }

    fn reserve_upload(&self, bytes: u64) -> Result<UploadPermit<'_>, Status> {
        let max = self.config.max_upload_bytes;
        self.upload_bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(bytes).filter(|&t| t <= max)
            })
            .map_err(|used| {
                Status::resource_exhausted(format!(
                    "uploads (witnesses, Filecoin inputs) hold {used} of max_upload_bytes = {max}; this one needs {bytes} more (retry later)"
                ))
            })?;
        Ok(UploadPermit {
            counter: &self.upload_bytes,
            bytes,
        })
    }

    fn lookup(
        &self,
        id: &str,
        token: &str,
    ) -> Result<(Work, watch::Receiver<Option<Outcome>>, Instant), Status> {
        let jobs = self.jobs.lock();
        match jobs.by_id.get(id) {
            Some(e) if same(&e.token, token) => Ok((e.work.clone(), e.result.clone(), e.received)),
            // An unknown id and a wrong token read the same: ids cannot be probed.
            _ => Err(Status::not_found(format!(
                "no job {id:?} with this token (unknown, expired, or not yours)"
            ))),
        }
    }

    /// Reads a Submit stream and queues its job.
    async fn submit(
        self: &Arc<Self>,
        mut stream: Streaming<pb::SubmitRequest>,
    ) -> Result<(pb::SubmitResponse, Instant), Status> {
        let received = Instant::now();
        let max = self.config.max_message_bytes;
        let mut header = match stream.message().await.map_err(|e| stream_error(e, max))? {
            Some(pb::SubmitRequest {
                msg: Some(pb::submit_request::Msg::Header(h)),
            }) => h,
            Some(_) => {
                return Err(Status::invalid_argument(
                    "the first Submit message must be a header",
                ));
            }
            None => return Err(Status::invalid_argument("empty Submit stream")),
        };
        if self.closing.load(Ordering::SeqCst) {
            return Err(Status::unavailable("the daemon is shutting down"));
        }
        let prio = priority(header.priority)?;
        if !header.request_id.is_empty() {
            if header.request_id.len() > 256 {
                return Err(Status::invalid_argument(
                    "request_id is longer than 256 bytes",
                ));
            }
            if let Some(r) = self.duplicate(&header.request_id) {
                return Ok((r, received));
            }
        }
        let key_circuit = || {
            self.engine
                .circuit(&header.key_id)
                .ok_or_else(|| Status::not_found(format!("unknown key {:?}", header.key_id)))
        };
        let witness = match header.witness.take() {
            Some(pb::submit_header::Witness::Filecoin(f)) => {
                if !header.key_id.is_empty() {
                    return Err(Status::invalid_argument(
                        "key_id: a Filecoin proof names no key (the daemon loads its circuit's)",
                    ));
                }
                if header.device.is_some() {
                    return Err(Status::invalid_argument(
                        "device: a Filecoin proof runs on any device",
                    ));
                }
                let mut f = f;
                let _permit = if f.input_size > 0 {
                    Some(self.filecoin_input(&mut stream, &mut f).await?)
                } else {
                    no_chunks(
                        &mut stream,
                        max,
                        "a Submit of a Filecoin proof whose input_size is 0 takes no chunks",
                    )
                    .await?;
                    None
                };
                return self
                    .submit_filecoin(f, prio, header.request_id, received)
                    .await;
            }
            Some(pb::submit_header::Witness::WitnessPath(p)) => {
                key_circuit()?;
                let path = match &self.config.witness_dir {
                    Some(dir) => resolve_inside(dir, &p)
                        .map_err(|e| Status::invalid_argument(format!("witness: {e}")))?,
                    // Over TCP a client may be on another host: reading any file the
                    // daemon can read is for same-host (socket) clients only.
                    None if matches!(self.config.listen_addr(), Ok(crate::Listen::Tcp(_))) => {
                        return Err(Status::permission_denied(
                            "witness paths over TCP need witness_dir in the daemon's config",
                        ));
                    }
                    None => {
                        let path = PathBuf::from(&p);
                        if !path.is_absolute() {
                            return Err(Status::invalid_argument(format!(
                                "witness path {p:?} must be absolute"
                            )));
                        }
                        path
                    }
                };
                no_chunks(
                    &mut stream,
                    max,
                    "a Submit with a witness_path takes no chunks",
                )
                .await?;
                WitnessSource::File(path)
            }
            Some(pb::submit_header::Witness::WitnessSize(size)) => {
                let r1cs = key_circuit()?;
                let want = witness_file_size(r1cs.num_public(), r1cs.num_variables());
                if size != want {
                    return Err(Status::invalid_argument(format!(
                        "wrong witness length: {size} bytes, key {:?} takes a witness file of {want} bytes ({} entries)",
                        header.key_id,
                        r1cs.num_variables()
                    )));
                }
                let permit = self.reserve_upload(size)?;
                let (tx, rx) = tokio::sync::mpsc::channel(upload::CHUNKS_IN_FLIGHT);
                let parse = tokio::task::spawn_blocking(move || {
                    cuzk::read_witness("witness stream", ChunkReader::new(rx))
                });
                let (mut got, mut parser_stopped) = (0u64, false);
                while let Some(m) = stream.next().await {
                    match m.map_err(|e| stream_error(e, max))?.msg {
                        Some(pb::submit_request::Msg::Chunk(c)) => {
                            got += c.len() as u64;
                            if got > size {
                                return Err(Status::invalid_argument(format!(
                                    "the witness stream holds more than witness_size = {size} bytes"
                                )));
                            }
                            // The parser stops early only on bad data, which it reports below.
                            if tx.send(c).await.is_err() {
                                parser_stopped = true;
                                break;
                            }
                        }
                        _ => {
                            return Err(Status::invalid_argument(
                                "a second header in one Submit stream",
                            ));
                        }
                    }
                }
                drop(tx);
                let parsed = parse
                    .await
                    .map_err(|e| Status::internal(e.to_string()))?
                    .map_err(|e| Status::invalid_argument(e.to_string()));
                if got < size && !parser_stopped {
                    return Err(Status::invalid_argument(format!(
                        "truncated witness stream: {got} of {size} bytes"
                    )));
                }
                let w = parsed?;
                drop(permit);
                WitnessSource::Memory(Arc::new(w))
            }
            None => {
                key_circuit()?;
                return Err(Status::invalid_argument(
                    "the header names no witness (witness_path, witness_size or filecoin)",
                ));
            }
        };
        let spec = JobSpec {
            key: header.key_id,
            witness,
            priority: prio,
            device: header.device.map(|d| d as usize),
        };
        self.queue(spec, header.request_id, received)
    }

    /// Reads a Filecoin proof's streamed input (`input_size` bytes of chunks) into its field,
    /// charged to the upload budget until the returned permit drops (after its parsing).
    async fn filecoin_input(
        &self,
        stream: &mut Streaming<pb::SubmitRequest>,
        f: &mut pb::FilecoinProof,
    ) -> Result<UploadPermit<'_>, Status> {
        let max = self.config.max_message_bytes;
        let size = f.input_size;
        let (name, field) = match pb::FilecoinKind::try_from(f.kind) {
            Ok(pb::FilecoinKind::PorepC2) => ("filecoin.c1_output", &mut f.c1_output),
            Ok(
                pb::FilecoinKind::WindowPost
                | pb::FilecoinKind::WinningPost
                | pb::FilecoinKind::SnapDeals,
            ) => ("filecoin.vanilla_proofs", &mut f.vanilla_proofs),
            Ok(pb::FilecoinKind::Unspecified) | Err(_) => {
                return Err(crate::filecoin::unknown_kind(f.kind));
            }
        };
        if size > MAX_FILECOIN_INPUT {
            return Err(Status::invalid_argument(format!(
                "filecoin.input_size: {size} bytes, above the {MAX_FILECOIN_INPUT} bytes a Filecoin input may have"
            )));
        }
        if !field.is_empty() {
            return Err(Status::invalid_argument(format!(
                "{name}: {} bytes in the header and input_size = {size} bytes of chunks; send it one way",
                field.len()
            )));
        }
        let permit = self.reserve_upload(size)?;
        let mut input = Vec::with_capacity(size as usize);
        while let Some(m) = stream.next().await {
            match m.map_err(|e| stream_error(e, max))?.msg {
                Some(pb::submit_request::Msg::Chunk(c)) => {
                    if (input.len() + c.len()) as u64 > size {
                        return Err(Status::invalid_argument(format!(
                            "the stream holds more than filecoin.input_size = {size} bytes of {name}"
                        )));
                    }
                    input.extend_from_slice(&c);
                }
                _ => {
                    return Err(Status::invalid_argument(
                        "a second header in one Submit stream",
                    ));
                }
            }
        }
        if (input.len() as u64) < size {
            return Err(Status::invalid_argument(format!(
                "truncated {name} stream: {} of filecoin.input_size = {size} bytes",
                input.len()
            )));
        }
        *field = input;
        Ok(permit)
    }

    fn duplicate(&self, request_id: &str) -> Option<pb::SubmitResponse> {
        let jobs = self.jobs.lock();
        let id = jobs.by_request.get(request_id)?;
        let e = jobs.by_id.get(id)?;
        Some(pb::SubmitResponse {
            job_id: id.clone(),
            job_token: e.token.clone(),
            duplicate: true,
        })
    }

    /// The job a request id names already (checked again under the jobs lock: two streams
    /// with one request_id race to here), or an error when the daemon tracks max_jobs.
    fn admit(
        &self,
        jobs: &mut Jobs,
        request_id: &str,
    ) -> Result<Option<pb::SubmitResponse>, Status> {
        if !request_id.is_empty()
            && let Some(id) = jobs.by_request.get(request_id)
            && let Some(e) = jobs.by_id.get(id)
        {
            return Ok(Some(pb::SubmitResponse {
                job_id: id.clone(),
                job_token: e.token.clone(),
                duplicate: true,
            }));
        }
        jobs.prune(Duration::from_secs_f64(self.config.result_ttl_s));
        if jobs.by_id.len() >= self.config.max_jobs {
            return Err(Status::resource_exhausted(format!(
                "the daemon tracks {} jobs, its max_jobs (retry later)",
                jobs.by_id.len()
            )));
        }
        Ok(None)
    }

    fn queue(
        self: &Arc<Self>,
        spec: JobSpec,
        request_id: String,
        received: Instant,
    ) -> Result<(pb::SubmitResponse, Instant), Status> {
        let mut jobs = self.jobs.lock();
        if let Some(r) = self.admit(&mut jobs, &request_id)? {
            return Ok((r, received));
        }
        let handle = self.engine.submit(spec).map_err(|e| job_status(&e))?;
        let r = self.track(&mut jobs, Work::Job(handle), request_id, received);
        Ok((r, received))
    }

    /// Parses a Filecoin proof and submits it (the first proof of a circuit loads it first, in
    /// the job), outside the jobs lock.
    async fn submit_filecoin(
        self: &Arc<Self>,
        f: pb::FilecoinProof,
        prio: Priority,
        request_id: String,
        received: Instant,
    ) -> Result<(pb::SubmitResponse, Instant), Status> {
        if let Some(r) = self.admit(&mut self.jobs.lock(), &request_id)? {
            return Ok((r, received));
        }
        let proof = tokio::task::spawn_blocking(move || crate::filecoin::parse_request(&f))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        let queued = self.filecoin.submit(&self.engine, proof, prio);
        let mut jobs = self.jobs.lock();
        if let Some(r) = self.admit(&mut jobs, &request_id)? {
            queued.cancel();
            return Ok((r, received));
        }
        let r = self.track(&mut jobs, Work::Filecoin(queued), request_id, received);
        Ok((r, received))
    }

    /// Tracks submitted work under a new id and token, with a blocking waiter that records
    /// metrics and wakes the Awaits.
    fn track(
        self: &Arc<Self>,
        jobs: &mut Jobs,
        work: Work,
        request_id: String,
        received: Instant,
    ) -> pb::SubmitResponse {
        let id = random_hex();
        let token = random_hex();
        let (tx, rx) = watch::channel(None);
        if !request_id.is_empty() {
            jobs.by_request.insert(request_id.clone(), id.clone());
        }
        jobs.by_id.insert(
            id.clone(),
            Entry {
                token: token.clone(),
                work: work.clone(),
                result: rx,
                received,
                request_id,
                finished: None,
            },
        );
        let me = self.clone();
        let jid = id.clone();
        self.runtime.spawn_blocking(move || {
            let done = match work {
                Work::Job(handle) => {
                    let Some(r) = handle.wait(None) else { return };
                    if let Ok(out) = &r {
                        me.metrics.observe(&out.timings);
                    }
                    Done::Job(r)
                }
                Work::Filecoin(q) => {
                    let r = q.wait();
                    if let Ok(f) = &r {
                        for out in &f.partitions {
                            me.metrics.observe(&out.timings);
                        }
                    }
                    Done::Filecoin(r)
                }
            };
            if let Some(e) = me.jobs.lock().by_id.get_mut(&jid) {
                e.finished = Some(Instant::now());
            }
            let _ = tx.send(Some(Arc::new(done)));
        });
        pb::SubmitResponse {
            job_id: id,
            job_token: token,
            duplicate: false,
        }
    }

    async fn await_job(
        &self,
        id: &str,
        token: &str,
        timeout_ms: u64,
    ) -> Result<pb::ProofResponse, Status> {
        let (work, mut rx, received) = self.lookup(id, token)?;
        let max = Duration::from_secs_f64(self.config.max_await_s);
        let wait = match timeout_ms {
            0 => max,
            ms => Duration::from_millis(ms).min(max),
        };
        let done = tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await;
        let outcome = match done {
            Ok(Ok(r)) => r.clone(),
            Ok(Err(_)) => return Err(Status::internal("the job's waiter ended without a result")),
            Err(_) => None,
        };
        let mut r = pb::ProofResponse {
            job_id: id.into(),
            ..Default::default()
        };
        let Some(outcome) = outcome else {
            match work.status() {
                JobStatus::Running {
                    device,
                    worker,
                    phase,
                } => {
                    r.state = pb::JobState::Running as i32;
                    r.device = device as u32;
                    r.worker = worker as u32;
                    r.phase = phase.into();
                }
                _ => r.state = pb::JobState::Queued as i32,
            }
            return Ok(r);
        };
        match &*outcome {
            Done::Job(Err(e)) => Err(job_status(e)),
            Done::Filecoin(Err(e)) => Err(e.status()),
            Done::Job(Ok(out)) => {
                cuzk::write_proof(&mut r.proof, &out.proof)
                    .map_err(|e| Status::internal(e.to_string()))?;
                cuzk::write_witness(&mut r.public_inputs, &Witness::new(&out.public_inputs, &[]))
                    .map_err(|e| Status::internal(e.to_string()))?;
                r.state = pb::JobState::Done as i32;
                r.device = out.device as u32;
                r.worker = out.worker as u32;
                r.timings = Some(timings([&out.timings]));
                r.latency_s = received.elapsed().as_secs_f64();
                Ok(r)
            }
            Done::Filecoin(Ok(f)) => {
                r.proof = f.proof.clone();
                r.state = pb::JobState::Done as i32;
                if let Some(first) = f.partitions.first() {
                    r.device = first.device as u32;
                    r.worker = first.worker as u32;
                }
                let mut t = timings(f.partitions.iter().map(|p| &p.timings));
                if let Some(load) = f.load {
                    // Its first phase: the circuit's load (cpu), or waiting for another's.
                    let kind = if load.loaded { "cpu" } else { "wait" };
                    t.phases.insert(
                        0,
                        pb::PhaseTiming {
                            phase: "load".into(),
                            kind: kind.into(),
                            start_s: load.start,
                            end_s: load.end,
                        },
                    );
                }
                r.timings = Some(t);
                r.latency_s = received.elapsed().as_secs_f64();
                Ok(r)
            }
        }
    }

    pub fn status(&self) -> pb::StatusResponse {
        let st = self.engine.status();
        let names = self.engine_names();
        let jobs = self.jobs.lock();
        let job_name = |j: JobId| names.get(&j).cloned().unwrap_or_else(|| format!("#{j}"));
        pb::StatusResponse {
            devices: st
                .devices
                .iter()
                .map(|d| pb::DeviceInfo {
                    index: d.index as u32,
                    name: d.name.clone(),
                    gpu: d.gpu,
                    vram_total: d.mem_total,
                    vram_free: d.mem_free,
                    budget_total: d.budget_total,
                    budget_limit: d.budget_limit,
                    unexplained_peak: d.unexplained_peak,
                    limit_lowered: d.limit_lowered,
                    driver_bytes: d.driver_bytes,
                    budget_used: d.budget_in_use,
                    budget_peak: d.budget_peak,
                    staging_capacity: d.staging_capacity,
                    staging_used: d.staging_in_use,
                    pinned_used: d.pinned_in_use,
                    workers: d
                        .workers
                        .iter()
                        .enumerate()
                        .map(|(i, w)| pb::WorkerInfo {
                            worker: i as u32,
                            job_id: w.job.map(job_name).unwrap_or_default(),
                            phase: w.phase.into(),
                        })
                        .collect(),
                    keys: d.keys.iter().map(|k| k.0.clone()).collect(),
                    busy_seconds: d.busy_seconds,
                })
                .collect(),
            queue: st
                .queued
                .iter()
                .map(|&(p, n)| pb::QueueDepth {
                    priority: pb_priority(p) as i32,
                    depth: n as u32,
                })
                .collect(),
            running: st.running as u32,
            host_capacity: st.host_capacity,
            host_used: st.host_in_use,
            upload_bytes: self.upload_bytes.load(Ordering::SeqCst),
            completed: st.counters.completed,
            failed: st.counters.failed,
            cancelled: st.counters.cancelled,
            self_check_failed: st.counters.self_check_failed,
            uptime_s: st.uptime.as_secs_f64(),
            jobs: jobs.by_id.len() as u32,
        }
    }

    /// The daemon's name of each engine job it tracks: its job id (a Filecoin proof's
    /// partitions through curio's service: `{job id}/{partition}`).
    fn engine_names(&self) -> HashMap<JobId, String> {
        let mut names = self.curio.lock().engine_names();
        for (id, e) in &self.jobs.lock().by_id {
            for h in e.work.handles() {
                names.insert(h.id(), id.clone());
            }
        }
        names
    }

    pub fn metrics_text(&self) -> String {
        let st = self.engine.status();
        let n = self.jobs.lock().by_id.len();
        self.metrics
            .render(&st, self.upload_bytes.load(Ordering::SeqCst), n)
    }

    pub fn timeline(&self, last_s: f64) -> pb::TimelineResponse {
        let now = self.engine.now();
        let spans = self.engine.timeline();
        let names = self.engine_names();
        pb::TimelineResponse {
            spans: spans
                .iter()
                .filter(|s| last_s <= 0.0 || s.end >= now - last_s)
                .map(|s| pb::Span {
                    job_id: match s.job {
                        // Work outside jobs: a circuit's load.
                        0 => "load".into(),
                        j => names.get(&j).cloned().unwrap_or_else(|| format!("#{j}")),
                    },
                    device: s.device as u32,
                    worker: s.worker as u32,
                    phase: s.phase.into(),
                    kind: s.kind.name().into(),
                    start_s: s.start,
                    end_s: s.end,
                })
                .collect(),
            now_s: now,
            devices: self.engine.devices().into_iter().map(|d| d.0).collect(),
        }
    }

    /// Jobs not yet finished.
    pub fn unfinished(&self) -> usize {
        self.jobs
            .lock()
            .by_id
            .values()
            .filter(|e| e.result.borrow().is_none())
            .count()
    }
}

pub(crate) fn code_name(c: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match c {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The gRPC service over [`Shared`].
#[derive(Debug, Clone)]
pub struct ProverService {
    pub(crate) shared: Arc<Shared>,
}

impl ProverService {
    /// The handlers over `shared`, for callers that drive them without a server (the fuzz
    /// harness).
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[tonic::async_trait]
impl pb::prover_server::Prover for ProverService {
    async fn load_key(
        &self,
        req: Request<pb::LoadKeyRequest>,
    ) -> Result<Response<pb::LoadKeyResponse>, Status> {
        let r = req.into_inner();
        let sh = self.shared.clone();
        let t = Instant::now();
        let id = r.key_id.clone();
        tracing::info!(key = %id, pk = %r.pk_path, r1cs = %r.r1cs_path, "loading key");
        let devices: Vec<usize> = r.devices.iter().map(|&d| d as usize).collect();
        tokio::task::spawn_blocking(move || {
            let ds = (!devices.is_empty()).then_some(&devices[..]);
            sh.load_key_files(&r.key_id, &r.pk_path, &r.r1cs_path, ds, r.trusted)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|s| self.shared.reject(s))?;
        let load_ms = t.elapsed().as_millis() as u64;
        tracing::info!(key = %id, load_ms, "key loaded");
        Ok(Response::new(pb::LoadKeyResponse {
            key: self.shared.key_info(&id),
            load_ms,
        }))
    }

    async fn unload_key(
        &self,
        req: Request<pb::UnloadKeyRequest>,
    ) -> Result<Response<pb::UnloadKeyResponse>, Status> {
        let id = req.into_inner().key_id;
        let sh = self.shared.clone();
        tokio::task::spawn_blocking(move || sh.engine.unload_key(&id))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| self.shared.reject(engine_status(&e)))?;
        Ok(Response::new(pb::UnloadKeyResponse {}))
    }

    async fn list_keys(
        &self,
        _: Request<pb::ListKeysRequest>,
    ) -> Result<Response<pb::ListKeysResponse>, Status> {
        let keys = self
            .shared
            .engine
            .keys()
            .into_iter()
            .filter_map(|k| self.shared.key_info(&k.0))
            .collect();
        Ok(Response::new(pb::ListKeysResponse { keys }))
    }

    async fn submit(
        &self,
        req: Request<Streaming<pb::SubmitRequest>>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let (r, _) = self
            .shared
            .submit(req.into_inner())
            .await
            .map_err(|s| self.shared.reject(s))?;
        Ok(Response::new(r))
    }

    async fn r#await(
        &self,
        req: Request<pb::AwaitRequest>,
    ) -> Result<Response<pb::ProofResponse>, Status> {
        let r = req.into_inner();
        self.shared
            .await_job(&r.job_id, &r.job_token, r.timeout_ms)
            .await
            .map(Response::new)
    }

    async fn prove(
        &self,
        req: Request<Streaming<pb::SubmitRequest>>,
    ) -> Result<Response<pb::ProofResponse>, Status> {
        let (s, _) = self
            .shared
            .submit(req.into_inner())
            .await
            .map_err(|s| self.shared.reject(s))?;
        let mut r = self.shared.await_job(&s.job_id, &s.job_token, 0).await?;
        if r.state != pb::JobState::Done as i32 {
            return Err(Status::deadline_exceeded(format!(
                "job {} did not finish within max_await_s; Await it with its token {}",
                s.job_id, s.job_token
            )));
        }
        r.job_id = s.job_id;
        Ok(Response::new(r))
    }

    async fn cancel(
        &self,
        req: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        let r = req.into_inner();
        let (work, _, _) = self.shared.lookup(&r.job_id, &r.job_token)?;
        Ok(Response::new(pb::CancelResponse {
            cancelled: work.cancel(),
        }))
    }

    async fn status(
        &self,
        _: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        Ok(Response::new(self.shared.status()))
    }

    async fn metrics(
        &self,
        _: Request<pb::MetricsRequest>,
    ) -> Result<Response<pb::MetricsResponse>, Status> {
        Ok(Response::new(pb::MetricsResponse {
            text: self.shared.metrics_text(),
        }))
    }

    async fn timeline(
        &self,
        req: Request<pb::TimelineRequest>,
    ) -> Result<Response<pb::TimelineResponse>, Status> {
        Ok(Response::new(self.shared.timeline(req.into_inner().last_s)))
    }
}
