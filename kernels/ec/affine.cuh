// cuzk: affine short-Weierstrass point (x, y); the identity is (0, 0), blst's convention.
#pragma once

#include "../ff/mont.cuh"
#include "ec_field.cuh"

namespace cuzk {

template <class F>
struct __align__(16) affine_t {
    F x, y;
    static CUZK_DEV affine_t inf() { return {F::zero(), F::zero()}; }
    CUZK_DEV bool is_inf() const { return x.is_zero() && y.is_zero(); }
    CUZK_DEV affine_t operator-() const { return {x, -y}; }   // -(0,0) = (0,0)
    CUZK_DEV affine_t cneg(bool flag) const { return {x, y.cneg(flag)}; }
};

} // namespace cuzk
