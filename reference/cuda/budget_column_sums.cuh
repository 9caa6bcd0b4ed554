// The budget's per-(row, key, column) step and each column's bound (error_budget's third step and its
// close, docs/error-analysis.md §3.9-§3.13 and §0), as the single budget kernel (budget_kernel.cuh) and
// the sums kernel of the two-kernel form (budget_sums_kernel.cuh) both run them: a lane owns kCols
// columns of a row, and a chunk's visible keys are added in ascending order, so the two forms give the
// same bits.
#pragma once

#include <type_traits>

#include "reference/budget_sums.h"
#include "reference/budget_terms.h"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

// fp32 -> tf32, round to nearest even (the tf32 operands of the tf32 recipe), as reference/formats.h.
__device__ __forceinline__ float round_tf32_f(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return f;  // inf / NaN
  u += 0x0fffu + ((u >> 13) & 1u);
  u &= ~0x1fffu;
  return __uint_as_float(u);
}
__device__ __forceinline__ double round_tf32(double x) {  // x is an fp32 value
  return static_cast<double>(round_tf32_f(static_cast<float>(x)));
}

// Where the block counts of a chunk whose keys all lie in one tile start (the aligned case), from the
// lanes' visible keys: the first visible key's block, the last one's, and how many later visible keys
// start a block of their own.
struct ChunkBlocks {
  int tile, m, first_blk, last_blk, later_starts;
};
__device__ __forceinline__ ChunkBlocks chunk_blocks(unsigned visible_lanes, bool x_vis, int tile, int offset_in_tile,
                                                    const BudgetParams& bp) {
  const int lane = threadIdx.x % 32;
  const int blk = int(fast_div(bp.block_div, uint32_t(offset_in_tile + lane)));
  const unsigned before = visible_lanes & ((1u << lane) - 1u);
  const int prev_blk = __shfl_sync(0xffffffffu, blk, before ? 31 - __clz(before) : 0);
  ChunkBlocks c;
  c.tile = tile;
  c.m = __popc(visible_lanes);
  c.later_starts = __popc(__ballot_sync(0xffffffffu, x_vis && before && blk != prev_blk));
  c.first_blk = __shfl_sync(0xffffffffu, blk, __ffs(visible_lanes) - 1);
  c.last_blk = __shfl_sync(0xffffffffu, blk, 31 - __clz(visible_lanes));
  return c;
}

// KeySums (oracle_types.h): with them the reference's error r leaves the per-(key, column) loop. The
// centred sums over |V - O| + r split exactly as sum err_c (|V - O| + r) = sum err_c |V - O| + r sum err_c,
// and the probabilistic one's root by Minkowski: sqrt(sum (ep (|V - O| + r))^2) <= sqrt(sum (ep |V - O|)^2)
// + r sqrt(sum ep^2) (docs/error-analysis.md §0 and §5). Each lane adds the keys whose weights it makes,
// in that order, then the warp reduces: the same bits in the single kernel and the weights kernel.
__device__ __forceinline__ void add_key_sums(KeySums& k, double err_c, double err_c_det, double ep) {
  k.err_c += err_c;
  k.err_c_det += err_c_det;
  k.ep2 += ep * ep;
}
__device__ __forceinline__ void warp_reduce(KeySums& k) {
  k.err_c = warp_sum(k.err_c);
  k.err_c_det = warp_sum(k.err_c_det);
  k.ep2 = warp_sum(k.ep2);
}

// What each column's bound needs of its row (row: the row form's constants, RowTerms::row).
struct RowBoundTerms {
  double den, eps_l, eps_l_prob, floor_abs, fa1_tiles, w_mult, w_zeta;
  KeySums keys;
  int n, T, raises, merge;
  budget::PvMode pv_mode;
  budget::RowFactors row{};
};

// A key's weights in the row form as the sums kernel reads them (BudgetWeights::w): e and z
// (budget_sums.h RowWeights) and whi, which only the excess takes.
struct RowKeyWeights {
  float e, z, whi;
};

