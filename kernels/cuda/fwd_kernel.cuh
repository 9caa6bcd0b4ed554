// Kernel layer: the fused FlashAttention-2 forward for the tensor-core recipes (fp16, bf16, fp8), built
// on mma.sync (m16n8k16 for 16-bit inputs, m16n8k32 for fp8), ldmatrix and cp.async.
//
// One block = Br query rows of one (batch, head, split); one warp = 16 * kMTiles of those rows, so each
// warp owns its rows' O accumulator and online-softmax state in registers and never talks to another warp
// except through the shared K/V tiles. kMTiles = 2 reuses every K/V fragment read from shared memory for
// two MMAs, which halves the shared-memory traffic per FLOP (the limit of the 16-row layout). K/V tiles of
// Bc keys come in with cp.async, double-buffered (tile j+1 in flight while tile j is computed) or, where
// double buffers would cost an SM its second block, in FA-2's single-buffer order (kStages). Shared-memory
// rows are padded by 16 bytes, which makes every ldmatrix phase (8 rows x 16 bytes) hit 8 distinct 4-bank
// groups for all head dims we compile.
//
// fp8 P.V: the m16n8k32 A operand wants 4 consecutive k (keys) per register, while the S accumulator gives
// a lane keys {2t, 2t+1} of each 8-key n-tile. Since k is summed over, the kernel uses a permuted key
// order inside each 32-key chunk: logical k = 16h + 4t + i  <->  key 8*(2h + i/2) + 2t + (i%2), and writes V
// transposed in that order (V^T, [d][Bc] bytes) so that ldmatrix (non-transposed) yields B directly.
//
// Rounding points: softmax.h. A NaN in V reaches only the rows that see its key: value_nan_guard.h.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "element.h"
#include "kernels/tile_policy.h"
#include "fwd_params.h"
#include "mask.h"
#include "mma.h"
#include "normalise.h"
#include "softmax.h"
#include "value_nan_guard.h"

// 0 only to measure what the guard costs (an A/B build for the benchmark); the product always has it.
#ifndef FC_GUARD_VALUE_NANS
#define FC_GUARD_VALUE_NANS 1
#endif
// 0 only to measure what l on the tensor cores gains (an A/B build for the benchmark): the lane sums it
// replaces are also inside the budget (docs/error-analysis.md §3.8), but the emulation models this one.
#ifndef FC_L_ON_TENSOR_CORES
#define FC_L_ON_TENSOR_CORES 1
#endif

namespace flashcheck::cuda {

template <typename Elem_, int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, bool kTwoLevel_ = false,
          int kStages_ = 2, bool kLFromFp32_ = false>
struct FwdKernelTraits {
  using Elem = Elem_;
  using ET = ElementTraits<Elem>;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kMTiles = kBlockM / (16 * kNWarps);  // 16-row MMA tiles per warp
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kNThreads = kNWarps * 32;
  // K/V pipeline. 2: K and V tiles double-buffered, tile j+1 in flight while tile j is computed, one barrier
  // per tile. 1 (FA-2's order, for tiles whose double buffers would cost an SM its second block): one K and
  // one V buffer; V(j) loads during S = Q K(j)^T, K(j+1) during the softmax and P V(j); two barriers.
  static constexpr int kStages = kStages_;
  static_assert(kStages == 1 || kStages == 2);
  static constexpr bool kIsFp8 = ET::kIsFp8;
  // fp8 FC_FLAG_TWO_LEVEL_ACCUM as a compile-time switch: a run-time branch would make the register
  // allocator budget for both P.V loops at once.
  static constexpr bool kTwoLevel = kTwoLevel_;
  static_assert(!kTwoLevel || kIsFp8);
  // FC_FLAG_L_FROM_FP32_P as a compile-time switch for the 16-bit recipes: with it a run-time flag, the
  // select (or branch) between p and P~ in the softmax costs registers and spills (fp8 keeps the run-time
  // flag: its instantiations are already doubled by kTwoLevel).
  static constexpr bool kLFromFp32 = kLFromFp32_;
  static_assert(!kLFromFp32 || !kIsFp8);
  // l = P~ times a column of ones: one more MMA per 16 keys in the P.V loop (two m-tiles share it), instead
  // of widening P~ back to fp32 and adding it on the FP32 pipe, 2 instructions per P~ (16-bit recipes, l
  // from P~). Grid geomean, same run: fp16 1.025x flash against 0.970x with the lane sums, bf16 1.013x
  // against 0.996x (docs/cuda-kernel.md). The l-from-fp32 convention and fp8 keep the lane
  // sums.
  static constexpr bool kLOnTensorCores = FC_L_ON_TENSOR_CORES && !kIsFp8 && !kLFromFp32;
  static constexpr int kRowBytes = kHeadDim * ET::kBytes;
  static constexpr int kSmemRow = kRowBytes + 16;  // +16 B padding: conflict-free ldmatrix
  static constexpr int kKSteps = kRowBytes / 32;   // Q.K^T k-steps (16 halves or 32 fp8 per step)
  // Keys per online-softmax step, and the wider steps of interior tiles: the tile policy's (the plugin
  // reports the narrowest in its run plan, so the budget is derived for it).
  static constexpr int kSubN = fc::tiles::softmax_step_n(fc::tiles::TileShape{kBlockM, kBlockN, kNWarps}, ET::kIsFp8);
  static constexpr int kSubTiles = kBlockN / kSubN;
  static constexpr int kNTilesSub = kSubN / 8;     // n-tiles of S per step
  static constexpr int kPVStepsSub = ET::kIsFp8 ? kSubN / 32 : kSubN / 16;
  // Long interior steps fit in registers only with the score GEMM's k-loop rolled and the lane's offsets
  // and K/V addresses re-derived each tile (kLongSteps).
  static constexpr int kSubNInterior =
      fc::tiles::interior_step_n(fc::tiles::TileShape{kBlockM, kBlockN, kNWarps}, kIsFp8, kLFromFp32, kHeadDim);
  static constexpr bool kLongSteps = kSubNInterior > kSubN;
  static constexpr int kNTilesO = kHeadDim / 8;    // n-tiles of O
  // Q stays in registers when its fragment costs at most 32 registers per thread with one m-tile (d <=
  // 128), with two m-tiles at d = 32 and at d = 64 for 16-bit tiles with Bc <= 64, and at d = 256 (64
  // registers) for 16-bit tiles with Bc = 32; otherwise it is re-read from shared memory at each k-step
  // (the register file goes to O and S; these are the combinations ptxas fits without spilling).
  static constexpr bool kQInRegs =
      kHeadDim <= 128 ? (kMTiles == 1 ? kKSteps * 4 <= 32
                                      : kKSteps * 4 <= 8 || (kKSteps * 4 <= 16 && kBlockN <= 64 && !kIsFp8))
                      : (kMTiles == 1 && !kIsFp8 && kBlockN <= 32);  // d = 256: 64 registers of Q next
                                                                     // to O (128) leave room for 32 keys only
  static constexpr int kVtRow = kBlockN + 16;
  static constexpr int kSmemQ = kBlockM * kSmemRow;
  static constexpr int kSmemKV = kBlockN * kSmemRow;
  static constexpr int kSmemVt = kIsFp8 ? kHeadDim * kVtRow : 0;
  // value_nan_guard.h: a bit per element of the V tile and of the block's O
  static constexpr int kSmemNanMaps = (kBlockN + kBlockM) * kHeadDim / 8;
  static constexpr int kSmemFwdBytes = kSmemQ + 2 * kStages * kSmemKV + kSmemVt;  // fwd_kernel
  static constexpr int kSmemBytes = kSmemFwdBytes + kSmemNanMaps;                    // fwd_redo_kernel

