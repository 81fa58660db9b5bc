// Host run of the binned MSM sort (kernels/msm/sort.cuh + scan.cuh, unchanged) without a GPU,
// on the cuda_host.h shim; launched in the order of crates/msm/src/kernels.rs `bin_sort` (fewer
// blocks than on the GPU, so every grid-stride and bin-stride loop turns).
// Compares offsets[0..=nkeys] and every key's entry multiset with a host reference (the
// definition of the old per-key sort), and checks nothing is written past `cap` / offsets[nkeys].
// Unfolded (one bucket set per window) and folded (precomputed copies: window w in set w mod
// sets, point i + stride * (w / sets)), including strides that push the index bits to 30-31;
// some cases with identity bits (scalars_t skip) at an offset, whose scalars must be left out.
// Usage: sort_emu
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "../../host_emu/cuda_host.h"
#include "../sort.cuh"

using namespace cuzk::msm;

struct scalar_t {
    uint32_t v[8];
    bool is_zero() const
    {
        uint32_t a = 0;
        for (uint32_t x : v) a |= x;
        return a == 0;
    }
};


static uint32_t index_bits(uint32_t n) { return n <= 1 ? 0 : 32 - __builtin_clz(n - 1); }

// r = the BLS12-381 scalar modulus; top limb 0x73eda753
static const uint32_t R[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                              0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};

static scalar_t rand_below_r(std::mt19937& rng)
{
    scalar_t s;
    for (auto& x : s.v) x = rng();
    s.v[7] %= R[7];   // below r (ignoring the lower limbs is enough: top limb < r's)
    return s;
}

enum Kind { RANDOM, SPARSE, EQUAL, SMALL, ZERO_ONE, MIXED };
static const char* kname[] = {"random", "sparse", "equal", "small", "zero-one", "mixed"};

static std::vector<scalar_t> make(uint32_t n, Kind k, std::mt19937& rng)
{
    std::vector<scalar_t> v(n);
    scalar_t eq = rand_below_r(rng);
    for (auto& s : v) {
        s = {};
        switch (k) {
        case RANDOM: s = rand_below_r(rng); break;
        case SPARSE: {   // 50% zero, 40% one, 10% full width
            uint32_t r = rng() % 10;
            if (r >= 5 && r < 9) s.v[0] = 1;
            if (r == 9) s = rand_below_r(rng);
            break;
        }
        case EQUAL: s = eq; break;
        case SMALL: s.v[0] = rng() % 4096; break;   // small range: low windows only
        case ZERO_ONE: s.v[0] = rng() & 1; break;   // no entries at all
        case MIXED: {   // sparse-ish scalars: a few set limbs, some equal to eq
            uint32_t r = rng() % 4;
            if (r == 0) s = eq;
            else if (r == 1) s.v[rng() % 8] = rng() & (r == 1 ? 0x3fffffff : ~0u);
            else s = rand_below_r(rng);
            break;
        }
        }
    }
    return v;
}

struct Ref {
    std::vector<uint32_t> offsets;                 // nkeys + 1
    std::vector<std::vector<uint32_t>> entries;    // per key, sorted
};

// Identity bits at offset SKIP_AT: scalar i pairs with bit SKIP_AT + i (empty: no bits).
static constexpr uint32_t SKIP_AT = 37;
using Bits = std::vector<uint32_t>;

static bool skipped(const Bits& bits, uint32_t i)
{
    return !bits.empty() && ((bits[(SKIP_AT + i) >> 5] >> ((SKIP_AT + i) & 31)) & 1u);
}

