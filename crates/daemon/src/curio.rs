//! curio's `cuzk.v1.ProvingEngine` (`proto/curio/cuzk/v1/proving.proto`), served beside
//! `cuzk.v1.Prover` on the same listeners, so that a curio node configured for a cuzk daemon
//! works with this one unchanged.
//!
//! What each call does, as curio's own server does it (`extern/cuzk/cuzk-server` in curio):
//! - SubmitProof queues a proof and answers at once with its job id: the request id when one is
//!   given (submitting it again answers the same job), else a random one. Bad input is
//!   INVALID_ARGUMENT naming the field. The first proof of a circuit loads it first.
//! - AwaitProof and Prove answer COMPLETED with the proof (filecoin-proofs' bytes), FAILED with
//!   the error, CANCELLED, or TIMEOUT after `timeout_ms` (0: the daemon's `max_await_s`).
//! - CancelProof cancels every partition; `was_running` says whether one had started.
//! - GetStatus reports the engine's devices as GPUs, the circuits read or loaded (HOT: in the
//!   engine; WARM: parameters read by PreloadSRS), and per proof kind the partitions queued
//!   and running. Its pinned-memory fields are the engine's host memory budget.
//! - GetMetrics is the daemon's Prometheus text plus proofs per kind.
//! - PreloadSRS reads a circuit's parameters (`porep-32g`, `wpost-2k`, ...); EvictSRS drops
//!   them and the circuit's engine key.
//!
//! Registered proofs are filecoin-ffi's numbers: RegisteredSealProof `StackedDrg*V1_1` 5..=9;
//! RegisteredPoStProof Winning 0..=4, Window V1 5..=9 and V1_1 (filecoin-proofs-api's V1_2)
//! 10..=14; RegisteredUpdateProof 0..=4; sizes 2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB in that
//! order. The prover id is the miner's actor id (curio's `make_prover_id`).
//!
//! curio's four priorities map onto the engine's three so that CRITICAL (WinningPoSt) takes
//! the next device slot ahead of everything curio sends: CRITICAL is high, HIGH (WindowPoSt)
//! normal, NORMAL and LOW low. Unspecified is curio's default for the kind.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cuzk_filecoin::{
    C1Output, CircuitName, PartitionedProof, PostProof, PostStatement, PostVanilla, SealProof,
    SnapStatement, SnapVanilla, prover_id_from_miner,
};
use cuzk_scheduler::{JobStatus, Priority};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::curio_jobs::{CurioJobs, Job, Outcome};
use crate::curio_pb as pb;
use crate::filecoin::{array32, filecoin_status};
use crate::service::{Shared, random_hex};

/// curio's names of the kinds (its `ProofKind` Display and metric label).
fn kind_names(k: pb::ProofKind) -> (&'static str, &'static str) {
    match k {
        pb::ProofKind::PorepSealCommit => ("porep-c2", "porep_c2"),
        pb::ProofKind::SnapDealsUpdate => ("snap-update", "snap_update"),
        pb::ProofKind::WindowPostPartition => ("window-post", "window_post"),
        pb::ProofKind::WinningPost => ("winning-post", "winning_post"),
        pb::ProofKind::Unspecified => ("unspecified", "unspecified"),
    }
}

const KINDS: [pb::ProofKind; 4] = [
    pb::ProofKind::PorepSealCommit,
    pb::ProofKind::SnapDealsUpdate,
    pb::ProofKind::WindowPostPartition,
    pb::ProofKind::WinningPost,
];

fn priority(p: i32, kind: pb::ProofKind) -> Result<Priority, Status> {
    let p = match pb::Priority::try_from(p) {
        Ok(pb::Priority::Unspecified) => match kind {
            pb::ProofKind::WinningPost => pb::Priority::Critical,
            pb::ProofKind::WindowPostPartition => pb::Priority::High,
            _ => pb::Priority::Normal,
        },
        Ok(p) => p,
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "priority: unknown value {p} (LOW 1, NORMAL 2, HIGH 3, CRITICAL 4)"
            )));
        }
    };
    Ok(match p {
        pb::Priority::Critical => Priority::High,
        pb::Priority::High => Priority::Normal,
        _ => Priority::Low,
    })
}

