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
        F zz = j.Z.sqr();
        return {j.X, j.Y, zz, zz * j.Z};
    }
    CUZK_DEV xyzz_t operator-() const { return {X, -Y, ZZ, ZZZ}; }
    CUZK_DEV xyzz_t cneg(bool flag) const { return {X, Y.cneg(flag), ZZ, ZZZ}; }

    // Jacobian (X*ZZ, Y*ZZZ, ZZ): with ZZ = z^2, ZZZ = z^3, X*ZZ/ZZ^2 = X/ZZ and
    // Y*ZZZ/ZZ^3 = Y*ZZZ/ZZZ^2 = Y/ZZZ. Identity -> Z = 0. 2M.
    CUZK_DEV jacobian_t<F> to_jacobian() const { return {X * ZZ, Y * ZZZ, ZZ}; }

    // dbl-2008-s-1; the identity maps to ZZ3 = V*0 = 0 with no branch
    CUZK_DEV xyzz_t dbl() const
    {
        F U = Y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = X * V;
        F M = X.sqr();
        M = M.dbl() + M;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * Y;
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }

    // mdbl-2008-s-1: 2*(x, y) for an affine, non-identity point
    static CUZK_DEV xyzz_t dbl_affine(const affine_t<F>& a)
    {
        F U = a.y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = a.x * V;
        F M = a.x.sqr();
        M = M.dbl() + M;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * a.y;
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }

    // add-2008-s
    CUZK_DEV xyzz_t add(const xyzz_t& q) const
    {
        if (is_inf()) return q;
        if (q.is_inf()) return *this;
        F U1 = X * q.ZZ;
        F S1 = Y * q.ZZZ;
        F P = q.X * ZZ - U1;
        F R = q.Y * ZZZ - S1;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl();
            return inf();
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = U1 * PP;
        xyzz_t r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - S1 * PPP;
        r.ZZ = ZZ * q.ZZ * PP;
        r.ZZZ = ZZZ * q.ZZZ * PPP;
        return r;
    }

    // madd-2008-s, q affine ((0,0) = identity)
    CUZK_DEV xyzz_t add_affine(const affine_t<F>& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F P = q.x * ZZ - X;
        F R = q.y * ZZZ - Y;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl_affine(q);
            return inf();
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = X * PP;
        xyzz_t r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - Y * PPP;
        r.ZZ = ZZ * PP;
        r.ZZZ = ZZZ * PPP;
        return r;
    }
};

} // namespace cuzk
