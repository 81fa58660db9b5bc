//! GPU Pippenger MSM (kernels: `kernels/msm/pippenger.cuh`; launches: `crate::kernels`).
//!
//! A [`GpuMsm`] owns a set of points, either resident in VRAM (uploaded once, or handed over
//! already on the device) or streamed in chunks from pinned host memory when they do not fit
//! the budget; each [`GpuMsm::msm`] call multiplies them by a new scalar vector. Scalars are
//! given in Montgomery form (host slice or device buffer) and made canonical in a copy on the
//! device, or already canonical on the device ([`CanonicalScalars`]) and read where they lie.
//! Zero scalars cost nothing, nor do the scalars of identity points in resident mode (a bit per
//! point, made when the points arrive: proving keys hold many), scalars equal to one are summed
//! by plain mixed additions, the rest go through signed-digit Pippenger with a counting sort
//! per window and balanced XYZZ bucket accumulation. The host only adds the per-window sums (≈ 256 doublings).
//!
//! A resident context may also hold precomputed copies of its points
//! ([`GpuMsm::resident_precomputed`]): copy j holds `[2^(c·h·j)] P`, so the windows of one
//! scalar share h bucket sets instead of using one each (window folding): the same mixed
//! additions, a bucket reduction and final combination ~m times smaller, m times the points'
//! memory.

use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use cuzk_field::Fr;
use cuzk_gpu::transfer::{ResultRing, Staging, with_uploads};
use cuzk_gpu::{
    DeviceBuffer, Event, Gpu, GpuError, PinnedBuffer, Reclaim, Stream, Vram, VramError,
};
use rayon::prelude::*;

use crate::kernels::{self as k, Curve, Windows};
use crate::{Group, MsmError, MsmPoint};

/// Largest supported n (point indices carry a sign bit in 32).
pub const MAX_POINTS: usize = 1 << 27;
/// Partials reduced per thread in the merge levels.
const FAN_IN: usize = 8;
/// Threads per SM every point kernel keeps resident, whatever the curve (G1's accumulation
/// fits more: `Curve::resident_threads_per_sm`).
const THREADS_PER_SM: usize = 256;
/// Streamed mode splits n >= this into at least `MIN_CHUNKS` chunks even when everything
/// fits, so that chunk i+1's upload hides behind chunk i's compute (one chunk = no overlap).
const OVERLAP_MIN_N: usize = 1 << 22;
const MIN_CHUNKS: usize = 4;
/// Device bytes a planned streamed MSM's chunks take at most ([`GpuMsm::streamed_bytes_for`]):
/// 2^22 G1 points (3.7 GB, 400 MB of points per upload) or 2^21 G2 points (2.5 GB), which
/// leaves room on a 16 GiB card for a 2^27 proof's a, b, c (12.9 GB) beside one MSM.
pub const STREAM_PLAN_BYTES: u64 = 4_000_000_000;
/// Largest window a plan accepts (table, `with_window_bits`, `CUZK_MSM_WINDOW`).
pub const MAX_WINDOW_BITS: u32 = 22;
/// Largest window the cost model picks (beyond it the buckets outgrow what accumulation saves,
/// by the model; measured rows of [`MEASURED_WINDOWS`] may go up to [`MAX_WINDOW_BITS`]).
const MODEL_MAX_WINDOW_BITS: u32 = 20;
/// Entries a sort bin should hold on average (the shared-memory tile holds `SORT_TILE` =
/// 8192, so a typical bin fits with room for its random spread).
const SORT_BIN_TARGET: f64 = 4096.0;

/// Host scalars of at least this many elements are staged through pinned memory.
const STAGE_MIN: usize = 1 << 16;
/// Elements per pinned staging slot (16 MiB of scalars).
const STAGE_SLOT: usize = 1 << 19;
/// Elements per task of the parallel copy into a staging slot (1 MiB).
const STAGE_TASK: usize = 1 << 15;

mod exec;
mod plan;
mod profile;
mod scratch;
#[cfg(test)]
mod tests;

use plan::*;
pub use plan::{MEASURED_WINDOWS, Plan};
pub use profile::MsmProfile;
use profile::*;
use scratch::*;

