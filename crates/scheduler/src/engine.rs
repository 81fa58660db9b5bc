//! The engine: devices with their workers, keys, the job queue, and the run of one job as
//! phases (see the crate docs for the memory argument).

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cuzk_formats::FormatError;
use cuzk_gpu::Gpu;
use cuzk_groth16::{BackendChoice, BackendError, R1cs};
use cuzk_vram::{Budget, FakeBackend, Vram};
use parking_lot::{Condvar, Mutex};

use crate::config::{EngineConfig, Workers};
use crate::gate::{Gate, GateError};
use crate::job::{
    Dequeue, JobError, JobHandle, JobId, JobOutput, JobShared, JobSpec, JobState, LOAD_LANE,
    MapAhead, Priority, ReadAhead, Span, SpanKind, WitnessSource,
};
use crate::keys::{KeySource, KeyTable, Loaded};
use crate::queue::Queue;
use crate::read_ahead::ReadRoom;

/// Device bytes kept for per-device tables that live as long as the process once made (the
/// NTT's twiddle tables, ~36 MiB).
pub(crate) const DEVICE_TABLES: u64 = 64 << 20;
/// How often each GPU's free memory is compared with its budget (memory another process
/// takes lowers the budget's limit; its return raises it).
const MEMORY_POLL: Duration = Duration::from_millis(100);
/// Runs of one job that may end out of device memory before it fails.
const MEMORY_RETRIES: u32 = 4;

/// Why the engine could not start, or load or unload a key.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no GPU: {0}")]
    Gpu(#[from] cuzk_gpu::GpuError),
    #[error("device memory: {0}")]
    Vram(#[from] cuzk_vram::VramError),
    #[error("key {0:?} is already loaded")]
    KeyExists(String),
    #[error("unknown key {0:?}")]
    UnknownKey(String),
    /// A key, circuit or witness file (the error names it).
    #[error(transparent)]
    File(FormatError),
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("key {key:?} does not match its circuit: {reason}")]
    Mismatch { key: String, reason: String },
    #[error("device {device}: {source}")]
    Backend {
        device: usize,
        #[source]
        source: BackendError,
    },
    #[error(
        "device {device} ({name}) cannot hold one proof of key {key:?}: it needs {need} bytes of staging room beside the key, and the budget leaves {room}"
    )]
    NoRoom {
        device: usize,
        name: String,
        key: String,
        need: u64,
        room: u64,
    },
    #[error("host memory: {0}")]
    Host(#[from] GateError),
    #[error("the engine is shutting down")]
    Shutdown,
    #[error("cannot start a worker thread: {0}")]
    Spawn(std::io::Error),
}

enum DeviceKind {
    Gpu(Gpu),
    Cpu,
}

/// What one worker is doing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerStatus {
    pub job: Option<JobId>,
    pub phase: &'static str,
}

pub(crate) struct Device {
    index: usize,
    name: String,
    kind: DeviceKind,
    vram: Vram,
    /// The GPU lock: held around device phases only.
    lock: Gate,
    /// Device bytes for staged witnesses and evaluations (the budget less resident keys, the
    /// largest device phase's allocations and the tables).
    staging: Gate,
    workers: Mutex<Vec<WorkerStatus>>,
    /// Workers that take jobs: all of them, or under [`Workers::Auto`] what the staging room
    /// admits for the loaded keys (`refresh_staging`).
    admitted: AtomicUsize,
    /// Seconds the GPU lock was held.
    busy: Mutex<f64>,
    /// Workers between taking a job and its witness's upload, and until their witness map has
    /// its evaluation set (none is needed when the job's were made ahead). Evaluations are not
    /// made ahead meanwhile: their memory traffic would slow the upload's copies (0.2 s to
    /// 0.8 s at 2^27; run 121), and a set the backend keeps idle is that worker's to take
    /// (run 134: the map-ahead took it, and the worker pinned a third).
    starting_jobs: AtomicUsize,
}

