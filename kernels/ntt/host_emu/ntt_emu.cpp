// Host run of the NTT CUDA sources (kernels/ntt/ntt.cu, unchanged) without a GPU: g++ with the
// field's PTX emulation (CUZK_HOST_EMU), one std::thread per CUDA thread of a block, a
// sleeping barrier for __syncthreads, blocks run one after another (kernels/host_emu/cuda_host.h). Test vectors (table buffer,
// plan, input, CPU result) come from cuzk-ntt: see run.sh. Checks bit-exact equality.
#define CUZK_HOST_EMU 1
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

// ptx.cuh first: its host-emulation block defines __device__, __align__ and friends.
#include "ff/ptx.cuh"
#include "../../host_emu/cuda_host.h"

struct uint4 { uint32_t x, y, z, w; };
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
inline uint4 __ldg(const uint4* p) { return *p; }
inline uint32_t __brev(uint32_t x)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
namespace cuzk { namespace ntt {
alignas(16) uint4 smem[2 * 1024];   // the dynamic shared memory of one block (<= 32 KiB)
} }
#define __global__
#define __launch_bounds__(...)
#define __host__
#include "../ntt.cu"

using namespace cuzk;

// The reference the specialized kernels are checked against: the same pass with every flag read
// at run time (ntt::pass<4> without SPEC), which no launch uses.
static void pass4_generic(fr_t* d, fr_t* d1, fr_t* d2, const fr_t* t, const fr_t* r, uint32_t lg_n, uint32_t s0,
                          uint32_t k, uint32_t lg_c, uint32_t flags)
{
    ntt::pass<4>(d, d1, d2, t, r, lg_n, s0, k, lg_c, flags);
}

static std::vector<uint8_t> slurp(const std::string& p)
{
    std::ifstream f(p, std::ios::binary);
    if (!f) { fprintf(stderr, "cannot read %s\n", p.c_str()); exit(2); }
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {});
}

// The specialized radix-4 kernel for a pass's flags (mirror of specialized_name in
// crates/ntt/src/kernels.rs), counted per name: every variant must run at least once.
typedef void (*pass_fn)(fr_t*, fr_t*, fr_t*, const fr_t*, const fr_t*, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t);
struct spec_t { const char* name; pass_fn f; uint64_t runs; };
static spec_t g_spec[] = {
    {"cuzk_ntt_pass4_dif", cuzk_ntt_pass4_dif, 0},
    {"cuzk_ntt_pass4_dif_pre", cuzk_ntt_pass4_dif_pre, 0},
    {"cuzk_ntt_pass4_dif_post", cuzk_ntt_pass4_dif_post, 0},
    {"cuzk_ntt_pass4_dif_tw", cuzk_ntt_pass4_dif_tw, 0},
    {"cuzk_ntt_pass4_dif_tw_pre", cuzk_ntt_pass4_dif_tw_pre, 0},
    {"cuzk_ntt_pass4_dit", cuzk_ntt_pass4_dit, 0},
    {"cuzk_ntt_pass4_dit_pre", cuzk_ntt_pass4_dit_pre, 0},
    {"cuzk_ntt_pass4_dit_post", cuzk_ntt_pass4_dit_post, 0},
    {"cuzk_ntt_pass4_dit_tw", cuzk_ntt_pass4_dit_tw, 0},
    {"cuzk_ntt_pass4_dit_tw_pre", cuzk_ntt_pass4_dit_tw_pre, 0},
};
static spec_t* specialized(uint32_t flags)
{
    using namespace cuzk::ntt;
    const bool dit = flags & F_DIT, tw = flags & F_TWIDDLE;
    const bool pre = flags & (F_PRE_G | F_PRE_GI | F_PRE_NINV);
    const bool post = flags & (F_POST_G | F_POST_GI | F_POST_NINV | F_POST_ROW);
    // No kernel covers both scalings, or the twiddle with post-scaling (no plan makes them).
    if ((pre && post) || (tw && post)) return nullptr;
    const std::string name = std::string("cuzk_ntt_pass4_") + (dit ? "dit" : "dif") + (tw ? "_tw" : "") +
                             (pre ? "_pre" : "") + (post ? "_post" : "");
    for (auto& sp : g_spec)
        if (name == sp.name) return &sp;
    fprintf(stderr, "no kernel %s\n", name.c_str());
    exit(2);
}

