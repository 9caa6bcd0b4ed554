// The error budget on the GPU: error_budget's row walk (reference/error_budget.cpp), one warp per query
// row, calling the same term functions (reference/budget_terms.h). The CPU walk keeps a row's keys in
// vectors; here the keys are swept three times instead, in chunks of 32 staged in shared memory for the
// block's rows:
//   1. scores: the row maximum z_max, the largest score magnitude R and score error eps_max, V_max, n;
//   2. tiles, in key order: which tiles may raise the running maximum (it needs eps_max), the lane,
//      block and tile counts of the accumulations (in the common case, below, sweep 1 makes the counts
//      and each tile's maximum, and this is a walk over those maxima);
//   3. in segments of whole tiles (at least a chunk): the segment's scores, then each key's tile maximum,
//      running maximum and the raises after its tile (one lane walks them), then per key the weight
//      interval (a lane per key) and per column the centred sums (a lane per column).
// With the score cache (BudgetIn::scores) filled by the score kernel (score_kernel.cuh, every recipe but
// tf32's operand term) all three sweeps read each key's score, R and operand error from it; with a cache
// and no score kernel, sweep 1 stores them and the other sweeps read them back: a score costs one
// shared-memory load of K per multiply-add, and every row reads every key, so recomputing them twice was
// most of the shared-memory traffic; the cache's values are the very doubles sweep 1 computed, so the
// budget is the same bit for bit.
// Sums run in another order than on the CPU (lanes, then a warp reduction), which moves a bound by a few
// units of double rounding: tests/gpu/oracle_agreement_test.cpp holds the two budgets to 1e-9.
#pragma once

#include "reference/abs_scale_bound.h"
#include "reference/budget_terms.h"
#include "reference/cuda/budget_column_sums.cuh"
#include "reference/cuda/budget_knot_weights.cuh"
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

// The two-kernel form's copy of V (BudgetWeights::v32): every stored value as fp32 (exact: every storage
// format's values are fp32 numbers), as the sums take them (budget_sums.h), so that the sums kernel's
// chunks can be copied asynchronously, ahead of their sums.
__global__ void stored_v_kernel(Shape s, float* v32) {
  const int64_t n = int64_t(s.batch) * s.heads_kv * s.n_k * s.dv;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < n; x += int64_t(gridDim.x) * blockDim.x)
    v32[x] = static_cast<float>(load_stored(s.in, s.v, x));
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

// The two-kernel form: a key's weights, zero where the row does not see it (the sums kernel copies a
// chunk's weights whole, ahead of its sums, and reads those of the keys the row sees).
// The row form writes e alone (its z only where zeta_keys says), and with the knots their W and W3.
__device__ __forceinline__ void split_zero_weights(const BudgetWeights& wts, int64_t slot, int64_t n_k, int64_t j,
                                                   bool l_fp32, bool row_form, bool knots = false) {
  if (row_form) {
    wts.e[slot * n_k + j] = 0.f;
    if (knots) KnotRowWeights::zero(wts.knot, slot * wts.knot.keys_pad + j);
    return;
  }
  wts.w[slot * n_k + j] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (l_fp32) wts.zeta[slot * n_k + j] = 0.f;
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
  budget::SumWeights sw[kChunk];
};
__host__ __device__ constexpr size_t budget_warp_bytes(int d) {
  return smem_align(sizeof(WarpKeys)) + smem_align(2 * sizeof(double) * size_t(d));
}
// The staged K (stored units; not in the weights kernel when the score kernel filled the cache), its
// r_operand when staged, V (stored units; not in the weights kernel, which has no column sums), then the
// warps' regions.
__host__ __device__ constexpr size_t budget_smem(int d, int dv, int rows, bool staged_k2, bool with_v = true,
                                                 bool with_k = true) {
  return (with_k ? staged_k_bytes(d) * (staged_k2 ? 2 : 1) : 0) + (with_v ? staged_v_bytes(dv) : 0) +
         size_t(rows) * budget_warp_bytes(d);
}

