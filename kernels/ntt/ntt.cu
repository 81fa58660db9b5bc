// cuzk: NTT kernels over BLS12-381 Fr (see ntt/ntt.cuh for the algorithm and table layout).
// Launch wrappers: crates/ntt/src/kernels.rs. Every input element must be canonical (< r); every
// output element is canonical.
#include "ntt/ntt.cuh"

using namespace cuzk;
using namespace cuzk::ntt;

// One radix-2^k pass with radix-2 stages (see ntt::pass): the one-bit pass of a size-2
// transform (every larger pass has k >= 2 and runs radix-4 below); grid (2^(lg_n-k-lg_c),
// batch), 2^(k+lg_c-1) threads.
// `roots` is the roots table of flags' ROOTS_LG field (unread when the field is 0).
// Every pass kernel takes the polynomials' bases as (data, data1, data2) (ntt::poly_base): one
// contiguous batch (data1 = data + 2^lg_n, data2 = data + 2 * 2^lg_n) or up to three separate
// buffers of one polynomial each (the H pipeline runs a, b and c in one launch per pass).
extern "C" __global__ void __launch_bounds__(MAX_THREADS)
cuzk_ntt_pass(fr_t* __restrict__ data, fr_t* __restrict__ data1, fr_t* __restrict__ data2,
              const fr_t* __restrict__ tables, const fr_t* __restrict__ roots, uint32_t lg_n, uint32_t s0,
              uint32_t k, uint32_t lg_c, uint32_t flags)
{
    pass<2>(data, data1, data2, tables, roots, lg_n, s0, k, lg_c, flags);
}

// The pass with radix-4 steps (ntt::pass<4, SP_ON | SPEC>, needs k >= 2): grid as above,
// 2^(k+lg_c-2) threads holding four elements each, specialized at compile time for one flag set
// (2k-6k SASS instructions on sm_90 instead of a generic build's 24k). Named
// cuzk_ntt_pass4_{dif,dit}[_tw][_pre|_post]; the ten that plans use (a pass with the store-side
// twiddle, F_TWIDDLE, is never the last of its transform, so never post-scales). Built for 4
// resident blocks of 256 threads per SM (64 registers, 8 warps per scheduler): the passes are
// latency-bound, and 4 blocks beat 2 (crates/ntt/PERF-NOTES.md, session 6); the DIF kernels
// spill a little at that cap (accepted in crates/ntt/PERF-NOTES.md).
#define CUZK_NTT_PASS4_SPEC(NAME, SPEC)                                                            \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS / 2, 4)                               \
    NAME(fr_t* __restrict__ data, fr_t* __restrict__ data1, fr_t* __restrict__ data2,              \
         const fr_t* __restrict__ tables, const fr_t* __restrict__ roots, uint32_t lg_n, uint32_t s0, \
         uint32_t k, uint32_t lg_c, uint32_t flags)                                                \
    {                                                                                              \
        pass<4, SP_ON | (SPEC)>(data, data1, data2, tables, roots, lg_n, s0, k, lg_c, flags);        \
    }
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dif, 0)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dif_pre, SP_PRE)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dif_post, SP_POST)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dif_tw, SP_TW)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dif_tw_pre, SP_TW | SP_PRE)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dit, SP_DIT)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dit_pre, SP_DIT | SP_PRE)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dit_post, SP_DIT | SP_POST)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dit_tw, SP_DIT | SP_TW)
CUZK_NTT_PASS4_SPEC(cuzk_ntt_pass4_dit_tw_pre, SP_DIT | SP_TW | SP_PRE)
#undef CUZK_NTT_PASS4_SPEC

// The roots table of order D = lg (ntt::ROOTS_LG): roots[i] = w_(2^lg)^i = W^(i << (MAX_LG - lg))
// for i < 2^(lg-1), from the split tables. Grid-stride; needs DIRECT_LG < lg <= MAX_LG.
extern "C" __global__ void __launch_bounds__(256)
cuzk_ntt_roots(fr_t* __restrict__ roots, const fr_t* __restrict__ tables, uint32_t lg)
{
    const uint32_t half = 1u << (lg - 1);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < half; i += gridDim.x * blockDim.x)
        st_elem(roots + i, split_pow(tables, T_FWD_LO, i << (MAX_LG - lg)));
}

