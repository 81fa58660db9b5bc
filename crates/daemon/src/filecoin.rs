//! Filecoin proofs through the engine.
//!
//! A Filecoin proof is one engine job per partition. The first proof of a circuit (a proof
//! kind at a sector size, [`CircuitName`]) reads its parameters from the Filecoin parameter
//! directory through [`ParamStore`], compiles the circuit from its first partition and loads
//! the result as an engine key named `filecoin.{circuit}` (kept like every other key). That
//! load is the proof's first phase ("load"), on a thread of its own, so Submit answers at once;
//! proofs of the circuit submitted meanwhile wait for it in order (one load however many
//! race), and a failed load fails its own proof, the next waiting one trying again. Each
//! partition's job then computes its witness in the worker that runs it
//! ([`WitnessSource::Compute`]: witness-only synthesis of the kept circuit), so a queued
//! proof holds its vanilla proofs, not its witnesses, and synthesis runs in priority order.
//! The proof is the partitions' Groth16 proofs in filecoin-proofs' layout, in partition order.
//!
//! With `filecoin_generate_keys`, a circuit whose parameters file is absent gets a key made at
//! its load instead, from random toxic waste: on the engine's first GPU, whose backend holds
//! its points ([`KeySource::Held`]), else on the CPU; its verifying key is written where
//! filecoin-proofs' verifier reads it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cuzk_bellpepper::CompiledCircuit;
use cuzk_bellpepper::batch::CircuitProver;
use cuzk_filecoin::{
    C1Output, CircuitName, FilecoinError, ParamStore, PartitionedProof, PostKind, PostProof,
    PostStatement, PostVanilla, SealProof, SnapStatement, SnapVanilla, prover_id_from_miner,
};
use cuzk_formats::{BpParameters, BpVerifyingKey};
use cuzk_groth16::GpuBackend;
use cuzk_scheduler::{
    Engine, EngineError, JobError, JobHandle, JobOutput, JobSpec, JobStatus, KeySource, Priority,
    WitnessSource,
};
use parking_lot::{Condvar, Mutex};
use tonic::{Code, Status};

use crate::pb;

/// The gRPC status of a Filecoin error: bad input is INVALID_ARGUMENT and names the field;
/// missing or unusable parameter files are FAILED_PRECONDITION.
pub fn filecoin_status(e: &FilecoinError) -> Status {
    let m = e.to_string();
    match e {
        FilecoinError::MissingParameters { .. }
        | FilecoinError::MixedParameters { .. }
        | FilecoinError::Format(_)
        | FilecoinError::VerifierDir { .. } => Status::failed_precondition(m),
        FilecoinError::Io { .. }
        | FilecoinError::FilecoinProofs(_)
        | FilecoinError::Setup { .. } => Status::internal(m),
        _ => Status::invalid_argument(m),
    }
}

/// 32 bytes of `field`.
pub(crate) fn array32(bytes: &[u8], field: &str) -> Result<[u8; 32], Status> {
    bytes.try_into().map_err(|_| {
        Status::invalid_argument(format!("{field}: {} bytes, expected 32", bytes.len()))
    })
}

