// cuzk: NTT kernels over BLS12-381 Fr (see ntt/ntt.cuh for the algorithm and table layout).
// Launch wrappers: crates/gpu/src/ntt.rs. Every input element must be canonical (< r); every
// output element is canonical.
#include "ntt/ntt.cuh"

using namespace cuzk;
using namespace cuzk::ntt;

// One radix-2^k pass (see ntt::pass); grid (2^(lg_n-k-lg_c), batch), 2^(k+lg_c-1) threads.
extern "C" __global__ void __launch_bounds__(MAX_THREADS)
cuzk_ntt_pass(fr_t* __restrict__ data, const fr_t* __restrict__ tables, uint32_t lg_n, uint32_t s0,
              uint32_t k, uint32_t lg_c, uint32_t flags)
{
    pass<2>(data, tables, lg_n, s0, k, lg_c, flags);
}

// The same pass with radix-4 steps (ntt::pass<4>, needs k >= 2): grid as above,
// 2^(k+lg_c-2) threads holding four elements each. cuzk_ntt_pass4 is the generic kernel; the
// specialized ones (ntt::pass<4, false, SP_ON | ...>, CUZK_NTT_SPECIALIZED=1) hold only the code
// for one flag set: same launch shape, arguments and results. Named
// cuzk_ntt_pass4_{dif,dit}[_tw][_pre|_post]; the ten that plans use (a DIF pass with the
// twiddle never post-scales, a DIT pass with it never pre-scales); other flag sets, and passes
// with both pre- and post-scaling, run on the generic kernel.
#define CUZK_NTT_PASS4_KERNEL(NAME, MIN_BLOCKS, SPEC)                                              \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS / 2, MIN_BLOCKS)                      \
    NAME(fr_t* __restrict__ data, const fr_t* __restrict__ tables, uint32_t lg_n, uint32_t s0,     \
         uint32_t k, uint32_t lg_c, uint32_t flags)                                                \
    {                                                                                              \
        pass<4, false, (SPEC)>(data, tables, lg_n, s0, k, lg_c, flags);                            \
    }

// The generic and the ten specialized radix-4 kernels, with register budgets for MIN_BLOCKS
// resident blocks of 256 threads per SM, names ending in SUFFIX.
#define CUZK_NTT_PASS4_KERNELS(SUFFIX, MIN_BLOCKS)                                                 \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4##SUFFIX, MIN_BLOCKS, 0)                                   \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dif##SUFFIX, MIN_BLOCKS, SP_ON)                           \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dif_pre##SUFFIX, MIN_BLOCKS, SP_ON | SP_PRE)              \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dif_post##SUFFIX, MIN_BLOCKS, SP_ON | SP_POST)            \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dif_tw##SUFFIX, MIN_BLOCKS, SP_ON | SP_TW)                \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dif_tw_pre##SUFFIX, MIN_BLOCKS, SP_ON | SP_TW | SP_PRE)   \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dit##SUFFIX, MIN_BLOCKS, SP_ON | SP_DIT)                  \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dit_pre##SUFFIX, MIN_BLOCKS, SP_ON | SP_DIT | SP_PRE)     \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dit_post##SUFFIX, MIN_BLOCKS, SP_ON | SP_DIT | SP_POST)   \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dit_tw##SUFFIX, MIN_BLOCKS, SP_ON | SP_DIT | SP_TW)       \
    CUZK_NTT_PASS4_KERNEL(cuzk_ntt_pass4_dit_tw_post##SUFFIX, MIN_BLOCKS,                          \
                          SP_ON | SP_DIT | SP_TW | SP_POST)

// Resident blocks per SM, picked at run time (CUZK_NTT_BLOCKS, default 2): 2 gives up to 128
// registers and no spills (sm_90); the _b3 (80) and _b4 (64) builds are A/B variants for the
// passes' latency-bound issue (4 warps per scheduler at 2 blocks).
CUZK_NTT_PASS4_KERNELS(, 2)
CUZK_NTT_PASS4_KERNELS(_b3, 3)
CUZK_NTT_PASS4_KERNELS(_b4, 4)
#undef CUZK_NTT_PASS4_KERNELS
#undef CUZK_NTT_PASS4_KERNEL

