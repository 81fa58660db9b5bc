//! The run of one job as phases, under the host gate, the staging gate and the GPU lock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_formats::cuzk;
use cuzk_groth16::{
    BackendError, BackendErrorKind, MsmValue, ProverBackend, Witness, WitnessMsms,
    witness_msm_order,
};
use cuzk_vram::Reservation;

use crate::engine::{Device, Inner, JobStart};
use crate::gate::{GateError, Permit};
use crate::job::{
    JobError, JobOutput, JobShared, JobTimings, Priority, Reuse, Span, SpanKind, Taken,
    WitnessSource, compute_witness,
};
use crate::keys::{Key, read};

/// How long an admitted reservation may retry when the budget is short though no other
/// process holds memory (the limit is at the total), before the job fails.
pub(crate) const RESERVE_RETRY: Duration = Duration::from_secs(30);

/// A backend's error as a job's: out of device memory when a driver call said so.
pub(crate) fn backend_failed(phase: &'static str, e: BackendError) -> JobError {
    match e.kind() {
        BackendErrorKind::OutOfDeviceMemory => JobError::OutOfDeviceMemory {
            phase,
            message: e.to_string(),
        },
        _ => failed(phase, e),
    }
}

pub(crate) fn failed(phase: &'static str, e: impl std::fmt::Display) -> JobError {
    JobError::Failed {
        phase,
        message: e.to_string(),
    }
}
pub(crate) fn gate_err(e: GateError) -> JobError {
    match e {
        GateError::Cancelled(_) => JobError::Cancelled,
        e => JobError::NoDevice(e.to_string()),
    }
}

