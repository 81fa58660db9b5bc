// cuzk: radix-2^k NTT passes over BLS12-381 Fr.
//
// A transform of size N = 2^L is split into passes of k <= 10 bits (e.g. 8+8+8 for 2^24). One
// pass is a batch of independent size-2^k DFTs along the rows of a (2^k x 2^R) view of each group
// (R = L - s0 - k bits below the pass, s0 bits above it, already done): the four-step / Bailey
// decomposition applied recursively. A block loads a tile of 2^k rows x C columns into shared
// memory, runs all k radix-2 stages there (one __syncthreads per stage), and writes it back:
// device memory is read and written once per pass, not once per stage. The pass with R = 0
// (each group 2^k contiguous elements) takes 2^lg_c consecutive groups as its tile's columns.
//
// DIF (Gentleman-Sande): natural order in, bit-reversed out; passes run s0 = 0, k1, k1+k2, ...;
// after each pass but the last, element (row p, column c) is multiplied by the inter-pass twiddle
// w_M^(c * bitrev_k(p)), M = 2^(L - s0).
// DIT (Cooley-Tukey) is the exact transpose: bit-reversed in, natural out, passes in reverse
// order, the same twiddle applied before the pass's DFT. Same tables, same tiles. Every
// inter-pass twiddle is multiplied at a STORE (F_TWIDDLE with the geometry of the pass it
// belongs to, below): a DIF pass's own at its store, a DIT pass's at the store of the pass
// that wrote its input (crates/ntt/PERF-NOTES.md, session 9: the same multiplication measured
// ~0.3 ms per three 2^24 polynomials slower at a DIT pass's load).
//
// Twiddles: every root is a power of W = the primitive 2^28-th root of unity that cuzk-field
// derives (so every domain of size <= 2^28 shares one table set per device): W^e = HI[e >> 14] *
// LO[e & 0x3fff]. Internal DFT twiddles come from a direct table of w_1024^q, q < 512; inter-pass
// twiddles of order up to 2^19 from a direct table, above it from the optional roots table
// (ROOTS_LG) or else the split product.
// Coset scaling (g^i, g^-i) and the constant 1/n live in the same table buffer and are fused
// into the load of the first pass (pre) or the store of the last pass (post). The H pipeline
// (lg_n <= 27) evaluates on the half-root coset s = w_2N instead: s^i is folded into the
// inter-pass twiddles (F_ODD_ROW, F_ODD_COL, F_POST_ROW below), 1/n and the quotient's
// constants into to_coset's first twiddle (F_TW_FOLD, T_HTW) where its pass has k <= INT_LG.
#pragma once

#include "cuzk_shared.h"
#include "ff/bls12_381.cuh"