// kOpRound and kLFp32 are bp.op_round and bp.l_fp32 as constants: the third sweep's per-column loop
// runs once per (row, key, column), and with them known it loses their terms, branches and registers
// (the tf32 operand term and the FA-2 convention's sums are rare; the common recipes take neither).
// kSplit: the weights kernel of the two-kernel form (oracle_types.h BudgetWeights): the third sweep stops
// at the weights, which it writes with the row's terms for budget_sums_kernel, and the column sums and
// element bounds are that kernel's; the LSE bound stays here. Held to four blocks of 4 warps an SM (128
// registers, 120 bytes of spills) it ran 19 % faster than at three (166 registers, none): its sweeps wait
// on latencies, which more warps hide (H200, Nsight Compute at (1, 4, 4096, 128) bf16: 4.35 ms, 5.38 ms).
// kRowForm: the weights kernel of the row form (BudgetParams::row_form), a copy of its own so that the
// per-key form's registers stay as they were (the row form's z_min and eta bound cost it 32 bytes of stack).
// kKnots: the row form's with the knot form's weights (budget_knot_weights.cuh), made with each key's e, and
// the row's counts per tile, which the knot form's elements take.
template <bool kStagedK2, bool kOpRound, bool kLFp32, bool kSplit, bool kRowForm = false, bool kKnots = false>
__global__ void __launch_bounds__(32 * (kSplit ? kSplitRowsPerBlock : kMaxRowsPerBlock), kSplit ? 4 : 1)
    budget_kernel(Shape s, BudgetParams bp_arg, BudgetIn in, BudgetOut out, BudgetWeights wts) {
  BudgetParams bp = bp_arg;
  bp.op_round = kOpRound;
  bp.l_fp32 = kLFp32;
  static_assert(!kRowForm || (kSplit && !kLFp32 && !kOpRound), "the row form is the default convention's weights kernel");
  static_assert(!kKnots || kRowForm, "the knot form is the row form's");
  constexpr bool row_form = kRowForm;
  extern __shared__ double smem_d[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockRows br = block_rows(s);
  unsigned char* base = reinterpret_cast<unsigned char*>(smem_d);
  double* kT = reinterpret_cast<double*>(base);
  double* k2T = reinterpret_cast<double*>(base + staged_k_bytes(s.d));  // used when kStagedK2
  double* vS = reinterpret_cast<double*>(base + staged_k_bytes(s.d) * (kStagedK2 ? 2 : 1));
  unsigned char* mine = base + budget_smem(s.d, s.dv, warp, kStagedK2, !kSplit, !(kSplit && in.scores_filled));
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
  const int64_t slot = int64_t(blockIdx.x) * s.rows_per_block + warp;  // kSplit: this row's BudgetWeights slot
  if constexpr (kSplit) {
    // The words the sums kernel reads for this row start cleared; the third sweep sets the visible keys'.
    for (int64_t w = chunk_floor(br.lo) / kChunk + lane; w < (br.hi + kChunk - 1) / kChunk; w += 32) {
      wts.visible[slot * wts.words + w] = 0u;
      wts.p_sub[slot * wts.words + w] = 0u;
      if (row_form) wts.zeta_keys[slot * wts.words + w] = 0u;
    }
    if (lane == 0) {  // whole, so that the sums kernel's read of a row it skips reads written bytes
      RowTerms skip{};
      skip.state = kRowSkip;
      wts.rows[slot] = skip;
      if constexpr (kKnots) wts.knot.rows[slot] = KnotRowTerms{};  // any_zeta 0: the products read no WZ of it
    }
  }

  auto write_row = [&](int c, double ob, double obp) { write_bound(out, o0 + c, ob, obp, bp.merge_max); };
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
      for (int c = lane; c < s.dv; c += 32) write_row(c, 0.0, 0.0);
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
  auto sees = [&](int64_t j) { return !idle && sees_key(s, i, j, lo, hi, br.len); };
  // This row's slices of the score cache (block-uniform: every warp of the block stages or none does).
  const bool cached = in.scores != nullptr;
  const int64_t plane = s.pass_rows * s.n_k;
  double* cache_z = cached ? in.scores + lr * s.n_k : nullptr;
  double* cache_R = cached ? cache_z + plane : nullptr;
  double* cache_op = cached ? cache_z + 2 * plane : nullptr;
  // Filled by the score kernel (sweep 1 reads the cache as well): plane 0 times z_sign (the reference's
  // fill is unsigned), and no operand error (plane 2 is the budget's own first sweep's, tf32 only).
  const bool filled = in.scores_filled;
  const double z_sign = filled ? in.z_sign : 1.0;
  auto filled_score = [&](int64_t j) { return KeyScore{z_sign * cache_z[j], cache_R[j], 0.0}; };
  auto cached_score = [&](int64_t j) {
    return filled ? filled_score(j) : KeyScore{cache_z[j], cache_R[j], cache_op[j]};
  };

  // Sweep 1: z_max, R_max, eps_max, V_max, n (and z_min, which only the row form's eta bound takes).
  double zmax = -inf, zmin = inf, rmax = 0, eps_max = 0, vmax = 0;
  int64_t n = 0;
  const int64_t kv0 = (int64_t(br.b) * s.heads_kv + br.hk) * s.n_k;
  // The score cache's reads are each sweep's latency (Nsight Compute: a quarter of the weights kernel's
  // stall samples on their first use): filled, sweep 1 has no barrier and its loads run ahead of their
  // uses; sweep 2 loads the next chunk's scores before this chunk's walk, sweep 3 a segment's before their
  // stores. The maxima, sums and counts are the same (order-free, or in the same order).
  auto sweep1_key = [&](const KeyScore& k, double key_vmax) {
    zmax = fmax(zmax, k.z);
    if (row_form) zmin = fmin(zmin, k.z);
    rmax = fmax(rmax, k.R);
    eps_max = fmax(eps_max, bp.eps_s * k.R + bp.abs_s + k.op_err);
    vmax = fmax(vmax, key_vmax);
    ++n;
  };

  // Sweep 2's walk: tiles and counts. Where the step is a multiple of the chunk (aligned), a chunk lies in
  // one tile and warp votes do the walk; otherwise lane 0 walks the keys in order.
  const bool aligned = bp.tile_n % kChunk == 0;
  int raises = 0, T = 0, max_tile_keys = 1, n_blocks_all = 0;
  int tile_blocks = 0, max_tile_blocks = 0;  // kKnots: the current tile's blocks, and the most of any tile
  int lane_cnt[4] = {0, 0, 0, 0};
  int walk_tile = -1, keys_in_tile = 0, last_blk_tile = -1, last_blk = -1;
  double tmax = -inf, walk_run = -inf, run_first = -inf;
  // A complete tile's largest score, in key order: the running maximum through it, and whether it may
  // raise the one before (which needs eps_max).
  auto close_tile = [&](double tm) {
    if (row_form && T == 0) run_first = tm;
    const double run = T == 0 ? tm : fmax(walk_run, tm);
    raises += T > 0 && budget::may_raise(tm, walk_run, eps_max, bp.split);
    walk_run = run;
    ++T;
  };
  // Aligned: this lane's largest score of the current tile, reduced over the warp once the tile is
  // complete (and handed to `complete`), and how many visible keys this lane had (its class for lane_cnt
  // is (lane % 8) / 2, as chunks start at multiples of 32 within their tile). A warp reduction and four
  // counts per chunk were a fifth of the kernel's instructions (Nsight Compute, (1, 4, 4096, 128) bf16,
  // H200). Chunk j0's counts and blocks by warp votes; every lane keeps the walk's state.
  double lane_tmax = -inf;
  int lane_keys = 0;
  auto aligned_chunk = [&](int64_t j0, bool vis, unsigned visible_lanes, double z, auto&& complete) {
    const int tile = int(fast_div(bp.tile_div, uint32_t(j0)));
    const int nv = __popc(visible_lanes);
    if (tile != walk_tile) {
      if (walk_tile >= 0) complete(warp_max(lane_tmax));
      walk_tile = tile;
      lane_tmax = -inf;
      keys_in_tile = nv;
    } else {
      keys_in_tile += nv;
    }
    lane_tmax = fmax(lane_tmax, vis ? z : -inf);  // fmax: warp_max's inputs hold no NaN
    max_tile_keys = max(max_tile_keys, keys_in_tile);
    lane_keys += vis;
    const int blk = int(fast_div(bp.block_div, uint32_t(int(j0 - int64_t(tile) * bp.tile_n) + lane)));
    const unsigned before = visible_lanes & ((1u << lane) - 1u);
    const int prev = before ? 31 - __clz(before) : -1;
    const int prev_blk = __shfl_sync(0xffffffffu, blk, prev < 0 ? 0 : prev);
    const bool starts = vis && (prev < 0 ? tile != last_blk_tile || blk != last_blk : blk != prev_blk);
    const int nb = __popc(__ballot_sync(0xffffffffu, starts));
    n_blocks_all += nb;
    if constexpr (kKnots) {
      tile_blocks = (tile != last_blk_tile ? 0 : tile_blocks) + nb;
      max_tile_blocks = max(max_tile_blocks, tile_blocks);
    }
    last_blk = __shfl_sync(0xffffffffu, blk, 31 - __clz(visible_lanes));
    last_blk_tile = tile;
  };

  // The two-kernel form with a filled cache and an aligned step (the common case): sweep 1 also does
  // sweep 2's counts, which need no eps_max, and writes each tile's largest score (wts.tile_max); the
  // raises, which need it, are then a walk over those maxima, not a third read of the scores. Sweep 2 had
  // been about a sixth of the kernel's instructions (Nsight Compute source counters, (1, 4, 4096, 128)
  // bf16, H200); sweep 3 takes each segment's tile maximum from them as well, instead of reducing the
  // segment's scores again. The keys and tiles are walked in the same order, so the counts, maxima and
  // raises are the same.
  const bool fold = kSplit && filled && aligned;
  double* const tile_max = kSplit ? wts.tile_max + slot * wts.words : nullptr;
  if (fold) {
    // Chunk j0's key of this lane: whether the row sees it, its V_max, and in place of its score and R the
    // chunk's largest ones over the keys the row sees (the score kernel's chunk summary, oracle_types.h
    // ChunkSummary: z_sign z is largest at z_max for z_sign = 1 and at z_min for -1), loaded two chunks
    // ahead of their use. Every maximum below is then the same, and so is eps_max, a monotone function of
    // R; the counts come from the visibility alone. The sweep's loads of the cached scores and R had been
    // about a third of this kernel's stall samples (Nsight Compute source counters, H200).
    const ChunkSummary* const summary = chunk_summaries(in.scores, s.pass_rows, s.n_k) + lr * summary_chunks(s.n_k);
    struct Ahead {
      bool vis;
      KeyScore k;
      double vm, zlo;  // zlo: the chunk's smallest score (z_min's, for the row form)
    };
    auto load = [&](int64_t j0) {
      const int64_t j = j0 + lane;
      Ahead a{j < br.hi && sees(j), {0.0, 0.0, 0.0}, 0.0, 0.0};
      if (a.vis) {
        const ChunkSummary& c = summary[j0 / kChunk];
        a.k = KeyScore{z_sign > 0 ? c.z_max : -c.z_min, c.r_max, 0.0};
        a.vm = in.key_vmax[kv0 + j];
        if (row_form) a.zlo = z_sign > 0 ? c.z_min : -c.z_max;
      }
      return a;
    };
    auto store_tile = [&](double tm) {
      if (lane == 0) tile_max[T] = tm;
      ++T;
    };
    const int64_t first = chunk_floor(br.lo);
    Ahead a0 = load(first), a1 = load(first + kChunk);
    for (int64_t j0 = first; j0 < br.hi; j0 += kChunk) {
      const Ahead a = a0;
      a0 = a1;
      a1 = load(j0 + 2 * kChunk);
      if (a.vis) {
        sweep1_key(a.k, a.vm);
        if (row_form) zmin = fmin(zmin, a.zlo);
      }
      const unsigned visible_lanes = __ballot_sync(0xffffffffu, a.vis);
      if (visible_lanes) aligned_chunk(j0, a.vis, visible_lanes, a.vis ? a.k.z : 0.0, store_tile);
    }
    if (walk_tile >= 0) store_tile(warp_max(lane_tmax));
  } else if (filled) {
#pragma unroll 4
    for (int64_t j = chunk_floor(br.lo) + lane; j < br.hi; j += kChunk)
      if (sees(j)) sweep1_key(cached_score(j), in.key_vmax[kv0 + j]);
  }
  for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi && !filled; j0 += kChunk) {
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    __syncthreads();
    stage_keys(j0, nc);
    __syncthreads();
    const int64_t j = j0 + lane;
    if (lane < nc && sees(j)) {
      const KeyScore k = key_score<kStagedK2>(s, bp, qs, q2, kT, k2T, lane);
      if (cached) {
        cache_z[j] = k.z;
        cache_R[j] = k.R;
        cache_op[j] = k.op_err;
      }
      sweep1_key(k, in.key_vmax[kv0 + j]);
    }
  }
  zmax = warp_max(zmax);
  if (row_form) zmin = -warp_max(-zmin);
  rmax = warp_max(rmax);
  eps_max = warp_max(eps_max);
  vmax = warp_max(vmax);
  n = warp_sum_i(n);

  if (fold) {
    // The raises from the tiles' maxima, in tile order (lane 0's stores above are the warp's after the
    // barrier), 32 loaded at a time.
    const int tiles = T;
    T = 0;
    __syncwarp();
    for (int t0 = 0; t0 < tiles; t0 += 32) {
      const double mine = t0 + lane < tiles ? tile_max[t0 + lane] : 0.0;
      for (int t = 0; t < min(32, tiles - t0); ++t) close_tile(__shfl_sync(0xffffffffu, mine, t));
    }
  } else {
    // Sweep 2.
    // The cached score of a chunk's key (lane), unsigned, loaded a chunk ahead.
    auto cached_z = [&](int64_t j0) {
      const int64_t j = j0 + lane;
      return cached && j < br.hi && sees(j) ? cache_z[j] : 0.0;
    };
    double z_next = cached_z(chunk_floor(br.lo));
    for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi; j0 += kChunk) {
      const int nc = int(min(int64_t(kChunk), br.hi - j0));
      if (!cached) {
        __syncthreads();
        stage_k(s, br, j0, nc, kT, stored);
        __syncthreads();
      }
      const double z_cached = z_next;
      if (cached) z_next = cached_z(j0 + kChunk);
      const bool vis = lane < nc && sees(j0 + lane);
      const unsigned visible_lanes = __ballot_sync(0xffffffffu, vis);
      if (!visible_lanes) continue;
      const double z = !vis ? 0.0 : cached ? z_sign * z_cached : key_z(s, bp, qs, kT, lane);
      if (aligned) {
        aligned_chunk(j0, vis, visible_lanes, z, close_tile);
        continue;
      }
      wk.z[lane] = z;
      __syncwarp();
      if (lane == 0) {
        for (int t = 0; t < nc; ++t) {
          if (!(visible_lanes >> t & 1u)) continue;
          const int64_t key = j0 + t;
          const int tile = int(fast_div(bp.tile_div, uint32_t(key)));
          if (tile != walk_tile) {
            if (walk_tile >= 0) close_tile(tmax);  // the previous tile is complete
            walk_tile = tile;
            tmax = wk.z[t];
            keys_in_tile = 1;
          } else {
            tmax = fmax(tmax, wk.z[t]);
            ++keys_in_tile;
          }
          max_tile_keys = max(max_tile_keys, keys_in_tile);
          const int64_t off = key - int64_t(tile) * bp.tile_n;
          lane_cnt[(off % 8) / 2]++;
          const int blk = int(fast_div(bp.block_div, uint32_t(off)));
          if (tile != last_blk_tile || blk != last_blk) {
            ++n_blocks_all;
            if constexpr (kKnots) {
              tile_blocks = tile != last_blk_tile ? 1 : tile_blocks + 1;
              max_tile_blocks = max(max_tile_blocks, tile_blocks);
            }
          }
          last_blk_tile = tile;
          last_blk = blk;
        }
      }
      __syncwarp();
    }
    if (aligned && walk_tile >= 0) tmax = warp_max(lane_tmax);  // the last tile's (walk_tile is the warp's)
    if (lane == 0 && walk_tile >= 0) close_tile(tmax);
  }
  raises = __shfl_sync(0xffffffffu, raises, 0);
  T = __shfl_sync(0xffffffffu, T, 0);
  if (row_form) run_first = __shfl_sync(0xffffffffu, run_first, 0);
  max_tile_keys = __shfl_sync(0xffffffffu, max_tile_keys, 0);
  n_blocks_all = __shfl_sync(0xffffffffu, n_blocks_all, 0);
  if constexpr (kKnots) max_tile_blocks = __shfl_sync(0xffffffffu, max_tile_blocks, 0);
  for (int x = 0; x < 4; ++x)
    lane_cnt[x] = aligned ? int(__reduce_add_sync(0xffffffffu, (lane % 8) / 2 == x ? unsigned(lane_keys) : 0u))
                          : __shfl_sync(0xffffffffu, lane_cnt[x], 0);
  const double eK = exp(bp.sigma * eps_max);  // bounds the common factor K and 1/K
  const int splits = bp.splits_known > 0 ? bp.splits_known : max(T, 1);
  const int merge = budget::merge_roundings(splits, bp.fa1);
  const double fa1_tiles = bp.fa1 ? double((br.len + bp.tile_n - 1) / bp.tile_n) : 0.0;
  const int seg = segment_keys(bp.tile_n);
  // The row form: every key's interval, underflow and W from the row's eta bound (budget_terms.h
  // row_eta_bound, as error_budget.cpp), known here, before any key's weight: no key's own eta is made.
  double eta_row = 0;
  budget::EtaExp ex_row{0.0, 0.0, 0.0};
  if (row_form && n > 0) {
    eta_row = budget::row_eta_bound(bp.sigma, eps_max, zmax, zmin, run_first, raises + (bp.split ? 1 : 0),
                                    budget::EtaTerms{true, true, true});
    ex_row = budget::eta_exp(eta_row);
  }
  KnotRowWeights knot_row;
  // The row form's upper weight of a key's (or the row's largest) e and z, for the knots' excess bounds.
  auto knot_whi = [&](const budget::RowWeights& w) { return budget::row_whi(w, budget::row_factors(ex_row, bp.uP)); };
  const int64_t seg_first = (br.lo / seg) * seg;  // kKnots: the first key the third sweep reaches

  // Sweep 3, once per column group: per segment of whole tiles, the scores, the tile walk, the weights per
  // key and the sums per column.
  for (int g0 = 0; g0 < (kSplit ? 1 : s.dv); g0 += 32 * kBudgetCols) {
    double sumE = 0, den = 0, lhi = 0, excess_l = 0;
    double eta_w = 0, zeta_vmax = 0;  // §3.9's W through the reference's A (budget_terms.h w_bound)
    KeySums key_sums;
    ColumnSums<kBudgetCols> cs;
    if constexpr (!kSplit) cs.start(in, o0, g0 + lane, 32, s.dv, !idle, s.vd);
    int T_seen = 0, prefix = 0, cur_tile = -1, seg_tiles = 0;
    double run_prev = -inf, cur_run = -inf;
    // Aligned, the segment is one tile: its running maximum and later raises are the same for every key
    // of it, kept here instead of per key (the per-key stores and loads were a twentieth of the weights
    // kernel's instructions); the single kernel's column sums still read each key's tile and block.
    double seg_run = -inf;
    int seg_later = 0;
    if constexpr (kSplit)  // the keys before the first segment that the sums kernel's first chunk holds
      for (int64_t j = chunk_floor(br.lo) + lane; j < seg_first; j += 32)
        split_zero_weights(wts, slot, s.n_k, j, kLFp32, row_form, kKnots && !idle);
    for (int64_t s0 = (br.lo / seg) * seg; s0 < br.hi; s0 += seg) {
      const int ns = int(min(int64_t(seg), br.hi - s0));
      // The segment's scores.
      unsigned seg_visible[kMaxSegment / kChunk] = {};
      auto keep_score = [&](int x, const KeyScore& k) {
        wk.z[x] = k.z;
        wk.R[x] = k.R;
        wk.op_err[x] = k.op_err;
      };
      if (cached) {
#pragma unroll
        for (int c = 0; c < kMaxSegment / kChunk; ++c) {
          const int c0 = c * kChunk;
          const int64_t j = s0 + c0 + lane;
          const bool vis = c0 < ns && lane < ns - c0 && sees(j);
          seg_visible[c] = __ballot_sync(0xffffffffu, vis);
          // The row form's weights take the score alone (its eta is the row's): R's plane is not read.
          if (vis && row_form) wk.z[c0 + lane] = filled ? z_sign * cache_z[j] : cache_z[j];
          else if (vis) keep_score(c0 + lane, cached_score(j));
        }
      }
      if (cached && lane % 16 == 0) {
        // The next segment's scores and R toward L2 (a line is 16 keys), so that the loads above wait on L2
        // rather than device memory: that wait was about a quarter of this kernel's stall samples (Nsight
        // Compute source counters, H200), and holding the next segment in registers spilled.
#pragma unroll
        for (int c = 0; c < kMaxSegment / kChunk; ++c) {
          const int64_t j = s0 + seg + c * kChunk + lane;
          if (c * kChunk < seg && j < br.hi) {
            prefetch_l2(cache_z + j);
            if (!row_form) prefetch_l2(cache_R + j);
          }
        }
      }
      for (int c0 = 0; c0 < ns && !cached; c0 += kChunk) {
        const int nc = min(kChunk, ns - c0);
        __syncthreads();
        stage_keys(s0 + c0, nc);
        __syncthreads();
        const int64_t j = s0 + c0 + lane;
        const bool vis = lane < nc && sees(j);
        put(seg_visible, c0 / kChunk, __ballot_sync(0xffffffffu, vis));
        if (vis) keep_score(c0 + lane, key_score<kStagedK2>(s, bp, qs, q2, kT, k2T, lane));
      }
      __syncwarp();
      // The tile walk: each key's tile maximum (its tile lies within the segment), the running maximum
      // through its tile and the raises after it. Aligned, the segment is one tile: every lane walks it.
      if (aligned) {
        double tm = -inf;
        if (fold) {  // the segment's tile is the next one with visible keys, whose maximum sweep 1 wrote
          unsigned any = 0;
#pragma unroll
          for (int c = 0; c < kMaxSegment / kChunk; ++c) any |= seg_visible[c];
          if (any) tm = tile_max[seg_tiles++];
        } else {
          for (int x = lane; x < ns; x += kChunk)
            if (pick(seg_visible, x / kChunk) >> lane & 1u) tm = fmax(tm, wk.z[x]);
          tm = warp_max(tm);
        }
        const int tile = int(fast_div(bp.tile_div, uint32_t(s0)));
        if (tm != -inf) {  // the segment has visible keys
          if (cur_tile >= 0) {
            run_prev = cur_run;
            ++T_seen;
          }
          cur_tile = tile;
          cur_run = T_seen == 0 ? tm : fmax(run_prev, tm);
          prefix += T_seen > 0 && budget::may_raise(tm, run_prev, eps_max, bp.split);
          seg_run = cur_run;
          seg_later = raises - prefix + (bp.split ? 1 : 0);
          if constexpr (!kSplit)
            for (int x = lane; x < ns; x += kChunk) {
              wk.tile[x] = tile;
              wk.blk[x] = int(fast_div(bp.block_div, uint32_t(x)));
            }
        }
      } else if (lane == 0) {
        for (int x = 0; x < ns; ++x) {
          if (!(pick(seg_visible, x / kChunk) >> (x % kChunk) & 1u)) continue;
          const int tile = int(fast_div(bp.tile_div, uint32_t(s0 + x)));
          if (tile != cur_tile) {
            if (cur_tile >= 0) {
              run_prev = cur_run;
              ++T_seen;
            }
            cur_tile = tile;
            double tm = -inf;
            for (int y = x; y < ns && int(fast_div(bp.tile_div, uint32_t(s0 + y))) == tile; ++y)
              if (pick(seg_visible, y / kChunk) >> (y % kChunk) & 1u) tm = fmax(tm, wk.z[y]);
            cur_run = T_seen == 0 ? tm : fmax(run_prev, tm);
            prefix += T_seen > 0 && budget::may_raise(tm, run_prev, eps_max, bp.split);
          }
          wk.run[x] = cur_run;
          wk.later[x] = raises - prefix + (bp.split ? 1 : 0);
          wk.tile[x] = tile;
          wk.blk[x] = int(fast_div(bp.block_div, uint32_t((s0 + x) - int64_t(tile) * bp.tile_n)));
        }
      }
      __syncwarp();
      // Weights per key and sums per column, chunk by chunk.
      for (int c0 = 0; c0 < ns; c0 += kChunk) {
        const int nc = min(kChunk, ns - c0);
        if constexpr (!kSplit) {
          __syncthreads();
          stage_v(s, br, s0 + c0, nc, vS, stored);
          __syncthreads();
        }
        const unsigned visible_lanes = pick(seg_visible, c0 / kChunk);
        const int x = c0 + lane;
        bool p_sub = false, small_v = false, zeta_key = false;
        if (visible_lanes >> lane & 1u) {  // §3.2-§3.7
          const double delta = zmax - wk.z[x];
          const double E = exp(-bp.sigma * delta);
          double eta = eta_row;
          budget::EtaExp ex = ex_row;
          if (!row_form) {
            const double run = aligned ? seg_run : wk.run[x];
            double e = 0;
            e += bp.sigma * (bp.eps_s * wk.R[x] + bp.abs_s);
            e += bp.sigma * wk.op_err[x];
            e += budget::exponent_argument(bp.sigma, delta, run, eps_max);
            e += budget::rescale_factors(bp.sigma, zmax, run, eps_max, aligned ? seg_later : wk.later[x]);
            eta = e * (1 + 1e-6);
            ex = budget::eta_exp(eta);
          }
          const budget::Underflow uf =
              budget::underflow(E, ex, eK, bp.thresh, bp.theta_abs, bp.theta_ftz, bp.uP, true);
          const budget::WeightInterval wi = budget::weight_interval(E, ex, bp.uP, uf, bp.l_fp32);
          sumE += E;
          den += wi.den;
          lhi += wi.lhi;
          p_sub = E * ex.em * bp.S < bp.mn_p;
          if (p_sub) excess_l = budget::max2(excess_l, budget::max2(wi.whi, bp.p_floor));  // std::max, as on the CPU
          const double ep = E * ex.ep;
          add_key_sums(key_sums, wi.err_c, wi.err_c_det, ep);
          eta_w = fmax(eta_w, eta);
          if (uf.zeta > 0) zeta_vmax += uf.zeta * in.key_vmax[kv0 + s0 + x];
          const budget::SumWeights sw = budget::sum_weights(wi, ep, uf.zeta, bp.uP, kLFp32);
          if constexpr (!kSplit) {  // the column sums below read them; the two-kernel form's read its workspace
            small_v = in.key_vmin[kv0 + s0 + x] < bp.mn_op;
            wk.sw[lane] = sw;
          } else {
            const int64_t at = slot * s.n_k + s0 + x;
            if (row_form) {  // e, and z where it is not 0 (rare: underflow), which zeta_keys marks
              const budget::RowWeights rw = budget::row_weights(E, uf.zeta);
              wts.e[at] = rw.e;
              zeta_key = rw.z > 0.f;
              if (zeta_key) wts.zeta[at] = rw.z;
              if constexpr (kKnots)
                knot_row.add(
                    wts.knot, slot * wts.knot.keys_pad + s0 + x, rw, p_sub, bp, s.vd, knot_whi,
                    [&] { return in.key_vmax[kv0 + s0 + x]; });
            } else {
              wts.w[at] = make_float4(sw.whi, sw.err_c, sw.third, sw.ep);
            }
            if constexpr (kLFp32) wts.zeta[at] = sw.zeta;
          }
        }
        if constexpr (kSplit) {
          if (lane < nc && !(visible_lanes >> lane & 1u))
            split_zero_weights(wts, slot, s.n_k, s0 + x, kLFp32, row_form, kKnots && !idle);
          // The chunk's bits at their keys' places (a chunk starts at a multiple of 32 only where the step
          // is one); only words with a visible key are touched, and those the prologue cleared.
          const unsigned p_sub_lanes = __ballot_sync(0xffffffffu, p_sub);
          const unsigned zeta_lanes = row_form ? __ballot_sync(0xffffffffu, zeta_key) : 0u;
          if (lane == 0 && visible_lanes) {
            const int64_t j = s0 + c0, at = slot * wts.words + j / kChunk;
            const int sh = int(j % kChunk);
            if (sh == 0) {  // the chunk starts the word, so it is the first to touch it: a store, no load
              wts.visible[at] = visible_lanes;
              wts.p_sub[at] = p_sub_lanes;
              if (row_form) wts.zeta_keys[at] = zeta_lanes;
            } else if (visible_lanes << sh) {
              wts.visible[at] |= visible_lanes << sh;
              wts.p_sub[at] |= p_sub_lanes << sh;
              if (row_form) wts.zeta_keys[at] |= zeta_lanes << sh;
            }
            if (sh && visible_lanes >> (kChunk - sh)) {
              wts.visible[at + 1] |= visible_lanes >> (kChunk - sh);
              wts.p_sub[at + 1] |= p_sub_lanes >> (kChunk - sh);
              if (row_form) wts.zeta_keys[at + 1] |= zeta_lanes >> (kChunk - sh);
            }
          }
          continue;
        }
        // Per key of the chunk (bit t): a subnormal P, and whether some column may add to the excess.
        const unsigned p_sub_keys = __ballot_sync(0xffffffffu, p_sub);
        const unsigned excess_keys = bp.tc ? __ballot_sync(0xffffffffu, p_sub || small_v) : 0u;
        // A chunk whose keys have no zero in V counts the same keys and blocks in every column: with the
        // chunk in one tile (aligned), each column's counts then advance once per chunk.
        const bool x_vis = visible_lanes >> lane & 1u;
        const bool uniform = aligned && !__any_sync(0xffffffffu, x_vis && in.key_vmin[kv0 + s0 + x] == 0);
        __syncwarp();
        // §3.9 counts and the centred sums (budget_column_sums.cuh): this loop runs once per (row, key,
        // column), so it comes in copies, with the per-key counts (a chunk with a zero in V) and without.
        auto weights = [&](int t) { return wk.sw[t]; };
        auto value = [&](int t, float (&vs)[kBudgetCols]) {
#pragma unroll
          for (int cc = 0; cc < kBudgetCols; ++cc)
            vs[cc] = cs.in_cols[cc] ? static_cast<float>(vS[t * s.dv + g0 + lane + 32 * cc]) : 0.f;
        };
        auto place = [&](int t, int& tile, int& blk) {
          tile = wk.tile[c0 + t];
          blk = wk.blk[c0 + t];
        };
        if (uniform)
          cs.template add_chunk<false>(s0 + c0, visible_lanes, excess_keys, p_sub_keys, 0u, bp, s.vd, weights, value,
                                       place);
        else
          cs.template add_chunk<true>(s0 + c0, visible_lanes, excess_keys, p_sub_keys, 0u, bp, s.vd, weights, value,
                                      place);
        if (uniform && visible_lanes)
          cs.add_chunk_counts(chunk_blocks(visible_lanes, x_vis, int(fast_div(bp.tile_div, uint32_t(s0))), c0, bp));
        __syncwarp();
      }
    }
    if (idle) continue;  // the next group's staging still needs this warp
    sumE = warp_sum(sumE);
    den = warp_sum(den);
    eta_w = warp_max(eta_w);
    zeta_vmax = warp_sum(zeta_vmax) * fabs(s.vd);  // key_vmax is in stored units
    const double w_mult = budget::w_multiplier(eta_w, bp.uP, sumE);
    lhi = warp_sum(lhi);
    excess_l = warp_max(excess_l);
    warp_reduce(key_sums);

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
    if (kSplit && lane == 0)
      wts.rows[slot] = RowTerms{den,  eps_l, eps_l_prob, floor_abs, w_mult, zeta_vmax, key_sums,
                                row_form ? budget::row_factors(ex_row, bp.uP) : budget::RowFactors{},
                                n,    T,     raises,     merge,     outside ? kRowOutside : kRowSums};
    if constexpr (kKnots)
      knot_row.finish(wts.knot, slot, n, n_blocks_all, max_tile_blocks, min(chunk_floor(br.lo), seg_first), br.hi,
                      lane, bp, s.vd, knot_whi);
    if constexpr (!kSplit) {
      cs.finish(bp);
      const RowBoundTerms rt{den, eps_l, eps_l_prob, floor_abs, fa1_tiles, w_mult, zeta_vmax, key_sums, int(n), T,
                             raises, merge, pv_mode_of(bp)};
      for (int cc = 0; cc < kBudgetCols; ++cc) {
        const int c = g0 + lane + 32 * cc;
        if (c >= s.dv) break;
        if (outside) write_row(c, inf, inf);
        else
          cs.write(cc, rt, bp, s.vd, abs_scale_upper(in.a_factor[lr], in.abs_scale[o0 + c], in.a_floor[lr]), out, o0,
                   c);
      }
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