// In-place bit-reversal permutation of each polynomial: grid (any, batch). Every element is one
// 32-byte sector, so the scattered accesses waste no bandwidth.
extern "C" __global__ void __launch_bounds__(256)
cuzk_ntt_bit_reverse(fr_t* __restrict__ data, uint32_t lg_n)
{
    fr_t* poly = data + ((size_t)blockIdx.y << lg_n);
    const uint32_t n = 1u << lg_n;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t j = bitrev(i, lg_n);
        if (i < j) {
            fr_t x = poly[i];
            poly[i] = poly[j];
            poly[j] = x;
        }
    }
}

// The same permutation, tiled (needs lg_n >= 2 * BR_T = 10): index i = (a, m, b) with a and b of
// BR_T bits, bitrev(i) = (rev b, rev m, rev a). Block m (grid x = 2^(lg_n - 10), y = batch;
// blocks with rev m < m exit) loads the 32 x 32 tiles A = {(a, m, b)} and B = {(a, rev m, b)}
// with rows of 32 consecutive elements (1 KiB) and writes A transposed and bit-reversed to the
// rows of set rev m and B to set m. Every block reads all its elements before it writes, and the
// sets of different blocks are disjoint, so in place is safe.
// QUOT (cuzk_ntt_quotient_bitrev_tiled): every loaded element x of data (= a) at index i becomes
// (x * b[i] - n * c[i]) * K (hq below; x * b[i] - c[i] with FOLD) before it is staged, so the
// quotient leaves a bit-reversed.
constexpr uint32_t BR_T = 5;
// The H pipeline's quotient of one element: a, b, c are n times the coset evaluations, K =
// 1/(Z n^3) includes back's 1/n (T_HK, T_HN in ntt/ntt.cuh): three multiplications. FOLD (the
// half-root coset where to_coeffs' last store had F_TW_FOLD): a and c already carry K and n * K
// (T_HTW), so a * b - c: one multiplication.
template <bool FOLD>
__device__ __forceinline__ fr_t hq(const fr_t& a, const fr_t& b, const fr_t& c, const fr_t& nn, const fr_t& kk)
{
    if constexpr (FOLD) return a * b - c;
    else return (a * b - c * nn) * kk;
}
// The shared tile of bit_reverse_tiled, one object per kernel whatever the instantiations it
// inlines (cuzk_ntt_quotient_bitrev_tiled holds both FOLD variants in 33 KiB, not 66).
__device__ __forceinline__ tile_t bit_reverse_tile()
{
    constexpr uint32_t W = 1u << BR_T, P = W + 1;
    __shared__ uint4 s_lo[W * P], s_hi[W * P];
    return tile_t{s_lo, s_hi};
}
template <bool QUOT, bool FOLD = false>
__device__ __forceinline__ void bit_reverse_tiled(fr_t* __restrict__ data, const fr_t* __restrict__ qb,
                                                  const fr_t* __restrict__ qc, const fr_t* __restrict__ tables,
                                                  uint32_t lg_n)
{
    constexpr uint32_t W = 1u << BR_T, P = W + 1;    // row pitch padded: conflict-free row reads
    const tile_t tile = bit_reverse_tile();
    const uint32_t mid = lg_n - 2 * BR_T;
    const uint32_t m = blockIdx.x, mr = bitrev(m, mid);
    if (mr < m) return;
    fr_t* poly = data + ((size_t)blockIdx.y << lg_n);
    const uint32_t t = threadIdx.x;
    const uint32_t a_shift = lg_n - BR_T;
    fr_t ra[4], rb[4], nn, kk;
    if constexpr (QUOT && !FOLD) {
        nn = ld(tables + T_HN + lg_n);
        kk = ld(tables + T_HK + lg_n);
    }
#pragma unroll
    for (uint32_t u = 0; u < 4; u++) {
        uint32_t e = t + 256 * u, a = e >> BR_T, b = e & (W - 1);
        const size_t ia = ((size_t)a << a_shift) | (m << BR_T) | b;
        const size_t ib = ((size_t)a << a_shift) | (mr << BR_T) | b;
        ra[u] = ld_elem(poly + ia);
        if (mr != m) rb[u] = ld_elem(poly + ib);
        if constexpr (QUOT) {
            ra[u] = hq<FOLD>(ra[u], ld_elem(qb + ia), ld_elem(qc + ia), nn, kk);
            if (mr != m) rb[u] = hq<FOLD>(rb[u], ld_elem(qb + ib), ld_elem(qc + ib), nn, kk);
        }
    }
    // Output (a', rev m, b') is old (rev b', m, rev a') = A[rev b'][rev a']: stage A at
    // S[rev b][rev a], then read S[a'][b'].
#pragma unroll
    for (uint32_t u = 0; u < 4; u++) {
        uint32_t e = t + 256 * u, a = e >> BR_T, b = e & (W - 1);
        tile.set(bitrev(b, BR_T) * P + bitrev(a, BR_T), ra[u]);
    }
    __syncthreads();
#pragma unroll
    for (uint32_t u = 0; u < 4; u++) {
        uint32_t e = t + 256 * u, a = e >> BR_T, b = e & (W - 1);
        ra[u] = tile.get(a * P + b);
    }
    if (mr != m) {
        __syncthreads();
#pragma unroll
        for (uint32_t u = 0; u < 4; u++) {
            uint32_t e = t + 256 * u, a = e >> BR_T, b = e & (W - 1);
            tile.set(bitrev(b, BR_T) * P + bitrev(a, BR_T), rb[u]);
        }
        __syncthreads();
#pragma unroll
        for (uint32_t u = 0; u < 4; u++) {
            uint32_t e = t + 256 * u, a = e >> BR_T, b = e & (W - 1);
            st_elem(poly + (((size_t)a << a_shift) | (m << BR_T) | b), tile.get(a * P + b));
        }
    }
#pragma unroll
    for (uint32_t u = 0; u < 4; u++) {
        uint32_t e = t + 256 * u, a = e >> BR_T, b = e & (W - 1);
        st_elem(poly + (((size_t)a << a_shift) | (mr << BR_T) | b), ra[u]);
    }
}