  static_assert(kBlockM == 16 * kMTiles * kNWarps && kNWarps >= 1 && kNWarps <= 16);
  static_assert(kBlockN % (kIsFp8 ? 32 : 16) == 0);
  static_assert(kRowBytes % 32 == 0 && kNTilesO % 2 == 0 && kNTilesSub % 2 == 0);
};

namespace detail {

// Copy kRows rows of kRowBytes from global (row stride in bytes) into padded shared memory; rows at or
// past `limit` are zero-filled. Each thread owns one fixed 16-byte column chunk and walks rows with a
// running pointer: the addresses cost two registers, not one hoisted 64-bit address per unrolled copy.
template <typename Tr, int kRows>
__device__ __forceinline__ void load_tile(unsigned char* dst, const unsigned char* src, int row_stride,
                                          int row0, int limit) {
  constexpr int kChunks = Tr::kRowBytes / 16;
  if constexpr (Tr::kNThreads % kChunks != 0) {
    // d = 96 (12 chunks per row): chunks are dealt out linearly instead.
#pragma unroll
    for (int i = threadIdx.x; i < kRows * kChunks; i += Tr::kNThreads) {
      const int r = i / kChunks;
      const int c = i % kChunks;
      const bool valid = row0 + r < limit;
      const unsigned char* g = src + (valid ? static_cast<long long>(row0 + r) * row_stride : 0) + c * 16;
      tile::cp_async_16(tile::smem_addr(dst + r * Tr::kSmemRow + c * 16), g, valid);
    }
    return;
  }
  constexpr int kRowsPerPass = Tr::kNThreads % kChunks == 0 ? Tr::kNThreads / kChunks : 1;
  constexpr int kPasses = (kRows + kRowsPerPass - 1) / kRowsPerPass;
  // Long-step kernels read the thread index afresh at each call, so that ptxas cannot keep the hoisted
  // per-thread K and V addresses (4 registers) live across the tile loop.
  const unsigned tid = Tr::kLongSteps ? tile::thread_index_volatile() : threadIdx.x;
  const int c = tid % kChunks;
  const int r = tid / kChunks;
  if (kRowsPerPass > kRows && r >= kRows) return;
  const unsigned char* g = src + static_cast<long long>(row0 + r) * row_stride + c * 16;
  const uint32_t s = tile::smem_addr(dst + r * Tr::kSmemRow + c * 16);
  const int step = row_stride * kRowsPerPass;  // < 2^31: the host keeps row strides below 2^24 bytes
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const bool valid = row0 + r + i * kRowsPerPass < limit;
    tile::cp_async_16(s + i * kRowsPerPass * Tr::kSmemRow, valid ? g : src, valid);
    g += step;
  }
}

// fp8 only: V[Bc][d] (bytes) -> V^T[d][Bc] in the permuted key order described at the top of this file.
template <typename Tr>
__device__ __forceinline__ void transpose_v_fp8(const unsigned char* sv, unsigned char* svt) {
  constexpr int kD4 = Tr::kHeadDim / 4;
  constexpr int kUnits = Tr::kBlockN * Tr::kHeadDim / 16;
#pragma unroll
  for (int i = threadIdx.x; i < kUnits; i += Tr::kNThreads) {
    const int d4 = i % kD4;
    const int rest = i / kD4;
    const int t = rest % 4;
    const int h = (rest / 4) % 2;
    const int chunk = rest / 8;
    const int k0 = chunk * 32 + 16 * h + 2 * t;
    const uint32_t r0 = *reinterpret_cast<const uint32_t*>(sv + (k0)*Tr::kSmemRow + d4 * 4);
    const uint32_t r1 = *reinterpret_cast<const uint32_t*>(sv + (k0 + 1) * Tr::kSmemRow + d4 * 4);
    const uint32_t r2 = *reinterpret_cast<const uint32_t*>(sv + (k0 + 8) * Tr::kSmemRow + d4 * 4);
    const uint32_t r3 = *reinterpret_cast<const uint32_t*>(sv + (k0 + 9) * Tr::kSmemRow + d4 * 4);
    const int col = chunk * 32 + 16 * h + 4 * t;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t sel = static_cast<uint32_t>(j | ((j + 4) << 4));
      const uint32_t lo = __byte_perm(r0, r1, sel);
      const uint32_t hi = __byte_perm(r2, r3, sel);
      *reinterpret_cast<uint32_t*>(svt + (4 * d4 + j) * Tr::kVtRow + col) = __byte_perm(lo, hi, 0x5410);
    }
  }
}

