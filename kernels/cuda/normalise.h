// Collective layer: the end of every forward kernel's row (v1, v2, fp32, the split-KV merge, the naive
// baseline): O = a / l and the LSE, with the rounding points of softmax.h, written once so that the
// kernels cannot drift.
#pragma once

#include <cmath>

namespace flashcheck::cuda {

// fl32(1 / l) by IEEE division (RN); 0 for a row with no visible key (l = 0).
__device__ __forceinline__ float inverse_l(float l) { return l != 0.0f ? __fdiv_rn(1.0f, l) : 0.0f; }

// O = fl32(a * fl32(1 / l)). A row with no visible key is 0 by definition, also when its accumulator
// holds 0 * NaN from a NaN value row that other rows of the tile see (the MMA cannot skip a zero P).
__device__ __forceinline__ float normalised(float a, float l, float inv) { return l != 0.0f ? __fmul_rn(a, inv) : 0.0f; }

// lse = fl32( fl32(m * scale_eff) + fl32(logf(l) - lse_offset) ); -inf when l = 0.
__device__ __forceinline__ float row_lse(float m, float l, float scale_eff, float lse_offset) {
  return l != 0.0f ? __fadd_rn(__fmul_rn(m, scale_eff), __fsub_rn(logf(l), lse_offset)) : -INFINITY;
}

}  // namespace flashcheck::cuda
