// cuzk: BLS12-381 field parameters and types.
//   fr_t  scalar field  r = 0x73eda753...00000001 (255 bits), 8 x u32 limbs, R = 2^256
//   fp_t  base field    p = 0x1a0111ea...ffffaaab (381 bits), 12 x u32 limbs, R = 2^384
//   fp2_t Fp[u]/(u^2 + 1), (c0, c1)
// Memory layout is exactly blst's (blst_fr / blst_fp / blst_fp2: little-endian limbs, Montgomery).
// The constants are per translation unit (`static`), so any number of .cu files may include this.
#pragma once

#include "mont.cuh"
#include "fp2.cuh"

namespace cuzk {
namespace bls12_381 {

static __device__ __constant__ const uint32_t FR_MOD[8] = {
    0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402, 0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
static __device__ __constant__ const uint32_t FR_ONE[8] = {
    0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa, 0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
static __device__ __constant__ const uint32_t FR_RR[8] = {
    0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb, 0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9};
// Not `const` on purpose: with M0 = 0xffffffff visible as a literal the compiler rewrites
// t0*M0 into a negation that schedules worse (observation credited to sppark).
static __device__ __constant__ uint32_t FR_M0 = 0xffffffff;

static __device__ __constant__ const uint32_t FP_MOD[12] = {
    0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
    0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
static __device__ __constant__ const uint32_t FP_ONE[12] = {
    0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857,
    0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};
static __device__ __constant__ const uint32_t FP_RR[12] = {
    0x1c341746, 0xf4df1f34, 0x09d104f1, 0x0a76e6a6, 0x4c95b6d5, 0x8de5476c,
    0x939d83c0, 0x67eb88a9, 0xb519952d, 0x9a793e85, 0x92cae3aa, 0x11988fe5};
static __device__ __constant__ uint32_t FP_M0 = 0xfffcfffd;

struct fr_params {
    static constexpr int n = 8;
    static constexpr int bits = 255;
    // p[0] = 1, p[1] = 2^32 - 1: mont_t::mul_lo_special turns those two products into adds
    static constexpr uint32_t mod0 = 0x00000001, mod1 = 0xffffffff;
    // operator* uses it: faster than the generic row, bit-identical (kernels/ff/PERF-NOTES.md);
    // false restores the generic row everywhere (NTT, setup, MSM)
    static constexpr bool mul_lo_special = true;
    static constexpr bool mul_karatsuba = false;
    static CUZK_DEV uint32_t mod(int i) { return FR_MOD[i]; }
    static CUZK_DEV uint32_t m0() { return FR_M0; }
    static CUZK_DEV uint32_t one(int i) { return FR_ONE[i]; }
    static CUZK_DEV uint32_t rr(int i) { return FR_RR[i]; }
};
struct fp_params {
    static constexpr int n = 12;
    static constexpr int bits = 381;
    static constexpr bool mul_lo_special = false;
    // operator* is the Karatsuba product with even/odd-split half products (mul_karatsuba):
    // the fastest Fp multiply on its own. The curve formulas do not use it: ec/ec_field.cuh gives
    // them the CIOS rows, which fit the MSM kernels' register caps (Karatsuba there measured
    // slower: kernels/ff/PERF-NOTES.md).
    static constexpr bool mul_karatsuba = true;
    static CUZK_DEV uint32_t mod(int i) { return FP_MOD[i]; }
    static CUZK_DEV uint32_t m0() { return FP_M0; }
    static CUZK_DEV uint32_t one(int i) { return FP_ONE[i]; }
    static CUZK_DEV uint32_t rr(int i) { return FP_RR[i]; }
};

} // namespace bls12_381

using fr_t = mont_t<bls12_381::fr_params>;
using fp_t = mont_t<bls12_381::fp_params>;
using fp2_t = fp2x_t<fp_t>;

static_assert(sizeof(fr_t) == 32, "fr_t layout");
static_assert(sizeof(fp_t) == 48, "fp_t layout");
static_assert(sizeof(fp2_t) == 96, "fp2_t layout");

} // namespace cuzk
