// Collective layer: the run-time attention mask. Masks are data, not template parameters: one kernel
// instantiation serves every mask kind. Per tile, the kernel asks two questions:
//   1. which key tiles can hold an allowed key for this block of rows (the rest are skipped), and
//   2. does this tile need element-wise masking at all (interior tiles run mask-free).
#pragma once

#include "fwd_params.h"

namespace flashcheck::cuda {

// One element of a dense mask ([n_q * n_k] bytes, nonzero: allowed; nullptr: every element).
__device__ __forceinline__ bool dense_mask_allows(const uint8_t* dense, int n_k, int row, int col) {
  return !dense || dense[static_cast<long long>(row) * n_k + col];
}

struct RowMask {
  int kv_len;             // keys >= kv_len are padding
  long long offset;       // 0 or kv_len - n_q (bottom-right alignment)
  bool has_window;
  long long left, right;  // window bounds (kUnboundedWindow = none)
  const uint8_t* dense;   // nullptr or [n_q * n_k]
  int n_k;
  // The band [row + band_lo, row + band_hi) of a row's window, its offsets saturated to [-n_q, kv_len]
  // (which changes no clamped bound), so that row_bounds is 32-bit: 64-bit row arithmetic in the key loop
  // kept sign-extended rows live across it, which cost the 128-key tiles their last registers. The runner
  // keeps n_q and n_k below 2^30, so row + band fits an int.
  int band_lo, band_hi;

  __host__ __device__ static RowMask make(const FwdParams& p, int b) {
    RowMask m;
    int kl = p.n_k;
    if (p.key_lengths) {
      kl = p.key_lengths[b];
      kl = kl < 0 ? 0 : (kl > p.n_k ? p.n_k : kl);
    }
    m.kv_len = kl;
    m.offset = p.align_bottom_right ? static_cast<long long>(kl) - p.n_q : 0;
    m.has_window = p.has_window;
    m.left = p.window_left;
    m.right = p.window_right;
    m.dense = p.dense_mask;
    m.n_k = p.n_k;
    auto saturate = [&](long long x) {
      return static_cast<int>(x < -static_cast<long long>(p.n_q) ? -p.n_q : (x > kl ? kl : x));
    };
    m.band_lo = m.has_window ? saturate(m.offset - m.left) : -p.n_q;
    m.band_hi = m.has_window ? saturate(m.offset + m.right + 1) : kl;
    return m;
  }

  __device__ __forceinline__ bool allowed(int row, int col) const {
    if (col >= kv_len) return false;
    if (has_window) {
      const long long centre = static_cast<long long>(row) + offset;
      if (col < centre - left || col > centre + right) return false;
    }
    if (dense && !dense[static_cast<long long>(row) * n_k + col]) return false;
    return true;
  }

  // Allowed key interval [lo, hi) of one row from the window and the key length alone (the dense mask
  // is checked per element). Computed once per row, so the per-element test is two int compares.
  __device__ __forceinline__ void row_bounds(int row, int& lo, int& hi) const {
    lo = max(row + band_lo, 0);
    hi = min(row + band_hi, kv_len);
    if (hi < lo) hi = lo;
  }
  __device__ __forceinline__ bool dense_allows(int row, int col) const { return dense_mask_allows(dense, n_k, row, col); }

  // Half-open key range [lo, hi) that rows [row_first, row_last] can reach (may be empty).
  __host__ __device__ void key_range(int row_first, int row_last, int& lo, int& hi) const {
    // From the saturated band: the same range as from offset, left and right, in 32 bits (an empty range
    // may start elsewhere: its start is not used).
    lo = has_window ? max(row_first + band_lo, 0) : 0;
    hi = has_window ? min(row_last + band_hi, kv_len) : kv_len;
    if (hi < lo) hi = lo;
  }

  // True when some element of the tile rows [row_first, row_last] x keys [col_first, col_last] may be
  // masked out, i.e. the tile cannot take the mask-free path.
  __device__ __forceinline__ bool tile_needs_mask(int row_first, int row_last, int col_first,
                                                  int col_last) const {
    if (dense) return true;
    if (col_last >= kv_len) return true;
    if (has_window) {
      // Interior iff every row's window covers the whole tile: the tightest rows are the first (right
      // edge) and the last (left edge).
      if (col_first < static_cast<long long>(row_last) + offset - left) return true;
      if (col_last > static_cast<long long>(row_first) + offset + right) return true;
    }
    return false;
  }
};

// Per-block mask summary kept in registers by the fused kernel: three ints instead of the whole RowMask
// (the rest is re-derived from the kernel parameters, which live in the constant bank, on masked tiles).
//   key tiles nb with full_lo <= nb < full_hi are interior (no element masked for any valid row).
struct BlockMask {
  int kv_len;
  int full_lo, full_hi;