// Folding parameters written out: key = (w mod sets) * 2^(c-1) + |d| - 1, index i + stride * (w / sets).
static Ref reference(const std::vector<scalar_t>& sc, const Bits& bits, uint32_t c, uint32_t nwin, fold_t f)
{
    const uint32_t nkeys = f.sets << (c - 1);
    Ref r;
    r.entries.assign(nkeys, {});
    for (uint32_t i = 0; i < sc.size(); i++) {
        if (!is_general(sc[i]) || skipped(bits, i)) continue;
        uint32_t carry = 0;
        for (uint32_t w = 0; w < nwin; w++) {
            bool neg;
            uint32_t key = digit_key(sc[i], w, w % f.sets, c, carry, neg);
            if (key != ~0u) r.entries[key].push_back((i + f.stride * (w / f.sets)) | (neg ? SIGN_BIT : 0u));
        }
    }
    r.offsets.resize(nkeys + 1);
    uint32_t run = 0;
    for (uint32_t k = 0; k < nkeys; k++) {
        r.offsets[k] = run;
        run += r.entries[k].size();
        std::sort(r.entries[k].begin(), r.entries[k].end());
    }
    r.offsets[nkeys] = run;
    return r;
}

static constexpr uint32_t POISON = 0xdeadbeefu;

// One binned sort as msm.rs launches it; returns the number of mismatches.
static int run(const std::vector<scalar_t>& raw, const Bits& bits, uint32_t c, fold_t fo, uint32_t F, uint32_t Ft,
               const Ref& ref, bool& oversized, uint32_t fine_threads)
{
    const scalars_t<scalar_t> sc{raw.data(), bits.empty() ? nullptr : bits.data(), SKIP_AT};
    const uint32_t n = raw.size(), nwin = (256 + c - 1) / c, sets = fo.sets, nkeys = sets << (c - 1);
    const uint32_t copies = (nwin + sets - 1) / sets;
    const uint32_t nbins = ((sets - 1) << (c - 1 - F)) + (1u << (c - 1 - Ft));
    const uint32_t idxbits = index_bits(n + fo.stride * (copies - 1));
    uint32_t general = 0;
    for (uint32_t i = 0; i < n; i++) general += is_general(raw[i]) && !skipped(bits, i);
    const uint32_t cap = std::max(1u, general * nwin);
    std::vector<uint32_t> counts(nkeys, 0), bins(nbins + 2, POISON), cursors(nkeys + 1, POISON),
        offsets(nkeys + 2, POISON), sorted(cap + 2, POISON);
    uint32_t* flag = &bins[nbins + 1];
    const uint32_t blocks = 3, threads = 64;   // small grid: every stride loop turns
    launch(blocks, threads, [&] { sort_bin_histogram(sc, n, c, nwin, fo, F, Ft, counts.data(), flag); });
    // The shared-memory histogram (sort_bin_histogram_smem) gives the same counts: set groups
    // of 1, 2 and all sets, shared counters for every bin of the largest group and for half
    // of them (the rest through global atomics), chunks short enough that blocks loop.
    {
        const uint32_t half = 1u << (c - 1), top_bins = half >> Ft, low_bins = half >> F;
        for (uint32_t spg : {1u, 2u, sets}) {
            const uint32_t groups = (sets + spg - 1) / spg;
            uint32_t most = 0;
            for (uint32_t s0 = 0; s0 < sets; s0 += spg) {
                const uint32_t s1 = std::min(sets, s0 + spg);
                most = std::max(most, (s1 - s0 - (s1 == sets)) * low_bins + (s1 == sets ? top_bins : 0));
            }
            for (uint32_t ncnt : {most, std::max(1u, most / 2)}) {
                std::vector<uint32_t> got(nbins, 0), sh((ncnt + 1) / 2, POISON);
                uint32_t fl = POISON;
                const uint32_t chunk = std::max(1u, n / 5);
                launch(2, threads, [&] {
                    sort_bin_histogram_smem(sc, n, c, nwin, fo, F, Ft, spg, ncnt, chunk, got.data(), &fl,
                                            sh.data());
                }, groups);
                if (got != std::vector<uint32_t>(counts.begin(), counts.begin() + nbins) || fl != 0) {
                    printf("  shared-memory histogram differs (spg %u, counters %u)\n", spg, ncnt);
                    return 1;
                }
            }
        }
    }
    const uint32_t tiles = (nbins + SCAN_TILE - 1) / SCAN_TILE;
    launch(tiles, SCAN_TILE, [&] { scan_tile_sums(counts.data(), nbins, cursors.data()); });
    launch(1, SCAN_TOP_THREADS, [&] { scan_tile_bases(nbins, bins.data(), cursors.data()); });
    launch(tiles, SCAN_TILE, [&] { scan_tiles(counts.data(), nbins, bins.data(), cursors.data()); });
    launch(blocks, threads, [&] {
        sort_bin_scatter(sc, n, c, nwin, fo, F, Ft, idxbits, cursors.data(), sorted.data(), cap);
    });
    // usually 32 of the kernel's 256 threads (it uses blockDim.x): keeps the emulation fast,
    // and each thread then scans several fine counters (nf > blockDim.x for F > 5)
    launch(std::min(nbins, 5u), fine_threads, [&] {
        sort_fine(bins.data(), nbins, F, Ft, idxbits, c, sets, sorted.data(), cap, offsets.data(), cursors.data(), flag);
    });
    oversized = *flag != 0;
    launch(blocks, threads, [&] {
        sort_oversize(sc, n, c, nwin, fo, F, Ft, counts.data(), flag, cursors.data(), sorted.data(), cap);
    });
    int bad = 0;
    for (uint32_t k = 0; k <= nkeys && bad < 5; k++)
        if (offsets[k] != ref.offsets[k]) {
            printf("  offsets[%u] = %u want %u\n", k, offsets[k], ref.offsets[k]);
            bad++;
        }
    if (offsets[nkeys + 1] != POISON || sorted[cap] != POISON || sorted[cap + 1] != POISON) {
        printf("  wrote past the end\n");
        bad++;
    }
    if (bad) return bad;
    for (uint32_t k = 0; k < nkeys && bad < 5; k++) {
        std::vector<uint32_t> got(sorted.begin() + offsets[k], sorted.begin() + offsets[k + 1]);
        std::sort(got.begin(), got.end());
        if (got != ref.entries[k]) {
            printf("  key %u: entries differ (%zu vs %zu)\n", k, got.size(), ref.entries[k].size());
            bad++;
        }
    }
    return bad;
}

