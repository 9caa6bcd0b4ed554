// Collective layer: online softmax of the fused kernel (tensor-core recipes fp16, bf16, fp8).
//
// ROUNDING POINTS (the CPU emulation mirrors exactly these; every kernel file is compiled with
// --fmad=false, so the only fused multiply-adds are the ones written as fmaf() below).
// "Step" below = one online-softmax step over kSubN keys: the whole key tile Bc, or 32 keys for fp8
// tiles with two 16-row m-tiles per warp and Bc > 32, or 64 keys for 16-bit tiles with Bc = 128 except
// the interior (unmasked) tiles at d = 64 with l from P~, which take all 128 (fwd_kernel.cuh, kSubN and
// kSubNInterior). Key steps are processed in ascending key order.
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
//  l    fp16 / bf16, l from P~ (default): on the tensor cores, l_i <- MMA(P~_i of 16 keys, ones, C = l_i),
//       one block FMA per 16-key block of the step in ascending order (the P.V loop's k-steps), after
//       l <- fl32(l*alpha): the same chain as a's with every V = 1. The row's whole sum, in every lane of
//       the quad (fwd_kernel.cuh kLOnTensorCores).
//       fp8, and FC_FLAG_L_FROM_FP32_P: per-thread partial sums, FA-2 style. Lane t of a quad owns, in the
//       step's keys [n0, n0 + kSubN), the keys n0 + 8*j + 2t and n0 + 8*j + 2t + 1 for j = 0 .. kSubN/8 - 1.
//       Per step, after l <- fl32(l*alpha), the lane adds its values one by one in the order j = 0, 1, ...;
//       within j first key 2t then 2t+1: l <- fl32(l + P~_ij) (fp8) or fl32(l + p_ij * kPScale)
//       (FC_FLAG_L_FROM_FP32_P). At the end the four lane partials are combined as (l0 + l1) + (l2 + l3)
//       (shfl_xor 1 then 2).
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
  float row_sum[2];  // lane sums: this lane's partial l (combined across the quad only in finalize)
  // l on the tensor cores with one accumulator per m-tile, {l(g), pad, l(g + 8), pad}: the pads (column
  // 2t + 1, the same sums, never rescaled) only complete the register quad (fwd_kernel.cuh pv_mma_16bit).
  float l_pad[2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
      l_pad[r] = 0.0f;
    }
  }

  __device__ __forceinline__ void add(int r, float value) { row_sum[r] = __fadd_rn(row_sum[r], value); }

  // Row r's max becomes m_new (the quad-reduced step max): returns m*c for the exponents and sets the
  // rescale factor alpha (1 and m*c = 0 while the row has seen only masked keys). l is rescaled by the caller.
  __device__ __forceinline__ float raise_max(int r, float m_new, float c, float& alpha) {
    const bool empty = m_new == -INFINITY;
    alpha = empty ? 1.0f : tile::ex2(__fmul_rn(__fsub_rn(row_max[r], m_new), c));
    row_max[r] = m_new;
    return empty ? 0.0f : __fmul_rn(m_new, c);
  }

  // Combine the quad's partial sums: (l0 + l1) + (l2 + l3), identical in all four lanes.
  __device__ __forceinline__ void finalize() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[r] = __fadd_rn(row_sum[r], __shfl_xor_sync(0xffffffffu, row_sum[r], 1));
      row_sum[r] = __fadd_rn(row_sum[r], __shfl_xor_sync(0xffffffffu, row_sum[r], 2));
    }
  }
};

// The new running max of each row of the kMT m-tiles of a warp: mx = max(m_old, max_j s_j), reduced over
// the quad. All rows go through each stage together (chained and tree max, then the two quad shuffles),
// so the shuffle latencies of one row overlap those of the others; the values are those of a row-by-row
// loop (max is exact). s: [kMT][kNTiles][4] (c0,c1: row g; c2,c3: row g+8 of each m-tile).
template <int kMT, int kNTiles>
__device__ __forceinline__ void new_row_max(const OnlineSoftmax (&sm)[kMT], const float (&s)[kMT][kNTiles][4],
                                            float (&mx)[kMT][2]) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // Four independent chains, then a tree: short dependency chains without a temporary per n-tile.
      constexpr int kChains = kNTiles < 4 ? kNTiles : 4;
      float part[kChains];
#pragma unroll
      for (int j = 0; j < kChains; ++j) part[j] = fmaxf(s[mt][j][2 * r], s[mt][j][2 * r + 1]);
#pragma unroll
      for (int j = kChains; j < kNTiles; ++j)
        part[j % kChains] = fmaxf(part[j % kChains], fmaxf(s[mt][j][2 * r], s[mt][j][2 * r + 1]));
#pragma unroll
      for (int w = 1; w < kChains; w *= 2)