/// The proof a `cuzk.v1.Prover` Submit asks for (blocking: parses the inputs).
pub fn parse_request(f: &pb::FilecoinProof) -> Result<PartitionedProof, Status> {
    let fc = |e: FilecoinError| filecoin_status(&e);
    let named = |what: &str| -> Result<&str, Status> {
        if f.registered_proof.is_empty() {
            return Err(Status::invalid_argument(format!(
                "filecoin.registered_proof: empty (the {what} proof's name)"
            )));
        }
        Ok(&f.registered_proof)
    };
    let field =
        |e: FilecoinError| Status::invalid_argument(format!("filecoin.registered_proof: {e}"));
    match pb::FilecoinKind::try_from(f.kind) {
        Ok(pb::FilecoinKind::PorepC2) => {
            let stated = if f.registered_proof.is_empty() {
                None
            } else {
                Some(f.registered_proof.parse::<SealProof>().map_err(field)?)
            };
            if f.c1_output.is_empty() {
                return Err(Status::invalid_argument("filecoin.c1_output: empty"));
            }
            let c1 = C1Output::parse("filecoin.c1_output", &f.c1_output, stated).map_err(fc)?;
            PartitionedProof::porep(c1).map_err(fc)
        }
        Ok(kind @ (pb::FilecoinKind::WindowPost | pb::FilecoinKind::WinningPost)) => {
            let proof: PostProof = named("PoSt")?.parse().map_err(field)?;
            let want = if kind == pb::FilecoinKind::WinningPost {
                PostKind::Winning
            } else {
                PostKind::Window
            };
            if proof.kind != want {
                return Err(Status::invalid_argument(format!(
                    "filecoin.registered_proof: {proof} is not a {want:?}PoSt proof"
                )));
            }
            let st = PostStatement {
                randomness: array32(&f.randomness, "filecoin.randomness")?,
                prover_id: prover_id_from_miner(f.miner_id),
            };
            let file = "filecoin.vanilla_proofs";
            let vanilla = PostVanilla::parse(file, &f.vanilla_proofs, proof).map_err(fc)?;
            match want {
                PostKind::Winning => PartitionedProof::winning_post(file, vanilla, st),
                PostKind::Window => {
                    PartitionedProof::window_post(file, vanilla, st, f.partition as usize)
                }
            }
            .map_err(fc)
        }
        Ok(pb::FilecoinKind::SnapDeals) => {
            let sector: SealProof = named("sector's seal")?.parse().map_err(field)?;
            let st = SnapStatement {
                comm_r_old: array32(&f.comm_r_old, "filecoin.comm_r_old")?,
                comm_r_new: array32(&f.comm_r_new, "filecoin.comm_r_new")?,
                comm_d_new: array32(&f.comm_d_new, "filecoin.comm_d_new")?,
            };
            let file = "filecoin.vanilla_proofs";
            let vanilla = SnapVanilla::parse(file, &f.vanilla_proofs, sector).map_err(fc)?;
            PartitionedProof::snap(file, vanilla, st).map_err(fc)
        }
        Ok(pb::FilecoinKind::Unspecified) | Err(_) => Err(unknown_kind(f.kind)),
    }
}

/// The error of a `filecoin.kind` that names no proof kind.
pub(crate) fn unknown_kind(kind: i32) -> Status {
    Status::invalid_argument(format!(
        "filecoin.kind: {kind} is no Filecoin proof kind (POREP_C2 1, WINDOW_POST 2, WINNING_POST 3, SNAP_DEALS 4)"
    ))
}

/// Where a circuit is.
#[derive(Default)]
enum Slot {
    #[default]
    Empty,
    /// Its parameters read ahead of the first proof (PreloadSRS); `bytes`: their file's size.
    Params {
        params: Box<BpParameters>,
        bytes: u64,
    },
    /// Its parameters being read or its circuit compiled; these proofs wait for it, in order.
    Loading { waiting: Vec<Pending> },
    /// Compiled, its key in the engine.
    Loaded {
        compiled: Arc<CompiledCircuit>,
        bytes: u64,
    },
}

/// A circuit as [`Filecoin::circuits`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitInfo {
    pub name: CircuitName,
    /// True once compiled with its key in the engine; false while only its parameters are read.
    pub loaded: bool,
    /// The size of its parameter file.
    pub bytes: u64,
}

/// A proof's part in its circuit's load: its "load" phase, on the engine's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    pub start: f64,
    pub end: f64,
    /// True when this proof loaded the circuit; false when it waited for another's load.
    pub loaded: bool,
}

impl Load {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64((self.end - self.start).max(0.0))
    }
}

/// Why a Filecoin proof failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// It never reached the engine: its circuit's load failed (the file named), or queueing.
    #[error("{message}")]
    Start { code: Code, message: String },
    /// A partition's job failed (or was cancelled).
    #[error("partition {partition}: {error}")]
    Partition { partition: usize, error: JobError },
}

