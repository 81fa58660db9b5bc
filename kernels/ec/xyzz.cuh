// cuzk: extended Jacobian "XYZZ" coordinates for a = 0 curves: x = X/ZZ, y = Y/ZZZ with
// ZZ^3 = ZZZ^2; the identity is ZZ = 0 (all four limbs sets are zeroed by inf()).
// Formulas: hyperelliptic.org EFD g1p/shortw/xyzz: add-2008-s (12M + 2S), dbl-2008-s-1
// (6M + 3S), madd-2008-s (8M + 2S), mdbl-2008-s-1 (4M + 3S); the structure follows sppark's
// ec/xyzz_t.hpp (ideas, not code). Canonical field elements in and out.
#pragma once

#include "affine.cuh"
#include "jacobian.cuh"

namespace cuzk {

template <class F>
struct __align__(16) xyzz_t {
    F X, Y, ZZ, ZZZ;

    static CUZK_DEV xyzz_t inf() { return {F::zero(), F::zero(), F::zero(), F::zero()}; }
    CUZK_DEV bool is_inf() const { return ZZ.is_zero(); }
    static CUZK_DEV xyzz_t from_affine(const affine_t<F>& a)
    {
        if (a.is_inf()) return inf();
        return {a.x, a.y, F::one(), F::one()};
    }
    // from Jacobian (X, Y, Z): ZZ = Z^2, ZZZ = Z^3 (identity Z = 0 -> ZZ = 0). 1M + 1S.
    static CUZK_DEV xyzz_t from_jacobian(const jacobian_t<F>& j)
    {
        F zz = ec_sqr(j.Z);
        return {j.X, j.Y, zz, ec_mul(zz, j.Z)};
    }
    CUZK_DEV xyzz_t operator-() const { return {X, -Y, ZZ, ZZZ}; }
    CUZK_DEV xyzz_t cneg(bool flag) const { return {X, Y.cneg(flag), ZZ, ZZZ}; }

    // Jacobian (X*ZZ, Y*ZZZ, ZZ): with ZZ = z^2, ZZZ = z^3, X*ZZ/ZZ^2 = X/ZZ and
    // Y*ZZZ/ZZ^3 = Y*ZZZ/ZZZ^2 = Y/ZZZ. Identity -> Z = 0. 2M.
    CUZK_DEV jacobian_t<F> to_jacobian() const { return {ec_mul(X, ZZ), ec_mul(Y, ZZZ), ZZ}; }

    // dbl-2008-s-1; the identity maps to ZZ3 = V*0 = 0 with no branch
    CUZK_DEV xyzz_t dbl() const
    {
        F U = Y.dbl();
        F V = ec_sqr(U);
        F W = ec_mul(U, V);
        F S = ec_mul(X, V);
        F M = ec_sqr(X);
        M = M.dbl() + M;
        xyzz_t r;
        r.X = ec_sqr(M) - S.dbl();
        r.Y = ec_mul(M, S - r.X) - ec_mul(W, Y);
        r.ZZ = ec_mul(V, ZZ);
        r.ZZZ = ec_mul(W, ZZZ);
        return r;
    }

    // mdbl-2008-s-1: 2*(x, y) for an affine, non-identity point
    static CUZK_DEV xyzz_t dbl_affine(const affine_t<F>& a)
    {
        F U = a.y.dbl();
        F V = ec_sqr(U);
        F W = ec_mul(U, V);
        F S = ec_mul(a.x, V);
        F M = ec_sqr(a.x);
        M = M.dbl() + M;
        xyzz_t r;
        r.X = ec_sqr(M) - S.dbl();
        r.Y = ec_mul(M, S - r.X) - ec_mul(W, a.y);
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }

    // add-2008-s
    CUZK_DEV xyzz_t add(const xyzz_t& q) const
    {
        if (is_inf()) return q;
        if (q.is_inf()) return *this;
        F U1 = ec_mul(X, q.ZZ);
        F S1 = ec_mul(Y, q.ZZZ);
        F P = ec_mul(q.X, ZZ) - U1;
        F R = ec_mul(q.Y, ZZZ) - S1;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl();
            return inf();
        }
        F PP = ec_sqr(P);
        F PPP = ec_mul(P, PP);
        F Q = ec_mul(U1, PP);
        xyzz_t r;
        r.X = ec_sqr(R) - PPP - Q.dbl();
        r.Y = ec_mul(R, Q - r.X) - ec_mul(S1, PPP);
        r.ZZ = ec_mul(ec_mul(ZZ, q.ZZ), PP);
        r.ZZZ = ec_mul(ec_mul(ZZZ, q.ZZZ), PPP);
        return r;
    }

    // madd-2008-s, q affine ((0,0) = identity)
    CUZK_DEV xyzz_t add_affine(const affine_t<F>& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F P = ec_mul(q.x, ZZ) - X;
        F R = ec_mul(q.y, ZZZ) - Y;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl_affine(q);
            return inf();
        }
        F PP = ec_sqr(P);
        F PPP = ec_mul(P, PP);
        F Q = ec_mul(X, PP);
        xyzz_t r;
        r.X = ec_sqr(R) - PPP - Q.dbl();
        r.Y = ec_mul(R, Q - r.X) - ec_mul(Y, PPP);
        r.ZZ = ec_mul(ZZ, PP);
        r.ZZZ = ec_mul(ZZZ, PPP);
        return r;
    }

    // The same madd-2008-s as five paired products (ec_mul2 / ec_sqr2): small code, two
    // independent multiplications in flight per call. Same result as add_affine.
    CUZK_DEV xyzz_t add_affine_paired(const affine_t<F>& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        const ec_pair<F> us = ec_mul2(q.x, ZZ, q.y, ZZZ);
        const F P = us.a - X;
        const F R = us.b - Y;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl_affine_call(q);
            return inf();
        }
        const ec_pair<F> sq = ec_sqr2(P, R);              // PP, R^2
        const ec_pair<F> pq = ec_mul2(P, sq.a, X, sq.a);   // PPP, Q
        xyzz_t r;
        r.X = sq.b - pq.a - pq.b.dbl();
        const ec_pair<F> zz = ec_mul2(ZZ, sq.a, ZZZ, pq.a);
        const ec_pair<F> yy = ec_mul2(R, pq.b - r.X, Y, pq.a);
        r.Y = yy.a - yy.b;
        r.ZZ = zz.a;
        r.ZZZ = zz.b;
        return r;
    }
    // Rare (q equal to the accumulator): out of line so that add_affine_paired stays small.
    static __device__ __noinline__ xyzz_t dbl_affine_call(const affine_t<F> q) { return dbl_affine(q); }
};

} // namespace cuzk
