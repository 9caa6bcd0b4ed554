// A per-phase timeline of kernel v2's key loop, for diagnosis only: built with -DFC_V2_TIMELINE (a build of
// its own, bench/v2_timeline.py says how), each consumer warpgroup of block 0 stamps clock64() at the phases
// below in every key step of its work slot kWorkSlot, and print_kernel, launched after the kernel, prints the
// stamps of the launch numbered kPrintLaunch (a warmed-up one). Without the flag every call here is empty.
// Why: Nsight Compute gives the tensor pipe's busy fraction, not which warpgroup's phase leaves it idle.
#pragma once

#include <cuda_runtime.h>

#ifdef FC_V2_TIMELINE
#include <cstdio>
#endif

namespace flashcheck::cuda::timeline {

// The stamps of one key step i (>= 1) of the loop (fwd_v2_kernel.cuh consume), in order; step 0 has
// kStepBegin and kKReady (its first scores), and kProductsDone and kStored of the whole tile.
enum Phase : int {
  kStepBegin,     // the top of the step
  kKReady,        // K of tile i has landed
  kSIssued,       // S = Q K^T issued
  kPvIssued,      // O rescaled and P~ V of tile i - 1 issued (after V of tile i - 1 landed)
  kSReady,        // the scores are in registers
  kSoftmaxDone,   // mask, max and exponentials done
  kPvDone,        // P~ V of tile i - 1 done
  kRounded,       // P~ of tile i rounded
  kProductsDone,  // (step 0's row) the tile's last P~ V done
  kStored,        // (step 0's row) the epilogue done
  kPhases
};

#ifdef FC_V2_TIMELINE
namespace {
constexpr int kTiles = 136, kWgs = 3, kPrintLaunch = 6, kWorkSlot = 2;
__device__ unsigned long long stamps[kWgs][kTiles][kPhases];
__device__ int recorded[kWgs];
__device__ unsigned print_calls;

struct Recorder {
  int wg;
  bool on = false;
  __device__ explicit Recorder(int wg_) : wg(wg_) {}
  __device__ __forceinline__ void start(int work_slot) {
    on = blockIdx.x == 0 && threadIdx.x % 128 == 0 && work_slot == kWorkSlot;
  }
  __device__ __forceinline__ void mark(int step, Phase ph) {
    if (on && step < kTiles) stamps[wg][step][ph] = clock64();
  }
  __device__ __forceinline__ void done(int n_tiles) {
    if (on) recorded[wg] = n_tiles;
    on = false;
  }
};

// One line per (warpgroup, step): "TL wg step" and the kPhases stamps, in clocks from warpgroup 0's first.
__global__ void print_kernel() {
  if (threadIdx.x != 0 || atomicAdd(&print_calls, 1u) != kPrintLaunch) return;
  const unsigned long long t0 = stamps[0][0][0];
  for (int wg = 0; wg < kWgs; ++wg)
    for (int i = 0; i < recorded[wg] && i < kTiles; ++i) {
      long long v[kPhases];
      for (int e = 0; e < kPhases; ++e) v[e] = static_cast<long long>(stamps[wg][i][e] - t0);
      printf("TL %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\n", wg, i, v[0], v[1], v[2], v[3], v[4],
             v[5], v[6], v[7], v[8], v[9]);
    }
}
}  // namespace
static_assert(kPhases == 10, "print_kernel's format has one field per phase");
inline void after_launch(cudaStream_t stream) { print_kernel<<<1, 32, 0, stream>>>(); }
#else
struct Recorder {
  __device__ explicit Recorder(int) {}
  __device__ __forceinline__ void start(int) {}
  __device__ __forceinline__ void mark(int, Phase) {}
  __device__ __forceinline__ void done(int) {}
};
inline void after_launch(cudaStream_t) {}
#endif

}  // namespace flashcheck::cuda::timeline