impl ProofError {
    pub fn status(&self) -> Status {
        let code = match self {
            ProofError::Start { code, .. } => *code,
            ProofError::Partition { error, .. } => crate::status::job_status(error).code(),
        };
        Status::new(code, self.to_string())
    }

    pub fn cancelled(&self) -> bool {
        matches!(
            self,
            ProofError::Partition {
                error: JobError::Cancelled,
                ..
            }
        )
    }
}

/// Where a proof is.
enum Stage {
    /// Waiting for another proof's load of its circuit.
    Waiting,
    /// Loading its circuit.
    Loading,
    /// Its partitions' jobs, in partition order.
    Queued(Vec<JobHandle>),
    /// It never reached the engine.
    Failed(ProofError),
}

struct QueuedInner {
    circuit: CircuitName,
    first_partition: usize,
    count: usize,
    stage: Mutex<Stage>,
    changed: Condvar,
    load: Mutex<Option<Load>>,
    /// Cancelled before its partitions were queued.
    cancelled: AtomicBool,
}

/// A submitted Filecoin proof: its circuit's load when it is the first of it, then one engine
/// job per partition. Cheap to clone.
#[derive(Clone)]
pub struct Queued {
    inner: Arc<QueuedInner>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued")
            .field("circuit", &self.inner.circuit)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// A finished Filecoin proof.
#[derive(Debug, Clone)]
pub struct Finished {
    /// 192 bytes per partition, in partition order.
    pub proof: Vec<u8>,
    /// Submit until the first partition started.
    pub queue_wait: Duration,
    /// Its part in its circuit's load, if the circuit was not loaded when it came.
    pub load: Option<Load>,
    /// Witness synthesis, summed over the partitions.
    pub synthesis: Duration,
    /// Device phases (the GPU lock held), summed over the partitions.
    pub device: Duration,
    /// Each partition's engine result.
    pub partitions: Vec<JobOutput>,
}

impl Queued {
    fn new(circuit: CircuitName, partitions: std::ops::Range<usize>, stage: Stage) -> Self {
        Self {
            inner: Arc::new(QueuedInner {
                circuit,
                first_partition: partitions.start,
                count: partitions.len(),
                stage: Mutex::new(stage),
                changed: Condvar::new(),
                load: Mutex::new(None),
                cancelled: AtomicBool::new(false),
            }),
        }
    }

    pub fn circuit(&self) -> CircuitName {
        self.inner.circuit
    }

    /// The number of `partitions()[0]`.
    pub fn first_partition(&self) -> usize {
        self.inner.first_partition
    }

    /// How many partitions it has.
    pub fn partition_count(&self) -> usize {
        self.inner.count
    }

    /// Its partitions' jobs, in order; empty until its circuit is loaded.
    pub fn partitions(&self) -> Vec<JobHandle> {
        match &*self.inner.stage.lock() {
            Stage::Queued(p) => p.clone(),
            _ => Vec::new(),
        }
    }

    /// Its part in its circuit's load, once over (`None` when the circuit was loaded).
    pub fn load(&self) -> Option<Load> {
        *self.inner.load.lock()
    }

    fn set(&self, stage: Stage) {
        *self.inner.stage.lock() = stage;
        self.inner.changed.notify_all();
    }

