// Fixed-base batch scalar multiplication for Groth16 parameter generation
// (crates/groth16/src/setup/gpu.rs, launch wrappers in crates/groth16/src/kernels.rs).
//
//  * *_mul: one thread per scalar. The host uploads the window table of the generator built by
//    the CPU setup (window k, digit d >= 1 at k * (2^w - 1) + d - 1, affine, never identity),
//    so each product is at most ceil(255 / w) mixed XYZZ additions and no doublings. Scalars
//    arrive in Montgomery form and are made canonical first (the digits are of the integer).
//  * *_to_affine: XYZZ -> affine, ec/batch_affine.cuh (one Fp inversion per thread).
// Outputs are canonical Montgomery coordinates, hence bit-identical to blst's affine points.
#include "ec/bls12_381.cuh"
#include "ec/batch_affine.cuh"

using namespace cuzk;

namespace {

// The low w bits of s, then s >>= w (w <= 16). Shifting instead of indexing limbs by a run-time
// window number keeps s in registers (no local-memory array).
__device__ __forceinline__ uint32_t pop_digit(fr_t& s, uint32_t w)
{
    const uint32_t d = s.v[0] & ((1u << w) - 1);
#pragma unroll
    for (int j = 0; j < 7; j++) s.v[j] = __funnelshift_r(s.v[j], s.v[j + 1], w);
    s.v[7] >>= w;
    return d;
}

template <class A, class X>
__device__ __forceinline__ void fixed_base_mul(X* out, const fr_t* scalars, const A* table, uint32_t n,
                                               uint32_t window, uint32_t windows)
{
    const uint32_t per_window = (1u << window) - 1;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        fr_t s = scalars[i].to_canonical();
        X acc = X::inf();
#pragma unroll 1
        for (uint32_t k = 0; k < windows; k++) {
            const uint32_t d = pop_digit(s, window);
            if (d != 0) acc = acc.add_affine(table[k * per_window + d - 1]);
        }
        out[i] = acc;
    }
}

} // namespace

extern "C" __global__ void __launch_bounds__(256) cuzk_setup_g1_mul(g1_xyzz_t* out, const fr_t* scalars,
                                                                    const g1_affine_t* table, uint32_t n,
                                                                    uint32_t window, uint32_t windows)
{
    fixed_base_mul(out, scalars, table, n, window, windows);
}

// Spills ~400 B (accepted in kernels/groth16/PERF-NOTES.md).
extern "C" __global__ void __launch_bounds__(128) cuzk_setup_g2_mul(g2_xyzz_t* out, const fr_t* scalars,
                                                                    const g2_affine_t* table, uint32_t n,
                                                                    uint32_t window, uint32_t windows)
{
    fixed_base_mul(out, scalars, table, n, window, windows);
}

extern "C" __global__ void __launch_bounds__(256) cuzk_setup_g1_to_affine(g1_affine_t* out, const g1_xyzz_t* in,
                                                                          uint32_t n, uint32_t per_thread)
{
    batch_to_affine<fp_t>(out, in, n, per_thread);
}

extern "C" __global__ void __launch_bounds__(128) cuzk_setup_g2_to_affine(g2_affine_t* out, const g2_xyzz_t* in,
                                                                          uint32_t n, uint32_t per_thread)
{
    batch_to_affine<fp2_t>(out, in, n, per_thread);
}
