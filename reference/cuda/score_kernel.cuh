// Fills the score cache (oracle_types.h) for a pass before the reference's or the budget's first sweep,
// a tile of rows by keys at a time. The kernels' own first sweeps compute a row's scores a lane per key,
// one shared-memory load of K per multiply-add for one row; here each thread computes a 4 x 4 block of
// (row, key) pairs, so that every staged value of Q and K serves four pairs and the loop is the float64
// units' own. Each pair's sums are the same fma chains over the head dim, in the same column order, from
// the same values as the kernels' (reference_kernel.cuh dot_abs, budget_kernel.cuh key_score): the cache
// holds the very doubles the kernels would have computed, so the results stay the same bit for bit.
// Pairs a row does not see are computed too (a tile is a rectangle) and never read.
#pragma once

#include <type_traits>

#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

inline constexpr int kScoreTile = 64;   // rows and keys of a block's tile
inline constexpr int kScoreDepth = 16;  // head-dim columns staged at a time (padding columns are zeros)
inline constexpr int kScoreThreads = 256;

// The second operand of a pair's second sum: |x| (the reference's absolute dot product), or the budget's
// r_operand without the tf32 term (the magnitude aligned to the format's minimum normal with tensor cores).
__device__ __forceinline__ double score_operand2(const ScoreOperands& op, double x) {
  return op.align ? align_mag(x, op.mn) : fabs(x);
}

