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
//! of the largest loaded key) is still free. So when every worker waits on the gate and none
//! runs, what the gate holds is read-ahead bytes alone, and the room left beside them admits
//! any one job: the queue always moves. At most [`MAP_AHEAD`] queued jobs hold evaluations
//! made ahead (each a pinned set of three domain-sized vectors: 12.9 GB at 2^27).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_formats::cuzk;
use parking_lot::Mutex;

use crate::engine::Inner;
use crate::gate::Permit;
use crate::job::{
    JobError, JobShared, MapAhead, Mapped, READ_AHEAD_LANE, ReadAhead, Span, SpanKind, WitnessFn,
    WitnessSource, compute_witness,
};
use crate::keys::read;

/// Read-aheads check the host gate's room and take from it one at a time.
#[derive(Default)]
pub(crate) struct ReadRoom(Mutex<()>);

/// Queued jobs that may hold evaluations made ahead at once: one covers the next job's, the
/// only ones a worker waits for.
pub(crate) const MAP_AHEAD: usize = 1;

/// What a read-ahead does for one job.
enum Ahead {
    Witness(Make),
    /// A·z, B·z, C·z of a witness in memory, in device `device`'s evaluation set.
    Map(Arc<cuzk_groth16::Witness>, usize),
}

/// How a witness is made ahead.
enum Make {
    Read(std::path::PathBuf),
    Compute(WitnessFn),
}

impl Inner {
    /// Read-ahead thread `r`.
    pub(crate) fn read_ahead_loop(&self, r: usize) {
        while let Some((job, ahead, bytes)) = self.next_to_read() {
            let make = match ahead {
                Ahead::Witness(make) => make,
                Ahead::Map(witness, device) => {
                    let done = match self.take_read_room(bytes) {
                        None => None,
                        Some(permit) => self.map_ahead(&job, &witness, device, r, permit),
                    };
                    let mut state = job.map_ahead.lock();
                    // A job finished meanwhile has its state reset: the set goes back at once.
                    if matches!(*state, MapAhead::Mapping) {
                        *state = MapAhead::Done(done);
                    }
                    drop(state);
                    job.read_done.notify_all();
                    continue;
                }
            };
            let done = match self.take_read_room(bytes) {
                None => ReadAhead::Done(None),
                Some(permit) => self.do_ahead(&job, &make, r, permit),
            };
            let mut state = job.read_ahead.lock();
            // A job finished meanwhile has its state reset: the permit goes back at once.
            if matches!(*state, ReadAhead::Reading) {
                *state = done;
            }
            drop(state);
            job.read_done.notify_all();
        }
    }

    /// `job`'s evaluations in a set lent by device `device`'s backend, holding `permit` for
    /// them; `None` if they could not be made (the worker makes them, and reports any error).
    fn map_ahead(
        &self,
        job: &JobShared,
        witness: &cuzk_groth16::Witness,
        device: usize,
        r: usize,
        permit: Permit,
    ) -> Option<Mapped> {
        let key = self.keys().get(&job.key)?;
        let lender = key.on.get(device)?.as_ref()?.backend.clone();
        let t0 = self.now();
        let mut abc = lender.evaluation_buffers(key.domain.size()).ok()?;
        let made = cuzk_groth16::witness_map(&key.r1cs, witness.assignment(), &mut abc);
        self.record(Span {
            job: job.id,
            device,
            worker: READ_AHEAD_LANE + r,
            phase: "witness map ahead",
            kind: SpanKind::Cpu,
            start: t0,
            end: self.now(),
        });
        // Kept only when made: the set goes back to its lender either way.
        let mapped = Mapped::new(device, abc, lender, permit);
        made.is_ok().then_some(mapped)
    }