// The opt-in wide pass (ntt::pass<8, true>, CUZK_NTT_WIDE=1): tiles of up to 2^WIDE_TILE_LG
// elements (32 << (k + lg_c) bytes of dynamic shared memory, above the 48 KiB default: the
// launcher raises the function's limit), grid as above, 2^(k+lg_c-3) threads holding eight
// elements each. Needs 2 <= k, 3 <= k + lg_c <= WIDE_TILE_LG.
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1)
cuzk_ntt_pass_wide(fr_t* __restrict__ data, const fr_t* __restrict__ tables, uint32_t lg_n, uint32_t s0,
                   uint32_t k, uint32_t lg_c, uint32_t flags)
{
    pass<8, true>(data, tables, lg_n, s0, k, lg_c, flags);
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
constexpr uint32_t BR_T = 5;
extern "C" __global__ void __launch_bounds__(256)
cuzk_ntt_bit_reverse_tiled(fr_t* __restrict__ data, uint32_t lg_n)
{
    constexpr uint32_t W = 1u << BR_T, P = W + 1;    // row pitch padded: conflict-free row reads
    __shared__ uint4 s_lo[W * P], s_hi[W * P];
    const tile_t tile{s_lo, s_hi};
    const uint32_t mid = lg_n - 2 * BR_T;
    const uint32_t m = blockIdx.x, mr = bitrev(m, mid);
    if (mr < m) return;
    fr_t* poly = data + ((size_t)blockIdx.y << lg_n);
    const uint32_t t = threadIdx.x;
    const uint32_t a_shift = lg_n - BR_T;
    fr_t ra[4], rb[4];
#pragma unroll
    for (uint32_t u = 0; u < 4; u++) {
        uint32_t e = t + 256 * u, a = e >> BR_T, b = e & (W - 1);
        ra[u] = ld_elem(poly + (((size_t)a << a_shift) | (m << BR_T) | b));
        if (mr != m) rb[u] = ld_elem(poly + (((size_t)a << a_shift) | (mr << BR_T) | b));
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

// Groth16 quotient on the coset: a[i] = (a[i] * b[i] - c[i]) * Z^-1, Z^-1 = 1/(g^n - 1).
extern "C" __global__ void __launch_bounds__(256)
cuzk_ntt_quotient(fr_t* __restrict__ a, const fr_t* __restrict__ b, const fr_t* __restrict__ c,
                  const fr_t* __restrict__ tables, uint32_t lg_n)
{
    const uint32_t n = 1u << lg_n;
    const fr_t z = ld(tables + T_ZINV + lg_n);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        a[i] = (a[i] * b[i] - c[i]) * z;
    }
}

// The _b3 / _b4 builds are A/B variants (CUZK_NTT_BLOCKS=3|4, default 2); at their register
// caps (80 / 64) these spill (sizes for sm_80..sm_90, nvcc 13.0):
// cuzk: allow-spills cuzk_ntt_pass4_b3 A/B variant: the generic kernel, 48-104 B at 80 registers
// cuzk: allow-spills cuzk_ntt_pass4_b4 A/B variant: the generic kernel, 148-204 B at 64 registers
// cuzk: allow-spills cuzk_ntt_pass4_dif_b4 A/B variant: 32-52 B at 64 registers
// cuzk: allow-spills cuzk_ntt_pass4_dif_pre_b4 A/B variant: 28-36 B at 64 registers
// cuzk: allow-spills cuzk_ntt_pass4_dif_post_b4 A/B variant: 0-52 B at 64 registers
// cuzk: allow-spills cuzk_ntt_pass4_dif_tw_b4 A/B variant: 32-52 B at 64 registers
// cuzk: allow-spills cuzk_ntt_pass4_dif_tw_pre_b4 A/B variant: 28-36 B at 64 registers
