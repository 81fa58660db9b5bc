// cuzk: signed-digit keys of the MSM scalars and the binned counting sort (steps 2-4 of
// msm/pippenger.cuh). No field code: templated on the scalar type S (fr_t on the device: 8 u32
// limbs in s.v[], canonical, s.is_zero()), so kernels/msm/host_emu can run it on the host.
//
// Binned sort:
//   bins of 2^F consecutive keys (fine key = the low F bits), except in the top window: 2^Ft
//   keys, Ft <= F (bin_map). The host (crates/msm/src/gpu.rs) picks F for ~4K entries in a
//   typical bin and Ft for the top window's smaller digit range (scalars < r: e.g. at c = 20 only
//   ~2^14.9 of its 2^19 digit values occur, so its keys are ~17x fuller). F, Ft <= c - 1: bins
//   never straddle windows.
//   a. sort_bin_histogram  bin_counts[bin] += 1 per entry (fire-and-forget atomics into an
//                          L2-resident array of nbins words); sort_bin_histogram_smem, the
//                          same counts through per-block 16-bit shared counters (large n)
//   b. scan                (msm/scan.cuh) bin_counts -> bin_off[0..=nbins] and bin cursors
//   c. sort_bin_scatter    sorted[bin_cur[bin]++] = entry | fine << idxbits: one atomic per
//                          entry on nbins cursors (L2-resident, not one per key) and
//                          stores to nbins write fronts (~32 B each, L2-resident, so partial
//                          sectors merge in L2 instead of going to DRAM one word at a time)
//   d. sort_fine           block per bin, in place: a bin of at most SORT_TILE entries goes to
//                          shared memory, its 2^F fine keys are counted and scanned there, and it
//                          is written back grouped by key; offsets[key] = bin base + local prefix
//                          for all of the bin's keys (no global per-key histogram or scan).
//                          A larger bin (top window with a small digit range, equal scalars) is
//                          only counted: offsets and cursors of its keys are written, flag[0]
//                          records the lowest window with such a bin
//   e. sort_oversize       only if flag[0] != 0: recomputes the digits of every scalar and puts
//                          the entries of oversized bins at cursors[key]++ (global atomics,
//                          only for those keys); their regions are not read
//                          again after d, so the overwrite in place is safe.
// entry = point index | sign << 31; the index fits idxbits bits (every index < 2^idxbits) and
// the host keeps F + idxbits <= 31, so the fine key travels in the entry itself (no side array).
//
// Precomputed copies (window folding, fold_t): the points are stored `copies` times, copy j
// holding [2^(c * sets * j)] P_i at index i + stride * j. Window w of scalar i then uses point
// i + stride * (w / sets) and bucket set w mod sets: key = (w mod sets) * 2^(c-1) + |digit| - 1,
// sets * 2^(c-1) keys for all windows. Unfolded: sets = nwin (key = w * 2^(c-1) + |digit| - 1,
// index i). "Window" below (bins, flag) means bucket set; with sets < nwin every set holds a
// non-top window, so all sets span the full digit range and the host passes Ft = F.
#pragma once

#include <cstdint>

#include "scan.cuh"

namespace cuzk {
namespace msm {

static constexpr uint32_t SIGN_BIT = 0x80000000u;
static constexpr uint32_t SORT_TILE = CUZK_MSM_BIN_TILE;                    // entries of a bin sorted in shared memory
static constexpr uint32_t SORT_MAX_FINE_BITS = CUZK_MSM_BIN_MAX_FINE_BITS;  // 2^F shared counters per bin
static constexpr uint32_t SORT_FINE_THREADS = CUZK_MSM_BIN_FINE_THREADS;    // threads of sort_fine
static constexpr uint32_t SORT_BATCH = 4;            // windows whose atomics are issued together

// Windows -> bucket sets and point copies (see above).
struct fold_t {
    uint32_t sets, stride;
};

// Walks the windows of one scalar in order: the bucket set and point index of window w.
struct window_walk {
    uint32_t set, index;

