//! Checked launch wrappers for `kernels/msm/msm.cu` (Pippenger MSM; driven by `gpu`) and
//! `kernels/msm/check.cu` (subgroup checks; driven by `subgroup`), embedded by this crate's
//! build script; the only module of cuzk-msm allowed `unsafe`.
//!
//! Every wrapper checks that each buffer is large enough for what the kernel touches given the
//! other arguments; kernels additionally clamp data-dependent indices (sorted entries, keys),
//! so garbage device contents give wrong sums, never out-of-bounds accesses.

use bytemuck::Pod;
use cuzk_gpu::shared as c;
use cuzk_gpu::{DeviceBuffer, Gpu, GpuError, KernelArg, LaunchConfig, Module, Result, Stream};

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

const MODULE: &Module = &MSM;

/// The curve group an MSM kernel works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    G1,
    G2,
}

impl From<crate::Group> for Curve {
    fn from(g: crate::Group) -> Self {
        match g {
            crate::Group::G1 => Curve::G1,
            crate::Group::G2 => Curve::G2,
        }
    }
}

impl Curve {
    /// Bytes of one affine point (blst_p1_affine / blst_p2_affine).
    pub const fn affine_bytes(self) -> usize {
        match self {
            Curve::G1 => 96,
            Curve::G2 => 192,
        }
    }
    /// Bytes of one Jacobian point (blst_p1 / blst_p2).
    pub const fn jacobian_bytes(self) -> usize {
        self.affine_bytes() / 2 * 3
    }
    /// u64 words of one device XYZZ point (X, Y, ZZ, ZZZ); XYZZ buffers are `DeviceBuffer<u64>`.
    pub const fn xyzz_words(self) -> usize {
        self.affine_bytes() * 2 / 8
    }
    fn suffix(self) -> &'static str {
        match self {
            Curve::G1 => "g1",
            Curve::G2 => "g2",
        }
    }
    /// Threads per block of the point kernels (their `__launch_bounds__`).
    const fn block(self) -> u32 {
        c::CUZK_MSM_POINT_THREADS
    }
    /// Threads per SM that `msm_accumulate_*` keeps resident (block × the min-blocks of its
    /// `__launch_bounds__` in kernels/msm/msm.cu): one full wave of equal slices.
    pub const fn resident_threads_per_sm(self) -> usize {
        let blocks = match self {
            Curve::G1 => c::CUZK_MSM_G1_ACC_BLOCKS_PER_SM,
            Curve::G2 => c::CUZK_MSM_G2_ACC_BLOCKS_PER_SM,
        };
        (blocks * c::CUZK_MSM_POINT_THREADS) as usize
    }
}

/// Bytes of a scalar (Fr: 8 × u32).
pub const SCALAR_BYTES: usize = 32;
/// Most entries a [`scan`] accepts.
pub const MAX_SCAN_LEN: usize = 1 << 26;

fn invalid(kernel: &str, reason: String) -> GpuError {
    GpuError::InvalidLaunch {
        kernel: format!("{}::{kernel}", MODULE.name()),
        reason,
    }
}

fn u32_of(kernel: &str, what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| invalid(kernel, format!("{what} = {v} does not fit in u32")))
}

fn need(kernel: &str, what: &str, have: usize, want: usize) -> Result<()> {
    if have < want {
        return Err(invalid(
            kernel,
            format!("{what} holds {have} elements, needs {want}"),
        ));
    }
    Ok(())
}

fn elem<T>(kernel: &str, what: &str, bytes: usize) -> Result<()> {
    if size_of::<T>() != bytes {
        return Err(invalid(
            kernel,
            format!(
                "{what} elements are {} bytes, expected {bytes}",
                size_of::<T>()
            ),
        ));
    }
    Ok(())
}

fn xyzz_len(
    kernel: &str,
    what: &str,
    curve: Curve,
    buf: &DeviceBuffer<u64>,
    points: usize,
) -> Result<()> {
    need(kernel, what, buf.len() / curve.xyzz_words(), points)
}

/// Grid for a grid-stride kernel: enough blocks to cover `n`, capped (the loop does the rest).
fn stride_cfg(n: usize, block: u32) -> Result<LaunchConfig> {
    LaunchConfig::for_elements(n.min(1 << 26), block)
}