__global__ void __launch_bounds__(kScoreThreads, 2) score_kernel(Shape s, ScoreOperands op, double* scores) {
  // [column][row or key]: a thread reads its rows (keys) of one column as two 16-byte loads. A column's
  // row is padded by two doubles, so that the staging's stores (a warp's lanes on 16 columns of two rows)
  // fall in distinct banks; unpadded, the 16 columns shared two banks, and the 16-way conflicts made the
  // staging most of the kernel's shared-memory traffic.
  constexpr int kStride = kScoreTile + 2;
  __shared__ __align__(16) double qa[kScoreDepth][kStride], qb[kScoreDepth][kStride];
  __shared__ __align__(16) double ka[kScoreDepth][kStride], kb[kScoreDepth][kStride];
  const BlockRows br = block_rows(s);
  const int64_t j0 = int64_t(blockIdx.y) * kScoreTile;
  if (j0 >= br.hi || j0 + kScoreTile <= br.lo) return;  // no row of the tile sees these keys
  // Rows 4 ty .. 4 ty + 3; keys 2 tx, 2 tx + 1, 32 + 2 tx, 33 + 2 tx, so that the 16 lanes of a half-warp
  // read K's staged column as two runs of 256 contiguous bytes (keys 4 tx .. 4 tx + 3 left every other
  // 16 bytes of a 512-byte span unread: twice the shared-memory wavefronts).
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  auto key_of = [&](int k) { return 2 * tx + (k & 1) + 32 * (k >> 1); };
  double dot[4][4], sum2[4][4];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int k = 0; k < 4; ++k) dot[r][k] = sum2[r][k] = 0;

  // One column's products for the thread's 4 x 4 pairs. kStaged2: the second sums' operands are the
  // staged qb, kb (the budget's aligned magnitudes where a chunk holds a value they change); otherwise they
  // are |q|, |k| of the first operands, taken in registers, which halves the shared-memory loads: with all
  // four operands loaded, the loop waited on shared memory (Nsight Compute: 87 % of its throughput, the
  // float64 units at 21 %).
  auto column = [&](int c, auto staged2) {
    constexpr bool kStaged2 = decltype(staged2)::value;
    const double2 qa01 = *reinterpret_cast<const double2*>(&qa[c][4 * ty]);
    const double2 qa23 = *reinterpret_cast<const double2*>(&qa[c][4 * ty + 2]);
    const double2 ka01 = *reinterpret_cast<const double2*>(&ka[c][2 * tx]);
    const double2 ka23 = *reinterpret_cast<const double2*>(&ka[c][32 + 2 * tx]);
    const double q1[4] = {qa01.x, qa01.y, qa23.x, qa23.y}, k1[4] = {ka01.x, ka01.y, ka23.x, ka23.y};
    double q2[4], k2[4];
    if constexpr (kStaged2) {
      const double2 qb01 = *reinterpret_cast<const double2*>(&qb[c][4 * ty]);
      const double2 qb23 = *reinterpret_cast<const double2*>(&qb[c][4 * ty + 2]);
      const double2 kb01 = *reinterpret_cast<const double2*>(&kb[c][2 * tx]);
      const double2 kb23 = *reinterpret_cast<const double2*>(&kb[c][32 + 2 * tx]);
      q2[0] = qb01.x, q2[1] = qb01.y, q2[2] = qb23.x, q2[3] = qb23.y;
      k2[0] = kb01.x, k2[1] = kb01.y, k2[2] = kb23.x, k2[3] = kb23.y;
    } else {
#pragma unroll
      for (int x = 0; x < 4; ++x) q2[x] = fabs(q1[x]), k2[x] = fabs(k1[x]);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        dot[r][k] = fma(q1[r], k1[k], dot[r][k]);
        sum2[r][k] = fma(q2[r], k2[k], sum2[r][k]);
      }
  };

  // The staging's share of a thread: column sc of rows (and keys) sx, sx + 16, ..., as offsets from the
  // tile's first row and key (with each element's 64-bit index computed afresh, the staging's index
  // arithmetic was a quarter of the kernel's instructions: Nsight Compute source counters, H200).
  constexpr int kStageRows = kScoreThreads / kScoreDepth;
  const int sx = threadIdx.x / kScoreDepth, sc = threadIdx.x % kScoreDepth;
  const int q_rows = int(min(int64_t(kScoreTile), s.n_q - br.i0)), k_rows = int(min(int64_t(kScoreTile), s.n_k - j0));
  const int64_t q0 = q_base(s, br.b, br.h, br.i0) + sc, k0 = k_base(s, br.b, br.hk, j0) + sc;
  for (int c0 = 0; c0 < s.d; c0 += kScoreDepth) {
    __syncthreads();
    // Stage columns c0 .. c0 + 15 of the tile's rows and keys (zeros past the ends: fma(0, 0, acc) is acc).
    // changed: some staged second operand differs from |x| (the budget's alignment of a subnormal or NaN).
    bool changed = false;
    const bool col = c0 + sc < s.d;
#pragma unroll
    for (int r = 0; r < kScoreTile / kStageRows; ++r) {
      const int x = sx + r * kStageRows, c = sc;
      const double qv = col && x < q_rows ? load_stored(s.in, s.q, q0 + int64_t(x) * s.d + c0) * op.qd : 0.0;
      const double kv = col && x < k_rows ? load_stored(s.in, s.k, k0 + int64_t(x) * s.d + c0) * op.kd : 0.0;
      qa[c][x] = qv;
      ka[c][x] = kv;
      if (op.align) {
        const double q2 = score_operand2(op, qv), k2 = score_operand2(op, kv);
        qb[c][x] = q2;
        kb[c][x] = k2;
        changed = changed || !(q2 == fabs(qv)) || !(k2 == fabs(kv));
      }
    }
    if (__syncthreads_or(changed)) {
#pragma unroll 2
      for (int c = 0; c < kScoreDepth; ++c) column(c, std::true_type{});
    } else {
#pragma unroll 2
      for (int c = 0; c < kScoreDepth; ++c) column(c, std::false_type{});
    }
  }

  const int64_t plane = s.pass_rows * s.n_k, end = s.row0 + s.pass_rows;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t i = br.i0 + 4 * ty + r, g = br.r0 + 4 * ty + r;  // row in its head, row in BHN order
    if (i >= s.n_q || g < s.row0 || g >= end) continue;
    double* z = scores + (g - s.row0) * s.n_k;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t j = j0 + key_of(k);
      if (j >= s.n_k) continue;
      z[j] = op.signed_scores ? op.sign * dot[r][k] : dot[r][k];
      z[plane + j] = sum2[r][k];  // plane 2 (the tf32 operand error) is not read where this kernel filled
    }
  }
}

// Sets *changed where some value of Q or K (stored units) has a magnitude that align_mag(x, mn) changes
// (non-zero below mn, or NaN). Where none does and both descales are 1, the reference's fill of the
// cache (q * qd, k * kd, |x|) is the budget's (stored units, magnitudes aligned to mn) up to the sign: the
// same values in the same fma chains and order, so the budget reads it instead of filling the cache again
// (gpu_oracle.cpp). Once per judgement, over every value: the score kernel would test each one once per
// tile of the other operand.
__global__ void aligned_change_kernel(Shape s, double mn, unsigned* changed) {
  const int64_t nq = int64_t(s.batch) * s.heads_q * s.n_q * s.d, nk = int64_t(s.batch) * s.heads_kv * s.n_k * s.d;
  bool any = false;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < nq + nk; x += int64_t(gridDim.x) * blockDim.x) {
    const double v = x < nq ? load_stored(s.in, s.q, x) : load_stored(s.in, s.k, x - nq);
    any = any || !(align_mag(v, mn) == fabs(v));
  }
  if (__any_sync(0xffffffffu, any) && threadIdx.x % 32 == 0) atomicOr(changed, 1u);
}

}  // namespace fc::gpu::detail
