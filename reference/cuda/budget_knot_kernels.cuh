// The knot form of the two-kernel budget (BudgetParams::knots; reference/budget_knots.h, docs/error-analysis.md
// §3.18): after the row form's weights kernel, the centred sums of each head's tiles of kKnotRows rows come
// from products on the fp16 tensor cores instead of the sums kernel's loop per (row, key, column). The rows'
// fp16 weights W and W3, their sums, counts and alignment excess bounds (what error_budget.cpp's knot walk takes
// from the row) come from the weights kernel itself (budget_knot_weights.cuh), WZ from knot_zeta_kernel.
//
//   knot_v_kernel        once per judgement: each column's scale, V's fp16 values at both scales, the flags;
//   knot_tiles_kernel    per tile and column: its knots (the smallest and largest o of its rows), into its
//                        rows' slots;
//   knot_products_kernel per tile, 64 columns and split of kKnotSplitKeys keys: the chains of the seven
//                        products (KnotSums), one kind of weight a launch;
//   knot_finalize_kernel per element: the chains added in split order, knot_bounds, and where certified the
//                        element's bound (write_element); the rest marked;
//   knot_chains_kernel   per element the knots left: the row form's three chains (budget_sums.h
//                        RowColumnSum), one warp an element, and its bound.
//
// The operands and bounds are budget_knots.h's, the CPU's too; the CPU adds the products in double, these
// kernels in the tensor cores' truncating fp32 chains, which the bounds cover either way (so the two agree
// within the chains' factor, knot_chain_up). Every element of a knot-form row takes the row's counts and
// excess bounds, as on the CPU.
#pragma once

#include <cuda_fp16.h>

#include "reference/abs_scale_bound.h"
#include "reference/budget_knots.h"
#include "reference/budget_terms.h"
#include "reference/cuda/budget_column_sums.cuh"
#include "reference/cuda/budget_knot_weights.cuh"
#include "reference/cuda/hmma.cuh"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {


// Block-wide maximum and "all" of one value a thread (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ double block_max(double x, double* red) {
  x = warp_max(x);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = x;
  __syncthreads();
  double m = 0;
  for (int w = 0; w < int(blockDim.x / 32); ++w) m = fmax(m, red[w]);
  return m;
}

// One block a column of a key-value head: its scale rc (2 max |V| into [2^14, 2^15)), whether every value is
// within delta of its fp16 value at both scales and finite (KnotWalk::head), whether one is a nonzero value
// below the operands' normal range (tensor cores only), and the values' fp16 bits (0 for the padding keys) and
// stored values (for knot_chains_kernel, whose lanes then read consecutive keys of a column).
__global__ void knot_v_kernel(Shape s, BudgetParams bp, const float* v32, KnotWork kw) {
  __shared__ double red[32];
  const int64_t bhkv = blockIdx.x / s.dv;
  const int c = int(blockIdx.x % s.dv), b = int(bhkv / s.heads_kv), hk = int(bhkv % s.heads_kv);
  double vmax = 0, bad = 0, small = 0;
  for (int64_t j = threadIdx.x; j < s.n_k; j += blockDim.x) {
    const double v = v32[v_base(s, b, hk, j) + c];
    if (!isfinite(v)) bad = 1;
    vmax = fmax(vmax, fabs(v));
    if (bp.tc && v != 0 && fabs(v) < bp.mn_op) small = 1;
  }
  vmax = block_max(vmax, red);
  bad = block_max(bad, red);
  small = block_max(small, red);
  const double rc = budget::fp16_scale(2 * vmax), rs = rc * budget::kKnotSquareScale;
  double inexact = 0;
  uint16_t* x = kw.x + blockIdx.x * kw.keys_pad;
  uint16_t* x2 = kw.x2 + blockIdx.x * kw.keys_pad;
  for (int64_t j = threadIdx.x; j < kw.keys_pad; j += blockDim.x) {
    const double v = j < s.n_k ? double(v32[v_base(s, b, hk, j) + c]) : 0.0;
    if (bad == 0 && !(budget::knot_value_exact(v, rc) && budget::knot_value_exact(v, rs))) inexact = 1;
    x[j] = bad == 0 ? fp16_bits(budget::knot_value(v, rc)) : 0;
    kw.vt[blockIdx.x * kw.keys_pad + j] = float(v);
    x2[j] = bad == 0 ? fp16_bits(budget::knot_value(v, rs)) : 0;
  }
  inexact = block_max(inexact, red);
  if (threadIdx.x == 0) {
    kw.rc[blockIdx.x] = rc;
    kw.col[blockIdx.x] = (bad == 0 && inexact == 0 ? kKnotColumnExact : 0u) | (small != 0 ? kKnotColumnSmall : 0u);
  }
}

