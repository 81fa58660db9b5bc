// Host run of the NTT CUDA sources (kernels/ntt.cu, unchanged) without a GPU: g++ with the
// field's PTX emulation (CUZK_HOST_EMU), one std::thread per CUDA thread of a block, a
// std::barrier for __syncthreads, blocks run one after another. Test vectors (table buffer,
// plan, input, CPU result) come from cuzk-ntt: see run.sh. Checks bit-exact equality.
#define CUZK_HOST_EMU 1
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

struct uint4 { uint32_t x, y, z, w; };
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }
struct dim3_t { uint32_t x = 0, y = 0, z = 0; };
static thread_local dim3_t threadIdx, blockIdx;
static dim3_t blockDim, gridDim;
static std::barrier<>* g_bar = nullptr;
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline uint4 __ldg(const uint4* p) { return *p; }
inline uint32_t __brev(uint32_t x)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
namespace cuzk { namespace ntt {
alignas(16) uint4 smem[2 * 4096];   // the dynamic shared memory of one block (<= 128 KiB)
} }
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __host__
#include "../../ntt.cu"

using namespace cuzk;

static std::vector<uint8_t> slurp(const std::string& p)
{
    std::ifstream f(p, std::ios::binary);
    if (!f) { fprintf(stderr, "cannot read %s\n", p.c_str()); exit(2); }
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {});
}

// Runs body for every block of grid (gx, gy) with bx threads per block.
static void launch(uint32_t gx, uint32_t gy, uint32_t bx, const std::function<void()>& body)
{
    std::barrier<> bar(bx);
    g_bar = &bar;
    blockDim = {bx, 1, 1};
    gridDim = {gx, gy, 1};
    std::vector<std::thread> th;
    for (uint32_t t = 0; t < bx; t++) {
        th.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            for (uint32_t y = 0; y < gy; y++)
                for (uint32_t x = 0; x < gx; x++) {
                    blockIdx = {x, y, 0};
                    body();
                    bar.arrive_and_wait();   // block boundary (kernels may return early)
                }
        });
    }
    for (auto& t : th) t.join();
}

static void permute(fr_t* d, uint32_t lg_n, uint32_t batch)
{
    if (lg_n >= 10)
        launch(1u << (lg_n - 10), batch, 256, [&] { cuzk_ntt_bit_reverse_tiled(d, lg_n); });
    else
        launch(4, batch, 32, [&] { cuzk_ntt_bit_reverse(d, lg_n); });
}

// Parses "id lg_n batch pre post np (r4 s0 k lg_c flags)*" and runs it on d.
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
static void run(const case_t& c, fr_t* d, const fr_t* tables)
{
    const uint32_t lg_n = c.lg_n, batch = c.batch;
    if (c.pre) permute(d, lg_n, batch);
    for (size_t i = 0; i < c.p.size(); i += 5) {
        uint32_t r4 = c.p[i], s0 = c.p[i + 1], k = c.p[i + 2], lg_c = c.p[i + 3], flags = c.p[i + 4];
        uint32_t tile_lg = k + lg_c;
        if (r4 == 2)
            launch(1u << (lg_n - tile_lg), batch, 1u << (tile_lg - 3),
                   [&] { cuzk_ntt_pass_wide(d, tables, lg_n, s0, k, lg_c, flags); });
        else if (r4)
            launch(1u << (lg_n - tile_lg), batch, 1u << (tile_lg - 2),
                   [&] { cuzk_ntt_pass4(d, tables, lg_n, s0, k, lg_c, flags); });
        else
            launch(1u << (lg_n - tile_lg), batch, 1u << (tile_lg - 1),
                   [&] { cuzk_ntt_pass(d, tables, lg_n, s0, k, lg_c, flags); });
    }
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
    int bad = 0, runs = 0;
    while (std::getline(cases, line)) {
        bool ok;
        std::string what;
        if (line.rfind("q ", 0) == 0) {
            // Quotient: inputs' passes, the point-wise kernel, the result's passes + permutation.
            std::istringstream l1(line.substr(2));
            case_t fwd = parse(l1);
            std::getline(cases, line);
            std::istringstream l2(line.substr(2));
            case_t back = parse(l2);
            const std::string id = std::to_string(fwd.id);
            auto a = load(dir + "/a" + id + ".bin"), b = load(dir + "/b" + id + ".bin"),
                 c = load(dir + "/c" + id + ".bin"), want = load(dir + "/want" + id + ".bin");
            for (auto* v : {&a, &b, &c}) run(fwd, v->data(), tables);
            const uint32_t n = 1u << fwd.lg_n;
            launch((n + 255) / 256, 1, 256, [&] { cuzk_ntt_quotient(a.data(), b.data(), c.data(), tables, fwd.lg_n); });
            run(back, a.data(), tables);
            ok = memcmp(a.data(), want.data(), 32 * want.size()) == 0 && want.size() == n;
            what = "quotient " + id + " 2^" + std::to_string(fwd.lg_n) + fwd.desc + " |" + back.desc;
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
    printf("%d runs, %d mismatches\n", runs, bad);
    return bad || !runs ? 1 : 0;
}
