// cuzk: quadratic extension F[u]/(u^2 + 1) over a mont_t base field (BLS12-381's Fp2).
//
// mul: Karatsuba with lazy reduction (3 wide n x n products, 2 Montgomery reductions):
//   c0 = a0 b0 - a1 b1           (2n limbs; if negative, + p*R, making it lie in [0, pR))
//   c1 = (a0+a1)(b0+b1) - a0 b0 - a1 b1 = a0 b1 + a1 b0 < 2p^2 < pR   (needs 2p < R)
//   each reduced with redc_wide (requires X < pR). 3*2n^2 + 2*(2n^2+n) IMAD instead of
//   3*(4n^2+n) for three Montgomery multiplications (1464 vs 1764 for Fp).
// sqr: c0 = (a0+a1)(a0-a1), c1 = 2 a0 a1, both as wide products + redc_wide (< 2p^2 < pR).
// All inputs canonical (< p per coefficient), all outputs canonical.
#pragma once

#include "mont.cuh"

namespace cuzk {

template <class F>
struct __align__(16) fp2x_t {
    static constexpr int n = F::n;
    F c0, c1;

    static CUZK_DEV fp2x_t zero() { return {F::zero(), F::zero()}; }
    static CUZK_DEV fp2x_t one() { return {F::one(), F::zero()}; }
    CUZK_DEV bool is_zero() const
    {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < n; i++) acc |= c0.v[i] | c1.v[i];
        return acc == 0;
    }
    friend CUZK_DEV bool operator==(const fp2x_t& a, const fp2x_t& b)
    {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < n; i++) acc |= (a.c0.v[i] ^ b.c0.v[i]) | (a.c1.v[i] ^ b.c1.v[i]);
        return acc == 0;
    }
    friend CUZK_DEV bool operator!=(const fp2x_t& a, const fp2x_t& b) { return !(a == b); }

    friend CUZK_DEV fp2x_t operator+(const fp2x_t& a, const fp2x_t& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
    friend CUZK_DEV fp2x_t operator-(const fp2x_t& a, const fp2x_t& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
    CUZK_DEV fp2x_t operator-() const { return {-c0, -c1}; }
    CUZK_DEV fp2x_t& operator+=(const fp2x_t& b) { return *this = *this + b; }
    CUZK_DEV fp2x_t& operator-=(const fp2x_t& b) { return *this = *this - b; }
    CUZK_DEV fp2x_t dbl() const { return {c0.dbl(), c1.dbl()}; }
    CUZK_DEV fp2x_t conj() const { return {c0, -c1}; }
    CUZK_DEV fp2x_t cneg(bool flag) const { return {c0.cneg(flag), c1.cneg(flag)}; }
    // multiply by the base-field element s
    CUZK_DEV fp2x_t mul_by_fp(const F& s) const { return {c0 * s, c1 * s}; }
    // multiply by (1 + u): (c0 - c1) + (c0 + c1) u
    CUZK_DEV fp2x_t mul_by_1_plus_u() const { return {c0 - c1, c0 + c1}; }

    // Wide products with F::mul_wide_split (no register copies, more live registers).
    static CUZK_DEV void wide_(uint32_t w[2 * n], const F& a, const F& b) { F::mul_wide_split(w, a, b); }
    static CUZK_DEV fp2x_t mul_(const fp2x_t& a, const fp2x_t& b)
    {
        uint32_t s[2 * n], w0[2 * n], w1[2 * n];
        // s = (a0 + a1)(b0 + b1); each sum < 2p < 2^(32n)
        wide_(s, F::add_nored(a.c0, a.c1), F::add_nored(b.c0, b.c1));
        wide_(w0, a.c0, b.c0);
        // s -= a0 b0 (no borrow: s >= a0b0 + a1b1)
        s[0] = ptx::sub_cc(s[0], w0[0]);
#pragma unroll
        for (int i = 1; i < 2 * n - 1; i++) s[i] = ptx::subc_cc(s[i], w0[i]);
        s[2 * n - 1] = ptx::subc(s[2 * n - 1], w0[2 * n - 1]);
        wide_(w1, a.c1, b.c1);
        s[0] = ptx::sub_cc(s[0], w1[0]);
#pragma unroll
        for (int i = 1; i < 2 * n - 1; i++) s[i] = ptx::subc_cc(s[i], w1[i]);
        s[2 * n - 1] = ptx::subc(s[2 * n - 1], w1[2 * n - 1]);
        // w0 = a0 b0 - a1 b1 (+ p*R if it borrowed)
        w0[0] = ptx::sub_cc(w0[0], w1[0]);
#pragma unroll
        for (int i = 1; i < 2 * n; i++) w0[i] = ptx::subc_cc(w0[i], w1[i]);
        uint32_t mask = ptx::borrow_mask();
        w0[n] = ptx::add_cc(w0[n], F::params::mod(0) & mask);
#pragma unroll
        for (int i = 1; i < n - 1; i++) w0[n + i] = ptx::addc_cc(w0[n + i], F::params::mod(i) & mask);
        w0[2 * n - 1] = ptx::addc(w0[2 * n - 1], F::params::mod(n - 1) & mask);
        fp2x_t r;
        r.c0 = F::redc_wide(w0);
        r.c1 = F::redc_wide(s);
        return r;
    }
    // The split wide products (faster than mul_wide's fewer live registers: PERF-NOTES).
    friend CUZK_DEV fp2x_t operator*(const fp2x_t& a, const fp2x_t& b) { return mul_(a, b); }
    // = operator* (the name the field benches' `_split` rows use)
    static CUZK_DEV fp2x_t mul_split(const fp2x_t& a, const fp2x_t& b) { return mul_(a, b); }
    CUZK_DEV fp2x_t& operator*=(const fp2x_t& b) { return *this = *this * b; }

    CUZK_DEV fp2x_t sqr() const
    {
        uint32_t w[2 * n];
        fp2x_t r;
        // (a0 + a1) < 2p unreduced, (a0 - a1) < p: product < 2p^2 < pR
        F::mul_wide(w, F::add_nored(c0, c1), c0 - c1);
        r.c0 = F::redc_wide(w);
        // 2 a0 < 2p unreduced: 2 a0 a1 < 2p^2 < pR
        F::mul_wide(w, F::add_nored(c0, c0), c1);
        r.c1 = F::redc_wide(w);
        return r;
    }
};

template <class F> CUZK_DEV fp2x_t<F> sqr(const fp2x_t<F>& a) { return a.sqr(); }

} // namespace cuzk
