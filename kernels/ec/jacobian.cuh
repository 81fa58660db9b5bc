// cuzk: Jacobian coordinates (X, Y, Z) for a = 0 curves: x = X/Z^2, y = Y/Z^3; identity: Z = 0.
// Same representation as blst's blst_p1 / blst_p2. Formulas (hyperelliptic.org EFD, g1p/shortw/jacobian-0):
//   dbl-2009-l (2M + 5S), add-2007-bl (11M + 5S), madd-2007-bl (7M + 4S).
// Inputs and outputs are canonical field elements; special cases (identity operands, P == Q,
// P == -Q) are handled by branches, which are rare and uniform in practice.
#pragma once

#include "affine.cuh"

namespace cuzk {

template <class F>
struct __align__(16) jacobian_t {
    F X, Y, Z;

    static CUZK_DEV jacobian_t inf() { return {F::zero(), F::zero(), F::zero()}; }
    CUZK_DEV bool is_inf() const { return Z.is_zero(); }
    static CUZK_DEV jacobian_t from_affine(const affine_t<F>& a)
    {
        if (a.is_inf()) return inf();
        return {a.x, a.y, F::one()};
    }
    CUZK_DEV jacobian_t operator-() const { return {X, -Y, Z}; }

    // dbl-2009-l; the identity maps to Z3 = 0 with no branch
    CUZK_DEV jacobian_t dbl() const
    {
        F A = ec_sqr(X);
        F B = ec_sqr(Y);
        F C = ec_sqr(B);
        F D = (ec_sqr(X + B) - A - C).dbl();
        F E = A.dbl() + A;
        F Fv = ec_sqr(E);
        jacobian_t r;
        r.X = Fv - D.dbl();
        r.Y = ec_mul(E, D - r.X) - C.dbl().dbl().dbl();
        r.Z = ec_mul(Y, Z).dbl();
        return r;
    }

    // add-2007-bl
    CUZK_DEV jacobian_t add(const jacobian_t& q) const
    {
        if (is_inf()) return q;
        if (q.is_inf()) return *this;
        F Z1Z1 = ec_sqr(Z);
        F Z2Z2 = ec_sqr(q.Z);
        F U1 = ec_mul(X, Z2Z2);
        F U2 = ec_mul(q.X, Z1Z1);
        F S1 = ec_mul(ec_mul(Y, q.Z), Z2Z2);
        F S2 = ec_mul(ec_mul(q.Y, Z), Z1Z1);
        F H = U2 - U1;
        F rr = S2 - S1;
        if (H.is_zero()) {
            if (rr.is_zero()) return dbl();
            return inf();
        }
        F I = ec_sqr(H.dbl());
        F J = ec_mul(H, I);
        rr = rr.dbl();
        F V = ec_mul(U1, I);
        jacobian_t r;
        r.X = ec_sqr(rr) - J - V.dbl();
        r.Y = ec_mul(rr, V - r.X) - ec_mul(S1, J).dbl();
        r.Z = ec_mul(ec_sqr(Z + q.Z) - Z1Z1 - Z2Z2, H);
        return r;
    }

    // madd-2007-bl (q affine, (0,0) = identity)
    CUZK_DEV jacobian_t add_affine(const affine_t<F>& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F Z1Z1 = ec_sqr(Z);
        F U2 = ec_mul(q.x, Z1Z1);
        F S2 = ec_mul(ec_mul(q.y, Z), Z1Z1);
        F H = U2 - X;
        F rr = S2 - Y;
        if (H.is_zero()) {
            if (rr.is_zero()) return dbl();
            return inf();
        }
        F HH = ec_sqr(H);
        F I = HH.dbl().dbl();
        F J = ec_mul(H, I);
        rr = rr.dbl();
        F V = ec_mul(X, I);
        jacobian_t r;
        r.X = ec_sqr(rr) - J - V.dbl();
        r.Y = ec_mul(rr, V - r.X) - ec_mul(Y, J).dbl();
        r.Z = ec_sqr(Z + H) - Z1Z1 - HH;
        return r;
    }
};

} // namespace cuzk
