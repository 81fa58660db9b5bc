//! The engine: devices with their workers, keys, the job queue, and the run of one job as
//! phases (see the crate docs for the memory argument).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cuzk_gpu::Gpu;
use cuzk_groth16::{
    BackendChoice, BackendError, Domain, GpuBackend, MsmValue, PreparedVerifyingKey, ProverBackend,
    ProvingKey, R1cs, SimBackend, StagingNeeds, Witness, WitnessMsms, io, witness_msm_order,
};
use cuzk_vram::{Budget, FakeBackend, Reservation, Vram, VramError};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::config::EngineConfig;
use crate::gate::{Gate, GateError, Permit};
use crate::job::{
    JobError, JobHandle, JobId, JobOutput, JobShared, JobSpec, JobState, JobTimings, Priority,
    Span, SpanKind, WitnessSource,
};

/// Device bytes kept for per-device tables that live as long as the process once made (the
/// NTT's twiddle tables, ~36 MiB).
const DEVICE_TABLES: u64 = 64 << 20;
/// How long an admitted reservation may retry when the budget is short though no other
/// process holds memory (the limit is at the total), before the job fails.
const RESERVE_RETRY: Duration = Duration::from_secs(30);
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
    #[error("{what}: {source}")]
    File {
        what: String,
        #[source]
        source: io::FormatError,
    },
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

/// Where a key comes from.
#[derive(Debug, Clone)]
pub enum KeySource {
    Memory {
        pk: Arc<ProvingKey>,
        r1cs: Arc<R1cs>,
    },
    /// cuzk's proving-key and circuit files, the key's points checked as `checks` says.
    Files {
        pk: std::path::PathBuf,
        r1cs: std::path::PathBuf,
        checks: io::PointChecks,
    },
}

/// A key as loaded on one device.
struct Loaded {
    backend: Arc<dyn ProverBackend>,
    needs: StagingNeeds,
    resident: u64,
}

pub(crate) struct Key {
    id: String,
    pk: Arc<ProvingKey>,
    r1cs: Arc<R1cs>,
    pvk: PreparedVerifyingKey,
    domain: Domain,
    /// Indexed by device; `None` where the key is not loaded.
    on: Vec<Option<Loaded>>,
    _host: Permit,
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
    /// Seconds the GPU lock was held.
    busy: Mutex<f64>,
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
    pub staging_capacity: u64,
    pub staging_in_use: u64,
    pub pinned_in_use: u64,
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

#[derive(Default)]
struct Stats {
    completed: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    self_check_failed: AtomicU64,
}

pub(crate) struct Inner {
    config: EngineConfig,
    devices: Vec<Device>,
    host: Gate,
    keys: RwLock<HashMap<String, Arc<Key>>>,
    /// (priority rank, sequence) → job: the first eligible entry runs next.
    queue: Mutex<BTreeMap<(u8, u64), Arc<JobShared>>>,
    queue_cond: Condvar,
    running: AtomicU64,
    next_id: AtomicU64,
    start: Instant,
    timeline: Mutex<std::collections::VecDeque<Span>>,
    stats: Stats,
    /// No new jobs; workers drain the queue, then exit.
    closing: AtomicBool,
    /// Running jobs stop at their next phase boundary.
    hard_stop: AtomicBool,
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
            let pinned = Budget::new("host", config.host_budget() / 2);
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
        let workers = config.workers_per_device.max(1);
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
                busy: Mutex::new(0.0),
            })
            .collect();
        let inner = Arc::new(Inner {
            host: Gate::new("host memory", config.host_budget()),
            timeline: Mutex::new(std::collections::VecDeque::new()),
            config,
            devices,
            keys: RwLock::new(HashMap::new()),
            queue: Mutex::new(BTreeMap::new()),
            queue_cond: Condvar::new(),
            running: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            start: Instant::now(),
            stats: Stats::default(),
            closing: AtomicBool::new(false),
            hard_stop: AtomicBool::new(false),
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
            tracing::info!(device = %d.name, budget = d.vram.budget().total(), workers, "engine device");
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
        let mut v: Vec<_> = self
            .inner
            .keys
            .read()
            .values()
            .map(|k| {
                let on = (0..k.on.len()).filter(|&d| k.on[d].is_some()).collect();
                (k.id.clone(), k.r1cs.num_constraints(), on)
            })
            .collect();
        v.sort();
        v
    }

    /// The public inputs a key's proofs are verified against (its verifying key).
    pub fn verifying_key(&self, id: &str) -> Option<cuzk_groth16::VerifyingKey> {
        self.inner.keys.read().get(id).map(|k| k.pk.vk.clone())
    }

    /// A loaded key's circuit (a service checks a witness's size against it before reading it).
    pub fn circuit(&self, id: &str) -> Option<Arc<R1cs>> {
        self.inner.keys.read().get(id).map(|k| k.r1cs.clone())
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
        self.inner.timeline.lock().iter().copied().collect()
    }

    /// Seconds since the engine started (the clock of [`Span`]s).
    pub fn now(&self) -> f64 {
        self.inner.start.elapsed().as_secs_f64()
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
        while inner.running.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stop(&mut self, drain: Duration) {
        self.close(drain);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }

    fn close(&self, drain: Duration) {
        let inner = &self.inner;
        inner.closing.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + drain;
        while Instant::now() < deadline
            && (inner.running.load(Ordering::SeqCst) > 0 || !inner.queue.lock().is_empty())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let queued: Vec<_> = std::mem::take(&mut *inner.queue.lock())
            .into_values()
            .collect();
        for j in queued {
            j.cancel.store(true, Ordering::SeqCst);
            inner.finish(&j, Err(JobError::Shutdown));
        }
        inner.hard_stop.store(true, Ordering::SeqCst);
        inner.queue_cond.notify_all();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.stop(Duration::ZERO);
        }
    }
}

