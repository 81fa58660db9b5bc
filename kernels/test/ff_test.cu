// cuzk: test and benchmark kernels for the field (ff/) and curve (ec/) headers.
// Element-wise kernels use a grid-stride loop over n elements; point kernels return Jacobian
// coordinates (blst_p1 / blst_p2 layout) so the host can compare with blst. Every input must be
// canonical (< modulus), every output is canonical.
#include "ff/bls12_381.cuh"
#include "ec/bls12_381.cuh"

using namespace cuzk;

#define GRID_STRIDE(i, n) \
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// ---- element-wise field ops -----------------------------------------------------------------------
#define FIELD_BINARY(NAME, T, EXPR)                                                          \
    extern "C" __global__ void __launch_bounds__(256)                                        \
    NAME(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, uint32_t n) \
    {                                                                                        \
        GRID_STRIDE(i, n) { T x = a[i]; T y = b[i]; out[i] = (EXPR); }                       \
    }
#define FIELD_UNARY(NAME, T, EXPR)                                                           \
    extern "C" __global__ void __launch_bounds__(256)                                        \
    NAME(const T* __restrict__ a, T* __restrict__ out, uint32_t n)                           \
    {                                                                                        \
        GRID_STRIDE(i, n) { T x = a[i]; out[i] = (EXPR); }                                   \
    }

FIELD_BINARY(fr_mul, fr_t, x * y)
FIELD_BINARY(fr_add, fr_t, x + y)
FIELD_BINARY(fr_sub, fr_t, x - y)
FIELD_UNARY(fr_sqr, fr_t, x.sqr())
FIELD_UNARY(fr_neg, fr_t, -x)
FIELD_UNARY(fr_dbl, fr_t, x.dbl())
FIELD_UNARY(fr_to_canonical, fr_t, x.to_canonical())
FIELD_UNARY(fr_to_mont, fr_t, x.to_mont())

FIELD_BINARY(fp_mul, fp_t, x * y)
FIELD_BINARY(fp_add, fp_t, x + y)
FIELD_BINARY(fp_sub, fp_t, x - y)
FIELD_UNARY(fp_sqr, fp_t, x.sqr())
FIELD_UNARY(fp_neg, fp_t, -x)
FIELD_UNARY(fp_dbl, fp_t, x.dbl())
FIELD_UNARY(fp_to_canonical, fp_t, x.to_canonical())
FIELD_UNARY(fp_to_mont, fp_t, x.to_mont())

FIELD_BINARY(fp2_mul, fp2_t, x * y)
FIELD_BINARY(fp2_add, fp2_t, x + y)
FIELD_BINARY(fp2_sub, fp2_t, x - y)
FIELD_UNARY(fp2_sqr, fp2_t, x.sqr())
FIELD_UNARY(fp2_neg, fp2_t, -x)