    __device__ __forceinline__ window_walk(uint32_t i) : set(0), index(i) {}
    __device__ __forceinline__ void next(const fold_t& f)
    {
        if (++set == f.sets) {
            set = 0;
            index += f.stride;
        }
    }
};

// Key <-> bin: sets below the top one in bins of 2^F keys, the top set in bins of 2^Ft.
struct bin_map {
    uint32_t F, Ft, top_key, split;   // top_key: first key of the top set; split: its first bin

    __device__ __forceinline__ bin_map(uint32_t c, uint32_t nsets, uint32_t F_, uint32_t Ft_)
        : F(F_), Ft(Ft_), top_key((nsets - 1) << (c - 1)), split(((nsets - 1) << (c - 1)) >> F_)
    {
    }
    __device__ __forceinline__ bool top(uint32_t key) const { return key >= top_key; }
    __device__ __forceinline__ uint32_t bin(uint32_t key) const
    {
        return top(key) ? split + ((key - top_key) >> Ft) : key >> F;
    }
    __device__ __forceinline__ uint32_t fine(uint32_t key) const { return key & ((1u << (top(key) ? Ft : F)) - 1); }
    __device__ __forceinline__ uint32_t first_key(uint32_t b) const
    {
        return b < split ? b << F : top_key + ((b - split) << Ft);
    }
    __device__ __forceinline__ uint32_t fine_bits(uint32_t b) const { return b < split ? F : Ft; }
};

template <class S>
__device__ __forceinline__ bool is_one_canonical(const S& s)
{
    uint32_t acc = s.v[0] ^ 1u;
#pragma unroll
    for (int i = 1; i < 8; i++) acc |= s.v[i];
    return acc == 0;
}

template <class S>
__device__ __forceinline__ bool is_general(const S& s) { return !s.is_zero() && !is_one_canonical(s); }

// The scalars a sort pass reads: canonical, and scalar i read as zero where `skip` (null: none)
// marks its point as the identity (bit skip_at + i; msm/pippenger.cuh identity_bits). The MSM
// then reads a caller's canonical scalars where they lie, with no per-query copy.
template <class S>
struct scalars_t {
    const S* canon;
    const uint32_t* skip;
    uint32_t skip_at;

    __device__ __forceinline__ bool identity(uint32_t i) const
    {
        if (skip == nullptr) return false;
        const uint32_t j = skip_at + i;
        return (skip[j >> 5] >> (j & 31)) & 1u;
    }
    // Scalar i into s; whether it is sorted (general, its point not the identity).
    __device__ __forceinline__ bool general(uint32_t i, S& s) const
    {
        if (identity(i)) return false;
        s = canon[i];
        return is_general(s);
    }
    __device__ __forceinline__ bool one(uint32_t i) const { return !identity(i) && is_one_canonical(canon[i]); }
};

// Bits [off, off + c) of a 256-bit little-endian integer (c <= 31); zero beyond bit 255.
template <class S>
__device__ __forceinline__ uint32_t get_bits(const S& s, uint32_t off, uint32_t c)
{
    uint32_t limb = off >> 5, sh = off & 31;
    uint32_t lo = limb < 8 ? s.v[limb] : 0;
    uint32_t hi = limb + 1 < 8 ? s.v[limb + 1] : 0;
    return __funnelshift_r(lo, hi, sh) & ((1u << c) - 1);
}

// Signed digit of window w given the carry from window w-1: digit in (-2^(c-1), 2^(c-1)].
// Returns the digit's key in bucket set `set` (or ~0u for a zero digit) and updates carry;
// *neg is the sign.
template <class S>
__device__ __forceinline__ uint32_t digit_key(const S& s, uint32_t w, uint32_t set, uint32_t c, uint32_t& carry,
                                              bool& neg)
{
    const uint32_t half = 1u << (c - 1);
    uint32_t v = get_bits(s, w * c, c) + carry;
    if (v > half) {
        carry = 1;
        v = (1u << c) - v;   // |v - 2^c|, 0 when v == 2^c
        neg = true;
    } else {
        carry = 0;
        neg = false;
    }
    return v == 0 ? ~0u : set * half + (v - 1);
}

// visit(index, set, key, neg) for every non-zero digit of every sorted scalar sc[i] of
// this thread (grid-stride over i; index: the point of the digit's copy), windows in order
// (each window's carry feeds the next).
template <class S, class Visit>
__device__ __forceinline__ void for_each_digit(scalars_t<S> sc, uint32_t n, uint32_t c, uint32_t nwin, fold_t f,
                                               Visit&& visit)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        S s;
        if (!sc.general(i, s)) continue;
        uint32_t carry = 0;
        window_walk at(i);
        for (uint32_t w = 0; w < nwin; w++, at.next(f)) {
            bool neg;
            const uint32_t key = digit_key(s, w, at.set, c, carry, neg);
            if (key != ~0u) visit(at.index, at.set, key, neg);
        }
    }
}