namespace cuzk {
namespace ntt {

// ---- table layout (values: cuzk_shared.h, shared with Rust) ---------------------------------------
constexpr uint32_t SPLIT_BITS = CUZK_NTT_SPLIT_BITS;
constexpr uint32_t SPLIT = CUZK_NTT_SPLIT;  // 16384
constexpr uint32_t MAX_LG = CUZK_NTT_MAX_LG;
constexpr uint32_t INT_LG = CUZK_NTT_INT_LG;  // internal table: w_1024
constexpr uint32_t INT_LEN = CUZK_NTT_INT_LEN;  // 512
constexpr uint32_t T_FWD_LO = CUZK_NTT_T_FWD_LO;
constexpr uint32_t T_FWD_HI = CUZK_NTT_T_FWD_HI;
constexpr uint32_t T_INV_LO = CUZK_NTT_T_INV_LO;
constexpr uint32_t T_INV_HI = CUZK_NTT_T_INV_HI;
constexpr uint32_t T_G_LO = CUZK_NTT_T_G_LO;  // g^i
constexpr uint32_t T_G_HI = CUZK_NTT_T_G_HI;
constexpr uint32_t T_GI_LO = CUZK_NTT_T_GI_LO;  // g^-i
constexpr uint32_t T_GI_HI = CUZK_NTT_T_GI_HI;
constexpr uint32_t T_FWD_INT = CUZK_NTT_T_FWD_INT;  // w_1024^q
constexpr uint32_t T_INV_INT = CUZK_NTT_T_INV_INT;  // w_1024^-q
constexpr uint32_t T_NINV = CUZK_NTT_T_NINV;  // 1/2^L, L = 0..28
// The H pipeline's quotient constants (cuzk_ntt_quotient_bitrev*): its inputs are n times the
// coset evaluations (no 1/n anywhere before it) and back runs unscaled, so the kernel writes
// (a*b - n*c) * K_L with T_HN[L] = 2^L and T_HK[L] = 1/(Z * n^3): Z = s^n - 1 = -2 on the
// half-root coset s = w_2n (L <= 27), Z = g^n - 1 on the g coset (L = 28, MAX_LG).
constexpr uint32_t T_HK = CUZK_NTT_T_HK;
constexpr uint32_t T_HN = CUZK_NTT_T_HN;
// Direct inter-pass twiddle tables: w_(2^DIRECT_LG)^i = W^(i << (MAX_LG - DIRECT_LG)), i < 2^DIRECT_LG.
// A twiddle that is a power of w_(2^ord), ord <= DIRECT_LG (the second pass at 2^24..2^28,
// also with the half-root coset's odd exponents: ord = m_lg + 1 = 19 at 2^27), reads one load
// instead of the split-table product (one multiplication less).
constexpr uint32_t DIRECT_LG = CUZK_NTT_DIRECT_LG;
constexpr uint32_t DIRECT_N = CUZK_NTT_DIRECT_N;  // 524288 (16 MiB each)
constexpr uint32_t T_FWD_DIR = CUZK_NTT_T_FWD_DIR;
constexpr uint32_t T_INV_DIR = CUZK_NTT_T_INV_DIR;
// Per-size scaled HI tables for the fused coset scaling with 1/n: for each L = 0..MAX_LG,
// HI_GN_L[h] = g^(h * 2^14) / 2^L (and g^-1 in HI_GIN_L), h < max(1, 2^(L-14)), at offset
// gn_off(L); g^(+-i)/n = LO[i & 0x3fff] * HI_GN_L[i >> 14]: 2 multiplications instead of 3.
__host__ __device__ constexpr uint32_t gn_off(uint32_t L) { return L <= 15 ? L : (1u << (L - 14)) + 13; }
constexpr uint32_t GN_LEN = CUZK_NTT_GN_LEN;
static_assert(gn_off(MAX_LG + 1) == GN_LEN, "cuzk_shared.h GN_LEN is gn_off(MAX_LG + 1)");
constexpr uint32_t T_GN_HI = CUZK_NTT_T_GN_HI;
constexpr uint32_t T_GIN_HI = CUZK_NTT_T_GIN_HI;
// The H pipeline's quotient constants folded into to_coset's first twiddle (half-root coset,
// L <= MAX_LG - 1; F_TW_FOLD): for each L and polynomial y of the H launch (0 = a, 1 = b, 2 =
// c), HTW[L][y][j] = s_y * w_(2^(INT_LG+1))^j, j < 2^INT_LG, with s_a = K_L, s_b = 1, s_c = n * K_L
// (at offset T_HTW + ((3 * L + y) << INT_LG)). to_coset is linear, so a's and c's coset values
// come out times K_L and n * K_L and the quotient writes a * b - c (one multiplication).
constexpr uint32_t HTW_LEN = CUZK_NTT_HTW_LEN;
constexpr uint32_t T_HTW = CUZK_NTT_T_HTW;
constexpr uint32_t T_LEN = CUZK_NTT_T_LEN;

// ---- pass flags (values: cuzk_shared.h) --------------------------------------------------------------
constexpr uint32_t F_DIT = CUZK_NTT_F_DIT;  // Cooley-Tukey pass (else Gentleman-Sande)
constexpr uint32_t F_INVERSE = CUZK_NTT_F_INVERSE;  // use w^-1
constexpr uint32_t F_TWIDDLE = CUZK_NTT_F_TWIDDLE;  // inter-pass twiddle (not on the last DIF pass)
constexpr uint32_t F_PRE_G = CUZK_NTT_F_PRE_G;  // load: x *= g^idx
constexpr uint32_t F_PRE_GI = CUZK_NTT_F_PRE_GI;  // load: x *= g^-idx
constexpr uint32_t F_PRE_NINV = CUZK_NTT_F_PRE_NINV;  // load: x *= 1/n
constexpr uint32_t F_POST_G = CUZK_NTT_F_POST_G;  // store: x *= g^idx
constexpr uint32_t F_POST_GI = CUZK_NTT_F_POST_GI;  // store: x *= g^-idx
constexpr uint32_t F_POST_NINV = CUZK_NTT_F_POST_NINV;  // store: x *= 1/n
// The half-root coset s = w_2N (the H pipeline, lg_n <= 27; crates/ntt/PERF-NOTES.md session 8):
// with F_ODD_ROW and/or F_ODD_COL the inter-pass twiddle (F_TWIDDLE) of element (row, col) is
// w_2M^e, M = 2^m_lg, e = 2 * col * bitrev(row, k) + (F_ODD_ROW ? bitrev(row, k) : 0)
// + (F_ODD_COL ? col : 0) (without them w_M^(col * bitrev(row, k))). A forward DIT whose every
// pass (the R = 0 pass included, col = 0 there) gets its twiddle with F_ODD_ROW is the forward
// transform of x_i * s^i; the inverse DIT whose last pass (s0 = 0) gets its twiddle with
// F_ODD_COL and has F_POST_ROW multiplies the inverse transform's output i by s^-i (unscaled).
constexpr uint32_t F_ODD_ROW = CUZK_NTT_F_ODD_ROW;
constexpr uint32_t F_ODD_COL = CUZK_NTT_F_ODD_COL;
constexpr uint32_t F_POST_ROW = CUZK_NTT_F_POST_ROW;  // DIT store: x *= w_(2^(k+1))^(+-row), row of the tile (DIF: ignored)
// F_TWIDDLE is applied at the store, for the pass geometry in the fields TW_K (bits 16..19) and
// TW_R (bits 20..24): the element at position pos of its polynomial is (row, col) = ((pos >> TW_R)
// mod 2^TW_K, pos mod 2^TW_R) of a pass of TW_K bits with TW_R column bits (m_lg = TW_K + TW_R)
// and is multiplied by that pass's inter-pass twiddle (twiddle_exp with the F_ODD_* bits), over
// w^-1 with F_TW_INV. A DIF pass gives its own geometry (k, R); a DIT pass that of the next DIT
// pass (the twiddle its input needs: k', R' = R + k); the H pipeline's to_coeffs' last pass
// (inverse DIF) that of to_coset's first pass (forward DIT, same k, R = 0, F_ODD_ROW).
constexpr uint32_t F_TW_INV = CUZK_NTT_F_TW_INV;
// With F_TWIDDLE (the H pipeline's to_coeffs' last store: geometry (tk <= INT_LG, 0), F_ODD_ROW,
// forward, lg_n <= MAX_LG - 1, grid.y = 3): the twiddle w_(2^(tk+1))^bitrev(row) is read from
// T_HTW, pre-scaled for polynomial blockIdx.y (the quotient constants, see T_HTW).
constexpr uint32_t F_TW_FOLD = CUZK_NTT_F_TW_FOLD;
constexpr uint32_t F_ALL = CUZK_NTT_F_ALL;
constexpr uint32_t TW_K_SHIFT = CUZK_NTT_TW_K_SHIFT;
constexpr uint32_t TW_R_SHIFT = CUZK_NTT_TW_R_SHIFT;
__host__ __device__ constexpr uint32_t tw_geometry(uint32_t k, uint32_t r) { return (k << TW_K_SHIFT) | (r << TW_R_SHIFT); }
constexpr uint32_t TW_FIELDS = tw_geometry(15, 31);
// The roots table (the pass kernels' `roots` argument; 0 = none): ROOTS_LG = D (bits 25..29) says
// it holds w_(2^D)^i for i < 2^(D-1) (DIRECT_LG < D <= MAX_LG; the upper half is the negation,
// w_(2^D)^(2^(D-1)) = -1, and w^-i = w^(2^D - i)). An inter-pass twiddle of order DIRECT_LG <
// ord <= D is then one load from it (DRAM: 2^(D+4) bytes) instead of the split product, one
// multiplication less per element in the passes whose twiddles are not in the direct table
// (the first DIF / last DIT pass from 2^20; crates/ntt/PERF-NOTES.md, session 11).
constexpr uint32_t ROOTS_SHIFT = CUZK_NTT_ROOTS_SHIFT;
constexpr uint32_t ROOTS_FIELD = 31u << ROOTS_SHIFT;

constexpr uint32_t TILE_LG = CUZK_NTT_TILE_LG;  // elements per tile <= 1024, threads <= 512
constexpr uint32_t MAX_THREADS = 1u << (TILE_LG - 1);

__device__ __forceinline__ uint32_t bitrev(uint32_t x, uint32_t bits)
{
    return bits == 0 ? 0 : __brev(x) >> (32 - bits);
}

// Table read through the read-only cache.
__device__ __forceinline__ fr_t ld(const fr_t* p)
{
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = __ldg(q), b = __ldg(q + 1);
    fr_t r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
}

// Element load/store as two 16-byte accesses.
__device__ __forceinline__ fr_t ld_elem(const fr_t* p)
{
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = q[0], b = q[1];
    fr_t r;
    r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
    r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
    return r;
}
__device__ __forceinline__ void st_elem(fr_t* p, const fr_t& x)
{
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
    q[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
}

// W^e (or W^-e), e < 2^28, from the split tables.
__device__ __forceinline__ fr_t split_pow(const fr_t* tables, uint32_t lo_off, uint32_t e)
{
    fr_t lo = ld(tables + lo_off + (e & (SPLIT - 1)));
    uint32_t h = e >> SPLIT_BITS;
    if (h == 0) return lo;
    return lo * ld(tables + lo_off + SPLIT + h);
}

// Shared memory tile as two planes of 16-byte halves: a warp reading consecutive elements reads
// consecutive 16-byte words of one plane, so the accesses are free of bank conflicts.
struct tile_t {
    uint4* lo;
    uint4* hi;
    __device__ __forceinline__ fr_t get(uint32_t e) const
    {
        uint4 a = lo[e], b = hi[e];
        fr_t r;
        r.v[0] = a.x; r.v[1] = a.y; r.v[2] = a.z; r.v[3] = a.w;
        r.v[4] = b.x; r.v[5] = b.y; r.v[6] = b.z; r.v[7] = b.w;
        return r;
    }
    __device__ __forceinline__ void set(uint32_t e, const fr_t& x) const
    {
        lo[e] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
        hi[e] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
    }
};

// Multiplies x by the coset power and/or 1/n selected by `flags` (PRE or POST bits given as
// g_bit, gi_bit, ninv_bit); idx is the element's natural-order index in its polynomial.
__device__ __forceinline__ fr_t scale(fr_t x, const fr_t* tables, uint32_t flags, uint32_t g_bit,
                                      uint32_t gi_bit, uint32_t ninv_bit, uint32_t idx, uint32_t lg_n)
{
    // With 1/n: one product from the per-size scaled HI table (g^(+-i)/n), else separately.
    const fr_t* lo_g = tables + T_G_LO + (idx & (SPLIT - 1));
    const fr_t* lo_gi = tables + T_GI_LO + (idx & (SPLIT - 1));
    const uint32_t hn = gn_off(lg_n) + (idx >> SPLIT_BITS);
    bool ninv = flags & ninv_bit;
    if (flags & g_bit) {
        if (ninv) {
            x = x * (ld(lo_g) * ld(tables + T_GN_HI + hn));
            ninv = false;
        } else {
            x = x * split_pow(tables, T_G_LO, idx);
        }
    }
    if (flags & gi_bit) {
        if (ninv) {
            x = x * (ld(lo_gi) * ld(tables + T_GIN_HI + hn));
            ninv = false;
        } else {
            x = x * split_pow(tables, T_GI_LO, idx);
        }
    }
    if (ninv) x = x * ld(tables + T_NINV + lg_n);
    return x;
}

// scale() for the specialized kernels: the same multiplications in the same order, as up to
// three steps x *= f (f = LO, or LO * HI where scale() multiplies two table values) through
// one rolled copy of the code; scale() inlines nine multiplications per element.
__device__ __forceinline__ fr_t scale_steps(fr_t x, const fr_t* tables, uint32_t flags, uint32_t g_bit,
                                            uint32_t gi_bit, uint32_t ninv_bit, uint32_t idx, uint32_t lg_n)
{
    const uint32_t lo_i = idx & (SPLIT - 1), h = idx >> SPLIT_BITS;
    const uint32_t hn = gn_off(lg_n) + h;
    bool ninv = flags & ninv_bit;
#pragma unroll 1
    for (uint32_t step = 0; step < 3; step++) {
        const fr_t* lo;
        const fr_t* hi = nullptr;
        if (step < 2) {
            // g^idx (step 0) or g^-idx (step 1), with 1/n from the scaled HI table once.
            if (!(flags & (step == 0 ? g_bit : gi_bit))) continue;
            lo = tables + (step == 0 ? T_G_LO : T_GI_LO) + lo_i;
            if (ninv) {
                hi = tables + (step == 0 ? T_GN_HI : T_GIN_HI) + hn;
                ninv = false;
            } else if (h != 0) {
                hi = tables + (step == 0 ? T_G_HI : T_GI_HI) + h;   // split_pow
            }
        } else {
            if (!ninv) continue;
            lo = tables + T_NINV + lg_n;
        }
        fr_t f = ld(lo);
        if (hi) f = f * ld(hi);
        x = x * f;
    }
    return x;
}

// Inter-pass twiddle W^ex (ex a multiple of 2^(MAX_LG - ord), a power of w_(2^ord); ord = m_lg,
// m_lg + 1 with the odd exponents): one direct load when 2^ord fits the direct table, else the
// split product.
__device__ __forceinline__ fr_t pass_twiddle(const fr_t* tables, const fr_t* roots, uint32_t roots_lg, bool inv,
                                          uint32_t ord, uint32_t ex)
{
    // A root in the internal table (w_1024^q, q < 512: 16 KiB the butterflies keep in L1), e.g.
    // the odd twiddle of the R = 0 pass, w_(2^(k+1))^br: no trip to L2 for it.
    if (ord <= INT_LG && (ex >> (MAX_LG - INT_LG)) < INT_LEN)
        return ld(tables + (inv ? T_INV_INT : T_FWD_INT) + (ex >> (MAX_LG - INT_LG)));
    if (ord <= DIRECT_LG)
        return ld(tables + (inv ? T_INV_DIR : T_FWD_DIR) + (ex >> (MAX_LG - DIRECT_LG)));
    if (ord <= roots_lg) {
        // W^ex = w_(2^D)^i (exact: ex is a multiple of 2^(MAX_LG - ord)); the inverse is
        // w_(2^D)^(2^D - i), the upper half the negated lower half (see ROOTS_LG).
        const uint32_t mask = (1u << roots_lg) - 1, half = 1u << (roots_lg - 1);
        uint32_t i = ex >> (MAX_LG - roots_lg);
        if (inv) i = (0u - i) & mask;
        return ld(roots + (i & (half - 1))).cneg((i & half) != 0);
    }
    return split_pow(tables, inv ? T_INV_LO : T_FWD_LO, ex);
}

// The inter-pass twiddle of element (row, column col of the group) as (ord, ex), W^ex a power of
// w_(2^ord): w_M^(col * br), or with F_ODD_ROW / F_ODD_COL w_2M^(2 * col * br + br / col),
// br = bitrev(row, k), M = 2^m_lg (F_ODD_* needs m_lg < MAX_LG).
__device__ __forceinline__ uint32_t twiddle_exp(uint32_t flags, uint32_t m_lg, uint32_t k, uint32_t row,
                                                uint32_t col, uint32_t& ord)
{
    const uint32_t br = bitrev(row, k);
    const uint32_t odd = (flags & (F_ODD_ROW | F_ODD_COL)) != 0;
    uint32_t e = (col * br) << odd;
    if (flags & F_ODD_ROW) e += br;
    if (flags & F_ODD_COL) e += col;
    ord = m_lg + odd;
    return e << (MAX_LG - ord);
}

// One radix-2 stage for the butterfly (e0, e1) with twiddle *w (w_(2h)^j, see int_tw);
// one (h == 1) means w = 1 (no load, no multiplication).
__device__ __forceinline__ void bfly_dif(fr_t& x, fr_t& y, const fr_t* w, bool one)
{
    fr_t s = x + y;
    y = one ? x - y : (x - y) * ld(w);
    x = s;
}
__device__ __forceinline__ void bfly_dit(fr_t& x, fr_t& y, const fr_t* w, bool one)
{
    if (!one) y = y * ld(w);
    fr_t s = x + y;
    y = x - y;
    x = s;
}

// Where w_(2h)^j (h = 2^lg_h < 2^INT_LG) lives: the internal table w_1024^(j << (9 - lg_h)).
__device__ __forceinline__ const fr_t* int_tw(const fr_t* itw, uint32_t lg_h, uint32_t j)
{
    return itw + (j << (INT_LG - 1 - lg_h));
}

// Compile-time specialization of a pass (SPEC != 0; every radix-4 kernel): a generic build
// inlines every optional multiplication (pre/post scaling, inter-pass twiddle) and both
// butterfly directions behind runtime branches, 354 KiB of SASS that thrashes the instruction
// cache; a specialized kernel holds only the code its launch can run. SP_DIT fixes the direction (flags' F_DIT is then
// ignored); SP_PRE / SP_POST / SP_TW compile in the pre-scaling, the post-scaling, the
// inter-pass twiddle (still applied only where flags ask for it, so a kernel with more compiled
// in gives the same result). The launcher only picks a kernel whose compiled-in code covers the
// pass's flags.
constexpr uint32_t SP_ON = 1u << 0;
constexpr uint32_t SP_DIT = 1u << 1;
constexpr uint32_t SP_PRE = 1u << 2;
constexpr uint32_t SP_POST = 1u << 3;
constexpr uint32_t SP_TW = 1u << 4;

// Polynomial y of the grid: data1 and data2 name the base of polynomials 1 and 2 (three
// separate buffers, e.g. the H pipeline's a, b, c in one launch: grid.y = 3), and polynomial
// y >= 2 is data2 + (y - 2) * 2^lg_n. One contiguous batch passes data1 = data + 2^lg_n and
// data2 = data + 2 * 2^lg_n (as integers: never dereferenced beyond the batch), so polynomial
// y is data + y * 2^lg_n as before.
__device__ __forceinline__ fr_t* poly_base(fr_t* data, fr_t* data1, fr_t* data2, uint32_t y, uint32_t lg_n)
{
    return (y == 0 ? data : y == 1 ? data1 : data2) + ((size_t)(y < 2 ? 0 : y - 2) << lg_n);
}
// blockIdx.y (Y) or threadIdx.x read anew (volatile: not merged with an earlier read), so a
// pointer or address computed from it is recomputed where it is used instead of held (or
// spilled) across a pass's compute phase.
template <bool Y>
__device__ __forceinline__ uint32_t fresh_index()
{
#if defined(CUZK_HOST_EMU)
    return Y ? blockIdx.y : threadIdx.x;
#else
    uint32_t v;
    if constexpr (Y) asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(v));
    else asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
    return v;
#endif
}
__device__ __forceinline__ uint32_t ctaid_y_fresh() { return fresh_index<true>(); }
__device__ __forceinline__ uint32_t tid_fresh() { return fresh_index<false>(); }

// One pass. Grid: x = blocks per polynomial (2^(L-k-lg_c)), y = polynomial of the batch
// (poly_base: one contiguous batch, or up to three separate buffers).
// Block: 2^(k+lg_c) / EPT threads, 2^(k+lg_c) * 32 bytes of dynamic shared memory.
// EPT = 2: one radix-2 butterfly per thread per stage, one __syncthreads per stage.
// EPT = 4 (needs k >= 2): one radix-4 group per thread per step: two stages per shared-memory
// round trip and __syncthreads, two independent multiplications per stage; for odd k the top
// stage runs alone (two butterflies per thread). Same butterflies, same twiddles, same order of
// stages as EPT = 2: bit-identical results.
// The host checks: 1 <= k (2 <= k for EPT = 4), k + lg_c <= TILE_LG, s0 + k <= lg_n <= MAX_LG,
// lg_c <= R where R = lg_n - s0 - k > 0 (columns), k + lg_c <= lg_n where R = 0 (groups).
template <uint32_t EPT, uint32_t SPEC = 0>
__device__ __forceinline__ void pass(fr_t* __restrict__ data, fr_t* __restrict__ data1, fr_t* __restrict__ data2,
                                     const fr_t* __restrict__ tables, const fr_t* __restrict__ roots, uint32_t lg_n,
                                     uint32_t s0, uint32_t k, uint32_t lg_c, uint32_t flags)
{
#if defined(CUZK_HOST_EMU)
    extern uint4 smem[];                              // host emulation (host_emu/): the harness's
#else
    extern __shared__ uint4 smem[];
#endif
    const uint32_t tile_lg = k + lg_c;
    const uint32_t tile_n = 1u << tile_lg;
    const uint32_t nthr = tile_n / EPT;
    const tile_t tile{smem, smem + tile_n};

    const uint32_t R = lg_n - s0 - k;                 // column bits
    // R = 0 (the last DIF / first DIT pass: each group is 2^k contiguous rows): the tile's
    // 2^lg_c "columns" are 2^lg_c consecutive groups, so such a pass also runs 1024-element tiles
    // (256 threads: room for the radix-4 group remap). Else 2^lg_c columns of one group.
    const bool groups = R == 0;
    const uint32_t chunks_lg = groups ? 0 : R - lg_c; // column chunks per group (R > 0)
    const uint32_t blk = blockIdx.x;
    const uint32_t group = blk >> chunks_lg;
    const uint32_t col0 = (blk & ((1u << chunks_lg) - 1)) << lg_c;
    fr_t* poly = poly_base(data, data1, data2, blockIdx.y, lg_n);
    const size_t base = groups ? (size_t)blk << tile_lg : ((size_t)group << (lg_n - s0)) + col0;

    constexpr bool spec = SPEC & SP_ON;
    // Constants in a specialized kernel: the code they guard is not emitted.
    const bool dit = spec ? (SPEC & SP_DIT) != 0 : (flags & F_DIT) != 0;
    const bool has_pre = !spec || (SPEC & SP_PRE);
    const bool has_post = !spec || (SPEC & SP_POST);
    const bool has_tw = !spec || (SPEC & SP_TW);
    const bool inv = flags & F_INVERSE;
    const uint32_t cmask = (1u << lg_c) - 1;
    const uint32_t t = threadIdx.x;
    // Element i of the load / store order (i = t + u * nthr): its tile row and column and its
    // position in the polynomial; the tile index is (row << lg_c) | cl. Columns: consecutive i,
    // consecutive columns. Groups: the low 3 - lg_c bits of i are the row's low bits, the next
    // lg_c the group, so a quarter-warp's 16-byte accesses hit 8 distinct bank groups and a warp
    // reads runs of 32 >> lg_c consecutive elements of 2^lg_c groups.
    const uint32_t glo = lg_c < 3 ? 3 - lg_c : 0;
    const auto place = [&](uint32_t i, uint32_t& row, uint32_t& cl) -> uint32_t {
        if (groups) {
            row = ((i >> (glo + lg_c)) << glo) | (i & ((1u << glo) - 1));
            cl = (i >> glo) & cmask;
            return (uint32_t)(base + ((size_t)cl << k) + row);
        }
        row = i >> lg_c;
        cl = i & cmask;
        return (uint32_t)(base + ((size_t)row << R) + cl);
    };

    // Load EPT elements per thread; consecutive threads take consecutive columns. The loads go
    // straight to the tile, so all of a thread's loads are in flight at once; the pre-scaling
    // follows on the tile, each thread on its own elements (no barrier needed between the two
    // loops). No twiddle here: every inter-pass twiddle is multiplied at a store (F_TWIDDLE).
#pragma unroll
    for (uint32_t u = 0; u < EPT; u++) {
        uint32_t row, cl;
        const uint32_t pos = place(t + u * nthr, row, cl), e = (row << lg_c) | cl;
        const uint4* in = reinterpret_cast<const uint4*>(poly + pos);
        tile.lo[e] = in[0];
        tile.hi[e] = in[1];
    }
    if (has_pre && (flags & (F_PRE_G | F_PRE_GI | F_PRE_NINV))) {
#pragma unroll
        for (uint32_t u = 0; u < EPT; u++) {
            uint32_t row, cl;
            const uint32_t pos = place(t + u * nthr, row, cl), e = (row << lg_c) | cl;
            const uint32_t idx = dit ? bitrev(pos, lg_n) : pos;
            fr_t x = tile.get(e);
            x = spec ? scale_steps(x, tables, flags, F_PRE_G, F_PRE_GI, F_PRE_NINV, idx, lg_n)
                     : scale(x, tables, flags, F_PRE_G, F_PRE_GI, F_PRE_NINV, idx, lg_n);
            tile.set(e, x);
        }
    }
    __syncthreads();

    const fr_t* itw = tables + (inv ? T_INV_INT : T_FWD_INT);
    const uint32_t cl = t & cmask, q = t >> lg_c;     // column, butterfly (group) index within column
    if constexpr (EPT == 2) {
        for (uint32_t st = 0; st < k; st++) {
            // DIF walks half-sizes 2^(k-1) .. 1, DIT 1 .. 2^(k-1).
            const uint32_t lg_h = dit ? st : k - 1 - st;
            const uint32_t h = 1u << lg_h;
            const uint32_t j = q & (h - 1);
            const uint32_t r = ((q >> lg_h) << (lg_h + 1)) | j;
            const uint32_t e0 = (r << lg_c) | cl, e1 = e0 + (h << lg_c);
            // w_(2h)^j = w_1024^(j * 512 / h). The h = 1 stage (last DIF, first DIT) has only
            // w = 1: no table load, no multiplication (uniform branch).
            fr_t x = tile.get(e0), y = tile.get(e1);
            const fr_t* w = itw + (j << (INT_LG - 1 - lg_h));
            if (dit) bfly_dit(x, y, w, lg_h == 0);
            else bfly_dif(x, y, w, lg_h == 0);
            tile.set(e0, x);
            tile.set(e1, y);
            __syncthreads();
        }
    } else {
        // Steps: DIF covers (if k is odd) the top stage h = 2^(k-1) alone, then half-size pairs
        // (2hh, hh) downwards to (2, 1); DIT the mirror image: pairs (hh, 2hh) upwards from
        // (1, 2), then (k odd) the top stage alone. The pair (2, 1) costs one multiplication per
        // group (w = 1 in three of its four butterflies), the lone top stage one per butterfly:
        // 0.25 fewer per element than pairing from the top and leaving h = 1 alone.
        const uint32_t steps = (k + 1) / 2;
        const bool odd = k & 1;
        for (uint32_t s = 0; s < steps; s++) {
            // lone: this step is the top stage alone; else lg_hi is the larger half-size of its pair.
            const bool lone = odd && s == (dit ? steps - 1 : 0);
            const uint32_t lg_hi = dit ? 2 * s + 1 : k - 1 - 2 * s + (odd ? 1 : 0);
            {
            // Radix-4 group g of the tile: column cl, group q within the column.
            const uint32_t g = t;
            const uint32_t cl = g & cmask, q = g >> lg_c;
            if (lone) {
                // The top stage (h = 2^(k-1), k odd): butterflies j = q and q + 2^(k-2) of this
                // column, rows (j, j + h), twiddle w_(2h)^j.
                const uint32_t lg_top = k - 1;
#pragma unroll
                for (uint32_t v = 0; v < 2; v++) {
                    const uint32_t j = q + (v << (k - 2));
                    const uint32_t e0 = (j << lg_c) | cl, e1 = e0 + ((1u << lg_top) << lg_c);
                    fr_t x = tile.get(e0), y = tile.get(e1);
                    const fr_t* w = int_tw(itw, lg_top, j);
                    if (dit) bfly_dit(x, y, w, false);
                    else bfly_dif(x, y, w, false);
                    tile.set(e0, x);
                    tile.set(e1, y);
                }
            } else {
                // Rows r, r + hh, r + 2hh, r + 3hh of column cl, hh = 2^(lg_hi - 1).
                const uint32_t lg_lo = lg_hi - 1;
                const uint32_t hh = 1u << lg_lo;
                // Group remap: where the q bits above a warp's span leave room, the group's
                // offset j (q's low lg_lo bits) is taken from them (q rotated by lg_lo), so j is
                // the same across each warp and the j = 0 warps skip the w = 1 multiplications
                // (twa, twc: three of four). Pays from hh = 4 ((3/4)/hh of the step's products).
                const uint32_t qb = k - 2, lane_q = lg_c < 5 ? 5 - lg_c : 0;
                const bool remap = lg_lo >= 2 && nthr >= 32 && lg_lo + lane_q <= qb;
                const auto group_q = [&](uint32_t g) {
                    const uint32_t q = g >> lg_c;
                    return remap ? ((q & ((1u << (qb - lg_lo)) - 1)) << lg_lo) | (q >> (qb - lg_lo)) : q;
                };
                // Group g's first element (rows r + m hh at e0 + m d).
                const auto first = [&](uint32_t g) {
                    const uint32_t q = group_q(g);
                    const uint32_t r = ((q >> lg_lo) << (lg_hi + 1)) | (q & (hh - 1));
                    return (r << lg_c) | (g & cmask);
                };
                const uint32_t j = group_q(g) & (hh - 1);
                const uint32_t e0 = first(g), d = hh << lg_c;
                fr_t x0 = tile.get(e0), x1 = tile.get(e0 + d), x2 = tile.get(e0 + 2 * d),
                     x3 = tile.get(e0 + 3 * d);
                // Stage lg_hi (half 2hh): (x0, x2) at offset j, (x1, x3) at offset j + hh.
                const fr_t* twa = int_tw(itw, lg_hi, j);
                const fr_t* twb = int_tw(itw, lg_hi, j + hh);
                // Stage lg_lo (half hh): (x0, x1) and (x2, x3), both at offset j.
                const fr_t* twc = int_tw(itw, lg_lo, j);
                // j == 0 (always when lg_lo == 0): twc and twa are both w^0 = 1 (uniform
                // branch: no loads, no multiplications); only twb = w_4^.. is multiplied.
                const bool one = lg_lo == 0 || (remap && j == 0);
                if (dit) {
                    bfly_dit(x0, x1, twc, one);
                    bfly_dit(x2, x3, twc, one);
                    bfly_dit(x0, x2, twa, one);
                    bfly_dit(x1, x3, twb, false);
                } else {
                    bfly_dif(x0, x2, twa, one);
                    bfly_dif(x1, x3, twb, false);
                    bfly_dif(x0, x1, twc, one);
                    bfly_dif(x2, x3, twc, one);
                }
                // The address again from a fresh thread index (held across the butterflies, the
                // remap's index math spilled at 64 registers).
                const uint32_t e0s = first(tid_fresh());
                tile.set(e0s, x0);
                tile.set(e0s + d, x1);
                tile.set(e0s + 2 * d, x2);
                tile.set(e0s + 3 * d, x3);
            }
            }
            __syncthreads();
        }
    }

    // The polynomial's base again, not held across the compute phase (the select of
    // poly_base is not rematerialized: held, it cost the 64-register kernels 16-24 B of spills).
    fr_t* poly_out = poly_base(data, data1, data2, ctaid_y_fresh(), lg_n);
#pragma unroll
    for (uint32_t u = 0; u < EPT; u++) {
        uint32_t row, cl;
        const uint32_t pos = place(t + u * nthr, row, cl);
        fr_t x = tile.get((row << lg_c) | cl);
        if (has_tw && (flags & F_TWIDDLE)) {
            // The inter-pass twiddle of the pass geometry (TW_K, TW_R) at this position.
            const uint32_t tk = (flags >> TW_K_SHIFT) & 15, tr = (flags >> TW_R_SHIFT) & 31;
            if (flags & F_TW_FOLD) {
                // tr = 0, F_ODD_ROW, forward: w_(2^(tk+1))^br = w_(2^(INT_LG+1))^(br << (INT_LG - tk)),
                // times polynomial y's quotient constant (T_HTW).
                const uint32_t j = bitrev(pos & ((1u << tk) - 1), tk) << (INT_LG - tk);
                x = x * ld(tables + T_HTW + (((3 * lg_n + ctaid_y_fresh()) << INT_LG) | j));
            } else {
                uint32_t ord;
                const uint32_t ex = twiddle_exp(flags, tk + tr, tk, (pos >> tr) & ((1u << tk) - 1),
                                                pos & ((1u << tr) - 1), ord);
                x = x * pass_twiddle(tables, roots, (flags >> ROOTS_SHIFT) & 31, flags & F_TW_INV, ord, ex);
            }
        }
        if (has_post && dit && (flags & F_POST_ROW))
            x = x * (k < INT_LG ? ld(tables + (inv ? T_INV_INT : T_FWD_INT) + (row << (INT_LG - 1 - k)))
                                : ld(tables + (inv ? T_INV_DIR : T_FWD_DIR) + (row << (DIRECT_LG - 1 - k))));
        if (has_post && (flags & (F_POST_G | F_POST_GI | F_POST_NINV))) {
            const uint32_t idx = dit ? pos : bitrev(pos, lg_n);
            x = spec ? scale_steps(x, tables, flags, F_POST_G, F_POST_GI, F_POST_NINV, idx, lg_n)
                     : scale(x, tables, flags, F_POST_G, F_POST_GI, F_POST_NINV, idx, lg_n);
        }
        uint4* out = reinterpret_cast<uint4*>(poly_out + pos);
        out[0] = make_uint4(x.v[0], x.v[1], x.v[2], x.v[3]);
        out[1] = make_uint4(x.v[4], x.v[5], x.v[6], x.v[7]);
    }
}

} // namespace ntt
} // namespace cuzk