impl Inner {
    /// Admitted device bytes: a staging permit, then the same bytes reserved from the budget
    /// (the permit guarantees they fit; a retry covers memory another process took).
    pub(crate) fn stage_room(
        &self,
        dev: &Device,
        bytes: u64,
        priority: Priority,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Permit, Reservation), JobError> {
        let permit = dev
            .staging()
            .acquire(bytes, priority, cancelled)
            .map_err(gate_err)?;
        let budget = dev.vram().budget();
        let mut deadline = Instant::now() + RESERVE_RETRY;
        loop {
            match dev.vram().reserve(bytes) {
                Ok(r) => return Ok((permit, r)),
                Err(e) if Instant::now() >= deadline => return Err(failed("staging", e)),
                Err(e) => {
                    if budget.limit() < budget.total() {
                        // Another process holds memory: wait for it, however long.
                        deadline = Instant::now() + RESERVE_RETRY;
                    } else {
                        tracing::warn!(device = %dev.name(), error = %e, "admitted staging room is short; retrying");
                    }
                    if cancelled() {
                        return Err(JobError::Cancelled);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    /// The witness staged on `dev` for its MSMs, with the staging permit that holds its room.
    #[allow(clippy::too_many_arguments)]
    fn stage_witness(
        &self,
        dev: &Device,
        rec: &Recorder<'_>,
        t: &mut JobTimings,
        backend: &dyn ProverBackend,
        z: &[cuzk_field::Fr],
        bytes: u64,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(cuzk_groth16::StagedWitness, Permit), JobError> {
        let (room, wait) = rec.span("wait staging", SpanKind::Wait, || {
            self.stage_room(dev, bytes, rec.job.priority, cancelled)
        });
        t.memory_wait += wait;
        let (permit, room) = room?;
        let (staged, _) = rec.span("upload z", SpanKind::Copy, || {
            backend.stage_witness(z, room)
        });
        let staged = staged.map_err(|e| backend_failed("upload z", e))?;
        Ok((staged, permit))
    }

    /// Runs `job` on worker `w` of device `d`; `start` (from [`Inner::next_job`]) is dropped
    /// once the witness is uploaded and the job has its evaluation set.
    pub(crate) fn run_job(
        &self,
        d: usize,
        w: usize,
        job: &JobShared,
        start: JobStart<'_>,
    ) -> Result<JobOutput, JobError> {
        let dev = &self.devices()[d];
        let key = self
            .keys()
            .get(&job.key)
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

        let taken = if job.being_read_ahead() {
            let (p, wait) = rec.span("read ahead", SpanKind::Wait, || job.take_read_ahead());
            t.memory_wait += wait;
            p
        } else {
            job.take_read_ahead()
        };
        // The host bytes of a witness made ahead, or of storage passed on to compute it into.
        let (read_ahead, storage) = match taken? {
            Taken::Nothing => (None, None),
            Taken::Witness(permit) => (Some(permit), None),
            Taken::Storage(Reuse { storage, permit }) => (Some(permit), Some(storage)),
        };
        // Evaluations made ahead hold their host bytes already; they are taken beside the
        // witness MSMs, so a job started before they are done does not wait for them.
        let map_ahead = job.claim_map_ahead()?;
        let on_device = loaded.circuit.as_ref();
        // A pinned set taken now is the pinned budget's: the heap is charged for the witness
        // only. It goes back to the backend's pool if the job stops before its witness map.
        let mut pinned_abc = Lent {
            backend,
            abc: (!map_ahead && on_device.is_none())
                .then(|| backend.pinned_evaluation_buffers(key.domain.size()))
                .flatten(),
        };
        // Without a pinned set, a backend that makes a, b, c in pieces through its own staging
        // does so after the witness MSMs: no host set (faulted in and copied at pageable speed
        // for every proof) and no host bytes for it.
        let no_set = !map_ahead && on_device.is_none() && pinned_abc.abc.is_none();
        let in_pieces = no_set && backend.maps_through_staging();
        let charged_evaluations = no_set && !in_pieces;
        let host_bytes = match read_ahead {
            Some(_) => 0,
            None => loaded.needs.witness,
        } + if charged_evaluations {
            loaded.needs.evaluations
        } else {
            0
        };
        let (host, wait) = rec.span("host memory", SpanKind::Wait, || {
            self.host().acquire(host_bytes, priority, &cancelled)
        });
        t.memory_wait += wait;
        let mut host = (host.map_err(gate_err)?, read_ahead);
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
                    read(&p, cuzk::read_witness).map_err(|e| JobError::Witness(e.to_string()))
                });
                let w = Arc::new(r?);
                *job.witness.lock() = Some(WitnessSource::Memory(w.clone()));
                w
            }
            Some(WitnessSource::Compute(f)) => {
                let (r, _) = rec.span("synthesize", SpanKind::Cpu, || compute_witness(&f, storage));
                // Kept for a run again after the driver's out-of-memory.
                let w = Arc::new(r?);
                *job.witness.lock() = Some(WitnessSource::Memory(w.clone()));
                w
            }
        };
        let (checked, _) = rec.span("check", SpanKind::Cpu, || {
            cuzk_groth16::check_inputs(key.pk.key(), &key.r1cs, &witness)
        });
        checked.map_err(|e| JobError::Witness(e.to_string()))?;
        let z = witness.assignment();
        let n = key.domain.size();
        check()?;

        // The witness MSMs, a, b, c where the quotient reads them, and the room they hold (and
        // the host bytes of evaluations made ahead, held until the job ends).
        let (msms, staged, abc_permit, _mapped) = match on_device {
            Some(circuit) => {
                // The device makes a, b, c from the staged witness: room for both at once.
                let (room, wait) = rec.span("wait staging", SpanKind::Wait, || {
                    self.stage_room(dev, loaded.needs.staged(), priority, &cancelled)
                });
                t.memory_wait += wait;
                let (mut permit, room) = room?;
                rec.enter("upload z");
                let t0 = self.now();
                let staged = backend.stage_and_evaluate(circuit, z, n, room);
                let t1 = self.now();
                drop(start);
                let (staged, abc) = staged.map_err(|e| match e.kind() {
                    BackendErrorKind::Unsatisfied => JobError::Witness(e.to_string()),
                    _ => backend_failed("upload z", e),
                })?;
                // Two spans on the copy lane (outside the GPU lock): the upload, then the
                // device's witness map.
                let made = abc.made_in().map_or(0.0, |d| d.as_secs_f64());
                let split = (t1 - made).max(t0);
                rec.push("upload z", SpanKind::Copy, t0, split);
                rec.push("witness map (device)", SpanKind::Copy, split, t1);
                check()?;
                let msms =
                    self.witness_msms(dev, &rec, &mut t, &key, backend, z, &staged, &cancelled);
                drop(staged);
                permit.release(loaded.needs.witness);
                let msms = msms?;
                check()?;
                (msms, abc, permit, None)
            }
            None if in_pieces => {
                let (staged, z_permit) = self.stage_witness(
                    dev,
                    &rec,
                    &mut t,
                    backend,
                    z,
                    loaded.needs.witness,
                    &cancelled,
                )?;
                drop(start);
                check()?;
                let msms =
                    self.witness_msms(dev, &rec, &mut t, &key, backend, z, &staged, &cancelled);
                drop((staged, z_permit));
                let msms = msms?;
                check()?;
                let (room, wait) = rec.span("wait staging", SpanKind::Wait, || {
                    self.stage_room(dev, loaded.needs.evaluations, priority, &cancelled)
                });
                t.memory_wait += wait;
                let (abc_permit, abc_room) = room?;
                let (staged, _) = rec.span("witness map", SpanKind::Cpu, || {
                    backend.map_and_stage(&key.r1cs, z, n, abc_room)
                });
                let staged = staged.map_err(|e| match e.kind() {
                    BackendErrorKind::Unsatisfied => JobError::Witness(e.to_string()),
                    _ => backend_failed("witness map", e),
                })?;
                check()?;
                (msms, staged, abc_permit, None)
            }
            None => {
                let (staged, z_permit) = self.stage_witness(
                    dev,
                    &rec,
                    &mut t,
                    backend,
                    z,
                    loaded.needs.witness,
                    &cancelled,
                )?;
                // Evaluations made ahead may go on now, unless this job's own set is still to take.
                let start = (!map_ahead).then_some(start);
                check()?;

                // The witness map runs on its own thread while the witness MSMs hold the device,
                // unless it was made ahead. A `Mapped` holds the host bytes of those made ahead until
                // the job ends.
                let (msms, (abc, mapped)) = std::thread::scope(|scope| {
                    let map = scope.spawn(|| {
                        let mut mapped = None;
                        if map_ahead {
                            let m = if job.being_mapped() {
                                rec.aside("map ahead", SpanKind::Wait, || job.take_map_ahead())
                                    .0
                            } else {
                                job.take_map_ahead()
                            };
                            match m {
                                Err(e) => return (Err(e), None),
                                Ok(Some(mut m)) => match m.take_for(d) {
                                    Some(abc) => return (Ok(abc), Some(m)),
                                    None => mapped = Some(m),
                                },
                                Ok(None) => {}
                            }
                        }
                        let (r, _) = rec.aside("witness map", SpanKind::Cpu, || {
                            let abc = match pinned_abc.abc.take() {
                                Some(abc) => Ok(abc),
                                None => backend.evaluation_buffers(n),
                            };
                            drop(start);
                            let mut abc = abc.map_err(|e| backend_failed("witness map", e))?;
                            match cuzk_groth16::witness_map(&key.r1cs, z, &mut abc) {
                                Ok(()) => Ok(abc),
                                Err(e) => {
                                    backend.return_evaluations(abc);
                                    Err(JobError::Witness(e.to_string()))
                                }
                            }
                        });
                        (r, mapped)
                    });
                    let msms =
                        self.witness_msms(dev, &rec, &mut t, &key, backend, z, &staged, &cancelled);
                    let abc = map.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                    (msms, abc)
                });
                drop((staged, z_permit));
                let abc = abc?; // a witness error outranks a device error of the same proof
                if charged_evaluations && abc.is_pinned() {
                    // Pinned after all (the pinned budget had room again): the heap room goes back.
                    host.0.release(loaded.needs.evaluations);
                }
                // From here until they are staged, a, b, c go back to the backend's pool on any exit.
                let give_back = |abc, e| {
                    backend.return_evaluations(abc);
                    Err(e)
                };
                let msms = match msms.and_then(|m| check().map(|()| m)) {
                    Ok(m) => m,
                    Err(e) => return give_back(abc, e),
                };

                let (room, wait) = rec.span("wait staging", SpanKind::Wait, || {
                    self.stage_room(dev, loaded.needs.evaluations, priority, &cancelled)
                });
                t.memory_wait += wait;
                let (abc_permit, abc_room) = match room {
                    Ok(r) => r,
                    Err(e) => return give_back(abc, e),
                };
                let (staged, _) = rec.span("upload a,b,c", SpanKind::Copy, || {
                    backend.stage_evaluations(abc, abc_room)
                });
                // The set is idle again: the next job's evaluations can be made ahead into it.
                self.queue().notify();
                let staged = staged.map_err(|e| backend_failed("upload a,b,c", e))?;
                check()?;
                (msms, staged, abc_permit, mapped)
            }
        };

        let lock = self.lock(dev, &rec, &mut t, priority, &cancelled)?;
        let t0 = self.now();
        let q = backend.quotient_msm(&key.domain, staged, key.pk.key());
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
            cuzk_groth16::assemble(key.pk.key(), r, s, &msms, q.h)
        });
        if self.config().self_check {
            let (v, _) = rec.span("verify", SpanKind::Cpu, || {
                cuzk_groth16::verify_proof(&key.pvk, &proof, witness.public_inputs())
            });
            if let Err(e) = v {
                tracing::error!(job = job.id, key = %key.id, device = d, error = %e, "proof failed its self-check");
                return Err(JobError::SelfCheck(e.to_string()));
            }
        }
        let public_inputs = witness.public_inputs().to_vec();
        // The slot's copy was kept for a retry; without it the witness's storage, with its
        // host bytes, can go to the next job of this key.
        job.witness.lock().take();
        if let Ok(witness) = Arc::try_unwrap(witness)
            && let Some(permit) = host.1.take().or_else(|| host.0.split(loaded.needs.witness))
        {
            self.pass_on(&job.key, witness, permit);
        }
        t.run = started.elapsed();
        t.spans = self.spans_of(job.id);
        Ok(JobOutput {
            id: job.id,
            proof,
            public_inputs,
            device: d,
            worker: w,
            timings: t,
        })
    }