const SIZES: &str = "2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB";

fn seal_proof(n: u64) -> Result<SealProof, Status> {
    SealProof::ALL
        .into_iter()
        .find(|p| p.registered_number() == n)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "registered_proof: {n} is not a seal proof cuzk proves (StackedDrg*V1_1: 5..=9 for {SIZES})"
            ))
        })
}

fn post_proof(n: u64) -> Result<PostProof, Status> {
    let sector = |i: u64| SealProof::ALL[i as usize];
    match n {
        0..=4 => Ok(PostProof::winning(sector(n))),
        5..=9 => Ok(PostProof {
            v1_2: false,
            ..PostProof::window(sector(n - 5))
        }),
        10..=14 => Ok(PostProof::window(sector(n - 10))),
        _ => Err(Status::invalid_argument(format!(
            "registered_proof: {n} is not a PoSt proof (Winning 0..=4, Window V1 5..=9, Window V1_1 10..=14, for {SIZES})"
        ))),
    }
}

fn update_proof(n: u64) -> Result<SealProof, Status> {
    SealProof::ALL.get(n as usize).copied().ok_or_else(|| {
        Status::invalid_argument(format!(
            "registered_proof: {n} is not an update proof (StackedDrg*V1: 0..=4 for {SIZES})"
        ))
    })
}

/// `sector_size` is optional; given, it must be the registered proof's.
fn check_sector_size(size: u64, sector: SealProof) -> Result<(), Status> {
    if size != 0 && size != sector.sector_size() {
        return Err(Status::invalid_argument(format!(
            "sector_size: {size} bytes, but the registered proof is for {} bytes",
            sector.sector_size()
        )));
    }
    Ok(())
}

fn nonempty(blobs: &[Vec<u8>], field: &str) -> Result<(), Status> {
    if blobs.is_empty() {
        return Err(Status::invalid_argument(format!("{field}: empty")));
    }
    Ok(())
}

/// The proof a request asks for (blocking: parses the vanilla proofs).
fn parse(kind: pb::ProofKind, r: &pb::SubmitProofRequest) -> Result<PartitionedProof, Status> {
    let fc = |e: cuzk_filecoin::FilecoinError| filecoin_status(&e);
    match kind {
        pb::ProofKind::PorepSealCommit => {
            let stated = seal_proof(r.registered_proof)?;
            check_sector_size(r.sector_size, stated)?;
            if r.vanilla_proof.is_empty() {
                return Err(Status::invalid_argument(
                    "vanilla_proof: empty (it holds the C1 output)",
                ));
            }
            let c1 =
                C1Output::parse("vanilla_proof", &r.vanilla_proof, Some(stated)).map_err(fc)?;
            PartitionedProof::porep(c1).map_err(fc)
        }
        pb::ProofKind::WindowPostPartition | pb::ProofKind::WinningPost => {
            let proof = post_proof(r.registered_proof)?;
            let winning = kind == pb::ProofKind::WinningPost;
            if winning != (proof.kind == cuzk_filecoin::PostKind::Winning) {
                return Err(Status::invalid_argument(format!(
                    "registered_proof: {} ({proof}) is not a {} proof",
                    r.registered_proof,
                    kind.as_str_name()
                )));
            }
            check_sector_size(r.sector_size, proof.sector)?;
            let st = PostStatement {
                randomness: array32(&r.randomness, "randomness")?,
                prover_id: prover_id_from_miner(r.miner_id),
            };
            nonempty(&r.vanilla_proofs, "vanilla_proofs")?;
            let file = "vanilla_proofs";
            let vanilla =
                PostVanilla::from_sector_proofs(file, &r.vanilla_proofs, proof).map_err(fc)?;
            if winning {
                PartitionedProof::winning_post(file, vanilla, st)
            } else {
                PartitionedProof::window_post(file, vanilla, st, r.partition_index as usize)
            }
            .map_err(fc)
        }
        pb::ProofKind::SnapDealsUpdate => {
            let sector = update_proof(r.registered_proof)?;
            check_sector_size(r.sector_size, sector)?;
            let st = SnapStatement {
                comm_r_old: array32(&r.comm_r_old, "comm_r_old")?,
                comm_r_new: array32(&r.comm_r_new, "comm_r_new")?,
                comm_d_new: array32(&r.comm_d_new, "comm_d_new")?,
            };
            nonempty(&r.vanilla_proofs, "vanilla_proofs")?;
            let file = "vanilla_proofs";
            let vanilla =
                SnapVanilla::from_partition_proofs(file, &r.vanilla_proofs, sector).map_err(fc)?;
            PartitionedProof::snap(file, vanilla, st).map_err(fc)
        }
        pb::ProofKind::Unspecified => Err(Status::invalid_argument(
            "proof_kind: unspecified (POREP_SEAL_COMMIT 1, SNAP_DEALS_UPDATE 2, WINDOW_POST_PARTITION 3, WINNING_POST 4)",
        )),
    }
}