enum Points<P: MsmPoint> {
    /// The points, then any precomputed copies ([`Precomputed`]), each `len` points.
    Resident(DeviceBuffer<P>),
    Streamed(PinnedBuffer<P>),
}

/// Precomputed copies of a resident context's points for [`GpuMsm::resident_precomputed`]:
/// how many, and optionally the window they are made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precompute {
    copies: usize,
    window_bits: Option<u32>,
}

impl Precompute {
    /// `m` copies of the points (m = 1: none; more than the windows need: as many as they
    /// need), for the window an MSM of as many general scalars as points picks
    /// (`CUZK_MSM_WINDOW` if set).
    pub fn copies(m: usize) -> Self {
        Self {
            copies: m.max(1),
            window_bits: None,
        }
    }

    /// Fixes the window (2..=22) of the copies and of every MSM of the context (as
    /// [`GpuMsm::with_window_bits`]), so every call is folded.
    pub fn with_window_bits(mut self, c: u32) -> Self {
        self.window_bits = Some(c.clamp(2, MAX_WINDOW_BITS));
        self
    }
}

/// What a context's precomputed copies are (see [`GpuMsm::precomputed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precomputed {
    /// The window the copies serve: an MSM whose plan picks another window runs unfolded
    /// over copy 0 (the points themselves).
    pub c: u32,
    /// Copies held, the points included: copy j is `[2^(c·sets·j)] P`.
    pub copies: usize,
    /// Bucket sets of a folded MSM: ⌈⌈256 / c⌉ / copies⌉.
    pub sets: usize,
    /// Host time of computing the copies on the device (after the upload; milliseconds).
    pub precompute_ms: f64,
}

/// An MSM context over a fixed set of points; see the module documentation.
pub struct GpuMsm<P: MsmPoint> {
    gpu: Gpu,
    points: Points<P>,
    compute: Stream,
    copy: Stream,
    window_bits: Option<u32>,
    chunk_len: Option<usize>,
    vram_limit: Option<u64>,
    keep_scratch: bool,
    cache: Arc<KeptCache<P>>,
    /// Resident points: which are the identity (one bit each, made at construction); their
    /// scalars are treated as zero, so they are never sorted or added.
    identity: Option<DeviceBuffer<u32>>,
    /// Resident points with precomputed copies (after the points in the same buffer).
    precomputed: Option<Precomputed>,
}

impl<P: MsmPoint> std::fmt::Debug for GpuMsm<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMsm")
            .field("group", &P::GROUP)
            .field("len", &self.len())
            .field("resident", &self.is_resident())
            .field("window_bits", &self.window_bits)
            .field("keep_scratch", &self.keep_scratch)
            .field("precomputed", &self.precomputed)
            .finish()
    }
}

impl<P: MsmPoint> GpuMsm<P> {
    /// A context over `points`, of which the first `len` are the points (the rest: copies).
    fn with_points(gpu: &Gpu, points: Points<P>, len: usize) -> Result<Self, MsmError> {
        if len > MAX_POINTS {
            return Err(MsmError::TooLarge(len));
        }
        let compute = gpu.stream("msm-compute")?;
        let identity = match &points {
            Points::Resident(pts) => {
                let mut bits = gpu.vram().alloc::<u32>(identity_words(len))?;
                k::identity_bits(gpu, &compute, curve::<P>(), pts, len, &mut bits)?;
                Some(bits)
            }
            Points::Streamed(_) => None,
        };
        let cache = Arc::new(KeptCache(Mutex::new(Cache::default())));
        let reclaim: Weak<dyn Reclaim> = Arc::downgrade(&cache) as Weak<KeptCache<P>>;
        gpu.vram().budget().add_reclaimer(reclaim);
        Ok(Self {
            gpu: gpu.clone(),
            points,
            compute,
            copy: gpu.stream("msm-copy")?,
            window_bits: env_window(),
            chunk_len: None,
            vram_limit: None,
            keep_scratch: true,
            cache,
            identity,
            precomputed: None,
        })
    }

    /// Uploads `points` once; they stay in VRAM for every later MSM.
    pub fn resident(gpu: &Gpu, points: &[P]) -> Result<Self, MsmError> {
        if points.len() > MAX_POINTS {
            return Err(MsmError::TooLarge(points.len()));
        }
        Self::with_points(
            gpu,
            Points::Resident(gpu.vram().from_host(points)?),
            points.len(),
        )
    }

