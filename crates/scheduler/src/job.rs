//! Jobs: what a caller submits, the handle it awaits, polls or cancels, and what comes back.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cuzk_groth16::{Evaluations, Fr, Proof, ProverBackend, Witness, WitnessBuffer};
use parking_lot::{Condvar, Mutex};

use crate::gate::{Permit, Rank};

/// Three levels; FIFO within a level. A waiting higher-priority job gets the next GPU slot, and
/// a running lower-priority job yields the GPU lock at its next phase boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    pub fn name(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }
}

impl Rank for Priority {
    /// High is served first.
    fn rank(self) -> u8 {
        match self {
            Priority::High => 0,
            Priority::Normal => 1,
            Priority::Low => 2,
        }
    }
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "high" => Ok(Self::High),
            "normal" => Ok(Self::Normal),
            "low" => Ok(Self::Low),
            _ => Err(format!(
                "unknown priority {s:?} (expected high, normal or low)"
            )),
        }
    }
}

/// Computes a job's witness (a caller's circuit synthesis), into the storage of a finished
/// witness of the same key when the engine has one to give (see [`WitnessBuffer`]); an error
/// names what was wrong.
pub type WitnessFn = Arc<dyn Fn(Option<WitnessBuffer>) -> Result<Witness, String> + Send + Sync>;

/// Where a job's witness is.
#[derive(Clone)]
pub enum WitnessSource {
    Memory(Arc<Witness>),
    /// A cuzk witness file, read ahead of the workers when host memory allows, else by the
    /// worker (charged to the host budget while in flight either way).
    File(PathBuf),
    /// Computed ahead of the workers by a read-ahead thread when host memory allows (the
    /// worker proves another job meanwhile), else by the worker that runs the job, as its
    /// first CPU phase ("synthesize"): a queued job holds its inputs rather than its witness,
    /// and synthesis runs in priority order, cancellable while queued and shown in the
    /// timeline. An error, or a panic, fails the job alone ([`JobError::Witness`]).
    Compute(WitnessFn),
}

impl std::fmt::Debug for WitnessSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Memory(w) => f.debug_tuple("Memory").field(&w.len()).finish(),
            Self::File(p) => f.debug_tuple("File").field(p).finish(),
            Self::Compute(_) => f.write_str("Compute"),
        }
    }
}

/// A proof to make.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub key: String,
    pub witness: WitnessSource,
    pub priority: Priority,
    /// Run only on this engine device (index into [`crate::Engine::devices`]).
    pub device: Option<usize>,
}

impl JobSpec {
    pub fn new(key: impl Into<String>, witness: WitnessSource) -> Self {
        Self {
            key: key.into(),
            witness,
            priority: Priority::Normal,
            device: None,
        }
    }

    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }

    pub fn on_device(mut self, d: usize) -> Self {
        self.device = Some(d);
        self
    }
}

pub type JobId = u64;

/// Why a job produced no proof. Each names what failed; the other jobs are unaffected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("cancelled")]
    Cancelled,
    #[error("unknown key {0:?}")]
    UnknownKey(String),
    #[error("no device can run this job: {0}")]
    NoDevice(String),
    #[error("witness: {0}")]
    Witness(String),
    #[error("{phase}: {message}")]
    Failed {
        phase: &'static str,
        message: String,
    },
    /// The driver had less device memory than the budget counted on (another process took
    /// it). The engine runs such a job again once the memory is back, a few times at most.
    #[error("{phase}: out of device memory: {message}")]
    OutOfDeviceMemory {
        phase: &'static str,
        message: String,
    },
    #[error("the proof failed its self-check (pairing verification): {0}")]
    SelfCheck(String),
    #[error("the engine is shutting down")]
    Shutdown,
}

/// One phase of a job: a CPU step, a copy to the device, or a device step under the GPU lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpanKind {
    Cpu,
    Copy,
    Device,
    /// Waiting for the GPU lock or for staging room.
    Wait,
}

impl SpanKind {
    pub fn name(self) -> &'static str {
        match self {
            SpanKind::Cpu => "cpu",
            SpanKind::Copy => "copy",
            SpanKind::Device => "device",
            SpanKind::Wait => "wait",
        }
    }
}

/// A phase's interval, in seconds since the engine started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub job: JobId,
    pub device: usize,
    pub worker: usize,
    pub phase: &'static str,
    pub kind: SpanKind,
    pub start: f64,
    pub end: f64,
}

/// Where a job's time went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobTimings {
    /// Submit until a worker took it.
    pub queue_wait: Duration,
    /// Waiting for the GPU lock, summed over its device phases.
    pub lock_wait: Duration,
    /// Holding the GPU lock, summed.
    pub lock_hold: Duration,
    /// Waiting for staging room or host memory.
    pub memory_wait: Duration,
    /// Worker start to result.
    pub run: Duration,
    /// Every phase, in order.
    pub spans: Vec<Span>,
}

