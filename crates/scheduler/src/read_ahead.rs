//! Witnesses read or computed ahead of the workers: a worker that reads its job's witness
//! itself leaves the GPU idle for the read (half a second for a 2^24 witness), and one that
//! computes it (a Filecoin partition's synthesis: seconds) leaves it idle longer, so queued
//! jobs' files are read, and their witness functions run, on threads of their own while the
//! workers prove. A computed witness's span is on the timeline lane of its thread
//! ([`READ_AHEAD_LANE`]` + r`).
//!
//! **Memory argument.** A read-ahead holds the witness's host bytes from the host gate until
//! its job ends. It takes them only when no job waits on the gate and, after taking them, room
//! for one whole job (witness and evaluations of the largest loaded key) is still free. So when
//! every worker waits on the gate and none runs, what the gate holds is read-ahead bytes alone,
//! and the room left beside them admits any one job: the queue always moves.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_formats::cuzk;
use parking_lot::Mutex;

use crate::engine::Inner;
use crate::gate::Permit;
use crate::job::{
    JobError, JobShared, READ_AHEAD_LANE, ReadAhead, Span, SpanKind, WitnessFn, WitnessSource,
    compute_witness,
};
use crate::keys::read;

/// Read-aheads check the host gate's room and take from it one at a time.
#[derive(Default)]
pub(crate) struct ReadRoom(Mutex<()>);

/// What a read-ahead does for one job.
enum Ahead {
    Read(std::path::PathBuf),
    Compute(WitnessFn),
}

impl Inner {
    /// Read-ahead thread `r`.
    pub(crate) fn read_ahead_loop(&self, r: usize) {
        while let Some((job, ahead, bytes)) = self.next_to_read() {
            let done = match self.take_read_room(bytes) {
                None => ReadAhead::Done(None),
                Some(permit) => self.do_ahead(&job, &ahead, r, permit),
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

    /// Reads or computes `job`'s witness into its slot, holding `permit` for it.
    fn do_ahead(&self, job: &JobShared, ahead: &Ahead, r: usize, permit: Permit) -> ReadAhead {
        let start = Instant::now();
        let made = match ahead {
            Ahead::Read(path) => read(path, cuzk::read_witness).map_err(|e| e.to_string()),
            Ahead::Compute(f) => {
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
                    Some(WitnessSource::File(path)) => Ahead::Read(path),
                    Some(WitnessSource::Compute(f)) => Ahead::Compute(f),
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
