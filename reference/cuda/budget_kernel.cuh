// The error budget on the GPU: error_budget's row walk (reference/error_budget.cpp), one warp per query
// row, calling the same term functions (reference/budget_terms.h). The CPU walk keeps a row's keys in
// vectors; here the keys are swept three times instead:
//   1. scores: the row maximum z_max, the largest score magnitude R and score error eps_max, n;
//   2. tiles, in key order: which tiles may raise the running maximum (it needs eps_max), the lane,
//      block and tile counts of the accumulations;
//   3. per key the weight interval (it needs each key's tile maximum and the raises after its tile),
//      and per column the centred sums, in chunks of 32 keys, a lane per key and then a lane per column.
// Sums run in another order than on the CPU (lanes, then a warp reduction), which moves a bound by a few
// units of double rounding: tests/gpu/oracle_agreement_test.cpp holds the two budgets to 1e-9.
#pragma once

#include "reference/budget_terms.h"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

// Per key of each (batch, kv head): the largest |V| over its columns, in stored units (NaN ignored, as
// the CPU's std::max ignores it).
__global__ void key_vmax_kernel(Shape s, double* key_vmax) {
  const int64_t keys = int64_t(s.batch) * s.heads_kv * s.n_k;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < keys; x += int64_t(gridDim.x) * blockDim.x) {
    double m = 0;
    for (int c = 0; c < s.dv; ++c) m = fmax(m, fabs(load_stored(s.in, s.v, x * s.dv + c)));
    key_vmax[x] = m;
  }
}

// fp32 -> tf32, round to nearest even (the tf32 operands of the tf32 recipe), as reference/formats.h.
__device__ __forceinline__ double round_tf32(double x) {
  const float f = static_cast<float>(x);  // x is an fp32 value
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf / NaN
  u += 0x0fffu + ((u >> 13) & 1u);
  u &= ~0x1fffu;
  return static_cast<double>(__uint_as_float(u));
}

__device__ __forceinline__ double align_mag(double x, double mn) {
  const double a = fabs(x);
  return a == 0 || a >= mn ? a : mn;
}

// A key's score in stored units (sign-folded), its R (what bounds the accumulation error) and the tf32
// operands' exact score error.
struct KeyScore {
  double z, R, op_err;
};
__device__ __forceinline__ KeyScore key_score(const Shape& s, const BudgetParams& bp, const Row& row, const double* qs,
                                              const double* qop, int64_t j) {
  const int64_t kb = k_base(s, row.b, row.hk, j);
  double dot = 0, rr = 0, dot_op = 0;
  for (int c = 0; c < s.d; ++c) {
    const double ks = load_stored(s.in, s.k, kb + c);  // stored units (value / k_descale)
    dot += qs[c] * ks;
    if (bp.op_round) {
      const double ko = round_tf32(ks);
      dot_op += qop[c] * ko;
      rr += fabs(qop[c] * ko);
    } else {
      rr += bp.tc ? align_mag(qs[c], bp.mn_op) * align_mag(ks, bp.mn_op) : fabs(qs[c] * ks);
    }
  }
  return {bp.sgn * dot, rr, bp.op_round ? budget::operand_rounding(dot_op, dot) : 0.0};
}

// Per-warp shared memory: Q (stored units) and its tf32 operands, and the chunk's per-key values.
struct ChunkKeys {
  double E[32], whi[32], err_c[32], err_c_det[32], ep[32], zeta[32], z[32], run[32];
  int tile[32], blk[32], later[32];
  unsigned char p_sub[32];
};
__host__ __device__ constexpr size_t budget_smem_per_warp(int d) {
  return sizeof(ChunkKeys) + 2 * sizeof(double) * size_t(d);
}

