//! The binned counting sort of the (scalar, window) entries by bucket key (kernels/msm/sort.cuh)
//! and the device-wide scan it uses (kernels/msm/scan.cuh).

use super::*;

/// Counts per tile of the device scan (one per thread of its tile launches).
const SCAN_TILE: usize = c::CUZK_MSM_SCAN_TILE as usize;
/// Threads of the scan's middle launch.
const SCAN_TOP_THREADS: u32 = c::CUZK_MSM_SCAN_TOP_THREADS;

fn check_scan(
    k: &str,
    counts: &DeviceBuffer<u32>,
    len: usize,
    offsets: &DeviceBuffer<u32>,
    cursors: &DeviceBuffer<u32>,
) -> Result<u32> {
    need(k, "counts", counts.len(), len)?;
    need(k, "offsets", offsets.len(), len + 1)?;
    need(k, "cursors", cursors.len(), len)?;
    if len > MAX_SCAN_LEN {
        return Err(invalid(k, format!("{len} keys exceed {MAX_SCAN_LEN}")));
    }
    u32_of(k, "len", len)
}

/// Exclusive prefix sum: `offsets[0..=len]` (`offsets[len]` = total) and `cursors[0..len)`
/// (the same values). Device-wide reduce-then-scan in three launches over tiles of 512 counts
/// (kernels/msm/scan.cuh; the first cursor of each tile holds its partial sum in between).
/// Nothing past `offsets[len]` / `cursors[len - 1]` is written.
pub fn scan(
    gpu: &Gpu,
    stream: &Stream,
    counts: &DeviceBuffer<u32>,
    len: usize,
    offsets: &mut DeviceBuffer<u32>,
    cursors: &mut DeviceBuffer<u32>,
) -> Result<()> {
    const K: &str = "msm_scan_tiles";
    let len32 = check_scan(K, counts, len, offsets, cursors)?;
    let tiles = u32_of(K, "tiles", len.div_ceil(SCAN_TILE))?;
    let tile_cfg = LaunchConfig {
        grid: (tiles, 1, 1),
        block: (SCAN_TILE as u32, 1, 1),
        shared_bytes: 0,
    };
    if tiles > 0 {
        // SAFETY: block b reads counts[b*512 ..< len] and writes cursors[b*512] (< len).
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                "msm_scan_tile_sums",
                tile_cfg,
                &[counts, &len32, &*cursors],
            )?
        }
    }
    let top = LaunchConfig {
        grid: (1, 1, 1),
        block: (SCAN_TOP_THREADS, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: one block rewrites cursors[b*512] (b < tiles, so < len) and writes offsets[len].
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            "msm_scan_tile_bases",
            top,
            &[&len32, &*offsets, &*cursors],
        )?
    }
    if tiles > 0 {
        // SAFETY: block b reads counts and cursors[b*512], writes offsets/cursors[b*512 ..< len].
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                K,
                tile_cfg,
                &[counts, &len32, &*offsets, &*cursors],
            )?
        }
    }
    Ok(())
}

/// Entries a bin may hold to be sorted in shared memory; larger bins take the per-key atomic
/// path of `msm_sort_oversize`.
pub const SORT_TILE: usize = c::CUZK_MSM_BIN_TILE as usize;
/// Largest fine-bit count of [`bin_sort`].
pub const SORT_MAX_FINE_BITS: u32 = c::CUZK_MSM_BIN_MAX_FINE_BITS;
/// Threads of `msm_sort_fine`.
const SORT_FINE_THREADS: u32 = c::CUZK_MSM_BIN_FINE_THREADS;
/// Most blocks of `msm_sort_fine` (each strides over the bins).
const SORT_FINE_MAX_BLOCKS: usize = 1 << 20;

/// 16-bit shared counters per block of `msm_sort_bin_histogram_smem` (112 KiB: two blocks of
/// [`SORT_HIST_THREADS`] fit an SM).
pub const SORT_HIST_COUNTERS: usize = 56 * 1024;
/// Threads of `msm_sort_bin_histogram_smem` (its launch bounds, with 2 blocks per SM).
const SORT_HIST_THREADS: u32 = c::CUZK_MSM_BIN_HIST_THREADS;
/// Most scalars a block counts between flushes (a 16-bit counter takes one entry per scalar).
const SORT_HIST_CHUNK: usize = 65535;
/// From this n on the bin histogram counts in shared memory (where its groups fit): ~nbins
/// global atomics per block instead of one per entry (the same for the scatter measured slower:
/// crates/msm/PERF-NOTES.md).
pub const SORT_HIST_SMEM_MIN: usize = 1 << 22;
/// Most window groups for the shared-memory histogram: each group reads every scalar again, so
/// more groups lose to the global atomics (crates/msm/PERF-NOTES.md).
pub const SORT_HIST_MAX_GROUPS: u32 = 2;