int main()
{
    std::mt19937 rng(11);
    // copies = 1: unfolded; stride 0: the scalar count (as a context of n points)
    struct Case { uint32_t n; Kind k; uint32_t c; uint32_t copies = 1; uint32_t stride = 0; bool skip = false; };
    std::vector<Case> cases;
    for (uint32_t c : {2u, 7u, 13u})
        for (Kind k : {RANDOM, SPARSE, EQUAL, SMALL, ZERO_ONE, MIXED}) cases.push_back({c == 2 ? 300u : 3001u, k, c});
    cases.push_back({3001, RANDOM, 16});
    cases.push_back({3001, MIXED, 10});
    cases.push_back({9000, EQUAL, 16});    // one key per window holds 9000 > SORT_TILE entries
    cases.push_back({9000, EQUAL, 10});
    cases.push_back({40000, RANDOM, 13});  // dense: the top window (17x fuller keys) oversized at Ft = F
    cases.push_back({20000, SMALL, 20});   // c = 20: 13 windows, 6.8 M keys, only window 0 used
    cases.push_back({100, RANDOM, 22});    // largest window of the plan (MAX_WINDOW_BITS)
    cases.push_back({1, RANDOM, 10});
    cases.push_back({2, EQUAL, 5});
    // Folded: 2 and 3 copies and full folding (one set), n * copies just past / at a power of
    // two (index bits one more than n's / equal), strides that leave 1 or 0 fine bits
    for (Kind k : {RANDOM, SPARSE, EQUAL, SMALL, MIXED}) {
        cases.push_back({2049, k, 13, 2});   // 4098 indices: 13 bits
        cases.push_back({2048, k, 13, 2});   // 4096: 12 bits
        cases.push_back({1366, k, 7, 3});    // 4098
        cases.push_back({1001, k, 10, 26});  // 26 windows in one set
    }
    cases.push_back({3001, RANDOM, 7, 37});       // c = 7: 37 windows, one set
    cases.push_back({9000, EQUAL, 16, 2});        // oversized bins in both folded sets
    cases.push_back({3000, EQUAL, 13, 20});       // 20 windows of equal digits in one set: oversized
    cases.push_back({20000, RANDOM, 20, 2});      // c = 20: 7 sets
    cases.push_back({5000, RANDOM, 20, 13});      // c = 20, full folding
    cases.push_back({3001, MIXED, 13, 2, (1u << 30) - 4000});   // indices < 2^30: F <= 1
    cases.push_back({3001, RANDOM, 11, 3, 1u << 29});           // indices up to 2^30 + 3000: 31 bits, F = 0
    cases.push_back({1, RANDOM, 10, 2});
    // identity bits: unfolded, folded, oversized bins, the shared-memory histogram's sizes
    cases.push_back({3001, RANDOM, 13, 1, 0, true});
    cases.push_back({3001, MIXED, 7, 1, 0, true});
    cases.push_back({9000, EQUAL, 16, 1, 0, true});
    cases.push_back({2049, SPARSE, 13, 2, 0, true});
    cases.push_back({5000, RANDOM, 20, 13, 0, true});
    int bad = 0, runs = 0, over = 0;
    for (auto& cs : cases) {
        auto sc = make(cs.n, cs.k, rng);
        Bits bits;
        if (cs.skip) {   // a quarter of the points the identity
            bits.assign((SKIP_AT + cs.n + 31) / 32, 0);
            for (uint32_t i = 0; i < cs.n; i++)
                if (rng() % 4 == 0) bits[(SKIP_AT + i) >> 5] |= 1u << ((SKIP_AT + i) & 31);
        }
        const uint32_t nwin = (256 + cs.c - 1) / cs.c;
        const uint32_t sets = (nwin + cs.copies - 1) / cs.copies;
        const uint32_t copies = (nwin + sets - 1) / sets;
        const fold_t fo{sets, copies == 1 ? 0u : (cs.stride ? cs.stride : cs.n)};
        Ref ref = reference(sc, bits, cs.c, nwin, fo);
        const uint32_t fmax =
            std::min({cs.c - 1, SORT_MAX_FINE_BITS, 31 - index_bits(cs.n + fo.stride * (copies - 1))});
        // (F, Ft): the largest, a smaller top window (as the plan picks when unfolded; folded
        // plans keep Ft = F, but the kernels accept either), the middle, and F = 0 only for
        // small c (one key per bin: many emulated blocks)
        std::vector<std::pair<uint32_t, uint32_t>> fs = {{fmax, fmax}, {fmax, fmax >= 4 ? fmax - 4 : 0}};
        if (cs.c <= 13) fs.push_back({fmax / 2 + 1, fmax / 2});
        if (cs.c <= 7) fs.push_back({0, 0});
        for (auto& f : fs) f = {std::min(f.first, fmax), std::min(f.second, fmax)};
        std::sort(fs.begin(), fs.end());
        fs.erase(std::unique(fs.begin(), fs.end()), fs.end());
        for (auto [F, Ft] : fs) {
            bool ov = false;
            // the GPU's 256 threads for the oversized cases
            int b = run(sc, bits, cs.c, fo, F, Ft, ref, ov, cs.n == 9000 ? SORT_FINE_THREADS : 32);
            printf("n %u %s%s c %u sets %u copies %u stride %u F %u Ft %u entries %u%s: %s\n", cs.n, kname[cs.k],
                   cs.skip ? " skip" : "", cs.c, sets, copies, fo.stride, F, Ft, ref.offsets.back(),
                   ov ? " (oversized bins)" : "", b ? "FAIL" : "ok");
            fflush(stdout);
            bad += b != 0;
            over += ov;
            runs++;
        }
    }
    if (over == 0) { printf("no case had an oversized bin\n"); bad++; }
    printf("%s: %d of %d runs mismatching (%d with oversized bins)\n", bad ? "FAIL" : "PASS", bad, runs, over);
    return bad != 0;
}
