//! GPU Pippenger MSM (kernels: `kernels/msm/pippenger.cuh`; launches: `cuzk_gpu::msm`).
//!
//! A [`GpuMsm`] owns a set of points, either resident in VRAM (uploaded once, or handed over
//! already on the device) or streamed in chunks from pinned host memory when they do not fit
//! the budget; each [`GpuMsm::msm`] call multiplies them by a new scalar vector. Scalars are
//! given in Montgomery form (host slice or device buffer) and made canonical on the device.
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
use cuzk_gpu::msm::{self as k, Accumulate, Curve, ResultRing, Staging, Windows};
use cuzk_gpu::{
    DeviceBuffer, Event, Gpu, GpuError, PinnedBuffer, Reclaim, Stream, Vram, VramError,
};
use rayon::prelude::*;

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
/// Largest window a plan accepts (table, `with_window_bits`, `CUZK_MSM_WINDOW`).
pub const MAX_WINDOW_BITS: u32 = 22;
/// Largest window the cost model picks (beyond it the buckets outgrow what accumulation saves,
/// by the model; measured rows of [`MEASURED_WINDOWS`] may go up to [`MAX_WINDOW_BITS`]).
const MODEL_MAX_WINDOW_BITS: u32 = 20;
/// Environment variable fixing the window bits of every new context (2..=22; ignored if it
/// does not parse). [`GpuMsm::with_window_bits`] overrides it.
pub const WINDOW_ENV: &str = "CUZK_MSM_WINDOW";
/// Environment variable choosing the counting sort of every new context: `atomic` (the
/// previous per-key histogram + scan + atomic scatter, a fallback); anything else or unset:
/// the binned sort ([`Sort::Bins`]).
pub const SORT_ENV: &str = "CUZK_MSM_SORT";
/// Entries a sort bin should hold on average (the shared-memory tile holds `SORT_TILE` =
/// 8192, so a typical bin fits with room for its random spread).
const SORT_BIN_TARGET: f64 = 4096.0;

/// Counting sort of the (scalar, window) entries by bucket key (kernels/msm/sort.cuh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Sort {
    /// Bins of 2^F keys (histogram and scatter on the bins, a shared-memory sort per bin).
    #[default]
    Bins,
    /// One global atomic per entry on its key's cursor (histogram, scan of every key, scatter).
    Atomic,
}

impl Sort {
    /// Parses `bins` / `atomic` (the `CUZK_MSM_SORT` values).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "bins" => Some(Self::Bins),
            "atomic" => Some(Self::Atomic),
            _ => None,
        }
    }
}

fn env_sort() -> Sort {
    std::env::var(SORT_ENV)
        .ok()
        .and_then(|v| Sort::parse(&v))
        .unwrap_or_default()
}
/// Host scalars of at least this many elements are staged through pinned memory.
const STAGE_MIN: usize = 1 << 16;
/// Elements per pinned staging slot (16 MiB of scalars).
const STAGE_SLOT: usize = 1 << 19;
/// Elements per task of the parallel copy into a staging slot (1 MiB).
const STAGE_TASK: usize = 1 << 15;

/// Best window bits measured on the GPU: one row per line, `(group, from, c)`: c holds for a
/// general-scalar count (scalars neither 0 nor 1) m with `from <= log2 m` up to the group's
/// next row; below a group's first row (or for a group with no rows) the cost model
/// ([`Plan::model_window`]) decides. Rows are sorted by `from` within a group.
///
/// `gpu_bench_msm_windows` (crates/msm/tests/gpu.rs) times every candidate c at n = 2^16..2^26
/// with full-width and 70% 0/1 scalars (general ≈ 0.3 n) and prints the replacement rows
/// (`msm_window_row` lines: each measured point's best c from the midpoint to the previous
/// measured point). To update, paste those lines here, or change one row's c.
///
/// Rows measured on an H200 (2026-11-30, GPU run 1, `gpu_bench_msm_windows`, median of 3,
/// full-width and 70% 0/1 scalars), as the bench proposed them. Caveat: run 1 still had the
/// single-block scan (20 ms at nkeys = 6.8 M, c = 20; 1.5 ms at c = 16), which penalised large
/// c; with the multi-block scan c = 20 is predicted to win again at 2^24 full-width (see
/// crates/msm/PERF-NOTES.md, "Run 1"). Re-measure with `CUZK_MSM_WINDOWS_LOGS=22,24,26`.
pub const MEASURED_WINDOWS: &[(Group, f64, u32)] = &[
    (Group::G1, 13.26, 10), // H200 2026-11-30 run 1: best at log2 general 14.26
    (Group::G1, 15.13, 10), // H200 2026-11-30 run 1: best at log2 general 16.00
    (Group::G1, 16.13, 10), // H200 2026-11-30 run 1: best at log2 general 16.26
    (Group::G1, 17.13, 12), // H200 2026-11-30 run 1: best at log2 general 18.00
    (Group::G1, 18.13, 13), // H200 2026-11-30 run 1: best at log2 general 18.26
    (Group::G1, 19.13, 16), // H200 2026-11-30 run 1: best at log2 general 20.00
    (Group::G1, 20.13, 16), // H200 2026-11-30 run 1: best at log2 general 20.26
    (Group::G1, 21.13, 16), // H200 2026-11-30 run 1: best at log2 general 22.00
    (Group::G1, 22.13, 16), // H200 2026-11-30 run 1: best at log2 general 22.26
    (Group::G1, 23.13, 20), // H200 2026-11-30 run 4 (device-wide scan): 136.8 ms vs 144.2 at c = 16
    (Group::G1, 24.13, 20), // H200 2026-11-30 run 1: best at log2 general 24.26
    (Group::G1, 25.13, 20), // H200 2026-11-30 run 1: best at log2 general 26.00
    (Group::G2, 13.26, 10), // H200 2026-11-30 run 1: best at log2 general 14.26
    (Group::G2, 15.13, 10), // H200 2026-11-30 run 1: best at log2 general 16.00
    (Group::G2, 16.13, 10), // H200 2026-11-30 run 1: best at log2 general 16.26
    (Group::G2, 17.13, 14), // H200 2026-11-30 run 1: best at log2 general 18.00
    (Group::G2, 18.13, 13), // H200 2026-11-30 run 1: best at log2 general 18.26
    (Group::G2, 19.13, 16), // H200 2026-11-30 run 1: best at log2 general 20.00
    (Group::G2, 20.13, 16), // H200 2026-11-30 run 1: best at log2 general 20.26
    (Group::G2, 21.13, 16), // H200 2026-11-30 run 1: best at log2 general 22.00
    (Group::G2, 22.13, 16), // H200 2026-11-30 run 1: best at log2 general 22.26
    (Group::G2, 23.13, 20), // H200 2026-11-30 run 4 (device-wide scan): 365.5 ms vs 370.4 at c = 16
];