/// A worker's job being started (see [`Device::job_start`]); its drop wakes the read-ahead
/// threads that waited for it.
pub(crate) struct JobStart<'a> {
    device: &'a Device,
    queue: &'a Queue,
}

impl Drop for JobStart<'_> {
    fn drop(&mut self) {
        self.device.starting_jobs.fetch_sub(1, Ordering::SeqCst);
        self.queue.notify();
    }
}

impl Device {
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The device's memory: a GPU's, or a CPU device's simulated one.
    pub(crate) fn vram(&self) -> &Vram {
        &self.vram
    }

    /// `None` for a CPU device.
    pub(crate) fn gpu(&self) -> Option<&Gpu> {
        match &self.kind {
            DeviceKind::Gpu(gpu) => Some(gpu),
            DeviceKind::Cpu => None,
        }
    }

    /// The GPU lock: held around device phases only.
    pub(crate) fn lock(&self) -> &Gate {
        &self.lock
    }

    /// Whether a worker of the device is starting a job (see [`Self::job_start`]).
    pub(crate) fn starting_job(&self) -> bool {
        self.starting_jobs.load(Ordering::SeqCst) > 0
    }

    /// Marks a job taken by a worker as starting until the guard drops: after its witness's
    /// upload, and after its witness map took its evaluation set.
    pub(crate) fn job_start<'a>(&'a self, queue: &'a Queue) -> JobStart<'a> {
        self.starting_jobs.fetch_add(1, Ordering::SeqCst);
        JobStart {
            device: self,
            queue,
        }
    }

    /// The staging room's gate (device bytes for staged witnesses and evaluations).
    pub(crate) fn staging(&self) -> &Gate {
        &self.staging
    }

    /// Counts `seconds` more of the GPU lock held.
    pub(crate) fn add_busy(&self, seconds: f64) {
        *self.busy.lock() += seconds;
    }

    /// Shows `phase` as worker `w`'s.
    pub(crate) fn set_phase(&self, w: usize, phase: &'static str) {
        self.workers.lock()[w].phase = phase;
    }
}

/// One device as [`Engine::status`] reports it.
#[derive(Debug, Clone)]
pub struct DeviceStatus {
    pub index: usize,
    pub name: String,
    pub gpu: bool,
    /// Free and total memory now (GPUs only).
    pub mem_free: Option<u64>,
    pub mem_total: Option<u64>,
    pub budget_total: u64,
    /// The budget's limit now: below the total while another process holds device memory.
    pub budget_limit: u64,
    pub budget_in_use: u64,
    /// Bytes of `budget_in_use` that caches hold idle and give back on demand.
    pub budget_cached: u64,
    pub budget_peak: u64,
    /// The most device memory the engine could not explain since the start (another
    /// process's, or allocations outside the budget), sampled by its memory watch; GPUs only.
    pub unexplained_peak: Option<u64>,
    /// Times the budget's limit was lowered for such memory.
    pub limit_lowered: u64,
    /// Device memory the driver holds for us outside the budget, explained: our kernels
    /// (module images, the local memory of their stack frames) and the page tables of the
    /// pinned host memory. See [`cuzk_vram::Vram::driver_bytes`].
    pub driver_bytes: u64,
    pub staging_capacity: u64,
    pub staging_in_use: u64,
    pub pinned_in_use: u64,
    /// The workers that take jobs (and any still finishing one after the room shrank).
    pub workers: Vec<WorkerStatus>,
    /// Keys loaded here, with their resident device bytes.
    pub keys: Vec<(String, u64)>,
    pub busy_seconds: f64,
}

/// A snapshot of the whole engine.
#[derive(Debug, Clone)]
pub struct EngineStatus {
    pub devices: Vec<DeviceStatus>,
    /// Queued jobs per priority, highest first.
    pub queued: [(Priority, usize); 3],
    pub running: usize,
    pub host_capacity: u64,
    pub host_in_use: u64,
    pub counters: Counters,
    pub uptime: Duration,
}

/// Totals since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub self_check_failed: u64,
}