// A tile's knots in column c at both scales (KnotWalk::tile): the smallest and largest o of its rows that have
// a bound to make, from the pass's reference (its rows are all in the pass: passes keep tiles whole).
struct TileKnots {
  budget::KnotPair k, k2;
};
__device__ __forceinline__ TileKnots tile_knots(const Shape& s, const BudgetIn& in, int64_t bh, int64_t tile, int c,
                                               double rc, bool exact) {
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  const int64_t r1 = min((tile + 1) * budget::kKnotRows, s.n_q);
  for (int64_t r = tile * budget::kKnotRows; r < r1; ++r) {
    const int64_t lr = bh * s.n_q + r - s.row0;
    const double lse = in.lse_ref[lr], O = in.o_ref[lr * s.dv + c];
    if (lse != lse || lse == -HUGE_VAL || !isfinite(O)) continue;
    const double of = budget::centred_at(O, s.vd).o;
    lo = fmin(lo, of);
    hi = fmax(hi, of);
  }
  TileKnots t{budget::knot_pair(lo, hi, rc), budget::knot_pair(lo, hi, rc * budget::kKnotSquareScale)};
  t.k.ok = t.k.ok && t.k2.ok && exact;
  t.k2.ok = t.k.ok;
  return t;
}

// The launch's slot of row i of head bh, or -1 where the launch does not hold it.
__device__ __forceinline__ int64_t slot_of(const Shape& s, int64_t launch_blocks, int64_t bh, int64_t i) {
  const int64_t g = bh * s.blocks_per_head() + i / s.rows_per_block - s.block0;
  return g >= 0 && g < launch_blocks ? g * s.rows_per_block + i % s.rows_per_block : -1;
}

// The knots of every tile the launch holds a row of, per column, into each such row's slot (KnotWork::knots):
// one thread a (tile, column) of the heads bh0 .. bh0 + heads - 1, so that the products and the elements read
// them instead of scanning the tile's rows each.
__global__ void knot_tiles_kernel(Shape s, BudgetIn in, BudgetWeights wts, int64_t launch_blocks, int64_t bh0,
                                  int64_t heads) {
  const KnotWork& kw = wts.knot;
  const int64_t tiles_per_head = (s.n_q + budget::kKnotRows - 1) / budget::kKnotRows;
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= heads * tiles_per_head * s.dv) return;
  const int c = int(x % s.dv);
  const int64_t tile = x / s.dv % tiles_per_head, bh = bh0 + x / s.dv / tiles_per_head;
  const int64_t i0 = tile * budget::kKnotRows, i1 = min(i0 + budget::kKnotRows, s.n_q);
  bool any = false;
  for (int64_t i = i0; i < i1 && !any; ++i) any = slot_of(s, launch_blocks, bh, i) >= 0;
  if (!any) return;
  const int b = int(bh / s.heads_q), hk = int(bh % s.heads_q) / s.group;
  const int64_t col = (int64_t(b) * s.heads_kv + hk) * s.dv + c;
  const TileKnots k = tile_knots(s, in, bh, tile, c, kw.rc[col], (kw.col[col] & kKnotColumnExact) != 0);
  const float4 v = k.k.ok ? make_float4(float(k.k.t0), float(k.k.t1), float(k.k2.t0), float(k.k2.t1))
                          : make_float4(NAN, 0.f, 0.f, 0.f);  // fp16 numbers: exact in fp32
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t sl = slot_of(s, launch_blocks, bh, i);
    if (sl >= 0) kw.knots[sl * s.dv + c] = v;
  }
}
// A row's knots in a column from KnotWork::knots (ok where t0 is not NaN; both scales share it).
__device__ __forceinline__ TileKnots read_knots(const KnotWork& kw, int64_t slot, int dv, int c) {
  const float4 v = kw.knots[slot * dv + c];
  const bool ok = v.x == v.x;
  return TileKnots{budget::KnotPair{v.x, v.y, ok}, budget::KnotPair{v.z, v.w, ok}};
}

