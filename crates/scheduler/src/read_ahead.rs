//! Witness files read ahead of the workers: a worker that reads its job's witness itself
//! leaves the GPU idle for the read (half a second for a 2^24 witness), so queued jobs' files
//! are read by their own threads while the workers prove.
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
use crate::job::{JobShared, ReadAhead, WitnessSource};
use crate::keys::read;

/// Read-aheads check the host gate's room and take from it one at a time.
#[derive(Default)]
pub(crate) struct ReadRoom(Mutex<()>);

impl Inner {
    pub(crate) fn read_ahead_loop(&self) {
        while let Some((job, path, bytes)) = self.next_to_read() {
            let permit = self.take_read_room(bytes);
            let done = permit.and_then(|permit| {
                let start = Instant::now();
                match read(&path, cuzk::read_witness) {
                    Ok(w) => {
                        tracing::debug!(job = job.id, ms = start.elapsed().as_secs_f64() * 1e3, "witness read ahead");
                        let mut slot = job.witness.lock();
                        // The job may have ended meanwhile (its witness taken): drop the read.
                        if matches!(&*slot, Some(WitnessSource::File(_))) {
                            *slot = Some(WitnessSource::Memory(Arc::new(w)));
                            Some(permit)
                        } else {
                            None
                        }
                    }
                    Err(e) => {
                        tracing::debug!(job = job.id, error = %e, "read-ahead failed; the worker reads it");
                        None
                    }
                }
            });
            let mut state = job.read_ahead.lock();
            // A job finished meanwhile has its state reset: the permit goes back at once.
            if matches!(*state, ReadAhead::Reading) {
                *state = ReadAhead::Done(done);
            }
            drop(state);
            job.read_done.notify_all();
        }
    }

    /// The first queued job whose witness file nobody reads yet, marked as being read, while
    /// fewer than `read_ahead` queued jobs hold a read witness; `None` once closing.
    fn next_to_read(&self) -> Option<(Arc<JobShared>, std::path::PathBuf, u64)> {
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
                let Some(WitnessSource::File(path)) = j.witness.lock().clone() else {
                    continue;
                };
                let Some(needs) = self.keys().needs(&j.key) else {
                    continue;
                };
                *state = ReadAhead::Reading;
                return ControlFlow::Break(Some((j.clone(), path, needs.witness)));
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

    /// Waits while the job's witness is being read ahead; then the host bytes its read holds,
    /// if it was read ahead.
    pub(crate) fn take_read_ahead(&self) -> Option<Permit> {
        let mut state = self.read_ahead.lock();
        while matches!(*state, ReadAhead::Reading) {
            self.read_done
                .wait_for(&mut state, Duration::from_millis(100));
        }
        match std::mem::replace(&mut *state, ReadAhead::Done(None)) {
            ReadAhead::Done(p) => p,
            _ => None,
        }
    }
}
