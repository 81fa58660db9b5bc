// Host check of kernels/groth16/evaluate.cu without a GPU: g++ compiles the kernels with the PTX
// carry instructions emulated (CUZK_HOST_EMU, see ff/ptx.cuh) and runs every thread in a loop.
// Inputs come from the ignored test `host_emu_evaluate_kernels` in crates/groth16/src/kernels.rs:
// the three matrices of an R1CS ({a,b,c}_{ptr,cols,ids,coeffs}.bin), each matrix's long rows
// ({a,b,c}_long.bin), z, the CPU's evaluations ({a,b,c}_expected.bin) and, as arguments, rows,
// n, each matrix's ids of 1 and -1, the CPU's first unsatisfied row (or 4294967295) and the
// short-row length:
//   emu <dir> <rows> <n> <one_a> <minus_one_a> <one_b> <minus_one_b> <one_c> <minus_one_c> <bad>
//       <short>
// -> exit status 0 iff every evaluation and the first bad row match bit for bit.
#define CUZK_HOST_EMU 1
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
// ptx.cuh first: its host-emulation block defines __device__, __align__ and friends.
#include "ff/ptx.cuh"
#include "host_emu/cuda_host.h"
#define __global__
#define __launch_bounds__(x)
#define __noinline__
#define __restrict__
#include "evaluate.cu"
#include "host_emu/files.h"
int main(int argc, char** argv) {
    if (argc != 12) { fprintf(stderr, "usage: emu <dir> <rows> <n> <ids x6> <bad> <short>\n"); return 2; }
    emu_dir = argv[1];
    const uint32_t rows = strtoul(argv[2], 0, 10), n = strtoul(argv[3], 0, 10);
    const uint32_t bad_want = strtoul(argv[10], 0, 10), short_len = strtoul(argv[11], 0, 10);
    auto z = load<fr_t>("z.bin");
    const char* names[3] = {"a", "b", "c"};
    std::vector<fr_t> out[3];
    int bad = 0;
    for (int m = 0; m < 3; m++) {
        char f[64];
        snprintf(f, sizeof f, "%s_ptr.bin", names[m]); auto ptr = load<uint32_t>(f);
        snprintf(f, sizeof f, "%s_cols.bin", names[m]); auto cols = load<uint32_t>(f);
        snprintf(f, sizeof f, "%s_ids.bin", names[m]); auto ids = load<uint32_t>(f);
        snprintf(f, sizeof f, "%s_coeffs.bin", names[m]); auto coeffs = load<fr_t>(f);
        snprintf(f, sizeof f, "%s_expected.bin", names[m]); auto want = load<fr_t>(f);
        snprintf(f, sizeof f, "%s_long.bin", names[m]); auto lng = load<uint32_t>(f);
        const uint32_t one = strtoul(argv[4 + 2 * m], 0, 10), minus_one = strtoul(argv[5 + 2 * m], 0, 10);
        // Poisoned outputs: every row must be written by one of the two kernels.
        out[m].assign(n, fr_t::one());
        // Grids smaller than the work, so the grid-stride loops run more than once.
        launch(3, 32, [&] { cuzk_r1cs_evaluate(out[m].data(), ptr.data(), cols.data(), ids.data(), coeffs.data(),
                                     z.data(), rows, n, one, minus_one, short_len); });
        const uint32_t count = lng.size();
        launch(2, 4, [&] { cuzk_r1cs_evaluate_long(out[m].data(), lng.data(), count, ptr.data(), cols.data(),
                                                   ids.data(), coeffs.data(), z.data(), one, minus_one); });
        if (want.size() != n) { printf("%s: %zu expected values for n = %u\n", names[m], want.size(), n); return 1; }
        for (uint32_t i = 0; i < n; i++)
            if (memcmp(&out[m][i], &want[i], sizeof(fr_t))) { if (bad++ < 5) printf("%s mismatch at row %u\n", names[m], i); }
    }
    uint32_t first_bad = ~0u;
    launch(2, 64, [&] { cuzk_r1cs_check(&first_bad, out[0].data(), out[1].data(), out[2].data(), rows); });
    if (first_bad != bad_want) { printf("first bad row %u, expected %u\n", first_bad, bad_want); bad++; }
    printf("%u rows of %u, %d mismatches\n", rows, n, bad);
    return bad != 0;
}
