//! GPU Pippenger MSM (kernels: `kernels/msm/pippenger.cuh`; launches: `cuzk_gpu::msm`).
//!
//! A [`GpuMsm`] owns a set of points, either resident in VRAM (uploaded once, or handed over
//! already on the device) or streamed in chunks from pinned host memory when they do not fit
//! the budget; each [`GpuMsm::msm`] call multiplies them by a new scalar vector. Scalars are
//! given in Montgomery form (host slice or device buffer) and made canonical on the device.
//! Zero scalars cost nothing, scalars equal to one are summed by plain mixed additions, the
//! rest go through signed-digit Pippenger with a counting sort per window and balanced XYZZ
//! bucket accumulation. The host only adds the per-window sums (≈ 256 doublings).

use cuzk_field::Fr;
use cuzk_gpu::msm::{self as k, Curve, ResultRing};
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, PinnedBuffer, Stream};

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
/// Largest window: beyond this the buckets outgrow what accumulation saves.
const MAX_WINDOW_BITS: u32 = 20;

fn curve<P: MsmPoint>() -> Curve {
    match P::GROUP {
        Group::G1 => Curve::G1,
        Group::G2 => Curve::G2,
    }
}

/// Sizes of one Pippenger batch, all derived from (number of general scalars, window bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Window bits c; signed digits, so 2^(c-1) buckets per window.
    pub c: u32,
    pub nwin: usize,
    pub buckets_per_window: usize,
    /// Threads of the level-0 accumulation.
    pub threads: usize,
    /// Buckets per thread in the bucket reduction.
    pub group: usize,
    /// Room for sorted entries (general scalars × windows).
    pub sorted_cap: usize,
    /// Threads of the ones pass.
    pub ones_threads: usize,
}

impl Plan {
    /// Chooses c by a cost model in units of one mixed addition: `m · nwin` for accumulation
    /// plus `2.6 · nwin · 2^(c-1)` for the bucket reduction (two full additions per bucket).
    pub fn choose_window(m: usize) -> u32 {
        let m = m.max(1) as f64;
        (2..=MAX_WINDOW_BITS)
            .min_by(|&a, &b| {
                let cost = |c: u32| {
                    let nwin = 256u32.div_ceil(c) as f64;
                    m * nwin + 2.6 * nwin * (1u64 << (c - 1)) as f64
                };
                cost(a).total_cmp(&cost(b))
            })
            .expect("non-empty range")
    }

    /// Plan with 256 resident threads per SM (valid for both curves).
    pub fn new(general: usize, n: usize, c: Option<u32>, sm_count: usize) -> Self {
        Self::with_residency(general, n, c, sm_count, THREADS_PER_SM)
    }

    /// Plan for a curve: the accumulation gets one full wave of the threads its kernel keeps
    /// resident per SM.
    pub fn for_curve(general: usize, n: usize, c: Option<u32>, sm_count: usize, cv: Curve) -> Self {
        Self::with_residency(general, n, c, sm_count, cv.resident_threads_per_sm())
    }

    fn with_residency(
        general: usize,
        n: usize,
        c: Option<u32>,
        sm_count: usize,
        acc_threads_per_sm: usize,
    ) -> Self {
        let c = c
            .unwrap_or_else(|| Self::choose_window(general))
            .clamp(2, MAX_WINDOW_BITS);
        let nwin = 256usize.div_ceil(c as usize);
        let buckets_per_window = 1usize << (c - 1);
        let wave = sm_count.max(1) * THREADS_PER_SM;
        let acc_wave = sm_count.max(1) * acc_threads_per_sm.max(1);
        let entries = general * nwin;
        let threads = (entries / 16).clamp(1, acc_wave);
        // Largest power of two with nwin · groups <= one wave: rounding up (as before) gave
        // 1.6-2 waves whose second one ran part-empty, and at small c a longer ladder per
        // thread (the g·L multiple) for the same buckets.
        let per_win = (wave / nwin).max(1);
        let groups = (1usize << per_win.ilog2()).min(buckets_per_window);
        Self {
            c,
            nwin,
            buckets_per_window,
            threads,
            group: buckets_per_window / groups,
            sorted_cap: entries.max(1),
            ones_threads: n.div_ceil(64).clamp(1, acc_wave),
        }
    }

    pub fn nkeys(&self) -> usize {
        self.nwin * self.buckets_per_window
    }

    fn groups(&self) -> usize {
        self.buckets_per_window / self.group
    }