// Every m-tile's A fragment times one ldmatrix_x4 B fragment, whose halves are the 8-column n-tiles
// 2 np and 2 np + 1 of c: the inner step of both S = Q K^T and O += P~ V.
template <typename Mma, int kMT, int kNT>
__device__ __forceinline__ void mma_n_tile_pair(float (&c)[kMT][kNT][4], const uint32_t (&a)[kMT][4],
                                                const uint32_t (&b)[4], int np) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    tile::mma(Mma{}, c[mt][2 * np], a[mt], b[0], b[1]);
    tile::mma(Mma{}, c[mt][2 * np + 1], a[mt], b[2], b[3]);
  }
}

// O += P~ V for the 16-bit recipes over the P.V k-steps [kKK0, kKK1) of a step (16 keys each): the
// packed P~ of two n-tiles is the A operand as it stands; V comes through ldmatrix.trans. With
// kLOnTensorCores also l += P~ times ones, in the same k-steps (kRowwiseL: one accumulator per m-tile).
template <typename Tr, int kMT, int kN, int kKK0, int kKK1, bool kRowwiseL = false>
__device__ __forceinline__ void pv_mma_16bit(float (&acc)[kMT][Tr::kNTilesO][4], const uint32_t (&pk)[kMT][kN][2],
                                             const unsigned char* sv_s, int v_off, OnlineSoftmax (&sm)[kMT]) {
  using Mma = typename Tr::ET::Mma;
#pragma unroll
  for (int kk = kKK0; kk < kKK1; ++kk) {
    uint32_t a[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      a[mt][0] = pk[mt][2 * kk][0];
      a[mt][1] = pk[mt][2 * kk][1];
      a[mt][2] = pk[mt][2 * kk + 1][0];
      a[mt][3] = pk[mt][2 * kk + 1][1];
    }
    if constexpr (Tr::kLOnTensorCores) {
      constexpr uint32_t kOne = Tr::ET::kOnePair;
      if constexpr (kMT == 1 || kRowwiseL) {
        // B all ones: every column holds the row sums; columns 2t + 1 (the pads) only complete the quad.
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          float l4[4] = {sm[mt].row_sum[0], sm[mt].l_pad[0], sm[mt].row_sum[1], sm[mt].l_pad[1]};
          tile::mma(Mma{}, l4, a[mt], kOne, kOne);
          sm[mt].row_sum[0] = l4[0];
          sm[mt].l_pad[0] = l4[1];
          sm[mt].row_sum[1] = l4[2];
          sm[mt].l_pad[1] = l4[3];
        }
      } else {
        // Two m-tiles share one accumulator (pads for both spill): ones in the even columns for m-tile 0,
        // in the odd ones for m-tile 1 (a lane's B column is lane / 4), so c0..c3 = l(0, g), l(1, g),
        // l(0, g + 8), l(1, g + 8). The same sums, bit for bit, as the all-ones B, except that a NaN in
        // one m-tile's P~ reaches the other's l through NaN * 0: the epilogue sends such a warp to the
        // redo kernel, which takes the branch above (kRowwiseL).
        static_assert(kMT == 2);
        const uint32_t one_even = kOne & ((threadIdx.x & 4u) - 1u);  // lane / 4 even: ones
        const uint32_t one_odd = kOne ^ one_even;
        float l4[4] = {sm[0].row_sum[0], sm[1].row_sum[0], sm[0].row_sum[1], sm[1].row_sum[1]};
        tile::mma(Mma{}, l4, a[0], one_even, one_even);
        tile::mma(Mma{}, l4, a[1], one_odd, one_odd);
        sm[0].row_sum[0] = l4[0];
        sm[1].row_sum[0] = l4[1];
        sm[0].row_sum[1] = l4[2];
        sm[1].row_sum[1] = l4[3];
      }
    }
#pragma unroll
    for (int dp = 0; dp < Tr::kNTilesO / 2; ++dp) {
      uint32_t bv[4];
      tile::ldmatrix_x4_trans(bv, tile::smem_addr(sv_s + v_off + kk * 16 * Tr::kSmemRow + dp * 32));
      mma_n_tile_pair<Mma>(acc, a, bv, dp);
    }
  }
}

// f(std::integral_constant<int, 0>{}), ..., f(std::integral_constant<int, kN - 1>{}), in order.
template <typename F, int... kI>
__device__ __forceinline__ void static_for_impl(F& f, std::integer_sequence<int, kI...>) {
  (f(std::integral_constant<int, kI>{}), ...);
}
template <int kN, typename F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, kN>{});
}

