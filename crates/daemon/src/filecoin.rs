//! Filecoin proofs through the engine.
//!
//! A Filecoin proof is one engine job per partition. The first proof of a circuit (a proof
//! kind at a sector size, [`CircuitName`]) reads its parameters from the Filecoin parameter
//! directory through [`ParamStore`], compiles the circuit from its first partition and loads
//! the result as an engine key named `filecoin.{circuit}` (kept like every other key). Each
//! partition's job then computes its witness in the worker that runs it
//! ([`WitnessSource::Compute`]: witness-only synthesis of the kept circuit), so a queued
//! proof holds its vanilla proofs, not its witnesses, and synthesis runs in priority order.
//! The proof is the partitions' Groth16 proofs in filecoin-proofs' layout, in partition order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_bellpepper::CompiledCircuit;
use cuzk_filecoin::{
    C1Output, CircuitName, FilecoinError, ParamStore, PartitionedProof, PostKind, PostProof,
    PostStatement, PostVanilla, SealProof, SnapStatement, SnapVanilla, prover_id_from_miner,
};
use cuzk_formats::BpParameters;
use cuzk_scheduler::{
    Engine, EngineError, JobError, JobHandle, JobOutput, JobSpec, JobStatus, KeySource, Priority,
    WitnessSource,
};
use parking_lot::Mutex;
use tonic::Status;

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
        Ok(pb::FilecoinKind::Unspecified) | Err(_) => Err(Status::invalid_argument(format!(
            "filecoin.kind: {} is no Filecoin proof kind (POREP_C2 1, WINDOW_POST 2, WINNING_POST 3, SNAP_DEALS 4)",
            f.kind
        ))),
    }
}

