//! The device buffers of one batch, and the cache that keeps them between MSMs (a reclaimable
//! part of the budget).

use super::*;

/// Device buffers of one batch; allocated together so that a failure frees them all.
pub(super) struct Scratch<P: MsmPoint> {
    pub(super) counts: DeviceBuffer<u32>,
    pub(super) offsets: DeviceBuffer<u32>,
    pub(super) cursors: DeviceBuffer<u32>,
    pub(super) sorted: DeviceBuffer<u32>,
    /// Binned sort: bin offsets (nbins + 1) and the oversized-bin flag.
    pub(super) bins: DeviceBuffer<u32>,
    pub(super) buckets: DeviceBuffer<u64>,
    pub(super) keys_a: DeviceBuffer<u32>,
    pub(super) pts_a: DeviceBuffer<u64>,
    pub(super) keys_b: DeviceBuffer<u32>,
    pub(super) pts_b: DeviceBuffer<u64>,
    pub(super) reduced: DeviceBuffer<u64>,
    pub(super) ones: DeviceBuffer<u64>,
    /// Window sums then the ones sum, Jacobian, for the host.
    pub(super) out: DeviceBuffer<P::Projective>,
}

impl<P: MsmPoint> Scratch<P> {
    /// Element counts of the buffers, in field order.
    pub(super) fn lens(plan: &Plan) -> [usize; 13] {
        let w = curve::<P>().xyzz_words();
        let nk = plan.nkeys();
        [
            plan.sort_bins(),
            nk + 1,
            nk,
            plan.sorted_cap,
            plan.sort_bins() + 2,
            (nk + 1) * w,
            2 * plan.threads,
            2 * plan.threads * w,
            plan.level1(),
            plan.level1() * w,
            plan.sets * plan.groups() * w,
            plan.ones_threads * w,
            plan.sets + 1,
        ]
    }

    pub(super) fn new(gpu: &Gpu, plan: &Plan) -> Result<Self, MsmError> {
        let v = gpu.vram();
        let l = Self::lens(plan);
        Ok(Self {
            counts: v.alloc(l[0])?,
            offsets: v.alloc(l[1])?,
            cursors: v.alloc(l[2])?,
            sorted: v.alloc(l[3])?,
            bins: v.alloc(l[4])?,
            buckets: v.alloc(l[5])?,
            keys_a: v.alloc(l[6])?,
            pts_a: v.alloc(l[7])?,
            keys_b: v.alloc(l[8])?,
            pts_b: v.alloc(l[9])?,
            reduced: v.alloc(l[10])?,
            ones: v.alloc(l[11])?,
            out: v.alloc(l[12])?,
        })
    }

    /// Whether every buffer is at least as large as `plan` needs. Every launch wrapper takes
    /// its sizes from the plan and only checks buffers are large enough, and every buffer is
    /// zeroed or fully written before it is read, so a larger cached scratch is equivalent.
    pub(super) fn fits(&self, plan: &Plan) -> bool {
        let have = [
            self.counts.len(),
            self.offsets.len(),
            self.cursors.len(),
            self.sorted.len(),
            self.bins.len(),
            self.buckets.len(),
            self.keys_a.len(),
            self.pts_a.len(),
            self.keys_b.len(),
            self.pts_b.len(),
            self.reduced.len(),
            self.ones.len(),
            self.out.len(),
        ];
        have.iter().zip(Self::lens(plan)).all(|(&h, w)| h >= w)
    }
}

/// Buffers a context may keep between MSMs (see [`GpuMsm::keep_scratch`]); the pinned
/// staging slots for host scalars are kept in any case (host memory, 32 MiB at most).
pub(super) struct Cache<P: MsmPoint> {
    pub(super) canon: Option<DeviceBuffer<Fr>>,
    pub(super) counters: Option<DeviceBuffer<u32>>,
    pub(super) scratch: Option<Scratch<P>>,
    pub(super) staging: Option<Staging<Fr>>,
}

impl<P: MsmPoint> Cache<P> {
    /// Device bytes held (the staging slots are host memory).
    pub(super) fn device_bytes(&self) -> u64 {
        let mut b = self.canon.as_ref().map_or(0, |x| x.reserved_bytes());
        b += self.counters.as_ref().map_or(0, |x| x.reserved_bytes());
        if let Some(s) = &self.scratch {
            b += s.counts.reserved_bytes()
                + s.offsets.reserved_bytes()
                + s.cursors.reserved_bytes()
                + s.sorted.reserved_bytes()
                + s.bins.reserved_bytes()
                + s.buckets.reserved_bytes()
                + s.keys_a.reserved_bytes()
                + s.pts_a.reserved_bytes()
                + s.keys_b.reserved_bytes()
                + s.pts_b.reserved_bytes()
                + s.reduced.reserved_bytes()
                + s.ones.reserved_bytes()
                + s.out.reserved_bytes();
        }
        b
    }
}

/// A context's cache, registered with the device budget: the device buffers it keeps between
/// calls count as available budget and are freed when a request needs them, so a kept
/// scratch never makes another allocation fail or wait. A call in progress has taken the
/// buffers out, so only idle ones are ever reclaimed.
pub(super) struct KeptCache<P: MsmPoint>(pub(super) Mutex<Cache<P>>);

impl<P: MsmPoint> KeptCache<P> {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Cache<P>> {
        // A panic while holding the lock leaves only buffers behind: still usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<P: MsmPoint> Reclaim for KeptCache<P> {
    fn reclaimable(&self) -> u64 {
        self.lock().device_bytes()
    }
    fn reclaim(&self) {
        let mut c = self.lock();
        let taken = (c.canon.take(), c.counters.take(), c.scratch.take());
        drop(c);
        drop(taken); // freed outside the lock
    }
}

impl<P: MsmPoint> Default for Cache<P> {
    fn default() -> Self {
        Self {
            canon: None,
            counters: None,
            scratch: None,
            staging: None,
        }
    }
}