// The products: kKind 0 the linear sums with W (F0, F1 and the bracket's M), 1 the squares with W3 (G0, G1),
// 2 the underflowed keys' with WZ (Z0, Z1; a tile none of whose rows has one skips it). A block's warps take
// four tiles of one head, so that they share its V: head bh0 + blockIdx.x / groups, tiles 4 (blockIdx.x %
// groups) + w (groups = ceil(tiles per head / 4)); of each tile the rows the launch holds (the others zero, and
// a block with none returns), columns 64 blockIdx.y + 8 nt + (g, or 2t and 2t + 1), keys of split blockIdx.z.
// Each chunk of
// kKnotChunkKeys keys is staged by cp.async while the one before is summed (bench/knot_sums_rate's
// layout: rows padded to kKnotPitch words so that a fragment's eight rows fall in distinct banks).
inline constexpr int kKnotWarps = 4, kKnotCols = 64, kKnotPitch = kKnotChunkKeys / 2 + 4;
inline constexpr size_t kKnotSmemBytes = 2 * size_t(kKnotCols + kKnotWarps * 16) * kKnotPitch * 4;
template <int kKind>
__global__ void __launch_bounds__(32 * kKnotWarps)
    knot_products_kernel(Shape s, BudgetWeights wts, int64_t launch_blocks, int64_t bh0, int64_t groups) {
  constexpr int kAcc = kKind == 0 ? 3 : 2;
  const KnotWork& kw = wts.knot;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t tiles_per_head = (s.n_q + budget::kKnotRows - 1) / budget::kKnotRows;
  const int64_t bh = bh0 + blockIdx.x / groups, first_tile = kKnotWarps * (blockIdx.x % groups);
  const int64_t tile = min(first_tile + warp, tiles_per_head - 1);  // past the head's last: mirrors it, writes nothing
  const bool own = first_tile + warp < tiles_per_head;
  const int b = int(bh / s.heads_q), hk = int(bh % s.heads_q) / s.group;
  const int64_t bhkv = int64_t(b) * s.heads_kv + hk;
  const int c0 = int(blockIdx.y) * kKnotCols;
  // This lane's A rows g and g + 8 and their slots; the tile's rows past n_q or outside the launch are zeros.
  int64_t slot[2];
  bool any_zeta = false;
  for (int h = 0; h < 2; ++h) {
    const int64_t i = tile * budget::kKnotRows + g + 8 * h;
    slot[h] = own && i < s.n_q ? slot_of(s, launch_blocks, bh, i) : -1;
    if (kKind == 2 && slot[h] >= 0) any_zeta = any_zeta || kw.rows[slot[h]].any_zeta;
  }
  // The block's rows' slots, once (the A copies below take them for every chunk).
  __shared__ int64_t row_slots[kKnotWarps * budget::kKnotRows];
  for (int x = threadIdx.x; x < kKnotWarps * budget::kKnotRows; x += blockDim.x) {
    const int64_t wp = x / budget::kKnotRows, i = (first_tile + wp) * budget::kKnotRows + x % budget::kKnotRows;
    int64_t sl = first_tile + wp < tiles_per_head && i < s.n_q ? slot_of(s, launch_blocks, bh, i) : -1;
    // Rows with no sums to make (their weights unwritten) and, for WZ, rows without an underflowed key: zeros.
    if (sl >= 0 && (wts.rows[sl].state != kRowSums || (kKind == 2 && !kw.rows[sl].any_zeta))) sl = -1;
    row_slots[x] = sl;
  }
  if (!__syncthreads_or(slot[0] >= 0 || slot[1] >= 0)) return;  // no row of the block's tiles in this launch
  if (kKind == 2 && !__syncthreads_or(any_zeta)) return;         // no underflowed key in the block's rows
  const bool skip = !__any_sync(0xffffffffu, slot[0] >= 0 || slot[1] >= 0) ||
                    (kKind == 2 && !__any_sync(0xffffffffu, any_zeta));
  // This lane's B columns c0 + 8 nt + g: the tile's knots as fp16 pairs (kKind 1: at the squares' scale), from
  // any of the tile's rows that the launch holds.
  int64_t any_slot = slot[0] >= 0 ? slot[0] : slot[1];
  const unsigned holders = __ballot_sync(0xffffffffu, any_slot >= 0);
  any_slot = __shfl_sync(0xffffffffu, any_slot, holders ? __ffs(holders) - 1 : 0);
  __half2 tlo[8], thi[8];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c = c0 + 8 * nt + g;
    tlo[nt] = thi[nt] = __float2half2_rn(0.f);
    if (c < s.dv && !skip) {
      const TileKnots k = read_knots(kw, any_slot, s.dv, c);
      const budget::KnotPair& p = kKind == 1 ? k.k2 : k.k;
      if (p.ok) tlo[nt] = __half2half2(__double2half(p.t0)), thi[nt] = __half2half2(__double2half(p.t1));
    }
  }
  float acc[kAcc][8][4] = {};
  extern __shared__ uint32_t knot_smem[];
  uint32_t* vs = knot_smem;                          // [2][kKnotCols][kKnotPitch]
  uint32_t* as = knot_smem + 2 * kKnotCols * kKnotPitch;  // [2][kKnotWarps][16][kKnotPitch]
  auto a_at = [&](int buf, int wp, int r) { return as + ((buf * kKnotWarps + wp) * 16 + r) * kKnotPitch; };
  const uint16_t* xv = (kKind == 1 ? kw.x2 : kw.x) + (bhkv * s.dv) * kw.keys_pad;
  const uint16_t* wsrc = kKind == 0 ? kw.w : kKind == 1 ? kw.w3 : kw.wz;
  const int64_t kb = int64_t(blockIdx.z) * kKnotSplitKeys, ke = min(kb + kKnotSplitKeys, kw.keys_pad);
  auto load = [&](int64_t j0, int buf) {
    // V: kKnotCols columns x kKnotChunkKeys keys = 64 x 8 pieces of 16 bytes (columns past dv zeros).
    for (int x = threadIdx.x; x < kKnotCols * (kKnotChunkKeys / 8); x += blockDim.x) {
      const int c = x / (kKnotChunkKeys / 8), p = x % (kKnotChunkKeys / 8);
      const bool ok = c0 + c < s.dv;
      cp_async_16_or_zero(vs + (buf * kKnotCols + c) * kKnotPitch + 4 * p,
                          xv + (ok ? int64_t(c0 + c) * kw.keys_pad : 0) + j0 + 8 * p, ok);
    }
    // A: kKnotWarps x 16 rows x 8 pieces.
    for (int x = threadIdx.x; x < kKnotWarps * 16 * (kKnotChunkKeys / 8); x += blockDim.x) {
      const int p = x % (kKnotChunkKeys / 8), r = x / (kKnotChunkKeys / 8) % 16, wp = x / (kKnotChunkKeys / 8) / 16;
      const int64_t sl = row_slots[wp * budget::kKnotRows + r];
      cp_async_16_or_zero(a_at(buf, wp, r) + 4 * p, wsrc + (sl >= 0 ? sl * kw.keys_pad : 0) + j0 + 8 * p, sl >= 0);
    }
    cp_async_commit();
  };
  load(kb, 0);
  int buf = 0;
  for (int64_t j0 = kb; j0 < ke; j0 += kKnotChunkKeys, buf ^= 1) {
    if (j0 + kKnotChunkKeys < ke) load(j0 + kKnotChunkKeys, buf ^ 1);
    else cp_async_commit();  // an empty group keeps the count of groups in flight
    cp_async_wait_prior();
    __syncthreads();
    if (!skip) {
      const uint32_t* a = a_at(buf, warp, 0);
      const uint32_t* v = vs + buf * kKnotCols * kKnotPitch;
#pragma unroll
      for (int k = 0; k < kKnotChunkKeys / 16; ++k) {
        const int w = 8 * k + t;  // the word of keys 16 k + 2 t, + 1
        uint32_t A[4];
        hmma_a_fragment(a, kKnotPitch, g, w, A);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const uint32_t* vc = v + (8 * nt + g) * kKnotPitch + w;
          const __half2 v0 = *reinterpret_cast<const __half2*>(vc), v8 = *reinterpret_cast<const __half2*>(vc + 4);
          if constexpr (kKind == 1) {
            hmma_16x8x16(acc[0][nt], A, knot_square2(v0, tlo[nt]), knot_square2(v8, tlo[nt]));
            hmma_16x8x16(acc[1][nt], A, knot_square2(v0, thi[nt]), knot_square2(v8, thi[nt]));
          } else {
            hmma_16x8x16(acc[0][nt], A, knot_distance2(v0, tlo[nt]), knot_distance2(v8, tlo[nt]));
            hmma_16x8x16(acc[1][nt], A, knot_distance2(v0, thi[nt]), knot_distance2(v8, thi[nt]));
            if constexpr (kKind == 0)
              hmma_16x8x16(acc[2][nt], A, knot_bracket2(v0, tlo[nt], thi[nt]), knot_bracket2(v8, tlo[nt], thi[nt]));
          }
        }
      }
    }
    __syncthreads();  // this buffer is read before the next chunk's copies overwrite it
  }
  if (skip) return;
  // The chains into [split][sum][slot][column]: sums F0, F1, M (kind 0), G0, G1 (1), Z0, Z1 (2).
  constexpr int kFirst = kKind == 0 ? 0 : kKind == 1 ? 3 : 5;
  const int64_t slots = wts.slots;
