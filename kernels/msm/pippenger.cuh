// cuzk: Pippenger MSM kernels, templated on the coordinate field (fp_t for G1, fp2_t for G2).
//
// Pipeline for one batch of n (point, scalar) pairs (crates/msm/src/gpu.rs drives it):
//  0. identity_bits  once per resident point set: which points are the identity
//  1. prepare     scalars Montgomery -> canonical (0 where the point is the identity); count
//                 "general" scalars (neither 0 nor 1). Or, for scalars made canonical once
//                 (to_canonical) and read in place by every MSM: count only, and steps 2-4 and
//                 9 read them as zero where the point is the identity
//  2-4. sort     signed c-bit digits of every general scalar, key = window * B + (|digit| - 1),
//                 B = 2^(c-1) buckets per window; entries (point index | sign << 31) grouped by
//                 key in `sorted`, offsets[key] = exclusive prefix of the per-key counts. With
//                 precomputed copies of the points (sort.cuh fold_t) window w uses bucket set
//                 w mod sets and copy w / sets; "window" in steps 5-10 then means bucket set.
//                 The binned sort of msm/sort.cuh: bins of 2^F keys (histogram, scan of
//                 msm/scan.cuh, scatter), then a shared-memory sort per bin.
//  5. accumulate  each thread takes an equal slice of the sorted entries (perfect balance even
//                 when all scalars share a bucket) and sums runs of equal key with XYZZ mixed
//                 additions; runs strictly inside its slice are written to their bucket (owned:
//                 no atomics), the first and last runs become "partials" (key, XYZZ)
//  6. merge       partials sorted by key, reduced the same way K at a time, until one thread
//                 handles everything that is left and writes every run
//  7. reduce      per window, groups of L buckets: T_g = sum_j (j - gL + 1) S_j + gL * sum_j S_j
//                 (empty keys by their offsets: buckets are never zeroed)
//  8. sum_halves  tree sums (window sums, and the ones)
//  9. ones        points whose scalar is one are summed by plain mixed additions, never sorted
// 10. to_jacobian window sums and the ones sum in blst's Jacobian layout; the host does the
//                 final sum_w 2^(cw) W_w.
// Kernels never allocate; every buffer is passed in. Identity: affine (0,0), XYZZ ZZ = 0.
#pragma once

#include "../ff/bls12_381.cuh"
#include "../ec/bls12_381.cuh"
#include "scan.cuh"
#include "sort.cuh"

namespace cuzk {
namespace msm {

#define MSM_GRID_STRIDE(i, n) \
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// counters[] slots written by prepare
static constexpr int CNT_GENERAL = 0;
static constexpr int CNT_ONES = 1;

// Scalar digits (is_general, digit_key, ...) and the binned sort (steps 2-4): sort.cuh.

// 0. Once per point set: bits[i / 32] bit i % 32 = points[i] is the identity (one ballot per
// warp; the grid-stride step is a multiple of 32, so whole warps run each round).
template <class F>
__device__ __forceinline__ void identity_bits(const affine_t<F>* points, uint32_t n, uint32_t* bits)
{
    MSM_GRID_STRIDE(i, (n + 31) & ~31u)
    {
        const uint32_t b = __ballot_sync(0xffffffffu, i < n && points[i].is_inf());
        if ((i & 31) == 0) bits[i >> 5] = b;
    }
}

// Warp-aggregated counting: one atomic per warp and counter.
__device__ __forceinline__ void add_counts(uint32_t general, uint32_t ones, uint32_t* counters)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        general += __shfl_down_sync(0xffffffffu, general, o);
        ones += __shfl_down_sync(0xffffffffu, ones, o);
    }
    if ((threadIdx.x & 31) == 0) {
        if (general) atomicAdd(&counters[CNT_GENERAL], general);
        if (ones) atomicAdd(&counters[CNT_ONES], ones);
    }
}

// 1. in (Montgomery) -> out (canonical); in == out allowed (each element read before written).
// skip (may be null): identity bits of the points (step 0), scalar i pairs with bit skip_at + i;
// the scalar of an identity point becomes 0, so it is never sorted or added.
__device__ __forceinline__ void prepare(const fr_t* in, fr_t* out, uint32_t n, uint32_t* counters,
                                        const uint32_t* skip, uint32_t skip_at)
{
    uint32_t general = 0, ones = 0;
    MSM_GRID_STRIDE(i, n)
    {
        fr_t s = in[i].to_canonical();
        if (skip != nullptr) {
            const uint32_t j = skip_at + i;
            if ((skip[j >> 5] >> (j & 31)) & 1u) s = fr_t::zero();
        }
        out[i] = s;
        general += is_general(s);
        ones += is_one_canonical(s);
    }
    add_counts(general, ones, counters);
}