    /// Reads or computes `job`'s witness into its slot, holding `permit` for it.
    fn do_ahead(&self, job: &JobShared, make: &Make, r: usize, permit: Permit) -> ReadAhead {
        let start = Instant::now();
        let made = match make {
            Make::Read(path) => read(path, cuzk::read_witness).map_err(|e| e.to_string()),
            Make::Compute(f) => {
                let t0 = self.now();
                let made = compute_witness(f);
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

    /// The first queued job whose witness nobody reads or computes yet, marked as being read,
    /// while fewer than `read_ahead` queued jobs hold a witness made ahead; `None` once
    /// closing.
    fn next_to_read(&self) -> Option<(Arc<JobShared>, Ahead, u64)> {
        self.queue().wait(|jobs| {
            if self.closing_hard() || (self.closing() && jobs.is_empty()) {
                return ControlFlow::Break(None);
            }
            if let Some(map) = self.next_to_map(jobs) {
                return ControlFlow::Break(Some(map));
            }
            let held = jobs
                .iter()
                .filter(|j| matches!(*j.read_ahead.lock(), ReadAhead::Done(Some(_))))
                .count();
            if held >= self.config().read_ahead {
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
                let ahead = match j.witness.lock().clone() {
                    Some(WitnessSource::File(path)) => Ahead::Witness(Make::Read(path)),
                    Some(WitnessSource::Compute(f)) => Ahead::Witness(Make::Compute(f)),
                    _ => continue,
                };
                let Some(needs) = self.keys().needs(&j.key) else {
                    continue;
                };
                *state = ReadAhead::Reading;
                return ControlFlow::Break(Some((j.clone(), ahead, needs.witness)));
            }
            ControlFlow::Continue(())
        })
    }

    /// The first queued job whose witness is in memory and whose evaluations nobody makes
    /// yet, marked as being mapped, while fewer than [`MAP_AHEAD`] queued jobs hold or make
    /// theirs.
    fn next_to_map(&self, jobs: &crate::queue::Jobs) -> Option<(Arc<JobShared>, Ahead, u64)> {
        let ahead = |j: &JobShared| {
            matches!(
                *j.map_ahead.lock(),
                MapAhead::Mapping | MapAhead::Done(Some(_))
            )
        };
        if jobs.iter().filter(|j| ahead(j)).count() >= MAP_AHEAD {
            return None;
        }
        jobs.iter().find_map(|j| {
            if j.cancelled() || j.being_read_ahead() {
                return None;
            }
            let mut state = j.map_ahead.lock();
            if !matches!(*state, MapAhead::NotStarted) {
                return None;
            }
            let Some(WitnessSource::Memory(witness)) = j.witness.lock().clone() else {
                return None;
            };
            let key = self.keys().get(&j.key)?;
            let device = j
                .device
                .or_else(|| key.on.iter().position(Option::is_some))?;
            let bytes = key.on.get(device)?.as_ref()?.needs.evaluations;
            *state = MapAhead::Mapping;
            Some((j.clone(), Ahead::Map(witness, device), bytes))
        })
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

impl JobShared {
    /// Whether a read-ahead thread is making the job's evaluations now.
    pub(crate) fn being_mapped(&self) -> bool {
        matches!(*self.map_ahead.lock(), MapAhead::Mapping)
    }

    /// Waits while the job's evaluations are being made ahead; then those made, if any.
    pub(crate) fn take_map_ahead(&self) -> Option<Mapped> {
        let mut state = self.map_ahead.lock();
        while matches!(*state, MapAhead::Mapping) {
            self.read_done
                .wait_for(&mut state, Duration::from_millis(100));
        }
        match std::mem::replace(&mut *state, MapAhead::Done(None)) {
            MapAhead::Done(m) => m,
            MapAhead::NotStarted | MapAhead::Mapping => None,
        }
    }

    /// Whether a read-ahead thread is reading the job's witness now.
    pub(crate) fn being_read_ahead(&self) -> bool {
        matches!(*self.read_ahead.lock(), ReadAhead::Reading)
    }

    /// Waits while the job's witness is being read or computed ahead; then the host bytes
    /// that holds, if it was made ahead, or the error its witness function gave there.
    pub(crate) fn take_read_ahead(&self) -> Result<Option<Permit>, JobError> {
        let mut state = self.read_ahead.lock();
        while matches!(*state, ReadAhead::Reading) {
            self.read_done
                .wait_for(&mut state, Duration::from_millis(100));
        }
        match std::mem::replace(&mut *state, ReadAhead::Done(None)) {
            ReadAhead::Done(p) => Ok(p),
            ReadAhead::Failed(e) => Err(e),
            ReadAhead::NotStarted | ReadAhead::Reading => Ok(None),
        }
    }
}
