//! Per-phase device times of one profiled MSM (CUDA events between the launch groups).

use super::*;

/// Device times (CUDA events on the compute stream) of the phases of one resident MSM, plus
/// host-side times; from [`GpuMsm::msm_device_profiled`]. All in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MsmProfile {
    pub n: usize,
    /// Scalars neither 0 nor 1 (sorted into buckets) and scalars equal to 1.
    pub general: usize,
    pub ones: usize,
    pub c: u32,
    pub nwin: usize,
    /// Bucket sets (`nwin` unless the run used precomputed copies).
    pub sets: usize,
    /// Host time allocating canon, counters and scratch (about 0 with a kept scratch).
    pub alloc_ms: f64,
    /// Host time of the scalar upload ([`GpuMsm::msm_profiled`] only).
    pub upload_ms: f64,
    /// Montgomery → canonical and counting (device).
    pub prepare_ms: f64,
    /// Host time from the end of prepare to the first batch kernel being enqueued (counts read
    /// back, plan, scratch allocation): device idle.
    pub gap_ms: f64,
    /// Zeroing the bin counts and the bin histogram.
    pub histogram_ms: f64,
    /// Scan of the bin counts.
    pub scan_ms: f64,
    /// The scatter into the bins.
    pub scatter_ms: f64,
    /// The per-bin shared-memory sort plus the pass for oversized bins.
    pub fine_ms: f64,
    /// Bucket accumulation, level 0.
    pub accumulate_ms: f64,
    /// Merge levels of the boundary partials.
    pub merge_ms: f64,
    pub reduce_ms: f64,
    /// Tree sums of the reduced groups and conversion of the window sums.
    pub window_sums_ms: f64,
    /// Sum of the points with scalar one.
    pub ones_ms: f64,
    /// Device time from the start of prepare to the end of the last kernel (gap included).
    pub device_ms: f64,
    /// Host wall-clock time of the whole call, including the final combine.
    pub total_ms: f64,
}

impl MsmProfile {
    /// Histogram, scan, scatter and fine sort: the counting sort.
    pub fn sort_ms(&self) -> f64 {
        self.histogram_ms + self.scan_ms + self.scatter_ms + self.fine_ms
    }
}

impl std::fmt::Display for MsmProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={} general={} ones={} c={} nwin={} sets={} total={:.2} device={:.2} alloc={:.2} \
             upload={:.2} prepare={:.2} gap={:.2} sort={:.2} (histogram={:.2} scan={:.2} \
             scatter={:.2} fine={:.2}) accumulate={:.2} merge={:.2} reduce={:.2} window_sums={:.2} ones={:.2}",
            self.n,
            self.general,
            self.ones,
            self.c,
            self.nwin,
            self.sets,
            self.total_ms,
            self.device_ms,
            self.alloc_ms,
            self.upload_ms,
            self.prepare_ms,
            self.gap_ms,
            self.sort_ms(),
            self.histogram_ms,
            self.scan_ms,
            self.scatter_ms,
            self.fine_ms,
            self.accumulate_ms,
            self.merge_ms,
            self.reduce_ms,
            self.window_sums_ms,
            self.ones_ms,
        )
    }
}

/// Event marks of a profiled MSM, in order: prepare start/end, batch start, sort start, after
/// the histogram, scan, scatter, fine sort, accumulate, merge, reduce, window sums, ones.
pub(super) const MARKS: usize = 13;
pub(super) const M_BATCH: usize = 2;

pub(super) struct Marks {
    pub(super) ev: Vec<Event>,
    pub(super) alloc: std::time::Duration,
    pub(super) upload: std::time::Duration,
    /// The plan's (general, ones, c, nwin, sets), set once the batch is planned.
    pub(super) stats: Option<(usize, usize, u32, usize, usize)>,
}

impl Marks {
    pub(super) fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        Ok(Self {
            ev: (0..MARKS).map(|_| gpu.event()).collect::<Result<_, _>>()?,
            alloc: std::time::Duration::ZERO,
            upload: std::time::Duration::ZERO,
            stats: None,
        })
    }
}

/// Records mark `i` on `s` when profiling.
pub(super) fn mark(marks: Option<&Marks>, s: &Stream, i: usize) -> Result<(), GpuError> {
    match marks {
        Some(m) => s.record(&m.ev[i]),
        None => Ok(()),
    }
}