// One bound into the outputs, or its maximum with what is there (a basis with several budgets).
__device__ __forceinline__ void write_bound(const BudgetOut& out, int64_t at, double ob, double obp, bool merge_max) {
  if (merge_max) {
    out.o_bound[at] = fmax(out.o_bound[at], ob);
    out.o_bound_prob[at] = fmax(out.o_bound_prob[at], obp);
  } else {
    out.o_bound[at] = ob;
    out.o_bound_prob[at] = obp;
  }
}

// One element's bound and probabilistic bound (§0) from its sums' bounds, its counts of rounding steps and its
// alignment excess, into the outputs at `at` (ColumnSums::write, and the knot form's kernels).
__device__ __forceinline__ void write_element(const budget::ColumnSumBounds& sb, double O, double oe, double excess,
                                              const budget::PvCounts& counts, const RowBoundTerms& r,
                                              const BudgetParams& bp, double a_plus, const BudgetOut& out,
                                              int64_t at) {
  const double inf = HUGE_VAL, den = r.den;
  const double Tc = sb.num / den, Tp = sb.tp / den, Wn = budget::w_bound(r.w_mult, a_plus, r.w_zeta) / den,
               Vop = sb.vop / den;
  const double Xn = (bp.tile_unknown ? counts.nz_keys : counts.nz_blocks) * bp.trunc_step * excess / den;
  const double Tc_prob = budget::min2(Tc, (sb.num_det + bp.lambda * bp.uP * sb.root) / den);
  const double Tp_prob = budget::min2(Tp, (sb.tp_det + bp.lambda * bp.uP * sb.tp_root) / den);
  auto eps_pv = [&](bool prob) {
    return budget::pv_accumulation(r.pv_mode, counts, bp.step, r.n, r.T, r.raises, r.merge, r.fa1_tiles, prob,
                                   bp.lambda);
  };
  double ob = budget::element_bound(budget::ElementParts{fabs(O), oe, Tc, Tp, Vop, eps_pv(false), Wn, Xn, r.eps_l,
                                                         bp.eps_fin, bp.u_out, bp.out_abs, r.floor_abs, true});
  double obp = budget::element_bound(budget::ElementParts{fabs(O), oe, Tc_prob, Tp_prob, Vop, eps_pv(true), Wn, Xn,
                                                          r.eps_l_prob, bp.eps_fin, bp.u_out, bp.out_abs, r.floor_abs,
                                                          true});
  if (ob != ob) ob = inf;  // far outside the model a term can be 0 * inf: no claim
  if (obp != obp) obp = inf;
  write_bound(out, at, ob, obp, bp.merge_max);
}

// kRowForm: the row form's chains (budget_sums.h RowColumnSum), from RowKeyWeights.
template <int kCols, bool kRowForm = false>
struct ColumnSums {
  using Sum = std::conditional_t<kRowForm, budget::RowColumnSum, budget::ColumnSum>;
  Sum sum[kCols];  // the fp32 chains and their double sums (budget_sums.h)
  double O[kCols], oe[kCols], shift[kCols], excess[kCols];
  float o[kCols];  // O in V's stored units as fp32 (budget_sums.h centred_at)
  int nz_keys[kCols], nz_blocks[kCols], nz_tile_blocks[kCols], nz_max_tile_blocks[kCols], last_blk[kCols],
      last_tile[kCols];
  int chunk;  // the key chunk (index / kSumChunk) the chains hold
  bool in_cols[kCols];

  // Columns c0 + stride cc (the single kernel: c0 = the group's first column + lane, stride 32; the sums
  // kernel: + kCols lane, stride 1); the reference's O and its error where the row takes part.
  __device__ __forceinline__ void start(const BudgetIn& in, int64_t o0, int c0, int stride, int dv, bool active,
                                        double vd) {
    chunk = -1;
    for (int cc = 0; cc < kCols; ++cc) {
      sum[cc] = Sum{};
      excess[cc] = 0;
      nz_keys[cc] = nz_blocks[cc] = nz_tile_blocks[cc] = nz_max_tile_blocks[cc] = 0;
      last_blk[cc] = last_tile[cc] = -1;
      const int c = c0 + stride * cc;
      in_cols[cc] = c < dv;
      O[cc] = active && in_cols[cc] ? in.o_ref[o0 + c] : 0.0;
      oe[cc] = active && in_cols[cc] ? in.o_err[o0 + c] : 0.0;
      const budget::CentredAt at = budget::centred_at(O[cc], vd);
      o[cc] = at.o;
      shift[cc] = at.shift;
    }
  }

