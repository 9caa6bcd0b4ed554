// The sums kernel of the two-kernel budget (oracle_types.h BudgetWeights): per (row, column) the centred
// sums, the counts and the excess of error_budget's third step (docs/error-analysis.md §3.9-§3.13, in
// fp32 as §3.17 certifies), then each element's bound, from the weights the weights kernel
// (budget_kernel<..., kSplit = true>) wrote for every key the row sees. Its blocks are the weights kernel's
// (the same rows, a warp each), one per group of 32 kCols columns; a lane owns kCols adjacent columns of the
// group, kCols lane + 0 .. kCols - 1, whose V it reads with one load (budget_kernel's lanes own lane + 32 cc
// of their groups of 32 * kBudgetCols; the sums per column are the same). kCols is four where the value
// dim is above 64 and two at 64 and below (sums_cols): each chunk's copies, masks and barriers, and each
// key's load of its four weights, then serve four columns of a lane instead of two, and a row's weights
// are read by one block instead of two at d = 128 (in float64, four columns and their counts needed 178
// registers and spilled 236 bytes when held to 128; one column a lane, with twice the weights' loads, ran
// slower: H200, (1, 16, 16k, 128) bf16, budget 1.85 s against 1.60 s). The loop over (key, column) and the
// bounds are budget_column_sums.cuh's (and budget_sums.h's, the CPU's too), which the single kernel runs
// too, in the same key order: the bounds are the single kernel's bit for bit whatever the columns a lane
// (tests/gpu/oracle_agreement_test.cpp holds them so). Without the weights code beside it a thread needs
// far fewer registers, and more warps share an SM.
#pragma once

#include "reference/abs_scale_bound.h"
#include "reference/budget_terms.h"
#include "reference/cuda/budget_column_sums.cuh"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

// Columns a lane for a value dim: two or four.
__host__ __device__ constexpr int sums_cols(int dv) { return dv > 64 ? 4 : 2; }

// Per warp: the chunk's weights of its row (copied from BudgetWeights: whi, err_c, third, ep a key, and
// zeta under the FA-2 convention; the row form's e a key over w's first 128 bytes).
struct SumKeys {
  float4 w[kChunk];
  float zeta[kChunk];
};
// Two buffers (this chunk's, and the next one's in flight), each: the group's columns of V (stored units as
// fp32, 32 * cols a key), then the warps' weights.
__host__ __device__ constexpr size_t budget_sums_buffer(int rows, int cols) {
  return smem_align(sizeof(float) * size_t(kChunk) * 32 * cols) + size_t(rows) * sizeof(SumKeys);
}
__host__ __device__ constexpr size_t budget_sums_smem(int rows, int cols) { return 2 * budget_sums_buffer(rows, cols); }

