// Fixed-base batch scalar multiplication for Groth16 parameter generation
// (crates/groth16/src/setup_gpu.rs, launch wrappers in crates/gpu/src/setup.rs).
//
//  * *_mul: one thread per scalar. The host uploads the window table of the generator built by
//    the CPU setup (window k, digit d >= 1 at k * (2^w - 1) + d - 1, affine, never identity),
//    so each product is at most ceil(255 / w) mixed XYZZ additions and no doublings. Scalars
//    arrive in Montgomery form and are made canonical first (the digits are of the integer).
//  * *_to_affine: XYZZ -> affine with Montgomery's trick over the `per_thread` points
//    t, t + T, t + 2T, .. of each thread (T = threads in the grid, so a warp touches adjacent
//    points): one Fp inversion (Fermat, a^(p-2)) per thread. Only ZZZ is inverted:
//    1/ZZ = (ZZ / ZZZ)^2 since ZZ^3 = ZZZ^2. The identity (ZZ = ZZZ = 0) becomes (0, 0), as in
//    blst. The prefix products are parked in out[i].x, which is written last.
// Outputs are canonical Montgomery coordinates, hence bit-identical to blst's affine points.
#include "ec/bls12_381.cuh"

using namespace cuzk;

namespace {

// p - 2, little-endian u32 limbs.
__device__ __constant__ const uint32_t SETUP_FP_P_MINUS_2[12] = {
    0xffffaaa9, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
    0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};

// a^(p-2) = 1/a for a != 0 (0 -> 0). Out of line: one copy of the 381-step loop.
__device__ __noinline__ fp_t fp_inverse(const fp_t a)
{
    fp_t r = fp_t::one();
#pragma unroll 1
    for (int i = 380; i >= 0; i--) {   // p has 381 bits
        r = r.sqr();
        if ((SETUP_FP_P_MINUS_2[i >> 5] >> (i & 31)) & 1) r = r * a;
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

} // namespace

extern "C" __global__ void __launch_bounds__(256) cuzk_setup_g1_mul(g1_xyzz_t* out, const fr_t* scalars,
                                                                    const g1_affine_t* table, uint32_t n,
                                                                    uint32_t window, uint32_t windows)
{
    fixed_base_mul(out, scalars, table, n, window, windows);
}

// cuzk: allow-spills cuzk_setup_g2_mul an XYZZ G2 accumulator + affine table entry live across the out-of-line Fp2 calls exceed 255 registers; setup runs once per key
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