/// Which points are the identity: `bits[i / 32]` bit `i % 32` for `points[i]`, `i < n`
/// (made once per resident point set; [`prepare`] and the kernels reading [`Scalars`] then treat
/// their scalars as zero; with precomputed copies, copy 0's bits serve every copy, see
/// [`precompute_copies`]). Asynchronous.
pub fn identity_bits<P: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    points: &DeviceBuffer<P>,
    n: usize,
    bits: &mut DeviceBuffer<u32>,
) -> Result<()> {
    let k = format!("msm_identity_bits_{}", curve.suffix());
    elem::<P>(&k, "points", curve.affine_bytes())?;
    need(&k, "points", points.len(), n)?;
    need(&k, "bits", bits.len(), n.div_ceil(32))?;
    if n == 0 {
        return Ok(());
    }
    // The kernel rounds n up to a multiple of 32 (whole warps); that must fit in u32 too.
    u32_of(&k, "n rounded up to 32", n.next_multiple_of(32))?;
    let n32 = n as u32;
    // SAFETY: reads points[< n]; the lane 0 of each warp-round writes bits[i / 32] for its
    // i < n rounded up to 32, i.e. below ceil(n / 32) <= bits.len().
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            stride_cfg(n, 256)?,
            &[points, &n32, &*bits],
        )
    }
}

/// The identity mask of [`identity_bits`] for the scalars of a [`prepare`] call or of
/// [`Scalars`]: scalar `i` pairs with bit `at + i`.
#[derive(Debug, Clone, Copy)]
pub struct Skip<'a> {
    pub bits: &'a DeviceBuffer<u32>,
    pub at: usize,
}

/// (pointer, offset) kernel arguments of an optional [`Skip`] covering `n` scalars.
fn skip_args(kernel: &str, skip: Option<Skip<'_>>, n: usize) -> Result<(u64, u32)> {
    let Some(sk) = skip else {
        return Ok((0, 0));
    };
    let end = sk
        .at
        .checked_add(n)
        .ok_or_else(|| invalid(kernel, "skip range overflows".into()))?;
    need(
        kernel,
        "skip bits (× 32)",
        sk.bits.len().saturating_mul(32),
        end,
    )?;
    Ok((sk.bits.device_ptr(), u32_of(kernel, "skip offset", sk.at)?))
}

/// Canonical scalars that a count, sort or ones kernel reads where they lie: `n` of them from
/// element `at` of `buf`, each read as zero where `skip` marks its point as the identity.
#[derive(Debug, Clone, Copy)]
pub struct Scalars<'a, S: Pod> {
    pub buf: &'a DeviceBuffer<S>,
    pub at: usize,
    pub skip: Option<Skip<'a>>,
}

impl<S: Pod> Scalars<'_, S> {
    /// (scalars pointer, skip pointer, skip offset) kernel arguments for `n` scalars.
    fn args(&self, kernel: &str, n: usize) -> Result<(u64, u64, u32)> {
        elem::<S>(kernel, "scalars", SCALAR_BYTES)?;
        let end = self
            .at
            .checked_add(n)
            .ok_or_else(|| invalid(kernel, "scalar range overflows".into()))?;
        need(kernel, "scalars", self.buf.len(), end)?;
        let (skip_ptr, skip_at) = skip_args(kernel, self.skip, n)?;
        let ptr = self.buf.device_ptr() + (self.at * SCALAR_BYTES) as u64;
        Ok((ptr, skip_ptr, skip_at))
    }
}

/// `counters[0] += #scalars neither 0 nor 1`, `counters[1] += #ones` of canonical scalars
/// (those of identity points count as zero): [`prepare`]'s counts without a copy.
pub fn count<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    scalars: Scalars<'_, S>,
    n: usize,
    counters: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "msm_count";
    let (ptr, skip_ptr, skip_at) = scalars.args(K, n)?;
    need(K, "counters", counters.len(), 2)?;
    if n == 0 {
        return Ok(());
    }
    let n32 = u32_of(K, "n", n)?;
    // SAFETY: reads n scalars at ptr and their skip words (ranges checked), atomics on
    // counters[0..2).
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            K,
            stride_cfg(n, 256)?,
            &[&ptr, &skip_ptr, &skip_at, &n32, &*counters],
        )
    }
}