/// Jobs finished, by outcome.
#[derive(Default)]
struct Stats {
    completed: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    self_check_failed: AtomicU64,
}

impl Stats {
    fn count(&self, r: &Result<JobOutput, JobError>) {
        let counter = match r {
            Ok(_) => &self.completed,
            Err(JobError::Cancelled) => &self.cancelled,
            Err(JobError::SelfCheck(_)) => {
                self.self_check_failed.fetch_add(1, Ordering::Relaxed);
                &self.failed
            }
            Err(_) => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn counters(&self) -> Counters {
        Counters {
            completed: self.completed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            self_check_failed: self.self_check_failed.load(Ordering::Relaxed),
        }
    }
}

/// The engine's clock and the spans of its last jobs.
struct Timeline {
    start: Instant,
    spans: Mutex<VecDeque<Span>>,
    /// The most spans kept ([`EngineConfig::timeline_spans`]).
    keep: usize,
}

impl Timeline {
    fn new(keep: usize) -> Self {
        Self {
            start: Instant::now(),
            spans: Mutex::new(VecDeque::new()),
            keep: keep.max(1),
        }
    }

    /// Seconds since the engine started (the clock of [`Span`]s).
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn record(&self, span: Span) {
        let mut t = self.spans.lock();
        if t.len() >= self.keep {
            t.pop_front();
        }
        t.push_back(span);
    }

    /// The kept spans that `which` accepts, oldest first.
    fn spans(&self, which: impl Fn(&Span) -> bool) -> Vec<Span> {
        self.spans
            .lock()
            .iter()
            .filter(|s| which(s))
            .copied()
            .collect()
    }
}

/// How far the engine is in stopping.
#[derive(Default)]
struct Stopping {
    /// No new jobs; workers drain the queue, then exit.
    closing: AtomicBool,
    /// Running jobs stop at their next phase boundary.
    hard: AtomicBool,
}

/// The engine's state, shared by its workers and handles. Each concern is a type of its own
/// whose fields only it touches: the key table ([`KeyTable`]), the queue ([`Queue`]), the
/// host budget and its read-ahead room, the devices, the timeline, the counters.
pub(crate) struct Inner {
    config: EngineConfig,
    devices: Vec<Device>,
    host: Gate,
    read_room: ReadRoom,
    keys: KeyTable,
    queue: Queue,
    timeline: Timeline,
    stats: Stats,
    stopping: Stopping,
}

/// The proving engine (crate docs). Dropping it cancels what is left and joins the workers.
pub struct Engine {
    inner: Arc<Inner>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("devices", &self.inner.devices.len())
            .field("workers", &self.workers.len())
            .finish()
    }
}

impl Engine {
    /// Opens the devices the configuration names and starts their workers.
    pub fn new(config: EngineConfig) -> Result<Self, EngineError> {
        let gpus = match config.backend {
            BackendChoice::Cpu => Vec::new(),
            BackendChoice::Gpu => open_gpus(&config)?,
            BackendChoice::Auto => open_gpus(&config).unwrap_or_else(|e| {
                tracing::info!(reason = %e, "no GPU; the engine proves on the CPU");
                Vec::new()
            }),
        };
        let split = config.split.max(1);
        let mut devices = Vec::new();
        if gpus.is_empty() {
            let share = config.cpu_device_memory / split as u64;
            let pinned = Budget::new("host", config.host_budget(0) / 2);
            for i in 0..split {
                let vram = Vram::with_budgets(
                    Arc::new(FakeBackend::new(share)),
                    Budget::new("device", share),
                    pinned.clone(),
                );
                let name = if split > 1 {
                    format!("cpu.{i}")
                } else {
                    "cpu".into()
                };
                devices.push((name, DeviceKind::Cpu, vram));
            }
        } else {
            for g in gpus {
                let parts = if split > 1 { g.split(split) } else { vec![g] };
                let n = parts.len();
                for (i, p) in parts.into_iter().enumerate() {
                    let info = p.info();
                    let name = if n > 1 {
                        format!("gpu {}.{i} ({})", info.ordinal, info.name)
                    } else {
                        format!("gpu {} ({})", info.ordinal, info.name)
                    };
                    let vram = p.vram().clone();
                    devices.push((name, DeviceKind::Gpu(p), vram));
                }
            }
        }
        Self::start(config, devices)
    }

