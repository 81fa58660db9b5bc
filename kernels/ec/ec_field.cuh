// cuzk: the multiplication / squaring entry points the curve formulas use.
//   ec_mul(a, b), ec_sqr(a): for the base field (fp_t, fr_t) these are the inline Montgomery ops,
//   the product always the CIOS rows (mont_t::mul_rows, whatever operator* is: Fp's Karatsuba
//   operator* needs more live registers than the MSM kernels' caps leave);
//   for Fp2 they are out-of-line (__noinline__) calls, which keeps G2 formulas (~15 Fp2
//   multiplications each, ~1500 instructions per multiplication) small enough to compile quickly
//   and to fit in registers (an inlined G2 addition spills: 255 registers are not enough for the
//   compiler's interleaving).
//   ec_mul2, ec_sqr2 (base field only): two independent products in one out-of-line function,
//   so ptxas interleaves their carry chains (two-way instruction-level parallelism) while the
//   caller's code stays small: the paired mixed addition (xyzz_t::add_affine_paired, G1) is
//   five such calls.
#pragma once

#include "../ff/mont.cuh"
#include "../ff/fp2.cuh"

namespace cuzk {

template <class P> CUZK_DEV mont_t<P> ec_mul(const mont_t<P>& a, const mont_t<P>& b) { return mont_t<P>::mul_rows(a, b); }
template <class P> CUZK_DEV mont_t<P> ec_sqr(const mont_t<P>& a) { return a.sqr(); }

template <class F> struct ec_pair {
    F a, b;
};
template <class P>
__device__ __noinline__ ec_pair<mont_t<P>> ec_mul2(const mont_t<P> a0, const mont_t<P> b0, const mont_t<P> a1,
                                                  const mont_t<P> b1)
{
    return {mont_t<P>::mul_rows(a0, b0), mont_t<P>::mul_rows(a1, b1)};
}
template <class P> __device__ __noinline__ ec_pair<mont_t<P>> ec_sqr2(const mont_t<P> a0, const mont_t<P> a1)
{
    return {a0.sqr(), a1.sqr()};
}

template <class F> __device__ __noinline__ fp2x_t<F> fp2_mul_call(const fp2x_t<F> a, const fp2x_t<F> b) { return a * b; }
template <class F> __device__ __noinline__ fp2x_t<F> fp2_sqr_call(const fp2x_t<F> a) { return a.sqr(); }
template <class F> CUZK_DEV fp2x_t<F> ec_mul(const fp2x_t<F>& a, const fp2x_t<F>& b) { return fp2_mul_call(a, b); }
template <class F> CUZK_DEV fp2x_t<F> ec_sqr(const fp2x_t<F>& a) { return fp2_sqr_call(a); }

} // namespace cuzk
