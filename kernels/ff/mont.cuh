// cuzk: Montgomery arithmetic over N 32-bit limbs (little-endian), for moduli with at least one
// spare top bit (p < 2^(32N-1)); BLS12-381's Fr (255 bits, N=8) and Fp (381 bits, N=12) qualify.
//
// Design (ideas from supranational/sppark ff/mont_t.cuh, code written for cuzk):
//  * every limb loop is fully unrolled (N is a template constant) so the element lives in
//    registers; no run-time indexing, no local memory;
//  * products are accumulated with PTX carry chains (mad.lo.cc / madc.hi.cc); a row a*b_i is
//    split into two chains, the even limbs a[0],a[2],.. (writing positions j, j+1 consecutively)
//    and the odd limbs a[1],a[3],.., so that each chain alternates lo/hi without gaps;
//  * multiplication is CIOS: one accumulator t[0..N], per row t += a*b_i, m = t[0]*M0,
//    t += m*p, t >>= 32 (the shift is a register rename);
//  * squaring computes the 2N-limb square (cross products once, doubled, plus the diagonal)
//    and reduces it with redc_wide (lo*R^-1 via N reduction-only rows, plus hi);
//  * the wide (unreduced 2N-limb) product and redc_wide are public so that Fp2 can use lazy
//    reduction (3 wide products, 2 reductions).
//
// Reduction guarantees (p < 2^(32N-1), R = 2^(32N)):
//  * every public operation takes canonical inputs (< p) and returns canonical outputs (< p);
//  * mul: T_{i+1} = (T_i + a*b_i + m*p)/2^32 < 2p whenever a < p, T_i < 2p; before the shift
//    T_i + a*b_i + m*p < 2p + 2^33 p < 2^(32N+32), so N+1 accumulator limbs never overflow;
//    the result (< 2p) gets one conditional subtraction;
//  * redc_wide(X) requires X < p*R: lo*R^-1 (reduction rows only) is <= p, hi = floor(X/R) < p,
//    their sum < 2p, one conditional subtraction.
#pragma once

#include <cstdint>
#include "ptx.cuh"