// A lane's shared-memory offsets (bytes) for ldmatrix and the row of its c0/c1 accumulators.
// A operand (16 rows x 32 bytes): matrices (rows 0-7 | 8-15) x (bytes 0-15 | 16-31) in register order
// a0..a3. B operand of Q.K^T from K[n][k]: matrices (n 0-7, k-lo), (n 0-7, k-hi), (n 8-15, k-lo),
// (n 8-15, k-hi) = b0,b1 of n-tile 0, b0,b1 of n-tile 1. V (16-bit) through ldmatrix.trans: matrices
// (keys 0-7 | 8-15) x (d 0-7 | 8-15) = b0,b1 of d-tile 0, ...
struct LaneOffsets {
  int a, b, v, vt;
  int row0;  // m0 + the row of c0/c1 in m-tile 0
  int t;     // lane % 4: the accumulator column pair 2t, 2t + 1 of each n-tile
};
template <typename Tr>
__device__ __forceinline__ LaneOffsets lane_offsets(unsigned tid, int m0) {
  const int warp = static_cast<int>(tid / 32), lane = static_cast<int>(tid % 32);
  LaneOffsets o;
  o.a = (warp * Tr::kWarpRows + (lane % 8) + 8 * ((lane / 8) % 2)) * Tr::kSmemRow + 16 * (lane / 16);
  o.b = ((lane % 8) + 8 * (lane / 16)) * Tr::kSmemRow + 16 * ((lane / 8) % 2);
  o.v = ((lane % 8) + 8 * ((lane / 8) % 2)) * Tr::kSmemRow + 16 * (lane / 16);
  o.vt = ((lane % 8) + 8 * (lane / 16)) * Tr::kVtRow + 16 * ((lane / 8) % 2);
  o.row0 = m0 + warp * Tr::kWarpRows + lane / 4;
  o.t = lane % 4;
  return o;
}

// The num_splits = 1 epilogue of the 16-bit recipes when O's rows are 16-byte aligned: O = a / l goes out
// through shared memory, each lane storing whole 16-byte chunks (a warp's store covers whole rows), instead
// of 4-byte pieces scattered over 8 rows. A warp reuses its own rows of the Q tile: no other warp reads
// them, and its ldmatrix reads of Q are warp-collective and completed before its last score MMA.
template <typename Tr, int kMT, int kNTilesO>
__device__ __forceinline__ void store_o_via_smem(const FwdParams& p, const float (&acc)[kMT][kNTilesO][4],
                                                 const OnlineSoftmax (&sm)[kMT], unsigned char* s_q, int b, int h,
                                                 int m0, int warp, int lane) {
  using ET = typename Tr::ET;
  static_assert(!Tr::kIsFp8, "fp8 rows of Q are narrower than rows of O");
  const int g = lane / 4, t = lane % 4;
  unsigned char* s_o = s_q + warp * Tr::kWarpRows * Tr::kSmemRow;
  __syncwarp();
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = sm[mt].row_sum[r];
      const float inv = inverse_l(l);
      unsigned char* o_row = s_o + (16 * mt + 8 * r + g) * Tr::kSmemRow;
#pragma unroll
      for (int i = 0; i < kNTilesO; ++i) {
        const float x0 = normalised(acc[mt][i][2 * r], l, inv);
        const float x1 = normalised(acc[mt][i][2 * r + 1], l, inv);
        *reinterpret_cast<uint32_t*>(o_row + (8 * i + 2 * t) * 2) = ET::pack_out(x0, x1);
      }
    }
  __syncwarp();
  constexpr int kChunks = Tr::kRowBytes / 16;
  auto* o_g = static_cast<unsigned char*>(p.o) +
              (static_cast<long long>(b) * p.o_stride[0] + static_cast<long long>(h) * p.o_stride[1]) * 2;
  const long long o_row_bytes = p.o_stride[2] * 2;
  const int row0 = m0 + warp * Tr::kWarpRows;
#pragma unroll
  for (int i = lane; i < Tr::kWarpRows * kChunks; i += 32) {
    const int r = i / kChunks, ch = i % kChunks;
    if (row0 + r < p.n_q)
      *reinterpret_cast<uint4*>(o_g + (row0 + r) * o_row_bytes + ch * 16) =
          *reinterpret_cast<const uint4*>(s_o + r * Tr::kSmemRow + ch * 16);
  }
  if (p.lse && t == 0) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + 16 * mt + 8 * r + g;
        const float l = sm[mt].row_sum[r];
        if (row < p.n_q) p.lse[lse_index(p, b, h, row)] = row_lse(sm[mt].row_max[r], l, p.scale_eff, p.lse_offset);
      }
  }
}

// A run-time bool, or the value of a std::bool_constant (a compile-time branch of the tile body).
template <typename T>
__host__ __device__ constexpr bool as_bool(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v;
  } else {
    return T::value;
  }
}

// Calls f(mt, r, row) for each row the warp holds (m-tile mt, half r: row warp_row0 + 16 mt + 8 r) that
// lies inside the problem: the epilogue's walk over a warp's accumulator rows.
template <int kMT, typename F>
__device__ __forceinline__ void for_each_row(int warp_row0, int n_q, F&& f) {
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = warp_row0 + 16 * mt + 8 * r;
      if (row < n_q) f(mt, r, row);
    }
}

}  // namespace detail