    /// An engine on the CPU whose devices use the given memories (each a simulated device:
    /// tests inject allocation failures through a [`FakeBackend`] they keep).
    pub fn on_cpu(config: EngineConfig, memories: Vec<Vram>) -> Result<Self, EngineError> {
        let devices = memories
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("cpu.{i}"), DeviceKind::Cpu, v))
            .collect();
        Self::start(config, devices)
    }

    fn start(
        config: EngineConfig,
        devices: Vec<(String, DeviceKind, Vram)>,
    ) -> Result<Self, EngineError> {
        let workers = config.workers_per_device.threads();
        let admitted = match config.workers_per_device {
            Workers::Auto => 1,
            Workers::Fixed(_) => workers,
        };
        let devices: Vec<Device> = devices
            .into_iter()
            .enumerate()
            .map(|(index, (name, kind, vram))| Device {
                index,
                name,
                kind,
                vram,
                lock: Gate::new("GPU lock", 1),
                staging: Gate::new("staging room", 0),
                workers: Mutex::new(vec![WorkerStatus::default(); workers]),
                admitted: AtomicUsize::new(admitted),
                busy: Mutex::new(0.0),
                starting_jobs: AtomicUsize::new(0),
            })
            .collect();
        // GPU backends pin host memory from the devices' one pinned budget: the gate plans the
        // rest, so that the two never promise the same bytes (the CPU backends pin nothing).
        let pinned = devices
            .iter()
            .find(|d| matches!(d.kind, DeviceKind::Gpu(_)))
            .map_or(0, |d| d.vram.host_budget().total());
        let inner = Arc::new(Inner {
            host: Gate::new("host memory", config.host_budget(pinned)),
            read_room: ReadRoom::default(),
            timeline: Timeline::new(config.timeline_spans),
            config,
            devices,
            keys: KeyTable::default(),
            queue: Queue::default(),
            stats: Stats::default(),
            stopping: Stopping::default(),
        });
        let mut handles = Vec::new();
        for d in 0..inner.devices.len() {
            for w in 0..workers {
                let inner = inner.clone();
                let h = std::thread::Builder::new()
                    .name(format!("cuzk-worker-{d}.{w}"))
                    .spawn(move || inner.worker_loop(d, w))
                    .map_err(EngineError::Spawn)?;
                handles.push(h);
            }
        }
        for r in 0..inner.config.read_ahead {
            let inner = inner.clone();
            let h = std::thread::Builder::new()
                .name(format!("cuzk-read-ahead-{r}"))
                .spawn(move || inner.read_ahead_loop(r))
                .map_err(EngineError::Spawn)?;
            handles.push(h);
        }
        if inner
            .devices
            .iter()
            .any(|d| d.vram.mem_at_start().is_some())
        {
            let inner = inner.clone();
            let h = std::thread::Builder::new()
                .name("cuzk-memory-watch".into())
                .spawn(move || {
                    while !inner.closing_hard() {
                        for d in &inner.devices {
                            inner.watch_memory(d);
                        }
                        std::thread::sleep(MEMORY_POLL);
                    }
                })
                .map_err(EngineError::Spawn)?;
            handles.push(h);
        }
        for d in &inner.devices {
            tracing::info!(
                device = %d.name,
                budget = d.vram.budget().total(),
                pinned = d.vram.host_budget().total(),
                host = inner.host.capacity(),
                workers,
                "engine device"
            );
        }
        Ok(Self {
            inner,
            workers: handles,
        })
    }

    /// The devices, by engine index: (name, is a GPU).
    pub fn devices(&self) -> Vec<(String, bool)> {
        self.inner
            .devices
            .iter()
            .map(|d| (d.name.clone(), matches!(d.kind, DeviceKind::Gpu(_))))
            .collect()
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Device `index`'s GPU handle, whose memory budget this engine admits jobs against: a
    /// key made on it ([`cuzk_groth16::GpuBackend::generate_key`]) loads as
    /// [`KeySource::Held`]. `None` for a CPU device or no such index.
    pub fn gpu(&self, index: usize) -> Option<Gpu> {
        match &self.inner.devices.get(index)?.kind {
            DeviceKind::Gpu(gpu) => Some(gpu.clone()),
            DeviceKind::Cpu => None,
        }
    }

    /// Loads a key once, on the given devices (all when `None`), and names it `id`. Each device
    /// makes as much of it resident as leaves room for the staged data of its workers' proofs.
    pub fn load_key(
        &self,
        id: &str,
        source: KeySource,
        devices: Option<&[usize]>,
    ) -> Result<(), EngineError> {
        self.inner.load_key(id, source, devices)
    }

    /// Unloads a key: its queued jobs fail, running ones finish first; its memory is returned.
    pub fn unload_key(&self, id: &str) -> Result<(), EngineError> {
        self.inner.unload_key(id)
    }

    /// The loaded keys: (id, constraints, devices it is loaded on).
    pub fn keys(&self) -> Vec<(String, usize, Vec<usize>)> {
        self.inner.keys.list()
    }

    /// The public inputs a key's proofs are verified against (its verifying key).
    pub fn verifying_key(&self, id: &str) -> Option<cuzk_groth16::VerifyingKey> {
        self.inner.keys.get(id).map(|k| k.pk.key().vk().clone())
    }

    /// A loaded key's circuit (a service checks a witness's size against it before reading it).
    pub fn circuit(&self, id: &str) -> Option<Arc<R1cs>> {
        self.inner.keys.get(id).map(|k| k.r1cs.clone())
    }

    /// Queues a job. Fails at once for an unknown key or a device that cannot run it.
    pub fn submit(&self, spec: JobSpec) -> Result<JobHandle, JobError> {
        self.inner.submit(&self.inner, spec)
    }

    pub fn status(&self) -> EngineStatus {
        self.inner.status()
    }

    /// The spans of the last jobs (bounded by [`EngineConfig::timeline_spans`]), oldest first.
    pub fn timeline(&self) -> Vec<Span> {
        self.inner.timeline.spans(|_| true)
    }

    /// Seconds since the engine started (the clock of [`Span`]s).
    pub fn now(&self) -> f64 {
        self.inner.now()
    }

    /// Puts CPU work done for jobs outside any of them (a circuit's load), from `start` until
    /// now, on device `device`'s load lane ([`LOAD_LANE`]) of the timeline.
    pub fn record_load(&self, device: usize, phase: &'static str, start: f64) {
        self.inner.record(Span {
            job: 0,
            device,
            worker: LOAD_LANE,
            phase,
            kind: SpanKind::Cpu,
            start,
            end: self.inner.now(),
        });
    }

    /// Stops taking jobs, lets running and queued jobs finish for up to `drain`, then cancels
    /// the rest and joins the workers. Every device and host byte the jobs held is returned.
    pub fn shutdown(mut self, drain: Duration) {
        self.stop(drain);
    }

    /// [`Engine::shutdown`] without joining the workers, for an engine shared behind an `Arc`
    /// (a service's handlers hold it): stops taking jobs, lets them finish for up to `drain`,
    /// then cancels the rest and waits until none runs. The workers exit; dropping the engine
    /// joins them.
    pub fn stop_jobs(&self, drain: Duration) {
        self.close(drain);
        let inner = &self.inner;
        while inner.queue.running() > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub(crate) fn stop(&mut self, drain: Duration) {
        self.close(drain);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }

    pub(crate) fn close(&self, drain: Duration) {
        let inner = &self.inner;
        inner.stopping.closing.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + drain;
        while Instant::now() < deadline && (inner.queue.running() > 0 || !inner.queue.is_empty()) {
            std::thread::sleep(Duration::from_millis(10));
        }
        for j in inner.queue.remove_all(|_| true) {
            j.cancel.store(true, Ordering::SeqCst);
            inner.finish(&j, Err(JobError::Shutdown));
        }
        inner.stopping.hard.store(true, Ordering::SeqCst);
        inner.queue.notify();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.stop(Duration::ZERO);
        }
    }
}

