// cuzk: MSM kernels (see msm/pippenger.cuh for the pipeline). Launched through the safe wrappers
// in crates/gpu/src/msm.rs; G1 kernels end in _g1 (Fp coordinates), G2 in _g2 (Fp2).
#include "msm/pippenger.cuh"
#include "ec/batch_affine.cuh"

using namespace cuzk;

extern "C" __global__ void __launch_bounds__(256)
msm_prepare(const fr_t* in, fr_t* out, uint32_t n, uint32_t* counters, const uint32_t* __restrict__ skip,
            uint32_t skip_at)
{
    msm::prepare(in, out, n, counters, skip, skip_at);
}

// Per-key atomic sort (fallback: CUZK_MSM_SORT=atomic): histogram, scan, scatter.
extern "C" __global__ void __launch_bounds__(256)
msm_histogram(const fr_t* __restrict__ canon, uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets, uint32_t stride,
              uint32_t* counts)
{
    msm::histogram(canon, n, c, nwin, {sets, stride}, counts);
}

// Scan (three launches, see msm::scan_tile_sums): grid ceil(len / 512) x 512 threads, then one
// block of 1024, then ceil(len / 512) x 512 again. Block sizes are fixed (must match msm.rs).
extern "C" __global__ void __launch_bounds__(msm::SCAN_TILE)
msm_scan_tile_sums(const uint32_t* __restrict__ counts, uint32_t len, uint32_t* cursors)
{
    msm::scan_tile_sums(counts, len, cursors);
}

extern "C" __global__ void __launch_bounds__(msm::SCAN_TOP_THREADS)
msm_scan_tile_bases(uint32_t len, uint32_t* offsets, uint32_t* cursors)
{
    msm::scan_tile_bases(len, offsets, cursors);
}

extern "C" __global__ void __launch_bounds__(msm::SCAN_TILE)
msm_scan_tiles(const uint32_t* __restrict__ counts, uint32_t len, uint32_t* offsets, uint32_t* cursors)
{
    msm::scan_tiles(counts, len, offsets, cursors);
}

extern "C" __global__ void __launch_bounds__(256)
msm_scatter(const fr_t* __restrict__ canon, uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets, uint32_t stride,
            uint32_t* cursors, uint32_t* __restrict__ sorted, uint32_t cap)
{
    msm::scatter(canon, n, c, nwin, {sets, stride}, cursors, sorted, cap);
}

// Binned sort (default; msm/sort.cuh): histogram of bins, scan (above), coarse scatter, one
// block of 256 per bin (fixed: must match msm.rs), oversized bins. sets, stride: the window
// folding of sort.cuh fold_t (the histograms need only the keys: no stride).
extern "C" __global__ void __launch_bounds__(256)
msm_sort_bin_histogram(const fr_t* __restrict__ canon, uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                       uint32_t F, uint32_t Ft, uint32_t* bin_counts, uint32_t* flag)
{
    msm::sort_bin_histogram(canon, n, c, nwin, {sets, 0}, F, Ft, bin_counts, flag);
}

// Shared-memory histogram: 512 threads, two blocks per SM (up to SORT_HIST_SMEM_BYTES each).
extern "C" __global__ void __launch_bounds__(512, 2)
msm_sort_bin_histogram_smem(const fr_t* __restrict__ canon, uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                            uint32_t F, uint32_t Ft, uint32_t spg, uint32_t ncnt, uint32_t chunk,
                            uint32_t* bin_counts, uint32_t* flag)
{
    extern __shared__ uint32_t hist_sh[];
    msm::sort_bin_histogram_smem(canon, n, c, nwin, {sets, 0}, F, Ft, spg, ncnt, chunk, bin_counts, flag, hist_sh);
}

extern "C" __global__ void __launch_bounds__(256)
msm_sort_bin_scatter(const fr_t* __restrict__ canon, uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                     uint32_t stride, uint32_t F, uint32_t Ft, uint32_t idxbits, uint32_t* bin_cur,
                     uint32_t* __restrict__ sorted, uint32_t cap)
{
    msm::sort_bin_scatter(canon, n, c, nwin, {sets, stride}, F, Ft, idxbits, bin_cur, sorted, cap);
}