// One block's work, at grid position (bx, by, bz). kGuard = false: the fast path (fwd_kernel), which
// flags the block for a redo when its result may hold a NaN leaked from V through a zero P (see
// value_nan_guard.h). kGuard = true: the redo (fwd_redo_kernel), which keeps each NaN to the rows that see
// its key; it re-reads Q from shared memory instead of holding it in registers, to make room.
template <typename Tr, bool kGuard>
__device__ __forceinline__ void fwd_block(const FwdParams& p, int bx, int by, int bz) {
  using ET = typename Tr::ET;
  using Mma = typename ET::Mma;
  using OutBits = uint16_t;  // every output format of this kernel is 16-bit (fp16 / bf16)
  constexpr int kBlockM = Tr::kBlockM;
  constexpr int kBlockN = Tr::kBlockN;

  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* s_q = smem;
  unsigned char* s_k = s_q + Tr::kSmemQ;
  unsigned char* s_v = s_k + Tr::kStages * Tr::kSmemKV;
  unsigned char* s_vt = s_v + Tr::kStages * Tr::kSmemKV;
  auto* s_nan_tile = reinterpret_cast<uint32_t*>(s_vt + Tr::kSmemVt);
  auto* s_nan_rows = s_nan_tile + Tr::kBlockN * nan_guard::kWords<Tr>;

  static_assert(Tr::kStages == 2 || Tr::kSubTiles == 1, "one stage waits for V between S and P.V: one step");
  static_assert(Tr::kStages == 2 || !Tr::kLongSteps);
  constexpr bool kQInRegs = Tr::kQInRegs && !kGuard;
  const BlockPlace bp = place_block<Tr::kBlockM, Tr::kBlockN>(p, bx, by, bz);
  const int h = bp.h, split = bp.split, b = bp.b, h_kv = bp.h_kv, m0 = bp.m0;
  const int nb_begin = bp.nb_begin, nb_end = bp.nb_end;
  const BlockMask mask = bp.mask;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;

  const auto* q_g = static_cast<const unsigned char*>(p.q) +
                    (static_cast<long long>(b) * p.q_stride[0] + static_cast<long long>(h) * p.q_stride[1]) * ET::kBytes;
  const auto* k_g = static_cast<const unsigned char*>(p.k) +
                    (static_cast<long long>(b) * p.k_stride[0] + static_cast<long long>(h_kv) * p.k_stride[1]) * ET::kBytes;
  const auto* v_g = static_cast<const unsigned char*>(p.v) +
                    (static_cast<long long>(b) * p.v_stride[0] + static_cast<long long>(h_kv) * p.v_stride[1]) * ET::kBytes;
  // Row strides in bytes fit 32 bits (the host repacks views whose row stride is 2^24 bytes or more).
  const int q_row = static_cast<int>(p.q_stride[2] * ET::kBytes);
  const int k_row = static_cast<int>(p.k_stride[2] * ET::kBytes);
  const int v_row = static_cast<int>(p.v_stride[2] * ET::kBytes);

  // Long-step kernels re-derive these in each tile and in the epilogue (kLongSteps).
  const detail::LaneOffsets lane_off = detail::lane_offsets<Tr>(threadIdx.x, m0);

  constexpr int kMT = Tr::kMTiles;
  float acc[kMT][Tr::kNTilesO][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int i = 0; i < Tr::kNTilesO; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][i][e] = 0.0f;
  OnlineSoftmax sm[kMT];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) sm[mt].init();
  const float c = p.scale_log2;

  if (nb_begin < nb_end) {
    detail::load_tile<Tr, kBlockM>(s_q, q_g, q_row, m0, p.n_q);
    detail::load_tile<Tr, kBlockN>(s_k, k_g, k_row, nb_begin * kBlockN, mask.kv_len);
    if constexpr (Tr::kStages == 2) detail::load_tile<Tr, kBlockN>(s_v, v_g, v_row, nb_begin * kBlockN, mask.kv_len);
    tile::cp_async_commit();
  }

  uint32_t q_frag[kQInRegs ? kMT : 1][kQInRegs ? Tr::kKSteps : 1][4];
  int stage = 0;
  for (int nb = nb_begin; nb < nb_end; ++nb, stage ^= 1) {
    // kStages = 2: one barrier per tile. It publishes tile nb (the only cp.async group in flight) to all
    // warps, and it proves every warp is done with tile nb-1, whose stage the prefetch of tile nb+1 now
    // overwrites while this tile is computed.
    // kStages = 1: this barrier publishes K(nb) and proves every warp is done with V(nb-1), which V(nb)
    // now overwrites; the second one (before P.V) publishes V(nb) and frees K(nb) for K(nb+1).
    tile::cp_async_wait<0>();
#ifdef FC_BUG_MISSING_WAIT
    // Test-only build (FLASHCHECK_BUG_KERNELS, tests/gpu): the barrier is missing after the first tile,
    // so warps read a stage other warps' copies have not provably landed in, and the prefetch overwrites
    // a stage other warps may still read. FlashInfer #1046 ("Barrier error detected. Missing wait");
    // compute-sanitizer racecheck must report it.
    if (nb == nb_begin)
#endif
    __syncthreads();
    if constexpr (Tr::kStages == 2) {
      if (nb + 1 < nb_end) {
        detail::load_tile<Tr, kBlockN>(s_k + (stage ^ 1) * Tr::kSmemKV, k_g, k_row, (nb + 1) * kBlockN, mask.kv_len);
        detail::load_tile<Tr, kBlockN>(s_v + (stage ^ 1) * Tr::kSmemKV, v_g, v_row, (nb + 1) * kBlockN, mask.kv_len);
        tile::cp_async_commit();
      }
    } else {
      detail::load_tile<Tr, kBlockN>(s_v, v_g, v_row, nb * kBlockN, mask.kv_len);
      tile::cp_async_commit();
    }

    const detail::LaneOffsets lt =
        Tr::kLongSteps ? detail::lane_offsets<Tr>(tile::thread_index_volatile(), m0) : lane_off;
    const int a_off = lt.a, b_off = lt.b, v_off = lt.v, vt_off = lt.vt, warp_row0 = lt.row0, t_col = lt.t;
    const int buf = Tr::kStages == 2 ? stage : 0;
    const unsigned char* sk = s_k + buf * Tr::kSmemKV;
    unsigned char* sv = s_v + buf * Tr::kSmemKV;
    // Boundary tiles only (interior tiles show every key to every row): a NaN in V must not reach the
    // rows that do not see its key through their zero P. Block-uniform, before V is read (fp8: before
    // its transposition); with one stage, once V has landed (below).
    const bool tile_masked = mask.needs_mask(nb);
    if constexpr (kGuard && Tr::kStages == 2) {
      if (tile_masked) nan_guard::zero_tile_nans<Tr>(sv);
    }
    if constexpr (kQInRegs) {
      if (nb == nb_begin) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int ks = 0; ks < Tr::kKSteps; ++ks)
            tile::ldmatrix_x4(q_frag[mt][ks], tile::smem_addr(s_q + a_off + mt * 16 * Tr::kSmemRow + ks * 32));
      }
    }
    if constexpr (Tr::kIsFp8 && Tr::kStages == 2) {
      detail::transpose_v_fp8<Tr>(sv, s_vt);
      __syncthreads();
    }

    // The tile is consumed in sub-tiles of kSubN keys (kSubN = Bc except where S for the whole tile
    // would not fit in registers next to O): each sub-tile is one online-softmax step (softmax.h).
    // The tile body is compiled twice, for boundary tiles (element mask) and interior tiles (none), and
    // chosen once per tile: a branch between the score GEMM and the softmax would split them into two
    // blocks, and ptxas could not start the row max while the last score MMAs are in flight.
    // fp8 and the redo kernel keep one body with a run-time test: their registers are too tight for two.
    auto run_tile = [&](auto masked, auto l_fp32) {
      const bool kMasked = detail::as_bool(masked);  // a constant for the 16-bit bodies
      // Interior bodies of long-step tiles take the whole tile at once (kSubNInterior).
      constexpr bool kLong = std::is_same_v<decltype(masked), std::false_type> && Tr::kLongSteps;
      constexpr int kSubN = kLong ? Tr::kSubNInterior : Tr::kSubN;
      constexpr int kNTilesSub = kSubN / 8;
      constexpr int kPVStepsSub = Tr::kIsFp8 ? kSubN / 32 : kSubN / 16;
#pragma unroll 1
      for (int sub = 0; sub < kBlockN / kSubN; ++sub) {
        const unsigned char* sk_s = sk + sub * kSubN * Tr::kSmemRow;
        const unsigned char* sv_s = sv + sub * kSubN * Tr::kSmemRow;
        [[maybe_unused]] const unsigned char* svt_s = s_vt + sub * kSubN;  // V^T: keys are columns
        // ---- S = Q K^T (fp32) ----
        float s[kMT][kNTilesSub][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int j = 0; j < kNTilesSub; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][j][e] = 0.0f;
        // Long steps: the k-loop rolled, so that ptxas cannot keep K fragments of several k-steps in flight
        // beside S for 128 keys (it spills otherwise).
        constexpr int kKsUnroll = kLong ? 1 : Tr::kKSteps;
#pragma unroll kKsUnroll
        for (int ks = 0; ks < Tr::kKSteps; ++ks) {
          uint32_t a[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            if constexpr (kQInRegs) {
#pragma unroll
              for (int e = 0; e < 4; ++e) a[mt][e] = q_frag[mt][ks][e];
            } else {
              tile::ldmatrix_x4(a[mt], tile::smem_addr(s_q + a_off + mt * 16 * Tr::kSmemRow + ks * 32));
            }
          }
#pragma unroll
          for (int np = 0; np < kNTilesSub / 2; ++np) {
            uint32_t bk[4];
            tile::ldmatrix_x4(bk, tile::smem_addr(sk_s + b_off + np * 16 * Tr::kSmemRow + ks * 32));
            detail::mma_n_tile_pair<Mma>(s, a, bk, np);
          }
        }

        // ---- mask (only tiles that straddle a boundary) ----
        const int n0 = nb * kBlockN + sub * kSubN;
        if (kMasked) {
          const RowMask rm = RowMask::make(p, b);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) mask_fragment(s[mt], rm, p, warp_row0 + 16 * mt, n0, t_col);
        }

        // ---- online softmax ----
        // P~ packed per (m-tile, n-tile, row): 16-bit formats two halves per register, fp8 two bytes.
        uint32_t pk[kMT][kNTilesSub][2];
        float alpha[kMT][2];
        if constexpr (kLong) {
          // Long steps: as below, but P~ is rounded and multiplied into O in parts of 32 keys, so that the
          // packed P~ of the whole step is never live beside S.
          float mc[kMT][2];
          softmax_max_alpha(sm, s, c, alpha, mc);
          rescale_accumulators(acc, alpha);
          constexpr int kPart = 4;  // n-tiles per part
          detail::static_for<kNTilesSub / kPart>([&](auto part) {
            constexpr int j0 = decltype(part)::value * kPart, j1 = j0 + kPart;
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
              round_p<ET, kNTilesSub, Tr::kLFromFp32, true, j0, j1, !Tr::kLOnTensorCores>(s[mt], pk[mt],
                                                                                                   sm[mt], c, mc[mt]);
            detail::pv_mma_16bit<Tr, kMT, kNTilesSub, j0 / 2, j1 / 2>(acc, pk, sv_s, v_off, sm);
          });
        } else if constexpr (!Tr::kIsFp8 && !kGuard) {
          // 16-bit: new max and alpha first, then the O rescale (a branch), then exps, rounding and l sums
          // as one straight block, so that the SFU exps overlap the conversions and adds (and the first
          // P.V MMAs) instead of issuing as one burst before the rescale's branch.
          float mc[kMT][2];
          softmax_max_alpha(sm, s, c, alpha, mc);
          rescale_accumulators(acc, alpha);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            round_p<ET, kNTilesSub, Tr::kLFromFp32, true, 0, kNTilesSub, !Tr::kLOnTensorCores>(
                s[mt], pk[mt], sm[mt], c, mc[mt]);
        } else {
          // fp8 (registers tighter: P packing and V^T fragments) and the redo kernel (rarely run; it
          // keeps Q in shared memory and the NaN maps live): exps in place, then the rescale, then the
          // rounding, with the l convention branched once around the whole loop.
          softmax_update(sm, s, c, alpha);
          rescale_accumulators(acc, alpha);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            if (detail::as_bool(l_fp32)) {
              round_p<ET, kNTilesSub, true>(s[mt], pk[mt], sm[mt]);
            } else {
              round_p<ET, kNTilesSub, false, false, 0, kNTilesSub, !Tr::kLOnTensorCores>(s[mt], pk[mt], sm[mt]);
            }
          }
        }

        if constexpr (Tr::kStages == 1) {
          tile::cp_async_wait<0>();
          __syncthreads();
          if (nb + 1 < nb_end) {
            detail::load_tile<Tr, kBlockN>(s_k, k_g, k_row, (nb + 1) * kBlockN, mask.kv_len);
            tile::cp_async_commit();
          }
          if constexpr (kGuard) {
            if (kMasked) nan_guard::zero_tile_nans<Tr>(sv);
          }
          if constexpr (Tr::kIsFp8) {
            detail::transpose_v_fp8<Tr>(sv, s_vt);
            __syncthreads();
          }
        }

        // ---- O += P~ V ----
        if constexpr (!Tr::kIsFp8) {
          if constexpr (!kLong)
            detail::pv_mma_16bit<Tr, kMT, kNTilesSub, 0, kPVStepsSub, kGuard>(acc, pk, sv_s, v_off, sm);
        } else {
          uint32_t pa[kMT][kPVStepsSub][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int kk = 0; kk < kPVStepsSub; ++kk) {
              pa[mt][kk][0] = pk[mt][4 * kk][0] | (pk[mt][4 * kk + 1][0] << 16);
              pa[mt][kk][1] = pk[mt][4 * kk][1] | (pk[mt][4 * kk + 1][1] << 16);
              pa[mt][kk][2] = pk[mt][4 * kk + 2][0] | (pk[mt][4 * kk + 3][0] << 16);
              pa[mt][kk][3] = pk[mt][4 * kk + 2][1] | (pk[mt][4 * kk + 3][1] << 16);
            }
#pragma unroll
          for (int dp = 0; dp < Tr::kNTilesO / 2; ++dp) {
            if constexpr (Tr::kTwoLevel) {
#pragma unroll
              for (int mt = 0; mt < kMT; ++mt) {
                float t0[4] = {0.f, 0.f, 0.f, 0.f}, t1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int kk = 0; kk < kPVStepsSub; ++kk) {
                  uint32_t bv[4];
                  tile::ldmatrix_x4(bv, tile::smem_addr(svt_s + vt_off + dp * 16 * Tr::kVtRow + kk * 32));
                  tile::mma(Mma{}, t0, pa[mt][kk], bv[0], bv[1]);
                  tile::mma(Mma{}, t1, pa[mt][kk], bv[2], bv[3]);
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  acc[mt][2 * dp][e] = __fadd_rn(acc[mt][2 * dp][e], t0[e]);
                  acc[mt][2 * dp + 1][e] = __fadd_rn(acc[mt][2 * dp + 1][e], t1[e]);
                }
              }
            } else {
#pragma unroll
              for (int kk = 0; kk < kPVStepsSub; ++kk) {
                uint32_t bv[4];
                tile::ldmatrix_x4(bv, tile::smem_addr(svt_s + vt_off + dp * 16 * Tr::kVtRow + kk * 32));
#pragma unroll
                for (int mt = 0; mt < kMT; ++mt) {
                  tile::mma(Mma{}, acc[mt][2 * dp], pa[mt][kk], bv[0], bv[1]);
                  tile::mma(Mma{}, acc[mt][2 * dp + 1], pa[mt][kk], bv[2], bv[3]);
                }
              }
            }
          }
        }
      }
    };
    if constexpr (Tr::kIsFp8) {
      run_tile(tile_masked, p.l_from_fp32_p);
    } else if constexpr (kGuard) {
      run_tile(tile_masked, std::bool_constant<Tr::kLFromFp32>{});
    } else if (tile_masked) {
      run_tile(std::true_type{}, std::bool_constant<Tr::kLFromFp32>{});
    } else {
      run_tile(std::false_type{}, std::bool_constant<Tr::kLFromFp32>{});
    }
  }

  // ---- epilogue ----
  const int warp_row0 =
      Tr::kLongSteps ? detail::lane_offsets<Tr>(tile::thread_index_volatile(), m0).row0 : lane_off.row0;
  if constexpr (!kGuard) {
    // A NaN value can reach a row that does not see its key only through a boundary tile (the MMA's
    // 0 * NaN), and then some accumulator of the block is NaN. A warp holding a NaN flags itself and
    // leaves its rows to fwd_redo_kernel, which recomputes the whole block and also gets the legitimate
    // NaNs right. Every warp writes its flag, so the flags need no clearing, and no warp waits for
    // another. (Asking also whether the block had boundary tiles would keep the key range live across
    // the loop, which makes the fp8 d = 256 tile spill.)
    if (FC_GUARD_VALUE_NANS && p.redo) {
      bool nan[4] = {false, false, false, false};  // four short chains instead of one long one
      if (p.guard_values) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int i = 0; i < Tr::kNTilesO; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) nan[e] = nan[e] || acc[mt][i][e] != acc[mt][i][e];
      }
      // Two m-tiles' l in one accumulator: a NaN l may have come from the other m-tile (pv_mma_16bit).
      if constexpr (Tr::kLOnTensorCores && kMT == 2) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r) nan[2 * mt + r] = nan[2 * mt + r] || sm[mt].row_sum[r] != sm[mt].row_sum[r];
      }
      const bool redo = __any_sync(0xffffffffu, nan[0] || nan[1] || nan[2] || nan[3]);
      const long long block = (static_cast<long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
      if (lane == 0) p.redo[block * Tr::kNWarps + warp] = redo;
      if (redo) return;
    }
  } else {
    nan_guard::clear_rows<Tr>(s_nan_rows, threadIdx.x);
    for (int nb = nb_begin; nb < nb_end; ++nb) {
      if (!mask.needs_mask(nb)) continue;
      __syncthreads();
      nan_guard::map_tile<Tr>(v_g, v_row, nb * kBlockN, mask.kv_len, s_nan_tile, threadIdx.x);
      __syncthreads();
      nan_guard::add_rows<Tr>(s_nan_tile, s_nan_rows, p, b, m0, nb * kBlockN, threadIdx.x);
    }
    __syncthreads();
    nan_guard::poison<Tr>(acc, s_nan_rows, warp * Tr::kWarpRows + g, t);
  }
  // l on the tensor cores is already the whole row's sum in every lane of the quad.
  if constexpr (!Tr::kLOnTensorCores) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) sm[mt].finalize();
  }
  bool stored = false;  // 16-bit outputs with 16-byte aligned rows: through shared memory
  if constexpr (!Tr::kIsFp8) {
    if (p.num_splits == 1 && p.o_vec16) {
      detail::store_o_via_smem<Tr>(p, acc, sm, s_q, b, h, m0, warp, lane);
      stored = true;
    }
  }
  if (stored) return;
  if (p.num_splits == 1) {
    auto* o_g = static_cast<OutBits*>(p.o) + static_cast<long long>(b) * p.o_stride[0] +
                static_cast<long long>(h) * p.o_stride[1];
    detail::for_each_row<kMT>(warp_row0, p.n_q, [&](int mt, int r, int row) {
      store_o_row<ET>(p, o_g, acc[mt], sm[mt], r, t, b, h, row);
    });
  } else {
    detail::for_each_row<kMT>(warp_row0, p.n_q, [&](int mt, int r, int row) {
      store_split_row(p, split_state_index(p, split, b, h, row), acc[mt], r, t, sm[mt].row_max[r], sm[mt].row_sum[r]);
    });
  }
}