#pragma unroll
        for (int j = 0; j + w < kChains; j += 2 * w) part[j] = fmaxf(part[j], part[j + w]);
      mx[mt][r] = fmaxf(sm[mt].row_max[r], part[0]);
    }
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) mx[mt][r] = fmaxf(mx[mt][r], __shfl_xor_sync(0xffffffffu, mx[mt][r], 1));
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) mx[mt][r] = fmaxf(mx[mt][r], __shfl_xor_sync(0xffffffffu, mx[mt][r], 2));
}

// The online-softmax step split in two, so that the caller can rescale O between them and the exps, the
// P~ rounding and the l sums form one straight block (the 16-bit kernels): (1) here, the new row max,
// alpha and m*c per row, and l <- l * alpha; (2) round_p with kExp (below).
template <int kMT, int kNTiles>
__device__ __forceinline__ void softmax_max_alpha(OnlineSoftmax (&sm)[kMT], const float (&s)[kMT][kNTiles][4],
                                                  float c, float (&alpha)[kMT][2], float (&mc)[kMT][2]) {
  float mx[kMT][2];
  new_row_max(sm, s, mx);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mc[mt][r] = sm[mt].raise_max(r, mx[mt][r], c, alpha[mt][r]);
      sm[mt].row_sum[r] = __fmul_rn(sm[mt].row_sum[r], alpha[mt][r]);
    }
}

// The whole step for the kMT m-tiles of a warp (fp8 and the redo kernel): softmax_max_alpha, then s
// turned into p = exp2(s*c - m*c) in place; the caller rescales a by alpha.
template <int kMT, int kNTiles>
__device__ __forceinline__ void softmax_update(OnlineSoftmax (&sm)[kMT], float (&s)[kMT][kNTiles][4], float c,
                                               float (&alpha)[kMT][2]) {
  float mc[kMT][2];
  softmax_max_alpha(sm, s, c, alpha, mc);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        s[mt][j][2 * r] = tile::ex2(__fmaf_rn(s[mt][j][2 * r], c, -mc[mt][r]));
        s[mt][j][2 * r + 1] = tile::ex2(__fmaf_rn(s[mt][j][2 * r + 1], c, -mc[mt][r]));
      }
}

// a <- fl32(a * alpha) per row for the kMT m-tiles of a warp (the O accumulators, m16n8 layout). Once the
// running max has settled, alpha is exactly 1 for every row of the warp and a * 1 changes no bit: the
// rescale is skipped then (one warp-uniform vote for all m-tiles, so no divergence).
template <int kMT, int kNTilesO>
__device__ __forceinline__ void rescale_accumulators(float (&a)[kMT][kNTilesO][4], const float (&alpha)[kMT][2]) {
  bool rescale = false;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) rescale = rescale || alpha[mt][0] != 1.0f || alpha[mt][1] != 1.0f;
  if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int i = 0; i < kNTilesO; ++i) {
        a[mt][i][0] = __fmul_rn(a[mt][i][0], alpha[mt][0]);
        a[mt][i][1] = __fmul_rn(a[mt][i][1], alpha[mt][0]);
        a[mt][i][2] = __fmul_rn(a[mt][i][2], alpha[mt][1]);
        a[mt][i][3] = __fmul_rn(a[mt][i][3], alpha[mt][1]);
      }
  }
}

// p -> P~ (times kPScale, rounded to the input format, packed as the next MMA's A operand) and the
// lane's l partial, in the order documented in softmax.h. kExp: s still holds the scores and
// p = exp2(s*c - m*c) is computed here, n-tile by n-tile, in one straight block with the rounding and the
// sums, so that the SFU exps of one n-tile overlap the conversions and adds of the previous ones (the
// 16-bit kernels); otherwise s holds p already (softmax_update). kLFromFp32 is a compile-time switch: a
// run-time select there cost the 16-bit 128x64 tile 120 bytes of spills.
// [kJ0, kJ1): the n-tiles to round (all by default); ascending calls keep the documented l order.
template <typename ET, int kN, bool kLFromFp32, bool kExp = false, int kJ0 = 0, int kJ1 = kN, bool kSumL = true>
__device__ __forceinline__ void round_p(float (&s)[kN][4], uint32_t (&pk)[kN][2], OnlineSoftmax& sm,
                                        float c = 0.0f, const float (&mc)[2] = {0.0f, 0.0f}) {
#pragma unroll
  for (int j = kJ0; j < kJ1; ++j)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float x0 = s[j][2 * r], x1 = s[j][2 * r + 1];
      if constexpr (kExp) {
        x0 = tile::ex2(__fmaf_rn(x0, c, -mc[r]));
        x1 = tile::ex2(__fmaf_rn(x1, c, -mc[r]));
      }
      if constexpr (ET::kPScale != 1.0f) {
        x0 = __fmul_rn(x0, ET::kPScale);
        x1 = __fmul_rn(x1, ET::kPScale);
      }
      float r0, r1;
      pk[j][r] = ET::round_pair(x0, x1, r0, r1);
      if constexpr (kSumL) {
        sm.add(r, kLFromFp32 ? x0 : r0);
        sm.add(r, kLFromFp32 ? x1 : r1);
      }
    }
}

}  // namespace flashcheck::cuda