impl JobTimings {
    /// Seconds of the phase named `phase` (summed if it ran more than once).
    pub fn phase(&self, phase: &str) -> Duration {
        Duration::from_secs_f64(
            self.spans
                .iter()
                .filter(|s| s.phase == phase)
                .map(|s| s.end - s.start)
                .sum(),
        )
    }
}

/// A finished job.
#[derive(Debug, Clone)]
pub struct JobOutput {
    pub id: JobId,
    pub proof: Proof,
    pub public_inputs: Vec<Fr>,
    pub device: usize,
    pub worker: usize,
    pub timings: JobTimings,
}

/// What a job is doing now.
#[derive(Debug, Clone, PartialEq)]
pub enum JobStatus {
    Queued,
    Running {
        device: usize,
        worker: usize,
        phase: &'static str,
    },
    Done,
    Failed(JobError),
    Cancelled,
}

#[allow(clippy::large_enum_variant)] // one per job, and most jobs end Finished
pub(crate) enum JobState {
    Queued,
    Running {
        device: usize,
        worker: usize,
        phase: &'static str,
    },
    Finished(Result<JobOutput, JobError>),
}

/// Where a queued job's witness is with the read-ahead.
pub(crate) enum ReadAhead {
    NotStarted,
    /// Not started, with a finished job's witness storage and host bytes to compute it into
    /// (see `Inner::pass_on`): the read-ahead or the worker, whichever starts it, takes them.
    Reuse(Reuse),
    Reading,
    /// Read or computed into memory, holding the host bytes it was charged; `None`: not done
    /// ahead (no room, or a read error that the worker's own read will report).
    Done(Option<Permit>),
    /// Computed ahead, and the job's function failed: the job fails with this.
    Failed(JobError),
}

/// A finished job's witness storage and the host bytes that hold it, for a queued job of the
/// same key to compute its witness into.
pub(crate) struct Reuse {
    pub(crate) storage: WitnessBuffer,
    pub(crate) permit: Permit,
}

/// What a job's worker takes of its read-ahead.
pub(crate) enum Taken {
    /// Nothing: the worker reads or computes the witness into host bytes of its own.
    Nothing,
    /// The witness, made ahead into the job's slot, in these host bytes.
    Witness(Permit),
    /// Storage and host bytes to compute the witness into.
    Storage(Reuse),
}

/// Queued jobs that may hold evaluations made ahead at once: one covers the next job's, the
/// only ones a worker waits for.
pub(crate) const MAP_AHEAD: usize = 1;

/// Where a job's evaluations (A·z, B·z, C·z) are with the read-ahead. From `Mapping` on,
/// the read-ahead holds their host bytes for the job.
#[allow(clippy::large_enum_variant)] // one per job
pub(crate) enum MapAhead {
    NotStarted,
    Mapping,
    Done(Mapped),
    /// The witness map failed there: the job fails with this.
    Failed(JobError),
    /// Taken by the job's worker, or never to be made (the job started first, or ended).
    Gone,
}

/// A job's evaluations made ahead in a set lent by device `device`'s backend, and their host
/// bytes, held until this drops. Dropped with the set still in it (the job ended), the set
/// goes back to its lender.
pub(crate) struct Mapped {
    pub(crate) device: usize,
    abc: Option<Evaluations>,
    lender: Arc<dyn ProverBackend>,
    _permit: Permit,
}

impl Mapped {
    pub(crate) fn new(
        device: usize,
        abc: Evaluations,
        lender: Arc<dyn ProverBackend>,
        permit: Permit,
    ) -> Self {
        Self {
            device,
            abc: Some(abc),
            lender,
            _permit: permit,
        }
    }

    /// The set to make the evaluations in (`None` once taken).
    pub(crate) fn evaluations_mut(&mut self) -> Option<&mut Evaluations> {
        self.abc.as_mut()
    }

    /// The evaluations, for a worker of device `device` to stage (`None` for another
    /// device's, whose set goes back to its lender); the host bytes stay held until `self`
    /// drops.
    pub(crate) fn take_for(&mut self, device: usize) -> Option<Evaluations> {
        let abc = self.abc.take()?;
        if device == self.device {
            return Some(abc);
        }
        self.lender.return_evaluations(abc);
        None
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Some(abc) = self.abc.take() {
            self.lender.return_evaluations(abc);
        }
    }
}

/// The timeline lanes of the read-ahead threads start here (`READ_AHEAD_LANE + r` in
/// [`Span::worker`]): their spans are witnesses computed ahead of the workers.
pub const READ_AHEAD_LANE: usize = 1 << 16;

/// The timeline lane of work done for jobs outside any of them (a circuit's load: its compile
/// and its key), in [`Span::worker`]; its spans have job 0.
pub const LOAD_LANE: usize = 1 << 17;