static void permute(fr_t* d, uint32_t lg_n, uint32_t batch)
{
    if (lg_n >= 10)
        launch_grid(1u << (lg_n - 10), batch, 256, [&] { cuzk_ntt_bit_reverse_tiled(d, lg_n); });
    else
        launch_grid(4, batch, 32, [&] { cuzk_ntt_bit_reverse(d, lg_n); });
}

// Parses "id lg_n batch pre post np (r4 s0 k lg_c flags)*" and runs it on d; r4: 0 radix-2,
// 1 the radix-4 kernel specialized for the pass's flags.
struct case_t {
    uint32_t id, lg_n, batch, pre, post;
    std::vector<uint32_t> p;   // 5 per pass
    std::string desc;
};
static case_t parse(std::istringstream& ls)
{
    case_t c;
    uint32_t np;
    ls >> c.id >> c.lg_n >> c.batch >> c.pre >> c.post >> np;
    c.p.resize(5 * np);
    for (auto& x : c.p) ls >> x;
    for (uint32_t i = 0; i < np; i++) {
        c.desc += " [";
        for (int j = 0; j < 5; j++) c.desc += std::to_string(c.p[5 * i + j]) + (j < 4 ? " " : "]");
    }
    return c;
}
// Polynomial y of a contiguous batch at d (the launchers' data1/data2 arguments; addresses only).
static fr_t* poly_at(fr_t* d, uint32_t y, uint32_t lg_n)
{
    return reinterpret_cast<fr_t*>(reinterpret_cast<uintptr_t>(d) + ((uintptr_t)y << (lg_n + 5)));
}
// Runs the case's passes on the polynomials ps[0..2] (poly_base): one contiguous batch of
// c.batch at ps[0] (ps[1], ps[2] its polynomials 1 and 2), or (c.batch = 3) three buffers.
static void run_passes(const case_t& c, fr_t* const ps[3], uint32_t batch, const fr_t* tables)
{
    const uint32_t lg_n = c.lg_n;
    fr_t *d = ps[0], *d1 = ps[1], *d2 = ps[2];
    for (size_t i = 0; i < c.p.size(); i += 5) {
        uint32_t r4 = c.p[i], s0 = c.p[i + 1], k = c.p[i + 2], lg_c = c.p[i + 3], flags = c.p[i + 4];
        uint32_t tile_lg = k + lg_c;
        if (r4) {
            spec_t* sp = specialized(flags);
            if (!sp) { fprintf(stderr, "no kernel for flags %#x\n", flags); exit(2); }
            sp->runs++;
            launch_grid(1u << (lg_n - tile_lg), batch, 1u << (tile_lg - 2),
                   [&] { sp->f(d, d1, d2, tables, nullptr, lg_n, s0, k, lg_c, flags); });
        } else
            launch_grid(1u << (lg_n - tile_lg), batch, 1u << (tile_lg - 1),
                   [&] { cuzk_ntt_pass(d, d1, d2, tables, nullptr, lg_n, s0, k, lg_c, flags); });
    }
}
static void run(const case_t& c, fr_t* d, const fr_t* tables)
{
    const uint32_t lg_n = c.lg_n, batch = c.batch;
    fr_t* const ps[3] = {d, poly_at(d, 1, lg_n), poly_at(d, 2, lg_n)};
    if (c.pre) permute(d, lg_n, batch);
    run_passes(c, ps, batch, tables);
    if (c.post) permute(d, lg_n, batch);
}
static std::vector<fr_t> load(const std::string& p)
{
    auto b = slurp(p);
    std::vector<fr_t> v(b.size() / 32);
    memcpy(v.data(), b.data(), b.size());
    return v;
}

