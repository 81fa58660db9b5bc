// CUDA-on-the-host shim shared by the kernel emulators (kernels/msm/host_emu, kernels/ntt/host_emu,
// kernels/msm/check_host_emu.cpp):
// one std::thread per CUDA thread of a block, a sleeping barrier for __syncthreads, blocks one
// after another, std::atomic_ref for the atomics. Include it before the kernel header.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

struct dim3_t { uint32_t x = 0, y = 0, z = 0; };
static thread_local dim3_t threadIdx, blockIdx;
static dim3_t blockDim, gridDim;
// Sleeping barrier: std::barrier spins and yields, far too slow with 256 threads on few cores.
struct Barrier {
    explicit Barrier(uint32_t n) : n(n) {}
    void arrive_and_wait()
    {
        std::unique_lock<std::mutex> l(m);
        const uint64_t g = gen;
        if (++waiting == n) {
            waiting = 0;
            gen++;
            cv.notify_all();
        } else {
            cv.wait(l, [&] { return gen != g; });
        }
    }
    uint32_t n, waiting = 0;
    uint64_t gen = 0;
    std::mutex m;
    std::condition_variable cv;
};
static Barrier* g_bar = nullptr;
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t sh)
{
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31));
}
inline uint32_t atomicAdd(uint32_t* p, uint32_t v) { return std::atomic_ref<uint32_t>(*p).fetch_add(v); }
inline uint32_t atomicMin(uint32_t* p, uint32_t v)
{
    std::atomic_ref<uint32_t> a(*p);
    uint32_t old = a.load();
    while (old > v && !a.compare_exchange_weak(old, v)) {}
    return old;
}
inline uint32_t atomicMax(uint32_t* p, uint32_t v)
{
    std::atomic_ref<uint32_t> a(*p);
    uint32_t old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {}
    return old;
}
using std::max;
using std::min;
#define __device__
#define __forceinline__ inline
#define __shared__ static

// Runs body() as a grid of gx (x gy) blocks of bx threads.
static void launch(uint32_t gx, uint32_t bx, const std::function<void()>& body, uint32_t gy = 1)
{
    Barrier bar(bx);
    g_bar = &bar;
    blockDim = {bx, 1, 1};
    gridDim = {gx, gy, 1};
    std::vector<std::thread> th;
    for (uint32_t t = 0; t < bx; t++)
        th.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            for (uint32_t y = 0; y < gy; y++)
                for (uint32_t x = 0; x < gx; x++) {
                    blockIdx = {x, y, 0};
                    body();
                    bar.arrive_and_wait();
                }
        });
    for (auto& t : th) t.join();
}

// launch with the grid's y extent first: (gx, gy) blocks of bx threads.
static void launch_grid(uint32_t gx, uint32_t gy, uint32_t bx, const std::function<void()>& body)
{
    launch(gx, bx, body, gy);
}