    fn level1(&self) -> usize {
        2 * (2 * self.threads).div_ceil(FAN_IN)
    }

    /// Device bytes of the scratch buffers (see [`Scratch`]).
    pub fn scratch_bytes(&self, curve: Curve) -> u64 {
        let x = (curve.xyzz_words() * 8) as u64;
        let u = 4u64;
        let nk = self.nkeys() as u64;
        // 256-byte rounding per buffer, generously
        let round = 16 * 256;
        u * (3 * nk + 1)
            + u * self.sorted_cap as u64
            + x * (nk + 1)
            + (u + x) * (2 * self.threads + self.level1()) as u64
            + x * (self.nwin * self.groups() + self.ones_threads) as u64
            + (curve.jacobian_bytes() as u64) * (self.nwin as u64 + 1)
            + round
    }
}

/// Device buffers of one batch; allocated together so that a failure frees them all.
struct Scratch<P: MsmPoint> {
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    cursors: DeviceBuffer<u32>,
    sorted: DeviceBuffer<u32>,
    buckets: DeviceBuffer<u64>,
    keys_a: DeviceBuffer<u32>,
    pts_a: DeviceBuffer<u64>,
    keys_b: DeviceBuffer<u32>,
    pts_b: DeviceBuffer<u64>,
    reduced: DeviceBuffer<u64>,
    ones: DeviceBuffer<u64>,
    /// Window sums then the ones sum, Jacobian, for the host.
    out: DeviceBuffer<P::Projective>,
}

impl<P: MsmPoint> Scratch<P> {
    fn new(gpu: &Gpu, plan: &Plan) -> Result<Self, MsmError> {
        let v = gpu.vram();
        let w = curve::<P>().xyzz_words();
        let nk = plan.nkeys();
        Ok(Self {
            counts: v.alloc(nk)?,
            offsets: v.alloc(nk + 1)?,
            cursors: v.alloc(nk)?,
            sorted: v.alloc(plan.sorted_cap)?,
            buckets: v.alloc((nk + 1) * w)?,
            keys_a: v.alloc(2 * plan.threads)?,
            pts_a: v.alloc(2 * plan.threads * w)?,
            keys_b: v.alloc(plan.level1())?,
            pts_b: v.alloc(plan.level1() * w)?,
            reduced: v.alloc(plan.nwin * plan.groups() * w)?,
            ones: v.alloc(plan.ones_threads * w)?,
            out: v.alloc(plan.nwin + 1)?,
        })
    }
}

enum Points<P: MsmPoint> {
    Resident(DeviceBuffer<P>),
    Streamed(PinnedBuffer<P>),
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
}

impl<P: MsmPoint> std::fmt::Debug for GpuMsm<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMsm")
            .field("group", &P::GROUP)
            .field("len", &self.len())
            .field("resident", &self.is_resident())
            .field("window_bits", &self.window_bits)
            .finish()
    }
}

impl<P: MsmPoint> GpuMsm<P> {
    fn with_points(gpu: &Gpu, points: Points<P>) -> Result<Self, MsmError> {
        let len = match &points {
            Points::Resident(b) => b.len(),
            Points::Streamed(b) => b.len(),
        };
        if len > MAX_POINTS {
            return Err(MsmError::TooLarge(len));
        }
        Ok(Self {
            gpu: gpu.clone(),
            points,
            compute: gpu.stream("msm-compute")?,
            copy: gpu.stream("msm-copy")?,
            window_bits: None,
            chunk_len: None,
            vram_limit: None,
        })
    }

    /// Uploads `points` once; they stay in VRAM for every later MSM.
    pub fn resident(gpu: &Gpu, points: &[P]) -> Result<Self, MsmError> {
        if points.len() > MAX_POINTS {
            return Err(MsmError::TooLarge(points.len()));
        }
        Self::with_points(gpu, Points::Resident(gpu.vram().from_host(points)?))
    }

    /// Points already on the device (e.g. a proving key loaded once per daemon).
    pub fn from_device(gpu: &Gpu, points: DeviceBuffer<P>) -> Result<Self, MsmError> {
        Self::with_points(gpu, Points::Resident(points))
    }

    /// Points in pinned host memory, streamed to the device in chunks on every MSM.
    pub fn streamed(gpu: &Gpu, points: PinnedBuffer<P>) -> Result<Self, MsmError> {
        Self::with_points(gpu, Points::Streamed(points))
    }