fn answer(job_id: &str, outcome: Option<&Outcome>) -> pb::AwaitProofResponse {
    use pb::await_proof_response::Status as S;
    let mut r = pb::AwaitProofResponse {
        job_id: job_id.into(),
        ..Default::default()
    };
    let ms = |d: Duration| d.as_millis() as u64;
    match outcome.map(|o| (&o.0, o.1)) {
        None => r.status = S::Timeout as i32,
        Some((Ok(f), total)) => {
            r.status = S::Completed as i32;
            r.proof = f.proof.clone();
            r.queue_wait_ms = ms(f.queue_wait);
            r.srs_load_ms = f.load.map_or(0, |l| ms(l.duration()));
            r.synthesis_ms = ms(f.synthesis);
            r.gpu_compute_ms = ms(f.device);
            r.total_ms = ms(total);
        }
        Some((Err(e), total)) => {
            r.status = if e.cancelled() {
                S::Cancelled as i32
            } else {
                S::Failed as i32
            };
            r.error_message = e.to_string();
            r.total_ms = ms(total);
        }
    }
    r
}

/// The `cuzk.v1.ProvingEngine` service over [`Shared`].
#[derive(Debug, Clone)]
pub struct ProvingEngineService {
    pub(crate) shared: Arc<Shared>,
}

