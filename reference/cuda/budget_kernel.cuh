// The error budget on the GPU: error_budget's row walk (reference/error_budget.cpp), one warp per query
// row, calling the same term functions (reference/budget_terms.h). The CPU walk keeps a row's keys in
// vectors; here the keys are swept three times instead, in chunks of 32 staged in shared memory for the
// block's rows:
//   1. scores: the row maximum z_max, the largest score magnitude R and score error eps_max, V_max, n;
//   2. tiles, in key order: which tiles may raise the running maximum (it needs eps_max), the lane,
//      block and tile counts of the accumulations;
//   3. in segments of whole tiles (at least a chunk): the segment's scores, then each key's tile maximum,
//      running maximum and the raises after its tile (one lane walks them), then per key the weight
//      interval (a lane per key) and per column the centred sums (a lane per column).
// With the score cache (BudgetIn::scores) filled by the score kernel (score_kernel.cuh, every recipe but
// tf32's operand term) all three sweeps read each key's score, R and operand error from it; with a cache
// and no score kernel, sweep 1 stores them and the other sweeps read them back: a score costs one shared-memory load of K per multiply-add, and every row
// reads every key, so recomputing them twice was most of the shared-memory traffic; the cache's values are
// the very doubles sweep 1 computed, so the budget is the same bit for bit.
// Sums run in another order than on the CPU (lanes, then a warp reduction), which moves a bound by a few
// units of double rounding: tests/gpu/oracle_agreement_test.cpp holds the two budgets to 1e-9.
#pragma once

#include <type_traits>

#include "reference/budget_terms.h"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