/// Scalars Montgomery → canonical in place, `s[0..n)`. Asynchronous.
pub fn to_canonical<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    scalars: &mut DeviceBuffer<S>,
    n: usize,
) -> Result<()> {
    const K: &str = "msm_to_canonical";
    elem::<S>(K, "scalars", SCALAR_BYTES)?;
    need(K, "scalars", scalars.len(), n)?;
    if n == 0 {
        return Ok(());
    }
    let n32 = u32_of(K, "n", n)?;
    // SAFETY: reads and writes scalars[0..n) (length checked), each element by one thread.
    unsafe { gpu.launch(stream, MODULE, K, stride_cfg(n, 256)?, &[&*scalars, &n32]) }
}

/// Scalars Montgomery → canonical, `dst[0..n) = canon(src[src_start..src_start+n))` (0 where
/// `skip` marks the point as the identity), and `counters[0] += #scalars neither 0 nor 1`,
/// `counters[1] += #ones`.
#[allow(clippy::too_many_arguments)]
pub fn prepare<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    src: &DeviceBuffer<S>,
    src_start: usize,
    dst: &mut DeviceBuffer<S>,
    n: usize,
    counters: &mut DeviceBuffer<u32>,
    skip: Option<Skip<'_>>,
) -> Result<()> {
    let end = src_start
        .checked_add(n)
        .ok_or_else(|| invalid(PREPARE, "range overflows".into()))?;
    need(PREPARE, "src", src.len(), end)?;
    let src_ptr = src.device_ptr() + (src_start * SCALAR_BYTES) as u64;
    launch_prepare(gpu, stream, src_ptr, dst, "dst", n, counters, skip)
}

/// As [`prepare`] with the scalars converted in place.
pub fn prepare_in_place<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    scalars: &mut DeviceBuffer<S>,
    n: usize,
    counters: &mut DeviceBuffer<u32>,
    skip: Option<Skip<'_>>,
) -> Result<()> {
    let src_ptr = scalars.device_ptr();
    launch_prepare(gpu, stream, src_ptr, scalars, "scalars", n, counters, skip)
}

const PREPARE: &str = "msm_prepare";

/// `msm_prepare` from `src_ptr` (n scalars the caller checked, or `dst` itself) into `dst`.
#[allow(clippy::too_many_arguments)]
fn launch_prepare<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    src_ptr: u64,
    dst: &mut DeviceBuffer<S>,
    dst_name: &str,
    n: usize,
    counters: &mut DeviceBuffer<u32>,
    skip: Option<Skip<'_>>,
) -> Result<()> {
    elem::<S>(PREPARE, "scalars", SCALAR_BYTES)?;
    need(PREPARE, dst_name, dst.len(), n)?;
    need(PREPARE, "counters", counters.len(), 2)?;
    if n == 0 {
        return Ok(());
    }
    let (skip_ptr, skip_at) = skip_args(PREPARE, skip, n)?;
    let n32 = u32_of(PREPARE, "n", n)?;
    // SAFETY: reads n scalars at src_ptr (a range of a live buffer the caller checked, or dst
    // itself: each thread reads element i before it writes it), writes dst[0..n) and
    // counters[0..2), reads skip words below ceil((skip_at + n) / 32) when skip_ptr != 0;
    // lengths checked.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            PREPARE,
            stride_cfg(n, 256)?,
            &[&src_ptr, &*dst, &n32, &*counters, &skip_ptr, &skip_at],
        )
    }
}

/// The digit → (bucket key, point index) mapping of the sort kernels (`fold_t` in
/// kernels/msm/sort.cuh): `nwin` signed digits of `c` bits per scalar; the digit of window w
/// of scalar i goes to bucket set `w mod sets`, key `(w mod sets) · 2^(c−1) + |digit| − 1`, and
/// to point `i + stride · (w / sets)`. Unfolded ([`Self::unfolded`]): one set per window, point
/// i. Folded ([`Self::folded`], precomputed copies): copy j of the points, at `j · stride`,
/// holds `[2^(c · sets · j)] P_i`, so the windows of a set sum to the right multiple and only
/// `sets · 2^(c−1)` buckets remain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Windows {
    pub c: u32,
    pub nwin: u32,
    pub sets: u32,
    pub stride: usize,
}