// 1'. The counts of prepare for scalars already canonical, read where they lie (sc: msm/sort.cuh
// scalars_t); nothing is written but the counters.
__device__ __forceinline__ void count(scalars_t<fr_t> sc, uint32_t n, uint32_t* counters)
{
    uint32_t general = 0, ones = 0;
    MSM_GRID_STRIDE(i, n)
    {
        if (sc.identity(i)) continue;
        const fr_t s = sc.canon[i];
        general += is_general(s);
        ones += is_one_canonical(s);
    }
    add_counts(general, ones, counters);
}

// Scalars Montgomery -> canonical in place, once for every MSM that reads them (count, sort).
__device__ __forceinline__ void to_canonical(fr_t* s, uint32_t n)
{
    MSM_GRID_STRIDE(i, n) { s[i] = s[i].to_canonical(); }
}

// Largest k in [0, nkeys) with offsets[k] <= pos < offsets[k+1] (pos < offsets[nkeys]).
__device__ __forceinline__ uint32_t key_of(const uint32_t* offsets, uint32_t nkeys, uint32_t pos)
{
    uint32_t lo = 0, hi = nkeys;   // invariant: offsets[lo] <= pos < offsets[hi]
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) >> 1;
        if (offsets[mid] <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}

// Where the runs of one thread's slice go: the first and last to partials[2t], [2t+1] (they may
// continue in the neighbours' slices), the ones in between to their bucket. With `final` set
// (one thread sees everything) every run goes to its bucket.
template <class F>
struct run_sink {
    xyzz_t<F>* buckets;
    uint32_t* pkeys;
    xyzz_t<F>* ppts;
    uint32_t t;
    uint32_t nkeys;
    bool final_level;
    bool first_done;

    __device__ __forceinline__ void run_end(uint32_t key, const xyzz_t<F>& acc)
    {
        key = min(key, nkeys);   // corrupt input lands in the dump slot, never out of bounds
        if (final_level || first_done) {
            buckets[key] = acc;
        } else {
            pkeys[2 * t] = key;
            ppts[2 * t] = acc;
            first_done = true;
        }
    }
    __device__ __forceinline__ void slice_end(uint32_t key, const xyzz_t<F>& acc)
    {
        key = min(key, nkeys);
        if (final_level) {
            buckets[key] = acc;
            return;
        }
        if (!first_done) {
            pkeys[2 * t] = key;
            ppts[2 * t] = xyzz_t<F>::inf();
        }
        pkeys[2 * t + 1] = key;
        ppts[2 * t + 1] = acc;
    }
};

// 5. Level 0: thread t of nthreads sums sorted[t*E/T, (t+1)*E/T) (E = offsets[nkeys]).
// Empty slices emit identity partials keyed so that the partial array stays sorted: the key of
// the next entry, or the dump key nkeys past the end (buckets has nkeys + 1 slots).
// PAIRED: the mixed additions as paired out-of-line products (xyzz_t::add_affine_paired).
template <class F, bool PAIRED = false>
__device__ __forceinline__ void accumulate(const affine_t<F>* points, uint32_t npoints, const uint32_t* sorted,
                                           uint32_t cap, const uint32_t* offsets, uint32_t nkeys, uint32_t nthreads,
                                           uint32_t* pkeys, xyzz_t<F>* ppts, xyzz_t<F>* buckets)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    const uint32_t E = min(offsets[nkeys], cap);
    const uint32_t s = (uint32_t)((uint64_t)E * t / nthreads);
    const uint32_t e = (uint32_t)((uint64_t)E * (t + 1) / nthreads);
    if (s == e) {
        uint32_t key = s < E ? key_of(offsets, nkeys, s) : nkeys;
        pkeys[2 * t] = pkeys[2 * t + 1] = key;
        ppts[2 * t] = ppts[2 * t + 1] = xyzz_t<F>::inf();
        return;
    }
    run_sink<F> sink{buckets, pkeys, ppts, t, nkeys, false, false};
    uint32_t key = key_of(offsets, nkeys, s);
    uint32_t next = offsets[key + 1];
    xyzz_t<F> acc = xyzz_t<F>::inf();
    for (uint32_t pos = s; pos < e; pos++) {
        if (pos == next) {
            sink.run_end(key, acc);
            acc = xyzz_t<F>::inf();
            do {
                key++;
                next = key < nkeys ? offsets[key + 1] : E;
            } while (next == pos && key < nkeys);   // skip empty keys
        }
        uint32_t entry = sorted[pos];
        uint32_t idx = entry & ~SIGN_BIT;
        if (idx < npoints) {
            const affine_t<F> q = points[idx].cneg((entry & SIGN_BIT) != 0);
            if constexpr (PAIRED) acc = acc.add_affine_paired(q);
            else acc = acc.add_affine(q);
        }
    }
    sink.slice_end(key, acc);
}

