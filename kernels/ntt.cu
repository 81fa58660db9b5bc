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
    pass(data, tables, lg_n, s0, k, lg_c, flags);
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