impl Windows {
    /// Windows of `c` bits over a 256-bit scalar, one bucket set each.
    pub const fn unfolded(c: u32) -> Self {
        let nwin = 256u32.div_ceil(c);
        Self {
            c,
            nwin,
            sets: nwin,
            stride: 0,
        }
    }

    /// Over `copies` (>= 1) precomputed copies of `stride` points: ⌈nwin / copies⌉ sets (a
    /// request beyond what that many sets need uses fewer copies, see [`Self::copies`]);
    /// unfolded if that is one set per window.
    pub fn folded(c: u32, copies: usize, stride: usize) -> Self {
        let u = Self::unfolded(c);
        let sets = u.nwin.div_ceil(copies.clamp(1, u.nwin as usize) as u32);
        if sets == u.nwin {
            return u;
        }
        Self { sets, stride, ..u }
    }

    /// Point copies the windows use: ⌈nwin / sets⌉ (1 unfolded).
    pub const fn copies(&self) -> usize {
        self.nwin.div_ceil(self.sets) as usize
    }

    /// Buckets: `sets · 2^(c−1)`.
    pub const fn nkeys(&self) -> usize {
        (self.sets as usize) << (self.c - 1)
    }

    /// Bound of the point indices of `n` scalars' entries: `n + stride · (copies − 1)`.
    pub const fn index_bound(&self, n: usize) -> usize {
        n + self.stride * (self.copies() - 1)
    }

    /// Whether the entries of `n` scalars can carry their point indices: below 2^31, the sign
    /// bit above them.
    pub const fn indices_fit(&self, n: usize) -> bool {
        self.index_bound(n) <= 1 << 31
    }

    /// Keys of the top bucket set that canonical scalars reach: [`top_window_keys`] when
    /// unfolded; all of them when folded (the top window shares its set with a lower window).
    pub fn top_set_keys(&self) -> usize {
        if self.sets == self.nwin {
            top_window_keys(self.c)
        } else {
            1 << (self.c - 1)
        }
    }

    /// Doublings from one copy to the next: `c · sets`.
    pub const fn copy_doublings(&self) -> u32 {
        self.c * self.sets
    }
}

/// Checks `win` and `n` scalars' indices (< 2^31: a sign bit above them); returns the key count.
fn check_windows(kernel: &str, win: &Windows, n: usize) -> Result<usize> {
    let Windows { c, nwin, sets, .. } = *win;
    if !(2..=24).contains(&c)
        || nwin == 0
        || c as u64 * nwin as u64 > 512
        || sets == 0
        || sets > nwin
    {
        return Err(invalid(
            kernel,
            format!("window bits {c} × {nwin} windows in {sets} sets out of range"),
        ));
    }
    if !win.indices_fit(n) {
        return Err(invalid(
            kernel,
            format!("point indices up to {} exceed 2^31", win.index_bound(n)),
        ));
    }
    Ok(win.nkeys())
}

mod sort;
/// Lowers `first_bad[0]` to the index of every point of `points` outside the prime-order
/// subgroup of `group` (on `stream`, asynchronous; the caller sets `first_bad[0]` first, to
/// `u32::MAX` for "none"). The points must be on the curve (the kernel's memory accesses are in
/// bounds whatever they hold); the identity (0, 0) passes.
pub fn check_subgroup<A: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    group: Curve,
    points: &DeviceBuffer<A>,
    first_bad: &mut DeviceBuffer<u32>,
) -> Result<()> {
    let (kernel, block) = match group {
        Curve::G1 => ("cuzk_check_g1_subgroup", 256),
        Curve::G2 => ("cuzk_check_g2_subgroup", 128),
    };
    let invalid = |reason: String| GpuError::InvalidLaunch {
        kernel: format!("{}::{kernel}", CHECK.name()),
        reason,
    };
    if size_of::<A>() != group.affine_bytes() {
        return Err(invalid(format!(
            "point type has {} bytes, affine {group:?} has {}",
            size_of::<A>(),
            group.affine_bytes()
        )));
    }
    if first_bad.len() != 1 {
        return Err(invalid(format!(
            "the flag buffer holds {} words, not 1",
            first_bad.len()
        )));
    }
    let n = points.len();
    let n32 = u32::try_from(n).map_err(|_| invalid(format!("{n} points: more than 2^32")))?;
    if n == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig::for_elements(n, block)?;
    // SAFETY: thread i < n reads points[i] (n = points.len()) and atomically updates
    // first_bad[0] (one word, checked). `first_bad` is borrowed mutably for the call; callers
    // order later reads after the stream (DeviceBuffer copies on the same stream do).
    unsafe { gpu.launch(stream, &CHECK, kernel, cfg, &[&*first_bad, points, &n32]) }
}

