// The fp16 tensor cores, for the knot form's products (budget_knot_kernels.cuh): D = A·B + C on m16n8k16
// tiles of fp16 operands with fp32 accumulation. The products of fp16 numbers are exact; the accumulation
// truncates, as docs/error-analysis.md §3.2 models it (reference/budget_knots.h kKnotEpsStep).
#pragma once

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

// A 16-byte copy into shared memory that writes zeros instead where `valid` is false (rows a launch lacks).
__device__ __forceinline__ void cp_async_16_or_zero(void* dst, const void* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}

}  // namespace fc::gpu::detail