  // The chains restart at every multiple of kSumChunk keys (budget_sums.h): before adding key j.
  __device__ __forceinline__ void flush(const BudgetParams& bp) {
    for (int cc = 0; cc < kCols; ++cc) {
      if constexpr (kRowForm) sum[cc].flush();
      else sum[cc].flush(bp.l_fp32, bp.op_round);
    }
  }
  __device__ __forceinline__ void enter_chunk(int64_t j, const BudgetParams& bp) {
    const int c = int(j / budget::kSumChunk);
    if (c != chunk) {
      flush(bp);
      chunk = c;
    }
  }
  __device__ __forceinline__ void finish(const BudgetParams& bp) { flush(bp); }

  // A chunk's visible keys (bit t of visible_lanes, key j0 + t), ascending: weights(t) gives key t's
  // SumWeights (RowKeyWeights in the row form, where zeta_keys marks the keys with z > 0), value(t, vs) its
  // stored V in the lane's columns as fp32 (0 past dv), place(t, tile, blk) its tile and block (kCounts
  // only). kCounts: the per-key counts (a chunk with a zero in V); without them the
  // counts advance once per chunk (add_chunk_counts). The excess (rare: subnormal P or small V) is a
  // warp-uniform branch per key. Columns past dv run the same instructions on V = 0 and are never written,
  // so the columns' chains interleave instead of waiting on each other behind a bounds branch.
  template <bool kCounts, class Weights, class Value, class Place>
  __device__ __forceinline__ void add_chunk(int64_t j0, unsigned visible_lanes, unsigned excess_keys,
                                            unsigned p_sub_keys, unsigned zeta_keys, const BudgetParams& bp, double vd,
                                            Weights weights, Value value, Place place) {
    if constexpr (!kCounts) {
      // The common chunk (every key visible, none with an excess or a zeta, j0 a multiple of kSumChunk): a
      // loop of fixed length, without the bit walk and the per-key excess test, which were about a third of
      // this loop's instructions (the sums kernel was bound by their issue).
      if (visible_lanes == 0xffffffffu && excess_keys == 0 && zeta_keys == 0 && j0 % budget::kSumChunk == 0) {
        enter_chunk(j0, bp);
#pragma unroll
        for (int t = 0; t < 32; ++t) {
          float vs[kCols];
          value(t, vs);
          add_key<false>(weights(t), vs, 0, 0, bp, false);
        }
        return;
      }
    }
    for (unsigned keys = visible_lanes; keys != 0; keys &= keys - 1) {
      const int t = __ffs(keys) - 1;
      const auto w = weights(t);
      float vs[kCols];  // stored units
      value(t, vs);
      if (excess_keys >> t & 1u) {  // some column may add to the excess (warp-uniform, rare)
        const bool p_sub = p_sub_keys >> t & 1u;
        for (int cc = 0; cc < kCols; ++cc) {
          const double v = vs[cc];
          if (v * vd != 0 && (p_sub || fabs(v) < bp.mn_op))
            excess[cc] = fmax(excess[cc], fmax(double(w.whi), bp.mn_p / bp.S) * align_mag(v, bp.mn_op) * vd);
        }
      }
      int tile = 0, blk = 0;
      if constexpr (kCounts) place(t, tile, blk);
      enter_chunk(j0 + t, bp);
      add_key<kCounts>(w, vs, tile, blk, bp, zeta_keys >> t & 1u);
    }
  }