impl ProvingEngineService {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    fn jobs(&self) -> parking_lot::MutexGuard<'_, CurioJobs> {
        self.shared.curio.lock()
    }

    /// Queues a proof; returns its job id and how many engine jobs were queued ahead of it.
    async fn submit(&self, r: pb::SubmitProofRequest) -> Result<(String, u32), Status> {
        let sh = &self.shared;
        if sh.closing.load(Ordering::SeqCst) {
            return Err(Status::unavailable("the daemon is shutting down"));
        }
        if r.request_id.len() > 256 {
            return Err(Status::invalid_argument(
                "request_id: longer than 256 bytes",
            ));
        }
        let id = if r.request_id.is_empty() {
            random_hex()
        } else {
            r.request_id.clone()
        };
        {
            let mut jobs = self.jobs();
            if jobs.by_id.contains_key(&id) {
                return Ok((id, 0));
            }
            jobs.prune(Duration::from_secs_f64(sh.config.result_ttl_s));
            if jobs.by_id.len() >= sh.config.max_jobs {
                return Err(Status::resource_exhausted(format!(
                    "the daemon tracks {} Filecoin jobs, its max_jobs (retry later)",
                    jobs.by_id.len()
                )));
            }
        }
        let kind = pb::ProofKind::try_from(r.proof_kind).map_err(|_| {
            Status::invalid_argument(format!("proof_kind: unknown value {}", r.proof_kind))
        })?;
        let prio = priority(r.priority, kind)?;
        let received = Instant::now();
        let ahead: usize = sh
            .engine
            .status()
            .queued
            .iter()
            .filter(|(p, _)| *p >= prio)
            .map(|(_, n)| n)
            .sum();
        let proof = tokio::task::spawn_blocking(move || parse(kind, &r))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        let queued = sh.filecoin.submit(&sh.engine, proof, prio);
        let (tx, rx) = watch::channel(None);
        {
            let mut jobs = self.jobs();
            // Two submits of one request id raced here: the first one's job is the answer.
            if jobs.by_id.contains_key(&id) {
                queued.cancel();
                return Ok((id, 0));
            }
            jobs.by_id.insert(
                id.clone(),
                Job {
                    kind,
                    queued: queued.clone(),
                    result: rx,
                    finished: None,
                },
            );
        }
        let me = sh.clone();
        let jid = id.clone();
        sh.runtime.spawn_blocking(move || {
            let r = queued.wait();
            let mut jobs = me.curio.lock();
            let label = kind_names(kind).1;
            let counter = match &r {
                Ok(_) => &mut jobs.completed,
                Err(_) => &mut jobs.failed,
            };
            *counter.entry(label).or_default() += 1;
            if let Some(j) = jobs.by_id.get_mut(&jid) {
                j.finished = Some(Instant::now());
            }
            drop(jobs);
            let _ = tx.send(Some(Arc::new((r, received.elapsed()))));
        });
        Ok((id, ahead as u32))
    }

    async fn await_job(&self, id: &str, timeout_ms: u64) -> Result<pb::AwaitProofResponse, Status> {
        let mut rx = {
            let jobs = self.jobs();
            let j = jobs
                .by_id
                .get(id)
                .ok_or_else(|| Status::not_found(format!("job_id: no job {id:?}")))?;
            j.result.clone()
        };
        let max = Duration::from_secs_f64(self.shared.config.max_await_s);
        let wait = match timeout_ms {
            0 => max,
            ms => Duration::from_millis(ms).min(max),
        };
        let outcome = match tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await {
            Ok(Ok(r)) => r.clone(),
            Ok(Err(_)) => return Err(Status::internal("the job's waiter ended without a result")),
            Err(_) => None,
        };
        Ok(answer(id, outcome.as_ref()))
    }

    fn status(&self) -> pb::GetStatusResponse {
        let st = self.shared.engine.status();
        let circuits = self.shared.filecoin.circuits();
        let jobs = self.jobs();
        let mut running_job = HashMap::new();
        let mut queues: HashMap<pb::ProofKind, (u32, u32)> = HashMap::new();
        let mut refs: HashMap<CircuitName, u32> = HashMap::new();
        for (id, j) in &jobs.by_id {
            let q = queues.entry(j.kind).or_default();
            // Waiting for its circuit's load is pending; loading it, in progress.
            let mut unfinished = j.queued.before_engine();
            if unfinished {
                let n = j.queued.partition_count() as u32;
                if j.queued.is_running() {
                    q.1 += n;
                } else {
                    q.0 += n;
                }
            }
            for h in j.queued.partitions() {
                match h.status() {
                    JobStatus::Queued => {
                        q.0 += 1;
                        unfinished = true;
                    }
                    JobStatus::Running { .. } => {
                        q.1 += 1;
                        unfinished = true;
                        running_job.insert(h.id(), (id.clone(), j.kind));
                    }
                    _ => {}
                }
            }
            if unfinished {
                *refs.entry(j.queued.circuit()).or_default() += 1;
            }
        }
        let gpus = st
            .devices
            .iter()
            .map(|d| {
                let current = d
                    .workers
                    .iter()
                    .find_map(|w| w.job.and_then(|j| running_job.get(&j)));
                pb::GpuStatus {
                    ordinal: d.index as u32,
                    name: d.name.clone(),
                    vram_total_bytes: d.mem_total.unwrap_or(d.budget_total),
                    vram_free_bytes: d
                        .mem_free
                        .unwrap_or(d.budget_total.saturating_sub(d.budget_in_use)),
                    current_job_id: current.map(|c| c.0.clone()).unwrap_or_default(),
                    current_proof_kind: current
                        .map(|c| kind_names(c.1).0.to_string())
                        .unwrap_or_default(),
                }
            })
            .collect();
        let loaded_srs = circuits
            .iter()
            .map(|c| pb::SrsStatus {
                circuit_id: c.name.to_string(),
                tier: if c.loaded {
                    pb::srs_status::Tier::Hot
                } else {
                    pb::srs_status::Tier::Warm
                } as i32,
                size_bytes: c.bytes,
                ref_count: refs.get(&c.name).copied().unwrap_or(0),
            })
            .collect();
        let sum = |m: &HashMap<&'static str, u64>| m.values().sum();
        pb::GetStatusResponse {
            gpus,
            loaded_srs,
            queues: KINDS
                .iter()
                .map(|k| {
                    let (pending, in_progress) = queues.get(k).copied().unwrap_or_default();
                    pb::QueueStatus {
                        proof_kind: kind_names(*k).0.into(),
                        pending,
                        in_progress,
                    }
                })
                .collect(),
            total_proofs_completed: sum(&jobs.completed),
            total_proofs_failed: sum(&jobs.failed),
            uptime_seconds: st.uptime.as_secs(),
            pinned_memory_bytes: st.host_in_use,
            pinned_memory_limit_bytes: st.host_capacity,
        }
    }

    fn metrics(&self) -> String {
        let mut text = self.shared.metrics_text();
        let jobs = self.jobs();
        for (name, help, counts) in [
            (
                "cuzk_filecoin_proofs_completed_total",
                "Filecoin proofs completed, by kind",
                &jobs.completed,
            ),
            (
                "cuzk_filecoin_proofs_failed_total",
                "Filecoin proofs failed or cancelled, by kind",
                &jobs.failed,
            ),
        ] {
            text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for k in KINDS {
                let label = kind_names(k).1;
                let n = counts.get(label).copied().unwrap_or(0);
                text.push_str(&format!("{name}{{proof_kind=\"{label}\"}} {n}\n"));
            }
        }
        text
    }
}