#pragma unroll
  for (int m = 0; m < kAcc; ++m)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t sl = slot[e / 2];
        const int col = c0 + 8 * nt + 2 * t + e % 2;
        if (sl < 0 || col >= s.dv) continue;
        kw.partial[((int64_t(blockIdx.z) * kKnotSums + kFirst + m) * slots + sl) * s.dv + col] = acc[m][nt][e];
      }
}

// What each element's bound needs of its row, as the sums kernel builds it (budget_sums_kernel.cuh).
__device__ __forceinline__ RowBoundTerms row_bound_terms(const RowTerms& rt, const BudgetParams& bp, int64_t len) {
  const double fa1_tiles = bp.fa1 ? double((len + bp.tile_n - 1) / bp.tile_n) : 0.0;
  return RowBoundTerms{rt.den,  rt.eps_l, rt.eps_l_prob, rt.floor_abs, fa1_tiles, rt.w_mult, rt.w_zeta,
                       rt.keys, int(rt.n), rt.T,        rt.raises,    rt.merge,  pv_mode_of(bp), rt.row};
}

// An element of a knot-form row: where it is, and what its bound takes of its row and column.
struct KnotElement {
  BlockRows br;
  int64_t i, lr, slot;
  int c;
  bool real;  // the row is below n_q
};
__device__ __forceinline__ KnotElement knot_element(const Shape& s, int64_t slot, int c) {
  KnotElement e;
  e.br = block_rows(s, slot / s.rows_per_block);
  e.i = e.br.i0 + slot % s.rows_per_block;
  e.lr = e.br.r0 + slot % s.rows_per_block - s.row0;
  e.slot = slot, e.c = c;
  e.real = e.i < s.n_q;
  return e;
}
// Its bound from its three sums' bounds (L, Q, Z in true units), with the row's counts and excess bounds.
__device__ __forceinline__ void write_knot_row_element(const KnotElement& e, double L, double Q, double Z,
                                                       const RowTerms& rt, const KnotRowTerms& kr, bool small_col,
                                                       const Shape& s, const BudgetParams& bp, const BudgetIn& in,
                                                       const BudgetOut& out) {
  const int64_t at = e.lr * s.dv + e.c;
  const double O = in.o_ref[at], oe = in.o_err[at];
  const budget::CentredAt ca = budget::centred_at(O, s.vd);
  const budget::ColumnSumBounds sb =
      budget::row_bounds(L, Q, Z, oe, ca.shift, rt.keys.err_c, rt.keys.err_c_det, rt.keys.ep2, rt.row);
  const double excess = budget::max2(kr.x_sub, small_col ? kr.x_small : 0.0);
  const budget::PvCounts counts{int(rt.n), kr.n_blocks, kr.max_tile_blocks};
  write_element(sb, O, oe, excess, counts, row_bound_terms(rt, bp, e.br.len), bp,
                abs_scale_upper(in.a_factor[e.lr], in.abs_scale[at], in.a_floor[e.lr]), out, at);
}