// ---- point ops: Jacobian in (arbitrary Z), Jacobian out --------------------------------------------
#define POINT_KERNELS(G, F)                                                                          \
    extern "C" __global__ void __launch_bounds__(128)                                                \
    G##_xyzz_add(const jacobian_t<F>* __restrict__ a, const jacobian_t<F>* __restrict__ b,           \
                 jacobian_t<F>* __restrict__ out, uint32_t n)                                        \
    {                                                                                                \
        GRID_STRIDE(i, n) {                                                                          \
            xyzz_t<F> p = xyzz_t<F>::from_jacobian(a[i]);                                            \
            xyzz_t<F> q = xyzz_t<F>::from_jacobian(b[i]);                                            \
            out[i] = p.add(q).to_jacobian();                                                         \
        }                                                                                            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(128)                                                \
    G##_xyzz_dbl(const jacobian_t<F>* __restrict__ a, jacobian_t<F>* __restrict__ out, uint32_t n)  \
    {                                                                                                \
        GRID_STRIDE(i, n) { out[i] = xyzz_t<F>::from_jacobian(a[i]).dbl().to_jacobian(); }          \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(128)                                                \
    G##_xyzz_add_affine(const jacobian_t<F>* __restrict__ a, const affine_t<F>* __restrict__ b,     \
                        jacobian_t<F>* __restrict__ out, uint32_t n)                                 \
    {                                                                                                \
        GRID_STRIDE(i, n) {                                                                          \
            out[i] = xyzz_t<F>::from_jacobian(a[i]).add_affine(b[i]).to_jacobian();                  \
        }                                                                                            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(128)                                                \
    G##_jacobian_add(const jacobian_t<F>* __restrict__ a, const jacobian_t<F>* __restrict__ b,       \
                     jacobian_t<F>* __restrict__ out, uint32_t n)                                    \
    {                                                                                                \
        GRID_STRIDE(i, n) { out[i] = a[i].add(b[i]); }                                               \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(128)                                                \
    G##_jacobian_dbl(const jacobian_t<F>* __restrict__ a, jacobian_t<F>* __restrict__ out,          \
                     uint32_t n)                                                                     \
    {                                                                                                \
        GRID_STRIDE(i, n) { out[i] = a[i].dbl(); }                                                   \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(128)                                                \
    G##_jacobian_add_affine(const jacobian_t<F>* __restrict__ a, const affine_t<F>* __restrict__ b, \
                            jacobian_t<F>* __restrict__ out, uint32_t n)                             \
    {                                                                                                \
        GRID_STRIDE(i, n) { out[i] = a[i].add_affine(b[i]); }                                        \
    }

// ptxas for sm_80..89 parks 8 bytes of the doubling on the stack (accepted in
// kernels/ff/PERF-NOTES.md).
POINT_KERNELS(g1, fp_t)

// G2: one kernel with an operation selector (same order as the G1 kernels above), so that the
// out-of-line Fp2 multiplication is compiled once and the build stays fast.
//   op 0 xyzz_add(a, b)   1 xyzz_dbl(a)   2 xyzz_add_affine(a, c)
//   op 3 jacobian_add(a, b)   4 jacobian_dbl(a)   5 jacobian_add_affine(a, c)
// A G2 point is 96 (Jacobian) or 128 (XYZZ) registers; two of them plus an Fp2 product's
// temporaries do not fit in 255 registers, so this test kernel uses local memory (accepted in
// kernels/ff/PERF-NOTES.md).
extern "C" __global__ void __launch_bounds__(128)
g2_point_op(uint32_t op, const g2_jacobian_t* __restrict__ a, const g2_jacobian_t* __restrict__ b,
            const g2_affine_t* __restrict__ c, g2_jacobian_t* __restrict__ out, uint32_t n)
{
    GRID_STRIDE(i, n) {
        g2_jacobian_t r;
        switch (op) {
        case 0: r = g2_xyzz_t::from_jacobian(a[i]).add(g2_xyzz_t::from_jacobian(b[i])).to_jacobian(); break;
        case 1: r = g2_xyzz_t::from_jacobian(a[i]).dbl().to_jacobian(); break;
        case 2: r = g2_xyzz_t::from_jacobian(a[i]).add_affine(c[i]).to_jacobian(); break;
        case 3: r = a[i].add(b[i]); break;
        case 4: r = a[i].dbl(); break;
        default: r = a[i].add_affine(c[i]); break;
        }
        out[i] = r;
    }
}

// ---- throughput benches ---------------------------------------------------------------------------
// Thread t < n loads x = in[t], y = in[(t + 1) % n], runs CHAINS independent dependent chains
// c_k <- c_k * y for `iters` iterations (CHAINS * iters multiplications), and writes the sum of the
// chains so nothing is optimised away. Multiplications performed = n * iters * CHAINS.
// VARIANT (same results as operator* in every case):
//   VAR_DEFAULT operator*;  VAR_SPLIT Fp2 fp2x_t::mul_split;  VAR_GENERIC mont_t::mul_<false>
//   (the generic CIOS rows: operator* of Fr is mul_lo_special, of Fp the Karatsuba product)
enum { VAR_DEFAULT = 0, VAR_SPLIT = 1, VAR_GENERIC = 2 };
template <class T, int CHAINS, int VARIANT = VAR_DEFAULT>
__device__ __forceinline__ void mul_bench(const T* __restrict__ in, T* __restrict__ out, uint32_t n,
                                          uint32_t iters)
{
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    T y = in[t + 1 < n ? t + 1 : 0];
    T c[CHAINS];
    c[0] = in[t];
#pragma unroll
    for (int k = 1; k < CHAINS; k++) c[k] = c[k - 1] + y;
#pragma unroll 1
    for (uint32_t it = 0; it < iters; it++) {
#pragma unroll
        for (int k = 0; k < CHAINS; k++) {
            if constexpr (VARIANT == VAR_SPLIT) c[k] = T::mul_split(c[k], y);
            else if constexpr (VARIANT == VAR_GENERIC) c[k] = T::template mul_<false>(c[k], y);
            else c[k] = c[k] * y;
        }
    }
#pragma unroll
    for (int k = 1; k < CHAINS; k++) c[0] = c[0] + c[k];
    out[t] = c[0];
}

#define FR_BENCH_CHAINS 4
#define FP_BENCH_CHAINS 2
#define FP2_BENCH_CHAINS 2

#define MUL_BENCH_(NAME, T, CHAINS, VARIANT)                                                    \
    extern "C" __global__ void __launch_bounds__(256)                                           \
    NAME(const T* __restrict__ in, T* __restrict__ out, uint32_t n, uint32_t iters)             \
    { mul_bench<T, CHAINS, VARIANT>(in, out, n, iters); }
#define MUL_BENCH(NAME, T, CHAINS) MUL_BENCH_(NAME, T, CHAINS, VAR_DEFAULT)

MUL_BENCH(fr_mul_bench, fr_t, FR_BENCH_CHAINS)
MUL_BENCH(fp_mul_bench, fp_t, FP_BENCH_CHAINS)
MUL_BENCH(fp2_mul_bench, fp2_t, FP2_BENCH_CHAINS)

// Variants with other chain counts (suffix _c<chains>), timed side by side with the defaults by
// the throughput test (same host-model check), to pick the fastest configuration per field.
// sm_90 registers (nvcc 13.0): fr c2 48, c4 64, c8 104, lo 64, lo_c2 48; fp rows c2 70, c3 80, c4 114;
// fp2 c2 192 (c1 would spill 8 B); split c1 138, split c2 180, split c3 250.
MUL_BENCH(fr_mul_bench_c2, fr_t, 2)
MUL_BENCH(fr_mul_bench_c8, fr_t, 8)
// Fr's default is mul_lo_special; the generic CIOS row for A/B, suffix _generic
MUL_BENCH_(fr_mul_bench_generic, fr_t, FR_BENCH_CHAINS, VAR_GENERIC)
MUL_BENCH_(fr_mul_bench_generic_c2, fr_t, 2, VAR_GENERIC)
// Fp: operator* is the Karatsuba product; other chain counts, and the CIOS rows the curve code
// uses, suffix _generic
MUL_BENCH(fp_mul_bench_c1, fp_t, 1)
MUL_BENCH(fp_mul_bench_c4, fp_t, 4)
MUL_BENCH_(fp_mul_bench_generic, fp_t, 4, VAR_GENERIC)
MUL_BENCH_(fp_mul_bench_generic_c2, fp_t, 2, VAR_GENERIC)
MUL_BENCH_(fp_mul_bench_generic_c1, fp_t, 1, VAR_GENERIC)
// Fp2 with fp2x_t::mul_split (even/odd-split wide products), suffix _split
MUL_BENCH_(fp2_mul_bench_split, fp2_t, FP2_BENCH_CHAINS, VAR_SPLIT)
MUL_BENCH_(fp2_mul_bench_split_c1, fp2_t, 1, VAR_SPLIT)
MUL_BENCH_(fp2_mul_bench_split_c3, fp2_t, 3, VAR_SPLIT)

// chain counts, so the host computes the operation count without hard-coding them
extern "C" __global__ void bench_chains(uint32_t* out)
{ out[0] = FR_BENCH_CHAINS; out[1] = FP_BENCH_CHAINS; out[2] = FP2_BENCH_CHAINS; }