#[cfg(test)]
use sort::hist_counters;
pub use sort::*;

/// Level 0 of the bucket accumulation: `nthreads` equal slices of the `offsets[nkeys]` sorted
/// entries; writes `2 · nthreads` partials and the buckets of runs inside a slice.
/// `buckets` holds `nkeys + 1` XYZZ points (the last is a dump slot); the buckets of keys with
/// entries are written once (here or by the last [`merge`] level), the others are left as
/// they were ([`bucket_reduce`] skips them).
#[allow(clippy::too_many_arguments)]
pub fn accumulate<P: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    points: &DeviceBuffer<P>,
    npoints: usize,
    sorted: &DeviceBuffer<u32>,
    offsets: &DeviceBuffer<u32>,
    nkeys: usize,
    nthreads: usize,
    pkeys: &mut DeviceBuffer<u32>,
    ppts: &mut DeviceBuffer<u64>,
    buckets: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let k = format!("msm_accumulate_{}", curve.suffix());
    elem::<P>(&k, "points", curve.affine_bytes())?;
    need(&k, "points", points.len(), npoints)?;
    need(&k, "offsets", offsets.len(), nkeys + 1)?;
    need(&k, "pkeys", pkeys.len(), 2 * nthreads)?;
    xyzz_len(&k, "ppts", curve, ppts, 2 * nthreads)?;
    xyzz_len(&k, "buckets", curve, buckets, nkeys + 1)?;
    if nthreads == 0 {
        return Err(invalid(&k, "no threads".into()));
    }
    let (np, cap, nk, nt) = (
        u32_of(&k, "npoints", npoints)?,
        u32_of(&k, "sorted.len()", sorted.len())?,
        u32_of(&k, "nkeys", nkeys)?,
        u32_of(&k, "nthreads", nthreads)?,
    );
    let cfg = LaunchConfig::for_elements(nthreads, curve.block())?;
    let args: [&dyn KernelArg; 10] = [
        points, &np, sorted, &cap, offsets, &nk, &nt, &*pkeys, &*ppts, &*buckets,
    ];
    // SAFETY: thread t < nthreads reads sorted[< min(offsets[nkeys], cap)], points[< npoints],
    // offsets[0..=nkeys]; writes pkeys/ppts[2t, 2t+1] and buckets[<= nkeys] (keys clamped).
    unsafe { gpu.launch(stream, MODULE, &k, cfg, &args) }
}

/// Level ≥ 1: `ceil(count / fan_in)` threads each reduce `fan_in` key-sorted partials, writing
/// 2 partials per thread, or (with `final_level`, one thread) every run to its bucket.
#[allow(clippy::too_many_arguments)]
pub fn merge(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    in_keys: &DeviceBuffer<u32>,
    in_pts: &DeviceBuffer<u64>,
    count: usize,
    fan_in: usize,
    out_keys: &mut DeviceBuffer<u32>,
    out_pts: &mut DeviceBuffer<u64>,
    buckets: &mut DeviceBuffer<u64>,
    nkeys: usize,
    final_level: bool,
) -> Result<()> {
    let k = format!("msm_merge_{}", curve.suffix());
    if count == 0 || fan_in == 0 {
        return Err(invalid(&k, "empty merge".into()));
    }
    let threads = count.div_ceil(fan_in);
    if final_level && threads != 1 {
        return Err(invalid(&k, "the final level must be one thread".into()));
    }
    need(&k, "in_keys", in_keys.len(), count)?;
    xyzz_len(&k, "in_pts", curve, in_pts, count)?;
    if !final_level {
        need(&k, "out_keys", out_keys.len(), 2 * threads)?;
        xyzz_len(&k, "out_pts", curve, out_pts, 2 * threads)?;
    }
    xyzz_len(&k, "buckets", curve, buckets, nkeys + 1)?;
    let (c32, f32_, nk, fl) = (
        u32_of(&k, "count", count)?,
        u32_of(&k, "fan_in", fan_in)?,
        u32_of(&k, "nkeys", nkeys)?,
        final_level as u32,
    );
    let cfg = LaunchConfig::for_elements(threads, curve.block())?;
    let args: [&dyn KernelArg; 9] = [
        in_keys, in_pts, &c32, &f32_, &*out_keys, &*out_pts, &*buckets, &nk, &fl,
    ];
    // SAFETY: thread t reads in[t*fan_in ..< count], writes out[2t, 2t+1] (not at the final
    // level) and buckets[<= nkeys] (keys clamped in the kernel).
    unsafe { gpu.launch(stream, MODULE, &k, cfg, &args) }
}