    /// Waits for every partition, in order; the first failure cancels the rest.
    pub fn wait(&self) -> Result<Finished, ProofError> {
        let partitions = {
            let mut st = self.inner.stage.lock();
            loop {
                match &*st {
                    Stage::Waiting | Stage::Loading => self.inner.changed.wait(&mut st),
                    Stage::Queued(p) => break p.clone(),
                    Stage::Failed(e) => return Err(e.clone()),
                }
            }
        };
        let mut out = Finished {
            proof: Vec::with_capacity(partitions.len() * cuzk_filecoin::PARTITION_PROOF_BYTES),
            queue_wait: Duration::ZERO,
            load: self.load(),
            synthesis: Duration::ZERO,
            device: Duration::ZERO,
            partitions: Vec::with_capacity(partitions.len()),
        };
        for (k, h) in partitions.iter().enumerate() {
            let r = h
                .wait(None)
                .unwrap_or(Err(JobError::Shutdown))
                .map_err(|error| ProofError::Partition {
                    partition: self.inner.first_partition + k,
                    error,
                });
            let done = match r {
                Ok(done) => done,
                Err(e) => {
                    for later in &partitions[k + 1..] {
                        later.cancel();
                    }
                    return Err(e);
                }
            };
            if k == 0 {
                out.queue_wait = done.timings.queue_wait;
            }
            out.synthesis += done.timings.phase("synthesize");
            out.device += done.timings.lock_hold;
            out.proof
                .extend_from_slice(&cuzk_formats::bellperson::proof_to_bytes(&done.proof));
            out.partitions.push(done);
        }
        Ok(out)
    }

    /// Cancels every partition not finished (a proof still loading or waiting for its circuit
    /// is not queued); true if there was one.
    pub fn cancel(&self) -> bool {
        let partitions = {
            let st = self.inner.stage.lock();
            match &*st {
                Stage::Waiting | Stage::Loading => {
                    // Read under the stage lock by whoever queues it.
                    self.inner.cancelled.store(true, Ordering::SeqCst);
                    return true;
                }
                Stage::Failed(_) => return false,
                Stage::Queued(p) => p.clone(),
            }
        };
        let mut any = false;
        for h in &partitions {
            any |= h.cancel();
        }
        any
    }

    /// True while it loads its circuit or one of its partitions runs.
    pub fn is_running(&self) -> bool {
        match &*self.inner.stage.lock() {
            Stage::Loading => true,
            Stage::Queued(p) => p
                .iter()
                .any(|h| matches!(h.status(), JobStatus::Running { .. })),
            Stage::Waiting | Stage::Failed(_) => false,
        }
    }

    /// True while it waits for its circuit or loads it.
    pub fn before_engine(&self) -> bool {
        matches!(&*self.inner.stage.lock(), Stage::Waiting | Stage::Loading)
    }

    /// What the proof is doing: loading its circuit ("load" on no device: device and worker
    /// 0), else its first unfinished partition's status (done once all are).
    pub fn status(&self) -> JobStatus {
        let partitions = match &*self.inner.stage.lock() {
            Stage::Waiting => return JobStatus::Queued,
            Stage::Loading => {
                return JobStatus::Running {
                    device: 0,
                    worker: 0,
                    phase: "load",
                };
            }
            Stage::Failed(e) if e.cancelled() => return JobStatus::Cancelled,
            Stage::Failed(e) => {
                return JobStatus::Failed(JobError::Failed {
                    phase: "load",
                    message: e.to_string(),
                });
            }
            Stage::Queued(p) => p.clone(),
        };
        partitions
            .iter()
            .map(JobHandle::status)
            .find(|s| !matches!(s, JobStatus::Done))
            .unwrap_or(JobStatus::Done)
    }
}

/// A proof waiting for its circuit.
struct Pending {
    proof: Arc<PartitionedProof>,
    priority: Priority,
    queued: Queued,
    /// When it was submitted, on the engine's clock.
    since: f64,
}

/// The daemon's Filecoin circuits.
pub struct Filecoin {
    params: ParamStore,
    /// Make the keys whose parameters file is absent (see the module's note).
    generate_keys: bool,
    /// One slot per circuit, each locked only to read or change it (never during a load).
    circuits: Mutex<HashMap<CircuitName, Arc<Mutex<Slot>>>>,
}

impl std::fmt::Debug for Filecoin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filecoin")
            .field("params", &self.params.dir())
            .finish_non_exhaustive()
    }
}

/// A loading slot's waiting proofs, the slot left empty (its one loader owns it: only that
/// loader takes them).
fn take_waiting(s: &mut Slot) -> Vec<Pending> {
    match std::mem::take(s) {
        Slot::Loading { waiting } => waiting,
        other => {
            *s = other;
            Vec::new()
        }
    }
}

