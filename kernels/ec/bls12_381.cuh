// cuzk: BLS12-381 curve point types.
//   G1: y^2 = x^3 + 4 over Fp;   G2: y^2 = x^3 + 4(u + 1) over Fp2.
// Layouts match blst: g1_affine_t = blst_p1_affine (24 u32), g1_jacobian_t = blst_p1 (36 u32),
// g2_affine_t = blst_p2_affine, g2_jacobian_t = blst_p2. g*_xyzz_t is device-only (X, Y, ZZ, ZZZ).
#pragma once

#include "../ff/bls12_381.cuh"
#include "affine.cuh"
#include "jacobian.cuh"
#include "xyzz.cuh"

namespace cuzk {

using g1_affine_t = affine_t<fp_t>;
using g1_jacobian_t = jacobian_t<fp_t>;
using g1_xyzz_t = xyzz_t<fp_t>;
using g2_affine_t = affine_t<fp2_t>;
using g2_jacobian_t = jacobian_t<fp2_t>;
using g2_xyzz_t = xyzz_t<fp2_t>;

static_assert(sizeof(g1_affine_t) == 96, "g1 affine layout");
static_assert(sizeof(g1_jacobian_t) == 144, "g1 jacobian layout");
static_assert(sizeof(g2_affine_t) == 192, "g2 affine layout");
static_assert(sizeof(g2_jacobian_t) == 288, "g2 jacobian layout");

} // namespace cuzk
