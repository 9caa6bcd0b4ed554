// Collective / tile layer: Hopper's asynchronous data movement, one PTX instruction per function: the
// bulk tensor copy (TMA) into shared memory and out of it, the mbarriers that count its bytes and the consumers'
// releases, the named barriers between warpgroups, and setmaxnreg, which moves registers from the
// producer warpgroup to the consumers. Kernel v2 (fwd_v2_kernel.cuh) is built from these.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace flashcheck::cuda::tile {

// ---- mbarrier (shared memory, 8 bytes) ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) before any copy signals them.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` of copies that will complete on this barrier's phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// True in one lane of the converged warp (elect.sync): a warp's single arrival without its lane index
// held in a register.
__device__ __forceinline__ bool elect_one() {
  uint32_t elected;
  asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n" : "=r"(elected));
  return elected != 0;
}
// Waits until the phase with parity `parity` has completed (try_wait suspends in hardware between polls).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// ---- a shared-memory counter: one thread's release (+1), another's wait for a count ----
__device__ __forceinline__ void count_release(uint32_t word) {
  asm volatile("red.release.cta.shared::cta.add.u32 [%0], 1;\n" ::"r"(word) : "memory");
}
__device__ __forceinline__ void wait_count(uint32_t word, uint32_t count) {
  for (;;) {
    uint32_t c;
    asm volatile("ld.acquire.cta.shared::cta.u32 %0, [%1];\n" : "=r"(c) : "r"(word) : "memory");
    if (c >= count) return;
    __nanosleep(64);
  }
}

// ---- TMA: a 4-D box (c0 innermost) of the tensor `map` into shared memory, completing on `bar` ----
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// Fetches a 4-D box of the tensor `map` into L2 (no shared memory, no barrier): a later tma_load_4d of the
// same box then reads L2 instead of HBM.
__device__ __forceinline__ void tma_prefetch_l2_4d(const CUtensorMap* map, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
// Fetches the descriptor into the cache ahead of the first copy that uses it.
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- TMA store: a 4-D box of shared memory (the map's swizzled layout) into the tensor `map` ----
// Rows past the tensor's end are not written. The stores of a thread form bulk groups: commit closes one,
// and wait_group_read<N> returns once at most N of the thread's groups still read shared memory (the
// buffer may then be written again); wait_group<0> once all of them have written global memory.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// ---- named barriers (ids 1..15; 0 is __syncthreads) among `threads` threads (a multiple of 32) ----
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- register reallocation between warpgroups (sm_90a; the kernel needs a register cap at entry) ----
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace flashcheck::cuda::tile