pub(crate) fn open_gpus(config: &EngineConfig) -> Result<Vec<Gpu>, EngineError> {
    if !cuzk_gpu::driver_present() {
        return Err(cuzk_gpu::GpuError::NoDriver.into());
    }
    if !cuzk_gpu::kernels_built() {
        return Err(cuzk_gpu::GpuError::KernelsNotBuilt.into());
    }
    let ordinals = match &config.gpus {
        Some(list) => list.clone(),
        None => (0..cuzk_gpu::device_count()?).collect(),
    };
    if ordinals.is_empty() {
        return Err(cuzk_gpu::GpuError::NoDevice.into());
    }
    ordinals
        .into_iter()
        .map(|o| {
            let g = Gpu::open(o, &config.vram)?;
            // A device opened earlier in this process keeps its first budget: apply the cap.
            Ok(match config.vram.vram_limit {
                Some(cap) if cap < g.vram().budget().total() => g.logical(cap),
                _ => g,
            })
        })
        .collect()
}

impl Dequeue for Inner {
    fn dequeue_cancelled(&self, job: &JobShared) {
        if let Some(j) = self.queue.remove(job) {
            self.finish(&j, Err(JobError::Cancelled));
        }
    }
}

impl Inner {
    pub(crate) fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub(crate) fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The host-memory gate: keys, jobs' witnesses and evaluations, read-aheads.
    pub(crate) fn host(&self) -> &Gate {
        &self.host
    }

