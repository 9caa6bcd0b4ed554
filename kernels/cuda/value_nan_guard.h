// Collective layer: keeps a NaN in V away from the rows that do not see its key.
//
// The tensor-core P.V multiplies every row of a tile by every key of it, so a row's zero P at a masked
// key still computes 0 * NaN = NaN. docs/semantics.md says a masked key is never read. Rows that see the
// key must get the NaN; rows that do not must not. Only boundary tiles (mask.h) mix the two; interior
// tiles show every key to every row, where the plain product is already right.
//
// The guard never slows the common case:
//   1. fwd_kernel runs unguarded. In its epilogue a block that has boundary tiles and holds a NaN in its
//      accumulator (the only way a leak can show) flags itself and writes nothing; other blocks write
//      their result and a 0 flag.
//   2. fwd_redo_kernel, launched after it, recomputes the flagged blocks with fwd_block<Tr, true>, which
//      (a) in the key loop replaces the NaNs of each boundary V tile in shared memory by 0, so the tile's
//      MMA stays finite for every row, and (b) in the epilogue reads the boundary tiles' V again into a
//      bit map per tile, ORs per row the columns in which that row sees a NaN, and sets a(row, column) =
//      NaN there. NaN is absorbing (every later rescale and add keeps it), so setting it at the end gives
//      the value that setting it at the tile would have given.
// The redo is a separate kernel: inlined into the fast kernel, even as a separate branch, the guard costs
// registers and spills; as it is, it costs about 0.4% (measured on the H200, docs/cuda-kernel.md).
#pragma once

#include <cstdint>

#include "mask.h"

namespace flashcheck::cuda::nan_guard {

// Bit l set when element l of the packed word is a NaN (elements of ET::kBytes bytes, little endian).
template <typename ET>
__device__ __forceinline__ uint32_t nan_lanes(uint32_t x) {
  constexpr int kBits = 8 * ET::kBytes;
  constexpr int kLanes = 4 / ET::kBytes;
  constexpr uint32_t kAbs = (1u << (kBits - 1)) - 1u;
  uint32_t m = 0;
#pragma unroll
  for (int l = 0; l < kLanes; ++l)
    if (((x >> (kBits * l)) & kAbs) > ET::kNanAbove) m |= 1u << l;
  return m;
}

template <typename ET>
__device__ __forceinline__ uint32_t zero_lanes(uint32_t x, uint32_t lanes) {
  constexpr int kBits = 8 * ET::kBytes;
  constexpr uint32_t kElem = kBits == 32 ? 0xffffffffu : (1u << kBits) - 1u;
#pragma unroll
  for (int l = 0; l < 4 / ET::kBytes; ++l)
    if ((lanes >> l) & 1u) x &= ~(kElem << (kBits * l));
  return x;
}

// One bit per column: words per key row (tile map) and per query row (row map).
template <typename Tr> constexpr int kWords = Tr::kHeadDim / 32;

// Step 2a. Block-uniform callers only (it ends with a barrier): NaN -> 0 in the V tile in shared memory.
template <typename Tr>
__device__ __forceinline__ void zero_tile_nans(unsigned char* sv) {
  using ET = typename Tr::ET;
  constexpr int kWordsPerRow = Tr::kRowBytes / 4;
#pragma unroll 1
  for (int i = threadIdx.x; i < Tr::kBlockN * kWordsPerRow; i += Tr::kNThreads) {
    auto* v = reinterpret_cast<uint32_t*>(sv + (i / kWordsPerRow) * Tr::kSmemRow) + i % kWordsPerRow;
    *v = zero_lanes<ET>(*v, nan_lanes<ET>(*v));
  }
  __syncthreads();
}

// Steps 2b-2c run on Tr::kNThreads threads numbered tid = 0 .. kNThreads - 1 (v1: the block; v2: its
// two consumer warpgroups).
// Step 2b: the NaN bit map of the V tile at keys [n0, n0 + Bc) straight from global memory (keys at or
// past kv_len count as finite: the kernel never lets them reach a row). The caller brackets it with
// barriers.
template <typename Tr>
__device__ __forceinline__ void map_tile(const unsigned char* v_g, int v_row, int n0, int kv_len,
                                         uint32_t* tile_map, int tid) {
  using ET = typename Tr::ET;
  constexpr int kW = kWords<Tr>;
  constexpr int kPacked = 32 * ET::kBytes / 4;  // 32-bit words of V per map word
  constexpr int kLanes = 4 / ET::kBytes;
  for (int i = tid; i < Tr::kBlockN * kW; i += Tr::kNThreads) {
    const int key = n0 + i / kW;
    uint32_t bits = 0;
    if (key < kv_len) {
      const auto* v = reinterpret_cast<const uint32_t*>(v_g + static_cast<long long>(key) * v_row + (i % kW) * 32 * ET::kBytes);
      for (int q = 0; q < kPacked; ++q) bits |= nan_lanes<ET>(v[q]) << (q * kLanes);
    }
    tile_map[i] = bits;
  }
}

// Step 2c: row_map[row][word] |= OR of the tile map over the keys of the tile that the row sees. Each
// thread owns the same row_map words in every call.
template <typename Tr>
__device__ __forceinline__ void add_rows(const uint32_t* tile_map, uint32_t* row_map, const FwdParams& p, int b,
                                         int m0, int n0, int tid) {
  constexpr int kW = kWords<Tr>;
  const RowMask rm = RowMask::make(p, b);
  for (int i = tid; i < Tr::kBlockM * kW; i += Tr::kNThreads) {
    const int row = m0 + i / kW;
    if (row >= p.n_q) continue;
    int lo, hi;
    rm.row_bounds(row, lo, hi);
    uint32_t seen = 0;
    for (int k = 0; k < Tr::kBlockN; ++k) {
      const int key = n0 + k;
      if (key >= lo && key < hi && rm.dense_allows(row, key)) seen |= tile_map[k * kW + i % kW];
    }
    row_map[i] |= seen;
  }
}

template <typename Tr>
__device__ __forceinline__ void clear_rows(uint32_t* row_map, int tid) {
  for (int i = tid; i < Tr::kBlockM * kWords<Tr>; i += Tr::kNThreads) row_map[i] = 0;
}

// Step 2d, after a barrier: a = NaN where the row saw a NaN value. The lane owns the accumulator layout
// of mma.sync m16n8: local rows row0 + 16 mt + 8 r, columns 8 i + 2 t + e.
template <typename Tr, int kMT>
__device__ __forceinline__ void poison(float (&acc)[kMT][Tr::kNTilesO][4], const uint32_t* row_map, int row0,
                                       int t) {
  constexpr int kW = kWords<Tr>;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const uint32_t* w = row_map + (row0 + 16 * mt + 8 * r) * kW;
#pragma unroll
      for (int i = 0; i < Tr::kNTilesO; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if ((w[i / 4] >> (8 * (i % 4) + 2 * t + e)) & 1u) acc[mt][i][2 * r + e] = __int_as_float(0x7fffffff);
    }
}

}  // namespace flashcheck::cuda::nan_guard
