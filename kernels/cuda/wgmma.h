// Collective / tile layer: thin wrappers over Hopper's warpgroup MMA (wgmma, sm_90a), one PTX instruction
// each, as mma.h wraps mma.sync. A warpgroup is 4 consecutive warps starting at a warp index divisible
// by 4; it computes a 64 x N tile, warp w owning rows 16w .. 16w + 15 with mma.sync's m16n8 fragment
// layout. A comes from registers (mma.sync's A fragment per warp), B from shared memory through a matrix
// descriptor. Today these serve the accumulation probe (bench/tensor_core_probe.cu), which measures the
// arithmetic the error budget must model before a kernel is built on them, and kernel v2 (fwd_v2_kernel.cuh),
// with the wider shapes of wgmma_ops.h.
#pragma once

#include <cstdint>

namespace flashcheck::cuda::tile {

// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading and
// stride byte offsets, all in 16-byte units, and the layout type in bits 62-63 (0: no swizzle, 1: 128-byte
// swizzle).
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t smem_addr, uint32_t lbo, uint32_t sbo, uint32_t layout) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (uint64_t(layout) << 62);
}

// A K-major operand without swizzling: stored as core matrices of 8 rows x 16 bytes (each row's 16 bytes
// contiguous); `k_stride` is the byte distance between core matrices adjacent along K, `mn_stride` along M/N.
__device__ __forceinline__ uint64_t smem_descriptor_no_swizzle(uint32_t smem_addr, uint32_t k_stride,
                                                               uint32_t mn_stride) {
  return smem_descriptor(smem_addr, k_stride, mn_stride, 0);
}

// The descriptor of an operand in the 128-byte swizzled layout (layout type 1) that TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B: rows of 128 bytes (64 16-bit elements), in atoms of 8 rows = 1024 bytes
// (1024-byte aligned). K-major operand (Q, K): `lbo` is unused (16) and `sbo` = 1024, the step between
// 8-row groups along M/N; a k-step of 16 elements inside the 128-byte row advances the start address by 32
// bytes. N-major operand (V as B of P.V, transposed): `lbo` = the byte step between 64-column panels along
// N, `sbo` = 1024, the step between 8-key groups along K (PTX ISA, "Matrix Descriptor Format"; CUTLASS's
// make_gmma_desc names the same strides).
__device__ __forceinline__ uint64_t smem_descriptor_sw128(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return smem_descriptor(smem_addr, lbo, sbo, 1);
}

// Orders this thread's earlier generic-proxy shared-memory writes before the async proxy (wgmma's reads
// of B); followed by a barrier among the writers.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Before the first wgmma that reads accumulator or A registers written by ordinary instructions.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

struct WgmmaF16 {};
struct WgmmaBF16 {};
struct WgmmaE4M3 {};
struct WgmmaE5M2 {};

// D (64 x 8, fp32) = A (64 x K, registers) * B (K x 8, shared, K-major) + D; K = 16 for 16-bit operands,
// 32 for fp8. d: this thread's 4 accumulators (rows g and g + 8 of its warp's 16, columns 2t, 2t + 1).
// scale-d is a predicate operand (1: D += A*B); imm-scale-a/b = 1 (no negation).
#define FC_WGMMA_M64N8_RS(TAG, SHAPE_TYPES, TRANS_B)                                                        \
  __device__ __forceinline__ void wgmma_m64n8(TAG, float(&d)[4], const uint32_t(&a)[4], uint64_t desc_b) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1" \
                 TRANS_B ";\n}\n"                                                                        \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                         \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1)                       \
                 : "memory");                                                                             \
  }
// The 16-bit forms take B's transpose flag (0: K-major); fp8 has none (B is always K-major).
FC_WGMMA_M64N8_RS(WgmmaF16, "m64n8k16.f32.f16.f16", ", 0")
FC_WGMMA_M64N8_RS(WgmmaBF16, "m64n8k16.f32.bf16.bf16", ", 0")
FC_WGMMA_M64N8_RS(WgmmaE4M3, "m64n8k32.f32.e4m3.e4m3", "")
FC_WGMMA_M64N8_RS(WgmmaE5M2, "m64n8k32.f32.e5m2.e5m2", "")
#undef FC_WGMMA_M64N8_RS

}  // namespace flashcheck::cuda::tile