    pub(crate) fn read_room(&self) -> &ReadRoom {
        &self.read_room
    }

    pub(crate) fn keys(&self) -> &KeyTable {
        &self.keys
    }

    pub(crate) fn queue(&self) -> &Queue {
        &self.queue
    }

    /// No new jobs are taken (the workers drain the queue).
    pub(crate) fn closing(&self) -> bool {
        self.stopping.closing.load(Ordering::SeqCst)
    }

    /// The kept spans of job `id`.
    pub(crate) fn spans_of(&self, id: JobId) -> Vec<Span> {
        self.timeline.spans(|s| s.job == id)
    }

    /// The device's staging capacity with the loaded keys (and `extra`, being loaded), under
    /// the budget's limit now.
    pub(crate) fn staging_room(&self, dev: &Device, extra: Option<&Loaded>) -> u64 {
        self.staging_room_under(dev, extra, dev.vram.budget().limit())
    }

    pub(crate) fn staging_room_under(
        &self,
        dev: &Device,
        extra: Option<&Loaded>,
        budget: u64,
    ) -> u64 {
        let loaded = self.keys.loaded_on(dev.index);
        let extra = extra.map(|l| (l.resident, l.needs));
        let (mut resident, mut lock) = (0u64, 0u64);
        for (r, needs) in loaded.iter().map(|(_, r, n)| (*r, *n)).chain(extra) {
            resident += r;
            lock = lock.max(needs.lock);
        }
        let tables = match dev.kind {
            DeviceKind::Gpu(_) => DEVICE_TABLES,
            DeviceKind::Cpu => 0,
        };
        budget.saturating_sub(resident + lock + tables)
    }

    /// Follows the device's free memory: see [`Vram::refresh_limit`].
    pub(crate) fn watch_memory(&self, dev: &Device) {
        match dev.vram.refresh_limit() {
            Ok(None) => {}
            Ok(Some(c)) => {
                self.refresh_staging(dev);
                let budget = dev.vram.budget();
                if c.after < c.before && budget.in_use() > c.after {
                    // Idle caches go back to the driver, where the other process may need them.
                    budget.reclaim_all();
                }
                if c.after < c.before {
                    tracing::warn!(device = %dev.name, taken_by_others = c.taken_by_others, limit = c.after, total = dev.vram.budget().total(), "device memory taken by another process: budget lowered, jobs wait for room");
                } else {
                    tracing::info!(device = %dev.name, limit = c.after, "device memory back: budget raised");
                }
            }
            Err(e) => {
                tracing::warn!(device = %dev.name, error = %e, "cannot read the device's free memory")
            }
        }
    }

