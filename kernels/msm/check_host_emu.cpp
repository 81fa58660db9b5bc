// Host check of kernels/msm/check.cu without a GPU: g++ compiles the kernels with the PTX carry
// instructions emulated (CUZK_HOST_EMU, see ff/ptx.cuh) on the shared CUDA-on-the-host shim.
// Inputs come from the ignored test `host_emu_subgroup_check` in crates/msm/src/subgroup.rs:
// affine points (g1.bin, g2.bin) and cuzk-field's verdict per point (g1.ok, g2.ok: one byte each).
//   emu <dir>  -> exit status 0 iff every point's verdict and each kernel's first failing index
//                 match.
#define CUZK_HOST_EMU 1
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
// ptx.cuh first: its host-emulation block defines __device__, __align__ and friends.
#include "ff/ptx.cuh"
#include "host_emu/cuda_host.h"
#define __global__
#define __launch_bounds__(x)
#define __noinline__
#include "check.cu"
#include "host_emu/files.h"
template <class A, class IN, class K>
int check(const char* pts, const char* oks, IN in, K kernel) {
    auto p = load<A>(pts);
    auto ok = load<uint8_t>(oks);
    if (p.size() != ok.size()) { fprintf(stderr, "%s: %zu points, %zu verdicts\n", pts, p.size(), ok.size()); exit(2); }
    int bad = 0, members = 0;
    uint32_t expect_first = UINT32_MAX;
    for (uint32_t i = 0; i < p.size(); i++) {
        const bool got = in(p[i]);
        members += got;
        if (got != (ok[i] != 0) && bad++ < 5) printf("%s: point %u: kernel says %d, cuzk-field %d\n", pts, i, got, ok[i]);
        if (!ok[i] && expect_first == UINT32_MAX) expect_first = i;
    }
    uint32_t first = UINT32_MAX;
    const uint32_t n = p.size();
    // Fewer threads than points: the grid-stride loop is exercised too.
    launch(3, 8, [&] { kernel(&first, p.data(), n); });
    if (first != expect_first) { bad++; printf("%s: kernel's first failing index %u, expected %u\n", pts, first, expect_first); }
    printf("%s: %u points, %d in the subgroup, %d mismatches\n", pts, n, members, bad);
    return bad;
}
int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: emu <dir>\n"); return 2; }
    emu_dir = argv[1];
    int bad = check<g1_affine_t>("g1.bin", "g1.ok", g1_in_subgroup, cuzk_check_g1_subgroup);
    bad += check<g2_affine_t>("g2.bin", "g2.ok", g2_in_subgroup, cuzk_check_g2_subgroup);
    return bad != 0;
}