fn open_gpus(config: &EngineConfig) -> Result<Vec<Gpu>, EngineError> {
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

/// Host bytes of a key and its circuit in memory.
fn key_host_bytes(pk: &ProvingKey, r1cs: &R1cs) -> u64 {
    let g1 = std::mem::size_of::<cuzk_field::G1Affine>() as u64;
    let g2 = std::mem::size_of::<cuzk_field::G2Affine>() as u64;
    let points =
        (pk.a_query.len() + pk.b_g1_query.len() + pk.h_query.len() + pk.l_query.len()) as u64 * g1
            + pk.b_g2_query.len() as u64 * g2;
    let matrices: u64 = [r1cs.a(), r1cs.b(), r1cs.c()]
        .iter()
        .map(|m| m.nnz() as u64 * 36 + (m.num_rows() as u64 + 1) * 8)
        .sum();
    points + matrices
}

fn read<T>(
    path: &std::path::Path,
    f: impl FnOnce(std::io::BufReader<std::fs::File>) -> Result<T, io::FormatError>,
) -> Result<T, EngineError> {
    let file = std::fs::File::open(path).map_err(|source| EngineError::Open {
        path: path.display().to_string(),
        source,
    })?;
    f(std::io::BufReader::new(file)).map_err(|source| EngineError::File {
        what: path.display().to_string(),
        source,
    })
}

/// A backend's error as a job's: out of device memory when a driver call said so.
fn backend_failed(phase: &'static str, e: BackendError) -> JobError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        let oom = match c.downcast_ref::<VramError>() {
            Some(VramError::Backend { name, .. }) => name == OUT_OF_MEMORY,
            _ => c.to_string().contains(OUT_OF_MEMORY),
        };
        if oom {
            return JobError::OutOfDeviceMemory {
                phase,
                message: e.to_string(),
            };
        }
        cause = c.source();
    }
    failed(phase, e)
}

const OUT_OF_MEMORY: &str = "CUDA_ERROR_OUT_OF_MEMORY";