    pub(crate) fn refresh_staging(&self, dev: &Device) {
        let ceiling = self.staging_room_under(dev, None, dev.vram.budget().total());
        let room = self.staging_room(dev, None);
        dev.staging.set_capacity(room, ceiling);
        if self.config.workers_per_device == Workers::Auto {
            let two = self
                .keys
                .loaded_on(dev.index)
                .iter()
                .all(|(_, _, needs)| room >= needs.staged());
            let n = if two { Workers::AUTO_MAX } else { 1 };
            if dev.admitted.swap(n, Ordering::SeqCst) != n {
                tracing::info!(device = %dev.name, workers = n, staging_room = room, "workers admitted");
                self.queue.notify();
            }
        }
    }

    pub(crate) fn submit(&self, me: &Arc<Inner>, spec: JobSpec) -> Result<JobHandle, JobError> {
        if self.closing() {
            return Err(JobError::Shutdown);
        }
        {
            let key = self
                .keys
                .get(&spec.key)
                .ok_or_else(|| JobError::UnknownKey(spec.key.clone()))?;
            match spec.device {
                Some(d) if key.on.get(d).is_none_or(Option::is_none) => {
                    return Err(JobError::NoDevice(format!(
                        "key {:?} is not loaded on device {d}",
                        spec.key
                    )));
                }
                None if key.on.iter().all(Option::is_none) => {
                    return Err(JobError::NoDevice(format!(
                        "key {:?} is loaded on no device",
                        spec.key
                    )));
                }
                _ => {}
            }
            if let WitnessSource::Memory(w) = &spec.witness {
                key.r1cs
                    .check_witness(w)
                    .map_err(|e| JobError::Witness(e.to_string()))?;
            }
        }
        let id = self.queue.next_id();
        let shared = Arc::new(JobShared {
            id,
            seq: id,
            submitted: Instant::now(),
            cancel: AtomicBool::new(false),
            state: Mutex::new(JobState::Queued),
            cond: Condvar::new(),
            key: spec.key,
            priority: spec.priority,
            device: spec.device,
            witness: Mutex::new(Some(spec.witness)),
            read_ahead: Mutex::new(ReadAhead::NotStarted),
            map_ahead: Mutex::new(MapAhead::NotStarted),
            read_done: Condvar::new(),
            memory_retries: AtomicU32::new(0),
        });
        self.queue.push(shared.clone());
        Ok(JobHandle {
            shared,
            engine: Arc::downgrade(me) as std::sync::Weak<dyn Dequeue>,
        })
    }

    pub(crate) fn finish(&self, job: &JobShared, r: Result<JobOutput, JobError>) {
        self.stats.count(&r);
        job.finish(r);
    }

    /// The next job device `d` can run, best priority first, marked as starting while the
    /// queue is still locked (so no read-ahead sees it taken but not starting); `None` once
    /// closing.
    pub(crate) fn next_job(&self, d: usize, w: usize) -> Option<(Arc<JobShared>, JobStart<'_>)> {
        self.queue.wait(|jobs| {
            if self.closing() && jobs.is_empty() {
                return ControlFlow::Break(None);
            }
            if w >= self.devices[d].admitted.load(Ordering::SeqCst) {
                return ControlFlow::Continue(());
            }
            let eligible =
                |j: &JobShared| j.device.is_none_or(|x| x == d) && self.keys.is_loaded(&j.key, d);
            match jobs.take_first(eligible) {
                Some(j) => {
                    *j.state.lock() = JobState::Running {
                        device: d,
                        worker: w,
                        phase: "starting",
                    };
                    self.queue.started();
                    ControlFlow::Break(Some((j, self.devices[d].job_start(&self.queue))))
                }
                None => ControlFlow::Continue(()),
            }
        })
    }