namespace cuzk {

// Even/odd-split wide product of N-limb integers, any even N >= 4 (the scheme is explained at
// mont_t::mul_wide_split, which is this for N = n): no misaligned (lo, hi) pairs, so no register
// copies in SASS; 2N-1 more live registers at the end. Also the half-size products of
// mont_t::mul_karatsuba. 2N^2 IMAD slots. Its row pieces (also those of mont_t's CIOS rows):

// acc[j], acc[j+1] = lo, hi(a[j]*bi), j = 0, 2, .., N-2
template <int N>
CUZK_DEV void mul_n_limbs_(uint32_t* acc, const uint32_t* a, uint32_t bi)
{
#pragma unroll
    for (int j = 0; j < N; j += 2) {
        acc[j] = a[j] * bi;
        acc[j + 1] = __umulhi(a[j], bi);
    }
}
// acc[j], acc[j+1] += lo, hi(a[j]*bi), j = 0, 2, .., N-2, one chain, carry out left in CC
template <int N>
CUZK_DEV void cmad_n_limbs_(uint32_t* acc, const uint32_t* a, uint32_t bi)
{
    ptx::mad_lo_cc(acc[0], a[0], bi);
    ptx::madc_hi_cc(acc[1], a[0], bi);
#pragma unroll
    for (int j = 2; j < N; j += 2) {
        ptx::madc_lo_cc(acc[j], a[j], bi);
        ptx::madc_hi_cc(acc[j + 1], a[j], bi);
    }
}
// acc[0 .. N-2] += lo, hi(a[j]*bi) pairs (j = 0, 2, .., N-2 of a), acc[N-1] = hi of the last
// pair + carry (fresh limb, no carry out: the caller proves it cannot overflow); with lo_fresh
// acc[N-2] is fresh too (= lo of the last pair + carry)
template <int N>
CUZK_DEV void wmad_n_limbs_(uint32_t* acc, const uint32_t* a, uint32_t bi, bool lo_fresh)
{
    ptx::mad_lo_cc(acc[0], a[0], bi);
    ptx::madc_hi_cc(acc[1], a[0], bi);
#pragma unroll
    for (int j = 2; j < N - 2; j += 2) {
        ptx::madc_lo_cc(acc[j], a[j], bi);
        ptx::madc_hi_cc(acc[j + 1], a[j], bi);
    }
    if (lo_fresh)
        acc[N - 2] = ptx::madc_lo_cc_0(a[N - 2], bi);
    else
        ptx::madc_lo_cc(acc[N - 2], a[N - 2], bi);
    acc[N - 1] = ptx::madc_hi_0(a[N - 2], bi);
}
template <int N>
CUZK_DEV void mul_wide_split_limbs(uint32_t* w, const uint32_t* a, const uint32_t* b)
{
    static_assert(N % 2 == 0 && N >= 4, "limb count must be even and >= 4");
    uint32_t* E = w;          // limbs 0 .. 2N-1
    uint32_t O[2 * N - 1];    // O[j] at limb j+1, limbs 1 .. 2N-1
    mul_n_limbs_<N>(E, a, b[0]);
    mul_n_limbs_<N>(O, a + 1, b[0]);
#pragma unroll
    for (int i = 1; i < N; i++) {
        const uint32_t bi = b[i];
        if (i % 2 == 1) {
            // O[i-1 .. i+N-2] += even-k pairs; carry -> O[i+N-1] (fresh)
            cmad_n_limbs_<N>(O + i - 1, a, bi);
            O[i + N - 1] = ptx::carry_out();
            // E[i+1 .. i+N-1] += odd-k pairs, E[i+N] fresh hi (row 1: E[N] is fresh too)
            wmad_n_limbs_<N>(E + i + 1, a + 1, bi, i == 1);
        } else {
            // E[i .. i+N-1] += even-k pairs; carry -> E[i+N] (fresh)
            cmad_n_limbs_<N>(E + i, a, bi);
            E[i + N] = ptx::carry_out();
            // O[i .. i+N-2] += odd-k pairs, O[i+N-1] fresh hi
            wmad_n_limbs_<N>(O + i, a + 1, bi, false);
        }
    }
    // merge: limb k = E[k] + O[k-1], k = 1 .. 2N-1 (the total < 2^(64N): no carry out)
    E[1] = ptx::add_cc(E[1], O[0]);
#pragma unroll
    for (int k = 2; k < 2 * N - 1; k++) E[k] = ptx::addc_cc(E[k], O[k - 1]);
    E[2 * N - 1] = ptx::addc(E[2 * N - 1], O[2 * N - 2]);
}

// P must provide:
//   static constexpr int n;                   number of 32-bit limbs (even, >= 4)
//   static CUZK_DEV uint32_t mod(int i);      modulus limbs
//   static CUZK_DEV uint32_t m0();            -p^-1 mod 2^32
//   static CUZK_DEV uint32_t one(int i);      R mod p (Montgomery one)
//   static CUZK_DEV uint32_t rr(int i);       R^2 mod p (to Montgomery)
//   static constexpr bool mul_karatsuba;      operator* uses mul_karatsuba (else:)
//   static constexpr bool mul_lo_special;     operator* uses mul_lo_special (then also
//   static constexpr uint32_t mod0, mod1;     p[0], p[1], which must be 1, 2^32 - 1)
template <class P>
struct __align__(16) mont_t {
    static constexpr int n = P::n;
    static_assert(n % 2 == 0 && n >= 4, "limb count must be even and >= 4");
    using params = P;

    uint32_t v[n];

    CUZK_DEV uint32_t& operator[](int i) { return v[i]; }
    CUZK_DEV const uint32_t& operator[](int i) const { return v[i]; }

    // ---- constants / predicates ----------------------------------------------------------------
    static CUZK_DEV mont_t zero()
    {
        mont_t r;
#pragma unroll
        for (int i = 0; i < n; i++) r.v[i] = 0;
        return r;
    }
    static CUZK_DEV mont_t one()
    {
        mont_t r;
#pragma unroll
        for (int i = 0; i < n; i++) r.v[i] = P::one(i);
        return r;
    }
    static CUZK_DEV mont_t modulus()
    {
        mont_t r;
#pragma unroll
        for (int i = 0; i < n; i++) r.v[i] = P::mod(i);
        return r;
    }
    CUZK_DEV bool is_zero() const
    {
        uint32_t acc = v[0];
#pragma unroll
        for (int i = 1; i < n; i++) acc |= v[i];
        return acc == 0;
    }
    // equality of canonical representatives
    friend CUZK_DEV bool operator==(const mont_t& a, const mont_t& b)
    {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < n; i++) acc |= a.v[i] ^ b.v[i];
        return acc == 0;
    }
    friend CUZK_DEV bool operator!=(const mont_t& a, const mont_t& b) { return !(a == b); }