fn start_error(e: &FilecoinError) -> ProofError {
    let s = filecoin_status(e);
    ProofError::Start {
        code: s.code(),
        message: format!("load: {}", s.message()),
    }
}

impl Filecoin {
    /// With `generate_keys`, the parameter directory is claimed as one of generated
    /// parameters now: a directory of published ones is an error.
    pub fn new(params: ParamStore, generate_keys: bool) -> std::io::Result<Self> {
        if generate_keys {
            params
                .claim_generated()
                .map_err(|e| std::io::Error::other(format!("filecoin_generate_keys: {e}")))?;
        }
        Ok(Self {
            params,
            generate_keys,
            circuits: Mutex::new(HashMap::new()),
        })
    }

    /// Whether this circuit's key is made at its load: keys are generated here and it has no
    /// parameters file.
    fn makes_key(&self, cache_id: &str) -> bool {
        self.generate_keys && !self.params.params_path(cache_id).is_file()
    }

    pub fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The engine key of a circuit.
    pub fn key_id(name: CircuitName) -> String {
        format!("filecoin.{name}")
    }

    fn slot(&self, name: CircuitName) -> Arc<Mutex<Slot>> {
        self.circuits.lock().entry(name).or_default().clone()
    }

    fn file_bytes(&self, cache_id: &str) -> u64 {
        std::fs::metadata(self.params.params_path(cache_id)).map_or(0, |m| m.len())
    }

    /// Reads a circuit's parameters ahead of its first proof (blocking). Returns true when
    /// they were read, or the circuit loaded or loading, before. A key made at load has
    /// nothing to read: its first proof makes it.
    pub fn preload(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
        name: CircuitName,
    ) -> Result<bool, Status> {
        let id = name.cache_id().map_err(|e| filecoin_status(&e))?;
        if self.makes_key(&id) {
            tracing::info!(circuit = %name, "no parameters to preload: the key is made at the first proof");
            return Ok(false);
        }
        let slot = self.slot(name);
        {
            let mut s = slot.lock();
            if !matches!(&*s, Slot::Empty) {
                return Ok(true);
            }
            *s = Slot::Loading {
                waiting: Vec::new(),
            };
        }
        let read = self
            .params
            .load_params(&id)
            .map(|params| (params, self.file_bytes(&id)));
        let mut s = slot.lock();
        let mut waiting = take_waiting(&mut s);
        let (params, result) = match read {
            Ok((params, bytes)) if waiting.is_empty() => {
                *s = Slot::Params {
                    params: Box::new(params),
                    bytes,
                };
                return Ok(false);
            }
            Ok((params, bytes)) => (Some((params, bytes)), Ok(false)),
            Err(e) if waiting.is_empty() => return Err(filecoin_status(&e)),
            // The proofs that came meanwhile try the load themselves.
            Err(e) => (None, Err(filecoin_status(&e))),
        };
        let next = waiting.remove(0);
        *s = Slot::Loading { waiting };
        drop(s);
        self.spawn_loader(engine, name, next, params);
        result
    }

    /// Drops a circuit: its parameters, its compiled circuit and its engine key (queued jobs
    /// of it fail, running ones finish first). Returns its parameter file's size if it was
    /// there (blocking). A circuit loading now is not dropped.
    pub fn evict(&self, engine: &Engine, name: CircuitName) -> Result<Option<u64>, Status> {
        let slot = self.slot(name);
        let mut s = slot.lock();
        let bytes = match std::mem::take(&mut *s) {
            Slot::Empty => return Ok(None),
            loading @ Slot::Loading { .. } => {
                *s = loading;
                return Err(Status::failed_precondition(format!(
                    "circuit {name} is loading now; evict it once loaded"
                )));
            }
            Slot::Params { bytes, .. } => bytes,
            Slot::Loaded { bytes, .. } => {
                match engine.unload_key(&Self::key_id(name)) {
                    // Unloaded through UnloadKey already.
                    Ok(()) | Err(EngineError::UnknownKey(_)) => {}
                    Err(e) => return Err(Status::internal(e.to_string())),
                }
                bytes
            }
        };
        Ok(Some(bytes))
    }