// Per key of each (batch, kv head): the largest and the smallest |V| over its columns, in stored units
// (NaN ignored, as the CPU's std::max ignores it; a key of NaNs only has +inf as its smallest).
__global__ void key_v_range_kernel(Shape s, double* key_vmax, double* key_vmin) {
  const int64_t keys = int64_t(s.batch) * s.heads_kv * s.n_k;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < keys; x += int64_t(gridDim.x) * blockDim.x) {
    double hi = 0, lo = HUGE_VAL;
    for (int c = 0; c < s.dv; ++c) {
      const double a = fabs(load_stored(s.in, s.v, x * s.dv + c));
      hi = fmax(hi, a);
      lo = fmin(lo, a);
    }
    key_vmax[x] = hi;
    key_vmin[x] = lo;
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

// The per-row operand of R (what bounds a score's accumulation error) from a stored Q or K value: the
// tf32-rounded value with the tf32 operand term, the magnitude aligned to the format's minimum normal
// with tensor cores, else the magnitude.
__device__ __forceinline__ double r_operand(const BudgetParams& bp, double x) {
  return bp.op_round ? round_tf32(x) : bp.tc ? align_mag(x, bp.mn_op) : fabs(x);
}

// A key's score in stored units (sign-folded), its R and the tf32 operands' exact score error, from key t
// of the staged chunk: kT holds the stored K values, k2T their r_operand (kStagedK2) or nothing.
struct KeyScore {
  double z, R, op_err;
};
template <bool kStagedK2>
__device__ __forceinline__ KeyScore key_score(const Shape& s, const BudgetParams& bp, const double* qs,
                                              const double* q2, const double* kT, const double* k2T, int t) {
  double dot = 0, rr = 0, dot_op = 0;
  if (bp.op_round) {
    for (int c = 0; c < s.d; ++c) {
      const double ks = kT[c * kPitch + t], ko = kStagedK2 ? k2T[c * kPitch + t] : round_tf32(ks);
      dot = fma(qs[c], ks, dot);
      dot_op = fma(q2[c], ko, dot_op);
      rr = fma(fabs(q2[c]), fabs(ko), rr);
    }
  } else {
    for (int c = 0; c < s.d; ++c) {
      const double ks = kT[c * kPitch + t], k2 = kStagedK2 ? k2T[c * kPitch + t] : r_operand(bp, ks);
      dot = fma(qs[c], ks, dot);
      rr = fma(q2[c], k2, rr);
    }
  }
  return {bp.sgn * dot, rr, bp.op_round ? budget::operand_rounding(dot_op, dot) : 0.0};
}
// The score alone.
__device__ __forceinline__ double key_z(const Shape& s, const BudgetParams& bp, const double* qs, const double* kT,
                                        int t) {
  double dot = 0;
  for (int c = 0; c < s.d; ++c) dot = fma(qs[c], kT[c * kPitch + t], dot);
  return bp.sgn * dot;
}

// Keys per sweep-3 segment at most: whole tiles of at most this many keys (the host refuses wider steps).
inline constexpr int kMaxSegment = 128;
__host__ __device__ constexpr int segment_keys(int tile_n) {
  return tile_n >= kChunk ? tile_n : tile_n * ((kChunk + tile_n - 1) / tile_n);
}

// Per-warp shared memory: the segment's scores and tile walk, the chunk's per-key weights, then Q (stored
// units) and its r_operand.
struct WarpKeys {
  double z[kMaxSegment], R[kMaxSegment], op_err[kMaxSegment], run[kMaxSegment];
  int later[kMaxSegment], tile[kMaxSegment], blk[kMaxSegment];
  double E[kChunk], whi[kChunk], err_c[kChunk], err_c_det[kChunk], ep[kChunk], zeta[kChunk];
};
__host__ __device__ constexpr size_t budget_warp_bytes(int d) {
  return smem_align(sizeof(WarpKeys)) + smem_align(2 * sizeof(double) * size_t(d));
}
// The staged K (stored units), its r_operand when staged, V (stored units), then the warps' regions.
__host__ __device__ constexpr size_t budget_smem(int d, int dv, int rows, bool staged_k2) {
  return staged_k_bytes(d) * (staged_k2 ? 2 : 1) + staged_v_bytes(dv) + size_t(rows) * budget_warp_bytes(d);
}

// kOpRound and kLFp32 are bp.op_round and bp.l_fp32 as constants: the third sweep's per-column loop
// runs once per (row, key, column), and with them known it loses their terms, branches and registers
// (the tf32 operand term and the FA-2 convention's sums are rare; the common recipes take neither).
template <bool kStagedK2, bool kOpRound, bool kLFp32>
__global__ void budget_kernel(Shape s, BudgetParams bp_arg, BudgetIn in, BudgetOut out) {
  BudgetParams bp = bp_arg;
  bp.op_round = kOpRound;
  bp.l_fp32 = kLFp32;
  extern __shared__ double smem_d[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockRows br = block_rows(s);
  unsigned char* base = reinterpret_cast<unsigned char*>(smem_d);
  double* kT = reinterpret_cast<double*>(base);
  double* k2T = reinterpret_cast<double*>(base + staged_k_bytes(s.d));  // used when kStagedK2
  double* vS = reinterpret_cast<double*>(base + staged_k_bytes(s.d) * (kStagedK2 ? 2 : 1));
  unsigned char* mine = base + budget_smem(s.d, s.dv, warp, kStagedK2);
  WarpKeys& wk = *reinterpret_cast<WarpKeys*>(mine);
  double* qs = reinterpret_cast<double*>(mine + smem_align(sizeof(WarpKeys)));
  double* q2 = qs + s.d;
  auto stored = [](double x) { return x; };
  const BudgetParams& bpr = bp;
  auto operand = [&bpr](double x) { return r_operand(bpr, x); };
  // Stages the chunk's K (and its r_operand).
  auto stage_keys = [&](int64_t j0, int nc) {
    stage_k(s, br, j0, nc, kT, stored);
    if (kStagedK2) stage_k(s, br, j0, nc, k2T, operand);
  };
  const int64_t i = br.i0 + warp;
  const int64_t r = br.r0 + warp, lr = r - s.row0;  // global row, row in this pass's workspace
  const int64_t o0 = lr * s.dv;
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
      out.lse_bound[lr] = fmax(out.lse_bound[lr], lb);
      out.lse_bound_prob[lr] = fmax(out.lse_bound_prob[lr], lbp);
    } else {
      out.lse_bound[lr] = lb;
      out.lse_bound_prob[lr] = lbp;
    }
  };

  // Rows past n_q, NaN rows and rows with no visible key take no part (bound 0 for the last two); the
  // warp still joins the block's staging.
  bool idle = i >= s.n_q;
  double ref_lse = 0;
  if (!idle) {
    ref_lse = in.lse_ref[lr];
    if (ref_lse != ref_lse || ref_lse == -inf) {
      for (int c = lane; c < s.dv; c += 32) write_row(c, 0.0, 0.0, 0.0);
      write_lse(0.0, 0.0);
      idle = true;
    }
  }
  if (__syncthreads_and(idle)) return;
  int64_t lo = 0, hi = 0;
  if (!idle) {
    row_key_range(s, i, br.len, lo, hi);
    const int64_t qb = q_base(s, br.b, br.h, i);
    for (int c = lane; c < s.d; c += 32) {
      qs[c] = load_stored(s.in, s.q, qb + c);
      q2[c] = r_operand(bp, qs[c]);
    }
  }
  __syncwarp();
  auto sees = [&](int64_t j) { return !idle && j >= lo && j < hi && visible(s, i, j, br.len); };
  // This row's slices of the score cache (block-uniform: every warp of the block stages or none does).
  const bool cached = in.scores != nullptr;
  const int64_t plane = s.pass_rows * s.n_k;
  double* cache_z = cached ? in.scores + lr * s.n_k : nullptr;
  double* cache_R = cached ? cache_z + plane : nullptr;
  double* cache_op = cached ? cache_z + 2 * plane : nullptr;

  // Sweep 1: z_max, R_max, eps_max, V_max, n.
  double zmax = -inf, rmax = 0, eps_max = 0, vmax = 0;
  int64_t n = 0;
  const int64_t kv0 = (int64_t(br.b) * s.heads_kv + br.hk) * s.n_k;
  const bool filled = in.scores_filled;  // by the score kernel: sweep 1 reads the cache as well
  for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi; j0 += kChunk) {
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    if (!filled) {
      __syncthreads();
      stage_keys(j0, nc);
      __syncthreads();
    }
    const int64_t j = j0 + lane;
    if (lane < nc && sees(j)) {
      const KeyScore k = filled ? KeyScore{cache_z[j], cache_R[j], cache_op[j]}
                                : key_score<kStagedK2>(s, bp, qs, q2, kT, k2T, lane);
      if (cached && !filled) {
        cache_z[j] = k.z;
        cache_R[j] = k.R;
        cache_op[j] = k.op_err;
      }
      zmax = fmax(zmax, k.z);
      rmax = fmax(rmax, k.R);
      eps_max = fmax(eps_max, bp.eps_s * k.R + bp.abs_s + k.op_err);
      vmax = fmax(vmax, in.key_vmax[kv0 + j]);
      ++n;
    }
  }
  zmax = warp_max(zmax);
  rmax = warp_max(rmax);
  eps_max = warp_max(eps_max);
  vmax = warp_max(vmax);
  n = warp_sum_i(n);

  // Sweep 2: tiles and counts. Where the step is a multiple of the chunk (aligned), a chunk lies in one
  // tile and warp votes do the walk; otherwise lane 0 walks the keys in order.
  const bool aligned = bp.tile_n % kChunk == 0;
  int raises = 0, T = 0, max_tile_keys = 1, n_blocks_all = 0;
  int lane_cnt[4] = {0, 0, 0, 0};
  {
    int cur_tile = -1, keys_in_tile = 0, last_blk_tile = -1, last_blk = -1;
    double tmax = -inf, run_prev = -inf;
    for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi; j0 += kChunk) {
      const int nc = int(min(int64_t(kChunk), br.hi - j0));
      if (!cached) {
        __syncthreads();
        stage_k(s, br, j0, nc, kT, stored);
        __syncthreads();
      }
      const bool vis = lane < nc && sees(j0 + lane);
      const unsigned visible_lanes = __ballot_sync(0xffffffffu, vis);
      if (!visible_lanes) continue;
      const double z = !vis ? 0.0 : cached ? cache_z[j0 + lane] : key_z(s, bp, qs, kT, lane);
      if (aligned) {
        // The chunk lies in one tile: its maximum, counts and blocks by warp votes; every lane keeps the
        // walk's state.
        const int tile = int(j0 / bp.tile_n);
        const double cmax = warp_max(vis ? z : -inf);
        const int nv = __popc(visible_lanes);
        if (tile != cur_tile) {
          if (cur_tile >= 0) {
            const double run = T == 0 ? tmax : fmax(run_prev, tmax);
            raises += T > 0 && budget::may_raise(tmax, run_prev, eps_max, bp.split);
            run_prev = run;
            ++T;
          }
          cur_tile = tile;
          tmax = cmax;
          keys_in_tile = nv;
        } else {
          tmax = fmax(tmax, cmax);
          keys_in_tile += nv;
        }
        max_tile_keys = max(max_tile_keys, keys_in_tile);
        // The lane class (key offset % 8) / 2: the chunk starts at a multiple of 32 within its tile.
        for (int x = 0; x < 4; ++x) lane_cnt[x] += __popc(visible_lanes & (0x03030303u << (2 * x)));
        const int blk = (int(j0 - int64_t(tile) * bp.tile_n) + lane) / (bp.tc ? bp.block : 1);
        const unsigned before = visible_lanes & ((1u << lane) - 1u);
        const int prev = before ? 31 - __clz(before) : -1;
        const int prev_blk = __shfl_sync(0xffffffffu, blk, prev < 0 ? 0 : prev);
        const bool starts = vis && (prev < 0 ? tile != last_blk_tile || blk != last_blk : blk != prev_blk);
        n_blocks_all += __popc(__ballot_sync(0xffffffffu, starts));
        last_blk = __shfl_sync(0xffffffffu, blk, 31 - __clz(visible_lanes));
        last_blk_tile = tile;
        continue;
      }
      wk.z[lane] = z;
      __syncwarp();
      if (lane == 0) {
        for (int t = 0; t < nc; ++t) {
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
            tmax = wk.z[t];
            keys_in_tile = 1;
          } else {
            tmax = fmax(tmax, wk.z[t]);
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
  const double fa1_tiles = bp.fa1 ? double((br.len + bp.tile_n - 1) / bp.tile_n) : 0.0;
  const budget::PvMode pv_mode = !bp.tc           ? budget::PvMode::sequential
                                 : bp.tile_unknown ? budget::PvMode::tensor_core_any_tile
                                 : bp.two_level    ? budget::PvMode::tensor_core_two_level
                                                   : budget::PvMode::tensor_core;
  const int seg = segment_keys(bp.tile_n);

  // Sweep 3, once per column group: per segment of whole tiles, the scores, the tile walk, the weights per
  // key and the sums per column.
  for (int g0 = 0; g0 < s.dv; g0 += 32 * kBudgetCols) {
    double sumE = 0, den = 0, lhi = 0, excess_l = 0;
    // p2: the probabilistic model's sum of squares, of the centred terms (l from rounded P) or of the
    // P-rounding terms (l in fp32); one register set serves both.
    double num[kBudgetCols], num_det[kBudgetCols], p2[kBudgetCols], tp[kBudgetCols], tp_det[kBudgetCols],
        A[kBudgetCols], W[kBudgetCols], vop[kBudgetCols], excess[kBudgetCols],
        O[kBudgetCols], oe[kBudgetCols];
    int nz_keys[kBudgetCols], nz_blocks[kBudgetCols], nz_tile_blocks[kBudgetCols], nz_max_tile_blocks[kBudgetCols],
        last_blk[kBudgetCols], last_tile[kBudgetCols];
    for (int cc = 0; cc < kBudgetCols; ++cc) {
      num[cc] = num_det[cc] = p2[cc] = tp[cc] = tp_det[cc] = A[cc] = W[cc] = vop[cc] = 0;
      excess[cc] = 0;
      nz_keys[cc] = nz_blocks[cc] = nz_tile_blocks[cc] = nz_max_tile_blocks[cc] = 0;
      last_blk[cc] = last_tile[cc] = -1;
      const int c = g0 + lane + 32 * cc;
      O[cc] = !idle && c < s.dv ? in.o_ref[o0 + c] : 0.0;
      oe[cc] = !idle && c < s.dv ? in.o_err[o0 + c] : 0.0;
    }
    int T_seen = 0, prefix = 0, cur_tile = -1;
    double run_prev = -inf, cur_run = -inf;
    for (int64_t s0 = (br.lo / seg) * seg; s0 < br.hi; s0 += seg) {
      const int ns = int(min(int64_t(seg), br.hi - s0));
      // The segment's scores.
      unsigned seg_visible[kMaxSegment / kChunk] = {};
      for (int c0 = 0; c0 < ns; c0 += kChunk) {
        const int nc = min(kChunk, ns - c0);
        if (!cached) {
          __syncthreads();
          stage_keys(s0 + c0, nc);
          __syncthreads();
        }
        const int64_t j = s0 + c0 + lane;
        const bool vis = lane < nc && sees(j);
        seg_visible[c0 / kChunk] = __ballot_sync(0xffffffffu, vis);
        if (vis) {
          const KeyScore k = cached ? KeyScore{cache_z[j], cache_R[j], cache_op[j]}
                                    : key_score<kStagedK2>(s, bp, qs, q2, kT, k2T, lane);
          wk.z[c0 + lane] = k.z;
          wk.R[c0 + lane] = k.R;
          wk.op_err[c0 + lane] = k.op_err;
        }
      }
      __syncwarp();
      // The tile walk: each key's tile maximum (its tile lies within the segment), the running maximum
      // through its tile and the raises after it. Aligned, the segment is one tile: every lane walks it.
      if (aligned) {
        double tm = -inf;
        for (int x = lane; x < ns; x += kChunk)
          if (seg_visible[x / kChunk] >> lane & 1u) tm = fmax(tm, wk.z[x]);
        tm = warp_max(tm);
        const int tile = int(s0 / bp.tile_n);
        if (tm != -inf) {  // the segment has visible keys
          if (cur_tile >= 0) {
            run_prev = cur_run;
            ++T_seen;
          }
          cur_tile = tile;
          cur_run = T_seen == 0 ? tm : fmax(run_prev, tm);
          prefix += T_seen > 0 && budget::may_raise(tm, run_prev, eps_max, bp.split);
          const int later = raises - prefix + (bp.split ? 1 : 0);
          for (int x = lane; x < ns; x += kChunk) {
            wk.run[x] = cur_run;
            wk.later[x] = later;
            wk.tile[x] = tile;
            wk.blk[x] = x / (bp.tc ? bp.block : 1);
          }
        }
      } else if (lane == 0) {
        for (int x = 0; x < ns; ++x) {
          if (!(seg_visible[x / kChunk] >> (x % kChunk) & 1u)) continue;
          const int tile = int((s0 + x) / bp.tile_n);
          if (tile != cur_tile) {
            if (cur_tile >= 0) {
              run_prev = cur_run;
              ++T_seen;
            }
            cur_tile = tile;
            double tm = -inf;
            for (int y = x; y < ns && int((s0 + y) / bp.tile_n) == tile; ++y)
              if (seg_visible[y / kChunk] >> (y % kChunk) & 1u) tm = fmax(tm, wk.z[y]);
            cur_run = T_seen == 0 ? tm : fmax(run_prev, tm);
            prefix += T_seen > 0 && budget::may_raise(tm, run_prev, eps_max, bp.split);
          }
          wk.run[x] = cur_run;
          wk.later[x] = raises - prefix + (bp.split ? 1 : 0);
          wk.tile[x] = tile;
          wk.blk[x] = int(((s0 + x) - int64_t(tile) * bp.tile_n) / (bp.tc ? bp.block : 1));
        }
      }
      __syncwarp();
      // Weights per key and sums per column, chunk by chunk.
      for (int c0 = 0; c0 < ns; c0 += kChunk) {
        const int nc = min(kChunk, ns - c0);
        __syncthreads();
        stage_v(s, br, s0 + c0, nc, vS, stored);
        __syncthreads();
        const unsigned visible_lanes = seg_visible[c0 / kChunk];
        const int x = c0 + lane;
        bool p_sub = false, small_v = false;
        if (visible_lanes >> lane & 1u) {  // §3.2-§3.7
          const double delta = zmax - wk.z[x];
          const double E = exp(-bp.sigma * delta);
          const double run = wk.run[x];
          double e = 0;
          e += bp.sigma * (bp.eps_s * wk.R[x] + bp.abs_s);
          e += bp.sigma * wk.op_err[x];
          e += budget::exponent_argument(bp.sigma, delta, run, eps_max);
          e += budget::rescale_factors(bp.sigma, zmax, run, eps_max, wk.later[x]);
          const double eta = e * (1 + 1e-6);
          const budget::Underflow uf =
              budget::underflow(E, eta, eK, bp.thresh, bp.theta_abs, bp.theta_ftz, bp.uP, true);
          const budget::WeightInterval wi = budget::weight_interval(E, eta, bp.uP, uf, bp.l_fp32);
          sumE += E;
          den += wi.den;
          lhi += wi.lhi;
          p_sub = E * exp(-eta) * bp.S < bp.mn_p;
          if (p_sub) excess_l = fmax(excess_l, fmax(wi.whi, bp.mn_p / bp.S));
          wk.E[lane] = E;
          wk.whi[lane] = wi.whi;
          wk.err_c[lane] = wi.err_c;
          wk.err_c_det[lane] = wi.err_c_det;
          wk.ep[lane] = E * exp(eta);
          wk.zeta[lane] = uf.zeta;
          small_v = in.key_vmin[kv0 + s0 + x] < bp.mn_op;
        }
        // Per key of the chunk (bit t): a subnormal P, and whether some column may add to the excess.
        const unsigned p_sub_keys = __ballot_sync(0xffffffffu, p_sub);
        const unsigned excess_keys = bp.tc ? __ballot_sync(0xffffffffu, p_sub || small_v) : 0u;
        // A chunk whose keys have no zero in V counts the same keys and blocks in every column: with the
        // chunk in one tile (aligned), each column's counts then advance once per chunk below.
        const bool x_vis = visible_lanes >> lane & 1u;
        const bool uniform = aligned && !__any_sync(0xffffffffu, x_vis && in.key_vmin[kv0 + s0 + x] == 0);
        __syncwarp();
        // §3.9 counts and the centred sums: this loop runs once per (row, key, column), so it comes in two
        // copies, with the per-key counts (a chunk with a zero in V) and without them (the common case,
        // whose counts advance once per chunk below), and the excess (rare: subnormal P or small V) is a
        // warp-uniform branch per key of its own.
        // The columns past dv (a partial last group) take V = 0 and are never written: every column slot
        // runs the same instructions, so the four columns' chains interleave instead of waiting on each
        // other behind a bounds branch.
        bool in_cols[kBudgetCols];
        for (int cc = 0; cc < kBudgetCols; ++cc) in_cols[cc] = g0 + lane + 32 * cc < s.dv;
        auto key_sums = [&](auto with_counts) {
          constexpr bool kCounts = decltype(with_counts)::value;
          for (unsigned keys = visible_lanes; keys != 0; keys &= keys - 1) {  // the visible keys, ascending
            const int t = __ffs(keys) - 1;
            const double E = wk.E[t], whi = wk.whi[t], ec = wk.err_c[t], ecd = wk.err_c_det[t], ep = wk.ep[t],
                         zeta = wk.zeta[t];
            double vs[kBudgetCols];  // stored units
#pragma unroll
            for (int cc = 0; cc < kBudgetCols; ++cc) vs[cc] = in_cols[cc] ? vS[t * s.dv + g0 + lane + 32 * cc] : 0.0;
            if (excess_keys >> t & 1u) {  // some column may add to the excess (warp-uniform, rare)
              const bool p_sub = p_sub_keys >> t & 1u;
              for (int cc = 0; cc < kBudgetCols; ++cc)
                if (vs[cc] * s.vd != 0 && (p_sub || fabs(vs[cc]) < bp.mn_op))
                  excess[cc] = fmax(excess[cc], fmax(whi, bp.mn_p / bp.S) * align_mag(vs[cc], bp.mn_op) * s.vd);
            }
#pragma unroll
            for (int cc = 0; cc < kBudgetCols; ++cc) {
              const double v = vs[cc] * s.vd;
              if constexpr (kCounts) {
                if (v != 0) {
                  const int tile = wk.tile[c0 + t], blk = wk.blk[c0 + t];
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
              const double dv_ = fabs(v - O[cc]) + oe[cc];
              num[cc] += ec * dv_;
              num_det[cc] += ecd * dv_;
              A[cc] += E * fabs(v);
              W[cc] += whi * fabs(v);
              if (bp.op_round) vop[cc] += whi * fabs(round_tf32(v) - v);
              if (!bp.l_fp32) {
                p2[cc] += (ep * dv_) * (ep * dv_);
              } else {
                tp[cc] += (bp.uP * ep + zeta) * fabs(v);
                tp_det[cc] += zeta * fabs(v);
                p2[cc] += (ep * v) * (ep * v);
              }
            }
          }
        };
        if (uniform) key_sums(std::false_type{});
        else key_sums(std::true_type{});
        if (uniform && visible_lanes) {
          // The chunk's m visible keys, all in tile `tile`: the first starts a block in a column unless it
          // continues that column's last block; each later one starts a block when its block differs from
          // the previous visible key's.
          const int tile = int(s0 / bp.tile_n), m = __popc(visible_lanes);
          const int blk = (c0 + lane) / (bp.tc ? bp.block : 1);
          const unsigned before = visible_lanes & ((1u << lane) - 1u);
          const int prev_blk = __shfl_sync(0xffffffffu, blk, before ? 31 - __clz(before) : 0);
          const int later_starts = __popc(__ballot_sync(0xffffffffu, x_vis && before && blk != prev_blk));
          const int first_blk = __shfl_sync(0xffffffffu, blk, __ffs(visible_lanes) - 1);
          const int last_key_blk = __shfl_sync(0xffffffffu, blk, 31 - __clz(visible_lanes));
          for (int cc = 0; cc < kBudgetCols; ++cc) {
            if (g0 + lane + 32 * cc >= s.dv) break;
            nz_keys[cc] += m;
            const bool new_tile = tile != last_tile[cc];
            if (new_tile) {
              nz_tile_blocks[cc] = 0;
              last_tile[cc] = tile;
            }
            const int starts = (new_tile || first_blk != last_blk[cc] ? 1 : 0) + later_starts;
            nz_blocks[cc] += starts;
            nz_tile_blocks[cc] += starts;
            nz_max_tile_blocks[cc] = max(nz_max_tile_blocks[cc], nz_tile_blocks[cc]);
            last_blk[cc] = last_key_blk;
          }
        }
        __syncwarp();
      }
    }
    if (idle) continue;  // the next group's staging still needs this warp
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
      const double num_p2 = bp.l_fp32 ? 0.0 : p2[cc], tp2 = bp.l_fp32 ? p2[cc] : 0.0;
      const double Tc_prob = budget::min2(Tc, (num_det[cc] + bp.lambda * bp.uP * sqrt(num_p2)) / den);
      const double Tp_prob = budget::min2(Tp, (tp_det[cc] + bp.lambda * bp.uP * sqrt(tp2)) / den);
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
                                                    in.lse_err[lr], bp.fp8, true});
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