/// The window of `table` for `m` general scalars of `group` (see [`MEASURED_WINDOWS`]).
fn table_window(table: &[(Group, f64, u32)], group: Group, m: usize) -> Option<u32> {
    let l = (m.max(1) as f64).log2();
    table
        .iter()
        .filter(|r| r.0 == group && r.1 <= l)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|r| r.2.clamp(2, MAX_WINDOW_BITS))
}

/// Every window a plan of `group` may choose for at most `general` general scalars, each with
/// the largest general count (<= `general`) it may be chosen for (a plan's scratch grows with
/// the general count at a fixed window). Over-approximates where exactness does not matter.
fn reachable_windows(group: Group, general: usize) -> Vec<(u32, usize)> {
    let rows: Vec<&(Group, f64, u32)> = MEASURED_WINDOWS.iter().filter(|r| r.0 == group).collect();
    let pow2 = |l: f64| 2f64.powf(l).ceil().min(usize::MAX as f64) as usize;
    let mut out = Vec::new();
    // Below the first row the model decides; it is monotone in m, so its windows there are
    // model(1) ..= model(top) (each bounded with m = top).
    let top = rows.first().map_or(general, |r| general.min(pow2(r.1)));
    for c in Plan::model_window(1)..=Plan::model_window(top.max(1)) {
        out.push((c, top));
    }
    for (i, r) in rows.iter().enumerate() {
        if (general.max(1) as f64).log2() < r.1 {
            break; // no general count <= `general` reaches this row
        }
        let hi = rows
            .get(i + 1)
            .map_or(general, |next| general.min(pow2(next.1)));
        out.push((r.2.clamp(2, MAX_WINDOW_BITS), hi));
    }
    out
}

fn group_of(cv: Curve) -> Group {
    match cv {
        Curve::G1 => Group::G1,
        Curve::G2 => Group::G2,
    }
}

/// Environment variable choosing the G1 accumulation kernel of every new context: `pair`
/// (default), `occ4` or `regular` (see [`Accumulate`]); ignored if it does not parse.
pub const ACCUMULATE_ENV: &str = "CUZK_MSM_ACCUMULATE";

fn env_accumulate() -> Accumulate {
    std::env::var(ACCUMULATE_ENV)
        .ok()
        .and_then(|v| Accumulate::parse(&v))
        .unwrap_or_default()
}

fn env_window() -> Option<u32> {
    std::env::var(WINDOW_ENV)
        .ok()?
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|c| (2..=MAX_WINDOW_BITS).contains(c))
}

fn curve<P: MsmPoint>() -> Curve {
    match P::GROUP {
        Group::G1 => Curve::G1,
        Group::G2 => Curve::G2,
    }
}

/// Words of the identity bits of `len` resident points (at least one: no empty buffers).
fn identity_words(len: usize) -> usize {
    len.div_ceil(32).max(1)
}

/// Full waves of level-0 accumulation threads for large MSMs (while slices keep >= 256
/// entries): more, shorter slices, so that blocks finishing early are replaced. With one wave
/// the G1 kernel ran its last stretch with warp slots empty (ncu: 3.27 of 4 warps per scheduler). H200 run
/// 18, kept scratch: G1 accumulation at 2^24 94.6 ms (1 wave) / 92.4 (2) / 91.0 (4) / 90.1
/// (8), at 2^26 372.2 / 361.5 / 354.9 / 351.3, merge 0.43 -> 0.88 ms at 8; G2 2^24 302.7 /
/// 298.7 / 299.3.
const fn acc_waves(cv: Curve) -> usize {
    match cv {
        Curve::G1 => 8,
        Curve::G2 => 2,
    }
}

/// XYZZ points per chunk of the precomputation of point copies (its scratch: 192 MiB for G1,
/// 384 MiB for G2).
const PRECOMPUTE_CHUNK: usize = 1 << 20;

/// Sizes of one Pippenger batch, all derived from (number of general scalars, window bits,
/// precomputed point copies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Window bits c; signed digits, so 2^(c-1) buckets per window.
    pub c: u32,
    pub nwin: usize,
    /// Bucket sets: `nwin` unfolded, ⌈nwin / copies⌉ over precomputed copies (window w uses
    /// set w mod sets and point copy w / sets; [`Windows`]). "Window" in the bucket fields
    /// below means bucket set.
    pub sets: usize,
    /// Point copies the windows use (1 unfolded).
    pub copies: usize,
    pub buckets_per_window: usize,
    /// Threads of the level-0 accumulation.
    pub threads: usize,
    /// Buckets per thread in the bucket reduction.
    pub group: usize,
    /// Room for sorted entries (general scalars × windows).
    pub sorted_cap: usize,
    /// Threads of the ones pass.
    pub ones_threads: usize,
    /// Fine bits F of the binned sort: bins of 2^F keys, ~[`SORT_BIN_TARGET`] entries each.
    pub sort_fine_bits: u32,
    /// Fine bits of the top window's bins (<= F: its digits span fewer keys, each fuller).
    pub sort_top_fine_bits: u32,
    /// Sizing plans ([`Self::new`]) only: per curve (G1, G2), the largest scratch of any plan a
    /// run may use; [`Self::scratch_bytes`] never reports less. Zero for a run's own plan.
    bound: [u64; 2],
}