/// Where a circuit is.
enum Slot {
    /// Its parameters read ahead of the first proof (PreloadSRS); `bytes`: their file's size.
    Params {
        params: Box<BpParameters>,
        bytes: u64,
    },
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

/// A Filecoin proof queued as engine jobs, one per partition, in partition order.
#[derive(Debug, Clone)]
pub struct Queued {
    pub circuit: CircuitName,
    /// The number of `partitions[0]`.
    pub first_partition: usize,
    pub partitions: Vec<JobHandle>,
    /// Time this submit spent reading parameters and compiling the circuit (zero when it was
    /// loaded before).
    pub load: Duration,
}

/// A finished Filecoin proof.
#[derive(Debug, Clone)]
pub struct Finished {
    /// 192 bytes per partition, in partition order.
    pub proof: Vec<u8>,
    /// Submit until the first partition started.
    pub queue_wait: Duration,
    /// Witness synthesis, summed over the partitions.
    pub synthesis: Duration,
    /// Device phases (the GPU lock held), summed over the partitions.
    pub device: Duration,
    /// Each partition's engine result.
    pub partitions: Vec<JobOutput>,
}

/// Why a Filecoin proof failed: the partition and its job's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("partition {partition}: {error}")]
pub struct PartitionError {
    pub partition: usize,
    pub error: JobError,
}

impl Queued {
    /// Waits for every partition, in order; the first failure cancels the rest.
    pub fn wait(&self) -> Result<Finished, PartitionError> {
        let mut out = Finished {
            proof: Vec::with_capacity(self.partitions.len() * cuzk_filecoin::PARTITION_PROOF_BYTES),
            queue_wait: Duration::ZERO,
            synthesis: Duration::ZERO,
            device: Duration::ZERO,
            partitions: Vec::with_capacity(self.partitions.len()),
        };
        for (k, h) in self.partitions.iter().enumerate() {
            let r = h
                .wait(None)
                .unwrap_or(Err(JobError::Shutdown))
                .map_err(|error| PartitionError {
                    partition: self.first_partition + k,
                    error,
                });
            let done = match r {
                Ok(done) => done,
                Err(e) => {
                    for later in &self.partitions[k + 1..] {
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

    /// Cancels every partition not finished; true if there was one.
    pub fn cancel(&self) -> bool {
        let mut any = false;
        for h in &self.partitions {
            any |= h.cancel();
        }
        any
    }

    /// True while one of its partitions runs.
    pub fn is_running(&self) -> bool {
        self.partitions
            .iter()
            .any(|h| matches!(h.status(), JobStatus::Running { .. }))
    }

    /// What the proof is doing: its first unfinished partition's status (done once all are).
    pub fn status(&self) -> JobStatus {
        self.partitions
            .iter()
            .map(JobHandle::status)
            .find(|s| !matches!(s, JobStatus::Done))
            .unwrap_or(JobStatus::Done)
    }
}

/// The daemon's Filecoin circuits.
pub struct Filecoin {
    params: ParamStore,
    /// One lock per circuit: a circuit loads once however many submits race for it.
    circuits: Mutex<HashMap<CircuitName, Arc<Mutex<Option<Slot>>>>>,
}

impl std::fmt::Debug for Filecoin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filecoin")
            .field("params", &self.params.dir())
            .finish_non_exhaustive()
    }
}

impl Filecoin {
    pub fn new(params: ParamStore) -> Self {
        Self {
            params,
            circuits: Mutex::new(HashMap::new()),
        }
    }

    pub fn params(&self) -> &ParamStore {
        &self.params
    }

    /// The engine key of a circuit.
    pub fn key_id(name: CircuitName) -> String {
        format!("filecoin.{name}")
    }

    fn slot(&self, name: CircuitName) -> Arc<Mutex<Option<Slot>>> {
        self.circuits.lock().entry(name).or_default().clone()
    }

    fn file_bytes(&self, cache_id: &str) -> u64 {
        std::fs::metadata(self.params.params_path(cache_id)).map_or(0, |m| m.len())
    }

    /// Reads a circuit's parameters ahead of its first proof (blocking). Returns true when
    /// they were read or the circuit loaded before.
    pub fn preload(&self, name: CircuitName) -> Result<bool, Status> {
        let slot = self.slot(name);
        let mut s = slot.lock();
        if s.is_some() {
            return Ok(true);
        }
        let id = name.cache_id().map_err(|e| filecoin_status(&e))?;
        let params = self
            .params
            .load_params(&id)
            .map_err(|e| filecoin_status(&e))?;
        *s = Some(Slot::Params {
            params: Box::new(params),
            bytes: self.file_bytes(&id),
        });
        Ok(false)
    }

    /// Drops a circuit: its parameters, its compiled circuit and its engine key (queued jobs
    /// of it fail, running ones finish first). Returns its parameter file's size if it was
    /// there (blocking).
    pub fn evict(&self, engine: &Engine, name: CircuitName) -> Result<Option<u64>, Status> {
        let slot = self.slot(name);
        let mut s = slot.lock();
        let bytes = match s.take() {
            None => return Ok(None),
            Some(Slot::Params { bytes, .. }) => bytes,
            Some(Slot::Loaded { bytes, .. }) => {
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
                // A circuit loading now holds its lock: it is not listed until it is there.
                let s = s.try_lock()?;
                match &*s {
                    None => None,
                    Some(Slot::Params { bytes, .. }) => Some(CircuitInfo {
                        name,
                        loaded: false,
                        bytes: *bytes,
                    }),
                    Some(Slot::Loaded { bytes, .. }) => Some(CircuitInfo {
                        name,
                        loaded: true,
                        bytes: *bytes,
                    }),
                }
            })
            .collect();
        out.sort_by_key(|c| c.name.to_string());
        out
    }

    /// Queues every partition of `proof` (blocking: the first proof of a circuit reads its
    /// parameters and compiles it).
    pub fn submit(
        &self,
        engine: &Engine,
        proof: PartitionedProof,
        priority: Priority,
    ) -> Result<Queued, Status> {
        let name = proof.circuit();
        let key = Self::key_id(name);
        let start = Instant::now();
        let slot = self.slot(name);
        let mut s = slot.lock();
        let (compiled, mut first) = match s.take() {
            // A key unloaded through UnloadKey loads again.
            Some(Slot::Loaded { compiled, bytes }) if engine.circuit(&key).is_some() => {
                *s = Some(Slot::Loaded {
                    compiled: compiled.clone(),
                    bytes,
                });
                (compiled, None)
            }
            preloaded => {
                let (params, bytes) = match preloaded {
                    Some(Slot::Params { params, bytes }) => (*params, bytes),
                    _ => (
                        self.params
                            .load_params(proof.cache_id())
                            .map_err(|e| filecoin_status(&e))?,
                        self.file_bytes(proof.cache_id()),
                    ),
                };
                let params_name = self.params.params_path(proof.cache_id());
                let (prover, witness) = proof
                    .compile(params, &params_name.display().to_string())
                    .map_err(|e| filecoin_status(&e))?;
                let (compiled, pk) = prover.into_parts();
                let source = KeySource::Memory {
                    pk: Arc::new(pk),
                    r1cs: compiled.shared_r1cs(),
                };
                engine
                    .load_key(&key, source, None)
                    .map_err(|e| Status::resource_exhausted(format!("circuit {name}: {e}")))?;
                tracing::info!(circuit = %name, secs = start.elapsed().as_secs_f64(), "Filecoin circuit loaded");
                let compiled = Arc::new(compiled);
                *s = Some(Slot::Loaded {
                    compiled: compiled.clone(),
                    bytes,
                });
                (compiled, Some(witness))
            }
        };
        drop(s);
        let load = if first.is_some() {
            start.elapsed()
        } else {
            Duration::ZERO
        };
        let proof = Arc::new(proof);
        let mut partitions = Vec::new();
        for k in proof.partitions() {
            // The compiling synthesis made the first partition's witness already.
            let witness = match first.take() {
                Some(w) => WitnessSource::Memory(Arc::new(w)),
                None => {
                    let (proof, compiled) = (proof.clone(), compiled.clone());
                    WitnessSource::Compute(Arc::new(move || {
                        proof.witness(k, &compiled).map_err(|e| e.to_string())
                    }))
                }
            };
            match engine.submit(JobSpec::new(key.clone(), witness).priority(priority)) {
                Ok(h) => partitions.push(h),
                Err(e) => {
                    for h in &partitions {
                        h.cancel();
                    }
                    return Err(crate::service::job_status(&e));
                }
            }
        }
        Ok(Queued {
            circuit: name,
            first_partition: proof.partitions().start,
            partitions,
            load,
        })
    }
}