// Blocks: the weights kernel's block of rows x / groups, column group x % groups (the groups of one block
// of rows run side by side and share its weights in L2). Four blocks of 4 warps an SM (128 registers; the
// single kernel ran 8 warps; the four-column copy at three blocks, without spills, was slower on the
// H200); each chunk's V and weights are copied asynchronously while the chunk before is summed (read
// synchronously, the loads' latency was 43 % of the kernel's stalls).
// kRowForm: BudgetParams::row_form's sums (a key's weights e, z, whi: budget_column_sums.cuh RowKeyWeights).
template <bool kLFp32, int kCols, bool kRowForm = false>
__global__ void __launch_bounds__(32 * kSplitRowsPerBlock, 4)
    budget_sums_kernel(Shape s, BudgetParams bp_arg, BudgetIn in, BudgetOut out, BudgetWeights wts, int groups) {
  static_assert(kCols == 2 || kCols == 4, "a lane's columns are one float2 or float4");
  static_assert(!(kRowForm && kLFp32), "the row form is the default convention's");
  constexpr int kSumsGroup = 32 * kCols;  // columns a block
  BudgetParams bp = bp_arg;
  bp.op_round = false;  // the tf32 operand term runs the single kernel
  bp.l_fp32 = kLFp32;
  extern __shared__ double smem_d[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int block = int(blockIdx.x) / groups, group = int(blockIdx.x) % groups;
  const BlockRows br = block_rows(s, block);
  // Buffer b: V at vbuf(b), this warp's weights at wbuf(b).
  unsigned char* const smem_b = reinterpret_cast<unsigned char*>(smem_d);
  const size_t buffer_bytes = budget_sums_buffer(s.rows_per_block, kCols);
  auto vbuf = [&](int b) { return reinterpret_cast<float*>(smem_b + b * buffer_bytes); };
  const size_t v_bytes = smem_align(sizeof(float) * size_t(kChunk) * kSumsGroup);
  auto wbuf = [&](int b) { return reinterpret_cast<SumKeys*>(smem_b + b * buffer_bytes + v_bytes) + warp; };
  const int g0 = group * kSumsGroup;
  const int64_t i = br.i0 + warp;
  const int64_t r = br.r0 + warp, lr = r - s.row0;
  const int64_t o0 = lr * s.dv;
  const int64_t slot = int64_t(block) * s.rows_per_block + warp;
  const double inf = HUGE_VAL;
  // Rows past n_q and the rows the weights kernel finished (NaN rows, no visible key) take no part; a
  // row outside the model's domain gets no claim. The warp still joins the block's staging.
  RowTerms rt{};
  rt.state = kRowSkip;
  if (i < s.n_q) rt = wts.rows[slot];
  if (rt.state == kRowOutside)
    for (int c = g0 + lane; c < min(s.dv, g0 + kSumsGroup); c += 32)
      write_bound(out, o0 + c, inf, inf, bp.merge_max);
  const bool idle = rt.state != kRowSums;
  if (__syncthreads_and(idle)) return;

  const int64_t kv0 = (int64_t(br.b) * s.heads_kv + br.hk) * s.n_k;
  const bool aligned = bp.tile_n % kChunk == 0;
  ColumnSums<kCols, kRowForm> cs;
  cs.start(in, o0, g0 + kCols * lane, 1, s.dv, !idle, s.vd);
  const float4* w_row = wts.w + slot * s.n_k;
  const float* zeta_row = wts.zeta + slot * s.n_k;
  const float* e_row = kRowForm ? wts.e + slot * s.n_k : nullptr;
  const int gw = min(kSumsGroup, s.dv - g0);  // the group's columns
  // Columns past dv read as 0 in both buffers (the copies below never write them).
  for (int e = threadIdx.x; e < kChunk * kSumsGroup; e += blockDim.x)
    if (e % kSumsGroup >= gw) vbuf(0)[e] = vbuf(1)[e] = 0.f;
  // Chunk k's V (the group's columns) and this row's weights into buffer k % 2, asynchronously. Every key
  // of [chunk_floor(br.lo), br.hi) has weights (zero where the row does not see it: budget_kernel).
  const int64_t jb = chunk_floor(br.lo);
  const int chunks = int((br.hi - jb + kChunk - 1) / kChunk);
  const float* v_head = wts.v32 + v_base(s, br.b, br.hk, 0) + g0;
  // The group's V copied in 16-byte pieces: a run of kSumsGroup values at an offset that is a multiple of
  // four (v32 is 16-byte aligned), 8 kCols lanes a key, each lane four columns of it, each warp every
  // (kKeysPerCopy warps)-th key. With 8-byte copies indexed by a run-time division per copied value, the
  // copies' index arithmetic was half of the kernel's instructions (Nsight Compute source counters,
  // (1, 4, 4096, 128) bf16, H200).
  constexpr int kLanesPerKey = kSumsGroup / 4, kKeysPerCopy = 32 / kLanesPerKey;
  const bool quads = gw == kSumsGroup && s.dv % 4 == 0;
  const int warps = int(blockDim.x) / 32;
  const int key_in_copy = lane / kLanesPerKey, quad = lane % kLanesPerKey;
  const int64_t src_step = int64_t(kKeysPerCopy * warps) * s.dv;
  auto fetch = [&](int k) {
    if (k < chunks) {
      const int64_t j0 = jb + int64_t(k) * kChunk;
      const int nc = int(min(int64_t(kChunk), br.hi - j0));
      float* v = vbuf(k % 2);
      if (quads) {  // a whole group: lane l copies columns 4 (l % kLanesPerKey) .. + 3 of its keys
        const int t0 = kKeysPerCopy * warp + key_in_copy;
        const float* src = v_head + (j0 + t0) * s.dv + 4 * quad;
        float* dst = v + t0 * kSumsGroup + 4 * quad;
        if (nc == kChunk && warps == kSplitRowsPerBlock) {
          // A whole chunk at the usual block size: a fixed count, the shared-memory offsets constants
          // (the loop's index arithmetic was a tenth of the kernel's instructions).
#pragma unroll
          for (int k = 0; k < kChunk / (kKeysPerCopy * kSplitRowsPerBlock); ++k)
            cp_async_16(dst + k * kKeysPerCopy * kSplitRowsPerBlock * kSumsGroup, src + k * src_step);
        } else {
          for (int t = t0; t < nc; t += kKeysPerCopy * warps, src += src_step, dst += kKeysPerCopy * warps * kSumsGroup)
            cp_async_16(dst, src);
        }
      } else {
        for (int e = threadIdx.x; e < nc * gw; e += blockDim.x) {
          const int t = e / gw, c = e % gw;
          cp_async_4(v + t * kSumsGroup + c, v_head + (j0 + t) * s.dv + c);
        }
      }
      if (!idle && lane < nc) {
        SumKeys* w = wbuf(k % 2);
        if constexpr (kRowForm) {
          cp_async_4(reinterpret_cast<float*>(w->w) + lane, &e_row[j0 + lane]);
        } else {
          cp_async_16(&w->w[lane], &w_row[j0 + lane]);
          if (kLFp32) cp_async_4(&w->zeta[lane], &zeta_row[j0 + lane]);
        }
      }
    }
    cp_async_commit();  // an empty group past the last chunk keeps the count of groups in flight
  };
  // The chunk's bit masks and smallest |V| per key, loaded a chunk ahead into registers (vmin of every key
  // of the chunk: its uses test the key's bit, and a load behind the mask's waited for it).
  auto masks = [&](int k, unsigned& vis, unsigned& psub, unsigned& zk, double& vmin) {
    const int64_t j0 = jb + int64_t(k) * kChunk;
    vis = 0, psub = 0, zk = 0, vmin = 1.0;
    if (k < chunks && !idle) {
      vis = wts.visible[slot * wts.words + j0 / kChunk];
      psub = wts.p_sub[slot * wts.words + j0 / kChunk];
      if (kRowForm) zk = wts.zeta_keys[slot * wts.words + j0 / kChunk];
      if (j0 + lane < br.hi) vmin = in.key_vmin[kv0 + j0 + lane];
    }
  };
  unsigned next_vis, next_psub, next_zeta;
  double next_vmin;
  fetch(0);
  masks(0, next_vis, next_psub, next_zeta, next_vmin);
  for (int k = 0; k < chunks; ++k) {
    const int64_t j0 = jb + int64_t(k) * kChunk;
    const unsigned visible_lanes = next_vis, p_sub_keys = next_psub, zeta_keys = next_zeta & visible_lanes;
    const double vmin = next_vmin;
    fetch(k + 1);
    masks(k + 1, next_vis, next_psub, next_zeta, next_vmin);
    const float* vS = vbuf(k % 2);
    const SumKeys& wk = *wbuf(k % 2);
    const bool x_vis = visible_lanes >> lane & 1u;
    const bool small_v = x_vis && vmin < bp.mn_op;
    const unsigned excess_keys = bp.tc ? (p_sub_keys | __ballot_sync(0xffffffffu, small_v)) & visible_lanes : 0u;
    // As in budget_kernel: a chunk whose visible keys have no zero in V counts the same keys and blocks
    // in every column, once per chunk; otherwise per key and column.
    const bool uniform = aligned && !__any_sync(0xffffffffu, x_vis && vmin == 0);
    cp_async_wait_prior();  // chunk k's copies by this thread; the barrier makes everyone's visible
    __syncthreads();
    // The row form: e from the chunk's copy, z (rare: underflow) from device memory where zeta_keys says (such
    // a chunk takes the per-key walk), and the excess's upper weight from both (budget_sums.h row_whi).
    auto weights = [&](int t) {
      if constexpr (kRowForm) {
        const budget::RowWeights w{reinterpret_cast<const float*>(wk.w)[t], zeta_keys >> t & 1u ? zeta_row[j0 + t] : 0.f};
        return RowKeyWeights{w.e, w.z, budget::row_whi(w, rt.row)};
      } else {
        const float4 q = wk.w[t];
        return budget::SumWeights{q.x, q.y, q.z, q.w, kLFp32 ? wk.zeta[t] : 0.f};
      }
    };
    auto value = [&](int t, float (&vs)[kCols]) {
      if constexpr (kCols == 2) {
        const float2 v = *reinterpret_cast<const float2*>(vS + t * kSumsGroup + 2 * lane);
        vs[0] = v.x, vs[1] = v.y;
      } else {
        const float4 v = *reinterpret_cast<const float4*>(vS + t * kSumsGroup + 4 * lane);
        vs[0] = v.x, vs[1] = v.y, vs[2] = v.z, vs[3] = v.w;
      }
    };
    auto place = [&](int t, int& tile, int& blk) {
      const int64_t key = j0 + t;
      tile = int(fast_div(bp.tile_div, uint32_t(key)));
      blk = int(fast_div(bp.block_div, uint32_t(key - int64_t(tile) * bp.tile_n)));
    };
    if (uniform)
      cs.template add_chunk<false>(j0, visible_lanes, excess_keys, p_sub_keys, zeta_keys, bp, s.vd, weights, value,
                                   place);
    else
      cs.template add_chunk<true>(j0, visible_lanes, excess_keys, p_sub_keys, zeta_keys, bp, s.vd, weights, value,
                                  place);
    if (uniform && visible_lanes) {
      const int tile = int(fast_div(bp.tile_div, uint32_t(j0)));
      cs.add_chunk_counts(chunk_blocks(visible_lanes, x_vis, tile, int(j0 - int64_t(tile) * bp.tile_n), bp));
    }
    __syncthreads();  // everyone is done with buffer k % 2 before chunk k + 2's copies go there
  }
  if (idle) return;
  cs.finish(bp);

  // §0: each column's bound from the row's terms.
  const double fa1_tiles = bp.fa1 ? double((br.len + bp.tile_n - 1) / bp.tile_n) : 0.0;
  const RowBoundTerms terms{rt.den,  rt.eps_l, rt.eps_l_prob, rt.floor_abs, fa1_tiles, rt.w_mult, rt.w_zeta,
                            rt.keys, int(rt.n), rt.T,        rt.raises,    rt.merge,  pv_mode_of(bp), rt.row};
  for (int cc = 0; cc < kCols; ++cc) {
    const int c = g0 + kCols * lane + cc;
    if (c >= s.dv) break;
    cs.write(cc, terms, bp, s.vd, abs_scale_upper(in.a_factor[lr], in.abs_scale[o0 + c], in.a_floor[lr]), out, o0,
             c);
  }
}

}  // namespace fc::gpu::detail
