// Host run of the MSM scan kernels (kernels/msm/scan.cuh, unchanged) without a GPU, on the
// cuda_host.h shim, launched exactly as crates/msm/src/kernels.rs `scan` does. Compares offsets/cursors with
// a host prefix sum on random counts for many lengths (tile edges included); also checks that
// nothing past offsets[len] / cursors[len) is written. Usage: scan_emu [max_len_extra]
#include <cstdio>
#include <cstdlib>
#include <random>

#include "../../host_emu/cuda_host.h"
#include "../scan.cuh"

using namespace cuzk::msm;

static int check(uint32_t len, std::mt19937& rng, uint32_t maxc)
{
    std::vector<uint32_t> counts(len), offsets(len + 3, 0xdeadbeefu), cursors(len + 2, 0xdeadbeefu);
    std::uniform_int_distribution<uint32_t> d(0, maxc);
    for (auto& c : counts) c = d(rng);
    if (len) {
        const uint32_t tiles = (len + SCAN_TILE - 1) / SCAN_TILE;
        launch(tiles, SCAN_TILE, [&] { scan_tile_sums(counts.data(), len, cursors.data()); });
        launch(1, SCAN_TOP_THREADS, [&] { scan_tile_bases(len, offsets.data(), cursors.data()); });
        launch(tiles, SCAN_TILE, [&] { scan_tiles(counts.data(), len, offsets.data(), cursors.data()); });
    } else {
        launch(1, SCAN_TOP_THREADS, [&] { scan_tile_bases(len, offsets.data(), cursors.data()); });
    }
    uint32_t run = 0;
    for (uint32_t i = 0; i < len; i++) {
        if (offsets[i] != run || cursors[i] != run) {
            printf("len %u: mismatch at %u: offsets %u cursors %u want %u\n", len, i, offsets[i], cursors[i], run);
            return 1;
        }
        run += counts[i];
    }
    if (offsets[len] != run) { printf("len %u: total %u want %u\n", len, offsets[len], run); return 1; }
    if (offsets[len + 1] != 0xdeadbeefu || offsets[len + 2] != 0xdeadbeefu || cursors[len] != 0xdeadbeefu ||
        cursors[len + 1] != 0xdeadbeefu) {
        printf("len %u: wrote past the end\n", len);
        return 1;
    }
    return 0;
}

int main(int argc, char** argv)
{
    std::mt19937 rng(7);
    std::vector<uint32_t> lens = {0, 1, 2, 31, 511, 512, 513, 1023, 1024, 1025, 4096, 5000, 65537};
    // more tiles than scan_tile_bases threads (several tiles per thread), not a tile multiple
    lens.push_back(SCAN_TILE * SCAN_TOP_THREADS + 777);
    if (argc > 1) lens.push_back((uint32_t)atoi(argv[1]));
    int bad = 0;
    for (uint32_t len : lens) {
        bad += check(len, rng, 40);
        bad += check(len, rng, 0);          // all zero
        printf("len %u ok\n", len);
        fflush(stdout);
    }
    bad += check(3000, rng, 0xffffffffu);  // wrapping u32 sums agree too
    printf("%s: %d mismatching cases\n", bad ? "FAIL" : "PASS", bad);
    return bad != 0;
}
