//! Witnesses read or computed ahead of the workers, and their evaluations made ahead: a worker
//! that reads its job's witness itself leaves the GPU idle for the read (half a second for a
//! 2^24 witness), one that computes it (a Filecoin partition's synthesis: seconds) leaves it
//! idle longer, and one that makes A·z, B·z, C·z beside its witness MSMs leaves it idle when
//! they take longer than the MSMs (a 2^27 partition's: a second against 0.8 s). So queued
//! jobs' files are read, their witness functions run, and then their evaluations made, on
//! threads of their own while the workers prove. These spans are on the timeline lane of their
//! thread ([`READ_AHEAD_LANE`]` + r`).
//!
//! **Memory argument.** A read-ahead holds the witness's host bytes from the host gate until
//! its job ends, and a map-ahead the evaluations' bytes. Each takes them only when no job
//! waits on the gate and, after taking them, room for one whole job (witness and evaluations
//! of the largest loaded key) is still free; the next job to read waits for that room. So
//! when every worker waits on the gate and none runs, what the gate holds is read-ahead bytes
//! alone, and the room left beside them admits any one job: the queue always moves. At most [`MAP_AHEAD`] queued jobs hold evaluations
//! made ahead, each in a pinned set of three domain-sized vectors (12.9 GB at 2^27) that its
//! device's backend keeps idle, and only while no worker of that device is starting a job (a
//! set idle then may be the one its witness map is about to take): work ahead never pins a set
//! of its own, so a GPU with two workers holds two sets, not three. A finished job's witness
//! passes, as storage with its host bytes, to a queued job of its key whose witness is still to
//! compute ([`Inner::pass_on`]) only where a read-ahead could take those bytes for that job
//! then (counted as free): the argument is unchanged.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_formats::cuzk;
use cuzk_groth16::{Witness, WitnessBuffer};
use parking_lot::Mutex;

use crate::engine::Inner;
use crate::gate::Permit;
use crate::job::{
    JobError, JobShared, MAP_AHEAD, MapAhead, Mapped, READ_AHEAD_LANE, ReadAhead, Reuse, Span,
    SpanKind, Taken, WitnessFn, WitnessSource, compute_witness,
};
use crate::keys::read;
use crate::queue::Jobs;

/// Read-aheads check the host gate's room and take from it one at a time.
#[derive(Default)]
pub(crate) struct ReadRoom(Mutex<()>);

/// What a read-ahead does for one job.
enum Ahead {
    /// The witness made, into the host bytes the permit holds.
    Witness(Make, Permit),
    /// A·z, B·z, C·z of a witness in memory, into the set (and with the host bytes) that
    /// `Mapped` holds.
    Map(Arc<cuzk_groth16::Witness>, Mapped),
}

/// How a witness is made ahead.
enum Make {
    Read(std::path::PathBuf),
    /// The job's function, into a finished job's storage if one was passed on.
    Compute(WitnessFn, Option<WitnessBuffer>),
}

impl Inner {
    /// Read-ahead thread `r`.
    pub(crate) fn read_ahead_loop(&self, r: usize) {
        while let Some((job, ahead)) = self.next_to_read() {
            let (make, permit) = match ahead {
                Ahead::Witness(make, permit) => (make, permit),
                Ahead::Map(witness, mapped) => {
                    let done = self.map_ahead(&job, &witness, mapped, r);
                    let mut state = job.map_ahead.lock();
                    // A job finished meanwhile has its state reset: the set and the bytes go
                    // back at once.
                    if matches!(*state, MapAhead::Mapping) {
                        *state = done;
                    }
                    drop(state);
                    job.read_done.notify_all();
                    continue;
                }
            };
            let done = self.do_ahead(&job, make, r, permit);
            let mut state = job.read_ahead.lock();
            // A job finished meanwhile has its state reset: the permit goes back at once.
            if matches!(*state, ReadAhead::Reading) {
                *state = done;
            }
            drop(state);
            job.read_done.notify_all();
        }
    }