// a. bin_counts[bin] += 1 per entry; bin_counts zeroed by the caller. Also clears flag[0]
// for step d (stream order: nothing reads it before d).
template <class S>
__device__ __forceinline__ void sort_bin_histogram(scalars_t<S> sc, uint32_t n, uint32_t c, uint32_t nwin, fold_t f,
                                                   uint32_t F, uint32_t Ft, uint32_t* bin_counts, uint32_t* flag)
{
    const bin_map m(c, f.sets, F, Ft);
    if (blockIdx.x == 0 && threadIdx.x == 0) flag[0] = 0;
    for_each_digit(sc, n, c, nwin, f,
                   [&](uint32_t, uint32_t, uint32_t key, bool) { atomicAdd(&bin_counts[m.bin(key)], 1u); });
}

// a, shared-memory form (used where one set group's bins fit; the host picks): the bins of
// bucket sets [s0, s1) (blockIdx.y = group, s0 = group * spg) are counted in 16-bit shared
// counters, two per word, over chunks of `chunk` scalars per block; after each chunk every
// non-zero counter goes to bin_counts with one global atomic, about nbins atomics per chunk
// instead of one per entry. A counter takes at most one entry per scalar and copy (bins never
// straddle sets; a set holds one window per copy), so the host keeps chunk * copies <= 65535.
// Bins past the `ncnt` shared counters (only the top window's unreachable digits, i.e.
// non-canonical input) take a global atomic directly.
// sh: ceil(ncnt / 2) words of dynamic shared memory. Same bin_counts as sort_bin_histogram.
template <class S>
__device__ __forceinline__ void sort_bin_histogram_smem(scalars_t<S> sc, uint32_t n, uint32_t c, uint32_t nwin,
                                                        fold_t f, uint32_t F, uint32_t Ft, uint32_t spg,
                                                        uint32_t ncnt, uint32_t chunk, uint32_t* bin_counts,
                                                        uint32_t* flag, uint32_t* sh)
{
    const bin_map m(c, f.sets, F, Ft);
    const uint32_t half = 1u << (c - 1);
    const uint32_t s0 = blockIdx.y * spg, s1 = min(f.sets, s0 + spg);
    const uint32_t b0 = m.bin(s0 * half);
    const uint32_t b1 = s1 == f.sets ? m.split + (half >> Ft) : m.bin(s1 * half);
    const uint32_t used = min(b1 - b0, ncnt), words = (used + 1) / 2;
    // the last window whose set is below s1, plus one (unfolded: s1)
    const uint32_t wend = min(nwin, (nwin - 1) / f.sets * f.sets + s1);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) flag[0] = 0;
    for (uint32_t base = blockIdx.x * chunk; base < n; base += gridDim.x * chunk) {
        for (uint32_t j = threadIdx.x; j < words; j += blockDim.x) sh[j] = 0;
        __syncthreads();
        const uint32_t end = min(n, base + chunk);
        for (uint32_t i = base + threadIdx.x; i < end; i += blockDim.x) {
            S s;
            if (!sc.general(i, s)) continue;
            uint32_t carry = 0;
            window_walk at(i);
            for (uint32_t w = 0; w < wend; w++, at.next(f)) {   // other sets only for the carry
                bool neg;
                const uint32_t key = digit_key(s, w, at.set, c, carry, neg);
                if (at.set < s0 || at.set >= s1 || key == ~0u) continue;
                const uint32_t b = m.bin(key) - b0;
                if (b < used) atomicAdd(&sh[b >> 1], (b & 1) ? 0x10000u : 1u);
                else atomicAdd(&bin_counts[b0 + b], 1u);
            }
        }
        __syncthreads();
        for (uint32_t j = threadIdx.x; j < words; j += blockDim.x) {
            const uint32_t v = sh[j];
            if (v & 0xffffu) atomicAdd(&bin_counts[b0 + 2 * j], v & 0xffffu);
            if (v >> 16) atomicAdd(&bin_counts[b0 + 2 * j + 1], v >> 16);
        }
        __syncthreads();   // the counters are zeroed again for the next chunk
    }
}

