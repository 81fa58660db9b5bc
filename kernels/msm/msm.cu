// cuzk: MSM kernels (see msm/pippenger.cuh for the pipeline). Launched through the checked wrappers
// in crates/msm/src/kernels.rs; G1 kernels end in _g1 (Fp coordinates), G2 in _g2 (Fp2).
#include "msm/pippenger.cuh"
#include "ec/batch_affine.cuh"

using namespace cuzk;
using scalars = msm::scalars_t<fr_t>;

extern "C" __global__ void __launch_bounds__(256)
msm_prepare(const fr_t* in, fr_t* out, uint32_t n, uint32_t* counters, const uint32_t* __restrict__ skip,
            uint32_t skip_at)
{
    msm::prepare(in, out, n, counters, skip, skip_at);
}

extern "C" __global__ void __launch_bounds__(256)
msm_count(const fr_t* __restrict__ canon, const uint32_t* __restrict__ skip, uint32_t skip_at, uint32_t n,
          uint32_t* counters)
{
    msm::count(scalars{canon, skip, skip_at}, n, counters);
}

extern "C" __global__ void __launch_bounds__(256) msm_to_canonical(fr_t* s, uint32_t n) { msm::to_canonical(s, n); }

// Scan (three launches, see msm::scan_tile_sums): grid ceil(len / 512) x 512 threads, then one
// block of 1024, then ceil(len / 512) x 512 again (block sizes: cuzk_shared.h).
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

// Binned sort (msm/sort.cuh): histogram of bins, scan (above), coarse scatter, one
// block of 256 per bin (cuzk_shared.h), oversized bins. sets, stride: the window
// folding of sort.cuh fold_t (the histograms need only the keys: no stride).
extern "C" __global__ void __launch_bounds__(256)
msm_sort_bin_histogram(const fr_t* __restrict__ canon, const uint32_t* __restrict__ skip, uint32_t skip_at,
                       uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                       uint32_t F, uint32_t Ft, uint32_t* bin_counts, uint32_t* flag)
{
    msm::sort_bin_histogram(scalars{canon, skip, skip_at}, n, c, nwin, {sets, 0}, F, Ft, bin_counts, flag);
}

// Shared-memory histogram: 512 threads, two blocks per SM (up to SORT_HIST_SMEM_BYTES each).
extern "C" __global__ void __launch_bounds__(CUZK_MSM_BIN_HIST_THREADS, CUZK_MSM_BIN_HIST_BLOCKS_PER_SM)
msm_sort_bin_histogram_smem(const fr_t* __restrict__ canon, const uint32_t* __restrict__ skip, uint32_t skip_at,
                            uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                            uint32_t F, uint32_t Ft, uint32_t spg, uint32_t ncnt, uint32_t chunk,
                            uint32_t* bin_counts, uint32_t* flag)
{
    extern __shared__ uint32_t hist_sh[];
    msm::sort_bin_histogram_smem(scalars{canon, skip, skip_at}, n, c, nwin, {sets, 0}, F, Ft, spg, ncnt, chunk,
                                 bin_counts, flag, hist_sh);
}

extern "C" __global__ void __launch_bounds__(256)
msm_sort_bin_scatter(const fr_t* __restrict__ canon, const uint32_t* __restrict__ skip, uint32_t skip_at,
                     uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                     uint32_t stride, uint32_t F, uint32_t Ft, uint32_t idxbits, uint32_t* bin_cur,
                     uint32_t* __restrict__ sorted, uint32_t cap)
{
    msm::sort_bin_scatter(scalars{canon, skip, skip_at}, n, c, nwin, {sets, stride}, F, Ft, idxbits, bin_cur, sorted,
                          cap);
}

extern "C" __global__ void __launch_bounds__(msm::SORT_FINE_THREADS)
msm_sort_fine(const uint32_t* __restrict__ bin_off, uint32_t nbins, uint32_t F, uint32_t Ft, uint32_t idxbits,
              uint32_t c, uint32_t sets, uint32_t* sorted, uint32_t cap, uint32_t* offsets, uint32_t* cursors,
              uint32_t* flag)
{
    msm::sort_fine(bin_off, nbins, F, Ft, idxbits, c, sets, sorted, cap, offsets, cursors, flag);
}

extern "C" __global__ void __launch_bounds__(256)
msm_sort_oversize(const fr_t* __restrict__ canon, const uint32_t* __restrict__ skip, uint32_t skip_at,
                  uint32_t n, uint32_t c, uint32_t nwin, uint32_t sets,
                  uint32_t stride, uint32_t F, uint32_t Ft, const uint32_t* __restrict__ bin_counts,
                  const uint32_t* __restrict__ flag, uint32_t* cursors, uint32_t* __restrict__ sorted, uint32_t cap)
{
    msm::sort_oversize(scalars{canon, skip, skip_at}, n, c, nwin, {sets, stride}, F, Ft, bin_counts, flag, cursors,
                       sorted, cap);
}

// Level-0 bucket accumulation; PAIRED: the mixed addition as out-of-line calls of two
// interleaved Fp products (G1 only).
#define MSM_ACCUMULATE_KERNEL(G, F, TPB, MINB, PAIRED)                                                   \
    extern "C" __global__ void __launch_bounds__(TPB, MINB)                                              \
    msm_accumulate_##G(const affine_t<F>* __restrict__ points, uint32_t npoints,                         \
                       const uint32_t* __restrict__ sorted, uint32_t cap,                                \
                       const uint32_t* __restrict__ offsets, uint32_t nkeys, uint32_t nthreads,          \
                       uint32_t* pkeys, xyzz_t<F>* ppts, xyzz_t<F>* buckets)                             \
    {                                                                                                    \
        msm::accumulate<F, PAIRED>(points, npoints, sorted, cap, offsets, nkeys, nthreads, pkeys, ppts,  \
                                   buckets);                                                             \
    }

#define MSM_POINT_KERNELS(G, F, TPB)                                                                     \
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
    msm_ones_##G(const affine_t<F>* __restrict__ points, const fr_t* __restrict__ canon,                 \
                 const uint32_t* __restrict__ skip, uint32_t skip_at, uint32_t n, uint32_t nthreads,      \
                 xyzz_t<F>* __restrict__ out)                                                            \
    {                                                                                                    \
        msm::ones<F>(points, scalars{canon, skip, skip_at}, n, nthreads, out);                           \
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

// G1: 128-thread blocks; the accumulation runs the paired products (ec/ec_field.cuh ec_mul2),
// 4 blocks of 128 per SM at 128 registers (crates/msm/PERF-NOTES.md: faster than the inline
// addition at 3 or 4 blocks). Block and blocks per SM: cuzk_shared.h.
MSM_POINT_KERNELS(g1, fp_t, CUZK_MSM_POINT_THREADS)
MSM_ACCUMULATE_KERNEL(g1, fp_t, CUZK_MSM_POINT_THREADS, CUZK_MSM_G1_ACC_BLOCKS_PER_SM, true)

// G2: an XYZZ point alone is 96 registers; 255 registers with 2 blocks of 128 per SM.
MSM_POINT_KERNELS(g2, fp2_t, CUZK_MSM_POINT_THREADS)
MSM_ACCUMULATE_KERNEL(g2, fp2_t, CUZK_MSM_POINT_THREADS, CUZK_MSM_G2_ACC_BLOCKS_PER_SM, false)

// Their accepted spills, with the reasons: crates/msm/PERF-NOTES.md, "Accepted spills".