    /// The four witness MSMs under the GPU lock, yielding it between them to a waiting job of
    /// higher priority.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn witness_msms(
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
            if dev.lock().has_higher_waiter(priority) {
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
                backend.witness_msm(key.pk.key(), z, staged, query, offset)
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

    pub(crate) fn lock(
        &self,
        dev: &Device,
        rec: &Recorder<'_>,
        t: &mut JobTimings,
        priority: Priority,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Permit, JobError> {
        let (r, wait) = rec.span("wait GPU", SpanKind::Wait, || {
            dev.lock().acquire(1, priority, cancelled)
        });
        t.lock_wait += wait;
        r.map_err(gate_err)
    }

    pub(crate) fn unlock(&self, dev: &Device, lock: Permit, t: &mut JobTimings, held: f64) {
        drop(lock);
        t.lock_hold += Duration::from_secs_f64(held.max(0.0));
        dev.add_busy(held.max(0.0));
    }
}

/// Records a job's phases on the engine's timeline and in its status.
pub(crate) struct Recorder<'a> {
    pub(crate) inner: &'a Inner,
    pub(crate) job: &'a JobShared,
    pub(crate) device: usize,
    pub(crate) worker: usize,
}
impl Recorder<'_> {
    /// Runs `f` as the job's current phase (its status shows it), recording its span.
    pub(crate) fn span<T>(
        &self,
        phase: &'static str,
        kind: SpanKind,
        f: impl FnOnce() -> T,
    ) -> (T, Duration) {
        self.enter(phase);
        self.aside(phase, kind, f)
    }

    /// Shows `phase` as the job's current one (its status) without recording a span.
    pub(crate) fn enter(&self, phase: &'static str) {
        self.job.set_phase(phase);
        self.inner.devices()[self.device].set_phase(self.worker, phase);
    }

    /// Runs `f` beside the job's current phase (on another thread), recording its span.
    pub(crate) fn aside<T>(
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

    pub(crate) fn push(&self, phase: &'static str, kind: SpanKind, start: f64, end: f64) {
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

/// Evaluation buffers taken for a job ahead of its witness map, returned to the backend's pool
/// if the job stops before using them.
struct Lent<'a> {
    backend: &'a dyn ProverBackend,
    abc: Option<cuzk_groth16::Evaluations>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(abc) = self.abc.take() {
            self.backend.return_evaluations(abc);
        }
    }
}