// c. Coarse scatter into the bins (bin_cur = exclusive prefix of the bin counts). The atomics
// of SORT_BATCH windows are issued before their stores, so they overlap.
template <class S>
__device__ __forceinline__ void sort_bin_scatter(scalars_t<S> sc, uint32_t n, uint32_t c, uint32_t nwin, fold_t f,
                                                 uint32_t F, uint32_t Ft, uint32_t idxbits, uint32_t* bin_cur,
                                                 uint32_t* sorted, uint32_t cap)
{
    const bin_map m(c, f.sets, F, Ft);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        S s;
        if (!sc.general(i, s)) continue;
        uint32_t carry = 0;
        window_walk at(i);
        for (uint32_t w0 = 0; w0 < nwin; w0 += SORT_BATCH) {
            uint32_t key[SORT_BATCH], pos[SORT_BATCH], idx[SORT_BATCH];
            bool neg[SORT_BATCH];
#pragma unroll
            for (uint32_t j = 0; j < SORT_BATCH; j++) {
                neg[j] = false;
                idx[j] = at.index;
                key[j] = w0 + j < nwin ? digit_key(s, w0 + j, at.set, c, carry, neg[j]) : ~0u;
                at.next(f);
            }
#pragma unroll
            for (uint32_t j = 0; j < SORT_BATCH; j++)
                pos[j] = key[j] != ~0u ? atomicAdd(&bin_cur[m.bin(key[j])], 1u) : ~0u;
#pragma unroll
            for (uint32_t j = 0; j < SORT_BATCH; j++)
                if (pos[j] < cap)   // cap: memory safety only (~0u never passes)
                    sorted[pos[j]] = idx[j] | (neg[j] ? SIGN_BIT : 0u) | (m.fine(key[j]) << idxbits);
        }
    }
}