    /// `job`'s evaluations made into the set `mapped` holds, or the witness map's error (the
    /// set then goes back to its lender).
    fn map_ahead(
        &self,
        job: &JobShared,
        witness: &cuzk_groth16::Witness,
        mut mapped: Mapped,
        r: usize,
    ) -> MapAhead {
        let Some(key) = self.keys().get(&job.key) else {
            // Unloaded meanwhile, which fails its queued jobs.
            return MapAhead::Failed(JobError::UnknownKey(job.key.clone()));
        };
        let device = mapped.device;
        let t0 = self.now();
        let made = match mapped.evaluations_mut() {
            Some(abc) => cuzk_groth16::witness_map(&key.r1cs, witness.assignment(), abc),
            None => return MapAhead::Gone, // never: `next_to_map` lent the set just now
        };
        self.record(Span {
            job: job.id,
            device,
            worker: READ_AHEAD_LANE + r,
            phase: "witness map ahead",
            kind: SpanKind::Cpu,
            start: t0,
            end: self.now(),
        });
        match made {
            Ok(()) => MapAhead::Done(mapped),
            // The set goes back to its lender.
            Err(e) => MapAhead::Failed(JobError::Witness(e.to_string())),
        }
    }

    /// Reads or computes `job`'s witness into its slot, holding `permit` for it.
    fn do_ahead(&self, job: &JobShared, make: Make, r: usize, permit: Permit) -> ReadAhead {
        let start = Instant::now();
        let made = match make {
            Make::Read(path) => read(&path, cuzk::read_witness).map_err(|e| e.to_string()),
            Make::Compute(f, storage) => {
                let t0 = self.now();
                let made = compute_witness(&f, storage);
                let device = self
                    .keys()
                    .get(&job.key)
                    .map_or(0, |k| k.on.iter().position(Option::is_some).unwrap_or(0));
                self.record(Span {
                    job: job.id,
                    device,
                    worker: READ_AHEAD_LANE + r,
                    phase: "synthesize ahead",
                    kind: SpanKind::Cpu,
                    start: t0,
                    end: self.now(),
                });
                match made {
                    Ok(w) => Ok(w),
                    // The function's own error: computing it again in the worker gives it again.
                    Err(e) => return ReadAhead::Failed(e),
                }
            }
        };
        let ms = start.elapsed().as_secs_f64() * 1e3;
        match made {
            Ok(w) => {
                tracing::debug!(job = job.id, ms, "witness made ahead");
                let mut slot = job.witness.lock();
                // The job may have ended meanwhile (its witness taken): drop the witness.
                if matches!(
                    &*slot,
                    Some(WitnessSource::File(_) | WitnessSource::Compute(_))
                ) {
                    *slot = Some(WitnessSource::Memory(Arc::new(w)));
                    ReadAhead::Done(Some(permit))
                } else {
                    ReadAhead::Done(None)
                }
            }
            Err(e) => {
                tracing::debug!(job = job.id, error = %e, "read-ahead failed; the worker reads it");
                ReadAhead::Done(None)
            }
        }
    }

    /// The first queued job whose witness nobody reads or computes yet, marked as being read
    /// with its host bytes taken, while fewer than `read_ahead` queued jobs hold a witness made
    /// ahead; it waits for host room (jobs later in the queue do not pass it); `None` once
    /// closing.
    fn next_to_read(&self) -> Option<(Arc<JobShared>, Ahead)> {
        self.queue().wait(|jobs| {
            if self.closing_hard() || (self.closing() && jobs.is_empty()) {
                return ControlFlow::Break(None);
            }
            if let Some(map) = self.next_to_map(jobs) {
                return ControlFlow::Break(Some(map));
            }
            // A job passed a finished job's storage holds its bytes already, and counts as held.
            for j in jobs.iter().filter(|j| !j.cancelled()) {
                let mut state = j.read_ahead.lock();
                if !matches!(*state, ReadAhead::Reuse(_)) {
                    continue;
                }
                let Some(WitnessSource::Compute(f)) = j.witness.lock().clone() else {
                    continue;
                };
                let ReadAhead::Reuse(reuse) = std::mem::replace(&mut *state, ReadAhead::Reading)
                else {
                    continue;
                };
                let make = Make::Compute(f, Some(reuse.storage));
                return ControlFlow::Break(Some((j.clone(), Ahead::Witness(make, reuse.permit))));
            }
            if held_ahead(jobs) >= self.config().read_ahead {
                return ControlFlow::Continue(());
            }
            for j in jobs.iter() {
                if j.cancelled() {
                    continue;
                }
                let mut state = j.read_ahead.lock();
                if !matches!(*state, ReadAhead::NotStarted) {
                    continue;
                }
                let make = match j.witness.lock().clone() {
                    Some(WitnessSource::File(path)) => Make::Read(path),
                    Some(WitnessSource::Compute(f)) => Make::Compute(f, None),
                    _ => continue,
                };
                let Some(needs) = self.keys().needs(&j.key) else {
                    continue;
                };
                // No room now: wait for it rather than give the job up to its worker.
                let Some(permit) = self.take_read_room(needs.witness) else {
                    return ControlFlow::Continue(());
                };
                *state = ReadAhead::Reading;
                return ControlFlow::Break(Some((j.clone(), Ahead::Witness(make, permit))));
            }
            ControlFlow::Continue(())
        })
    }

