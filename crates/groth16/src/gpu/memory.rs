//! The memory plan: which key queries stay resident and what the largest phase needs free.

use super::*;

/// How one key query is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryPlan {
    pub query: Query,
    pub len: usize,
    /// Device bytes of the points when resident.
    pub point_bytes: u64,
    /// Device bytes one MSM over the query needs besides resident points (its scratch).
    pub run_bytes: u64,
    /// Device bytes one MSM over the query needs when its points stream from host memory
    /// (chunks of points and scalars, scratch): its context is capped at this.
    pub stream_bytes: u64,
    pub resident: bool,
}

impl QueryPlan {
    /// Device bytes one MSM over the query takes, resident or streamed, whichever is more.
    pub fn largest_bytes(&self) -> u64 {
        self.run_bytes.max(self.stream_bytes)
    }

    /// Device bytes one MSM over the query takes as the query is placed.
    pub fn msm_bytes(&self) -> u64 {
        if self.resident {
            self.run_bytes
        } else {
            self.stream_bytes
        }
    }
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
    sizing: Sizing,
}

/// Device bytes of the quotient pipeline for a domain of `n`.
pub fn quotient_bytes(n: usize) -> Result<u64, VramError> {
    Ok(3 * Vram::bytes_for::<Fr>(n)? + SLACK)
}

/// Device bytes of one resident MSM over `len` points besides the points themselves: its
/// scratch (the scalars are canonical where they lie: no copy of them).
pub fn msm_run_bytes(group: Group, len: usize, sm_count: usize) -> Result<u64, VramError> {
    if len == 0 {
        return Ok(0);
    }
    let plan = Plan::new(len, len, None, sm_count);
    Ok(plan.scratch_bytes(group.into()) + SLACK)
}

/// Device bytes of one MSM over `len` points streamed from host memory.
pub fn msm_stream_bytes(group: Group, len: usize, sm_count: usize) -> u64 {
    let chunks = match group {
        Group::G1 => GpuMsm::<G1Affine>::streamed_bytes_for(len, sm_count),
        Group::G2 => GpuMsm::<G2Affine>::streamed_bytes_for(len, sm_count),
    };
    if len == 0 { 0 } else { chunks + SLACK }
}

/// What a resident context over the query's `len` points holds (points and identity bits).
pub(super) fn point_bytes(q: Query, len: usize) -> Result<u64, VramError> {
    if q == Query::BG2 {
        GpuMsm::<G2Affine>::resident_bytes_for(len, 1)
    } else {
        GpuMsm::<G1Affine>::resident_bytes_for(len, 1)
    }
}

/// What a plan's work room holds beside one MSM's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sizing {
    /// A one-shot proof: the witness through the witness MSMs, H through its MSM, or the
    /// quotient's a, b, c.
    OneShot { witness: u64, h: u64 },
    /// An engine's staged proofs: `staging` bytes of staged data beside the lock room.
    Staged { staging: u64 },
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
        // The witness (scalars of A, B, L) stays on the device through its four MSMs, and H
        // (n coefficients) through its MSM.
        let witness_len = lens
            .iter()
            .filter(|(q, _)| *q != Query::H)
            .map(|&(_, len)| len)
            .max()
            .unwrap_or(0);
        let sizing = Sizing::OneShot {
            witness: Vram::bytes_for::<Fr>(witness_len)?,
            h: Vram::bytes_for::<Fr>(n)?,
        };
        Self::placed(n, lens, room, sm_count, sizing)
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
        Self::placed(n, lens, room, sm_count, Sizing::Staged { staging })
    }

    /// Places the queries with the work room of each query's larger run (resident or
    /// streamed), then sets the work room to what the placed queries run with (a large
    /// streamed query runs in chunks, smaller than its resident run).
    fn placed(
        n: usize,
        lens: &[(Query, usize)],
        room: u64,
        sm_count: usize,
        sizing: Sizing,
    ) -> Result<Self, VramError> {
        let queries = lens
            .iter()
            .map(|&(query, len)| {
                let group = query.group();
                Ok(QueryPlan {
                    query,
                    len,
                    point_bytes: point_bytes(query, len)?,
                    run_bytes: msm_run_bytes(group, len, sm_count)?,
                    stream_bytes: msm_stream_bytes(group, len, sm_count),
                    resident: false,
                })
            })
            .collect::<Result<_, VramError>>()?;
        let mut plan = Self {
            room,
            quotient_bytes: quotient_bytes(n)?,
            work_bytes: 0,
            overlap_upload: false,
            queries,
            sizing,
        };
        plan.work_bytes = plan.work(QueryPlan::largest_bytes).0;
        plan.place();
        plan.settle();
        Ok(plan)
    }

    /// The work room, and a one-shot proof's largest witness phase, with each query's MSM
    /// taking `msm` bytes.
    fn work(&self, msm: impl Fn(&QueryPlan) -> u64) -> (u64, u64) {
        match self.sizing {
            Sizing::OneShot { witness, h } => {
                let (mut work, mut witness_work) = (self.quotient_bytes, 0u64);
                for qp in &self.queries {
                    let held = if qp.query == Query::H { h } else { witness };
                    work = work.max(msm(qp) + held);
                    if qp.query != Query::H {
                        witness_work = witness_work.max(msm(qp) + held);
                    }
                }
                (work, witness_work)
            }
            Sizing::Staged { staging } => {
                let lock = self.queries.iter().map(&msm).max().unwrap_or(0).max(SLACK);
                (lock.saturating_add(staging), 0)
            }
        }
    }

    /// Sets the work room (and a one-shot proof's upload overlap) from the placement.
    fn settle(&mut self) {
        let (work, witness_work) = self.work(QueryPlan::msm_bytes);
        self.work_bytes = work;
        self.overlap_upload = matches!(self.sizing, Sizing::OneShot { .. })
            && self
                .resident_bytes()
                .saturating_add(work.max(witness_work.saturating_add(self.quotient_bytes)))
                <= self.room;
    }

    /// The most one device phase of a staged proof allocates: one MSM's run as its query is
    /// placed (resident: its scalars and scratch; streamed: its chunks), or the quotient's
    /// slack.
    pub fn lock_bytes(&self) -> u64 {
        self.queries
            .iter()
            .map(QueryPlan::msm_bytes)
            .max()
            .unwrap_or(0)
            .max(SLACK)
    }

    /// Makes queries resident in priority order while they fit beside the work room.
    fn place(&mut self) {
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
    }

    /// The plan of a key whose points the backend holds already, resident or in its pinned
    /// memory (there is no host copy to load from): each query as `resident` says it is held;
    /// a, b, c upload under the lock, never beside the witness MSMs.
    pub fn as_held(mut self, resident: impl Fn(Query) -> bool) -> Self {
        for qp in self.queries.iter_mut() {
            qp.resident = qp.len > 0 && resident(qp.query);
        }
        self.settle();
        self.overlap_upload = false;
        self
    }

    /// Device bytes one streamed MSM may take: a staged plan's lock room (the staged data
    /// beside it has room of its own, which a streamed MSM must not take); `None` for a
    /// one-shot proof, whose MSM may take what the budget has.
    pub fn streamed_cap(&self) -> Option<u64> {
        match self.sizing {
            Sizing::Staged { .. } => Some(self.lock_bytes()),
            Sizing::OneShot { .. } => None,
        }
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