  // One key's step in the lane's columns: its counts (kCounts) and every sum (budget_sums.h), in the order
  // of the CPU's.
  template <bool kCounts, class W>
  __device__ __forceinline__ void add_key(const W& w, const float (&vs)[kCols], int tile, int blk,
                                          const BudgetParams& bp, bool zeta) {
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) {
      const float v = vs[cc];
      if constexpr (kCounts) {
        if (v != 0) {
          ++nz_keys[cc];
          const bool new_tile = tile != last_tile[cc];  // the tile of the last key with v != 0
          if (new_tile) {
            nz_tile_blocks[cc] = 0;
            last_tile[cc] = tile;
          }
          if (new_tile || blk != last_blk[cc]) {
            ++nz_blocks[cc];
            nz_max_tile_blocks[cc] = max(nz_max_tile_blocks[cc], ++nz_tile_blocks[cc]);
            last_blk[cc] = blk;
          }
        }
      }
      if constexpr (kRowForm) {
        sum[cc].add(budget::RowWeights{w.e, w.z}, v, o[cc], zeta);
      } else {
        const float vop_diff = bp.op_round ? fabsf(round_tf32_f(v) - v) : 0.f;
        sum[cc].add(w, v, o[cc], vop_diff, bp.l_fp32, bp.op_round);
      }
    }
  }

  // The chunk's m visible keys, all in tile c.tile and none with a zero in V: the first starts a block in
  // a column unless it continues that column's last block; each later one starts a block when its block
  // differs from the previous visible key's.
  __device__ __forceinline__ void add_chunk_counts(const ChunkBlocks& c) {
    for (int cc = 0; cc < kCols; ++cc) {
      if (!in_cols[cc]) break;
      nz_keys[cc] += c.m;
      const bool new_tile = c.tile != last_tile[cc];
      if (new_tile) {
        nz_tile_blocks[cc] = 0;
        last_tile[cc] = c.tile;
      }
      const int starts = (new_tile || c.first_blk != last_blk[cc] ? 1 : 0) + c.later_starts;
      nz_blocks[cc] += starts;
      nz_tile_blocks[cc] += starts;
      nz_max_tile_blocks[cc] = max(nz_max_tile_blocks[cc], nz_tile_blocks[cc]);
      last_blk[cc] = c.last_blk;
    }
  }

  // Column cc's bound and probabilistic bound (§0) and its A, into the outputs at o0 + c.
  // a_plus: the reference's bound of the exact A of the element (W, budget_terms.h w_bound).
  __device__ __forceinline__ void write(int cc, const RowBoundTerms& r, const BudgetParams& bp, double vd,
                                        double a_plus, const BudgetOut& out, int64_t o0, int c) const {
    if (O[cc] != O[cc]) {
      write_bound(out, o0 + c, 0.0, 0.0, bp.merge_max);
      return;
    }
    budget::ColumnSumBounds sb;
    if constexpr (kRowForm)
      sb = budget::row_sum_bounds(sum[cc], double(r.n), vd, oe[cc], shift[cc], r.keys.err_c, r.keys.err_c_det,
                                  r.keys.ep2, r.row);
    else
      sb = budget::column_sum_bounds(sum[cc], double(r.n), vd, oe[cc], shift[cc], r.keys.err_c, r.keys.err_c_det,
                                     r.keys.ep2, bp.l_fp32, bp.op_round);
    const budget::PvCounts counts{nz_keys[cc], nz_blocks[cc], nz_max_tile_blocks[cc]};
    write_element(sb, O[cc], oe[cc], excess[cc], counts, r, bp, a_plus, out, o0 + c);
  }
};

// The accumulation model of P~V for the recipe (budget_terms.h pv_accumulation).
__device__ __forceinline__ budget::PvMode pv_mode_of(const BudgetParams& bp) {
  return !bp.tc           ? budget::PvMode::sequential
         : bp.tile_unknown ? budget::PvMode::tensor_core_any_tile
         : bp.two_level    ? budget::PvMode::tensor_core_two_level
                           : budget::PvMode::tensor_core;
}

}  // namespace fc::gpu::detail