/// Bucket-set groups of the shared-memory bin histogram: `(sets per group, groups, shared
/// counters per block)`, every group's bins within [`SORT_HIST_COUNTERS`] (the top set's up
/// to the keys canonical scalars reach, [`Windows::top_set_keys`]); `None` if one set's bins do
/// not fit.
pub fn hist_groups(win: &Windows, fine_bits: u32, top_fine_bits: u32) -> Option<(u32, u32, usize)> {
    let sets = win.sets.max(1);
    (1..=sets)
        .rev()
        .map(|spg| (spg, hist_counters(win, fine_bits, top_fine_bits, spg)))
        .find(|&(_, cnt)| cnt <= SORT_HIST_COUNTERS)
        .map(|(spg, cnt)| (spg, sets.div_ceil(spg), cnt.max(1)))
}

/// Shared counters the largest group of `spg` sets needs (see [`hist_groups`]).
pub(super) fn hist_counters(win: &Windows, fine_bits: u32, top_fine_bits: u32, spg: u32) -> usize {
    let (b, sets) = (win.c.saturating_sub(1), win.sets);
    let per_set = 1usize << (b - fine_bits.min(b));
    let top = win.top_set_keys().div_ceil(1 << top_fine_bits.min(b));
    (0..sets)
        .step_by(spg.max(1) as usize)
        .map(|s0| {
            let s1 = (s0 + spg).min(sets);
            let low = (s1 - s0 - u32::from(s1 == sets)) as usize;
            low * per_set + if s1 == sets { top } else { 0 }
        })
        .max()
        .unwrap_or(0)
}

