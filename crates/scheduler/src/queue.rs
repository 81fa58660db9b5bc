//! The job queue: queued jobs by priority then arrival, the wake-ups of the threads that wait
//! on it, and the count of running jobs.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::gate::Rank;
use crate::job::{JobId, JobShared, Priority};

/// How long a waiter sleeps before it looks at the queue again unwoken (closing, admission).
const WAKE: Duration = Duration::from_millis(100);

/// The queue (crate docs): the first eligible entry runs next.
#[derive(Default)]
pub(crate) struct Queue {
    jobs: Mutex<Jobs>,
    cond: Condvar,
    running: AtomicU64,
    next_id: AtomicU64,
}

/// The queued jobs, as a waiter of [`Queue::wait`] sees them.
#[derive(Default)]
pub(crate) struct Jobs(BTreeMap<(u8, u64), Arc<JobShared>>);

fn place(job: &JobShared) -> (u8, u64) {
    (job.priority.rank(), job.seq)
}

impl Jobs {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Queued jobs, the next to run first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<JobShared>> {
        self.0.values()
    }

    /// Takes out the first job `eligible` accepts.
    pub(crate) fn take_first(
        &mut self,
        eligible: impl Fn(&JobShared) -> bool,
    ) -> Option<Arc<JobShared>> {
        let k = *self.0.iter().find(|(_, j)| eligible(j))?.0;
        self.0.remove(&k)
    }
}

impl Queue {
    /// A new job's id (ids also order jobs of one priority).
    pub(crate) fn next_id(&self) -> JobId {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Queues `job` (again, after a retry) and wakes the waiters.
    pub(crate) fn push(&self, job: Arc<JobShared>) {
        self.jobs.lock().0.insert(place(&job), job);
        self.notify();
    }

    /// Takes `job` out if it is still queued.
    pub(crate) fn remove(&self, job: &JobShared) -> Option<Arc<JobShared>> {
        self.jobs.lock().0.remove(&place(job))
    }

    /// Takes out every queued job `which` accepts.
    pub(crate) fn remove_all(&self, which: impl Fn(&JobShared) -> bool) -> Vec<Arc<JobShared>> {
        let mut jobs = self.jobs.lock();
        let keys: Vec<_> = jobs
            .0
            .iter()
            .filter(|(_, j)| which(j))
            .map(|(k, _)| *k)
            .collect();
        keys.iter().filter_map(|k| jobs.0.remove(k)).collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.jobs.lock().is_empty()
    }

    /// Queued jobs per priority, highest first.
    pub(crate) fn counts(&self) -> [(Priority, usize); 3] {
        let jobs = self.jobs.lock();
        Priority::ALL.map(|p| (p, jobs.0.keys().filter(|(r, _)| *r == p.rank()).count()))
    }

    /// Wakes every waiter to look at the queue again (a key loaded, room freed, closing).
    pub(crate) fn notify(&self) {
        self.cond.notify_all();
    }

    /// Looks at the queued jobs with `f` once.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&Jobs) -> T) -> T {
        f(&self.jobs.lock())
    }

    /// Looks at the queued jobs with `f` until it breaks with its answer, sleeping between
    /// looks until woken (or [`WAKE`] passed).
    pub(crate) fn wait<T>(&self, mut f: impl FnMut(&mut Jobs) -> ControlFlow<T>) -> T {
        let mut jobs = self.jobs.lock();
        loop {
            if let ControlFlow::Break(t) = f(&mut jobs) {
                return t;
            }
            self.cond.wait_for(&mut jobs, WAKE);
        }
    }

    /// A job taken from the queue starts running.
    pub(crate) fn started(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    /// A running job ended or went back to the queue.
    pub(crate) fn stopped(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn running(&self) -> u64 {
        self.running.load(Ordering::SeqCst)
    }
}