    /// Uploads `points` once and computes `pre`'s copies of them on the device (window
    /// folding, see the module documentation): copy j (at `j · len`) holds `[2^(c·h·j)] P_i`,
    /// h = the bucket sets. An MSM whose plan picks the copies' window c sorts window w of
    /// scalar i into bucket set w mod h with point copy w / h; one that picks another window
    /// (few general scalars, or [`Self::with_window_bits`]) runs unfolded over the points.
    /// The copies are charged to the budget with the points for the context's life
    /// ([`Self::resident_bytes_for`]); the construction also needs a scratch of up to 2^20
    /// XYZZ points and fails cleanly (`MsmError::Vram`, nothing kept) when the budget is short.
    pub fn resident_precomputed(
        gpu: &Gpu,
        points: &[P],
        pre: Precompute,
    ) -> Result<Self, MsmError> {
        let n = points.len();
        if n > MAX_POINTS {
            return Err(MsmError::TooLarge(n));
        }
        let c = pre
            .window_bits
            .or_else(env_window)
            .unwrap_or_else(|| Plan::choose_window_for(P::GROUP, n));
        let win = Windows::folded(c, pre.copies, n);
        let copies = win.copies();
        if !win.indices_fit(n) {
            return Err(MsmError::Unsupported(
                "precomputed copies of more than 2^31 points in all",
            ));
        }
        let (v, cv) = (gpu.vram(), curve::<P>());
        let mut buf = v.alloc::<P>(n * copies)?;
        let stream = gpu.stream("msm-precompute")?;
        with_uploads(gpu, &stream, points, |up| up.upload(0, n, &mut buf))?;
        let t = Instant::now();
        if copies > 1 {
            let mut tmp = v.alloc::<u64>(n.min(PRECOMPUTE_CHUNK) * cv.xyzz_words())?;
            let r = k::precompute_copies(
                gpu,
                &stream,
                cv,
                &mut buf,
                n,
                copies,
                win.copy_doublings(),
                &mut tmp,
            );
            // tmp and buf stay alive until every enqueued kernel is done, even after a failure
            let synced = stream.synchronize();
            r?;
            synced?;
        }
        let precompute_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut ctx = Self::with_points(gpu, Points::Resident(buf), n)?;
        ctx.precomputed = Some(Precomputed {
            c,
            copies,
            sets: win.sets as usize,
            precompute_ms,
        });
        if pre.window_bits.is_some() {
            ctx.window_bits = Some(c);
        }
        Ok(ctx)
    }

    /// Points already on the device (e.g. a proving key loaded once per daemon). Work that
    /// writes them on another stream must be complete: this context's stream reads them at
    /// once (to mark the identity points) and on every call.
    pub fn from_device(gpu: &Gpu, points: DeviceBuffer<P>) -> Result<Self, MsmError> {
        let len = points.len();
        Self::with_points(gpu, Points::Resident(points), len)
    }

    /// Points in pinned host memory, streamed to the device in chunks on every MSM.
    pub fn streamed(gpu: &Gpu, points: PinnedBuffer<P>) -> Result<Self, MsmError> {
        let len = points.len();
        Self::with_points(gpu, Points::Streamed(points), len)
    }

    /// Resident if the points and the scratch of a full MSM fit the free budget, otherwise
    /// copied into pinned memory and streamed.
    pub fn new(gpu: &Gpu, points: &[P]) -> Result<Self, MsmError> {
        // Sizing plan: bounds every window and general count a call may use.
        let plan = Plan::new(
            points.len(),
            points.len(),
            env_window(),
            gpu.info().sm_count as usize,
        );
        let need =
            (size_of_val(points) + 64 * points.len()) as u64 + plan.scratch_bytes(curve::<P>());
        if need <= gpu.vram().budget().available() {
            return Self::resident(gpu, points);
        }
        let mut pinned = gpu.vram().pinned::<P>(points.len())?;
        pinned.copy_from_slice(points);
        Self::streamed(gpu, pinned)
    }