impl Plan {
    /// Window bits for `m` general G1 scalars: the measured table ([`MEASURED_WINDOWS`]),
    /// the cost model where the table has no row.
    pub fn choose_window(m: usize) -> u32 {
        Self::choose_window_for(Group::G1, m)
    }

    /// Window bits for `m` general scalars of `group`: [`MEASURED_WINDOWS`], else the model.
    pub fn choose_window_for(group: Group, m: usize) -> u32 {
        table_window(MEASURED_WINDOWS, group, m).unwrap_or_else(|| Self::model_window(m))
    }

    /// Chooses c by a cost model in units of one mixed addition: `m · nwin` for accumulation
    /// plus `2.6 · nwin · 2^(c-1)` for the bucket reduction (two full additions per bucket).
    pub fn model_window(m: usize) -> u32 {
        let m = m.max(1) as f64;
        (2..=MODEL_MAX_WINDOW_BITS)
            .min_by(|&a, &b| {
                let cost = |c: u32| {
                    let nwin = 256u32.div_ceil(c) as f64;
                    m * nwin + 2.6 * nwin * (1u64 << (c - 1)) as f64
                };
                cost(a).total_cmp(&cost(b))
            })
            .expect("non-empty range")
    }

    /// Sizing plan for `n` points with at most `general` general scalars: the G1 window
    /// choice with 256 resident threads per SM, whose [`Self::scratch_bytes`] is, for either
    /// curve, an upper bound of the scratch of every plan a resident run over them may use:
    /// any general count <= `general` (the window table need not be monotone, and G2's rows
    /// differ from G1's), either accumulation kernel, and the window `c` if given, else the
    /// table/model windows plus `CUZK_MSM_WINDOW` if set. What an MSM runs is
    /// [`Self::for_curve`] / [`Self::for_variant`].
    pub fn new(general: usize, n: usize, c: Option<u32>, sm_count: usize) -> Self {
        let mut plan =
            Self::with_residency(general, n, c, 1, sm_count, THREADS_PER_SM, 1, Group::G1);
        for (i, cv) in [Curve::G1, Curve::G2].into_iter().enumerate() {
            let mut cands = match c {
                Some(c) => vec![(c, general)],
                None => reachable_windows(group_of(cv), general),
            };
            if let (None, Some(e)) = (c, env_window()) {
                cands.push((e, general));
            }
            for (cw, m) in cands {
                for acc in Accumulate::ALL {
                    let p = Self::for_variant(m, n, Some(cw), sm_count, cv, acc);
                    plan.bound[i] = plan.bound[i].max(p.scratch_bytes(cv));
                }
            }
        }
        plan
    }

    /// Plan for a curve: the accumulation gets one full wave of the threads its kernel keeps
    /// resident per SM.
    pub fn for_curve(general: usize, n: usize, c: Option<u32>, sm_count: usize, cv: Curve) -> Self {
        Self::for_variant(general, n, c, sm_count, cv, Accumulate::Regular)
    }

    /// As [`Self::for_curve`] for the accumulation kernel `acc`.
    pub fn for_variant(
        general: usize,
        n: usize,
        c: Option<u32>,
        sm_count: usize,
        cv: Curve,
        acc: Accumulate,
    ) -> Self {
        Self::with_residency(
            general,
            n,
            c,
            1,
            sm_count,
            acc.resident_threads_per_sm(cv),
            acc_waves(cv),
            group_of(cv),
        )
    }