fn failed(phase: &'static str, e: impl std::fmt::Display) -> JobError {
    JobError::Failed {
        phase,
        message: e.to_string(),
    }
}

fn gate_err(e: GateError) -> JobError {
    match e {
        GateError::Cancelled(_) => JobError::Cancelled,
        e => JobError::NoDevice(e.to_string()),
    }
}

impl Inner {
    fn load_key(
        &self,
        id: &str,
        source: KeySource,
        devices: Option<&[usize]>,
    ) -> Result<(), EngineError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(EngineError::Shutdown);
        }
        if self.keys.read().contains_key(id) {
            return Err(EngineError::KeyExists(id.into()));
        }
        let (pk, r1cs) = match source {
            KeySource::Memory { pk, r1cs } => (pk, r1cs),
            KeySource::Files { pk, r1cs, checks } => {
                tracing::info!(key = id, path = %pk.display(), ?checks, "reading proving key");
                let p = read(&pk, |r| io::read_proving_key_with(r, checks))?;
                let c = read(&r1cs, io::read_r1cs)?;
                (Arc::new(p), Arc::new(c))
            }
        };
        let domain =
            Domain::for_size(r1cs.num_constraints()).map_err(|e| EngineError::Mismatch {
                key: id.into(),
                reason: e.to_string(),
            })?;
        let n = domain.size();
        let shape = [
            ("a_query", r1cs.num_variables(), pk.a_query.len()),
            ("b_g2_query", r1cs.num_variables(), pk.b_g2_query.len()),
            ("h_query", n - 1, pk.h_query.len()),
            ("l_query", r1cs.num_private(), pk.l_query.len()),
            ("ic", r1cs.num_public() + 1, pk.vk.ic.len()),
        ];
        if let Some((what, want, got)) = shape.into_iter().find(|(_, w, g)| w != g) {
            return Err(EngineError::Mismatch {
                key: id.into(),
                reason: format!("{what} has {got} entries, expected {want}"),
            });
        }
        let host = self
            .host
            .try_acquire(key_host_bytes(&pk, &r1cs))
            .map_err(EngineError::Host)?;
        let wanted: Vec<usize> = match devices {
            Some(list) => list.to_vec(),
            None => (0..self.devices.len()).collect(),
        };
        let mut on: Vec<Option<Loaded>> = (0..self.devices.len()).map(|_| None).collect();
        for d in wanted {
            let dev = self.devices.get(d).ok_or_else(|| EngineError::Backend {
                device: d,
                source: BackendError::new("engine", format!("no device {d}")),
            })?;
            on[d] = Some(self.load_on(dev, id, &pk, n)?);
        }
        let key = Arc::new(Key {
            id: id.into(),
            pvk: cuzk_groth16::prepare_verifying_key(&pk.vk),
            pk,
            r1cs,
            domain,
            on,
            _host: host,
        });
        let mut keys = self.keys.write();
        if keys.contains_key(id) {
            return Err(EngineError::KeyExists(id.into()));
        }
        keys.insert(id.into(), key);
        drop(keys);
        for d in &self.devices {
            self.refresh_staging(d);
        }
        self.queue_cond.notify_all();
        Ok(())
    }

    /// Loads `pk` on one device, holding its GPU lock so that no device phase runs meanwhile.
    fn load_on(
        &self,
        dev: &Device,
        id: &str,
        pk: &ProvingKey,
        n: usize,
    ) -> Result<Loaded, EngineError> {
        let never = || false;
        let _lock = dev.lock.acquire(1, Priority::High, &never)?;
        let backend_err = |source| EngineError::Backend {
            device: dev.index,
            source,
        };
        let workers = self.config.workers_per_device.max(1);
        let (backend, needs, resident): (Arc<dyn ProverBackend>, StagingNeeds, u64) =
            match &dev.kind {
                DeviceKind::Gpu(gpu) => {
                    let b = GpuBackend::new(gpu.clone());
                    b.set_evaluation_sets(workers);
                    let needs = b.staging_needs(pk, n).map_err(backend_err)?;
                    // Two workers overlap one proof's a, b, c with another's witness.
                    let target = if workers > 1 {
                        needs.witness + needs.evaluations
                    } else {
                        needs.witness.max(needs.evaluations)
                    };
                    let plan = b.load_staged(pk, n, target).map_err(backend_err)?;
                    tracing::info!(
                        key = id,
                        device = %dev.name,
                        resident = b.resident_bytes(),
                        lock = plan.lock_bytes(),
                        staging = target,
                        "key loaded"
                    );
                    let resident = b.resident_bytes();
                    (Arc::new(b), needs, resident)
                }
                DeviceKind::Cpu => {
                    let b = SimBackend::new(dev.vram.clone());
                    let needs = b.staging_needs(pk, n).map_err(backend_err)?;
                    (Arc::new(b), needs, 0)
                }
            };
        let loaded = Loaded {
            backend,
            needs,
            resident,
        };
        let room = self.staging_room(dev, Some(&loaded));
        let need = needs.witness.max(needs.evaluations);
        if room < need {
            return Err(EngineError::NoRoom {
                device: dev.index,
                name: dev.name.clone(),
                key: id.into(),
                need,
                room,
            });
        }
        Ok(loaded)
    }

    /// The device's staging capacity with the loaded keys (and `extra`, being loaded), under
    /// the budget's limit now.
    fn staging_room(&self, dev: &Device, extra: Option<&Loaded>) -> u64 {
        self.staging_room_under(dev, extra, dev.vram.budget().limit())
    }

    fn staging_room_under(&self, dev: &Device, extra: Option<&Loaded>, budget: u64) -> u64 {
        let keys = self.keys.read();
        let loaded = keys
            .values()
            .filter_map(|k| k.on[dev.index].as_ref())
            .chain(extra);
        let (mut resident, mut lock) = (0u64, 0u64);
        for l in loaded {
            resident += l.resident;
            lock = lock.max(l.needs.lock);
        }
        let tables = match dev.kind {
            DeviceKind::Gpu(_) => DEVICE_TABLES,
            DeviceKind::Cpu => 0,
        };
        budget.saturating_sub(resident + lock + tables)
    }

    /// Follows the device's free memory: see [`Vram::refresh_limit`].
    fn watch_memory(&self, dev: &Device) {
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

    fn refresh_staging(&self, dev: &Device) {
        let ceiling = self.staging_room_under(dev, None, dev.vram.budget().total());
        dev.staging
            .set_capacity(self.staging_room(dev, None), ceiling);
    }

    fn unload_key(&self, id: &str) -> Result<(), EngineError> {
        let key = self
            .keys
            .write()
            .remove(id)
            .ok_or_else(|| EngineError::UnknownKey(id.into()))?;
        let orphans: Vec<_> = {
            let mut q = self.queue.lock();
            let ids: Vec<_> = q
                .iter()
                .filter(|(_, j)| j.key == id)
                .map(|(k, _)| *k)
                .collect();
            ids.into_iter().filter_map(|k| q.remove(&k)).collect()
        };
        for j in orphans {
            self.finish(&j, Err(JobError::UnknownKey(format!("{id} (unloaded)"))));
        }
        // Running jobs hold the key; its memory returns when the last one ends.
        while Arc::strong_count(&key) > 1 {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(key);
        for d in &self.devices {
            self.refresh_staging(d);
        }
        Ok(())
    }

    fn submit(&self, me: &Arc<Inner>, spec: JobSpec) -> Result<JobHandle, JobError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(JobError::Shutdown);
        }
        {
            let keys = self.keys.read();
            let key = keys
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
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
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
            memory_retries: AtomicU32::new(0),
        });
        self.queue
            .lock()
            .insert((shared.priority.rank(), shared.seq), shared.clone());
        self.queue_cond.notify_all();
        Ok(JobHandle {
            shared,
            engine: Arc::downgrade(me),
        })
    }

    /// Removes a cancelled job from the queue and finishes it (if it was still queued).
    pub(crate) fn dequeue_cancelled(&self, job: &JobShared) {
        let removed = self.queue.lock().remove(&(job.priority.rank(), job.seq));
        if let Some(j) = removed {
            self.finish(&j, Err(JobError::Cancelled));
        }
    }

    fn finish(&self, job: &JobShared, r: Result<JobOutput, JobError>) {
        let counter = match &r {
            Ok(_) => &self.stats.completed,
            Err(JobError::Cancelled) => &self.stats.cancelled,
            Err(JobError::SelfCheck(_)) => {
                self.stats.self_check_failed.fetch_add(1, Ordering::Relaxed);
                &self.stats.failed
            }
            Err(_) => &self.stats.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        job.finish(r);
    }

    /// The next job device `d` can run, best priority first; `None` once closing.
    fn next_job(&self, d: usize, w: usize) -> Option<Arc<JobShared>> {
        let mut q = self.queue.lock();
        loop {
            if self.closing.load(Ordering::SeqCst) && q.is_empty() {
                return None;
            }
            let pick = {
                let keys = self.keys.read();
                q.iter()
                    .find(|(_, j)| {
                        j.device.is_none_or(|x| x == d)
                            && keys
                                .get(&j.key)
                                .is_some_and(|k| k.on.get(d).is_some_and(Option::is_some))
                    })
                    .map(|(k, _)| *k)
            };
            if let Some(k) = pick {
                let j = q.remove(&k)?;
                *j.state.lock() = JobState::Running {
                    device: d,
                    worker: w,
                    phase: "starting",
                };
                self.running.fetch_add(1, Ordering::SeqCst);
                return Some(j);
            }
            self.queue_cond.wait_for(&mut q, Duration::from_millis(100));
        }
    }

    fn worker_loop(self: Arc<Self>, d: usize, w: usize) {
        while let Some(job) = self.next_job(d, w) {
            self.devices[d].workers.lock()[w] = WorkerStatus {
                job: Some(job.id),
                phase: "starting",
            };
            let r = self.run_job(d, w, &job);
            if let Err(e @ JobError::OutOfDeviceMemory { .. }) = &r
                && !job.cancelled()
                && !self.closing_hard()
                && job.memory_retries.fetch_add(1, Ordering::SeqCst) < MEMORY_RETRIES
            {
                tracing::warn!(job = job.id, error = %e, "job ran out of device memory; queued again");
                self.watch_memory(&self.devices[d]);
                self.devices[d].workers.lock()[w] = WorkerStatus::default();
                *job.state.lock() = JobState::Queued;
                self.queue
                    .lock()
                    .insert((job.priority.rank(), job.seq), job.clone());
                self.running.fetch_sub(1, Ordering::SeqCst);
                self.queue_cond.notify_all();
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
            self.running.fetch_sub(1, Ordering::SeqCst);
            self.finish(&job, r);
        }
    }

    fn record(&self, span: Span) {
        let mut t = self.timeline.lock();
        if t.len() >= self.config.timeline_spans.max(1) {
            t.pop_front();
        }
        t.push_back(span);
    }

    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn status(&self) -> EngineStatus {
        let keys = self.keys.read();
        let devices = self
            .devices
            .iter()
            .map(|d| {
                let mem = match &d.kind {
                    DeviceKind::Gpu(g) => g.mem_info().ok(),
                    DeviceKind::Cpu => None,
                };
                let budget = d.vram.budget();
                let mut dk: Vec<(String, u64)> = keys
                    .values()
                    .filter_map(|k| k.on[d.index].as_ref().map(|l| (k.id.clone(), l.resident)))
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
                    staging_capacity: d.staging.capacity(),
                    staging_in_use: d.staging.in_use(),
                    pinned_in_use: d.vram.host_budget().in_use(),
                    workers: d.workers.lock().clone(),
                    keys: dk,
                    busy_seconds: *d.busy.lock(),
                }
            })
            .collect();
        let q = self.queue.lock();
        let queued = Priority::ALL.map(|p| (p, q.keys().filter(|(r, _)| *r == p.rank()).count()));
        EngineStatus {
            devices,
            queued,
            running: self.running.load(Ordering::SeqCst) as usize,
            host_capacity: self.host.capacity(),
            host_in_use: self.host.in_use(),
            counters: Counters {
                completed: self.stats.completed.load(Ordering::Relaxed),
                failed: self.stats.failed.load(Ordering::Relaxed),
                cancelled: self.stats.cancelled.load(Ordering::Relaxed),
                self_check_failed: self.stats.self_check_failed.load(Ordering::Relaxed),
            },
            uptime: self.start.elapsed(),
        }
    }

    /// Admitted device bytes: a staging permit, then the same bytes reserved from the budget
    /// (the permit guarantees they fit; a retry covers memory another process took).
    fn stage_room(
        &self,
        dev: &Device,
        bytes: u64,
        priority: Priority,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Permit, Reservation), JobError> {
        let permit = dev
            .staging
            .acquire(bytes, priority, cancelled)
            .map_err(gate_err)?;
        let budget = dev.vram.budget();
        let mut deadline = Instant::now() + RESERVE_RETRY;
        loop {
            match dev.vram.reserve(bytes) {
                Ok(r) => return Ok((permit, r)),
                Err(e) if Instant::now() >= deadline => return Err(failed("staging", e)),
                Err(e) => {
                    if budget.limit() < budget.total() {
                        // Another process holds memory: wait for it, however long.
                        deadline = Instant::now() + RESERVE_RETRY;
                    } else {
                        tracing::warn!(device = %dev.name, error = %e, "admitted staging room is short; retrying");
                    }
                    if cancelled() {
                        return Err(JobError::Cancelled);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    fn run_job(&self, d: usize, w: usize, job: &JobShared) -> Result<JobOutput, JobError> {
        let dev = &self.devices[d];
        let key = self
            .keys
            .read()
            .get(&job.key)
            .cloned()
            .ok_or_else(|| JobError::UnknownKey(job.key.clone()))?;
        let loaded = key.on[d]
            .as_ref()
            .ok_or_else(|| JobError::NoDevice(format!("key not loaded on device {d}")))?;
        let backend = &*loaded.backend;
        let priority = job.priority;
        let cancelled = || job.cancelled() || self.closing_hard();
        let check = || {
            if cancelled() {
                Err(JobError::Cancelled)
            } else {
                Ok(())
            }
        };
        let started = Instant::now();
        let mut t = JobTimings {
            queue_wait: started - job.submitted,
            ..JobTimings::default()
        };
        let rec = Recorder {
            inner: self,
            job,
            device: d,
            worker: w,
        };

        let host_bytes = loaded.needs.witness + loaded.needs.evaluations;
        let (host, wait) = rec.span("host memory", SpanKind::Wait, || {
            self.host.acquire(host_bytes, priority, &cancelled)
        });
        t.memory_wait += wait;
        let _host = host.map_err(gate_err)?;
        check()?;

        let source = job.witness.lock().clone();
        let witness: Arc<Witness> = match source {
            None => {
                return Err(failed(
                    "read witness",
                    "the job's witness was already dropped",
                ));
            }
            Some(WitnessSource::Memory(w)) => w,
            Some(WitnessSource::File(p)) => {
                let (r, _) = rec.span("read witness", SpanKind::Cpu, || {
                    read(&p, io::read_witness).map_err(|e| JobError::Witness(e.to_string()))
                });
                let w = Arc::new(r?);
                *job.witness.lock() = Some(WitnessSource::Memory(w.clone()));
                w
            }
        };
        let (checked, _) = rec.span("check", SpanKind::Cpu, || {
            cuzk_groth16::check_inputs(&key.pk, &key.r1cs, &witness)
        });
        checked.map_err(|e| JobError::Witness(e.to_string()))?;
        let z = witness.assignment();
        let n = key.domain.size();
        check()?;

        let (room, wait) = rec.span("wait staging", SpanKind::Wait, || {
            self.stage_room(dev, loaded.needs.witness, priority, &cancelled)
        });
        t.memory_wait += wait;
        let (z_permit, z_room) = room?;
        let (staged, _) = rec.span("upload z", SpanKind::Copy, || {
            backend.stage_witness(z, z_room)
        });
        let staged = staged.map_err(|e| backend_failed("upload z", e))?;
        check()?;

        // The witness map runs on its own thread while the witness MSMs hold the device.
        let (msms, abc) = std::thread::scope(|scope| {
            let map = scope.spawn(|| {
                let (r, _) = rec.aside("witness map", SpanKind::Cpu, || {
                    let mut abc = backend
                        .evaluation_buffers(n)
                        .map_err(|e| backend_failed("witness map", e))?;
                    cuzk_groth16::witness_map(&key.r1cs, z, &mut abc)
                        .map_err(|e| JobError::Witness(e.to_string()))?;
                    Ok::<_, JobError>(abc)
                });
                r
            });
            let msms = self.witness_msms(dev, &rec, &mut t, &key, backend, z, &staged, &cancelled);
            let abc = map.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            (msms, abc)
        });
        drop((staged, z_permit));
        let abc = abc?; // a witness error outranks a device error of the same proof
        let msms = msms?;
        check()?;

        let (room, wait) = rec.span("wait staging", SpanKind::Wait, || {
            self.stage_room(dev, loaded.needs.evaluations, priority, &cancelled)
        });
        t.memory_wait += wait;
        let (abc_permit, abc_room) = room?;
        let (staged, _) = rec.span("upload a,b,c", SpanKind::Copy, || {
            backend.stage_evaluations(abc, abc_room)
        });
        let staged = staged.map_err(|e| backend_failed("upload a,b,c", e))?;
        check()?;

        let lock = self.lock(dev, &rec, &mut t, priority, &cancelled)?;
        let t0 = self.now();
        let q = backend.staged_quotient_msm(&key.domain, staged, &key.pk.h_query);
        let t1 = self.now();
        self.unlock(dev, lock, &mut t, t1 - t0);
        drop(abc_permit);
        let q = q.map_err(|e| backend_failed("quotient", e))?;
        let split = (t0 + q.quotient.as_secs_f64()).min(t1);
        rec.push("quotient", SpanKind::Device, t0, split);
        rec.push("MSM H", SpanKind::Device, split, t1);
        check()?;

        let mut rng = rand::rngs::OsRng;
        let (r, s) = (
            cuzk_field::Fr::random(&mut rng),
            cuzk_field::Fr::random(&mut rng),
        );
        let (proof, _) = rec.span("assembly", SpanKind::Cpu, || {
            cuzk_groth16::assemble(&key.pk, r, s, &msms, q.h)
        });
        if self.config.self_check {
            let (v, _) = rec.span("verify", SpanKind::Cpu, || {
                cuzk_groth16::verify_proof(&key.pvk, &proof, witness.public_inputs())
            });
            if let Err(e) = v {
                tracing::error!(job = job.id, key = %key.id, device = d, error = %e, "proof failed its self-check");
                return Err(JobError::SelfCheck(e.to_string()));
            }
        }
        t.run = started.elapsed();
        t.spans = self
            .timeline
            .lock()
            .iter()
            .filter(|s| s.job == job.id)
            .copied()
            .collect();
        Ok(JobOutput {
            id: job.id,
            proof,
            public_inputs: witness.public_inputs().to_vec(),
            device: d,
            worker: w,
            timings: t,
        })
    }

    /// The four witness MSMs under the GPU lock, yielding it between them to a waiting job of
    /// higher priority.
    #[allow(clippy::too_many_arguments)]
    fn witness_msms(
        &self,
        dev: &Device,
        rec: &Recorder<'_>,
        t: &mut JobTimings,
        key: &Key,
        backend: &dyn ProverBackend,
        z: &[cuzk_field::Fr],
        staged: &cuzk_groth16::StagedWitness,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<WitnessMsms, JobError> {
        let priority = rec.job.priority;
        let mut out = WitnessMsms::default();
        let mut lock = self.lock(dev, rec, t, priority, cancelled)?;
        let mut held = self.now();
        for (query, offset) in witness_msm_order(key.r1cs.num_public()) {
            if cancelled() {
                self.unlock(dev, lock, t, self.now() - held);
                return Err(JobError::Cancelled);
            }
            if dev.lock.has_higher_waiter(priority) {
                self.unlock(dev, lock, t, self.now() - held);
                lock = self.lock(dev, rec, t, priority, cancelled)?;
                held = self.now();
            }
            let phase = match query {
                cuzk_groth16::Query::A => "MSM A",
                cuzk_groth16::Query::BG1 => "MSM B (G1)",
                cuzk_groth16::Query::BG2 => "MSM B (G2)",
                _ => "MSM L",
            };
            let start = Instant::now();
            let (r, _) = rec.span(phase, SpanKind::Device, || {
                backend.staged_msm(&key.pk, z, staged, query, offset)
            });
            let value: MsmValue = match r {
                Ok(v) => v,
                Err(e) => {
                    self.unlock(dev, lock, t, self.now() - held);
                    return Err(backend_failed(phase, e));
                }
            };
            out.set(query, value, start.elapsed())
                .map_err(|e| failed(phase, e))?;
        }
        self.unlock(dev, lock, t, self.now() - held);
        Ok(out)
    }

    fn lock(
        &self,
        dev: &Device,
        rec: &Recorder<'_>,
        t: &mut JobTimings,
        priority: Priority,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Permit, JobError> {
        let (r, wait) = rec.span("wait GPU", SpanKind::Wait, || {
            dev.lock.acquire(1, priority, cancelled)
        });
        t.lock_wait += wait;
        r.map_err(gate_err)
    }

    fn unlock(&self, dev: &Device, lock: Permit, t: &mut JobTimings, held: f64) {
        drop(lock);
        t.lock_hold += Duration::from_secs_f64(held.max(0.0));
        *dev.busy.lock() += held.max(0.0);
    }

    /// Running jobs stop at their next boundary once the engine stops for good.
    fn closing_hard(&self) -> bool {
        self.hard_stop.load(Ordering::SeqCst)
    }
}

/// Records a job's phases on the engine's timeline and in its status.
struct Recorder<'a> {
    inner: &'a Inner,
    job: &'a JobShared,
    device: usize,
    worker: usize,
}

impl Recorder<'_> {
    /// Runs `f` as the job's current phase (its status shows it), recording its span.
    fn span<T>(&self, phase: &'static str, kind: SpanKind, f: impl FnOnce() -> T) -> (T, Duration) {
        self.job.set_phase(phase);
        self.inner.devices[self.device].workers.lock()[self.worker].phase = phase;
        self.aside(phase, kind, f)
    }

    /// Runs `f` beside the job's current phase (on another thread), recording its span.
    fn aside<T>(
        &self,
        phase: &'static str,
        kind: SpanKind,
        f: impl FnOnce() -> T,
    ) -> (T, Duration) {
        let start = Instant::now();
        let t0 = self.inner.now();
        let out = f();
        let t1 = self.inner.now();
        self.push(phase, kind, t0, t1);
        tracing::debug!(job = self.job.id, phase, ms = (t1 - t0) * 1e3, "phase done");
        (out, start.elapsed())
    }

    fn push(&self, phase: &'static str, kind: SpanKind, start: f64, end: f64) {
        self.inner.record(Span {
            job: self.job.id,
            device: self.device,
            worker: self.worker,
            phase,
            kind,
            start,
            end,
        });
    }
}