    /// The first queued job whose witness is in memory and whose evaluations nobody makes
    /// yet, marked as being mapped with their host bytes taken, while fewer than [`MAP_AHEAD`]
    /// queued jobs hold or make theirs. Only a job whose device is known (pinned to one, or its
    /// key on one) is mapped ahead: a set is lent by the device that stages it, and only one
    /// it keeps idle ([`cuzk_groth16::ProverBackend::idle_evaluation_buffers`]).
    fn next_to_map(&self, jobs: &Jobs) -> Option<(Arc<JobShared>, Ahead)> {
        let ahead =
            |j: &JobShared| matches!(*j.map_ahead.lock(), MapAhead::Mapping | MapAhead::Done(_));
        if jobs.iter().filter(|j| ahead(j)).count() >= MAP_AHEAD {
            return None;
        }
        let (job, witness, device, lender, n, bytes) = jobs.iter().find_map(|j| {
            if j.cancelled()
                || j.being_read_ahead()
                || !matches!(*j.map_ahead.lock(), MapAhead::NotStarted)
            {
                return None;
            }
            let Some(WitnessSource::Memory(witness)) = j.witness.lock().clone() else {
                return None;
            };
            let key = self.keys().get(&j.key)?;
            let mut on = (0..key.on.len()).filter(|&d| key.on[d].is_some());
            let device = match j.device {
                Some(d) => d,
                None => match (on.next(), on.next()) {
                    (Some(d), None) => d,
                    _ => return None,
                },
            };
            if self.devices().get(device)?.starting_job() {
                return None;
            }
            let loaded = key.on.get(device)?.as_ref()?;
            if loaded.circuit.is_some() {
                return None; // its device makes a, b, c itself
            }
            let (lender, bytes) = (loaded.backend.clone(), loaded.needs.evaluations);
            Some((j.clone(), witness, device, lender, key.domain.size(), bytes))
        })?;
        let mut permit = self.take_read_room(bytes)?;
        let abc = lender.idle_evaluation_buffers(n)?;
        if abc.is_pinned() {
            permit.release(bytes); // a pinned set is the pinned budget's, not the heap's
        }
        let mapped = Mapped::new(device, abc, lender, permit);
        *job.map_ahead.lock() = MapAhead::Mapping;
        Some((job, Ahead::Map(witness, mapped)))
    }

    /// Host bytes for one read-ahead, if taking them leaves the gate free for any one job.
    fn take_read_room(&self, bytes: u64) -> Option<Permit> {
        let _one_at_a_time = self.read_room().0.lock();
        let job = self.keys().largest_job();
        let host = self.host();
        let free = host.capacity().saturating_sub(host.in_use());
        if host.waiters() > 0 || free < bytes + job {
            return None;
        }
        host.try_acquire(bytes).ok()
    }
}