    pub(crate) fn worker_loop(self: Arc<Self>, d: usize, w: usize) {
        while let Some((job, start)) = self.next_job(d, w) {
            self.devices[d].workers.lock()[w] = WorkerStatus {
                job: Some(job.id),
                phase: "starting",
            };
            let r = self.run_job(d, w, &job, start);
            if let Err(e @ JobError::OutOfDeviceMemory { .. }) = &r
                && !job.cancelled()
                && !self.closing_hard()
                && job.memory_retries.fetch_add(1, Ordering::SeqCst) < MEMORY_RETRIES
            {
                tracing::warn!(job = job.id, error = %e, "job ran out of device memory; queued again");
                self.watch_memory(&self.devices[d]);
                self.devices[d].workers.lock()[w] = WorkerStatus::default();
                *job.state.lock() = JobState::Queued;
                self.queue.push(job.clone());
                self.queue.stopped();
                continue;
            }
            if let Err(e) = &r {
                match e {
                    JobError::Cancelled | JobError::Shutdown => {
                        tracing::info!(job = job.id, "job cancelled")
                    }
                    e => tracing::warn!(job = job.id, error = %e, "job failed"),
                }
            }
            self.devices[d].workers.lock()[w] = WorkerStatus::default();
            self.queue.stopped();
            self.finish(&job, r);
        }
    }

    pub(crate) fn record(&self, span: Span) {
        self.timeline.record(span);
    }

    pub(crate) fn now(&self) -> f64 {
        self.timeline.now()
    }

    pub(crate) fn status(&self) -> EngineStatus {
        let devices = self
            .devices
            .iter()
            .map(|d| {
                let mem = match &d.kind {
                    DeviceKind::Gpu(g) => g.mem_info().ok(),
                    DeviceKind::Cpu => None,
                };
                let budget = d.vram.budget();
                let mut dk: Vec<(String, u64)> = (self.keys.loaded_on(d.index).into_iter())
                    .map(|(id, resident, _)| (id, resident))
                    .collect();
                dk.sort();
                DeviceStatus {
                    index: d.index,
                    name: d.name.clone(),
                    gpu: matches!(d.kind, DeviceKind::Gpu(_)),
                    mem_free: mem.map(|m| m.free),
                    mem_total: mem.map(|m| m.total),
                    budget_total: budget.total(),
                    budget_limit: budget.limit(),
                    budget_in_use: budget.in_use(),
                    budget_cached: budget.reclaimable(),
                    budget_peak: budget.peak(),
                    unexplained_peak: d.vram.mem_at_start().map(|_| d.vram.unexplained().0),
                    limit_lowered: d.vram.unexplained().1,
                    driver_bytes: d.vram.driver_bytes(),
                    staging_capacity: d.staging.capacity(),
                    staging_in_use: d.staging.in_use(),
                    pinned_in_use: d.vram.host_budget().in_use(),
                    workers: {
                        let admitted = d.admitted.load(Ordering::SeqCst);
                        let all = d.workers.lock();
                        all.iter()
                            .enumerate()
                            .filter(|(w, s)| *w < admitted || s.job.is_some())
                            .map(|(_, s)| s.clone())
                            .collect()
                    },
                    keys: dk,
                    busy_seconds: *d.busy.lock(),
                }
            })
            .collect();
        EngineStatus {
            devices,
            queued: self.queue.counts(),
            running: self.queue.running() as usize,
            host_capacity: self.host.capacity(),
            host_in_use: self.host.in_use(),
            counters: self.stats.counters(),
            uptime: self.timeline.start.elapsed(),
        }
    }

    /// Running jobs stop at their next boundary once the engine stops for good.
    pub(crate) fn closing_hard(&self) -> bool {
        self.stopping.hard.load(Ordering::SeqCst)
    }
}
