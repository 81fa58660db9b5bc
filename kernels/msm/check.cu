// Subgroup membership of affine BLS12-381 points, for loading parameter files of unknown origin
// (crates/msm/src/subgroup.rs; launch wrapper in crates/msm/src/kernels.rs).
// The endomorphism tests of Scott ("A note on group membership tests for G1, G2 and GT on BLS
// pairing-friendly curves", eprint 2021/1130), with z = -0xd201000000010000:
//  * G1: P is in G1 iff σ²(P) = -[z²]P, σ(x, y) = (βx, y) with β a cube root of unity in Fp
//    (σ²(x, y) = (β²x, y));
//  * G2: P is in G2 iff ψ(P) = [z]P, ψ(x, y) = (conj(x)·cx, conj(y)·cy) (untwist, Frobenius,
//    twist).
// The multiple is double-and-add over the constant with mixed additions of the affine input;
// jacobian_t's branches handle the exceptional cases (doubling, P = -Q, identity) that points
// with small-order components can reach. One thread per point; a failing thread lowers
// *first_bad to its index (atomicMin), so the host reads the batch's lowest failing index, or
// UINT32_MAX. The inputs must be on the curve (the host decoder checks that); (0, 0) passes.
#include "ec/bls12_381.cuh"

using namespace cuzk;

namespace {

// Montgomery constants (R = 2^384), blst's: β = -(1 + sqrt(-3))/2, cx = 1/(1 + u)^((p-1)/3)
// (c0 = 0), cy = 1/(1 + u)^((p-1)/2).
__device__ __constant__ const uint32_t BETA[12] = {
    0x8671f071, 0xcd03c9e4, 0x1fcda5d2, 0x5dab2246, 0xd3851b95, 0x587042af,
    0x01bacb9e, 0x8eb60ebe, 0x83d050d2, 0x03f97d6e, 0x54638741, 0x18f02065};
__device__ __constant__ const uint32_t PSI_X1[12] = {
    0x867545c3, 0x890dc9e4, 0x3285a5d5, 0x2af32253, 0x309b7e2c, 0x50880866,
    0x7e881024, 0xa20d1b8c, 0xe2db9068, 0x14e4f04f, 0x1564853a, 0x14e56d3f};
__device__ __constant__ const uint32_t PSI_Y0[12] = {
    0xa55c9ad1, 0x3e2f585d, 0x86c18183, 0x4294213d, 0x8b623732, 0x382844c8,
    0x19103e18, 0x92ad2afd, 0xac7cf0b9, 0x1d794e4f, 0x7d825ec8, 0x0bd592fc};
__device__ __constant__ const uint32_t PSI_Y1[12] = {
    0x5aa30fda, 0x7bcfa7a2, 0x2a927e7c, 0xdc17dec1, 0x6b4ebef1, 0x2f088dd8,
    0xda74d4a7, 0xd1ca2087, 0x96cebc1d, 0x2da25966, 0xbbfd87d2, 0x0e2b7eed};
// -z and z² (128 bits: hi, lo).
constexpr uint64_t MINUS_Z = 0xd201000000010000ull;
constexpr uint64_t ZZ_HI = 0xac45a4010001a402ull, ZZ_LO = 0x0000000100000000ull;

__device__ __forceinline__ fp_t fp_const(const uint32_t* c)
{
    fp_t r;
#pragma unroll
    for (int i = 0; i < 12; i++) r.v[i] = c[i];
    return r;
}

// [k]P for the BITS-bit constant k = (hi, lo) (top bit set), P affine and not the identity.
template <int BITS, class F>
__device__ __forceinline__ jacobian_t<F> mul_const(const affine_t<F>& p, uint64_t hi, uint64_t lo)
{
    jacobian_t<F> acc = jacobian_t<F>::from_affine(p);
#pragma unroll 1
    for (int i = BITS - 2; i >= 0; i--) {
        acc = acc.dbl();
        const uint64_t w = i >= 64 ? hi >> (i - 64) : lo >> i;
        if (w & 1) acc = acc.add_affine(p);
    }
    return acc;
}

// Whether the affine (ex, ey) equals -Q for Jacobian Q = (X, Y, Z): ex·Z² = X and ey·Z³ = -Y.
template <class F>
__device__ __forceinline__ bool equals_neg(const F& ex, const F& ey, const jacobian_t<F>& q)
{
    if (q.is_inf()) return false;
    const F zz = ec_sqr(q.Z);
    const F zzz = ec_mul(zz, q.Z);
    return ec_mul(ex, zz) == q.X && ec_mul(ey, zzz) == -q.Y;
}

__device__ bool g1_in_subgroup(const g1_affine_t& p)
{
    if (p.is_inf()) return true;
    const fp_t beta = fp_const(BETA);
    const fp_t x2 = ec_mul(ec_mul(p.x, beta), beta);
    return equals_neg(x2, p.y, mul_const<128>(p, ZZ_HI, ZZ_LO));
}

__device__ bool g2_in_subgroup(const g2_affine_t& p)
{
    if (p.is_inf()) return true;
    const fp2_t cx = {fp_t::zero(), fp_const(PSI_X1)};
    const fp2_t cy = {fp_const(PSI_Y0), fp_const(PSI_Y1)};
    const fp2_t px = ec_mul(p.x.conj(), cx);
    const fp2_t py = ec_mul(p.y.conj(), cy);
    // ψ(P) = [z]P = -[-z]P
    return equals_neg(px, py, mul_const<64>(p, 0, MINUS_Z));
}

template <class A, bool (*IN)(const A&)>
__device__ __forceinline__ void check_all(uint32_t* first_bad, const A* points, uint32_t n)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (!IN(points[i])) atomicMin(first_bad, i);
    }
}

} // namespace

extern "C" __global__ void __launch_bounds__(256) cuzk_check_g1_subgroup(uint32_t* first_bad,
                                                                         const g1_affine_t* points, uint32_t n)
{
    check_all<g1_affine_t, g1_in_subgroup>(first_bad, points, n);
}

// Spills ~650 B on every arch (accepted in crates/msm/PERF-NOTES.md).
extern "C" __global__ void __launch_bounds__(128) cuzk_check_g2_subgroup(uint32_t* first_bad,
                                                                         const g2_affine_t* points, uint32_t n)
{
    check_all<g2_affine_t, g2_in_subgroup>(first_bad, points, n);
}
