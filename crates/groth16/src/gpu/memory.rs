//! The memory plan: which key queries stay resident and what the largest phase needs free.

use super::*;

/// How one key query is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryPlan {
    pub query: Query,
    pub len: usize,
    /// Device bytes of the points when resident.
    pub point_bytes: u64,
    /// Device bytes one MSM over the query needs besides the points (scalars, scratch).
    pub run_bytes: u64,
    pub resident: bool,
}

/// What a proof needs on the device and which key queries stay resident (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Device bytes available to the plan: the free budget plus what this backend holds.
    pub room: u64,
    /// The quotient's three vectors of n Fr (and slack).
    pub quotient_bytes: u64,
    /// The largest transient need of any phase (the quotient; the witness on the device with
    /// one witness MSM's run; H on the device with the H MSM's run); kept free beside the
    /// resident points.
    pub work_bytes: u64,
    /// Whether a, b, c can be uploaded while the witness MSMs run (their vectors fit beside
    /// the resident points and the largest witness MSM).
    pub overlap_upload: bool,
    pub queries: Vec<QueryPlan>,
}

/// Device bytes of the quotient pipeline for a domain of `n`.
pub fn quotient_bytes(n: usize) -> Result<u64, VramError> {
    Ok(3 * Vram::bytes_for::<Fr>(n)? + SLACK)
}

/// Device bytes of one resident MSM over `len` points besides the points themselves.
pub fn msm_run_bytes(group: Group, len: usize, sm_count: usize) -> Result<u64, VramError> {
    if len == 0 {
        return Ok(0);
    }
    let plan = Plan::new(len, len, None, sm_count);
    Ok(Vram::bytes_for::<Fr>(len)? + plan.scratch_bytes(group.into()) + SLACK)
}

/// What a resident context over the query's `len` points holds (points and identity bits).
pub(super) fn point_bytes(q: Query, len: usize) -> Result<u64, VramError> {
    if q == Query::BG2 {
        GpuMsm::<G2Affine>::resident_bytes_for(len, 1)
    } else {
        GpuMsm::<G1Affine>::resident_bytes_for(len, 1)
    }
}

impl MemoryPlan {
    /// The plan of a one-shot proof for a domain of `n` and the given query lengths within
    /// `room` bytes: the witness and a, b, c are allocated inside the proof's phases, so the
    /// work room covers them.
    pub fn new(
        n: usize,
        lens: &[(Query, usize)],
        room: u64,
        sm_count: usize,
    ) -> Result<Self, VramError> {
        let quotient = quotient_bytes(n)?;
        // The witness (scalars of A, B, L) stays on the device through its four MSMs, and H
        // (n coefficients) through its MSM.
        let witness_len = lens
            .iter()
            .filter(|(q, _)| *q != Query::H)
            .map(|&(_, len)| len)
            .max()
            .unwrap_or(0);
        let witness = Vram::bytes_for::<Fr>(witness_len)?;
        let h = Vram::bytes_for::<Fr>(n)?;
        let queries = Self::query_plans(lens, sm_count)?;
        let mut work = quotient;
        let mut witness_work = 0u64;
        for qp in &queries {
            let held = if qp.query == Query::H { h } else { witness };
            work = work.max(qp.run_bytes + held);
            if qp.query != Query::H {
                witness_work = witness_work.max(qp.run_bytes + held);
            }
        }
        let mut plan = Self {
            room,
            quotient_bytes: quotient,
            work_bytes: work,
            overlap_upload: false,
            queries,
        };
        let used = plan.place();
        plan.overlap_upload = used
            .saturating_sub(work)
            .saturating_add(work.max(witness_work + quotient))
            <= room;
        Ok(plan)
    }

    /// The plan of an engine that stages each proof's witness and a, b, c into reservations of
    /// its own: the work room is the most one device phase allocates ([`Self::lock_bytes`])
    /// plus `staging` bytes left for the staged data of the proofs in flight.
    pub fn staged(
        n: usize,
        lens: &[(Query, usize)],
        room: u64,
        sm_count: usize,
        staging: u64,
    ) -> Result<Self, VramError> {
        let mut plan = Self {
            room,
            quotient_bytes: quotient_bytes(n)?,
            work_bytes: 0,
            overlap_upload: false,
            queries: Self::query_plans(lens, sm_count)?,
        };
        plan.work_bytes = plan.lock_bytes().saturating_add(staging);
        plan.place();
        Ok(plan)
    }

    /// The most one device phase of a staged proof allocates: one MSM's run (its scalars,
    /// scratch and small buffers), or the quotient's slack.
    pub fn lock_bytes(&self) -> u64 {
        self.queries
            .iter()
            .map(|q| q.run_bytes)
            .max()
            .unwrap_or(0)
            .max(SLACK)
    }

    fn query_plans(lens: &[(Query, usize)], sm_count: usize) -> Result<Vec<QueryPlan>, VramError> {
        lens.iter()
            .map(|&(query, len)| {
                let group = query.group();
                Ok(QueryPlan {
                    query,
                    len,
                    point_bytes: point_bytes(query, len)?,
                    run_bytes: msm_run_bytes(group, len, sm_count)?,
                    resident: false,
                })
            })
            .collect()
    }

    /// Makes queries resident in priority order while they fit beside the work room; returns
    /// the bytes used.
    fn place(&mut self) -> u64 {
        let mut used = self.work_bytes;
        for q in PRIORITY {
            for qp in self
                .queries
                .iter_mut()
                .filter(|p| p.query == q && p.len > 0)
            {
                if used.saturating_add(qp.point_bytes) <= self.room {
                    used += qp.point_bytes;
                    qp.resident = true;
                }
            }
        }
        used
    }

    /// The plan of a key whose points the backend holds already, resident or in its pinned
    /// memory (there is no host copy to load from): each query as `resident` says it is held;
    /// a, b, c upload under the lock, never beside the witness MSMs.
    pub fn as_held(mut self, resident: impl Fn(Query) -> bool) -> Self {
        for qp in self.queries.iter_mut() {
            qp.resident = qp.len > 0 && resident(qp.query);
        }
        self.overlap_upload = false;
        self
    }

    pub fn resident_bytes(&self) -> u64 {
        self.queries
            .iter()
            .filter(|q| q.resident)
            .map(|q| q.point_bytes)
            .sum()
    }

    /// Whether the plan is expected to run within its room (else some phase will fail).
    pub fn fits(&self) -> bool {
        self.resident_bytes().saturating_add(self.work_bytes) <= self.room
    }

    pub fn is_resident(&self, q: Query) -> bool {
        self.queries.iter().any(|p| p.query == q && p.resident)
    }
}