int main(int argc, char** argv)
{
    std::string dir = argc > 1 ? argv[1] : "/tmp/ntt_dump";
    auto tb = slurp(dir + "/tables.bin");
    if (tb.size() != (size_t)ntt::T_LEN * 32) { fprintf(stderr, "table size %zu != %u\n", tb.size() / 32, ntt::T_LEN); return 2; }
    const fr_t* tables = reinterpret_cast<const fr_t*>(tb.data());
    std::ifstream cases(dir + "/cases.txt");
    std::string line;
    int bad = 0, runs = 0, folded = 0;
    while (std::getline(cases, line)) {
        bool ok;
        std::string what;
        if (line.rfind("Q ", 0) == 0) {
            // The H pipeline (half-root coset): the inputs' passes once over a, b, c (grid.y = 3,
            // three buffers), the fused quotient (a*b - n*c)*K with bit-reversed output
            // (element-wise, and tiled from 2^10: both results checked), the DIT back passes.
            std::istringstream l1(line.substr(2));
            case_t fwd = parse(l1);
            std::getline(cases, line);
            std::istringstream l2(line.substr(2));
            case_t back = parse(l2);
            const std::string id = std::to_string(fwd.id);
            auto a = load(dir + "/a" + id + ".bin"), b = load(dir + "/b" + id + ".bin"),
                 c = load(dir + "/c" + id + ".bin"), want = load(dir + "/want" + id + ".bin");
            const uint32_t lg_n = fwd.lg_n, n = 1u << lg_n;
            // The quotient's constants folded into to_coeffs' last store (F_TW_FOLD): a*b - c.
            uint32_t fold = 0;
            for (size_t i = 4; i < fwd.p.size(); i += 5) fold |= (fwd.p[i] & ntt::F_TW_FOLD) != 0;
            fr_t* const ps[3] = {a.data(), b.data(), c.data()};
            run_passes(fwd, ps, 3, tables);
            auto a2 = a;
            ok = want.size() == n;
            for (int tiled = 0; tiled < 2; tiled++) {
                if (tiled && lg_n < 10) continue;
                auto& x = tiled ? a : a2;
                if (tiled)
                    launch_grid(1u << (lg_n - 10), 1, 256,
                           [&] { cuzk_ntt_quotient_bitrev_tiled(x.data(), b.data(), c.data(), tables, lg_n, fold); });
                else
                    launch_grid((n + 255) / 256 < 4 ? (n + 255) / 256 : 4, 1, 256,
                           [&] { cuzk_ntt_quotient_bitrev(x.data(), b.data(), c.data(), tables, lg_n, fold); });
                run(back, x.data(), tables);
                const bool ok1 = ok && memcmp(x.data(), want.data(), 32 * want.size()) == 0;
                printf("fused quotient %s%s 2^%u%s |%s: %s\n", tiled ? "tiled" : "element-wise",
                       fold ? " folded" : "", lg_n, fwd.desc.c_str(), back.desc.c_str(), ok1 ? "ok" : "MISMATCH");
                folded += fold;
                bad += !ok1;
                runs++;
            }
            fflush(stdout);
            continue;
        } else {
            std::istringstream ls(line);
            case_t c = parse(ls);
            auto data = load(dir + "/in" + std::to_string(c.id) + ".bin");
            auto want = load(dir + "/want" + std::to_string(c.id) + ".bin");
            run(c, data.data(), tables);
            ok = memcmp(data.data(), want.data(), 32 * want.size()) == 0 && want.size() == data.size();
            what = "case " + std::to_string(c.id) + " 2^" + std::to_string(c.lg_n) + " batch " +
                   std::to_string(c.batch) + " pre " + std::to_string(c.pre) + " post " +
                   std::to_string(c.post) + c.desc;
        }
        printf("%s: %s\n", what.c_str(), ok ? "ok" : "MISMATCH");
        fflush(stdout);
        bad += !ok;
        runs++;
    }
    // Every flag set of the first 9 bits (inverse, scalings and direction included), and the
    // half-root and twiddle-direction bits (F_ODD_ROW, F_ODD_COL, F_POST_ROW, F_TW_INV: all 16
    // combinations; F_TW_INV only with F_TWIDDLE) with each of the direction/inverse/twiddle
    // bits and no scaling, g^i or g^-i/n, on the specialized kernel the launcher picks against
    // the generic pass (pass4_generic), bit for bit, at an even and an odd k (the lone h = 1 stage),
    // canonical input (table values). Every set with F_TWIDDLE runs with two store-side
    // twiddle geometries (tk, tr): the pass's own (a DIF pass's twiddle) and another (that of
    // the next DIT pass, s0' = s0 - tk, tr = R + k, or an arbitrary one where s0 = 0), so row
    // and column of the twiddle cross the tile's. 2^15: scaling indices with a HI part (idx >=
    // 2^14) for every scaling combination.
    // Geometries "lg_n s0 k lg_c batch tk tr" (the second twiddle geometry).
    const uint32_t geo[][7] = {
        {8, 2, 4, 2, 2, 2, 6}, {9, 1, 5, 1, 2, 1, 8}, {7, 0, 7, 0, 2, 3, 4}, {15, 11, 2, 2, 1, 11, 4}};
    int sweep_bad = 0, sweeps = 0;
    for (auto& gm : geo) {
        const uint32_t lg_n = gm[0], s0 = gm[1], k = gm[2], lg_c = gm[3], batch = gm[4], tile_lg = k + lg_c;
        std::vector<fr_t> x((size_t)batch << lg_n);
        for (size_t i = 0; i < x.size(); i++) x[i] = tables[(i * 7919 + lg_n) % ntt::T_LEN];
        for (uint32_t flags0 = 0; flags0 <= ntt::F_ALL; flags0++)
        for (uint32_t tg = 0; tg < 2; tg++) {
            // F_TW_FOLD has its own geometry (below), and runs in the "Q" cases.
            if (flags0 & ntt::F_TW_FOLD) continue;
            const uint32_t scal = flags0 & 0x1f8u;
            if ((flags0 >> 9) && scal != 0 && scal != ntt::F_PRE_G && scal != (ntt::F_POST_GI | ntt::F_POST_NINV))
                continue;
            const bool tw = flags0 & ntt::F_TWIDDLE;
            if ((!tw && (tg || (flags0 & ntt::F_TW_INV))))
                continue;
            const uint32_t flags = flags0 | (!tw ? 0 : tg ? ntt::tw_geometry(gm[5], gm[6])
                                                           : ntt::tw_geometry(k, lg_n - s0 - k));
            spec_t* sp = specialized(flags);
            if (!sp) continue;   // no launch has these flags
            auto a = x, b = x;
            sp->runs++;
            launch_grid(1u << (lg_n - tile_lg), batch, 1u << (tile_lg - 2),
                   [&] { pass4_generic(a.data(), poly_at(a.data(), 1, lg_n), poly_at(a.data(), 2, lg_n), tables, nullptr,
                                       lg_n, s0, k, lg_c, flags); });
            launch_grid(1u << (lg_n - tile_lg), batch, 1u << (tile_lg - 2),
                   [&] { sp->f(b.data(), poly_at(b.data(), 1, lg_n), poly_at(b.data(), 2, lg_n), tables, nullptr, lg_n, s0,
                               k, lg_c, flags); });
            const bool ok = memcmp(a.data(), b.data(), 32 * a.size()) == 0;
            if (!ok) printf("sweep 2^%u s0 %u k %u lg_c %u flags %#x %s: MISMATCH\n", lg_n, s0, k, lg_c, flags, sp->name);
            sweep_bad += !ok;
            sweeps++;
        }
    }
    // F_TW_FOLD: the H pipeline's to_coeffs' last store (R = 0, odd rows, forward, grid.y = 3)
    // on the DIF kernels, at k = 2..10, specialized against generic.
    for (uint32_t k = 2; k <= 10; k++) {
        const uint32_t lg_n = 12, s0 = lg_n - k, lg_c = 0, batch = 3;
        std::vector<fr_t> x((size_t)batch << lg_n);
        for (size_t i = 0; i < x.size(); i++) x[i] = tables[(i * 7919 + k) % ntt::T_LEN];
        for (uint32_t inv = 0; inv < 2; inv++) {
            const uint32_t flags = (inv ? ntt::F_INVERSE : 0) | ntt::F_TWIDDLE | ntt::F_ODD_ROW | ntt::F_TW_FOLD |
                                   ntt::tw_geometry(k, 0);
            auto a = x, b = x;
            spec_t* sp = specialized(flags);
            sp->runs++;
            launch_grid(1u << (lg_n - k - lg_c), batch, 1u << (k + lg_c - 2),
                   [&] { pass4_generic(a.data(), poly_at(a.data(), 1, lg_n), poly_at(a.data(), 2, lg_n), tables, nullptr,
                                       lg_n, s0, k, lg_c, flags); });
            launch_grid(1u << (lg_n - k - lg_c), batch, 1u << (k + lg_c - 2),
                   [&] { sp->f(b.data(), poly_at(b.data(), 1, lg_n), poly_at(b.data(), 2, lg_n), tables, nullptr, lg_n, s0,
                               k, lg_c, flags); });
            const bool ok = memcmp(a.data(), b.data(), 32 * a.size()) == 0;
            if (!ok) printf("fold sweep k %u flags %#x %s: MISMATCH\n", k, flags, sp->name);
            sweep_bad += !ok;
            sweeps++;
        }
    }
    printf("specialized vs generic pass sweep: %d runs, %d mismatches\n", sweeps, sweep_bad);
    printf("quotient runs with the folded constants: %d\n", folded);
    int unused = 0;
    for (auto& sp : g_spec) {
        printf("  %-28s %llu launches\n", sp.name, (unsigned long long)sp.runs);
        unused += sp.runs == 0;
    }
    printf("%d runs, %d mismatches\n", runs, bad);
    return bad || sweep_bad || unused || !runs || !folded ? 1 : 0;
}
