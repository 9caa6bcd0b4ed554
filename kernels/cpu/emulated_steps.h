// The steps of the emulated fused kernel, each rounding where the CUDA kernel rounds
// (kernels/cuda/softmax.h, fwd_fp32.cu, split_kv_merge.cu): the schedule of a row's key tiles, the
// scores of one tile, the online-softmax step, the l sum, the P.V accumulation, and the epilogue with
// the split-KV merge. EmulatedKernel::run (emulated_kernel.cpp) calls them in that order; the deliberate
// bugs enter only through BugHooks (deliberate_bugs.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/deliberate_bugs.h"
#include "kernels/subject.h"
#include "reference/tensor_core_model.h"

namespace fc::emulation {

// Per-run constants, as the CUDA host code computes them (fwd_params.h).
struct Setup {
  RecipeSpec rs;
  bool simt;          // fp32 recipe: the SIMT kernel's rounding points (fwd_fp32.cu)
  bool tensor_core;   // block-FMA model for S and P.V (else IEEE sequential fmaf)
  BlockFmaModel tcm;
  bool fp8;
  bool round_p;       // P is rounded to rs.p_format (all recipes but fp32)
  float c;            // |fl32(scale * q_descale * k_descale * log2 e)|
  float se;           // |fl32(scale * q_descale * k_descale)|
  bool negate;        // the scale is negative: scores are negated (exactly) so the max is the max of c*s
  float lse_offset;   // fl32(8 ln 2) for fp8 (P carries 2^8), else 0
  float p_scale;      // 256 for fp8, else 1
  float v_descale;    // fp8: fl32(v_descale), else 1
  double qd, kd, vd;  // fp8: the descales the stored operands are divided by, else 1
  int br, bc, splits;
  bool l_from_fp32;
  bool l_tensor_core;  // l = P~ times ones on the tensor cores, as the 16-bit CUDA kernels sum it
  bool fa1;
  bool two_level;
  double mn_op, mn_p;  // smallest normals of the MMA operands: subnormal operands align at them
  int64_t shortest_key_length;  // over the batch (split_kv_stale_length partitions by it)
  BugHooks bugs;
};
Setup make_setup(const Problem& p, const RunOptions& o, TileSize tile, int splits, BugHooks bugs);

// One head's operands as the kernel stores them: fp32, fp8 as stored values (value / descale, exact),
// tf32 rounded to tf32 (RN, ties to even), a negative scale folded into Q (exact negation).
struct HeadOperands {
  std::vector<float> q, k, v;
};
void load_head(const Setup& st, const Problem& p, const AttentionInputs& in, int b, int h, HeadOperands& ops);

// The key tiles [first, last) a row's block visits (window and key length; the dense mask is per
// element), cut into splits of `per` tiles as split_block_range does; `diag` is the row's diagonal key.
struct RowSchedule {
  int64_t first = 0, last = 0, per = 0, diag = 0, len = 0;
};
RowSchedule schedule_row(const Setup& st, const Problem& p, int b, int64_t i);

// Per split (or whole row) unnormalised state, as the CUDA kernel keeps it.
struct RowState {
  float m;
  float lane_l[4];  // quad partial sums (tensor-core recipes)
  float l;          // SIMT / FA-1 / tensor-core running sum, and the finalised sum
  std::vector<float> a;  // FA-2: unnormalised accumulator; FA-1: normalised O
  bool last_tile_raised_max;
};
void reset(const Setup& st, RowState& rs, int dv);

// One row and one key tile (an online-softmax step), with its scratch values.
struct TileWork {
  explicit TileWork(int bc);
  int64_t n0 = 0;             // first key of the tile
  std::vector<float> s;       // scores (-inf where masked)
  std::vector<char> vis;      // visible keys
  std::vector<BugHooks::Hidden> hidden;  // how a masked key enters P.V (only under a catalogue bug)
  std::vector<float> stale_s;            // k_smem_stale_past_end: the score from the stale K row
  std::vector<float>* smem_k = nullptr;  // k_smem_stale_past_end: the K tile buffer, kept across runs
  std::vector<float> px, pr;  // p (times the fp8 pre-scale) and P~ (rounded)
  float alpha = 1, l_old = 0;
  std::vector<double> terms, align;  // one block FMA's products and alignment magnitudes
  std::vector<float> tree;            // the SIMT butterfly
};

// S for the tile's keys: block-FMA chains over d (tensor cores) or sequential fmaf (SIMT).
void tile_scores(const Setup& st, const Problem& p, int b, int64_t i, const RowSchedule& rsch, int64_t tile,
                 const HeadOperands& ops, TileWork& w);
// The online-softmax step: the running max, alpha, p = ex2(s c - m c) and P~.
void softmax_step(const Setup& st, RowState& rs, TileWork& w);
// l += the tile's weights (lane sums, the SIMT butterfly, the tensor-core chain or FA-1's running sum).
void sum_l(const Setup& st, RowState& rs, TileWork& w);
// a = alpha a + P~ V (FA-1: the normalised O, renormalised).
void accumulate_pv(const Setup& st, const Problem& p, const HeadOperands& ops, RowState& rs, TileWork& w);
// After a split's last tile: the lane sums folded into l, FA-1 back to unnormalised for the merge.
void finish_split(const Setup& st, RowState& rs);
// Merge the splits (split-KV) and write the row's O (rounded and unrounded) and LSE into `out`.
void epilogue(const Setup& st, const Problem& p, int b, int h, int64_t i, std::vector<RowState>& states,
              SubjectOutput& out);

}  // namespace fc::emulation