    // ---- reduction helpers -----------------------------------------------------------------------
    // x in [0, 2p) -> [0, p)  (branch-free: compute x - p, keep x if that borrowed)
    static CUZK_DEV void final_sub(uint32_t x[n])
    {
        uint32_t d[n];
        d[0] = ptx::sub_cc(x[0], P::mod(0));
#pragma unroll
        for (int i = 1; i < n; i++) d[i] = ptx::subc_cc(x[i], P::mod(i));
        uint32_t borrow = ptx::borrow_mask();
#pragma unroll
        for (int i = 0; i < n; i++) x[i] = borrow ? x[i] : d[i];
    }

    // ---- additive ops (canonical in, canonical out) -------------------------------------------
    friend CUZK_DEV mont_t operator+(const mont_t& a, const mont_t& b)
    {
        mont_t r;
        r.v[0] = ptx::add_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < n; i++) r.v[i] = ptx::addc_cc(a.v[i], b.v[i]);
        // a + b < 2p < 2^(32n): no carry out of the top limb
        final_sub(r.v);
        return r;
    }
    friend CUZK_DEV mont_t operator-(const mont_t& a, const mont_t& b)
    {
        mont_t r;
        r.v[0] = ptx::sub_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < n; i++) r.v[i] = ptx::subc_cc(a.v[i], b.v[i]);
        uint32_t mask = ptx::borrow_mask();   // all ones iff a < b
        r.v[0] = ptx::add_cc(r.v[0], P::mod(0) & mask);
