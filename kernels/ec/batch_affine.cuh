// cuzk: XYZZ -> affine for many points with Montgomery's trick (kernels/groth16/setup.cu for the
// proving key, kernels/msm/msm.cu for the MSM's precomputed point copies): the `per_thread` points
// t, t + T, t + 2T, .. of each thread (T = threads in the grid, so a warp touches adjacent
// points) share one Fp inversion (Fermat, a^(p-2)). Only ZZZ is inverted: 1/ZZ = (ZZ / ZZZ)^2
// since ZZ^3 = ZZZ^2. The identity (ZZ = ZZZ = 0) becomes (0, 0), as in blst. The prefix
// products are parked in out[i].x, which is written last. Outputs are canonical Montgomery
// coordinates, hence bit-identical to blst's affine points.
#pragma once

#include "bls12_381.cuh"

namespace cuzk {

// p - 2, little-endian u32 limbs.
__device__ __constant__ const uint32_t FP_P_MINUS_2[12] = {
    0xffffaaa9, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
    0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};

// a^(p-2) = 1/a for a != 0 (0 -> 0). Out of line: one copy of the 381-step loop.
__device__ __noinline__ fp_t fp_inverse(const fp_t a)
{
    fp_t r = fp_t::one();
#pragma unroll 1
    for (int i = 380; i >= 0; i--) {   // p has 381 bits
        r = r.sqr();
        if ((FP_P_MINUS_2[i >> 5] >> (i & 31)) & 1) r = r * a;
    }
    return r;
}

__device__ __forceinline__ fp_t field_inverse(const fp_t& a) { return fp_inverse(a); }

// 1/(c0 + c1 u) = (c0 - c1 u) / (c0^2 + c1^2)   (u^2 = -1)
__device__ __forceinline__ fp2_t field_inverse(const fp2_t& a)
{
    fp_t t = fp_inverse(a.c0.sqr() + a.c1.sqr());
    return a.conj().mul_by_fp(t);
}

template <class F, class A, class X>
__device__ __forceinline__ void batch_to_affine(A* out, const X* in, uint32_t n, uint32_t per_thread)
{
    const size_t T = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const uint32_t m = (uint32_t)min((size_t)per_thread, (n - 1 - t) / T + 1);
    F acc = F::one();
#pragma unroll 1
    for (uint32_t j = 0; j < m; j++) {
        const size_t i = t + j * T;
        const F z = in[i].ZZZ;
        if (!z.is_zero()) {
            out[i].x = acc;
            acc = acc * z;
        }
    }
    F inv = field_inverse(acc);   // product of non-zero values: non-zero
#pragma unroll 1
    for (uint32_t j = m; j-- > 0;) {
        const size_t i = t + j * T;
        const F zzz = in[i].ZZZ;
        if (zzz.is_zero()) {
            out[i] = A::inf();
            continue;
        }
        const F zzz_inv = inv * out[i].x;
        inv = inv * zzz;
        const F zz_inv = (in[i].ZZ * zzz_inv).sqr();
        A r;
        r.x = in[i].X * zz_inv;
        r.y = in[i].Y * zzz_inv;
        out[i] = r;
    }
}

} // namespace cuzk
