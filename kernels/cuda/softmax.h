// Collective layer: online softmax of the fused kernel (tensor-core recipes fp16, bf16, fp8).
//
// ROUNDING POINTS (the CPU emulation mirrors exactly these; every kernel file is compiled with
// --fmad=false, so the only fused multiply-adds are the ones written as fmaf() below).
// "Step" below = one online-softmax step over kSubN keys: the whole key tile Bc, or 32 keys for tiles
// with two 16-row m-tiles per warp when d >= 96 or the input is fp8 (fwd_kernel.cuh, kSubN). Key steps
// are processed in ascending key order.
//
//  S    s_ij = MMA(Q, K^T): tensor-core dot product with fp32 accumulation (the hardware's internal order
//       and rounding of the k-sum is not specified by NVIDIA; a CPU model treats it as an fp32 dot).
//       fp8: s is in stored units (no descale applied here).
//  c    c = fl32(scale * q_descale * k_descale * log2(e)), computed in double on the host, rounded once.
//  m    running row max, exact (max is exact; masked entries are -inf). The row max of a step is reduced
//       over the 4 lanes of a quad with shfl_xor 1 then 2 (order irrelevant for max).
//  mc   mc = fl32(m_new * c), once per row per step; mc = 0 while m_new = -inf (fully masked so far).
//  p    p_ij = ex2.approx.ftz.f32( fmaf(s_ij, c, -mc) )   (one fma, then the SFU exp2; -inf -> +0)
//  alpha  alpha = ex2.approx.ftz.f32( fl32( fl32(m_old - m_new) * c ) ); alpha = 1 while m_new = -inf.
//       Applied every step (when m did not change alpha = ex2(0) = 1 exactly, and the kernel skips the
//       multiply of a when alpha = 1 for every row of the warp, which changes no bit):
//       l <- fl32(l * alpha),  a_ik <- fl32(a_ik * alpha).
//  P~   P~_ij = round_to_input_format(p_ij * kPScale), RN (kPScale = 1 for fp16/bf16; 256 for fp8,
//       where the conversion is RN with satfinite). P~ is the A operand of the P.V MMA.
//  l    Per-thread partial sums, FA-2 style. Lane t of a quad owns, in the step's keys [n0, n0 + kSubN),
//       the keys n0 + 8*j + 2t and n0 + 8*j + 2t + 1 for j = 0 .. kSubN/8 - 1. Per step, after l <- fl32(l*alpha),
//       the lane adds its values one by one in the order j = 0, 1, ...; within j first key 2t then
//       2t+1:  l <- fl32(l + P~_ij) (default) or fl32(l + p_ij * kPScale) (FC_FLAG_L_FROM_FP32_P).
//       At the end the four lane partials are combined as (l0 + l1) + (l2 + l3) (shfl_xor 1 then 2).
//  a    a_ik accumulates MMA(P~, V) in fp32 on the tensor cores, steps in ascending key order. (On sm_90a
//       the SASS of the fp8 kernels shows only HMMA.16816.F32: ptxas lowers the fp8 mma.sync to fp16
//       tensor-core ops, every e4m3/e5m2 value being exact in fp16.)
//       fp8 with FC_FLAG_TWO_LEVEL_ACCUM: the step's P~.V is accumulated from zero in a separate fp32
//       register set, then a <- fl32(a + step_sum) (after the alpha rescale).
//  O    O_ik = round_out( fl32( a_ik * fl32(1 / l) ) ) (fp8: fl32(fl32(a * fl32(1/l)) * v_descale) first),
//       1/l by IEEE division (RN); l = 0 (fully masked row) gives O = 0. round_out is RN to the output
//       format (fp16 -> fp16, bf16 -> bf16, fp8 -> bf16).
//  LSE  lse_i = fl32( fl32(m * scale_eff) + fl32(logf(l) - lse_offset) ); -inf when l = 0.
//       scale_eff = fl32(scale * q_descale * k_descale); lse_offset = 8 ln 2 for fp8 (the 2^8 on P), else 0.
//  split-KV: see split_kv_merge.cu.
#pragma once

#include <cmath>

#include "mma.h"

namespace flashcheck::cuda {

// Per-thread softmax state for the two rows (g and g + 8 of the warp's 16) a thread of an m16n8 MMA
// accumulator owns.
struct OnlineSoftmax {
  float row_max[2];
  float row_sum[2];  // this lane's partial l (combined across the quad only in finalize)

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // s: [kNTiles][4] scores of the tile (c0,c1: row g; c2,c3: row g+8). Updates the max, turns s into
  // p = exp2(s*c - m*c) in place, and returns the per-row rescale factor alpha.
  template <int kNTiles>
  __device__ __forceinline__ void update(float (&s)[kNTiles][4], float c, float (&alpha)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = row_max[r];
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const bool empty = mx == -INFINITY;
      alpha[r] = empty ? 1.0f : tile::ex2(__fmul_rn(__fsub_rn(row_max[r], mx), c));
      const float mc = empty ? 0.0f : __fmul_rn(mx, c);
      row_max[r] = mx;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        s[j][2 * r] = tile::ex2(__fmaf_rn(s[j][2 * r], c, -mc));
        s[j][2 * r + 1] = tile::ex2(__fmaf_rn(s[j][2 * r + 1], c, -mc));
      }
      row_sum[r] = __fmul_rn(row_sum[r], alpha[r]);
    }
  }

  __device__ __forceinline__ void add(int r, float value) { row_sum[r] = __fadd_rn(row_sum[r], value); }

  // Combine the quad's partial sums: (l0 + l1) + (l2 + l3), identical in all four lanes.
  __device__ __forceinline__ void finalize() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] = __fadd_rn(row_sum[r], __shfl_xor_sync(0xffffffffu, row_sum[r], 1));
      row_sum[r] = __fadd_rn(row_sum[r], __shfl_xor_sync(0xffffffffu, row_sum[r], 2));
    }
  }
};

}  // namespace flashcheck::cuda