/// Bucket reduction: thread (w, g) of `nwin · G`, `G = ⌈b / l⌉`, writes
/// `out[w·G + g] = Σ_{j < min(l, b − g·l)} (g·l + j + 1) · buckets[w·b + g·l + j]`.
#[allow(clippy::too_many_arguments)]
pub fn bucket_reduce(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    buckets: &DeviceBuffer<u64>,
    offsets: &DeviceBuffer<u32>,
    b: usize,
    nwin: usize,
    l: usize,
    out: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let k = format!("msm_bucket_reduce_{}", curve.suffix());
    if l == 0 || l > b {
        return Err(invalid(
            &k,
            format!("group size {l} is not in 1..={b} (the buckets per window)"),
        ));
    }
    let threads = nwin * b.div_ceil(l);
    xyzz_len(&k, "buckets", curve, buckets, nwin * b)?;
    need(&k, "offsets", offsets.len(), nwin * b + 1)?;
    xyzz_len(&k, "out", curve, out, threads)?;
    let (b32, w32, l32) = (
        u32_of(&k, "b", b)?,
        u32_of(&k, "nwin", nwin)?,
        u32_of(&k, "l", l)?,
    );
    let cfg = LaunchConfig::for_elements(threads, curve.block())?;
    // SAFETY: reads buckets[0..nwin*b) (where offsets say the key has entries) and
    // offsets[0..=nwin*b), writes out[0..threads).
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            cfg,
            &[buckets, offsets, &b32, &w32, &l32, &*out],
        )
    }
}

/// One tree-sum step in each of `nseg` segments `pts[s·stride ..]` of `count` points: the
/// first `count − count/2` now hold the sums. Repeat until `count == 1`.
pub fn sum_halves(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    pts: &mut DeviceBuffer<u64>,
    stride: usize,
    nseg: usize,
    count: usize,
) -> Result<()> {
    let k = format!("msm_sum_halves_{}", curve.suffix());
    if count > stride || nseg == 0 {
        return Err(invalid(
            &k,
            format!("count {count} > stride {stride} or no segment"),
        ));
    }
    xyzz_len(&k, "pts", curve, pts, (nseg - 1) * stride + count)?;
    let work = nseg * (count / 2);
    if work == 0 {
        return Ok(());
    }
    let (s32, n32, c32) = (
        u32_of(&k, "stride", stride)?,
        u32_of(&k, "nseg", nseg)?,
        u32_of(&k, "count", count)?,
    );
    // SAFETY: touches pts[s*stride + j], j < count, s < nseg.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            stride_cfg(work, curve.block())?,
            &[&*pts, &s32, &n32, &c32],
        )
    }
}