// One thread an element of the launch: the knots' bound where certified; rows that take no part, rows outside
// the model (no claim), NaN elements and rows past n_q are finished here too (as the sums kernel finishes
// them), so that knot_chains_kernel runs only what the knots left.
__global__ void knot_finalize_kernel(Shape s, BudgetParams bp, BudgetIn in, BudgetOut out, BudgetWeights wts,
                                     int64_t launch_blocks) {
  const KnotWork& kw = wts.knot;
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= launch_blocks * s.rows_per_block * s.dv) return;
  const KnotElement e = knot_element(s, x / s.dv, int(x % s.dv));
  unsigned char& done = kw.done[x];
  done = 1;  // rows past n_q too, so that knot_chains_kernel skips them on this byte alone
  if (!e.real) return;
  const RowTerms rt = wts.rows[e.slot];
  if (rt.state == kRowSkip) return;
  const int64_t at = e.lr * s.dv + e.c;
  if (rt.state == kRowOutside) {
    write_bound(out, at, HUGE_VAL, HUGE_VAL, bp.merge_max);
    return;
  }
  const double O = in.o_ref[at];
  if (O != O) {
    write_bound(out, at, 0.0, 0.0, bp.merge_max);
    return;
  }
  const KnotRowTerms kr = kw.rows[e.slot];
  const int64_t col = (int64_t(e.br.b) * s.heads_kv + e.br.hk) * s.dv + e.c;
  const TileKnots k = read_knots(kw, e.slot, s.dv, e.c);
  // The splits' chains in split order (Z0 and Z1 only in a row with an underflowed key: the others' are unwritten).
  double sum[kKnotSums] = {};
  for (int sp = 0; sp < kw.splits; ++sp)
    for (int m = 0; m < kKnotSums; ++m)
      if (m < 5 || kr.any_zeta)
        sum[m] += double(kw.partial[((int64_t(sp) * kKnotSums + m) * wts.slots + e.slot) * s.dv + e.c]);
  const budget::KnotSums ks{sum[0], sum[1], sum[3], sum[4], sum[5], sum[6], sum[2]};
  const double o = budget::centred_at(O, s.vd).o;
  const budget::KnotBounds kb = budget::knot_bounds(ks, kr.row, o, k.k, k.k2, kw.rc[col], s.vd);
  if (!kb.certified) {
    done = 0;
    return;
  }
  write_knot_row_element(e, kb.L, kb.Q, kb.Z, rt, kr, (kw.col[col] & kKnotColumnSmall) != 0, s, bp, in, out);
}

