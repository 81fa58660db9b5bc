//! The state of curio's service (`curio.rs`) that the daemon's shared state holds: curio's
//! jobs by id and its per-kind totals. Apart from curio.rs, so that the shared state can hold it
//! without importing curio's service.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::curio_pb as pb;
use crate::filecoin::{Finished, ProofError, Queued};

pub(crate) type Outcome = Arc<(Result<Finished, ProofError>, Duration)>;

/// One proof curio submitted.
pub(crate) struct Job {
    pub(crate) kind: pb::ProofKind,
    pub(crate) queued: Queued,
    pub(crate) result: watch::Receiver<Option<Outcome>>,
    pub(crate) finished: Option<Instant>,
}

/// curio's jobs and per-kind totals.
#[derive(Default)]
pub(crate) struct CurioJobs {
    pub(crate) by_id: HashMap<String, Job>,
    pub(crate) completed: HashMap<&'static str, u64>,
    pub(crate) failed: HashMap<&'static str, u64>,
}

impl CurioJobs {
    /// Each partition's engine job named `{job id}/{partition}`, for the timeline and status.
    pub(crate) fn engine_names(&self) -> HashMap<cuzk_scheduler::JobId, String> {
        let mut out = HashMap::new();
        for (id, j) in &self.by_id {
            for (k, h) in j.queued.partitions().iter().enumerate() {
                out.insert(h.id(), format!("{id}/{}", j.queued.first_partition() + k));
            }
        }
        out
    }

    /// Forgets the jobs finished more than `ttl` ago.
    pub(crate) fn prune(&mut self, ttl: Duration) {
        let now = Instant::now();
        self.by_id
            .retain(|_, j| j.finished.is_none_or(|f| now.duration_since(f) < ttl));
    }
}