/// `out[t] = Σ points[i]` over `i ≡ t (mod nthreads)`, `i < n`, with canonical scalar one.
#[allow(clippy::too_many_arguments)]
pub fn ones<P: Pod, S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    points: &DeviceBuffer<P>,
    scalars: Scalars<'_, S>,
    n: usize,
    nthreads: usize,
    out: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let k = format!("msm_ones_{}", curve.suffix());
    elem::<P>(&k, "points", curve.affine_bytes())?;
    let (ptr, skip_ptr, skip_at) = scalars.args(&k, n)?;
    need(&k, "points", points.len(), n)?;
    xyzz_len(&k, "out", curve, out, nthreads)?;
    if nthreads == 0 {
        return Err(invalid(&k, "no threads".into()));
    }
    let (n32, t32) = (u32_of(&k, "n", n)?, u32_of(&k, "nthreads", nthreads)?);
    let cfg = LaunchConfig::for_elements(nthreads, curve.block())?;
    // SAFETY: reads points[0..n), n scalars at ptr and their skip words (ranges checked),
    // writes out[0..nthreads).
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            cfg,
            &[points, &ptr, &skip_ptr, &skip_at, &n32, &t32, &*out],
        )
    }
}

/// `out[out_base + s] = Jacobian(input[s · stride])` for `s < nseg` (blst layout).
#[allow(clippy::too_many_arguments)]
pub fn to_jacobian<J: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    input: &DeviceBuffer<u64>,
    stride: usize,
    nseg: usize,
    out: &mut DeviceBuffer<J>,
    out_base: usize,
) -> Result<()> {
    let k = format!("msm_to_jacobian_{}", curve.suffix());
    elem::<J>(&k, "out", curve.jacobian_bytes())?;
    if nseg == 0 {
        return Ok(());
    }
    xyzz_len(&k, "input", curve, input, (nseg - 1) * stride + 1)?;
    need(&k, "out", out.len(), out_base + nseg)?;
    let (s32, n32, b32) = (
        u32_of(&k, "stride", stride)?,
        u32_of(&k, "nseg", nseg)?,
        u32_of(&k, "out_base", out_base)?,
    );
    // SAFETY: reads input[s*stride], writes out[out_base + s], s < nseg.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            &k,
            stride_cfg(nseg, 128)?,
            &[input, &s32, &n32, &*out, &b32],
        )
    }
}

/// Affine points per thread of `msm_to_affine_*` (one Fp inversion per this many).
const AFFINE_PER_THREAD: u32 = 32;

