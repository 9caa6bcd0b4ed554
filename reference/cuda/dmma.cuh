// The float64 tensor cores (sm_80 and later): D = A·B + C on tiles of doubles. Measured on the H200
// (docs/gpu-oracle.md): each element of D is the chain fma(a3, b3, fma(a2, b2, fma(a1, b1, fma(a0, b0, c))))
// bit for bit, subnormals kept, i.e. the sum a row kernel makes key after key. So a kernel that feeds the
// keys in ascending order gets the row kernel's bits, at twice the float64 units' rate.
#pragma once

namespace fc::gpu::detail {

// m16n8k4 (sm_90 issues it at twice the rate of m8n8k4), a warp's fragments (PTX ISA, mma .f64): with
// g = lane / 4 and t = lane % 4, lane holds A[g][t] and A[g + 8][t], B[t][g], and D[g][2t], D[g][2t + 1],
// D[g + 8][2t], D[g + 8][2t + 1].
__device__ __forceinline__ void dmma_16x8x4(double (&d)[4], double a0, double a1, double b) {
  asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
               : "d"(a0), "d"(a1), "d"(b));
}

}  // namespace fc::gpu::detail
