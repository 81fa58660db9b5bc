// cuzk: device-wide exclusive scan of the MSM bucket counts (step 3 of msm/pippenger.cuh).
// Self-contained (no field code), so kernels/msm/host_emu can run it on the host.
#pragma once

#include <cstdint>

#include "../cuzk_shared.h"

namespace cuzk {
namespace msm {

// 3. Exclusive scan of counts[0..len) into offsets[0..len] (offsets[len] = total) and cursors.
// Device-wide reduce-then-scan in three launches (crates/msm/src/kernels.rs `scan`), tiles of
// SCAN_TILE counts, one per thread:
//   scan_tile_sums  block b: cursors[b * SCAN_TILE] = sum of tile b (scratch slot: the first
//                   cursor of each tile, rewritten by scan_tiles)
//   scan_tile_bases one block: exclusive scan of those sums in place; offsets[len] = total
//   scan_tiles      block b: base = cursors[b * SCAN_TILE] (read before any write of the
//                   block), offsets[i] = cursors[i] = base + exclusive prefix within the tile
// Only __syncthreads and shared memory (no shuffles), so the host emulation can run it.
static constexpr uint32_t SCAN_TILE = CUZK_MSM_SCAN_TILE;                // threads of scan_tile_sums / scan_tiles
static constexpr uint32_t SCAN_TOP_THREADS = CUZK_MSM_SCAN_TOP_THREADS;  // threads of scan_tile_bases

// Inclusive scan of v over the block (sh: blockDim.x words); every thread gets its prefix and,
// on return, sh[blockDim.x - 1] is the block total (all threads may read it).
__device__ __forceinline__ uint32_t block_inclusive_scan(uint32_t v, uint32_t* sh)
{
    const uint32_t t = threadIdx.x, T = blockDim.x;
    sh[t] = v;
    __syncthreads();
    for (uint32_t o = 1; o < T; o <<= 1) {
        uint32_t u = t >= o ? sh[t - o] : 0;
        __syncthreads();
        sh[t] += u;
        __syncthreads();
    }
    return sh[t];
}

__device__ __forceinline__ void scan_tile_sums(const uint32_t* counts, uint32_t len, uint32_t* cursors)
{
    __shared__ uint32_t sh[SCAN_TILE];
    const uint32_t t = threadIdx.x, base = blockIdx.x * SCAN_TILE, i = base + t;
    sh[t] = i < len ? counts[i] : 0;
    __syncthreads();
    for (uint32_t h = SCAN_TILE / 2; h > 0; h >>= 1) {
        if (t < h) sh[t] += sh[t + h];
        __syncthreads();
    }
    if (t == 0 && base < len) cursors[base] = sh[0];
}

__device__ __forceinline__ void scan_tile_bases(uint32_t len, uint32_t* offsets, uint32_t* cursors)
{
    __shared__ uint32_t sh[SCAN_TOP_THREADS];
    const uint32_t t = threadIdx.x, T = blockDim.x;
    const uint32_t tiles = (len + SCAN_TILE - 1) / SCAN_TILE;
    const uint32_t per = (tiles + T - 1) / T;
    const uint32_t lo = min(tiles, t * per), hi = min(tiles, lo + per);
    uint32_t sum = 0;
    for (uint32_t b = lo; b < hi; b++) sum += cursors[b * SCAN_TILE];
    const uint32_t incl = block_inclusive_scan(sum, sh);
    uint32_t run = incl - sum;
    for (uint32_t b = lo; b < hi; b++) {
        uint32_t c = cursors[b * SCAN_TILE];
        cursors[b * SCAN_TILE] = run;
        run += c;
    }
    if (t == T - 1) offsets[len] = incl;
}

__device__ __forceinline__ void scan_tiles(const uint32_t* counts, uint32_t len, uint32_t* offsets, uint32_t* cursors)
{
    __shared__ uint32_t sh[SCAN_TILE];
    __shared__ uint32_t tile_base;
    const uint32_t t = threadIdx.x, i = blockIdx.x * SCAN_TILE + t;
    if (t == 0) tile_base = cursors[blockIdx.x * SCAN_TILE];   // before this block writes it
    const uint32_t v = i < len ? counts[i] : 0;
    const uint32_t incl = block_inclusive_scan(v, sh);         // its __syncthreads publish tile_base
    if (i < len) {
        const uint32_t o = tile_base + incl - v;
        offsets[i] = o;
        cursors[i] = o;
    }
}

} // namespace msm
} // namespace cuzk
