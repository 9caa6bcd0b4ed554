// The fp16 tensor cores, for the knot form's products (budget_knot_kernels.cuh): D = A·B + C on m16n8k16
// tiles of fp16 operands with fp32 accumulation. The products of fp16 numbers are exact; the accumulation
// truncates, as docs/error-analysis.md §3.2 models it (reference/budget_knots.h kKnotEpsStep).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace fc::gpu::detail {

// A warp's fragments (PTX ISA, mma .f16): with g = lane / 4 and t = lane % 4, lane holds the pairs A[g][2t..],
// A[g + 8][2t..], A[g][2t + 8..], A[g + 8][2t + 8..] (a0..a3), B[2t..][g] and B[2t + 8..][g] (b0, b1), and
// D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1].
__device__ __forceinline__ void hmma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A's fragment at word w (keys 2w, 2w + 1 of row g) of a 16-row tile staged in shared memory with rows pitch
// words apart: w = 8 k + t for the k-th step of 16 keys.
__device__ __forceinline__ void hmma_a_fragment(const uint32_t* a, int pitch, int g, int w, uint32_t (&A)[4]) {
  A[0] = a[g * pitch + w], A[1] = a[(g + 8) * pitch + w];
  A[2] = a[g * pitch + w + 4], A[3] = a[(g + 8) * pitch + w + 4];
}

// The knot products' B operands from a pair of fp16 values x and knots t (reference/budget_knots.h), as fp16
// arithmetic rounds them: |x - t| (a rounded difference, made absolute exactly), (x - t)^2 (a rounded
// difference, then a rounded square) and the bracket's indicator (ones where lo <= x <= hi).
__device__ __forceinline__ uint32_t half2_word(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }
__device__ __forceinline__ uint32_t knot_distance2(__half2 x, __half2 t) { return half2_word(__habs2(__hsub2(x, t))); }
__device__ __forceinline__ uint32_t knot_square2(__half2 x, __half2 t) {
  const __half2 d = __hsub2(x, t);
  return half2_word(__hmul2(d, d));
}
__device__ __forceinline__ uint32_t knot_bracket2(__half2 x, __half2 lo, __half2 hi) {
  return half2_word(__hmul2(__hle2(lo, x), __hle2(x, hi)));
}

// A 16-byte copy into shared memory that writes zeros instead where `valid` is false (rows a launch lacks).
__device__ __forceinline__ void cp_async_16_or_zero(void* dst, const void* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}

}  // namespace fc::gpu::detail