template <typename Tr>
__global__ void __launch_bounds__(Tr::kNThreads, 1) fwd_kernel(const FwdParams p) {
  fwd_block<Tr, false>(p, blockIdx.x, blockIdx.y, blockIdx.z);
}

// Runs the guarded block for every grid position fwd_kernel flagged (grid (gx, gy, gz)). Launched right
// after it on the same stream with a small grid: when nothing is flagged (almost always) each block reads
// its share of the flags once and leaves. A separate kernel, so that the fast kernel's register
// allocation and code are those of an unguarded one (inlined beside it, the guard cost 5-25%).
template <typename Tr>
__global__ void __launch_bounds__(Tr::kNThreads, 1) fwd_redo_kernel(const FwdParams p, int gx, int gy, int gz) {
  // One flag per warp of each forward block; a block is redone when any of its warps flagged itself.
  const long long total = static_cast<long long>(gx) * gy * gz;
  const long long stride = static_cast<long long>(gridDim.x) * Tr::kNThreads;
  auto flagged = [&](long long id) {
    bool any = false;
    for (int w = 0; w < Tr::kNWarps; ++w) any = any || p.redo[id * Tr::kNWarps + w];
    return any;
  };
  for (long long base = 0; base < total; base += stride) {
    const long long mine = base + blockIdx.x + static_cast<long long>(gridDim.x) * threadIdx.x;
    if (__syncthreads_or(mine < total && flagged(mine)) == 0) continue;
    for (int t = 0; t < Tr::kNThreads; ++t) {
      const long long id = base + blockIdx.x + static_cast<long long>(gridDim.x) * t;
      if (id >= total || !flagged(id)) continue;  // block-uniform
      __syncthreads();  // the previous redo of this block is done with shared memory
      fwd_block<Tr, true>(p, static_cast<int>(id % gx), static_cast<int>((id / gx) % gy),
                          static_cast<int>(id / (static_cast<long long>(gx) * gy)));
    }
  }
}

// Device layer: launch one instantiation (and its redo kernel when the runner gave redo flags).
template <typename Tr>
cudaError_t launch_fwd(const FwdParams& p, cudaStream_t stream) {
  const auto kernel = fwd_kernel<Tr>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemFwdBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.n_q + Tr::kBlockM - 1) / Tr::kBlockM, p.heads_q * p.num_splits, p.batch);
  kernel<<<grid, Tr::kNThreads, Tr::kSmemFwdBytes, stream>>>(p);
  err = cudaGetLastError();
  if (err != cudaSuccess || !FC_GUARD_VALUE_NANS || !p.redo) return err;
  const auto redo = fwd_redo_kernel<Tr>;
  err = cudaFuncSetAttribute(redo, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  int device = 0, sms = 0;
  if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
  const long long blocks = static_cast<long long>(grid.x) * grid.y * grid.z;
  const unsigned redo_grid = static_cast<unsigned>(blocks < sms ? blocks : sms);
  redo<<<redo_grid, Tr::kNThreads, Tr::kSmemBytes, stream>>>(p, grid.x, grid.y, grid.z);
  return cudaGetLastError();
}


}  // namespace flashcheck::cuda