    /// Fixes the window size instead of choosing it from the general-scalar count (for
    /// tuning; overrides `CUZK_MSM_WINDOW`, which sets it for every new context).
    pub fn with_window_bits(mut self, c: u32) -> Self {
        self.window_bits = Some(c.clamp(2, MAX_WINDOW_BITS));
        self
    }

    /// As [`Self::with_window_bits`] on an existing context (`None`: the table/model choice).
    pub fn set_window_bits(&mut self, c: Option<u32>) {
        self.window_bits = c.map(|c| c.clamp(2, MAX_WINDOW_BITS));
    }

    /// Resident mode: whether the device buffers of an MSM (scalars, sort and bucket scratch:
    /// ~3.5 GB for G1 at 2^24) stay allocated for the next call, which saves their
    /// cuMemAlloc/cuMemFree (~4.5 ms of a 2^24 G1 MSM). On by default. Kept buffers stay
    /// charged to the VRAM budget but count as available there: a request of the budget that
    /// needs them frees them first ([`cuzk_gpu::Reclaim`]), so keeping never makes another
    /// allocation fail. A call that needs larger buffers frees the kept ones before allocating;
    /// a call that fails, or that ends while another request waits for budget, keeps nothing.
    /// `false` frees them now and after every call.
    pub fn keep_scratch(mut self, keep: bool) -> Self {
        self.keep_scratch = keep;
        if !keep {
            self.release_scratch();
        }
        self
    }

    /// Frees the device buffers kept between calls and the pinned staging slots (their
    /// budget is returned when this returns). A call in progress on another thread keeps what
    /// it uses until it finishes.
    pub fn release_scratch(&self) {
        let taken = std::mem::take(&mut *self.lock_cache());
        drop(taken);
    }