impl Inner {
    /// Passes a finished job's witness, as storage, with the host bytes that hold it, to the
    /// first queued job of key `key` whose witness is still to compute, if a read-ahead could
    /// take those bytes for that job now (`take_read_room`'s rule, with them counted as free):
    /// its synthesis then writes into memory already faulted in, rather than fault in and
    /// zero a fresh witness (40% of a PoRep partition's synthesis on the dev box). Otherwise
    /// both are dropped, as they would have been.
    pub(crate) fn pass_on(&self, key: &str, witness: Witness, permit: Permit) {
        if self
            .keys()
            .needs(key)
            .is_none_or(|n| n.witness != permit.amount())
        {
            return;
        }
        let passed = self.queue().with(|jobs| {
            if held_ahead(jobs) >= self.config().read_ahead {
                return false;
            }
            let Some(job) = jobs.iter().find(|j| {
                !j.cancelled()
                    && j.key == key
                    && matches!(*j.read_ahead.lock(), ReadAhead::NotStarted)
                    && matches!(*j.witness.lock(), Some(WitnessSource::Compute(_)))
            }) else {
                return false;
            };
            let _one_at_a_time = self.read_room().0.lock();
            let host = self.host();
            let free = host.capacity().saturating_sub(host.in_use()) + permit.amount();
            if host.waiters() > 0 || free < permit.amount() + self.keys().largest_job() {
                return false;
            }
            tracing::debug!(job = job.id, key, "a finished witness's storage passed on");
            let storage = witness.into_buffer();
            *job.read_ahead.lock() = ReadAhead::Reuse(Reuse { storage, permit });
            true
        });
        if passed {
            self.queue().notify();
        }
    }
}

/// Queued jobs that hold host bytes for their witness ahead of their worker: made, or
/// storage passed on to make it in.
fn held_ahead(jobs: &Jobs) -> usize {
    jobs.iter()
        .filter(|j| {
            matches!(
                *j.read_ahead.lock(),
                ReadAhead::Done(Some(_)) | ReadAhead::Reuse(_)
            )
        })
        .count()
}

impl JobShared {
    /// Whether a read-ahead thread is making the job's evaluations now.
    pub(crate) fn being_mapped(&self) -> bool {
        matches!(*self.map_ahead.lock(), MapAhead::Mapping)
    }

    /// Whether the job's evaluations are made ahead (or being made), their host bytes held
    /// there; if not, none will be. The witness map's error if it failed there.
    pub(crate) fn claim_map_ahead(&self) -> Result<bool, JobError> {
        let mut state = self.map_ahead.lock();
        match &*state {
            MapAhead::Mapping | MapAhead::Done(_) => Ok(true),
            MapAhead::Failed(e) => Err(e.clone()),
            MapAhead::NotStarted | MapAhead::Gone => {
                *state = MapAhead::Gone;
                Ok(false)
            }
        }
    }

    /// Waits while the job's evaluations are being made ahead; then those made (`None` if
    /// none were: see [`Self::claim_map_ahead`]), or the witness map's error.
    pub(crate) fn take_map_ahead(&self) -> Result<Option<Mapped>, JobError> {
        let mut state = self.map_ahead.lock();
        while matches!(*state, MapAhead::Mapping) {
            self.read_done
                .wait_for(&mut state, Duration::from_millis(100));
        }
        match std::mem::replace(&mut *state, MapAhead::Gone) {
            MapAhead::Done(m) => Ok(Some(m)),
            MapAhead::Failed(e) => Err(e),
            MapAhead::NotStarted | MapAhead::Mapping | MapAhead::Gone => Ok(None),
        }
    }

    /// Whether a read-ahead thread is reading the job's witness now.
    pub(crate) fn being_read_ahead(&self) -> bool {
        matches!(*self.read_ahead.lock(), ReadAhead::Reading)
    }

    /// Waits while the job's witness is being read or computed ahead; then what the worker
    /// takes of it, or the error its witness function gave there.
    pub(crate) fn take_read_ahead(&self) -> Result<Taken, JobError> {
        let mut state = self.read_ahead.lock();
        while matches!(*state, ReadAhead::Reading) {
            self.read_done
                .wait_for(&mut state, Duration::from_millis(100));
        }
        match std::mem::replace(&mut *state, ReadAhead::Done(None)) {
            ReadAhead::Done(Some(p)) => Ok(Taken::Witness(p)),
            ReadAhead::Reuse(reuse) => Ok(Taken::Storage(reuse)),
            ReadAhead::Failed(e) => Err(e),
            ReadAhead::NotStarted | ReadAhead::Reading | ReadAhead::Done(None) => {
                Ok(Taken::Nothing)
            }
        }
    }
}
