// Host check of kernels/groth16/setup.cu without a GPU: g++ compiles the kernels with the PTX carry
// instructions emulated (CUZK_HOST_EMU, see ff/ptx.cuh) and runs every thread in a loop.
// Inputs come from the ignored test `host_emu_setup_kernels` in crates/groth16/src/kernels.rs, which
// writes a window table, scalars and blst's products to a folder and runs this program:
//   emu <dir> <window>  -> exit status 0 iff all G1 and G2 products match bit for bit.
#define CUZK_HOST_EMU 1
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstring>
#include <cstdlib>
#define __device__
#define __constant__
#define __align__(x) alignas(x)
#define __noinline__
#define __global__
#define __launch_bounds__(x)
#define __forceinline__ inline
struct dim3e { unsigned x; };
static dim3e blockIdx, blockDim, gridDim, threadIdx;
using std::min;
#include "ff/ptx.cuh"
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t s)
{ return (uint32_t)((((uint64_t)hi << 32) | lo) >> (s & 31)); }
#include "setup.cu"
#include "host_emu/files.h"
template <class K> void run(K k, unsigned grid, unsigned block) {
    gridDim.x = grid; blockDim.x = block;
    for (unsigned b = 0; b < grid; b++) for (unsigned t = 0; t < block; t++) { blockIdx.x = b; threadIdx.x = t; k(); }
}
int main(int argc, char** argv) {
    if (argc != 3) { fprintf(stderr, "usage: emu <dir> <window>\n"); return 2; }
    emu_dir = argv[1];
    const uint32_t w = (uint32_t)atoi(argv[2]), windows = (255 + w - 1) / w;
    auto sc = load<fr_t>("sc.bin");
    auto t1 = load<g1_affine_t>("t1.bin");
    auto t2 = load<g2_affine_t>("t2.bin");
    auto e1 = load<g1_affine_t>("e1.bin");
    auto e2 = load<g2_affine_t>("e2.bin");
    uint32_t n = sc.size();
    std::vector<g1_xyzz_t> x1(n); std::vector<g1_affine_t> o1(n);
    std::vector<g2_xyzz_t> x2(n); std::vector<g2_affine_t> o2(n);
    run([&] { cuzk_setup_g1_mul(x1.data(), sc.data(), t1.data(), n, w, windows); }, 3, 64);
    run([&] { cuzk_setup_g2_mul(x2.data(), sc.data(), t2.data(), n, w, windows); }, 2, 128);
    unsigned thr = (n + 31) / 32;
    run([&] { cuzk_setup_g1_to_affine(o1.data(), x1.data(), n, 32); }, (thr + 7) / 8, 8);
    run([&] { cuzk_setup_g2_to_affine(o2.data(), x2.data(), n, 32); }, (thr + 3) / 4, 4);
    int bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (memcmp(&o1[i], &e1[i], sizeof(g1_affine_t))) { if (bad++ < 5) printf("G1 mismatch %u\n", i); }
        if (memcmp(&o2[i], &e2[i], sizeof(g2_affine_t))) { if (bad++ < 5) printf("G2 mismatch %u\n", i); }
    }
    printf("%u scalars, %d mismatches\n", n, bad);
    return bad != 0;
}