__global__ void budget_kernel(Shape s, BudgetParams bp, BudgetIn in, BudgetOut out) {
  extern __shared__ unsigned char smem_raw[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int64_t r = int64_t(blockIdx.x) * warps + warp;
  if (r >= s.rows()) return;
  unsigned char* mine = smem_raw + size_t(warp) * budget_smem_per_warp(s.d);
  ChunkKeys& ck = *reinterpret_cast<ChunkKeys*>(mine);
  double* qs = reinterpret_cast<double*>(mine + sizeof(ChunkKeys));
  double* qop = qs + s.d;
  const Row row = row_of(s, r);
  const int64_t o0 = r * s.dv;
  const double inf = HUGE_VAL;

  auto write_row = [&](int c, double ob, double obp, double sa) {
    if (bp.merge_max) {
      out.o_bound[o0 + c] = fmax(out.o_bound[o0 + c], ob);
      out.o_bound_prob[o0 + c] = fmax(out.o_bound_prob[o0 + c], obp);
    } else {
      out.o_bound[o0 + c] = ob;
      out.o_bound_prob[o0 + c] = obp;
    }
    out.scale_a[o0 + c] = sa;
  };
  auto write_lse = [&](double lb, double lbp) {
    if (lane != 0) return;
    if (bp.merge_max) {
      out.lse_bound[r] = fmax(out.lse_bound[r], lb);
      out.lse_bound_prob[r] = fmax(out.lse_bound_prob[r], lbp);
    } else {
      out.lse_bound[r] = lb;
      out.lse_bound_prob[r] = lbp;
    }
  };

  // NaN rows and rows with no visible key are exact: bound 0.
  const double ref_lse = in.lse_ref[r];
  if (ref_lse != ref_lse || ref_lse == -inf) {
    for (int c = lane; c < s.dv; c += 32) write_row(c, 0.0, 0.0, 0.0);
    write_lse(0.0, 0.0);
    return;
  }
  const int64_t qb = q_base(s, row.b, row.h, row.i);
  for (int c = lane; c < s.d; c += 32) {
    qs[c] = load_stored(s.in, s.q, qb + c);
    qop[c] = bp.op_round ? round_tf32(qs[c]) : qs[c];
  }
  __syncwarp();

  // Sweep 1: z_max, R_max, eps_max, V_max, n.
  double zmax = -inf, rmax = 0, eps_max = 0, vmax = 0;
  int64_t n = 0;
  const int64_t kv0 = (int64_t(row.b) * s.heads_kv + row.hk) * s.n_k;
  for (int64_t j = lane; j < s.n_k; j += 32) {
    if (!visible(s, row.i, j, row.len)) continue;
    const KeyScore k = key_score(s, bp, row, qs, qop, j);
    zmax = fmax(zmax, k.z);
    rmax = fmax(rmax, k.R);
    eps_max = fmax(eps_max, bp.eps_s * k.R + bp.abs_s + k.op_err);
    vmax = fmax(vmax, in.key_vmax[kv0 + j]);
    ++n;
  }
  zmax = warp_max(zmax);
  rmax = warp_max(rmax);
  eps_max = warp_max(eps_max);
  vmax = warp_max(vmax);
  n = warp_sum_i(n);

  // Sweep 2 (lane 0 walks the keys in order; the lanes compute the chunk's scores): tiles and counts.
  int raises = 0, T = 0, max_tile_keys = 1, n_blocks_all = 0;
  int lane_cnt[4] = {0, 0, 0, 0};
  {
    int cur_tile = -1, keys_in_tile = 0, last_blk_tile = -1, last_blk = -1;
    double tmax = -inf, run_prev = -inf;
    for (int64_t j0 = 0; j0 < s.n_k; j0 += 32) {
      const int64_t j = j0 + lane;
      const bool vis = j < s.n_k && visible(s, row.i, j, row.len);
      const unsigned visible_lanes = __ballot_sync(0xffffffffu, vis);
      if (!visible_lanes) continue;
      ck.z[lane] = vis ? key_score(s, bp, row, qs, qop, j).z : 0.0;
      __syncwarp();
      if (lane == 0) {
        for (int t = 0; t < 32; ++t) {
          if (!(visible_lanes >> t & 1u)) continue;
          const int64_t key = j0 + t;
          const int tile = int(key / bp.tile_n);
          if (tile != cur_tile) {
            if (cur_tile >= 0) {  // the previous tile is complete
              const double run = T == 0 ? tmax : fmax(run_prev, tmax);
              raises += T > 0 && budget::may_raise(tmax, run_prev, eps_max, bp.split);
              run_prev = run;
              ++T;
            }
            cur_tile = tile;
            tmax = ck.z[t];
            keys_in_tile = 1;
          } else {
            tmax = fmax(tmax, ck.z[t]);
            ++keys_in_tile;
          }
          max_tile_keys = max(max_tile_keys, keys_in_tile);
          const int64_t off = key - int64_t(tile) * bp.tile_n;
          lane_cnt[(off % 8) / 2]++;
          const int blk = int(off / (bp.tc ? bp.block : 1));
          if (tile != last_blk_tile || blk != last_blk) ++n_blocks_all;
          last_blk_tile = tile;
          last_blk = blk;
        }
      }
      __syncwarp();
    }
    if (lane == 0 && cur_tile >= 0) {
      raises += T > 0 && budget::may_raise(tmax, run_prev, eps_max, bp.split);
      ++T;
    }
    raises = __shfl_sync(0xffffffffu, raises, 0);
    T = __shfl_sync(0xffffffffu, T, 0);
    max_tile_keys = __shfl_sync(0xffffffffu, max_tile_keys, 0);
    n_blocks_all = __shfl_sync(0xffffffffu, n_blocks_all, 0);
    for (int x = 0; x < 4; ++x) lane_cnt[x] = __shfl_sync(0xffffffffu, lane_cnt[x], 0);
  }

  const double eK = exp(bp.sigma * eps_max);  // bounds the common factor K and 1/K
  const int splits = bp.splits_known > 0 ? bp.splits_known : max(T, 1);
  const int merge = budget::merge_roundings(splits, bp.fa1);
  const double fa1_tiles = bp.fa1 ? double((row.len + bp.tile_n - 1) / bp.tile_n) : 0.0;
  const budget::PvMode pv_mode = !bp.tc           ? budget::PvMode::sequential
                                 : bp.tile_unknown ? budget::PvMode::tensor_core_any_tile
                                 : bp.two_level    ? budget::PvMode::tensor_core_two_level
                                                   : budget::PvMode::tensor_core;

  // Sweep 3, once per column group: weights per key, sums per column.
  for (int g0 = 0; g0 < s.dv; g0 += 32 * kBudgetCols) {
    double sumE = 0, den = 0, lhi = 0, excess_l = 0;
    double num[kBudgetCols], num_det[kBudgetCols], num_p2[kBudgetCols], tp[kBudgetCols], tp_det[kBudgetCols],
        tp2[kBudgetCols], A[kBudgetCols], D[kBudgetCols], W[kBudgetCols], vop[kBudgetCols], excess[kBudgetCols],
        O[kBudgetCols], oe[kBudgetCols];
    int nz_keys[kBudgetCols], nz_blocks[kBudgetCols], nz_tile_blocks[kBudgetCols], nz_max_tile_blocks[kBudgetCols],
        last_blk[kBudgetCols], last_blk_tile[kBudgetCols], last_tile[kBudgetCols];
    for (int cc = 0; cc < kBudgetCols; ++cc) {
      num[cc] = num_det[cc] = num_p2[cc] = tp[cc] = tp_det[cc] = tp2[cc] = A[cc] = D[cc] = W[cc] = vop[cc] = 0;
      excess[cc] = 0;
      nz_keys[cc] = nz_blocks[cc] = nz_tile_blocks[cc] = nz_max_tile_blocks[cc] = 0;
      last_blk[cc] = last_blk_tile[cc] = last_tile[cc] = -1;
      const int c = g0 + lane + 32 * cc;
      O[cc] = c < s.dv ? in.o_ref[o0 + c] : 0.0;
      oe[cc] = c < s.dv ? in.o_err[o0 + c] : 0.0;
    }
    // The tile walk again: each key's tile maximum (a tile may straddle chunks: its maximum is completed by
    // looking ahead), the running maximum through its tile and the raises after it.
    int cur_tile = -1, T_seen = 0, prefix = 0;
    double run_prev = -inf, cur_run = -inf;
    for (int64_t j0 = 0; j0 < s.n_k; j0 += 32) {
      const int64_t j = j0 + lane;
      const bool vis = j < s.n_k && visible(s, row.i, j, row.len);
      const unsigned visible_lanes = __ballot_sync(0xffffffffu, vis);
      if (!visible_lanes) continue;
      KeyScore k{0, 0, 0};
      if (vis) k = key_score(s, bp, row, qs, qop, j);
      ck.z[lane] = k.z;
      // The last visible key's tile may continue past the chunk: its maximum over the rest of the tile.
      const int last_lane = 31 - __clz(visible_lanes);
      const int64_t last_key = j0 + last_lane;
      const int last_tile_id = int(last_key / bp.tile_n);
      const int64_t tile_end = min(int64_t(last_tile_id + 1) * bp.tile_n, s.n_k);
      double ahead = -inf;
      for (int64_t a0 = j0 + 32; a0 < tile_end; a0 += 32) {
        const int64_t ja = a0 + lane;
        if (ja < tile_end && visible(s, row.i, ja, row.len)) ahead = fmax(ahead, key_score(s, bp, row, qs, qop, ja).z);
      }
      ahead = warp_max(ahead);
      __syncwarp();
      if (lane == 0) {
        // Per lane: the complete maximum of its tile (segments of equal tile in lane order).
        for (int t = 0; t < 32; ++t) {
          if (!(visible_lanes >> t & 1u)) continue;
          const int tile = int((j0 + t) / bp.tile_n);
          if (tile != cur_tile) {
            // Close the previous tile, open this one with its maximum over the chunk and beyond.
            if (cur_tile >= 0) {
              run_prev = cur_run;
              ++T_seen;
            }
            cur_tile = tile;
            double tm = -inf;
            for (int x = t; x < 32; ++x)
              if ((visible_lanes >> x & 1u) && int((j0 + x) / bp.tile_n) == tile) tm = fmax(tm, ck.z[x]);
            if (tile == last_tile_id) tm = fmax(tm, ahead);
            cur_run = T_seen == 0 ? tm : fmax(run_prev, tm);
            prefix += T_seen > 0 && budget::may_raise(tm, run_prev, eps_max, bp.split);
          }
          ck.run[t] = cur_run;
          ck.later[t] = raises - prefix + (bp.split ? 1 : 0);
          ck.tile[t] = tile;
          const int64_t off = (j0 + t) - int64_t(tile) * bp.tile_n;
          ck.blk[t] = int(off / (bp.tc ? bp.block : 1));
        }
      }
      __syncwarp();
      // Per key: the weight interval (§3.2-§3.7).
      if (vis) {
        const double delta = zmax - k.z;
        const double E = exp(-bp.sigma * delta);
        const double run = ck.run[lane];
        double e = 0;
        e += bp.sigma * (bp.eps_s * k.R + bp.abs_s);
        e += bp.sigma * k.op_err;
        e += budget::exponent_argument(bp.sigma, delta, run, eps_max);
        e += budget::rescale_factors(bp.sigma, zmax, run, eps_max, ck.later[lane]);
        const double eta = e * (1 + 1e-6);
        const budget::Underflow uf =
            budget::underflow(E, eta, eK, bp.thresh, bp.theta_abs, bp.theta_ftz, bp.uP, true);
        const budget::WeightInterval wi = budget::weight_interval(E, eta, bp.uP, uf, bp.l_fp32);
        sumE += E;
        den += wi.den;
        lhi += wi.lhi;
        const bool p_sub = E * exp(-eta) * bp.S < bp.mn_p;
        if (p_sub) excess_l = fmax(excess_l, fmax(wi.whi, bp.mn_p / bp.S));
        ck.E[lane] = E;
        ck.whi[lane] = wi.whi;
        ck.err_c[lane] = wi.err_c;
        ck.err_c_det[lane] = wi.err_c_det;
        ck.ep[lane] = E * exp(eta);
        ck.zeta[lane] = uf.zeta;
        ck.p_sub[lane] = p_sub;
      }
      __syncwarp();
      // Per column (§3.9 counts, the centred sums).
      for (int t = 0; t < 32; ++t) {
        if (!(visible_lanes >> t & 1u)) continue;
        const int64_t vb = v_base(s, row.b, row.hk, j0 + t);
        const double E = ck.E[t], whi = ck.whi[t], ec = ck.err_c[t], ecd = ck.err_c_det[t], ep = ck.ep[t],
                     zeta = ck.zeta[t];
        const int tile = ck.tile[t], blk = ck.blk[t];
        const bool p_sub = ck.p_sub[t];
        for (int cc = 0; cc < kBudgetCols; ++cc) {
          const int c = g0 + lane + 32 * cc;
          if (c >= s.dv) break;
          const double vs = load_stored(s.in, s.v, vb + c);  // stored units
          const double v = vs * s.vd;
          if (v != 0) {
            ++nz_keys[cc];
            if (tile != last_tile[cc]) {
              nz_tile_blocks[cc] = 0;
              last_tile[cc] = tile;
            }
            if (tile != last_blk_tile[cc] || blk != last_blk[cc]) {
              ++nz_blocks[cc];
              nz_max_tile_blocks[cc] = max(nz_max_tile_blocks[cc], ++nz_tile_blocks[cc]);
              last_blk_tile[cc] = tile;
              last_blk[cc] = blk;
            }
            if (bp.tc && (p_sub || fabs(vs) < bp.mn_op))
              excess[cc] = fmax(excess[cc], fmax(whi, bp.mn_p / bp.S) * align_mag(vs, bp.mn_op) * s.vd);
          }
          const double dv_ = fabs(v - O[cc]) + oe[cc];
          num[cc] += ec * dv_;
          num_det[cc] += ecd * dv_;
          A[cc] += E * fabs(v);
          D[cc] += E * fabs(v - O[cc]);
          W[cc] += whi * fabs(v);
          if (bp.op_round) vop[cc] += whi * fabs(round_tf32(v) - v);
          if (!bp.l_fp32) {
            num_p2[cc] += (ep * dv_) * (ep * dv_);
          } else {
            tp[cc] += (bp.uP * ep + zeta) * fabs(v);
            tp_det[cc] += zeta * fabs(v);
            tp2[cc] += (ep * v) * (ep * v);
          }
        }
      }
      __syncwarp();
    }
    sumE = warp_sum(sumE);
    den = warp_sum(den);
    lhi = warp_sum(lhi);
    excess_l = warp_max(excess_l);

    // §3.8 l, §3.11 / §3.12, §3.7's floor, §3.16 the domain; then each column's bound (§0) and the LSE (§3.15).
    double nl;
    if (bp.fa1) nl = double(n + T);
    else if (bp.simt) {
      int k2 = 0;
      while ((1 << k2) < max_tile_keys) ++k2;
      nl = k2 + 2.0 * T;
    } else {
      const int lanes_max = max(max(lane_cnt[0], lane_cnt[1]), max(lane_cnt[2], lane_cnt[3]));
      nl = double((bp.tile_unknown ? int(n) : lanes_max) + raises + 2);
    }
    nl += merge;
    double eps_l = budget::l_sums(nl);
    double eps_l_prob = budget::min2(eps_l, bp.lambda * sqrt(nl) * budget::u32);
    if (bp.tc && !bp.fa1 && !bp.l_fp32) {
      const int nbl = bp.tile_unknown ? int(n) : n_blocks_all;
      const double chain = budget::l_chain(nbl, bp.step, raises + merge, bp.trunc_step, excess_l, den);
      eps_l = budget::max2(eps_l, chain);
      eps_l_prob = budget::max2(eps_l_prob, chain);
    }
    const double floor_abs = (n_blocks_all + n + 2.0 * T + 8) * 0x1p-149 * eK / (bp.S * den) * s.vd;
    const bool outside = budget::outside_domain(rmax, bp.eps_s, bp.c32, bp.S * double(n) * vmax * 2);
    for (int cc = 0; cc < kBudgetCols; ++cc) {
      const int c = g0 + lane + 32 * cc;
      if (c >= s.dv) break;
      if (outside) {
        write_row(c, inf, inf, 0.0);
        continue;
      }
      if (O[cc] != O[cc]) {
        write_row(c, 0.0, 0.0, 0.0);
        continue;
      }
      const double Tc = num[cc] / den, Tp = tp[cc] / den, Wn = W[cc] / den, Vop = vop[cc] / den;
      const double Xn = (bp.tile_unknown ? nz_keys[cc] : nz_blocks[cc]) * bp.trunc_step * excess[cc] / den;
      const double Tc_prob = budget::min2(Tc, (num_det[cc] + bp.lambda * bp.uP * sqrt(num_p2[cc])) / den);
      const double Tp_prob = budget::min2(Tp, (tp_det[cc] + bp.lambda * bp.uP * sqrt(tp2[cc])) / den);
      const budget::PvCounts counts{nz_keys[cc], nz_blocks[cc], nz_max_tile_blocks[cc]};
      auto eps_pv = [&](bool prob) {
        return budget::pv_accumulation(pv_mode, counts, bp.step, int(n), T, raises, merge, fa1_tiles, prob, bp.lambda);
      };
      double ob = budget::element_bound(budget::ElementParts{fabs(O[cc]), oe[cc], Tc, Tp, Vop, eps_pv(false), Wn, Xn,
                                                             eps_l, bp.eps_fin, bp.u_out, bp.out_abs, floor_abs, true});
      double obp = budget::element_bound(budget::ElementParts{fabs(O[cc]), oe[cc], Tc_prob, Tp_prob, Vop, eps_pv(true),
                                                              Wn, Xn, eps_l_prob, bp.eps_fin, bp.u_out, bp.out_abs,
                                                              floor_abs, true});
      if (ob != ob) ob = inf;  // far outside the model a term can be 0 * inf: no claim
      if (obp != obp) obp = inf;
      write_row(c, ob, obp, A[cc] / sumE);
    }
    if (g0 == 0) {
      double lb = inf, lbp = inf;
      if (!outside) {
        auto lse_total = [&](double el) {
          return budget::lse_bound(budget::LseParts{den, lhi, sumE, el, bp.S, bp.sigma, zmax, eps_max, ref_lse,
                                                    in.lse_err[r], bp.fp8, true});
        };
        lb = lse_total(eps_l);
        lbp = lse_total(eps_l_prob);
        if (lb != lb) lb = inf;
        if (lbp != lbp) lbp = inf;
      }
      write_lse(lb, lbp);
    }
  }
}

}  // namespace fc::gpu::detail