// One warp an element the knots left (done = 0): the row form's chains over the row's visible keys, a lane
// a chunk of kSumChunk keys at a time (each chain from zero, as budget_sums.h restarts them), the chunks'
// double sums added over the warp; then the bound with the row's counts and excess bounds.
__global__ void knot_chains_kernel(Shape s, BudgetParams bp, BudgetIn in, BudgetOut out, BudgetWeights wts,
                                   int64_t launch_blocks) {
  static_assert(budget::kSumChunk == kChunk, "a chain is a mask word's keys");
  const KnotWork& kw = wts.knot;
  const int lane = threadIdx.x % 32;
  const int64_t elements = launch_blocks * s.rows_per_block * s.dv;
  for (int64_t x = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; x < elements;
       x += int64_t(gridDim.x) * blockDim.x / 32) {
    if (kw.done[x]) continue;  // most elements: before any index arithmetic
    const KnotElement e = knot_element(s, x / s.dv, int(x % s.dv));
    const RowTerms rt = wts.rows[e.slot];
    const int64_t at = e.lr * s.dv + e.c;
    const float o = budget::centred_at(in.o_ref[at], s.vd).o;
    int64_t lo, hi;
    row_key_range(s, e.i, e.br.len, lo, hi);
    const unsigned* vis = wts.visible + e.slot * wts.words;
    const unsigned* zk = wts.zeta_keys + e.slot * wts.words;
    const float* v = kw.vt + ((int64_t(e.br.b) * s.heads_kv + e.br.hk) * s.dv + e.c) * kw.keys_pad;
    budget::RowColumnSum sum;
    for (int64_t w = lo / kChunk + lane; w * kChunk < hi; w += 32) {
      const unsigned bits = vis[w], zbits = zk[w] & bits;
      for (int u = 0; u < kChunk; ++u) {
        if (!(bits >> u & 1u)) continue;
        const int64_t j = w * kChunk + u;
        const bool zeta = zbits >> u & 1u;
        const budget::RowWeights rw{wts.e[e.slot * s.n_k + j], zeta ? wts.zeta[e.slot * s.n_k + j] : 0.f};
        sum.add(rw, v[j], o, zeta);
      }
      sum.flush();
    }
    sum.sl = warp_sum(sum.sl), sum.sq = warp_sum(sum.sq), sum.sz = warp_sum(sum.sz);
    if (lane != 0) continue;
    const double av = fabs(s.vd);
    const double n = double(rt.n);
    const int64_t col = (int64_t(e.br.b) * s.heads_kv + e.br.hk) * s.dv + e.c;
    write_knot_row_element(e, budget::f32_sum_bound(sum.sl, n, av), budget::f32_sum_bound(sum.sq, n, s.vd * s.vd),
                           budget::f32_sum_bound(sum.sz, n, av), rt, kw.rows[e.slot],
                           (kw.col[col] & kKnotColumnSmall) != 0, s, bp, in, out);
  }
}

}  // namespace fc::gpu::detail