    /// The circuits read or loaded.
    pub fn circuits(&self) -> Vec<CircuitInfo> {
        let slots: Vec<_> = self
            .circuits
            .lock()
            .iter()
            .map(|(n, s)| (*n, s.clone()))
            .collect();
        let mut out: Vec<CircuitInfo> = slots
            .into_iter()
            .filter_map(|(name, s)| {
                let (loaded, bytes) = match &*s.lock() {
                    Slot::Empty | Slot::Loading { .. } => return None,
                    Slot::Params { bytes, .. } => (false, *bytes),
                    Slot::Loaded { bytes, .. } => (true, *bytes),
                };
                Some(CircuitInfo {
                    name,
                    loaded,
                    bytes,
                })
            })
            .collect();
        out.sort_by_key(|c| c.name.to_string());
        out
    }

    /// Submits `proof`: its partitions are queued now when its circuit is loaded; else after
    /// the load, which this proof starts or waits for. Never blocks on a load.
    pub fn submit(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
        proof: PartitionedProof,
        priority: Priority,
    ) -> Queued {
        let name = proof.circuit();
        let queued = Queued::new(name, proof.partitions(), Stage::Waiting);
        let pending = Pending {
            proof: Arc::new(proof),
            priority,
            queued: queued.clone(),
            since: engine.now(),
        };
        let slot = self.slot(name);
        let mut s = slot.lock();
        let params = match std::mem::take(&mut *s) {
            // A key unloaded through UnloadKey loads again.
            Slot::Loaded { compiled, bytes } if engine.circuit(&Self::key_id(name)).is_some() => {
                queue(engine, &pending, &compiled, None, None);
                *s = Slot::Loaded { compiled, bytes };
                return queued;
            }
            Slot::Loading { mut waiting } => {
                waiting.push(pending);
                *s = Slot::Loading { waiting };
                return queued;
            }
            Slot::Params { params, bytes } => Some((*params, bytes)),
            Slot::Empty | Slot::Loaded { .. } => None,
        };
        *s = Slot::Loading {
            waiting: Vec::new(),
        };
        drop(s);
        self.spawn_loader(engine, name, pending, params);
        queued
    }

