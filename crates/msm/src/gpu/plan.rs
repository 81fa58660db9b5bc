//! The plan of one Pippenger batch: the measured window table, the cost model, and every size
//! derived from (general scalars, window bits, precomputed copies).

use super::*;

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
pub(super) fn table_window(table: &[(Group, f64, u32)], group: Group, m: usize) -> Option<u32> {
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
pub(super) fn reachable_windows(group: Group, general: usize) -> Vec<(u32, usize)> {
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

pub(super) fn group_of(cv: Curve) -> Group {
    match cv {
        Curve::G1 => Group::G1,
        Curve::G2 => Group::G2,
    }
}

/// `CUZK_MSM_WINDOW` (2..=22; ignored outside), the window of every new context;
/// [`GpuMsm::with_window_bits`] overrides it.
pub(super) fn env_window() -> Option<u32> {
    cuzk_gpu::Config::get()
        .ok()?
        .msm_window
        .filter(|c| (2..=MAX_WINDOW_BITS).contains(c))
}

pub(super) fn curve<P: MsmPoint>() -> Curve {
    P::GROUP.into()
}

/// Words of the identity bits of `len` resident points (at least one: no empty buffers).
pub(super) fn identity_words(len: usize) -> usize {
    len.div_ceil(32).max(1)
}

/// Full waves of level-0 accumulation threads for large MSMs (while slices keep >= 256
/// entries): more, shorter slices, so that blocks finishing early are replaced. With one wave
/// the G1 kernel ran its last stretch with warp slots empty (ncu: 3.27 of 4 warps per scheduler). H200 run
/// 18, kept scratch: G1 accumulation at 2^24 94.6 ms (1 wave) / 92.4 (2) / 91.0 (4) / 90.1
/// (8), at 2^26 372.2 / 361.5 / 354.9 / 351.3, merge 0.43 -> 0.88 ms at 8; G2 2^24 302.7 /
/// 298.7 / 299.3.
pub(super) const fn acc_waves(cv: Curve) -> usize {
    match cv {
        Curve::G1 => 8,
        Curve::G2 => 2,
    }
}

/// XYZZ points per chunk of the precomputation of point copies (its scratch: 192 MiB for G1,
/// 384 MiB for G2).
pub(super) const PRECOMPUTE_CHUNK: usize = 1 << 20;

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
    pub(super) bound: [u64; 2],
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
    /// differ from G1's), and the window `c` if given, else the table/model windows plus
    /// `CUZK_MSM_WINDOW` if set. What an MSM runs is [`Self::for_curve`].
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
                let p = Self::for_curve(m, n, Some(cw), sm_count, cv);
                plan.bound[i] = plan.bound[i].max(p.scratch_bytes(cv));
            }
        }
        plan
    }

    /// Plan for a curve: the accumulation gets one full wave of the threads its kernel keeps
    /// resident per SM.
    pub fn for_curve(general: usize, n: usize, c: Option<u32>, sm_count: usize, cv: Curve) -> Self {
        Self::with_residency(
            general,
            n,
            c,
            1,
            sm_count,
            cv.resident_threads_per_sm(),
            acc_waves(cv),
            group_of(cv),
        )
    }

    /// As [`Self::for_curve`] at window `c` over `copies` precomputed copies of the `n`
    /// points (a request beyond what the windows need uses fewer: [`Windows::folded`]).
    pub fn folded(
        general: usize,
        n: usize,
        c: u32,
        copies: usize,
        sm_count: usize,
        cv: Curve,
    ) -> Self {
        Self::with_residency(
            general,
            n,
            Some(c),
            copies,
            sm_count,
            cv.resident_threads_per_sm(),
            acc_waves(cv),
            group_of(cv),
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn with_residency(
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
    pub(super) fn fine_bits(win: &Windows, general: usize, n: usize) -> u32 {
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
    pub(super) fn top_fine_bits(win: &Windows, fine_bits: u32) -> u32 {
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

    pub(super) fn groups(&self) -> usize {
        self.buckets_per_window.div_ceil(self.group)
    }

    pub(super) fn level1(&self) -> usize {
        2 * (2 * self.threads).div_ceil(FAN_IN)
    }

    /// Device bytes of the scratch buffers (see [`Scratch`]).
    pub fn scratch_bytes(&self, curve: Curve) -> u64 {
        let x = (curve.xyzz_words() * 8) as u64;
        let u = 4u64;
        let nk = self.nkeys() as u64;
        // 256-byte rounding per buffer, generously
        let round = 16 * 256;
        let own = u * (2 * nk + 1)
            + u * (2 * self.sort_bins() as u64 + 2)
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