    /// Device bytes currently kept between calls.
    pub fn kept_bytes(&self) -> u64 {
        self.lock_cache().device_bytes()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache<P>> {
        self.cache.lock()
    }

    /// Streamed mode: points per chunk instead of the largest that fits.
    pub fn with_chunk_len(mut self, len: usize) -> Self {
        self.chunk_len = Some(len.max(1));
        self
    }

    /// Caps the device bytes one streamed MSM may use (forces small chunks in tests).
    pub fn with_vram_limit(mut self, bytes: u64) -> Self {
        self.vram_limit = Some(bytes);
        self
    }

    /// As [`Self::with_vram_limit`] on an existing context (`None`: what the budget has).
    pub fn set_vram_limit(&mut self, bytes: Option<u64>) {
        self.vram_limit = bytes;
    }

    /// Device bytes one streamed MSM over `len` points plans for: the chunk halved, as the
    /// MSM halves it, until it takes at most [`STREAM_PLAN_BYTES`] (a caller that caps a
    /// streamed context at this, with [`Self::set_vram_limit`], knows what its MSMs take).
    pub fn streamed_bytes_for(len: usize, sm_count: usize) -> u64 {
        if len == 0 {
            return 0;
        }
        let bytes = |c: usize| {
            let plan = Plan::for_curve(c, c, None, sm_count, curve::<P>());
            exec::chunk_bytes_with::<P>(&plan, c)
        };
        let mut chunk = len;
        while chunk > 1024 && bytes(chunk) > STREAM_PLAN_BYTES {
            chunk = chunk.div_ceil(2);
        }
        bytes(chunk)
    }

    pub fn len(&self) -> usize {
        match &self.points {
            Points::Resident(b) => b.len() / self.precomputed.map_or(1, |p| p.copies),
            Points::Streamed(b) => b.len(),
        }
    }

    /// The precomputed copies of a [`Self::resident_precomputed`] context.
    pub fn precomputed(&self) -> Option<Precomputed> {
        self.precomputed
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn is_resident(&self) -> bool {
        matches!(self.points, Points::Resident(_))
    }

    /// Device bytes a resident context over `len` points with `copies` copies of them (1:
    /// just the points; see [`Self::resident_precomputed`]) holds for its life: the points,
    /// the copies and the identity bits (scratch comes and goes with each call, see
    /// [`Plan::scratch_bytes`]).
    pub fn resident_bytes_for(len: usize, copies: usize) -> Result<u64, VramError> {
        let all = len
            .checked_mul(copies.max(1))
            .ok_or_else(|| VramError::InvalidSize(format!("{len} points × {copies} copies")))?;
        Ok(Vram::bytes_for::<P>(all)? + Vram::bytes_for::<u32>(identity_words(len))?)
    }

    /// Device bytes this context holds for its life ([`Self::resident_bytes_for`]; 0 when
    /// streamed), not counting a kept scratch ([`Self::kept_bytes`]).
    pub fn resident_bytes(&self) -> u64 {
        match &self.points {
            Points::Resident(p) => {
                p.reserved_bytes() + self.identity.as_ref().map_or(0, |b| b.reserved_bytes())
            }
            Points::Streamed(_) => 0,
        }
    }
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }
    /// The stream every kernel runs on (record events on it to time an MSM).
    pub fn stream(&self) -> &Stream {
        &self.compute
    }

    /// `Σ scalars[i] · points[i]`, scalars in Montgomery form on the host (staged through
    /// pinned memory when resident and large).
    pub fn msm(&self, scalars: &[Fr]) -> Result<P::Projective, MsmError> {
        self.check_len(scalars.len())?;
        match &self.points {
            Points::Resident(pts) => self.resident_msm(pts, Source::Host(scalars), None),
            Points::Streamed(host) => self.streamed_msm(host, Source::Host(scalars)),
        }
    }

    /// As [`Self::msm`] with the scalars (Montgomery form) already on this device.
    pub fn msm_device(&self, scalars: &DeviceBuffer<Fr>) -> Result<P::Projective, MsmError> {
        self.check_len(scalars.len())?;
        self.msm_device_at(scalars, 0)
    }

    /// As [`Self::msm_device`] over `scalars[offset..offset + self.len()]`, so that several
    /// MSMs can share one upload (a Groth16 prover's L query takes a suffix of the witness).
    pub fn msm_device_at(
        &self,
        scalars: &DeviceBuffer<Fr>,
        offset: usize,
    ) -> Result<P::Projective, MsmError> {
        self.check_range(scalars, offset)?;
        match &self.points {
            Points::Resident(pts) => self.resident_msm(pts, Source::Device(scalars, offset), None),
            Points::Streamed(host) => self.streamed_msm(host, Source::Device(scalars, offset)),
        }
    }

    /// As [`Self::msm_device_at`] over canonical scalars, read where they lie (no copy).
    pub fn msm_canonical_at(
        &self,
        scalars: &CanonicalScalars,
        offset: usize,
    ) -> Result<P::Projective, MsmError> {
        self.check_range(&scalars.0, offset)?;
        let src = Source::Canonical(scalars, offset);
        match &self.points {
            Points::Resident(pts) => self.resident_msm(pts, src, None),
            Points::Streamed(host) => self.streamed_msm(host, src),
        }
    }

    /// As [`Self::msm_device`], also returning the device time of each phase (CUDA events
    /// recorded between the phases on the compute stream; the unprofiled calls record none).
    /// Resident contexts only.
    pub fn msm_device_profiled(
        &self,
        scalars: &DeviceBuffer<Fr>,
    ) -> Result<(P::Projective, MsmProfile), MsmError> {
        self.check_len(scalars.len())?;
        self.profiled(Source::Device(scalars, 0))
    }

    /// As [`Self::msm`] with a profile; `upload_ms` is the host time of the scalar upload.
    pub fn msm_profiled(&self, scalars: &[Fr]) -> Result<(P::Projective, MsmProfile), MsmError> {
        self.check_len(scalars.len())?;
        self.profiled(Source::Host(scalars))
    }

    fn profiled(&self, src: Source<'_>) -> Result<(P::Projective, MsmProfile), MsmError> {
        let Points::Resident(pts) = &self.points else {
            return Err(MsmError::Unsupported("phase profiles of streamed contexts"));
        };
        let t0 = Instant::now();
        let mut marks = Marks::new(&self.gpu)?;
        let r = self.resident_msm(pts, src, Some(&mut marks))?;
        let total_ms = t0.elapsed().as_secs_f64() * 1e3;
        let Some(stats) = marks.stats else {
            // n = 0 or every scalar 0: no kernel ran.
            return Ok((
                r,
                MsmProfile {
                    total_ms,
                    ..MsmProfile::default()
                },
            ));
        };
        let ev = &marks.ev;
        ev[MARKS - 1].synchronize()?;
        let e = |a: usize, b: usize| -> Result<f64, GpuError> {
            Ok(f64::from(ev[a].elapsed_ms(&ev[b])?))
        };
        let prof = MsmProfile {
            n: self.len(),
            general: stats.0,
            ones: stats.1,
            c: stats.2,
            nwin: stats.3,
            sets: stats.4,
            alloc_ms: marks.alloc.as_secs_f64() * 1e3,
            upload_ms: marks.upload.as_secs_f64() * 1e3,
            prepare_ms: e(0, 1)?,
            gap_ms: e(1, 2)?,
            histogram_ms: e(3, 4)?,
            scan_ms: e(4, 5)?,
            scatter_ms: e(5, 6)?,
            fine_ms: e(6, 7)?,
            accumulate_ms: e(7, 8)?,
            merge_ms: e(8, 9)?,
            reduce_ms: e(9, 10)?,
            window_sums_ms: e(10, 11)?,
            ones_ms: e(11, 12)?,
            device_ms: e(0, 12)?,
            total_ms,
        };
        Ok((r, prof))
    }

    fn check_range(&self, scalars: &DeviceBuffer<Fr>, offset: usize) -> Result<(), MsmError> {
        if offset
            .checked_add(self.len())
            .is_none_or(|end| end > scalars.len())
        {
            return Err(MsmError::LengthMismatch {
                points: self.len(),
                scalars: scalars.len().saturating_sub(offset),
            });
        }
        Ok(())
    }

    fn check_len(&self, scalars: usize) -> Result<(), MsmError> {
        if scalars != self.len() {
            return Err(MsmError::LengthMismatch {
                points: self.len(),
                scalars,
            });
        }
        Ok(())
    }

    fn sm_count(&self) -> usize {
        self.gpu.info().sm_count as usize
    }

    /// The plan of an MSM over `general` general scalars of `n`: folded over the precomputed
    /// copies when it picks their window, else unfolded (over the points, copy 0).
    fn plan(&self, general: usize, n: usize) -> Plan {
        let (sm, cv) = (self.sm_count(), curve::<P>());
        let plan = Plan::for_curve(general, n, self.window_bits, sm, cv);
        match self.precomputed {
            Some(p) if p.c == plan.c && p.copies > 1 => {
                Plan::folded(general, n, p.c, p.copies, sm, cv)
            }
            _ => plan,
        }
    }

    /// One resident MSM; buffers come from (and go back to) the context's cache, which keeps
    /// them only with [`Self::keep_scratch`].
    fn resident_msm(
        &self,
        pts: &DeviceBuffer<P>,
        src: Source<'_>,
        marks: Option<&mut Marks>,
    ) -> Result<P::Projective, MsmError> {
        if self.is_empty() {
            return Ok(P::Projective::default());
        }
        let mut cache = std::mem::take(&mut *self.lock_cache());
        let r = self.resident_run(pts, src, &mut cache, marks);
        // Keep nothing after a failure (kernels of the failed call may still be queued) or
        // when someone waits for budget (kept bytes would not wake them).
        let keep = self.keep_scratch && r.is_ok() && self.gpu.vram().budget().waiters() == 0;
        let mut kept = self.lock_cache();
        // Another call on this context may have put its buffers back meanwhile: keep one set.
        if keep {
            if kept.canon.is_none() {
                kept.canon = cache.canon.take();
            }
            if kept.counters.is_none() {
                kept.counters = cache.counters.take();
            }
            if kept.scratch.is_none() {
                kept.scratch = cache.scratch.take();
            }
        }
        if kept.staging.is_none() {
            kept.staging = cache.staging.take();
        }
        drop(kept);
        drop(cache); // frees what is not kept, outside the lock
        r
    }

    fn resident_run(
        &self,
        pts: &DeviceBuffer<P>,
        src: Source<'_>,
        cache: &mut Cache<P>,
        mut marks: Option<&mut Marks>,
    ) -> Result<P::Projective, MsmError> {
        let n = self.len();
        let g = &self.gpu;
        let t = Instant::now();
        // Canonical scalars are read where they lie; others are made canonical in a copy.
        let mut canon = None;
        let mut take_canon = || match cache.canon.take() {
            Some(c) if c.len() == n => Ok(c),
            old => {
                drop(old);
                g.vram().alloc::<Fr>(n)
            }
        };
        let input = match src {
            Source::Canonical(cs, at) => Input::InPlace(cs, at),
            Source::Host(h) => Input::Host(h, canon.insert(take_canon()?)),
            Source::Device(d, at) => Input::Device(d, at, canon.insert(take_canon()?)),
        };
        let counters = match cache.counters.take() {
            Some(c) => Ok(c),
            None => g.vram().alloc::<u32>(2),
        };
        let r = match counters {
            Ok(mut counters) => {
                if let Some(m) = marks.as_deref_mut() {
                    m.alloc += t.elapsed();
                }
                let r = self.run_with(pts, input, cache, &mut counters, marks);
                cache.counters = Some(counters);
                r
            }
            Err(e) => Err(e.into()),
        };
        if canon.is_some() {
            cache.canon = canon;
        }
        r
    }

    /// Copies host scalars into `canon`: through the pinned staging slots (parallel memcpy into
    /// one slot while the other DMAs) when large, else one synchronous pageable copy.
    fn upload_host(
        &self,
        scalars: &[Fr],
        canon: &mut DeviceBuffer<Fr>,
        staging: &mut Option<Staging<Fr>>,
    ) -> Result<(), MsmError> {
        if scalars.len() >= STAGE_MIN && staging.is_none() {
            // Pinned memory is host budget; without it the pageable copy still works.
            *staging = Staging::new(&self.gpu, scalars.len().min(STAGE_SLOT)).ok();
        }
        match staging {
            Some(st) if scalars.len() >= STAGE_MIN => {
                st.upload(&self.compute, scalars, canon, 0, |dst, src| {
                    dst.par_chunks_mut(STAGE_TASK)
                        .zip(src.par_chunks(STAGE_TASK))
                        .for_each(|(d, s)| d.copy_from_slice(s));
                })?;
            }
            _ => {
                // A synchronous copy is not ordered after the compute stream: a kept `canon`
                // may still be read by the kernels of a call that failed part-way.
                self.compute.synchronize()?;
                canon.copy_from_host(scalars)?
            }
        }
        Ok(())
    }

    fn run_with(
        &self,
        pts: &DeviceBuffer<P>,
        input: Input<'_>,
        cache: &mut Cache<P>,
        counters: &mut DeviceBuffer<u32>,
        mut marks: Option<&mut Marks>,
    ) -> Result<P::Projective, MsmError> {
        let n = self.len();
        let (g, s) = (&self.gpu, &self.compute);
        let skip = self.identity.as_ref().map(|bits| k::Skip { bits, at: 0 });
        // The copy has the identities' scalars zeroed already; the sort skips them either way.
        let scalars = match input {
            Input::InPlace(cs, at) => {
                counters.fill_bytes_async(0, s.cuda())?;
                mark(marks.as_deref(), s, 0)?;
                let sc = k::Scalars {
                    buf: &cs.0,
                    at,
                    skip,
                };
                k::count(g, s, sc, n, counters)?;
                sc
            }
            Input::Device(d, at, canon) => {
                counters.fill_bytes_async(0, s.cuda())?;
                mark(marks.as_deref(), s, 0)?;
                k::prepare(g, s, d, at, canon, n, counters, skip)?;
                k::Scalars {
                    buf: &*canon,
                    at: 0,
                    skip,
                }
            }
            Input::Host(h, canon) => {
                let t = Instant::now();
                self.upload_host(h, canon, &mut cache.staging)?;
                if let Some(m) = marks.as_deref_mut() {
                    m.upload += t.elapsed();
                }
                counters.fill_bytes_async(0, s.cuda())?;
                mark(marks.as_deref(), s, 0)?;
                k::prepare_in_place(g, s, canon, n, counters, skip)?;
                k::Scalars {
                    buf: &*canon,
                    at: 0,
                    skip,
                }
            }
        };
        mark(marks.as_deref(), s, 1)?;
        let mut count = [0u32; 2];
        counters.copy_to_host_on(&mut count, s.cuda())?;
        let (general, ones) = (count[0] as usize, count[1] as usize);
        if general == 0 && ones == 0 {
            return Ok(P::Projective::default());
        }
        let plan = self.plan(general, n);
        let t = Instant::now();
        let mut scratch = match cache.scratch.take() {
            Some(sc) if sc.fits(&plan) => sc,
            old => {
                drop(old); // free before allocating the larger one
                Scratch::<P>::new(g, &plan)?
            }
        };
        if let Some(m) = marks.as_deref_mut() {
            m.alloc += t.elapsed();
            m.stats = Some((general, ones, plan.c, plan.nwin, plan.sets));
        }
        let mut out = vec![P::Projective::default(); scratch.out.len()];
        let r = self
            .enqueue_batch(
                pts,
                n,
                scalars,
                &plan,
                &mut scratch,
                general > 0,
                ones > 0,
                marks.as_deref(),
            )
            .map_err(MsmError::from)
            .and_then(|()| {
                scratch
                    .out
                    .copy_to_host_on(&mut out, s.cuda())
                    .map_err(MsmError::from)
            });
        cache.scratch = Some(scratch);
        r?;
        let windows = if general > 0 { &out[..plan.sets] } else { &[] };
        let ones_sum = if ones > 0 {
            out[plan.sets]
        } else {
            P::Projective::default()
        };
        Ok(combine::<P>(windows, plan.c) + ones_sum)
    }
}

#[derive(Clone, Copy)]
enum Source<'a> {
    Host(&'a [Fr]),
    /// Montgomery scalars at `offset..offset + n` of a device buffer.
    Device(&'a DeviceBuffer<Fr>, usize),
    /// Canonical scalars at `offset..offset + n`, read where they lie.
    Canonical(&'a CanonicalScalars, usize),
}

/// A resident MSM's scalars: canonical where they lie, or made canonical in the context's copy
/// (the last field).
enum Input<'a> {
    InPlace(&'a CanonicalScalars, usize),
    Host(&'a [Fr], &'a mut DeviceBuffer<Fr>),
    Device(&'a DeviceBuffer<Fr>, usize, &'a mut DeviceBuffer<Fr>),
}

/// Scalars on the device in canonical form, as the MSM kernels read them. Made once from a
/// Montgomery buffer, they serve any number of MSMs with no copy: an MSM over Montgomery
/// scalars on the device ([`GpuMsm::msm_device`]) first makes a canonical copy of its n
/// scalars, 32 bytes each, beside its scratch.
#[derive(Debug)]
pub struct CanonicalScalars(DeviceBuffer<Fr>);

impl CanonicalScalars {
    /// Converts `scalars` (Montgomery form) in place on `stream` and waits for it.
    pub fn from_montgomery(
        gpu: &Gpu,
        stream: &Stream,
        mut scalars: DeviceBuffer<Fr>,
    ) -> Result<Self, MsmError> {
        let n = scalars.len();
        k::to_canonical(gpu, stream, &mut scalars, n)?;
        stream.synchronize()?;
        Ok(Self(scalars))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `Σ_w 2^(c·w) · windows[w]` by Horner's rule from the top window (with precomputed copies
/// the bucket set sums: set s holds the windows s + j·h, whose points carry `2^(c·h·j)`).
fn combine<P: MsmPoint>(windows: &[P::Projective], c: u32) -> P::Projective {
    let mut acc = P::Projective::default();
    for w in windows.iter().rev() {
        for _ in 0..c {
            acc = P::double(&acc);
        }
        acc += *w;
    }
    acc
}

/// One-shot MSM: uploads (or streams) the points, runs one MSM.
pub fn msm<P: MsmPoint>(
    gpu: &Gpu,
    points: &[P],
    scalars: &[Fr],
) -> Result<P::Projective, MsmError> {
    if points.len() != scalars.len() {
        return Err(MsmError::LengthMismatch {
            points: points.len(),
            scalars: scalars.len(),
        });
    }
    GpuMsm::new(gpu, points)?.msm(scalars)
}
