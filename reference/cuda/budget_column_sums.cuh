// The budget's per-(row, key, column) step and each column's bound (error_budget's third step and its
// close, docs/error-analysis.md §3.9-§3.13 and §0), as the single budget kernel (budget_kernel.cuh) and
// the sums kernel of the two-kernel form (budget_sums_kernel.cuh) both run them: a lane owns kCols
// columns of a row, and a chunk's visible keys are added in ascending order, so the two forms give the
// same bits.
#pragma once

#include "reference/budget_terms.h"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

// fp32 -> tf32, round to nearest even (the tf32 operands of the tf32 recipe), as reference/formats.h.
__device__ __forceinline__ double round_tf32(double x) {
  const float f = static_cast<float>(x);  // x is an fp32 value
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf / NaN
  u += 0x0fffu + ((u >> 13) & 1u);
  u &= ~0x1fffu;
  return static_cast<double>(__uint_as_float(u));
}

// One key's weights (budget_terms.h weight_interval and underflow): the interval's upper end, the
// centred sums' deterministic and probabilistic factors, E exp(eta), the underflow term.
struct KeyWeights {
  double whi, err_c, err_c_det, ep, zeta;
};

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

// What each column's bound needs of its row.
struct RowBoundTerms {
  double den, eps_l, eps_l_prob, floor_abs, fa1_tiles;
  KeySums keys;
  int n, T, raises, merge;
  budget::PvMode pv_mode;
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

template <int kCols>
struct ColumnSums {
  // p2: the probabilistic model's sum of squares, of the centred terms (l from rounded P) or of the
  // P-rounding terms (l in fp32); one register set serves both.
  double num[kCols], num_det[kCols], p2[kCols], tp[kCols], tp_det[kCols], W[kCols], vop[kCols],
      excess[kCols], O[kCols], oe[kCols];
  int nz_keys[kCols], nz_blocks[kCols], nz_tile_blocks[kCols], nz_max_tile_blocks[kCols], last_blk[kCols],
      last_tile[kCols];
  bool in_cols[kCols];

  // Columns c0 + stride cc (the single kernel: c0 = the group's first column + lane, stride 32; the sums
  // kernel: + 2 lane, stride 1); the reference's O and its error where the row takes part.
  __device__ __forceinline__ void start(const BudgetIn& in, int64_t o0, int c0, int stride, int dv, bool active) {
    for (int cc = 0; cc < kCols; ++cc) {
      num[cc] = num_det[cc] = p2[cc] = tp[cc] = tp_det[cc] = W[cc] = vop[cc] = 0;
      excess[cc] = 0;
      nz_keys[cc] = nz_blocks[cc] = nz_tile_blocks[cc] = nz_max_tile_blocks[cc] = 0;
      last_blk[cc] = last_tile[cc] = -1;
      const int c = c0 + stride * cc;
      in_cols[cc] = c < dv;
      O[cc] = active && in_cols[cc] ? in.o_ref[o0 + c] : 0.0;
      oe[cc] = active && in_cols[cc] ? in.o_err[o0 + c] : 0.0;
    }
  }

  // A chunk's visible keys (bit t of visible_lanes), ascending: weights(t) gives key t's KeyWeights,
  // value(t, vs) its stored V in the lane's columns (0 past dv), place(t, tile, blk) its tile and block
  // (kCounts only). kCounts: the per-key counts (a chunk with a zero in V); without them the counts advance
  // once per chunk (add_chunk_counts). The excess (rare: subnormal P or small V) is a warp-uniform branch
  // per key. kUnit: V's descale is 1, so v is the stored value itself (v * 1 is exact: the same bits).
  // Columns past dv run the same instructions on V = 0 and are never written, so the columns' chains
  // interleave instead of waiting on each other behind a bounds branch.
  template <bool kCounts, bool kUnit, class Weights, class Value, class Place>
  __device__ __forceinline__ void add_chunk(unsigned visible_lanes, unsigned excess_keys, unsigned p_sub_keys,
                                            const BudgetParams& bp, double vd, Weights weights, Value value,
                                            Place place) {
    if constexpr (!kCounts) {
      // The common chunk (every key visible, none with an excess): a loop of fixed length, without the
      // bit walk and the per-key excess test, which were about a third of this loop's instructions (the
      // sums kernel was bound by their issue, Nsight Compute: 68 % issue, the float64 units at 30 %).
      if (visible_lanes == 0xffffffffu && excess_keys == 0) {
#pragma unroll 4
        for (int t = 0; t < 32; ++t) {
          double vs[kCols];
          value(t, vs);
          add_key<false, kUnit>(weights(t), vs, 0, 0, bp, vd);
        }
        return;
      }
    }
    for (unsigned keys = visible_lanes; keys != 0; keys &= keys - 1) {
      const int t = __ffs(keys) - 1;
      const KeyWeights w = weights(t);
      double vs[kCols];  // stored units
      value(t, vs);
      if (excess_keys >> t & 1u) {  // some column may add to the excess (warp-uniform, rare)
        const bool p_sub = p_sub_keys >> t & 1u;
        for (int cc = 0; cc < kCols; ++cc)
          if (vs[cc] * vd != 0 && (p_sub || fabs(vs[cc]) < bp.mn_op))
            excess[cc] = fmax(excess[cc], fmax(w.whi, bp.mn_p / bp.S) * align_mag(vs[cc], bp.mn_op) * vd);
      }
      int tile = 0, blk = 0;
      if constexpr (kCounts) place(t, tile, blk);
      add_key<kCounts, kUnit>(w, vs, tile, blk, bp, vd);
    }
  }

