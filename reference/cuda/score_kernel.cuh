// Fills the score cache (oracle_types.h) for a pass before the reference's or the budget's first sweep,
// a tile of rows by keys at a time. The kernels' own first sweeps compute a row's scores a lane per key,
// one shared-memory load of K per multiply-add for one row; here a tile's two sums (q·k and the second
// operands' |q|·|k|) are matrix products on the float64 tensor cores (`mma` m16n8k4, dmma.cuh), each warp
// 16 rows by 32 keys. The tensor cores' product is, per element, the fma chain over its four columns in
// ascending order (measured, dmma.cuh), so each pair's sums are the same fma chains over the head dim, in
// the same column order, from the same values as the kernels' (reference_kernel.cuh dot_abs,
// budget_kernel.cuh key_score): the cache holds the very doubles the kernels would have computed, and the
// results stay the same bit for bit.
// Pairs a row does not see are computed too (a tile is a rectangle) and never read. Each (row, chunk of 32
// keys) also gets its summary over the keys the row sees (oracle_types.h ChunkSummary), which the first
// sweeps of the tiled reference and of the budget's weights kernel walk instead of the row's scores.
#pragma once

#include <type_traits>

#include "reference/cuda/dmma.cuh"
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
// The staged second operand of x, and whether it differs from |x| (then the products read it from
// shared memory instead of taking |x| from the first operand): both stagings below.
__device__ __forceinline__ double staged_operand2(const ScoreOperands& op, double x, bool& changed) {
  const double y = score_operand2(op, x);
  changed = changed || !(y == fabs(x));
  return y;
}