// 6. Level >= 1: thread t sums in[t*K, min((t+1)*K, count)) of the key-sorted partials.
template <class F>
__device__ __forceinline__ void merge(const uint32_t* in_keys, const xyzz_t<F>* in_pts, uint32_t count, uint32_t K,
                                      uint32_t* pkeys, xyzz_t<F>* ppts, xyzz_t<F>* buckets, uint32_t nkeys,
                                      uint32_t final_level)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t s = t * K;
    if (s >= count) return;
    const uint32_t e = min(count, s + K);
    run_sink<F> sink{buckets, pkeys, ppts, t, nkeys, final_level != 0, false};
    uint32_t key = in_keys[s];
    xyzz_t<F> acc = in_pts[s];
    for (uint32_t i = s + 1; i < e; i++) {
        uint32_t k = in_keys[i];
        if (k != key) {
            sink.run_end(key, acc);
            key = k;
            acc = in_pts[i];
        } else {
            acc = acc.add(in_pts[i]);
        }
    }
    sink.slice_end(key, acc);
}

// 7. Thread (w, g), g < G = ceil(B / L): buckets w*B + [gL, min(gL + L, B)) (the last group of
// a window may be shorter) with weights j + 1, into out[w*G + g]. A key without entries
// (offsets[k] == offsets[k + 1]) counts as the identity: its bucket was never written (buckets
// are not zeroed; steps 5-6 write every other key's bucket exactly once).
template <class F>
__device__ __forceinline__ void bucket_reduce(const xyzz_t<F>* buckets, const uint32_t* offsets, uint32_t B,
                                              uint32_t nwin, uint32_t L, xyzz_t<F>* out)
{
    const uint32_t G = (B + L - 1) / L;
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nwin * G) return;
    const uint32_t w = t / G, g = t % G;
    const size_t k0 = (size_t)w * B + (size_t)g * L;
    const xyzz_t<F>* b = buckets + k0;
    const uint32_t* off = offsets + k0;
    const uint32_t len = min(L, B - g * L);
    uint32_t hi = off[len];
    if (off[0] == hi) {
        // No entries (e.g. past the keys the top window can reach): no ladder to run.
        out[t] = xyzz_t<F>::inf();
        return;
    }
    xyzz_t<F> run = xyzz_t<F>::inf(), acc = xyzz_t<F>::inf();
    for (int j = (int)len - 1; j >= 0; j--) {
        const uint32_t lo = off[j];
        if (lo != hi) run = run.add(b[j]);
        hi = lo;
        acc = acc.add(run);
    }
    // acc += (g*L) * run by double-and-add from the top bit
    uint32_t m = g * L;
    if (m != 0) {
        xyzz_t<F> mul = xyzz_t<F>::inf();
        for (int bit = 31 - __clz(m); bit >= 0; bit--) {
            mul = mul.dbl();
            if ((m >> bit) & 1) mul = mul.add(run);
        }
        acc = acc.add(mul);
    }
    out[t] = acc;
}

// 8. One tree step in each of nseg segments of `stride`: p[i] += p[rest + i], i < count/2,
// rest = count - count/2 (the new count).
template <class F>
__device__ __forceinline__ void sum_halves(xyzz_t<F>* pts, uint32_t stride, uint32_t nseg, uint32_t count)
{
    const uint32_t half = count / 2, rest = count - half;
    MSM_GRID_STRIDE(i, nseg * half)
    {
        uint32_t seg = i / half, j = i % half;
        xyzz_t<F>* p = pts + (size_t)seg * stride;
        p[j] = p[j].add(p[rest + j]);
    }
}

// 9. Thread t of nthreads: sum of points[i] with scalar one (sc: msm/sort.cuh scalars_t),
// i = t, t + nthreads, ...
template <class F>
__device__ __forceinline__ void ones(const affine_t<F>* points, scalars_t<fr_t> sc, uint32_t n, uint32_t nthreads,
                                     xyzz_t<F>* out)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nthreads) return;
    xyzz_t<F> acc = xyzz_t<F>::inf();
    for (uint32_t i = t; i < n; i += nthreads)
        if (sc.one(i)) acc = acc.add_affine(points[i]);
    out[t] = acc;
}

// Precomputed copies (msm/sort.cuh fold_t): out[i] = [2^k] in[i] in XYZZ, i < n (the next
// copy before its affine conversion, kernels/ec/batch_affine.cuh). The identity stays the
// identity (dbl maps ZZ = 0 to ZZ = 0).
template <class F>
__device__ __forceinline__ void double_points(const affine_t<F>* in, uint32_t n, uint32_t k, xyzz_t<F>* out)
{
    MSM_GRID_STRIDE(i, n)
    {
        xyzz_t<F> p = xyzz_t<F>::from_affine(in[i]);
#pragma unroll 1
        for (uint32_t j = 0; j < k; j++) p = p.dbl();
        out[i] = p;
    }
}

// 10. out[out_base + s] = in[s * stride] as Jacobian (blst layout), s < nseg.
template <class F>
__device__ __forceinline__ void to_jacobian(const xyzz_t<F>* in, uint32_t stride, uint32_t nseg, jacobian_t<F>* out,
                                            uint32_t out_base)
{
    MSM_GRID_STRIDE(s, nseg) { out[out_base + s] = in[(size_t)s * stride].to_jacobian(); }
}

} // namespace msm
} // namespace cuzk