    /// Loads `name` for `first` on a thread of its own, then queues it and the proofs that
    /// waited; a failed load fails `first` and hands the load to the next one waiting.
    fn spawn_loader(
        self: &Arc<Self>,
        engine: &Arc<Engine>,
        name: CircuitName,
        first: Pending,
        params: Option<(BpParameters, u64)>,
    ) {
        let (me, eng) = (self.clone(), engine.clone());
        let done = first.queued.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("load {name}"))
            .spawn(move || me.load_loop(&eng, name, first, params));
        if let Err(e) = spawned {
            // Nothing loads: this proof and those waiting fail, the slot is free again.
            let error = ProofError::Start {
                code: Code::ResourceExhausted,
                message: format!("load: cannot start a thread to load circuit {name}: {e}"),
            };
            done.set(Stage::Failed(error.clone()));
            let slot = self.slot(name);
            for w in take_waiting(&mut slot.lock()) {
                w.queued.set(Stage::Failed(error.clone()));
            }
        }
    }

    fn load_loop(
        &self,
        engine: &Arc<Engine>,
        name: CircuitName,
        mut next: Pending,
        mut params: Option<(BpParameters, u64)>,
    ) {
        let slot = self.slot(name);
        loop {
            let start = engine.now();
            let result = {
                let mut st = next.queued.inner.stage.lock();
                if next.queued.inner.cancelled.load(Ordering::SeqCst) {
                    None
                } else {
                    *st = Stage::Loading;
                    drop(st);
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.load(engine, name, &next.proof, &mut params)
                    }))
                    .unwrap_or_else(|_| {
                        Err(ProofError::Start {
                            code: Code::Internal,
                            message: format!("load: loading circuit {name} panicked"),
                        })
                    });
                    Some(r)
                }
            };
            let end = engine.now();
            let mut s = slot.lock();
            let mut waiting = take_waiting(&mut s);
            match result {
                Some(Ok((compiled, witness, bytes))) => {
                    tracing::info!(circuit = %name, secs = end - start, "Filecoin circuit loaded");
                    let load = Load {
                        start: next.since,
                        end,
                        loaded: true,
                    };
                    queue(engine, &next, &compiled, Some(witness), Some(load));
                    // In the order they came: their partitions queue before any proof that
                    // comes after the slot is Loaded.
                    for w in &waiting {
                        let load = Load {
                            start: w.since,
                            end,
                            loaded: false,
                        };
                        queue(engine, w, &compiled, None, Some(load));
                    }
                    *s = Slot::Loaded { compiled, bytes };
                    return;
                }
                Some(Err(e)) => {
                    tracing::warn!(circuit = %name, error = %e, "Filecoin circuit failed to load");
                    *next.queued.inner.load.lock() = Some(Load {
                        start: next.since,
                        end,
                        loaded: true,
                    });
                    next.queued.set(Stage::Failed(e));
                }
                None => next.queued.set(Stage::Failed(ProofError::Partition {
                    partition: next.queued.inner.first_partition,
                    error: JobError::Cancelled,
                })),
            }
            if waiting.is_empty() {
                // A failed load leaves preloaded parameters for the next proof.
                if let Some((params, bytes)) = params.take() {
                    *s = Slot::Params {
                        params: Box::new(params),
                        bytes,
                    };
                }
                return;
            }
            next = waiting.remove(0);
            *s = Slot::Loading { waiting };
        }
    }

    /// Compiles the circuit from `proof`'s first partition and loads its key into the engine
    /// (blocking): its parameters (`params` when preloaded, else read first, so a missing file
    /// fails before a long compile) mapped onto the circuit, or a key made for it. `params`
    /// is taken only once the compile succeeded: a proof that cannot be synthesized leaves
    /// them for the next.
    #[allow(clippy::type_complexity)]
    fn load(
        &self,
        engine: &Engine,
        name: CircuitName,
        proof: &PartitionedProof,
        params: &mut Option<(BpParameters, u64)>,
    ) -> Result<(Arc<CompiledCircuit>, cuzk_groth16::Witness, u64), ProofError> {
        let id = proof.cache_id();
        // Each step on the timeline's load lane (device 0: a key is made on the first GPU).
        let t = engine.now();
        if params.is_none() && !self.makes_key(id) {
            let read = self.params.load_params(id).map_err(|e| start_error(&e))?;
            *params = Some((read, self.file_bytes(id)));
            engine.record_load(0, "read parameters", t);
        }
        let t = engine.now();
        let (compiled, witness) = proof.compile().map_err(|e| start_error(&e))?;
        engine.record_load(0, "compile", t);
        let t = engine.now();
        let (compiled, source, bytes) = match params.take() {
            Some((read, bytes)) => {
                let params_name = self.params.params_path(id).display().to_string();
                let (compiled, pk) = CircuitProver::new(compiled, read, &params_name)
                    .map_err(|e| start_error(&e.into()))?
                    .into_parts();
                let source = KeySource::Memory {
                    pk: Arc::new(pk),
                    r1cs: compiled.shared_r1cs(),
                };
                (compiled, source, bytes)
            }
            None => {
                let source = self.make_key(engine, name, &compiled)?;
                (compiled, source, 0)
            }
        };
        engine.record_load(0, "key", t);
        engine
            .load_key(&Self::key_id(name), source, None)
            .map_err(|e| ProofError::Start {
                code: Code::ResourceExhausted,
                message: format!("load: circuit {name}: {e}"),
            })?;
        Ok((Arc::new(compiled), witness, bytes))
    }

    /// A key for `compiled` from random toxic waste, made on the engine's first GPU and held by
    /// the backend that made it, else on the CPU; its verifying key is written where
    /// filecoin-proofs' verifier reads it.
    fn make_key(
        &self,
        engine: &Engine,
        name: CircuitName,
        compiled: &CompiledCircuit,
    ) -> Result<KeySource, ProofError> {
        let setup = |e: &dyn std::fmt::Display| {
            start_error(&FilecoinError::Setup {
                circuit: name.to_string(),
                reason: e.to_string(),
            })
        };
        let tw = cuzk_groth16::ToxicWaste::random(&mut rand::rngs::OsRng);
        let start = Instant::now();
        let r1cs = compiled.shared_r1cs();
        let (source, vk, on) = match engine.gpu(0) {
            Some(gpu) => {
                let (backend, pk, _) =
                    GpuBackend::generate_key(&gpu, &r1cs, &tw).map_err(|e| setup(&e))?;
                let vk = BpVerifyingKey::from_parts(&pk.vk, pk.beta_g1, pk.delta_g1);
                let source = KeySource::Held {
                    pk: Arc::new(pk),
                    r1cs,
                    backend: Arc::new(backend),
                    device: 0,
                };
                (source, vk, "GPU 0, held there")
            }
            None => {
                let (pk, _) = cuzk_groth16::generate_parameters_with_toxic_waste(&r1cs, &tw)
                    .map_err(|e| setup(&e))?;
                let vk = BpVerifyingKey::from_proving_key(&pk);
                let source = KeySource::Memory {
                    pk: Arc::new(pk),
                    r1cs,
                };
                (source, vk, "CPU")
            }
        };
        let id = name.cache_id().map_err(|e| start_error(&e))?;
        self.params
            .write_generated_vk(&id, name.sector.sector_size(), &vk)
            .map_err(|e| start_error(&e))?;
        tracing::info!(
            circuit = %name,
            on,
            secs = start.elapsed().as_secs_f64(),
            "Filecoin key made from random toxic waste; its verifying key written"
        );
        Ok(source)
    }
}