    /// Resident if the points and the scratch of a full MSM fit the free budget, otherwise
    /// copied into pinned memory and streamed.
    pub fn new(gpu: &Gpu, points: &[P]) -> Result<Self, MsmError> {
        let plan = Plan::for_curve(
            points.len(),
            points.len(),
            None,
            gpu.info().sm_count as usize,
            curve::<P>(),
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

    /// Fixes the window size instead of choosing it from n (for tuning).
    pub fn with_window_bits(mut self, c: u32) -> Self {
        self.window_bits = Some(c.clamp(2, MAX_WINDOW_BITS));
        self
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

    pub fn len(&self) -> usize {
        match &self.points {
            Points::Resident(b) => b.len(),
            Points::Streamed(b) => b.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn is_resident(&self) -> bool {
        matches!(self.points, Points::Resident(_))
    }
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }
    /// The stream every kernel runs on (record events on it to time an MSM).
    pub fn stream(&self) -> &Stream {
        &self.compute
    }

    /// `Σ scalars[i] · points[i]`, scalars in Montgomery form on the host.
    pub fn msm(&self, scalars: &[Fr]) -> Result<P::Projective, MsmError> {
        self.check_len(scalars.len())?;
        match &self.points {
            Points::Resident(pts) => {
                let mut canon = self.gpu.vram().alloc::<Fr>(scalars.len())?;
                if !scalars.is_empty() {
                    // Synchronous upload; the compute stream starts after it.
                    canon.copy_from_host(scalars)?;
                }
                self.resident_msm(pts, canon, None)
            }
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
        if offset
            .checked_add(self.len())
            .is_none_or(|end| end > scalars.len())
        {
            return Err(MsmError::LengthMismatch {
                points: self.len(),
                scalars: scalars.len().saturating_sub(offset),
            });
        }
        match &self.points {
            Points::Resident(pts) => {
                let canon = self.gpu.vram().alloc::<Fr>(self.len())?;
                self.resident_msm(pts, canon, Some((scalars, offset)))
            }
            Points::Streamed(host) => self.streamed_msm(host, Source::Device(scalars, offset)),
        }
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

    /// `canon` holds the Montgomery scalars unless `src` (a buffer and an offset) is given.
    fn resident_msm(
        &self,
        pts: &DeviceBuffer<P>,
        mut canon: DeviceBuffer<Fr>,
        src: Option<(&DeviceBuffer<Fr>, usize)>,
    ) -> Result<P::Projective, MsmError> {
        let n = pts.len();
        if n == 0 {
            return Ok(P::Projective::default());
        }
        let (g, s) = (&self.gpu, &self.compute);
        let mut counters = g.vram().alloc::<u32>(2)?;
        counters.fill_bytes_async(0, s.cuda())?;
        match src {
            Some((src, at)) => k::prepare(g, s, src, at, &mut canon, n, &mut counters)?,
            None => k::prepare_in_place(g, s, &mut canon, n, &mut counters)?,
        }
        let mut count = [0u32; 2];
        counters.copy_to_host_on(&mut count, s.cuda())?;
        let (general, ones) = (count[0] as usize, count[1] as usize);
        if general == 0 && ones == 0 {
            return Ok(P::Projective::default());
        }
        let plan = Plan::for_curve(general, n, self.window_bits, self.sm_count(), curve::<P>());
        let mut scratch = Scratch::<P>::new(g, &plan)?;
        self.enqueue_batch(pts, n, &canon, &plan, &mut scratch, general > 0, ones > 0)?;
        let mut out = vec![P::Projective::default(); plan.nwin + 1];
        scratch.out.copy_to_host_on(&mut out, s.cuda())?;
        let (windows, ones_sum) = out.split_at(plan.nwin);
        let windows = if general > 0 { windows } else { &[] };
        let ones_sum = if ones > 0 {
            ones_sum[0]
        } else {
            P::Projective::default()
        };
        Ok(combine::<P>(windows, plan.c) + ones_sum)
    }

    /// Enqueues one batch on the compute stream: `scratch.out` gets the window sums
    /// (`windows`) and the ones sum (`ones`); what is not requested is left untouched.
    #[allow(clippy::too_many_arguments)]
    fn enqueue_batch(
        &self,
        pts: &DeviceBuffer<P>,
        n: usize,
        canon: &DeviceBuffer<Fr>,
        plan: &Plan,
        sc: &mut Scratch<P>,
        windows: bool,
        ones: bool,
    ) -> Result<(), GpuError> {
        let (g, s, cv) = (&self.gpu, &self.compute, curve::<P>());
        if windows {
            let (c, nwin, nk) = (plan.c, plan.nwin as u32, plan.nkeys());
            sc.counts.fill_bytes_async(0, s.cuda())?;
            sc.buckets.fill_bytes_async(0, s.cuda())?;
            k::histogram(g, s, canon, n, c, nwin, &mut sc.counts)?;
            k::scan(g, s, &sc.counts, nk, &mut sc.offsets, &mut sc.cursors)?;
            k::scatter(g, s, canon, n, c, nwin, &mut sc.cursors, &mut sc.sorted)?;
            k::accumulate(
                g,
                s,
                cv,
                pts,
                n,
                &sc.sorted,
                &sc.offsets,
                nk,
                plan.threads,
                &mut sc.keys_a,
                &mut sc.pts_a,
                &mut sc.buckets,
            )?;
            // Merge levels, ping-ponging between the a and b partial buffers.
            let mut count = 2 * plan.threads;
            let mut from_a = true;
            loop {
                let threads = count.div_ceil(FAN_IN);
                let last = threads == 1;
                let fan_in = if last { count } else { FAN_IN };
                let (ik, ip, ok, op) = if from_a {
                    (&sc.keys_a, &sc.pts_a, &mut sc.keys_b, &mut sc.pts_b)
                } else {
                    (&sc.keys_b, &sc.pts_b, &mut sc.keys_a, &mut sc.pts_a)
                };
                k::merge(
                    g,
                    s,
                    cv,
                    ik,
                    ip,
                    count,
                    fan_in,
                    ok,
                    op,
                    &mut sc.buckets,
                    nk,
                    last,
                )?;
                if last {
                    break;
                }
                count = 2 * threads;
                from_a = !from_a;
            }
            let groups = plan.groups();
            k::bucket_reduce(
                g,
                s,
                cv,
                &sc.buckets,
                plan.buckets_per_window,
                plan.nwin,
                plan.group,
                &mut sc.reduced,
            )?;
            let mut count = groups;
            while count > 1 {
                k::sum_halves(g, s, cv, &mut sc.reduced, groups, plan.nwin, count)?;
                count -= count / 2;
            }
            k::to_jacobian(g, s, cv, &sc.reduced, groups, plan.nwin, &mut sc.out, 0)?;
        }
        if ones {
            let t = plan.ones_threads;
            k::ones(g, s, cv, pts, canon, n, t, &mut sc.ones)?;
            let mut count = t;
            while count > 1 {
                k::sum_halves(g, s, cv, &mut sc.ones, t, 1, count)?;
                count -= count / 2;
            }
            k::to_jacobian(g, s, cv, &sc.ones, t, 1, &mut sc.out, plan.nwin)?;
        }
        Ok(())
    }

    /// Device bytes a streamed MSM with chunks of `len` points needs.
    fn chunk_bytes(&self, len: usize) -> u64 {
        let plan = Plan::for_curve(len, len, self.window_bits, self.sm_count(), curve::<P>());
        let per = 2 * (size_of::<P>() + 32) + 32 + 2 * 256;
        (per * len) as u64 + plan.scratch_bytes(curve::<P>()) + 4096
    }

    fn streamed_msm(
        &self,
        host: &PinnedBuffer<P>,
        scalars: Source<'_>,
    ) -> Result<P::Projective, MsmError> {
        let n = host.len();
        if n == 0 {
            return Ok(P::Projective::default());
        }
        let available = self
            .gpu
            .vram()
            .budget()
            .available()
            .min(self.vram_limit.unwrap_or(u64::MAX));
        let chunk = match self.chunk_len {
            Some(c) => c.min(n),
            None => {
                let mut c = if n >= OVERLAP_MIN_N {
                    n.div_ceil(MIN_CHUNKS)
                } else {
                    n
                };
                while c > 1024 && self.chunk_bytes(c) > available {
                    c = c.div_ceil(2);
                }
                if self.chunk_bytes(c) > available {
                    return Err(MsmError::NoRoom {
                        needed: self.chunk_bytes(c),
                        available,
                    });
                }
                c
            }
        };
        let (g, s) = (&self.gpu, &self.compute);
        let plan = Plan::for_curve(
            chunk,
            chunk,
            self.window_bits,
            self.sm_count(),
            curve::<P>(),
        );
        let v = g.vram();
        let mut pts_buf = [v.alloc::<P>(chunk)?, v.alloc::<P>(chunk)?];
        let mut sc_buf = [v.alloc::<Fr>(chunk)?, v.alloc::<Fr>(chunk)?];
        let mut canon = v.alloc::<Fr>(chunk)?;
        let mut counters = v.alloc::<u32>(2)?;
        let mut scratch = Scratch::<P>::new(g, &plan)?;
        let mut ring = ResultRing::<P::Projective>::new(g, s, plan.nwin + 1)?;
        let uploaded = [g.event()?, g.event()?];
        let consumed = [g.event()?, g.event()?];
        let mut windows = vec![P::Projective::default(); plan.nwin];
        let mut ones = P::Projective::default();
        let mut fold = |res: &[P::Projective]| {
            for (w, r) in windows.iter_mut().zip(res) {
                *w += *r;
            }
            ones += res[plan.nwin];
        };
        let host_scalars: &[Fr] = match scalars {
            Source::Host(h) => h,
            Source::Device(..) => &[],
        };
        let nchunks = n.div_ceil(chunk);
        k::with_uploads(g, &self.copy, &host[..], |up_pts| {
            k::with_uploads(g, &self.copy, host_scalars, |up_sc| {
                for i in 0..nchunks {
                    let b = i % 2;
                    let (start, len) = (i * chunk, chunk.min(n - i * chunk));
                    if i >= 2 {
                        self.copy.wait(&consumed[b])?;
                    }
                    up_pts.upload(start, len, &mut pts_buf[b])?;
                    if let Source::Host(_) = scalars {
                        up_sc.upload(start, len, &mut sc_buf[b])?;
                    }
                    self.copy.record(&uploaded[b])?;
                    s.wait(&uploaded[b])?;
                    counters.fill_bytes_async(0, s.cuda())?;
                    match scalars {
                        Source::Host(_) => {
                            k::prepare(g, s, &sc_buf[b], 0, &mut canon, len, &mut counters)?
                        }
                        Source::Device(d, at) => {
                            k::prepare(g, s, d, at + start, &mut canon, len, &mut counters)?
                        }
                    }
                    self.enqueue_batch(&pts_buf[b], len, &canon, &plan, &mut scratch, true, true)?;
                    s.record(&consumed[b])?;
                    if ring.is_pending(b) {
                        fold(ring.take(b)?);
                    }
                    ring.push(b, &scratch.out)?;
                }
                Ok(())
            })
        })?;
        for b in [nchunks % 2, (nchunks + 1) % 2] {
            if ring.is_pending(b) {
                fold(ring.take(b)?);
            }
        }
        Ok(combine::<P>(&windows, plan.c) + ones)
    }
}

#[derive(Clone, Copy)]
enum Source<'a> {
    Host(&'a [Fr]),
    /// Scalars at `offset..offset + n` of a device buffer.
    Device(&'a DeviceBuffer<Fr>, usize),
}

/// `Σ_w 2^(c·w) · windows[w]` by Horner's rule from the top window.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_choice_grows_with_n() {
        let cs: Vec<u32> = [1usize << 10, 1 << 16, 1 << 20, 1 << 24]
            .iter()
            .map(|&m| Plan::choose_window(m))
            .collect();
        assert!(cs.windows(2).all(|w| w[0] <= w[1]), "{cs:?}");
        assert_eq!(Plan::choose_window(1 << 20), 16);
        assert!(cs[3] >= 18, "{cs:?}");
    }

    #[test]
    fn plan_sizes_are_consistent() {
        let p = Plan::new(1 << 20, 1 << 20, None, 132);
        assert!(p.nwin * p.c as usize >= 256);
        assert_eq!(p.buckets_per_window % p.group, 0);
        assert!(p.threads >= 1 && p.threads <= 132 * THREADS_PER_SM);
        let tiny = Plan::new(0, 3, None, 132);
        assert_eq!(tiny.threads, 1);
        assert!(tiny.sorted_cap >= 1);
    }

    #[test]
    fn combine_is_horner() {
        use cuzk_field::{G1Affine, G1Projective};
        let g = G1Projective::generator();
        // windows [g, 2g] with c = 3: g + 8 · 2g = 17 g
        let got = combine::<G1Affine>(&[g, g.double()], 3);
        assert_eq!(got, g * Fr::from_u64(17));
    }
}