// One kernel per storage format: the staging's loads are the format's own, not a switch per value, and
// each format's registers are allocated apart.
template <Storage S>
__global__ void __launch_bounds__(kScoreThreads, 2) score_kernel(Shape s, ScoreOperands op, double* scores) {
  // [row or key][column], a row padded by four doubles: a fragment's eight rows of four columns fall in
  // distinct banks, and so do the staging's stores (a warp's lanes on 16 columns of two rows).
  constexpr int kPitchQK = kScoreDepth + 4;
  __shared__ __align__(16) double qa[kScoreTile][kPitchQK], qb[kScoreTile][kPitchQK];
  __shared__ __align__(16) double ka[kScoreTile][kPitchQK], kb[kScoreTile][kPitchQK];
  const BlockRows br = block_rows(s);
  const int64_t j0 = int64_t(blockIdx.y) * kScoreTile;
  if (j0 >= br.hi || j0 + kScoreTile <= br.lo) return;  // no row of the tile sees these keys
  // Warp w: rows 16 (w / 2) + g and + g + 8, keys 32 (w % 2) + 8 n + 2 t and + 1 (n = 0..3), g = lane / 4,
  // t = lane % 4: the m16n8k4 fragments.
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
  const int qr = 16 * (warp / 2), kc = 32 * (warp % 2);
  double dot[4][4], sum2[4][4];
#pragma unroll
  for (int n = 0; n < 4; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dot[n][e] = sum2[n][e] = 0;

  // Columns c .. c + 3 of the tile's products. kStaged2: the second sums' operands are the staged qb, kb
  // (the budget's aligned magnitudes where a chunk holds a value they change); otherwise they are |q|, |k|
  // of the first operands, the tensor cores' absolute-value operands, which halves the shared-memory loads.
  auto columns = [&](int c, auto staged2) {
    constexpr bool kStaged2 = decltype(staged2)::value;
    const double a0 = qa[qr + g][c + tq], a1 = qa[qr + g + 8][c + tq];
    double a20 = fabs(a0), a21 = fabs(a1);
    if constexpr (kStaged2) a20 = qb[qr + g][c + tq], a21 = qb[qr + g + 8][c + tq];
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const double b = ka[kc + 8 * n + g][c + tq];
      dmma_16x8x4(dot[n], a0, a1, b);
      dmma_16x8x4(sum2[n], a20, a21, kStaged2 ? kb[kc + 8 * n + g][c + tq] : fabs(b));
    }
  };

  // The staging's share of a thread: column sc of rows (and keys) sx, sx + 16, ..., as offsets from the
  // tile's first row and key (with each element's 64-bit index computed afresh, the staging's index
  // arithmetic was a quarter of the kernel's instructions: Nsight Compute source counters, H200).
  constexpr int kStageRows = kScoreThreads / kScoreDepth;
  const int sx = threadIdx.x / kScoreDepth, sc = threadIdx.x % kScoreDepth;
  const int q_rows = int(min(int64_t(kScoreTile), s.n_q - br.i0)), k_rows = int(min(int64_t(kScoreTile), s.n_k - j0));
  const int64_t q0 = q_base(s, br.b, br.h, br.i0) + sc, k0 = k_base(s, br.b, br.hk, j0) + sc;
  // Columns c0 .. c0 + 15 of the thread's rows and keys into registers (zeros past the ends: fma(0, 0,
  // acc) is acc), loaded one slice ahead of their staging, so that their latency hides behind the
  // products of the slice before.
  constexpr int kStaged = kScoreTile / kStageRows;
  uint32_t qbits[kStaged], kbits[kStaged];  // stored bits; zeros past the ends are zero bits in every format
  auto load_slice = [&](int c0) {
    const bool col = c0 + sc < s.d;
#pragma unroll
    for (int r = 0; r < kStaged; ++r) {
      const int x = sx + r * kStageRows;
      qbits[r] = col && x < q_rows ? stored_bits<S>(s.q, q0 + int64_t(x) * s.d + c0) : 0u;
      kbits[r] = col && x < k_rows ? stored_bits<S>(s.k, k0 + int64_t(x) * s.d + c0) : 0u;
    }
  };
  // The 2-byte formats, where every row starts 16-byte aligned (d a multiple of 8, aligned tensors): a thread
  // takes one 16-byte piece, eight values of a row of Q (warps 0-3) or of K (warps 4-7), instead of eight
  // 2-byte loads (the loads' queue, LG throttle, and their latency were a sixth of this kernel's stall
  // samples: Nsight Compute, H200). The same values reach the same places.
  constexpr bool kPieces = storage_bytes(S) == 2;
  static_assert(kScoreThreads == 4 * kScoreTile && kScoreDepth == 16, "a piece per thread: 64 rows of 2 pieces, twice");
  const bool pieces = kPieces && s.d % 8 == 0 && reinterpret_cast<uintptr_t>(s.q) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(s.k) % 16 == 0;
  const bool piece_k = threadIdx.x >= 2 * kScoreTile;  // warp-uniform
  const int piece_row = threadIdx.x % (2 * kScoreTile) / 2, piece_col = 8 * (threadIdx.x % 2);
  const uint16_t* const piece_src =
      static_cast<const uint16_t*>(piece_k ? s.k : s.q) +
      (piece_k ? k_base(s, br.b, br.hk, j0) : q_base(s, br.b, br.h, br.i0)) + int64_t(piece_row) * s.d + piece_col;
  const bool piece_in = piece_row < (piece_k ? k_rows : q_rows);
  uint4 piece = make_uint4(0, 0, 0, 0);
  auto load_piece = [&](int c0) {
    piece = piece_in && c0 + piece_col < s.d ? *reinterpret_cast<const uint4*>(piece_src + c0) : make_uint4(0, 0, 0, 0);
  };
  auto stage_piece = [&](bool& changed) {
    const uint32_t w[4] = {piece.x, piece.y, piece.z, piece.w};
    double v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = descaled_value<S>(w[e / 2] >> (16 * (e % 2)) & 0xffffu, piece_k ? op.kd : op.qd);
    double* a = piece_k ? &ka[piece_row][piece_col] : &qa[piece_row][piece_col];
#pragma unroll
    for (int e = 0; e < 8; e += 2) *reinterpret_cast<double2*>(a + e) = make_double2(v[e], v[e + 1]);
    if (op.align) {
      double* b = piece_k ? &kb[piece_row][piece_col] : &qb[piece_row][piece_col];
#pragma unroll
      for (int e = 0; e < 8; e += 2) {
        const double x0 = staged_operand2(op, v[e], changed), x1 = staged_operand2(op, v[e + 1], changed);
        *reinterpret_cast<double2*>(b + e) = make_double2(x0, x1);
      }
    }
  };
  if (pieces) load_piece(0);
  else load_slice(0);
  for (int c0 = 0; c0 < s.d; c0 += kScoreDepth) {
    __syncthreads();
    // changed: some staged second operand differs from |x| (the budget's alignment of a subnormal or NaN).
    bool changed = false;
    if (pieces) {
      stage_piece(changed);
      if (c0 + kScoreDepth < s.d) load_piece(c0 + kScoreDepth);
    } else {
#pragma unroll
      for (int r = 0; r < kStaged; ++r) {
        const int x = sx + r * kStageRows, c = sc;
        const double qv = descaled_value<S>(qbits[r], op.qd), kv = descaled_value<S>(kbits[r], op.kd);
        qa[x][c] = qv;
        ka[x][c] = kv;
        if (op.align) {
          qb[x][c] = staged_operand2(op, qv, changed);
          kb[x][c] = staged_operand2(op, kv, changed);
        }
      }
      if (c0 + kScoreDepth < s.d) load_slice(c0 + kScoreDepth);
    }
    if (__syncthreads_or(changed)) {
#pragma unroll
      for (int c = 0; c < kScoreDepth; c += 4) columns(c, std::true_type{});
    } else {
#pragma unroll
      for (int c = 0; c < kScoreDepth; c += 4) columns(c, std::false_type{});
    }
  }

  const int64_t plane = s.pass_rows * s.n_k, end = s.row0 + s.pass_rows;
  ChunkSummary* const summaries = chunk_summaries(scores, s.pass_rows, s.n_k);
  const int64_t jc = j0 + kc;  // the warp's 32 keys: one chunk of the summaries
  // With N_k even, a lane's two keys j, j + 1 (j even) lie in one 16-byte aligned pair of each plane,
  // written by one store each (the stores had been twice as many as the planes' pairs).
  const bool pairs = s.n_k % 2 == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int x = qr + g + 8 * h;
    const int64_t i = br.i0 + x, gr = br.r0 + x;  // row in its head, row in BHN order
    const bool row = i < s.n_q && gr >= s.row0 && gr < end;  // the same for the four lanes of a row
    int64_t lo = 0, hi = 0;
    if (row) row_key_range(s, i, br.len, lo, hi);
    double* z = scores + (gr - s.row0) * s.n_k;
    ChunkSummary sum{-HUGE_VAL, HUGE_VAL, -HUGE_VAL, 0, 0};  // the lane's keys the row sees
    auto values = [&](int n, double (&zv)[2], double (&r)[2]) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        zv[e] = op.signed_scores ? op.sign * dot[n][2 * h + e] : dot[n][2 * h + e];
        r[e] = sum2[n][2 * h + e];
      }
    };
    auto add = [&sum](double zv, double r) {
      sum.z_max = fmax(sum.z_max, zv), sum.z_min = fmin(sum.z_min, zv), sum.r_max = fmax(sum.r_max, r);
      ++sum.count;
      sum.nan |= zv != zv;
    };
    // Keys j and, where it is below N_k, j + 1 into the two planes (plane 2, the tf32 operand error, is not
    // read where this kernel filled).
    auto store = [&](int64_t j, const double (&zv)[2], const double (&r)[2]) {
      if (pairs) {
        *reinterpret_cast<double2*>(z + j) = make_double2(zv[0], zv[1]);
        *reinterpret_cast<double2*>(z + plane + j) = make_double2(r[0], r[1]);
        return;
      }
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (j + e < s.n_k) z[j + e] = zv[e], z[plane + j + e] = r[e];
    };
    if (row && s.dense == nullptr && lo <= jc && jc + kSummaryKeys <= hi) {
      // The row sees every key of the chunk (hi <= N_k): no test per key. The per-key tests, their 64-bit
      // compares and the dense mask's checks, had made this epilogue longer than the products' loop
      // (Nsight Compute source counters, H200).
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int64_t j = jc + 8 * n + 2 * tq;
        double zv[2], r[2];
        values(n, zv, r);
        store(j, zv, r);
        add(zv[0], r[0]);
        add(zv[1], r[1]);
      }
    } else if (row) {
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int64_t j = jc + 8 * n + 2 * tq;
        if (j >= s.n_k) continue;
        double zv[2], r[2];
        values(n, zv, r);
        store(j, zv, r);
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (j + e < s.n_k && sees_key(s, i, j + e, lo, hi, br.len)) add(zv[e], r[e]);
      }
    }
    // The warp's 32 keys are one chunk of the summaries: the row's summary over its four lanes (t = lane % 4).
    static_assert(kSummaryKeys == 32 && kScoreTile % 64 == 0);
#pragma unroll
    for (int o = 1; o < 4; o *= 2) {
      sum.z_max = fmax(sum.z_max, __shfl_xor_sync(0xffffffffu, sum.z_max, o));
      sum.z_min = fmin(sum.z_min, __shfl_xor_sync(0xffffffffu, sum.z_min, o));
      sum.r_max = fmax(sum.r_max, __shfl_xor_sync(0xffffffffu, sum.r_max, o));
      sum.count += __shfl_xor_sync(0xffffffffu, sum.count, o);
      sum.nan |= __shfl_xor_sync(0xffffffffu, sum.nan, o);
    }
    if (row && tq == 0 && j0 + kc < s.n_k)
      summaries[(gr - s.row0) * summary_chunks(s.n_k) + (j0 + kc) / kSummaryKeys] = sum;
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
