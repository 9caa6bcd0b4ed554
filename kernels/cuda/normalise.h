// Collective layer: the end of every forward kernel's row (v1, v2, fp32, the split-KV merge, the naive
// baseline): O = a / l and the LSE, with the rounding points of softmax.h, written once so that the
// kernels cannot drift.
#pragma once

#include <cmath>
#include <cstdint>

#include "fwd_params.h"
#include "softmax.h"

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

// Where a row's results go: the LSE [batch][heads_q][n_q], and the split-KV workspace
// [split][batch][heads_q][n_q] (a: times d) that split_kv_merge.cu reads back.
__device__ __forceinline__ long long lse_index(const FwdParams& p, int b, int h, int row) {
  return (static_cast<long long>(b) * p.heads_q + h) * p.n_q + row;
}
__device__ __forceinline__ long long split_state_index(const FwdParams& p, int split, int b, int h, int row) {
  return ((static_cast<long long>(split) * p.batch + b) * p.heads_q + h) * p.n_q + row;
}

// Row r (0: g, 1: g + 8) of a warp's m16n8 accumulators with row sum l, the lane's columns 8i + 2t and
// 8i + 2t + 1: O normalised and rounded to the 16-bit output (fp8 inputs: times v_descale first), handed to
// put(i, packed pair) for each i. Where the pairs go is the caller's: global memory (store_o_row) or kernel
// v2's shared-memory tile that a TMA store writes out (fwd_v2_kernel.cuh); the values are the same.
template <typename ET, int kNTilesO, typename Put>
__device__ __forceinline__ void normalised_o_row(const FwdParams& p, const float (&acc)[kNTilesO][4], float l, int r,
                                                 Put&& put) {
  const float inv = inverse_l(l);
#pragma unroll
  for (int i = 0; i < kNTilesO; ++i) {
    float x0 = normalised(acc[i][2 * r], l, inv);
    float x1 = normalised(acc[i][2 * r + 1], l, inv);
    if constexpr (ET::kIsFp8) {
      x0 = __fmul_rn(x0, p.v_descale);
      x1 = __fmul_rn(x1, p.v_descale);
    }
    put(i, ET::pack_out(x0, x1));
  }
}

// The row's LSE, from lane t = 0 of its quad.
__device__ __forceinline__ void store_row_lse(const FwdParams& p, const OnlineSoftmax& sm, int r, int t, int b, int h,
                                              int row) {
  if (p.lse && t == 0)
    p.lse[lse_index(p, b, h, row)] = row_lse(sm.row_max[r], sm.row_sum[r], p.scale_eff, p.lse_offset);
}

// The tensor-core kernels' epilogue for one row r of a warp's accumulators and softmax state (o_head: row 0
// of the head's O): O in 4-byte stores, and the LSE.
template <typename ET, int kNTilesO>
__device__ __forceinline__ void store_o_row(const FwdParams& p, uint16_t* o_head, const float (&acc)[kNTilesO][4],
                                            const OnlineSoftmax& sm, int r, int t, int b, int h, int row) {
  uint16_t* o_row = o_head + static_cast<long long>(row) * p.o_stride[2];
  normalised_o_row<ET>(p, acc, sm.row_sum[r], r,
                       [&](int i, uint32_t pair) { *reinterpret_cast<uint32_t*>(o_row + 8 * i + 2 * t) = pair; });
  store_row_lse(p, sm, r, t, b, h, row);
}

// The same row's unnormalised state (a, m, l) for the merge (split-KV).
template <int kNTilesO>
__device__ __forceinline__ void store_split_row(const FwdParams& p, long long idx, const float (&acc)[kNTilesO][4],
                                                int r, int t, float m, float l) {
  float* a_ws = p.ws_acc + idx * (8 * kNTilesO);
#pragma unroll
  for (int i = 0; i < kNTilesO; ++i)
    *reinterpret_cast<float2*>(a_ws + 8 * i + 2 * t) = make_float2(acc[i][2 * r], acc[i][2 * r + 1]);
  if (t == 0) {
    p.ws_m[idx] = m;
    p.ws_l[idx] = l;
  }
}

}  // namespace flashcheck::cuda