/// Queues every partition of a pending proof (its first partition's witness given when the
/// load's compiling synthesis made it), unless it was cancelled meanwhile.
fn queue(
    engine: &Engine,
    p: &Pending,
    compiled: &Arc<CompiledCircuit>,
    mut first: Option<cuzk_groth16::Witness>,
    load: Option<Load>,
) {
    let q = &p.queued;
    *q.inner.load.lock() = load;
    let mut st = q.inner.stage.lock();
    let first_partition = q.inner.first_partition;
    if q.inner.cancelled.load(Ordering::SeqCst) {
        *st = Stage::Failed(ProofError::Partition {
            partition: first_partition,
            error: JobError::Cancelled,
        });
        q.inner.changed.notify_all();
        return;
    }
    let key = Filecoin::key_id(q.inner.circuit);
    let mut partitions = Vec::new();
    for k in p.proof.partitions() {
        let witness = match first.take() {
            Some(w) => WitnessSource::Memory(Arc::new(w)),
            None => {
                let (proof, compiled) = (p.proof.clone(), compiled.clone());
                WitnessSource::Compute(Arc::new(move |reuse| {
                    proof
                        .witness(k, &compiled, reuse)
                        .map_err(|e| e.to_string())
                }))
            }
        };
        match engine.submit(JobSpec::new(key.clone(), witness).priority(p.priority)) {
            Ok(h) => partitions.push(h),
            Err(e) => {
                for h in &partitions {
                    h.cancel();
                }
                let s = crate::status::job_status(&e);
                *st = Stage::Failed(ProofError::Start {
                    code: s.code(),
                    message: format!("queueing partition {k}: {}", s.message()),
                });
                q.inner.changed.notify_all();
                return;
            }
        }
    }
    *st = Stage::Queued(partitions);
    q.inner.changed.notify_all();
}