#pragma unroll
        for (int i = 1; i < n - 1; i++) r.v[i] = ptx::addc_cc(r.v[i], P::mod(i) & mask);
        r.v[n - 1] = ptx::addc(r.v[n - 1], P::mod(n - 1) & mask);
        return r;
    }
    CUZK_DEV mont_t operator-() const
    {
        mont_t r;
        r.v[0] = ptx::sub_cc(P::mod(0), v[0]);
#pragma unroll
        for (int i = 1; i < n - 1; i++) r.v[i] = ptx::subc_cc(P::mod(i), v[i]);
        r.v[n - 1] = ptx::subc(P::mod(n - 1), v[n - 1]);
        uint32_t mask = is_zero() ? 0u : ~0u;   // -0 = 0, not p
#pragma unroll
        for (int i = 0; i < n; i++) r.v[i] &= mask;
        return r;
    }
    CUZK_DEV mont_t& operator+=(const mont_t& b) { return *this = *this + b; }
    CUZK_DEV mont_t& operator-=(const mont_t& b) { return *this = *this - b; }
    CUZK_DEV mont_t dbl() const { return *this + *this; }
    // conditional negation (flag uniform or not; branch-free)
    CUZK_DEV mont_t cneg(bool flag) const
    {
        mont_t ng = -*this;
        mont_t r;
#pragma unroll
        for (int i = 0; i < n; i++) r.v[i] = flag ? ng.v[i] : v[i];
        return r;
    }

    // ---- lazy (unreduced) helpers for extension fields; value semantics documented per use ----
    // plain a + b over n limbs, no reduction: caller guarantees a + b < 2^(32n)
    static CUZK_DEV mont_t add_nored(const mont_t& a, const mont_t& b)
    {
        mont_t r;
        r.v[0] = ptx::add_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < n - 1; i++) r.v[i] = ptx::addc_cc(a.v[i], b.v[i]);
        r.v[n - 1] = ptx::addc(a.v[n - 1], b.v[n - 1]);
        return r;
    }

    // ---- wide product: w[0..2n) = a * b (any a, b < 2^(32n)) ------------------------------------
    // Row i adds a*b_i at limb offset i as two chains (even / odd limbs of a). After row i the
    // partial sum is a*(b mod 2^(32(i+1))) < 2^(32(n+i+1)), so nothing carries past limb n+i, and
    // limb n+i is first written in row i. 2n^2 IMAD.
    static CUZK_DEV void mul_wide(uint32_t w[2 * n], const mont_t& a, const mont_t& b)
    {
        // row 0: even limbs assigned, odd limbs accumulated
        uint32_t b0 = b.v[0];
#pragma unroll
        for (int j = 0; j < n; j += 2) {
            w[j] = a.v[j] * b0;
            w[j + 1] = __umulhi(a.v[j], b0);
        }
        ptx::mad_lo_cc(w[1], a.v[1], b0);
#pragma unroll
        for (int j = 1; j < n - 2; j += 2) {
            ptx::madc_hi_cc(w[j + 1], a.v[j], b0);
            ptx::madc_lo_cc(w[j + 2], a.v[j + 2], b0);
        }
        w[n] = ptx::madc_hi_0(a.v[n - 1], b0);

#pragma unroll
        for (int i = 1; i < n; i++) {
            uint32_t bi = b.v[i];
            // odd chain: positions i+1 .. i+n (i+n fresh)
            ptx::mad_lo_cc(w[i + 1], a.v[1], bi);
#pragma unroll
            for (int j = 1; j < n - 2; j += 2) {
                ptx::madc_hi_cc(w[i + j + 1], a.v[j], bi);
                ptx::madc_lo_cc(w[i + j + 2], a.v[j + 2], bi);
            }
            w[i + n] = ptx::madc_hi_0(a.v[n - 1], bi);
            // even chain: positions i .. i+n-1, carry into i+n
            ptx::mad_lo_cc(w[i], a.v[0], bi);
            ptx::madc_hi_cc(w[i + 1], a.v[0], bi);
#pragma unroll
            for (int j = 2; j < n; j += 2) {
                ptx::madc_lo_cc(w[i + j], a.v[j], bi);
                ptx::madc_hi_cc(w[i + j + 1], a.v[j], bi);
            }
            ptx::addc_0(w[i + n]);
        }
    }

    // ---- wide product, even/odd split: w[0..2n) = a * b (any a, b < 2^(32n)) -------------------
    // Same result as mul_wide, no register copies in SASS, but 2n-1 more live registers at the end
    // (the O array): Fp2's three wide products then need ~119 live registers instead of ~96;
    // fp2x_t's product uses it all the same, measured faster (kernels/ff/PERF-NOTES.md).
    // Even/odd split (as operator*): the (lo, hi) pair of a_k*b_i lands at limbs i+k, i+k+1; it
    // goes to E (E[j] at limb j) when i+k is even and to O (O[j] at limb j+1) when i+k is odd, so
    // every pair is an aligned register pair (one IMAD.WIDE, no MOVs). Row i adds two chains of
    // n/2 pairs: i even: E[i..i+n-1] (even k), O[i..i+n-1] (odd k); i odd: O[i-1..i+n-2] (even
    // k), E[i+1..i+n] (odd k); E[i+n] (and in row 1 also E[n]) is fresh. Bounds: after row i each array holds a sub-sum of
    // a*(b mod 2^(32(i+1))) < 2^(32(n+i+1)), so nothing carries past limb n+i (E[n+i], O[n+i-1]);
    // the chain that ends below limb n+i materialises its carry in the fresh limb above it, the
    // other one ends with a fresh hi (madc_hi_0). One (2n-1)-limb merge add at the end.
    // 2n^2 IMAD slots + (n-1) carry adds + (2n-1) merge adds.
    static CUZK_DEV void mul_wide_split(uint32_t w[2 * n], const mont_t& a, const mont_t& b)
    {
        mul_wide_split_limbs<n>(w, a.v, b.v);
    }

    // ---- Karatsuba multiplication (operator* if P::mul_karatsuba: Fp), a, b < p --------------
    // One level of subtractive Karatsuba on the n x n wide product, then a separate Montgomery
    // reduction (redc_wide). With h = n/2, X = 2^(32h), a = a0 + a1 X, b = b0 + b1 X:
    //   L = a0 b0, H = a1 b1, D = |a0 - a1| |b1 - b0|, s = sign((a0 - a1)(b1 - b0)),
    //   mid = a0 b1 + a1 b0 = L + H + s D,   a b = L + mid X + H X^2.
    // mid < 2 * 2^(32h) * 2^(32h-1) = 2^(32n) because a1, b1 < 2^(32h-1) (p < 2^(32n-1)), so
    // mid is computed mod 2^(32n) (the carries of L + H and of the negative s D cancel).
    // IMAD slots: 3 h x h wide products = 3n^2/2 (vs 2n^2 for the schoolbook a*b), plus the
    // reduction 2n^2 + n; the extra work (|.|, sign, the mid assembly: ~8n adds/xors) is ALU.
    // Fp (n = 12): 216 + 300 = 516 IMAD slots per multiplication instead of 588.
    static CUZK_DEV void abs_diff_half_(uint32_t* d, const uint32_t* x, const uint32_t* y,
                                        uint32_t& neg)
    {
        constexpr int h = n / 2;
        d[0] = ptx::sub_cc(x[0], y[0]);
#pragma unroll
        for (int i = 1; i < h; i++) d[i] = ptx::subc_cc(x[i], y[i]);
        neg = ptx::borrow_mask();   // all ones iff x < y
        // |x - y| = (d ^ neg) - neg: subtracting the all-ones h-limb number adds 1
#pragma unroll
        for (int i = 0; i < h; i++) d[i] ^= neg;
        d[0] = ptx::sub_cc(d[0], neg);
#pragma unroll
        for (int i = 1; i < h - 1; i++) d[i] = ptx::subc_cc(d[i], neg);
        d[h - 1] = ptx::subc(d[h - 1], neg);
    }
    // The half products with mul_wide_split_limbs (no MOVs; the plain-row half products measured
    // slower).
    static CUZK_DEV void mul_wide_karatsuba(uint32_t w[2 * n], const mont_t& a, const mont_t& b)
    {
        constexpr int h = n / 2;
        uint32_t da[h], db[h], d[n];
        uint32_t na, nb;
        abs_diff_half_(da, a.v, a.v + h, na);   // |a0 - a1|, a0 < a1
        abs_diff_half_(db, b.v + h, b.v, nb);   // |b1 - b0|, b1 < b0
        const uint32_t s = na ^ nb;             // all ones iff (a0 - a1)(b1 - b0) < 0
        mul_wide_split_limbs<h>(w, a.v, b.v);              // L -> w[0 .. n)
        mul_wide_split_limbs<h>(w + n, a.v + h, b.v + h);  // H -> w[n .. 2n)
        mul_wide_split_limbs<h>(d, da, db);                // D
        // mid = L + H + ((D ^ s) + (s & 1))  mod 2^(32n)
        uint32_t mid[n];
        mid[0] = ptx::add_cc(w[0], w[n]);
#pragma unroll
        for (int i = 1; i < n; i++) mid[i] = ptx::addc_cc(w[i], w[n + i]);
        (void)ptx::add_cc(s, s);   // CC = s & 1
#pragma unroll
        for (int i = 0; i < n - 1; i++) mid[i] = ptx::addc_cc(mid[i], d[i] ^ s);
        mid[n - 1] = ptx::addc(mid[n - 1], d[n - 1] ^ s);
        // w += mid * X (a*b < 2^(64n): no carry out of the top limb)
        w[h] = ptx::add_cc(w[h], mid[0]);
#pragma unroll
        for (int i = 1; i < n; i++) w[h + i] = ptx::addc_cc(w[h + i], mid[i]);
#pragma unroll
        for (int i = n + h; i < 2 * n - 1; i++) ptx::addc_0_cc(w[i]);
        ptx::addc_0(w[2 * n - 1]);
    }
    static CUZK_DEV mont_t mul_karatsuba(const mont_t& a, const mont_t& b)
    {
        uint32_t w[2 * n];
        mul_wide_karatsuba(w, a, b);
        return redc_wide(w);   // a*b < p^2 < pR
    }

    // ---- wide square: w[0..2n) = a^2 (any a < 2^(32n)); n^2 + n IMAD -----------------------------
    static CUZK_DEV void sqr_wide(uint32_t w[2 * n], const mont_t& a)
    {
        // cross products S = sum_{i<j} a_i a_j 2^(32(i+j)) into w[1..2n-2].
        // Row i, terms j = i+1..n-1 at positions i+j (lo), i+j+1 (hi), split by parity of j-i-1:
        // chain A (j = i+1, i+3, ..) and chain B (j = i+2, i+4, ..). The partial sum after row i
        // is < 2^(32(n+i+1)); limb n+i is first written in row i, by the chain holding j = n-1.
        {
            // row 0: chain A (odd j) assigned, chain B (even j >= 2) accumulated
            uint32_t a0 = a.v[0];
#pragma unroll
            for (int j = 1; j < n; j += 2) {
                w[j] = a.v[j] * a0;
                w[j + 1] = __umulhi(a.v[j], a0);
            }
            ptx::mad_lo_cc(w[2], a.v[2], a0);
            ptx::madc_hi_cc(w[3], a.v[2], a0);
#pragma unroll
            for (int j = 4; j < n; j += 2) {
                ptx::madc_lo_cc(w[j], a.v[j], a0);
                ptx::madc_hi_cc(w[j + 1], a.v[j], a0);
            }
            ptx::addc_0(w[n]);
        }
#pragma unroll
        for (int i = 1; i < n - 1; i++) {
            uint32_t ai = a.v[i];
            // first chain: the one containing j = n-1, i.e. j = n-1, n-3, .. >= i+1 (ascending).
            // (n-1) - (i+1) = n-2-i; it is chain A iff i is even.
            const int jf = (i % 2 == 0) ? i + 1 : i + 2;   // first j of that chain
            // second chain: the other parity, ends at j = n-2, position i+n-1, carry into i+n
            const int js = (i % 2 == 0) ? i + 2 : i + 1;
            ptx::mad_lo_cc(w[i + jf], a.v[jf], ai);
#pragma unroll
            for (int j = jf; j < n - 1; j += 2) {
                ptx::madc_hi_cc(w[i + j + 1], a.v[j], ai);
                ptx::madc_lo_cc(w[i + j + 2], a.v[j + 2], ai);
            }
            w[i + n] = ptx::madc_hi_0(a.v[n - 1], ai);
            if (js <= n - 2) {
                ptx::mad_lo_cc(w[i + js], a.v[js], ai);
                ptx::madc_hi_cc(w[i + js + 1], a.v[js], ai);
#pragma unroll
                for (int j = js + 2; j <= n - 2; j += 2) {
                    ptx::madc_lo_cc(w[i + j], a.v[j], ai);
                    ptx::madc_hi_cc(w[i + j + 1], a.v[j], ai);
                }
                ptx::addc_0(w[i + n]);
            }
        }
        // double: w[0] = 0 and w[2n-1] = 0 so far; 2S < 2^(64n)
        w[2 * n - 1] = w[2 * n - 2] >> 31;
#pragma unroll
        for (int k = 2 * n - 2; k >= 2; k--) w[k] = __funnelshift_l(w[k - 1], w[k], 1);
        w[1] = w[1] << 1;
        // diagonal a_i^2 at positions 2i, 2i+1; the total a^2 < 2^(64n): no carry out
        w[0] = a.v[0] * a.v[0];
        ptx::mad_hi_cc(w[1], a.v[0], a.v[0]);
#pragma unroll
        for (int i = 1; i < n - 1; i++) {
            ptx::madc_lo_cc(w[2 * i], a.v[i], a.v[i]);
            ptx::madc_hi_cc(w[2 * i + 1], a.v[i], a.v[i]);
        }
        ptx::madc_lo_cc(w[2 * n - 2], a.v[n - 1], a.v[n - 1]);
        ptx::madc_hi(w[2 * n - 1], a.v[n - 1], a.v[n - 1]);
    }

    // ---- reduction-only rows: t <- t * R^-1 mod p, result in [0, p] (not reduced) -------------
    // n rows of m = t0*M0; t = (t + m*p) >> 32. With t < R: (t + m p)/2^32 < R/2^32 + p, and after
    // n rows t_final = (t + M p)/R < 1 + p. 2n^2 + n IMAD.
    // Same even/odd split as operator* (see there): no one-limb shift, so no MOVs in SASS.
    static CUZK_DEV void redc_row_(uint32_t* even, uint32_t* odd, const uint32_t* mod, bool first)
    {
        if (first) {
            uint32_t m = even[0] * P::m0();
            mul_n_(odd, mod + 1, m);
            cmad_n_(even, mod, m);
        } else {
            // fold the old E[1] (now at limb 0) into E[0]; its carry enters O[0] via the shift
            even[0] = ptx::add_cc(even[0], odd[1]);
            uint32_t m = even[0] * P::m0();   // plain multiply: leaves CC alone
            madc_n_rshift_(odd, mod + 1, m);
            cmad_n_(even, mod, m);
        }
        ptx::addc_0(odd[n - 1]);
    }
    static CUZK_DEV void redc_rows(uint32_t t[n])
    {
        uint32_t mod[n];
#pragma unroll
        for (int i = 0; i < n; i++) mod[i] = P::mod(i);
        uint32_t odd[n];
#pragma unroll
        for (int i = 0; i < n; i += 2) {
            redc_row_(t, odd, mod, i == 0);
            redc_row_(odd, t, mod, false);
        }
        // merge: limb k = t[k] + odd[k+1] (odd[0] is 0 after the last row)
        t[0] = ptx::add_cc(t[0], odd[1]);
#pragma unroll
        for (int k = 1; k < n - 1; k++) t[k] = ptx::addc_cc(t[k], odd[k + 1]);
        ptx::addc_0(t[n - 1]);
    }

    // X = w[0..2n) < p*R  ->  X * R^-1 mod p, canonical
    static CUZK_DEV mont_t redc_wide(uint32_t w[2 * n])
    {
        mont_t lo;
#pragma unroll
        for (int i = 0; i < n; i++) lo.v[i] = w[i];
        redc_rows(lo.v);   // <= p
        mont_t r;
        r.v[0] = ptx::add_cc(lo.v[0], w[n]);
#pragma unroll
        for (int i = 1; i < n - 1; i++) r.v[i] = ptx::addc_cc(lo.v[i], w[n + i]);
        r.v[n - 1] = ptx::addc(lo.v[n - 1], w[2 * n - 1]);   // <= p + (p-1) < 2p
        final_sub(r.v);
        return r;
    }

    // ---- Montgomery multiplication (CIOS, even/odd split), a, b < p -> a*b*R^-1 mod p ----------
    // The accumulator is two arrays: E[j] at limb j and O[j] at limb j+1, so each (lo, hi) pair of
    // a product a_k*b_i lands in an aligned register pair and ptxas emits one IMAD.WIDE(.X) per
    // pair with no MOVs. The one-limb shift of CIOS is never materialised: after a reduction E[0]
    // is 0 and the arrays swap roles (the old O becomes the new E, the old E shifted by two limbs,
    // done inside the next row's carry chain, becomes the new O). Layout idea: sppark's mont_t.
    // The previous single-accumulator version shifted by one limb per row, which misaligned the
    // pairs and cost ~150 MOV/IMAD.MOV per Fr mul in SASS.
    // Bounds: as for plain CIOS (T < 2p between rows); the carry out of the O chain of a
    // reduction is always 0 because p < 2^(32n-1) (spare top bit).
    // The row pieces are the free mul_n_limbs_ / cmad_n_limbs_ (also the half products' rows).
    static CUZK_DEV void mul_n_(uint32_t* acc, const uint32_t* a, uint32_t bi) { mul_n_limbs_<n>(acc, a, bi); }
    static CUZK_DEV void cmad_n_(uint32_t* acc, const uint32_t* a, uint32_t bi) { cmad_n_limbs_<n>(acc, a, bi); }
    // odd[j], odd[j+1] = lo, hi(a[j]*bi) + odd[j+2], odd[j+3] + carry (shift by two limbs)
    static CUZK_DEV void madc_n_rshift_(uint32_t* odd, const uint32_t* a, uint32_t bi)
    {
#pragma unroll
        for (int j = 0; j < n - 2; j += 2) {
            odd[j] = ptx::madc_lo_cc3(a[j], bi, odd[j + 2]);
            odd[j + 1] = ptx::madc_hi_cc3(a[j], bi, odd[j + 3]);
        }
        odd[n - 2] = ptx::madc_lo_cc_0(a[n - 2], bi);
        odd[n - 1] = ptx::madc_hi_0(a[n - 2], bi);
    }
    // reduction part of a row for a modulus with p[0] = 1, p[1] = 2^32 - 1 (BLS12-381 Fr; then
    // M0 = -1 and m = -t0): m*p[0] = m has hi 0 and t0 + m = 0 with carry (t0 != 0);
    // m*p[1] = m*2^32 - m has lo -m = t0 and hi m - (m != 0). Both products become plain adds
    // (ALU pipe) instead of IMADs: 2 IMAD slots fewer per row, 4 ALU instructions more.
    static CUZK_DEV void redc_lo_special_(uint32_t* even, uint32_t* odd, const uint32_t* mod,
                                          uint32_t m)
    {
        static_assert(P::mod0 == 1u && P::mod1 == 0xffffffffu, "needs p[0] = 1, p[1] = 2^32 - 1");
        const uint32_t t0 = even[0];
        (void)ptx::sub_cc(0u, t0);              // borrow = (t0 != 0) = (m != 0)
        const uint32_t hi1 = ptx::subc(m, 0u);   // hi(m * (2^32 - 1))
        odd[0] = ptx::add_cc(odd[0], t0);        // lo(m * (2^32 - 1)) = -m = t0
        odd[1] = ptx::addc_cc(odd[1], hi1);
#pragma unroll
        for (int j = 2; j < n; j += 2) {
            ptx::madc_lo_cc(odd[j], mod[j + 1], m);
            ptx::madc_hi_cc(odd[j + 1], mod[j + 1], m);
        }
        // (carry out of the O chain is 0, as in the generic row)
        even[0] = ptx::add_cc(t0, m);            // = 0, carry (t0 != 0)
        ptx::addc_0_cc(even[1]);                 // + hi(m * 1) = 0
#pragma unroll
        for (int j = 2; j < n; j += 2) {
            ptx::madc_lo_cc(even[j], mod[j], m);
            ptx::madc_hi_cc(even[j + 1], mod[j], m);
        }
    }
    // one CIOS row (t += a*bi; t += m*p; t >>= 32) on the split accumulator
    template <bool LO_SPECIAL>
    static CUZK_DEV void mad_n_redc_(uint32_t* even, uint32_t* odd, const uint32_t* a,
                                     const uint32_t* mod, uint32_t bi, bool first)
    {
        if (first) {
            mul_n_(odd, a + 1, bi);
            mul_n_(even, a, bi);
        } else {
            // the old E[1] sits at limb 0 now: fold it into the new E[0]; its carry enters O[0]
            even[0] = ptx::add_cc(even[0], odd[1]);
            madc_n_rshift_(odd, a + 1, bi);
            cmad_n_(even, a, bi);
            ptx::addc_0(odd[n - 1]);
        }
        uint32_t m = even[0] * P::m0();
        if constexpr (LO_SPECIAL) {
            redc_lo_special_(even, odd, mod, m);
        } else {
            cmad_n_(odd, mod + 1, m);
            cmad_n_(even, mod, m);
        }
        ptx::addc_0(odd[n - 1]);
    }
    // 2n^2 IMAD.WIDE (= 4n^2 32-bit IMAD slots) + n for the m's. LO_SPECIAL: see
    // redc_lo_special_ (same result, bit for bit).
    template <bool LO_SPECIAL>
    static CUZK_DEV mont_t mul_(const mont_t& a, const mont_t& b)
    {
        uint32_t mod[n];
#pragma unroll
        for (int i = 0; i < n; i++) mod[i] = P::mod(i);
        mont_t even;
        uint32_t odd[n];
#pragma unroll
        for (int i = 0; i < n; i += 2) {
            mad_n_redc_<LO_SPECIAL>(even.v, odd, a.v, mod, b.v[i], i == 0);
            mad_n_redc_<LO_SPECIAL>(odd, even.v, a.v, mod, b.v[i + 1], false);
        }
        // merge: result[k] = E[k] + O[k+1] (E[0] of the last row, held in odd[0], is 0)
        even.v[0] = ptx::add_cc(even.v[0], odd[1]);
#pragma unroll
        for (int k = 1; k < n - 1; k++) even.v[k] = ptx::addc_cc(even.v[k], odd[k + 1]);
        ptx::addc_0(even.v[n - 1]);   // < 2p
        final_sub(even.v);
        return even;
    }
    // P::mul_karatsuba selects the Karatsuba product + wide reduction for operator* (Fp), else
    // the CIOS rows (mul_rows: P::mul_lo_special selects between the two interleaved rows);
    // mul_lo_special() forces the special row (Fr only), mul_karatsuba() the Karatsuba product.
    friend CUZK_DEV mont_t operator*(const mont_t& a, const mont_t& b)
    {
        if constexpr (P::mul_karatsuba) return mul_karatsuba(a, b);
        else return mul_rows(a, b);
    }
    // The CIOS rows (mul_lo_special's choice): the product the curve formulas use (ec_field.cuh).
    static CUZK_DEV mont_t mul_rows(const mont_t& a, const mont_t& b) { return mul_<P::mul_lo_special>(a, b); }
    static CUZK_DEV mont_t mul_lo_special(const mont_t& a, const mont_t& b)
    {
        return mul_<true>(a, b);
    }
    CUZK_DEV mont_t& operator*=(const mont_t& b) { return *this = *this * b; }

    // a^2 via the wide square (n^2 + n IMAD) and redc_wide (2n^2 + n): a < p -> a^2 < p^2 < pR
    CUZK_DEV mont_t sqr() const
    {
        uint32_t w[2 * n];
        sqr_wide(w, *this);
        return redc_wide(w);
    }

    // ---- conversions -----------------------------------------------------------------------------
    // Montgomery form -> canonical integer (multiply by 1)
    CUZK_DEV mont_t to_canonical() const
    {
        mont_t r = *this;
        redc_rows(r.v);   // <= p
        final_sub(r.v);
        return r;
    }
    // canonical integer (< p) -> Montgomery form (multiply by R^2)
    CUZK_DEV mont_t to_mont() const
    {
        mont_t rr;
#pragma unroll
        for (int i = 0; i < n; i++) rr.v[i] = P::rr(i);
        return *this * rr;
    }
};

template <class P> CUZK_DEV mont_t<P> sqr(const mont_t<P>& a) { return a.sqr(); }

} // namespace cuzk