/// Bits of a point index below `n` (entries carry the fine key above them in [`bin_sort`]).
pub fn index_bits(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

/// Largest fine-bit count [`bin_sort`] accepts for point indices below `index_bound`
/// ([`Windows::index_bound`]) and window bits `c`.
pub fn max_fine_bits(index_bound: usize, c: u32) -> u32 {
    c.saturating_sub(1)
        .min(SORT_MAX_FINE_BITS)
        .min(31u32.saturating_sub(index_bits(index_bound)))
}

/// Bins of the binned sort: the bucket sets below the top one in bins of 2^fine_bits keys,
/// the top set in bins of 2^top_fine_bits keys.
pub fn sort_bins(c: u32, sets: u32, fine_bits: u32, top_fine_bits: u32) -> usize {
    let b = c - 1;
    ((sets.max(1) as usize - 1) << (b - fine_bits.min(b))) + (1usize << (b - top_fine_bits.min(b)))
}

/// Keys of the top window (of `c`-bit windows) that canonical scalars (< r) can reach: the top
/// digit is at most `(r - 1) >> (c · (nwin − 1))` plus a carry (never above 2^(c-1)).
pub fn top_window_keys(c: u32) -> usize {
    // the top 64 bits of r - 1 (bits 192..256): every top window starts at bit >= 192
    const R_TOP: u64 = 0x73ed_a753_299d_7d48;
    let nwin = 256u32.div_ceil(c);
    let start = c * (nwin - 1);
    let top = if start >= 256 {
        0
    } else {
        R_TOP >> (start - 192)
    };
    (top as usize + 1).min(1 << (c - 1))
}

/// Binned counting sort (kernels/msm/sort.cuh): `offsets[0..=nkeys]` = exclusive prefix sums of the per-key entry counts and
/// `sorted[offsets[k]..offsets[k+1])` = the entries of key k (any order; keys and indices: see
/// [`Windows`]). Bins of 2^fine_bits keys (2^top_fine_bits in the top set, whose digit range is
/// smaller when unfolded): a histogram of bins,
/// their scan (`bins[0..=nbins]`, `bins[nbins + 1]` is a flag), a
/// scatter into the bins, a shared-memory sort per bin that writes `offsets`, and a per-key
/// atomic pass for bins of more than [`SORT_TILE`] entries. `counts` (>= nbins; zeroed here)
/// and `cursors` (>= nkeys) are scratch. `phase(i)` runs after launch group i = 1 (histogram),
/// 2 (scan), 3 (scatter) for profiling marks.
#[allow(clippy::too_many_arguments)]
pub fn bin_sort<S: Pod>(
    gpu: &Gpu,
    stream: &Stream,
    scalars: Scalars<'_, S>,
    n: usize,
    win: &Windows,
    fine_bits: u32,
    top_fine_bits: u32,
    counts: &mut DeviceBuffer<u32>,
    bins: &mut DeviceBuffer<u32>,
    cursors: &mut DeviceBuffer<u32>,
    sorted: &mut DeviceBuffer<u32>,
    offsets: &mut DeviceBuffer<u32>,
    mut phase: impl FnMut(u32) -> Result<()>,
) -> Result<()> {
    const K: &str = "msm_sort_bin_scatter";
    let (canon, skip, skip_at) = scalars.args(K, n)?;
    let nkeys = check_windows(K, win, n)?;
    let (c, nwin, sets, bound) = (win.c, win.nwin, win.sets, win.index_bound(n));
    if fine_bits > max_fine_bits(bound, c) || top_fine_bits > fine_bits {
        return Err(invalid(
            K,
            format!(
                "fine bits {fine_bits} (top {top_fine_bits}): at most {} (indices < {bound}, c = {c}), top <= fine",
                max_fine_bits(bound, c)
            ),
        ));
    }
    let nbins = sort_bins(c, sets, fine_bits, top_fine_bits);
    need(K, "counts", counts.len(), nbins)?;
    need(K, "bins", bins.len(), nbins + 2)?;
    need(K, "cursors", cursors.len(), nkeys)?;
    need(K, "offsets", offsets.len(), nkeys + 1)?;
    let (n32, nb32, f32_, ft32, ib32, st) = (
        u32_of(K, "n", n)?,
        u32_of(K, "nbins", nbins)?,
        fine_bits,
        top_fine_bits,
        index_bits(bound),
        u32_of(K, "stride", win.stride)?,
    );
    let cap = u32_of(K, "sorted.len()", sorted.len())?;
    let flag_ptr = bins.device_ptr() + (4 * (nbins + 1)) as u64;
    counts.fill_bytes_async(0, stream.cuda())?;
    let smem_groups = (n >= SORT_HIST_SMEM_MIN)
        .then(|| hist_groups(win, fine_bits, top_fine_bits))
        .flatten()
        .filter(|&(_, groups, _)| groups <= SORT_HIST_MAX_GROUPS);
    let max_shared = gpu.info().max_shared_per_block as usize;
    if let Some((spg, groups, ncnt)) = smem_groups.filter(|g| g.2.div_ceil(2) * 4 <= max_shared) {
        let sm = gpu.info().sm_count.max(1);
        let blocks = (2 * sm).div_ceil(groups).max(1);
        // a 16-bit counter takes at most one entry per scalar and copy
        let chunk = n
            .div_ceil(blocks as usize)
            .clamp(1, SORT_HIST_CHUNK / win.copies());
        let cfg = LaunchConfig {
            grid: (blocks, groups, 1),
            block: (SORT_HIST_THREADS, 1, 1),
            shared_bytes: u32_of(K, "shared bytes", ncnt.div_ceil(2) * 4)?,
        };
        let (ncnt32, chunk32) = (u32_of(K, "counters", ncnt)?, u32_of(K, "chunk", chunk)?);
        // SAFETY: reads n scalars at canon and their skip words; shared counters: ceil(ncnt / 2) words, indices checked
        // against ncnt; atomics on counts[bin < nbins] (the groups' bins tile the nbins bins);
        // writes the flag word (inside bins: len checked).
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                "msm_sort_bin_histogram_smem",
                cfg,
                &[
                    &canon, &skip, &skip_at, &n32, &c, &nwin, &sets, &f32_, &ft32, &spg, &ncnt32,
                    &chunk32, &*counts, &flag_ptr,
                ],
            )?
        }
    } else {
        // SAFETY: reads n scalars at canon and their skip words, atomics on counts[bin < nbins] (the bins tile the nkeys
        // keys), writes bins[nbins + 1] (the flag word, inside bins: len checked).
        unsafe {
            gpu.launch(
                stream,
                MODULE,
                "msm_sort_bin_histogram",
                stride_cfg(n, 256)?,
                &[
                    &canon, &skip, &skip_at, &n32, &c, &nwin, &sets, &f32_, &ft32, &*counts,
                    &flag_ptr,
                ],
            )?
        }
    }
    phase(1)?;
    // bins[0..=nbins] = exclusive prefix of counts; cursors[0..nbins) the same (bin cursors)
    scan(gpu, stream, counts, nbins, bins, cursors)?;
    phase(2)?;
    // SAFETY: reads n scalars at canon and their skip words, atomics on cursors[bin < nbins],
    // writes sorted[pos < cap].
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            K,
            stride_cfg(n, 256)?,
            &[
                &canon, &skip, &skip_at, &n32, &c, &nwin, &sets, &st, &f32_, &ft32, &ib32,
                &*cursors, &*sorted, &cap,
            ],
        )?
    }
    phase(3)?;
    let fine_cfg = LaunchConfig {
        grid: (
            u32_of(K, "blocks", nbins.clamp(1, SORT_FINE_MAX_BLOCKS))?,
            1,
            1,
        ),
        block: (SORT_FINE_THREADS, 1, 1),
        shared_bytes: 0,
    };
    // SAFETY: reads bins[0..=nbins], reads/writes sorted inside [bins[b], bins[b+1]) clamped to
    // cap, writes offsets[0..=nkeys] (the bins' keys tile 0..nkeys), cursors[< nkeys] and the
    // flag word.
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            "msm_sort_fine",
            fine_cfg,
            &[
                &*bins, &nb32, &f32_, &ft32, &ib32, &c, &sets, &*sorted, &cap, &*offsets,
                &*cursors, &flag_ptr,
            ],
        )?
    }
    // SAFETY: reads n scalars at canon and their skip words, counts[bin < nbins] and the flag
    // word; atomics on cursors[key < nkeys]; writes sorted[pos < cap].
    unsafe {
        gpu.launch(
            stream,
            MODULE,
            "msm_sort_oversize",
            stride_cfg(n, 256)?,
            &[
                &canon, &skip, &skip_at, &n32, &c, &nwin, &sets, &st, &f32_, &ft32, &*counts,
                &flag_ptr, &*cursors, &*sorted, &cap,
            ],
        )
    }
}
