// Runtime smoke test: checks module loading, struct parameters and checked launches.
#include "cuzk_shared.h"

// Must match cuzk_gpu::smoke::pattern on the host.
__device__ __forceinline__ uint32_t cuzk_smoke_pattern(uint32_t i, uint32_t seed) {
    uint32_t x = i * 2654435761u ^ seed;
    return x ^ (x >> 15);
}

extern "C" __global__ void cuzk_smoke_fill(uint32_t* out, cuzk_smoke_params p) {
    // Grid-stride loop: correct for any grid size.
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
        out[i] = cuzk_smoke_pattern(i, p.seed);
    }
}