fn circuit(id: &str) -> Result<CircuitName, Status> {
    id.parse().map_err(|e: cuzk_filecoin::FilecoinError| {
        Status::invalid_argument(format!("circuit_id: {e}"))
    })
}

#[tonic::async_trait]
impl pb::proving_engine_server::ProvingEngine for ProvingEngineService {
    async fn submit_proof(
        &self,
        req: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        let (job_id, queue_position) = self.submit(req.into_inner()).await?;
        Ok(Response::new(pb::SubmitProofResponse {
            job_id,
            queue_position,
            assigned_gpu: String::new(),
        }))
    }

    async fn await_proof(
        &self,
        req: Request<pb::AwaitProofRequest>,
    ) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let r = req.into_inner();
        self.await_job(&r.job_id, r.timeout_ms)
            .await
            .map(Response::new)
    }

    async fn prove(
        &self,
        req: Request<pb::ProveRequest>,
    ) -> Result<Response<pb::ProveResponse>, Status> {
        let submit = req
            .into_inner()
            .submit
            .ok_or_else(|| Status::invalid_argument("submit: missing"))?;
        let (id, _) = self.submit(submit).await?;
        let result = self.await_job(&id, 0).await?;
        Ok(Response::new(pb::ProveResponse {
            result: Some(result),
        }))
    }

    async fn cancel_proof(
        &self,
        req: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let id = req.into_inner().job_id;
        let queued = self
            .jobs()
            .by_id
            .get(&id)
            .map(|j| j.queued.clone())
            .ok_or_else(|| Status::not_found(format!("job_id: no job {id:?}")))?;
        let was_running = queued.is_running();
        queued.cancel();
        Ok(Response::new(pb::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        Ok(Response::new(self.status()))
    }

    async fn get_metrics(
        &self,
        _: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::GetMetricsResponse>, Status> {
        Ok(Response::new(pb::GetMetricsResponse {
            prometheus_text: self.metrics(),
        }))
    }

    async fn preload_srs(
        &self,
        req: Request<pb::PreloadSrsRequest>,
    ) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        let name = circuit(&req.into_inner().circuit_id)?;
        let sh = self.shared.clone();
        let start = Instant::now();
        let already_loaded =
            tokio::task::spawn_blocking(move || sh.filecoin.preload(&sh.engine, name))
                .await
                .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(pb::PreloadSrsResponse {
            already_loaded,
            load_time_ms: start.elapsed().as_millis() as u64,
        }))
    }

    async fn evict_srs(
        &self,
        req: Request<pb::EvictSrsRequest>,
    ) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let name = circuit(&req.into_inner().circuit_id)?;
        let sh = self.shared.clone();
        let freed = tokio::task::spawn_blocking(move || sh.filecoin.evict(&sh.engine, name))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(pb::EvictSrsResponse {
            was_loaded: freed.is_some(),
            freed_bytes: freed.unwrap_or(0),
        }))
    }
}