// d. One block (SORT_FINE_THREADS threads) per bin b, blocks striding over the nbins bins.
// bin_off[0..=nbins] from step b; offsets[0..=nkeys] are written here (offsets[nkeys] = total
// by the last bin). Oversized bins also get cursors[key] = offsets[key] and raise flag[0] to
// at least nsets - (their bucket set).
__device__ __forceinline__ void sort_fine(const uint32_t* bin_off, uint32_t nbins, uint32_t F, uint32_t Ft,
                                          uint32_t idxbits, uint32_t c, uint32_t nsets, uint32_t* sorted,
                                          uint32_t cap, uint32_t* offsets, uint32_t* cursors, uint32_t* flag)
{
    const bin_map m(c, nsets, F, Ft);
    __shared__ uint32_t ent[SORT_TILE];
    __shared__ uint32_t cnt[1u << SORT_MAX_FINE_BITS];
    __shared__ uint32_t sh[SORT_FINE_THREADS];
    const uint32_t t = threadIdx.x, T = blockDim.x;
    for (uint32_t b = blockIdx.x; b < nbins; b += gridDim.x) {
        const uint32_t nf = 1u << m.fine_bits(b), fmask = nf - 1, clear = ~(fmask << idxbits);
        const uint32_t k0 = m.first_key(b);   // the bin's keys: k0 + [0, nf)
        // corrupt offsets (never from a real run) shrink to an empty or capped range
        const uint32_t lo = min(bin_off[b], cap);
        const uint32_t hi = min(max(bin_off[b + 1], lo), cap);
        const uint32_t S = hi - lo;
        if (S == 0) {   // uniform per block: no shared memory touched, no barrier needed
            for (uint32_t j = t; j < nf; j += T) offsets[k0 + j] = lo;
            if (t == 0 && b == nbins - 1) offsets[k0 + nf] = hi;
            continue;
        }
        const bool fits = S <= SORT_TILE;
        for (uint32_t j = t; j < nf; j += T) cnt[j] = 0;
        __syncthreads();
        for (uint32_t i = t; i < S; i += T) {
            const uint32_t p = sorted[lo + i];
            if (fits) ent[i] = p;
            atomicAdd(&cnt[(p >> idxbits) & fmask], 1u);
        }
        __syncthreads();
        // exclusive scan of the nf counts: `per` consecutive ones per thread, then the block
        const uint32_t per = (nf + T - 1) / T;
        const uint32_t j0 = min(nf, t * per), j1 = min(nf, j0 + per);
        uint32_t sum = 0;
        for (uint32_t j = j0; j < j1; j++) sum += cnt[j];
        uint32_t run = block_inclusive_scan(sum, sh) - sum;
        for (uint32_t j = j0; j < j1; j++) {
            const uint32_t k = cnt[j];
            const uint32_t key = k0 + j;
            offsets[key] = lo + run;
            if (!fits) cursors[key] = lo + run;
            cnt[j] = run;
            run += k;
        }
        if (t == 0) {
            if (b == nbins - 1) offsets[k0 + nf] = hi;
            if (!fits) atomicMax(flag, nsets - (k0 >> (c - 1)));
        }
        __syncthreads();
        if (fits) {
            for (uint32_t i = t; i < S; i += T) {
                const uint32_t p = ent[i];
                const uint32_t r = atomicAdd(&cnt[(p >> idxbits) & fmask], 1u);   // r < S
                sorted[lo + r] = p & clear;
            }
        }
        __syncthreads();   // shared arrays are reused by the next bin
    }
}

// e. Entries of bins larger than SORT_TILE (bin_counts from step a), sets >= the lowest such
// set (flag[0] = nsets - that set; 0: none, every thread returns at once).
template <class S>
__device__ __forceinline__ void sort_oversize(scalars_t<S> sc, uint32_t n, uint32_t c, uint32_t nwin, fold_t f,
                                              uint32_t F, uint32_t Ft, const uint32_t* bin_counts,
                                              const uint32_t* flag, uint32_t* cursors, uint32_t* sorted, uint32_t cap)
{
    const uint32_t fl = flag[0];
    if (fl == 0) return;
    const bin_map m(c, f.sets, F, Ft);
    const uint32_t smin = f.sets - min(fl, f.sets);
    for_each_digit(sc, n, c, nwin, f, [&](uint32_t idx, uint32_t set, uint32_t key, bool neg) {
        if (set < smin || bin_counts[m.bin(key)] <= SORT_TILE) return;
        const uint32_t pos = atomicAdd(&cursors[key], 1u);
        if (pos < cap) sorted[pos] = idx | (neg ? SIGN_BIT : 0u);
    });
}

} // namespace msm
} // namespace cuzk