/// Precomputed copies: for j in `1..copies`, `points[j·n + i] = [2^doublings] points[(j−1)·n +
/// i]` (i < n), each copy from the previous one: `msm_double_*` into the XYZZ scratch `tmp`,
/// then `msm_to_affine_*` (kernels/ec/batch_affine.cuh, one Fp inversion per 32 points), in
/// chunks of as many points as `tmp` holds. Both curve groups have odd order (odd cofactors),
/// so `[2^k] P` is the identity only if P is: copy 0's identity bits ([`identity_bits`]) hold
/// for every copy. Asynchronous.
#[allow(clippy::too_many_arguments)]
pub fn precompute_copies<P: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    curve: Curve,
    points: &mut DeviceBuffer<P>,
    n: usize,
    copies: usize,
    doublings: u32,
    tmp: &mut DeviceBuffer<u64>,
) -> Result<()> {
    let (kd, ka) = (
        format!("msm_double_{}", curve.suffix()),
        format!("msm_to_affine_{}", curve.suffix()),
    );
    elem::<P>(&kd, "points", curve.affine_bytes())?;
    let total = n
        .checked_mul(copies)
        .ok_or_else(|| invalid(&kd, "n × copies overflows".into()))?;
    need(&kd, "points", points.len(), total)?;
    let chunk = tmp.len() / curve.xyzz_words();
    if n == 0 || copies < 2 {
        return Ok(());
    }
    if chunk == 0 {
        return Err(invalid(&kd, "tmp holds no XYZZ point".into()));
    }
    let bytes = curve.affine_bytes() as u64;
    let at = |j: usize, i: usize| points.device_ptr() + (j * n + i) as u64 * bytes;
    for j in 1..copies {
        for start in (0..n).step_by(chunk) {
            let len = chunk.min(n - start);
            let (src, dst) = (at(j - 1, start), at(j, start));
            let len32 = u32_of(&kd, "chunk", len)?;
            // SAFETY: reads points (j−1)·n + start + [0, len) (inside the buffer: (j+1)·n <=
            // total <= len, checked), writes tmp points [0, len) (len <= chunk, its capacity).
            unsafe {
                gpu.launch(
                    stream,
                    MODULE,
                    &kd,
                    stride_cfg(len, curve.block())?,
                    &[&src, &len32, &doublings, &*tmp],
                )?
            }
            let threads = len.div_ceil(AFFINE_PER_THREAD as usize);
            // SAFETY: thread t handles points t + k·T (T = launched threads >= threads,
            // k < 32) below len: reads tmp point i, writes the affine point at dst + i, inside
            // copy j (checked as above). `points` is borrowed mutably for the call.
            unsafe {
                gpu.launch(
                    stream,
                    MODULE,
                    &ka,
                    LaunchConfig::for_elements(threads, curve.block())?,
                    &[&dst, &*tmp, &len32, &AFFINE_PER_THREAD],
                )?
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_groups_fit_the_shared_counters_and_cover_every_window() {
        // The 2^24 and 2^26 plans at c = 20: one group, and five groups of three windows.
        let w20 = Windows::unfolded(20);
        assert_eq!(hist_groups(&w20, 7, 3), Some((13, 1, 12 * 4096 + 3710)));
        assert_eq!(hist_groups(&w20, 5, 1), Some((3, 5, 3 * 16384)));
        // 2 copies at 2^24: 7 full sets at F = 6 fill the counters exactly
        let f20 = Windows::folded(20, 2, 1 << 24);
        assert_eq!(hist_groups(&f20, 6, 6), Some((7, 1, 7 * 8192)));
        for c in 2..=22u32 {
            let u = Windows::unfolded(c);
            for win in [u, Windows::folded(c, 2, 100), Windows::folded(c, 3, 100)] {
                let sets = win.sets;
                for f in 0..=(c - 1).min(SORT_MAX_FINE_BITS) {
                    // folded sets are full: the plan keeps Ft = F
                    let ft0 = if sets < win.nwin { f } else { 0 };
                    for ft in ft0..=f {
                        let per_set = 1usize << (c - 1 - f);
                        match hist_groups(&win, f, ft) {
                            Some((spg, groups, cnt)) => {
                                assert!(cnt <= SORT_HIST_COUNTERS, "c {c} F {f}");
                                assert_eq!(groups, sets.div_ceil(spg), "c {c} F {f}");
                                if spg < sets {
                                    let more = hist_counters(&win, f, ft, spg + 1);
                                    assert!(
                                        more > SORT_HIST_COUNTERS,
                                        "c {c} F {f}: groups too small"
                                    );
                                }
                            }
                            None => assert!(per_set > SORT_HIST_COUNTERS, "c {c} F {f}"),
                        }
                    }
                }
            }
        }
    }

    /// The folded mapping: sets, copies actually used, keys, index bound and top-set reach.
    #[test]
    fn windows_fold() {
        let u = Windows::unfolded(20);
        assert_eq!(
            (u.nwin, u.sets, u.copies(), u.nkeys()),
            (13, 13, 1, 13 << 19)
        );
        assert_eq!(u.index_bound(1000), 1000);
        assert_eq!(u.top_set_keys(), top_window_keys(20));
        let n = 1 << 24;
        let f2 = Windows::folded(20, 2, n);
        assert_eq!((f2.sets, f2.copies(), f2.nkeys()), (7, 2, 7 << 19));
        assert_eq!((f2.index_bound(n), f2.copy_doublings()), (2 * n, 140));
        assert_eq!(f2.top_set_keys(), 1 << 19);
        let f3 = Windows::folded(20, 3, n);
        assert_eq!((f3.sets, f3.copies()), (5, 3));
        // 8 copies need only 7: 2 sets cover 13 windows in 7 copies
        assert_eq!(Windows::folded(20, 8, n).copies(), 7);
        let full = Windows::folded(20, 13, n);
        assert_eq!(
            (full.sets, full.copies(), full.copy_doublings()),
            (1, 13, 20)
        );
        assert_eq!(Windows::folded(20, 100, n), full);
        assert_eq!(Windows::folded(20, 1, n), u);
        assert_eq!(Windows::folded(20, 0, n), u);
        for c in 2..=22 {
            for m in 1..=130 {
                let w = Windows::folded(c, m, 77);
                assert!(w.copies() <= m.max(1) && w.copies() as u32 * w.sets >= w.nwin);
                assert!((w.copies() as u32 - 1) * w.sets < w.nwin, "no idle copy");
            }
        }
    }
}