/// Runs a job's witness function, into `storage` if given; its error, or its panic, is the
/// job's error.
pub(crate) fn compute_witness(
    f: &WitnessFn,
    storage: Option<WitnessBuffer>,
) -> Result<Witness, JobError> {
    // The caller's code (a circuit's synthesis over untrusted inputs) must not take the
    // engine's thread down with it.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(storage)))
        .unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(format!("the witness function panicked: {what}"))
        })
        .map_err(JobError::Witness)
}

pub(crate) struct JobShared {
    pub(crate) id: JobId,
    pub(crate) key: String,
    pub(crate) priority: Priority,
    pub(crate) device: Option<usize>,
    /// Read when the job starts (a file is replaced by its contents, kept for a retry) and
    /// dropped when it ends: a finished job's handle, which a service may keep for its
    /// result, must not keep a witness of gigabytes alive.
    pub(crate) witness: Mutex<Option<WitnessSource>>,
    /// A witness file's read ahead of the workers (see [`crate::read_ahead`]).
    pub(crate) read_ahead: Mutex<ReadAhead>,
    /// Its evaluations made ahead of the workers, once its witness is in memory.
    pub(crate) map_ahead: Mutex<MapAhead>,
    /// Signals the end of a read-ahead or a map-ahead.
    pub(crate) read_done: Condvar,
    /// Times the job went back to the queue after running out of device memory.
    pub(crate) memory_retries: AtomicU32,
    pub(crate) seq: u64,
    pub(crate) submitted: Instant,
    pub(crate) cancel: AtomicBool,
    pub(crate) state: Mutex<JobState>,
    pub(crate) cond: Condvar,
}

impl JobShared {
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    pub(crate) fn finish(&self, r: Result<JobOutput, JobError>) {
        self.witness.lock().take();
        *self.read_ahead.lock() = ReadAhead::Done(None);
        // A map ahead still running holds host bytes for this job: back before it ends.
        drop(self.take_map_ahead());
        *self.state.lock() = JobState::Finished(r);
        self.cond.notify_all();
    }

    pub(crate) fn set_phase(&self, p: &'static str) {
        if let JobState::Running { phase, .. } = &mut *self.state.lock() {
            *phase = p;
        }
    }
}

/// What a job's handle needs of its engine: to take a cancelled job out of the queue.
pub(crate) trait Dequeue: Send + Sync {
    /// Removes a cancelled job from the queue and finishes it (if it was still queued).
    fn dequeue_cancelled(&self, job: &JobShared);
}

/// A submitted job: await it, poll it, or cancel it. Cheap to clone.
#[derive(Clone)]
pub struct JobHandle {
    pub(crate) shared: Arc<JobShared>,
    pub(crate) engine: std::sync::Weak<dyn Dequeue>,
}

impl std::fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle")
            .field("id", &self.shared.id)
            .field("status", &self.status())
            .finish()
    }
}

impl JobHandle {
    pub fn id(&self) -> JobId {
        self.shared.id
    }

    pub fn priority(&self) -> Priority {
        self.shared.priority
    }

    pub fn status(&self) -> JobStatus {
        match &*self.shared.state.lock() {
            JobState::Queued => JobStatus::Queued,
            JobState::Running {
                device,
                worker,
                phase,
            } => JobStatus::Running {
                device: *device,
                worker: *worker,
                phase,
            },
            JobState::Finished(Ok(_)) => JobStatus::Done,
            JobState::Finished(Err(JobError::Cancelled)) => JobStatus::Cancelled,
            JobState::Finished(Err(e)) => JobStatus::Failed(e.clone()),
        }
    }

    /// The result, once finished (without waiting).
    pub fn poll(&self) -> Option<Result<JobOutput, JobError>> {
        match &*self.shared.state.lock() {
            JobState::Finished(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// Waits for the result (for ever with `None`); `None` back means the timeout passed.
    pub fn wait(&self, timeout: Option<Duration>) -> Option<Result<JobOutput, JobError>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.shared.state.lock();
        loop {
            if let JobState::Finished(r) = &*s {
                return Some(r.clone());
            }
            match deadline {
                None => self.shared.cond.wait(&mut s),
                Some(d) => {
                    if self.shared.cond.wait_until(&mut s, d).timed_out() {
                        return match &*s {
                            JobState::Finished(r) => Some(r.clone()),
                            _ => None,
                        };
                    }
                }
            }
        }
    }

    /// Cancels the job: a queued job ends at once, a running one at its next phase boundary
    /// (every byte it held is returned either way). False if it had already finished.
    pub fn cancel(&self) -> bool {
        if matches!(&*self.shared.state.lock(), JobState::Finished(_)) {
            return false;
        }
        self.shared.cancel.store(true, Ordering::Relaxed);
        if let Some(engine) = self.engine.upgrade() {
            engine.dequeue_cancelled(&self.shared);
        }
        true
    }
}