  __device__ __forceinline__ static BlockMask make(const RowMask& m, int row_first, int row_last, int block_n) {
    BlockMask bm;
    bm.kv_len = m.kv_len;
    int lo = 0, hi = m.kv_len / block_n;  // tiles entirely below kv_len
    if (m.has_window) {
      // interior iff n0 >= row_last + off - left and n0 + block_n - 1 <= row_first + off + right, from the
      // saturated band (32-bit; where it saturates, the interior is empty or unbounded on that side as
      // with the exact bounds)
      const int a = row_last + m.band_lo;
      if (a > 0) lo = (a + block_n - 1) / block_n;
      const int b = row_first + m.band_hi;  // n0 + block_n <= b
      const int bh = b >= 0 ? b / block_n : -1;
      hi = bh < hi ? bh : hi;
    }
    if (m.dense) hi = lo;  // every tile is checked element-wise
    bm.full_lo = lo;
    bm.full_hi = hi < lo ? lo : hi;
    return bm;
  }
  __device__ __forceinline__ bool needs_mask(int nb) const { return nb < full_lo || nb >= full_hi; }
};

// Which key blocks a (row block, split) pair iterates: [block_begin, block_end) in units of kBlockN.
// The full range of reachable key blocks is cut into num_splits contiguous chunks of equal size (the last
// may be shorter or empty); a chunk that holds no key writes the empty state (m = -inf, l = 0, a = 0).
__host__ __device__ inline void split_block_range(int key_lo, int key_hi, int block_n, int num_splits,
                                                  int split, int& block_begin, int& block_end) {
  const int first = key_lo / block_n;
  const int last = key_hi > key_lo ? (key_hi + block_n - 1) / block_n : first;  // exclusive
  const int total = last - first;
  const int per = (total + num_splits - 1) / num_splits;
  block_begin = first + split * per;
  block_end = block_begin + per;
  if (block_end > last) block_end = last;
  if (block_begin > block_end) block_begin = block_end;
}

// The allowed key intervals [lo, hi) of a thread's two fragment rows (row_g and row_g + 8) from the
// window and the key length (RowMask::row_bounds): constant over a work tile's key tiles, so a kernel
// with registers to spare (v2's consumers) computes them once per work tile, and a masked key tile only
// shifts them to its columns. (Per masked tile, RowMask::make read the batch's key length from global
// memory and saturated 64-bit offsets again: about sixty instructions per thread before the compares.)
struct FragmentRows {
  int lo[2], hi[2];
  __device__ __forceinline__ static FragmentRows make(const RowMask& rm, int row_g) {
    FragmentRows fr;
#pragma unroll
    for (int r = 0; r < 2; ++r) rm.row_bounds(row_g + 8 * r, fr.lo[r], fr.hi[r]);
    return fr;
  }
};

// The element mask on one m16n8 accumulator fragment: s[j][2r + e] is row row_g + 8r (row_g: the lane's
// row g) and key n0 + 8j + 2t + e. Masked scores become -inf. The rows' bounds are shifted to tile-local
// columns, so that the per-element test is two int compares on constants and a select, or one where the
// row's first key is at or before the fragment. A dense mask is a branch of its own, taken once per tile:
// tested inside the element loop it made every element a divergent branch (BSSY/BSYNC around two branches
// and the load: about seven instructions per element where the band needs three), which every causal and
// window tile paid.
template <int kNTiles>
__device__ __forceinline__ void mask_fragment(float (&s)[kNTiles][4], const FragmentRows& rows, const FwdParams& p,
                                              int row_g, int n0, int t) {
  const bool dense = p.dense_mask != nullptr;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_g + 8 * r;
    const int lo = rows.lo[r] - (n0 + 2 * t), hi = rows.hi[r] - (n0 + 2 * t);
    if (!dense && lo <= 0) {
      // The row's first visible key is at or before this thread's first column (always under a causal
      // mask, which has no lower bound): one compare per element.
#pragma unroll
      for (int j = 0; j < kNTiles; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int cl = 8 * j + e;
          s[j][2 * r + e] = cl < hi ? s[j][2 * r + e] : -INFINITY;
        }
    } else if (!dense) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int cl = 8 * j + e;
          s[j][2 * r + e] = cl >= lo && cl < hi ? s[j][2 * r + e] : -INFINITY;
        }
    } else {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int cl = 8 * j + e;
          const bool ok =
              cl >= lo && cl < hi && row < p.n_q && dense_mask_allows(p.dense_mask, p.n_k, row, n0 + 2 * t + cl);
          if (!ok) s[j][2 * r + e] = -INFINITY;
        }
    }
  }
}
// The same with the rows' bounds computed here (v1: its registers are spoken for across the key loop).
template <int kNTiles>
__device__ __forceinline__ void mask_fragment(float (&s)[kNTiles][4], const RowMask& rm, const FwdParams& p, int row_g,
                                              int n0, int t) {
  mask_fragment(s, FragmentRows::make(rm, row_g), p, row_g, n0, t);
}

// Where a block of kBlockM query rows sits in the problem, at grid position (bx, by, bz) of the forward
// grid (x = row block, y = head x split, z = batch): its rows, head, split and the key tiles of kBlockN
// it visits. Row blocks in reverse order: under a causal mask the last blocks have the most keys, so they
// start first and the short ones fill the tail of the grid.
struct BlockPlace {
  int m0, row_last, h, split, b, h_kv;
  int nb_begin, nb_end;  // key tiles [nb_begin, nb_end)
  BlockMask mask;
};
template <int kBlockM, int kBlockN>
__device__ __forceinline__ BlockPlace place_block(const FwdParams& p, int bx, int by, int bz) {
  BlockPlace bp;
  const int m_block = (p.n_q + kBlockM - 1) / kBlockM - 1 - bx;
  bp.h = by / p.num_splits;
  bp.split = by % p.num_splits;
  bp.b = bz;
  bp.h_kv = bp.h / p.group;
  bp.m0 = m_block * kBlockM;
  bp.row_last = min(bp.m0 + kBlockM, p.n_q) - 1;
  const RowMask rm = RowMask::make(p, bp.b);
  int key_lo, key_hi;
  rm.key_range(bp.m0, bp.row_last, key_lo, key_hi);
  split_block_range(key_lo, key_hi, kBlockN, p.num_splits, bp.split, bp.nb_begin, bp.nb_end);
  bp.mask = BlockMask::make(rm, bp.m0, bp.row_last, kBlockN);
  return bp;
}

}  // namespace flashcheck::cuda