    /// As [`Self::for_variant`] at window `c` over `copies` precomputed copies of the `n`
    /// points (a request beyond what the windows need uses fewer: [`Windows::folded`]).
    pub fn folded(
        general: usize,
        n: usize,
        c: u32,
        copies: usize,
        sm_count: usize,
        cv: Curve,
        acc: Accumulate,
    ) -> Self {
        Self::with_residency(
            general,
            n,
            Some(c),
            copies,
            sm_count,
            acc.resident_threads_per_sm(cv),
            acc_waves(cv),
            group_of(cv),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn with_residency(
        general: usize,
        n: usize,
        c: Option<u32>,
        copies: usize,
        sm_count: usize,
        acc_threads_per_sm: usize,
        acc_waves: usize,
        group: Group,
    ) -> Self {
        let c = c
            .unwrap_or_else(|| Self::choose_window_for(group, general))
            .clamp(2, MAX_WINDOW_BITS);
        let win = Windows::folded(c, copies, n);
        let nwin = win.nwin as usize;
        let sets = win.sets as usize;
        let buckets_per_window = 1usize << (c - 1);
        let wave = sm_count.max(1) * THREADS_PER_SM;
        let acc_wave = sm_count.max(1) * acc_threads_per_sm.max(1);
        let entries = general * nwin;
        // One wave at ~16 entries per slice or more; the extra waves only while slices keep
        // >= 256 entries (at 2^20, 8 waves of 31-entry slices cost more in partials than
        // they saved: H200 run 19, kept scratch 10.90 -> 11.29 ms).
        let threads = (entries / 16)
            .min(acc_wave)
            .max((entries / 256).min(acc_wave * acc_waves.max(1)))
            .max(1);
        // The bucket reduction fills one wave with the groups that have work: ⌈B / L⌉ per
        // set below the top one, ⌈reach / L⌉ in the top set (unfolded, canonical scalars reach
        // only the top window's first `top_window_keys(c)` keys: 29678 of 2^19 at c = 20; its
        // later groups are empty and finish at once; folded, every set is full). The last
        // group of a set may be shorter. More than one wave ran its last part-empty, and a
        // power-of-two group count left up to half of the wave idle (2^24: 2048 of 2599).
        let b = buckets_per_window;
        let reach = win.top_set_keys().clamp(1, b);
        let busy = |per: usize| {
            let l = b.div_ceil(per);
            (sets - 1) * b.div_ceil(l) + reach.div_ceil(l)
        };
        let mut per_win = (wave * b / ((sets - 1) * b + reach)).clamp(1, b);
        while per_win > 1 && busy(per_win) > wave {
            per_win -= 1;
        }
        let group = b.div_ceil(per_win);
        let sort_fine_bits = Self::fine_bits(&win, general, n);
        Self {
            c,
            nwin,
            sets,
            copies: win.copies(),
            buckets_per_window,
            threads,
            group,
            sorted_cap: entries.max(1),
            ones_threads: n.div_ceil(64).clamp(1, acc_wave),
            sort_fine_bits,
            sort_top_fine_bits: Self::top_fine_bits(&win, sort_fine_bits),
            bound: [0; 2],
        }
    }

    /// Largest F (within what the kernels accept for the entries' point indices) with about
    /// `per_key · 2^F <= SORT_BIN_TARGET` entries per bin; a full set has `per_key` ~
    /// general · (windows per set) / 2^(c-1) entries per key. Folded, the indices span the
    /// copies (one more bit at 2 copies) and the keys are fuller: both make F smaller.
    fn fine_bits(win: &Windows, general: usize, n: usize) -> u32 {
        let per_key = general.max(1) as f64 * f64::from(win.nwin)
            / (f64::from(win.sets) * (1u64 << (win.c - 1)) as f64);
        let max = k::max_fine_bits(win.index_bound(n), win.c);
        (0..=max)
            .rev()
            .find(|&f| per_key * (1u64 << f) as f64 <= SORT_BIN_TARGET)
            .unwrap_or(0)
    }

    /// F less log2 of how much fuller the top set's keys are (2^(c-1) keys, only
    /// [`Windows::top_set_keys`] reachable): e.g. 4 less at c = 20 unfolded; F when folded.
    fn top_fine_bits(win: &Windows, fine_bits: u32) -> u32 {
        let b = 1usize << (win.c - 1);
        let reach = win.top_set_keys();
        let shift = (0..win.c)
            .take_while(|&s| reach << s <= b)
            .last()
            .unwrap_or(0);
        fine_bits.saturating_sub(shift)
    }

    /// The digit mapping of the sort kernels for `n` scalars (copy stride `n` when folded).
    pub fn windows(&self, n: usize) -> Windows {
        Windows::folded(self.c, self.copies, n)
    }

    /// Bins of the binned sort.
    pub fn sort_bins(&self) -> usize {
        k::sort_bins(
            self.c,
            self.sets as u32,
            self.sort_fine_bits,
            self.sort_top_fine_bits,
        )
    }

    pub fn nkeys(&self) -> usize {
        self.sets * self.buckets_per_window
    }

    fn groups(&self) -> usize {
        self.buckets_per_window.div_ceil(self.group)
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
        let own = u * (3 * nk + 1)
            + u * (self.sort_bins() as u64 + 2)
            + u * self.sorted_cap as u64
            + x * (nk + 1)
            + (u + x) * (2 * self.threads + self.level1()) as u64
            + x * (self.sets * self.groups() + self.ones_threads) as u64
            + (curve.jacobian_bytes() as u64) * (self.sets as u64 + 1)
            + round;
        let bound = match curve {
            Curve::G1 => self.bound[0],
            Curve::G2 => self.bound[1],
        };
        own.max(bound)
    }
}

/// Device buffers of one batch; allocated together so that a failure frees them all.
struct Scratch<P: MsmPoint> {
    counts: DeviceBuffer<u32>,
    offsets: DeviceBuffer<u32>,
    cursors: DeviceBuffer<u32>,
    sorted: DeviceBuffer<u32>,
    /// Binned sort: bin offsets (nbins + 1) and the oversized-bin flag.
    bins: DeviceBuffer<u32>,
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
    /// Element counts of the buffers, in field order.
    fn lens(plan: &Plan) -> [usize; 13] {
        let w = curve::<P>().xyzz_words();
        let nk = plan.nkeys();
        [
            nk,
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

    fn new(gpu: &Gpu, plan: &Plan) -> Result<Self, MsmError> {
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
    fn fits(&self, plan: &Plan) -> bool {
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
struct Cache<P: MsmPoint> {
    canon: Option<DeviceBuffer<Fr>>,
    counters: Option<DeviceBuffer<u32>>,
    scratch: Option<Scratch<P>>,
    staging: Option<Staging<Fr>>,
}

impl<P: MsmPoint> Cache<P> {
    /// Device bytes held (the staging slots are host memory).
    fn device_bytes(&self) -> u64 {
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
struct KeptCache<P: MsmPoint>(Mutex<Cache<P>>);

impl<P: MsmPoint> KeptCache<P> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Cache<P>> {
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
    /// The counting sort that ran.
    pub sort: Sort,
    /// Host time allocating canon, counters and scratch (about 0 with a kept scratch).
    pub alloc_ms: f64,
    /// Host time of the scalar upload ([`GpuMsm::msm_profiled`] only).
    pub upload_ms: f64,
    /// Montgomery → canonical and counting (device).
    pub prepare_ms: f64,
    /// Host time from the end of prepare to the first batch kernel being enqueued (counts read
    /// back, plan, scratch allocation): device idle.
    pub gap_ms: f64,
    /// Zeroing the per-key counts ([`Sort::Atomic`]; the binned sort zeroes its bin counts in
    /// `histogram_ms`).
    pub zero_ms: f64,
    /// Per-key histogram ([`Sort::Atomic`]) or bin histogram ([`Sort::Bins`]).
    pub histogram_ms: f64,
    /// Scan of the per-key or per-bin counts.
    pub scan_ms: f64,
    /// Per-key scatter, or the scatter into the bins.
    pub scatter_ms: f64,
    /// [`Sort::Bins`] only: the per-bin shared-memory sort plus the pass for oversized bins.
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
    /// Histogram, scan, scatter(s) and the zeroing before them: the counting sort.
    pub fn sort_ms(&self) -> f64 {
        self.zero_ms + self.histogram_ms + self.scan_ms + self.scatter_ms + self.fine_ms
    }
}

impl std::fmt::Display for MsmProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={} general={} ones={} c={} nwin={} sets={} total={:.2} device={:.2} alloc={:.2} \
             upload={:.2} prepare={:.2} gap={:.2} sort={:.2} ({:?}: zero={:.2} histogram={:.2} scan={:.2} \
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
            self.sort,
            self.zero_ms,
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

/// Event marks of a profiled MSM, in order: prepare start/end, batch start, after the memsets,
/// histogram, scan, scatter, fine sort (binned sort only; else right after the scatter),
/// accumulate, merge, reduce, window sums, ones.
const MARKS: usize = 13;
const M_BATCH: usize = 2;

struct Marks {
    ev: Vec<Event>,
    alloc: std::time::Duration,
    upload: std::time::Duration,
    /// The plan's (general, ones, c, nwin, sets), set once the batch is planned.
    stats: Option<(usize, usize, u32, usize, usize)>,
}

impl Marks {
    fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        Ok(Self {
            ev: (0..MARKS).map(|_| gpu.event()).collect::<Result<_, _>>()?,
            alloc: std::time::Duration::ZERO,
            upload: std::time::Duration::ZERO,
            stats: None,
        })
    }
}

/// Records mark `i` on `s` when profiling.
fn mark(marks: Option<&Marks>, s: &Stream, i: usize) -> Result<(), GpuError> {
    match marks {
        Some(m) => s.record(&m.ev[i]),
        None => Ok(()),
    }
}

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
    acc: Accumulate,
    sort: Sort,
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
            .field("accumulate", &self.acc)
            .field("sort", &self.sort)
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
            acc: env_accumulate(),
            sort: env_sort(),
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
        k::with_uploads(gpu, &stream, points, |up| up.upload(0, n, &mut buf))?;
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

    /// Chooses the G1 accumulation kernel (overrides `CUZK_MSM_ACCUMULATE`; G2 has one).
    pub fn with_accumulate(mut self, acc: Accumulate) -> Self {
        self.acc = acc;
        self
    }

    /// As [`Self::with_window_bits`] on an existing context (`None`: the table/model choice).
    /// Selects the counting sort (default: [`SORT_ENV`], else [`Sort::Bins`]).
    pub fn with_sort(mut self, sort: Sort) -> Self {
        self.sort = sort;
        self
    }

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
            sort: self.sort,
            alloc_ms: marks.alloc.as_secs_f64() * 1e3,
            upload_ms: marks.upload.as_secs_f64() * 1e3,
            prepare_ms: e(0, 1)?,
            gap_ms: e(1, 2)?,
            zero_ms: e(2, 3)?,
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
        let plan = Plan::for_variant(general, n, self.window_bits, sm, cv, self.acc);
        match self.precomputed {
            Some(p) if p.c == plan.c && p.copies > 1 => {
                Plan::folded(general, n, p.c, p.copies, sm, cv, self.acc)
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
        let mut canon = match cache.canon.take() {
            Some(c) if c.len() == n => c,
            old => {
                drop(old);
                g.vram().alloc::<Fr>(n)?
            }
        };
        let counters = match cache.counters.take() {
            Some(c) => Ok(c),
            None => g.vram().alloc::<u32>(2),
        };
        let mut counters = match counters {
            Ok(c) => c,
            Err(e) => {
                cache.canon = Some(canon);
                return Err(e.into());
            }
        };
        if let Some(m) = marks.as_deref_mut() {
            m.alloc += t.elapsed();
        }
        let r = self.run_with(pts, src, cache, &mut canon, &mut counters, marks);
        cache.canon = Some(canon);
        cache.counters = Some(counters);
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
        src: Source<'_>,
        cache: &mut Cache<P>,
        canon: &mut DeviceBuffer<Fr>,
        counters: &mut DeviceBuffer<u32>,
        mut marks: Option<&mut Marks>,
    ) -> Result<P::Projective, MsmError> {
        let n = self.len();
        let (g, s) = (&self.gpu, &self.compute);
        if let Source::Host(h) = src {
            let t = Instant::now();
            self.upload_host(h, canon, &mut cache.staging)?;
            if let Some(m) = marks.as_deref_mut() {
                m.upload += t.elapsed();
            }
        }
        counters.fill_bytes_async(0, s.cuda())?;
        mark(marks.as_deref(), s, 0)?;
        let skip = self.identity.as_ref().map(|bits| k::Skip { bits, at: 0 });
        match src {
            Source::Device(d, at) => k::prepare(g, s, d, at, canon, n, counters, skip)?,
            Source::Host(_) => k::prepare_in_place(g, s, canon, n, counters, skip)?,
        }
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
                canon,
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

    /// Enqueues one batch on the compute stream: `scratch.out` gets the window (bucket set)
    /// sums (`windows`) and the ones sum (`ones`); what is not requested is left untouched.
    /// `pts` holds the `n` points and, for a folded plan, their copies after them.
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
        marks: Option<&Marks>,
    ) -> Result<(), GpuError> {
        let (g, s, cv) = (&self.gpu, &self.compute, curve::<P>());
        mark(marks, s, M_BATCH)?;
        if windows {
            let (win, nk) = (plan.windows(n), plan.nkeys());
            match self.sort {
                Sort::Bins => {
                    mark(marks, s, 3)?;
                    // marks 4, 5, 6 after the bin histogram, scan and scatter
                    k::bin_sort(
                        g,
                        s,
                        canon,
                        n,
                        &win,
                        plan.sort_fine_bits,
                        plan.sort_top_fine_bits,
                        &mut sc.counts,
                        &mut sc.bins,
                        &mut sc.cursors,
                        &mut sc.sorted,
                        &mut sc.offsets,
                        |i| mark(marks, s, 3 + i as usize),
                    )?;
                }
                Sort::Atomic => {
                    sc.counts.fill_bytes_async(0, s.cuda())?;
                    mark(marks, s, 3)?;
                    k::histogram(g, s, canon, n, &win, &mut sc.counts)?;
                    mark(marks, s, 4)?;
                    k::scan(g, s, &sc.counts, nk, &mut sc.offsets, &mut sc.cursors)?;
                    mark(marks, s, 5)?;
                    k::scatter(g, s, canon, n, &win, &mut sc.cursors, &mut sc.sorted)?;
                    mark(marks, s, 6)?;
                }
            }
            mark(marks, s, 7)?;
            k::accumulate(
                g,
                s,
                cv,
                self.acc,
                pts,
                win.index_bound(n),
                &sc.sorted,
                &sc.offsets,
                nk,
                plan.threads,
                &mut sc.keys_a,
                &mut sc.pts_a,
                &mut sc.buckets,
            )?;
            mark(marks, s, 8)?;
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
            mark(marks, s, 9)?;
            let groups = plan.groups();
            k::bucket_reduce(
                g,
                s,
                cv,
                &sc.buckets,
                &sc.offsets,
                plan.buckets_per_window,
                plan.sets,
                plan.group,
                &mut sc.reduced,
            )?;
            mark(marks, s, 10)?;
            let mut count = groups;
            while count > 1 {
                k::sum_halves(g, s, cv, &mut sc.reduced, groups, plan.sets, count)?;
                count -= count / 2;
            }
            k::to_jacobian(g, s, cv, &sc.reduced, groups, plan.sets, &mut sc.out, 0)?;
            mark(marks, s, 11)?;
        } else {
            for i in 3..=11 {
                mark(marks, s, i)?;
            }
        }
        if ones {
            let t = plan.ones_threads;
            k::ones(g, s, cv, pts, canon, n, t, &mut sc.ones)?;
            let mut count = t;
            while count > 1 {
                k::sum_halves(g, s, cv, &mut sc.ones, t, 1, count)?;
                count -= count / 2;
            }
            k::to_jacobian(g, s, cv, &sc.ones, t, 1, &mut sc.out, plan.sets)?;
        }
        mark(marks, s, MARKS - 1)?;
        Ok(())
    }

    /// Device bytes a streamed MSM with chunks of `len` points needs.
    fn chunk_bytes(&self, len: usize) -> u64 {
        let plan = self.plan(len, len);
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
        let plan = self.plan(chunk, chunk);
        let v = g.vram();
        let mut pts_buf = [v.alloc::<P>(chunk)?, v.alloc::<P>(chunk)?];
        let mut sc_buf = [v.alloc::<Fr>(chunk)?, v.alloc::<Fr>(chunk)?];
        let mut canon = v.alloc::<Fr>(chunk)?;
        let mut counters = v.alloc::<u32>(2)?;
        let mut scratch = Scratch::<P>::new(g, &plan)?;
        let mut ring = ResultRing::<P::Projective>::new(g, s, plan.sets + 1)?;
        let uploaded = [g.event()?, g.event()?];
        let consumed = [g.event()?, g.event()?];
        let mut windows = vec![P::Projective::default(); plan.sets];
        let mut ones = P::Projective::default();
        let mut fold = |res: &[P::Projective]| {
            for (w, r) in windows.iter_mut().zip(res) {
                *w += *r;
            }
            ones += res[plan.sets];
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
                            k::prepare(g, s, &sc_buf[b], 0, &mut canon, len, &mut counters, None)?
                        }
                        Source::Device(d, at) => {
                            k::prepare(g, s, d, at + start, &mut canon, len, &mut counters, None)?
                        }
                    }
                    self.enqueue_batch(
                        &pts_buf[b],
                        len,
                        &canon,
                        &plan,
                        &mut scratch,
                        true,
                        true,
                        None,
                    )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_choice_grows_with_n() {
        let cs: Vec<u32> = [1usize << 10, 1 << 16, 1 << 20, 1 << 24]
            .iter()
            .map(|&m| Plan::model_window(m))
            .collect();
        assert!(cs.windows(2).all(|w| w[0] <= w[1]), "{cs:?}");
        assert_eq!(Plan::model_window(1 << 20), 16);
        assert!(cs[3] >= 18, "{cs:?}");
        for g in [Group::G1, Group::G2] {
            let cs: Vec<u32> = (0..=27)
                .map(|l| Plan::choose_window_for(g, 1 << l))
                .collect();
            assert!(
                cs.iter().all(|c| (2..=MAX_WINDOW_BITS).contains(c)),
                "{cs:?}"
            );
        }
    }

    #[test]
    fn window_table_is_well_formed() {
        for g in [Group::G1, Group::G2] {
            let rows: Vec<_> = MEASURED_WINDOWS.iter().filter(|r| r.0 == g).collect();
            assert!(
                rows.windows(2).all(|w| w[0].1 < w[1].1),
                "{g:?} rows must be sorted by log2"
            );
            assert!(
                rows.iter()
                    .all(|r| (2..=MAX_WINDOW_BITS).contains(&r.2) && r.1 >= 0.0 && r.1 <= 32.0),
                "{g:?}"
            );
        }
    }

    #[test]
    fn window_table_lookup() {
        let t = [
            (Group::G1, 16.00, 13),
            (Group::G1, 19.00, 17),
            (Group::G1, 23.00, 21),
        ];
        assert_eq!(
            table_window(&t, Group::G1, (1 << 16) - 1),
            None,
            "below: model"
        );
        assert_eq!(table_window(&t, Group::G1, 1 << 16), Some(13));
        assert_eq!(table_window(&t, Group::G1, (1 << 19) - 1), Some(13));
        assert_eq!(table_window(&t, Group::G1, 1 << 19), Some(17));
        assert_eq!(table_window(&t, Group::G1, 1 << 22), Some(17));
        assert_eq!(
            table_window(&t, Group::G1, 1 << 27),
            Some(21),
            "clamped above"
        );
        assert_eq!(table_window(&t, Group::G2, 1 << 20), None, "no rows: model");
        assert_eq!(table_window(&t, Group::G1, 0), None);
    }

    #[test]
    fn plan_sizes_are_consistent() {
        // One wave of groups with work (the top window's groups past its reachable keys
        // have none), nearly all of it used (up to the rounding of the group length).
        for lg in [20, 24] {
            let p = Plan::new(1 << lg, 1 << lg, None, 132);
            let reach = k::top_window_keys(p.c);
            let busy = (p.nwin - 1) * p.groups() + reach.div_ceil(p.group);
            assert!(busy <= 132 * THREADS_PER_SM, "2^{lg}: {busy}");
            assert!(busy > 132 * THREADS_PER_SM * 95 / 100, "2^{lg}: {busy}");
        }
        let p = Plan::new(1 << 20, 1 << 20, None, 132);
        assert!(p.nwin * p.c as usize >= 256);
        assert!(p.group >= 1 && p.group <= p.buckets_per_window);
        assert!(
            (p.groups() - 1) * p.group < p.buckets_per_window,
            "no empty group"
        );
        assert!(p.threads >= 1 && p.threads <= 132 * THREADS_PER_SM);
        let tiny = Plan::new(0, 3, None, 132);
        assert_eq!(tiny.threads, 1);
        assert!(tiny.sorted_cap >= 1);
    }

    /// Level-0 threads: one wave while slices are short, up to `acc_waves` waves of slices of
    /// at least 256 entries for large MSMs.
    #[test]
    fn accumulation_waves_only_for_long_slices() {
        let (sm, acc) = (132, Accumulate::Paired);
        let wave = |cv| sm * acc.resident_threads_per_sm(cv);
        let threads = |n: usize, cv| Plan::for_variant(n, n, None, sm, cv, acc).threads;
        assert_eq!(threads(1 << 20, Curve::G1), wave(Curve::G1));
        assert_eq!(threads(1 << 24, Curve::G1), 8 * wave(Curve::G1));
        assert_eq!(threads(1 << 26, Curve::G1), 8 * wave(Curve::G1));
        assert_eq!(threads(1 << 24, Curve::G2), 2 * wave(Curve::G2));
        let p = Plan::for_variant(1 << 22, 1 << 22, None, sm, Curve::G1, acc);
        assert!(p.threads > wave(Curve::G1) && p.threads < 8 * wave(Curve::G1));
        assert!(p.sorted_cap / p.threads >= 256);
        let small = Plan::for_variant(100, 100, None, sm, Curve::G1, acc);
        assert_eq!(small.threads, 100 * small.nwin / 16);
    }

    /// What groth16 reserves per MSM (`Plan::new(len, len, None, sm).scratch_bytes(curve)`)
    /// bounds what a resident run allocates for every general count, curve and kernel.
    #[test]
    fn sizing_plan_bounds_every_run() {
        let scratch_lens_bytes = |p: &Plan, cv: Curve| -> u64 {
            let w = cv.xyzz_words();
            let nk = p.nkeys();
            let b = |elems: usize, size: usize| ((elems * size) as u64).div_ceil(256) * 256;
            b(nk, 4)
                + b(nk + 1, 4)
                + b(nk, 4)
                + b(p.sorted_cap, 4)
                + b(p.sort_bins() + 2, 4)
                + b((nk + 1) * w, 8)
                + b(2 * p.threads, 4)
                + b(2 * p.threads * w, 8)
                + b(p.level1(), 4)
                + b(p.level1() * w, 8)
                + b(p.sets * p.groups() * w, 8)
                + b(p.ones_threads * w, 8)
                + b(p.sets + 1, cv.jacobian_bytes())
        };
        for sm in [132usize, 108, 46] {
            for log in [0u32, 10, 14, 17, 18, 19, 20, 22, 23, 24, 25, 26, 27] {
                let n = 1usize << log;
                let sizing = Plan::new(n, n, None, sm);
                // general counts: powers of two, every table boundary +- 1, and n
                let mut gs: Vec<usize> = (0..=log).map(|l| 1usize << l).collect();
                for r in MEASURED_WINDOWS {
                    let b = 2f64.powf(r.1) as usize;
                    gs.extend([b.saturating_sub(1), b, b + 1]);
                }
                gs.extend((1..64).map(|i| n / 64 * i));
                gs.retain(|&g| g <= n);
                for cv in [Curve::G1, Curve::G2] {
                    for acc in Accumulate::ALL {
                        for &g in &gs {
                            let run = Plan::for_variant(g, n, None, sm, cv, acc);
                            assert!(run.scratch_bytes(cv) >= scratch_lens_bytes(&run, cv));
                            assert!(
                                sizing.scratch_bytes(cv) >= run.scratch_bytes(cv),
                                "{cv:?} {acc:?} sm {sm} n 2^{log} general {g}: sizing {} < run {} (c = {})",
                                sizing.scratch_bytes(cv),
                                run.scratch_bytes(cv),
                                run.c
                            );
                        }
                    }
                }
                // a fixed window is bounded too
                let fixed = Plan::new(n, n, Some(22), sm);
                for cv in [Curve::G1, Curve::G2] {
                    let run = Plan::for_variant(n / 3, n, Some(22), sm, cv, Accumulate::Paired);
                    assert!(fixed.scratch_bytes(cv) >= run.scratch_bytes(cv));
                }
            }
        }
    }

    /// The binned sort's fine bits: ~4K entries per bin for full windows, within what the
    /// kernels accept (F <= c - 1, <= 10, F + index bits <= 31).
    #[test]
    fn sort_fine_bits() {
        let f = |general: usize, n: usize, c: u32| {
            Plan::for_curve(general, n, Some(c), 132, Curve::G1).sort_fine_bits
        };
        assert_eq!(f(1 << 24, 1 << 24, 20), 7); // 32 entries per key, bins of 4096
        assert_eq!(f(1 << 26, 1 << 26, 20), 5); // 128 per key
        assert_eq!(f(1 << 20, 1 << 20, 16), 7);
        assert_eq!(f(1 << 27, 1 << 27, 16), 0); // 4096 per key: one key per bin
        assert_eq!(f(1 << 27, 1 << 27, 22), 4); // 27 index bits leave 4 for the fine key
        assert_eq!(f(10, 1 << 20, 4), 3); // capped by c - 1
        // the top window at c = 20 reaches 0x73ee of 2^19 keys: bins of 2^(7-4)
        assert_eq!(k::top_window_keys(20), 0x73ee);
        let p = Plan::for_curve(1 << 24, 1 << 24, Some(20), 132, Curve::G1);
        assert_eq!(p.sort_top_fine_bits, 3);
        assert_eq!(k::top_window_keys(16), 0x73ee); // bits 240..256 again: nearly full
        assert_eq!(k::top_window_keys(13), 0xe7 + 1); // bits 247..256
        for log in 0..=27u32 {
            for c in 2..=MAX_WINDOW_BITS {
                let n = 1usize << log;
                let p = Plan::for_curve(n, n, Some(c), 132, Curve::G1);
                let (fb, ft) = (p.sort_fine_bits, p.sort_top_fine_bits);
                assert!(fb < c && fb <= k::SORT_MAX_FINE_BITS && fb + k::index_bits(n) <= 31);
                assert!(ft <= fb);
                let b = p.buckets_per_window;
                assert_eq!(
                    p.sort_bins(),
                    (p.nwin - 1) * (b >> fb) + (b >> ft),
                    "c {c} n 2^{log}"
                );
            }
        }
    }

    /// Plans over precomputed copies: h = ⌈nwin / m⌉ full bucket sets (no reduced top set),
    /// fine bits within the kernels' bounds for indices spanning the copies, ~4K entries per
    /// bin, and the reduction's wave filled by the sets.
    #[test]
    fn folded_plans() {
        let (sm, acc) = (132, Accumulate::Paired);
        let n = 1usize << 24;
        let p = Plan::folded(n, n, 20, 2, sm, Curve::G1, acc);
        assert_eq!((p.nwin, p.sets, p.copies), (13, 7, 2));
        assert_eq!(p.nkeys(), 7 << 19);
        // 13/7 windows per set: ~59 entries per key, bins of 2^6 keys; Ft = F (full sets)
        assert_eq!((p.sort_fine_bits, p.sort_top_fine_bits), (6, 6));
        assert_eq!(p.sort_bins(), 7 << 13);
        assert_eq!(p.windows(n), Windows::folded(20, 2, n));
        assert_eq!(p.windows(n).index_bound(n), 2 * n);
        // the same sort and accumulation work as unfolded, fewer buckets
        let u = Plan::for_variant(n, n, Some(20), sm, Curve::G1, acc);
        assert_eq!((u.sets, u.copies), (13, 1));
        assert_eq!((p.sorted_cap, p.threads), (u.sorted_cap, u.threads));
        let busy = p.sets * p.groups();
        assert!(busy <= sm * THREADS_PER_SM && busy > sm * THREADS_PER_SM * 95 / 100);
        assert!(
            u.nwin * u.groups() > busy,
            "unfolded: more groups (with empty ones)"
        );
        // full folding: one set of 13 windows
        let full = Plan::folded(n, n, 20, 13, sm, Curve::G2, acc);
        assert_eq!(
            (full.sets, full.copies, full.sort_top_fine_bits),
            (1, 13, full.sort_fine_bits)
        );
        // 2^26 at 2 copies: indices need 27 bits, F <= 4
        let p26 = Plan::folded(1 << 26, 1 << 26, 20, 2, sm, Curve::G1, acc);
        assert_eq!(k::index_bits(p26.windows(1 << 26).index_bound(1 << 26)), 27);
        assert_eq!(p26.sort_fine_bits, 4);
        for log in 0..=24u32 {
            for c in 2..=MAX_WINDOW_BITS {
                for m in [2usize, 3, 7, 200] {
                    let n = (1usize << log) + 3;
                    let p = Plan::folded(n, n, c, m, sm, Curve::G1, acc);
                    let win = p.windows(n);
                    let bound = win.index_bound(n);
                    if !win.indices_fit(n) {
                        continue; // rejected by the constructor (indices carry a sign bit)
                    }
                    assert_eq!((win.sets as usize, win.copies()), (p.sets, p.copies));
                    assert!(p.copies <= m && p.copies * p.sets >= p.nwin);
                    let (fb, ft) = (p.sort_fine_bits, p.sort_top_fine_bits);
                    assert!(fb <= k::max_fine_bits(bound, c), "c {c} m {m} n 2^{log}");
                    assert!(fb + k::index_bits(bound) <= 31 && fb < c);
                    if p.sets < p.nwin {
                        assert_eq!(ft, fb, "folded sets are full: c {c} m {m}");
                    }
                    let b = p.buckets_per_window;
                    assert_eq!(p.sort_bins(), (p.sets - 1) * (b >> fb) + (b >> ft));
                    assert!(p.group >= 1 && (p.groups() - 1) * p.group < p.buckets_per_window);
                }
            }
        }
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