extern "C" __global__ void __launch_bounds__(msm::SORT_FINE_THREADS)
msm_sort_fine(const uint32_t* __restrict__ bin_off, uint32_t nbins, uint32_t F, uint32_t Ft, uint32_t idxbits,
              uint32_t c, uint32_t sets, uint32_t* sorted, uint32_t cap, uint32_t* offsets, uint32_t* cursors,
              uint32_t* flag)
{
    msm::sort_fine(bin_off, nbins, F, Ft, idxbits, c, sets, sorted, cap, offsets, cursors, flag);
}

extern "C" __global__ void __launch_bounds__(256)
msm_sort_oversize(const fr_t* __restrict__ canon, uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                  uint32_t stride, uint32_t F, uint32_t Ft, const uint32_t* __restrict__ bin_counts,
                  const uint32_t* __restrict__ flag, uint32_t* cursors, uint32_t* __restrict__ sorted, uint32_t cap)
{
    msm::sort_oversize(canon, n, c, nwin, {sets, stride}, F, Ft, bin_counts, flag, cursors, sorted, cap);
}

#define MSM_POINT_KERNELS(G, F, TPB, ACC_MINB)                                                           \
    extern "C" __global__ void __launch_bounds__(TPB, ACC_MINB)                                          \
    msm_accumulate_##G(const affine_t<F>* __restrict__ points, uint32_t npoints,                         \
                       const uint32_t* __restrict__ sorted, uint32_t cap,                                \
                       const uint32_t* __restrict__ offsets, uint32_t nkeys, uint32_t nthreads,          \
                       uint32_t* pkeys, xyzz_t<F>* ppts, xyzz_t<F>* buckets)                             \
    {                                                                                                    \
        msm::accumulate<F>(points, npoints, sorted, cap, offsets, nkeys, nthreads, pkeys, ppts, buckets); \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(256)                                                    \
    msm_identity_bits_##G(const affine_t<F>* __restrict__ points, uint32_t n, uint32_t* __restrict__ bits)  \
    {                                                                                                    \
        msm::identity_bits<F>(points, n, bits);                                                          \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(TPB)                                                    \
    msm_merge_##G(const uint32_t* __restrict__ in_keys, const xyzz_t<F>* __restrict__ in_pts,            \
                  uint32_t count, uint32_t K, uint32_t* pkeys, xyzz_t<F>* ppts, xyzz_t<F>* buckets,      \
                  uint32_t nkeys, uint32_t final_level)                                                  \
    {                                                                                                    \
        msm::merge<F>(in_keys, in_pts, count, K, pkeys, ppts, buckets, nkeys, final_level);              \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(TPB)                                                    \
    msm_bucket_reduce_##G(const xyzz_t<F>* __restrict__ buckets, const uint32_t* __restrict__ offsets,   \
                          uint32_t B, uint32_t nwin, uint32_t L, xyzz_t<F>* __restrict__ out)            \
    {                                                                                                    \
        msm::bucket_reduce<F>(buckets, offsets, B, nwin, L, out);                                        \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(TPB)                                                    \
    msm_sum_halves_##G(xyzz_t<F>* pts, uint32_t stride, uint32_t nseg, uint32_t count)                   \
    {                                                                                                    \
        msm::sum_halves<F>(pts, stride, nseg, count);                                                    \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(TPB)                                                    \
    msm_ones_##G(const affine_t<F>* __restrict__ points, const fr_t* __restrict__ canon, uint32_t n,     \
                 uint32_t nthreads, xyzz_t<F>* __restrict__ out)                                         \
    {                                                                                                    \
        msm::ones<F>(points, canon, n, nthreads, out);                                                   \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(TPB)                                                    \
    msm_double_##G(const affine_t<F>* __restrict__ in, uint32_t n, uint32_t k, xyzz_t<F>* __restrict__ out) \
    {                                                                                                    \
        msm::double_points<F>(in, n, k, out);                                                            \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(TPB)                                                    \
    msm_to_affine_##G(affine_t<F>* out, const xyzz_t<F>* __restrict__ in, uint32_t n, uint32_t per_thread) \
    {                                                                                                    \
        batch_to_affine<F>(out, in, n, per_thread);                                                      \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(TPB)                                                    \
    msm_to_jacobian_##G(const xyzz_t<F>* __restrict__ in, uint32_t stride, uint32_t nseg,                \
                        jacobian_t<F>* __restrict__ out, uint32_t out_base)                              \
    {                                                                                                    \
        msm::to_jacobian<F>(in, stride, nseg, out, out_base);                                            \
    }

// G1: 128-thread blocks, accumulate capped at 168 registers (3 blocks = 12 warps per SM; at
// 172 registers only 8 warps fit). Threads per SM must match crates/msm/src/gpu.rs.
MSM_POINT_KERNELS(g1, fp_t, 128, 3)
// Occupancy variant of msm_accumulate_g1, chosen at run time (cuzk_gpu::msm::Accumulate::
// Occupancy4, CUZK_MSM_ACCUMULATE=occ4): 4 blocks of 128 = 16 warps/SM at 128 registers
// (ptxas: 42 B spill stores, 100 B loads) against 12 warps at 168. Measured, not assumed.
extern "C" __global__ void __launch_bounds__(128, 4)
msm_accumulate_g1_occ4(const affine_t<fp_t>* __restrict__ points, uint32_t npoints,
                       const uint32_t* __restrict__ sorted, uint32_t cap,
                       const uint32_t* __restrict__ offsets, uint32_t nkeys, uint32_t nthreads,
                       uint32_t* pkeys, xyzz_t<fp_t>* ppts, xyzz_t<fp_t>* buckets)
{
    msm::accumulate<fp_t>(points, npoints, sorted, cap, offsets, nkeys, nthreads, pkeys, ppts, buckets);
}

// Paired variant of msm_accumulate_g1, the default (Accumulate::Paired, CUZK_MSM_ACCUMULATE=pair):
// the mixed addition as five out-of-line calls of two interleaved Fp products (ec/ec_field.cuh
// ec_mul2), 4 blocks of 128. H200 run 10: accumulation 94.3 vs 97.2 ms (occ4) at 2^24, 372.4 vs
// 397.4 at 2^26; the 3-block build (168 registers) measured 95.2 / 373.8.
extern "C" __global__ void __launch_bounds__(128, 4)
msm_accumulate_g1_pair(const affine_t<fp_t>* __restrict__ points, uint32_t npoints,
                       const uint32_t* __restrict__ sorted, uint32_t cap,
                       const uint32_t* __restrict__ offsets, uint32_t nkeys, uint32_t nthreads,
                       uint32_t* pkeys, xyzz_t<fp_t>* ppts, xyzz_t<fp_t>* buckets)
{
    msm::accumulate<fp_t, true>(points, npoints, sorted, cap, offsets, nkeys, nthreads, pkeys, ppts, buckets);
}

// G2: an XYZZ point alone is 96 registers; 255 registers with 2 blocks of 128 per SM.
MSM_POINT_KERNELS(g2, fp2_t, 128, 2)

// cuzk: allow-spills msm_accumulate_g2 Fp2 XYZZ acc + affine point + loop state exceed 255 registers around the out-of-line Fp2 calls
// cuzk: allow-spills msm_ones_g2 same as msm_accumulate_g2 (XYZZ + affine live across Fp2 calls)
// cuzk: allow-spills msm_accumulate_g1 26 B at the 168-register cap (3 blocks/SM); loop state, L1-resident; revert to (128, 2) + 256 threads/SM if slower
// cuzk: allow-spills msm_accumulate_g1_occ4 ~42 B at the 128-register cap (4 blocks/SM); the default until H200 run 10
// cuzk: allow-spills msm_accumulate_g1_pair ~250 B at the 128-register cap: the out-of-line paired products save the caller's registers they use (callee-saved); the default, picked by measurement
// cuzk: allow-spills msm_bucket_reduce_g1 120-236 B: three XYZZ points live in the g*L ladder (parking acc in global made G2 worse); runs once per MSM
// cuzk: allow-spills msm_to_jacobian_g2 8 bytes around the out-of-line Fp2 call; runs on nwin + 1 points only
// cuzk: allow-spills msm_bucket_reduce_g2 ~7-10 KB: three G2 XYZZ points live in the g*L ladder; once per MSM (3.2 ms of 366 at 2^24, H200 run 4)
// cuzk: allow-spills msm_merge_g2 ~0.8 KB: two G2 XYZZ partials per merge step; ~1 ms per MSM
// cuzk: allow-spills msm_sum_halves_g2 104-316 B: two G2 XYZZ points across the out-of-line Fp2 calls; runs on the window sums only
// cuzk: allow-spills msm_double_g2 ~150 B around the out-of-line Fp2 calls of the doubling (255 registers); runs once per precomputed copy (setup, not per MSM)