extern "C" __global__ void __launch_bounds__(256)
cuzk_ntt_bit_reverse_tiled(fr_t* __restrict__ data, uint32_t lg_n)
{
    bit_reverse_tiled<false>(data, nullptr, nullptr, nullptr, lg_n);
}

// The H pipeline's quotient written bit-reversed, in place on a (one polynomial): a[bitrev(i)] =
// (a[i] * b[i] - n * c[i]) * K, or a[i] * b[i] - c[i] with fold != 0 (hq), so the H pipeline's
// inverse coset transform is a DIT (bit-reversed in) and no permutation pass follows it.
// Element-wise (any lg_n; grid any x, 1): the thread of the pair (i, j = bitrev(i)), i <= j,
// reads both before it writes either.
template <bool FOLD>
__device__ __forceinline__ void quotient_bitrev(fr_t* __restrict__ a, const fr_t* __restrict__ b,
                                                const fr_t* __restrict__ c, const fr_t* __restrict__ tables,
                                                uint32_t lg_n)
{
    const uint32_t n = 1u << lg_n;
    fr_t nn, kk;
    if constexpr (!FOLD) {
        nn = ld(tables + T_HN + lg_n);
        kk = ld(tables + T_HK + lg_n);
    }
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const uint32_t j = bitrev(i, lg_n);
        if (i > j) continue;
        const fr_t qi = hq<FOLD>(a[i], b[i], c[i], nn, kk);
        if (i != j) a[i] = hq<FOLD>(a[j], b[j], c[j], nn, kk);
        a[j] = qi;
    }
}
extern "C" __global__ void __launch_bounds__(256)
cuzk_ntt_quotient_bitrev(fr_t* __restrict__ a, const fr_t* __restrict__ b, const fr_t* __restrict__ c,
                         const fr_t* __restrict__ tables, uint32_t lg_n, uint32_t fold)
{
    if (fold) quotient_bitrev<true>(a, b, c, tables, lg_n);
    else quotient_bitrev<false>(a, b, c, tables, lg_n);
}

// The same through the tiles of cuzk_ntt_bit_reverse_tiled (needs lg_n >= 10; grid
// (2^(lg_n - 10), 1), 256 threads): a block reads all of a, b, c on its tile pair (A, B) before it
// writes a, and the pairs of different blocks are disjoint, so in place on a is safe. One pass
// over memory instead of the quotient's and the tiled permutation's two.
extern "C" __global__ void __launch_bounds__(256)
cuzk_ntt_quotient_bitrev_tiled(fr_t* __restrict__ a, const fr_t* __restrict__ b, const fr_t* __restrict__ c,
                               const fr_t* __restrict__ tables, uint32_t lg_n, uint32_t fold)
{
    if (fold) bit_reverse_tiled<true, true>(a, b, c, tables, lg_n);
    else bit_reverse_tiled<true, false>(a, b, c, tables, lg_n);
}