  // One key's step in the lane's columns: its counts (kCounts) and every sum, in the order of the CPU's.
  template <bool kCounts, bool kUnit>
  __device__ __forceinline__ void add_key(const KeyWeights& w, const double (&vs)[kCols], int tile, int blk,
                                          const BudgetParams& bp, double vd) {
#pragma unroll
    for (int cc = 0; cc < kCols; ++cc) {
      const double v = kUnit ? vs[cc] : vs[cc] * vd;
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
      const double dv_ = fabs(v - O[cc]);  // the reference's error is added per row (KeySums)
      num[cc] += w.err_c * dv_;
      num_det[cc] += w.err_c_det * dv_;
      W[cc] += w.whi * fabs(v);
      if (bp.op_round) vop[cc] += w.whi * fabs(round_tf32(v) - v);
      if (!bp.l_fp32) {
        p2[cc] += (w.ep * dv_) * (w.ep * dv_);
      } else {
        tp[cc] += (bp.uP * w.ep + w.zeta) * fabs(v);
        tp_det[cc] += w.zeta * fabs(v);
        p2[cc] += (w.ep * v) * (w.ep * v);
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
  __device__ __forceinline__ void write(int cc, const RowBoundTerms& r, const BudgetParams& bp, const BudgetOut& out,
                                        int64_t o0, int c) const {
    const double inf = HUGE_VAL;
    if (O[cc] != O[cc]) {
      write_bound(out, o0 + c, 0.0, 0.0, bp.merge_max);
      return;
    }
    const double den = r.den;
    const double Tc = (num[cc] + oe[cc] * r.keys.err_c) / den, Tp = tp[cc] / den, Wn = W[cc] / den,
                 Vop = vop[cc] / den;
    const double Xn = (bp.tile_unknown ? nz_keys[cc] : nz_blocks[cc]) * bp.trunc_step * excess[cc] / den;
    const double num_p2 = bp.l_fp32 ? 0.0 : p2[cc], tp2 = bp.l_fp32 ? p2[cc] : 0.0;
    const double num_root = bp.l_fp32 ? 0.0 : sqrt(num_p2) + oe[cc] * sqrt(r.keys.ep2);
    const double Tc_prob =
        budget::min2(Tc, (num_det[cc] + oe[cc] * r.keys.err_c_det + bp.lambda * bp.uP * num_root) / den);
    const double Tp_prob = budget::min2(Tp, (tp_det[cc] + bp.lambda * bp.uP * sqrt(tp2)) / den);
    const budget::PvCounts counts{nz_keys[cc], nz_blocks[cc], nz_max_tile_blocks[cc]};
    auto eps_pv = [&](bool prob) {
      return budget::pv_accumulation(r.pv_mode, counts, bp.step, r.n, r.T, r.raises, r.merge, r.fa1_tiles, prob,
                                     bp.lambda);
    };
    double ob = budget::element_bound(budget::ElementParts{fabs(O[cc]), oe[cc], Tc, Tp, Vop, eps_pv(false), Wn, Xn,
                                                           r.eps_l, bp.eps_fin, bp.u_out, bp.out_abs, r.floor_abs,
                                                           true});
    double obp = budget::element_bound(budget::ElementParts{fabs(O[cc]), oe[cc], Tc_prob, Tp_prob, Vop, eps_pv(true),
                                                            Wn, Xn, r.eps_l_prob, bp.eps_fin, bp.u_out, bp.out_abs,
                                                            r.floor_abs, true});
    if (ob != ob) ob = inf;  // far outside the model a term can be 0 * inf: no claim
    if (obp != obp) obp = inf;
    write_bound(out, o0 + c, ob, obp, bp.merge_max);
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
