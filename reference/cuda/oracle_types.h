// What the GPU oracle's host code (gpu_oracle.cpp, C++20) hands its kernels (oracle_kernels.cu, C++17):
// plain structs and the launch functions. The problem travels as plain numbers; one warp owns one query
// row in the reference and budget kernels, so a row's sums run in a fixed order whatever the launch shape.
// The rows are judged in passes (contiguous ranges of row blocks) so that the oracle's per-element
// workspace stays bounded whatever the problem's size; workspace arrays are indexed from the pass's
// first row, the subject's tensors by the global row.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "reference/budget_knots.h"
#include "reference/budget_sums.h"
#include "reference/cuda/fast_div.h"
#include "reference/element_verdict.h"
#include "reference/visibility.h"

namespace fc::gpu::detail {

enum class Storage : int { f32 = 0, f16 = 1, bf16 = 2, e4m3 = 3, e5m2 = 4 };
// Bytes a stored element takes.
__host__ __device__ constexpr int storage_bytes(Storage s) {
  return s == Storage::f32 ? 4 : (s == Storage::f16 || s == Storage::bf16) ? 2 : 1;
}

// The problem: shapes, mask and the tensors' storage (contiguous BHND), with 64-bit offsets.
struct Shape {
  int batch, heads_q, heads_kv, group, d, dv;
  int64_t n_q, n_k;
  bool window_active, bottom_right;
  int64_t left, right;
  const int64_t* key_lengths;  // device, or nullptr
  const uint8_t* dense;        // device n_q * n_k, or nullptr
  Storage in, out;
  const void *q, *k, *v;
  double qd, kd, vd;           // descales (fp8), else 1: true value = stored * descale
  double scale;                // the problem's effective scale
  // This pass: row blocks [block0, block0 + gridDim.x) of rows_per_block rows of one (batch, head) each,
  // which cover rows [row0, row0 + pass_rows).
  int rows_per_block;
  int64_t block0, row0, pass_rows;

  FC_HOST_DEVICE int64_t rows() const { return int64_t(batch) * heads_q * n_q; }
  FC_HOST_DEVICE int64_t blocks_per_head() const { return (n_q + rows_per_block - 1) / rows_per_block; }
};

// The score cache (BudgetIn::scores): kScoreCachePlanes planes of [pass_rows * n_k] doubles, the value of
// the pass's row lr and key j at lr * n_k + j of its plane. The budget fills all three (score, R, operand
// error), the reference, before it, the first two (dot product, absolute dot product). (The kernels index
// it inline: a shared helper changed their register allocation and added spills.)
inline constexpr int kScoreCachePlanes = 3;

// Behind the planes, the score kernel's summary of each (row, chunk of 32 keys) it fills: over the keys the
// row sees there, the largest and the smallest plane-0 value and the largest plane-1 value (NaN ignored, as
// fmax ignores it), how many keys, and whether one holds a NaN. A row's maximum score, its count and its
// largest R are then a walk over its chunks instead of a sweep over its keys: a chunk's largest fl(scale z)
// is fl(scale z_max) for scale > 0 and fl(scale z_min) for scale < 0, as rounding is monotone, and so on
// for every monotone function of z or R. At [(pass row) * summary_chunks(n_k) + key / kSummaryKeys], 32-byte
// aligned.
inline constexpr int kSummaryKeys = 32;  // keys a chunk
struct ChunkSummary {
  double z_max, z_min, r_max;
  int count, nan;
};
static_assert(sizeof(ChunkSummary) == 32);
FC_HOST_DEVICE constexpr int64_t summary_chunks(int64_t n_k) { return (n_k + kSummaryKeys - 1) / kSummaryKeys; }
// Where the summaries start: the planes' end rounded up to 32 bytes (the allocation adds the 32).
FC_HOST_DEVICE inline ChunkSummary* chunk_summaries(double* scores, int64_t pass_rows, int64_t n_k) {
  const int64_t planes = kScoreCachePlanes * pass_rows * n_k;
  return reinterpret_cast<ChunkSummary*>(scores + (planes + 3) / 4 * 4);
}
FC_HOST_DEVICE inline const ChunkSummary* chunk_summaries(const double* scores, int64_t pass_rows, int64_t n_k) {
  return chunk_summaries(const_cast<double*>(scores), pass_rows, n_k);
}

// The oracle's scope: head dims up to kMaxHeadDim, softmax steps (budget tile widths) up to kMaxStep.
inline constexpr int kMaxHeadDim = 256;
inline constexpr int kMaxStep = 128;
// Columns each lane owns in the reference's per-column phase (dv <= 32 kCols), and in one column group
// of the budget's (dv > 32 kBudgetCols runs the budget's third sweep once per group).
inline constexpr int kCols = kMaxHeadDim / 32;
inline constexpr int kBudgetCols = 4;
// Rows per block at most (a warp each); fewer where the staged chunks would not fit in shared memory.
inline constexpr int kMaxRowsPerBlock = 8;

// What the score kernel (score_kernel.cuh) computes per (row, key): plane 0 the dot product of
// q * qd and k * kd (times sign, for the budget's sign-folded score), plane 1 the sum of their second
// operands' products (|x|, or with align the magnitude raised to mn where it is non-zero and below it).
// Plane 2, the tf32 operand error, is only the budget's own first sweep's (the recipes the score kernel
// fills for have none: read as 0).
struct ScoreOperands {
  double qd, kd, sign, mn;
  bool align, signed_scores;  // signed_scores: the budget's layout (sign applied)
};

struct ReferenceOut {
  double *o, *o_err, *lse, *lse_err;  // [rows * dv], [rows * dv], [rows], [rows]
  double* abs_scale;  // [rows * dv]: A = sum of weight * |V| over l (Float64Attention::abs_scale)
  double *a_factor, *a_floor;  // [rows]: A+ = a_factor A + a_floor >= the exact A (abs_scale_bound.h)
};

// The budget's basis and the recipe's constants (reference/error_budget.h BudgetConstants).
struct BudgetParams {
  int tile_n;             // the step width (1 when unknown, with tile_unknown)
  bool tile_unknown, tc, simt, fp8, fa1, two_level, l_fp32, op_round, split;
  int splits_opt, splits_known;  // splits_known: 0 = unknown (budget for at most one split per tile)
  int block;              // the block-FMA model's b
  double uP, S, theta_ftz, theta_abs, thresh, mn_op, mn_p, trunc_step, step, eps_s, abs_s;
  double sigma, sgn, c32, eps_fin, u_out, out_abs, lambda;
  double p_floor;         // mn_p / S, the excess's floor, once per launch instead of once per key
  bool merge_max;         // take the elementwise max with what is already in the outputs
  // The row form (BudgetRequest::per_key_eta = false, default convention, no tf32 operand term): every
  // key's interval from the row's eta bound, and the sums with one weight a key (budget_sums.h
  // RowColumnSum). Two-kernel budget only.
  bool row_form;
  // With the row form: its centred sums through knots (reference/budget_knots.h, docs/error-analysis.md
  // §3.18; BudgetRequest::knot_sums), the products on the fp16 tensor cores (budget_knot_kernels.cuh).
  bool knots;
  // x / tile_n and x / (tc ? block : 1) for a key offset x < 2^31 (the oracle refuses N_k >= 2^31).
  FastDiv tile_div, block_div;
};
struct BudgetIn {
  const double *o_ref, *o_err, *lse_ref, *lse_err;
  // The reference's A [rows * dv] and its bound's factor and floor [rows] (W, budget_terms.h w_bound).
  const double *abs_scale, *a_factor, *a_floor;
  // [B * Hkv * Nk]: max and min over columns of |V| in stored units (launch_key_v_range)
  const double *key_vmax, *key_vmin;
  // The score cache (kScoreCachePlanes above), or nullptr: written by the budget's first sweep for the keys a row
  // sees and read by the other two instead of recomputing them from K.
  double* scores;
  bool scores_filled;  // the score kernel filled the cache for this launch: sweep 1 reads it too
  // Where the score kernel filled it: the sign its plane 0 still needs (the budget's sgn where the cache
  // holds the reference's fill, 1 where it holds the budget's own).
  double z_sign;
};
struct BudgetOut {  // A (the scale of scaled ulps) is the reference's (ReferenceOut::abs_scale)
  double *o_bound, *o_bound_prob, *lse_bound, *lse_bound_prob;
};

// The budget in two kernels (the default where this workspace can be had; FLASHCHECK_ORACLE_SPLIT_BYTES=0
// keeps the single kernel). The weights kernel (budget_kernel in its kSplit form) runs the three sweeps up to
// each visible (row, key)'s weights and the row's sums, and writes them here; the sums kernel
// (budget_sums_kernel.cuh) then runs the per-(row, key, column) sums and the element bounds. The single
// kernel holds both in one thread's registers (255 of them, 8 warps per SM); apart, each needs far fewer,
// so more warps hide the float64 latencies. Same operations in the same order: the same bits.
// A launch covers `slots` rows (whole blocks of the pass); slot = block of the launch * rows_per_block + warp.
// Each (row, key)'s factors of the sums (budget_sums.h SumWeights, rounded up to fp32): whi, err_c, the third
// (err_c_det, or uP ep + zeta under the FA-2 convention) and ep as one float4, and zeta in a plane of its
// own, which only the FA-2 convention's sums read (the default neither writes nor copies it).
inline constexpr size_t kSplitWeightBytes = 4 * sizeof(float) + sizeof(float);
inline constexpr int kSplitRowsPerBlock = 4;  // both kernels' blocks (fewer where shared memory is short)
enum RowState : int { kRowSkip = 0, kRowSums = 1, kRowOutside = 2 };
// The row's sums over its visible keys of err_c, err_c_det and ep^2, through which the reference's error
// enters the centred sums once per row (budget_column_sums.cuh add_key_sums).
struct KeySums {
  double err_c = 0, err_c_det = 0, ep2 = 0;
};
struct RowTerms {  // what the element bounds need of the row, from the weights kernel
  double den, eps_l, eps_l_prob, floor_abs, w_mult, w_zeta;
  KeySums keys;
  budget::RowFactors row;  // the row form's constants (BudgetParams::row_form)
  long long n;
  int T, raises, merge, state;
};
// The knot form's workspace (BudgetParams::knots), beside the two-kernel form's. Per row of a launch: its fp16
// weights (W = e, W3 = e^2 and WZ = z, each scaled per row; 0 where the row does not see the key) over
// keys_pad keys, the row's part (KnotRowTerms), the products' chains per key split, and per element whether
// the knots certified it. Per judgement: V's fp16 values per column at both scales, each column's scale and
// flags. fp16 numbers travel as their bits.
inline constexpr int kKnotSplitKeys = budget::kKnotChainKeys;  // keys a chain of the products (and a split)
inline constexpr int kKnotChunkKeys = 64;  // keys the products stage at a time
inline constexpr int kKnotSums = 7;  // F0, F1, M, G0, G1, Z0, Z1 (budget_knots.h KnotSums)
enum KnotColumnFlags : unsigned { kKnotColumnExact = 1, kKnotColumnSmall = 2 };
struct KnotRowTerms {
  budget::KnotRow row;
  double x_sub, x_small;  // the row's alignment excess bounds (docs/error-analysis.md §3.18)
  int n_blocks, max_tile_blocks;  // the row's counts: every visible key counts
  int any_zeta;
};
struct KnotWork {
  uint16_t *w, *w3, *wz;  // [slots * keys_pad]
  KnotRowTerms* rows;     // [slots]
  float* partial;         // [splits][kKnotSums][slots * dv]
  float4* knots;          // [slots * dv]: the row's tile's knots in the column (t0, t1, and at the squares' scale;
                          // t0 NaN where they are not ok), made once a launch (knot_tiles_kernel)
  unsigned char* done;    // [slots * dv]: the knots certified the element, or it needs no sums
  uint16_t *x, *x2;       // [B * Hkv * dv * keys_pad]: x = fp16(v rc), x2 = fp16(v rc kKnotSquareScale)
  float* vt;              // [B * Hkv * dv * keys_pad]: V's stored values, a column's keys contiguous (the chains')
  double* rc;             // [B * Hkv * dv]
  unsigned char* col;     // [B * Hkv * dv]: KnotColumnFlags
  int64_t keys_pad;       // n_k rounded up to kKnotChunkKeys
  int splits;             // keys_pad / kKnotSplitKeys, rounded up (the last split may be shorter)
};
struct BudgetWeights {
  float4* w;          // [slots * n_k]: each key's whi, err_c, third, ep (0 where the row does not see it)
  float* zeta;        // [slots * n_k]: its zeta (FA-2 convention only; in the row form z, where zeta_keys says)
  float* e;           // the row form's [slots * n_k]: each key's e (budget_sums.h RowWeights), over w's bytes
  unsigned* zeta_keys;  // the row form's [slots * words]: the key's z > 0
  unsigned* visible;  // [slots * words]: bit j % 32 of word j / 32, the row sees key j
  unsigned* p_sub;    // [slots * words]: its P may be subnormal (the excess term)
  double* tile_max;   // [slots * words]: the weights kernel's scratch, each tile's largest score in tile order
  RowTerms* rows;     // [slots]
  const float* v32;   // [B * Hkv * Nk * dv]: V's stored values as fp32 (exact; launch_stored_v)
  int64_t slots, words;
  KnotWork knot;      // BudgetParams::knots only
};

struct VerdictIn {
  const void* o;         // the subject's O in the output format (Shape::out)
  const float* lse;      // the subject's LSE, or nullptr
  const double *o_ref, *lse_ref, *o_bound, *o_bound_prob, *lse_bound, *scale_a;
  verdict::OutputFormat format;
};
struct VerdictSums {  // device-side accumulators (atomics); maxima as the bits of non-negative doubles
  unsigned long long elements, violations, nan_mismatches, lse_checked, exceed_probabilistic;
  double sum_ratio, sum_scaled_ulps, sum_sq_error;
  unsigned long long max_ratio, max_ratio_probabilistic, max_scaled_ulps, max_abs_error, max_lse_ratio;
  unsigned long long histogram[verdict::kHistSize];
};
struct Candidate {
  double ratio;
  long long index;  // into O, or into the LSE rows when is_lse
  long long is_lse;  // 8 bytes: no padding, so a copied candidate holds no unwritten bytes (initcheck)
  double got, want, err, bound, scaled_ulps;
};

// Rows per block of the reference and the budget kernels at these head dims on this device (0: they do
// not fit in its shared memory).
int reference_rows_per_block(int d, int dv);
int budget_rows_per_block(int d, int dv);
// Launches (oracle_kernels.cu) over the pass that s describes (s.rows_per_block must be the kernel's);
// each returns the launch's error.
// scores: the score cache (BudgetIn::scores; its first two planes), or nullptr; filled: launch_scores
// filled them for this pass.
cudaError_t launch_reference(const Shape& s, const double* key_vmax, const ReferenceOut& out, double* scores,
                             bool filled);
// Fills the score cache's planes for the pass's rows and every key of theirs (score_kernel.cuh); false
// where the keys are too many for its grid (the kernels then fill it themselves).
bool score_kernel_fits(const Shape& s);
cudaError_t launch_scores(const Shape& s, const ScoreOperands& op, double* scores);
// *changed = 1 where align_mag(x, mn) changes some value of Q or K (score_kernel.cuh aligned_change_kernel);
// *changed must start at 0.
cudaError_t launch_aligned_change(const Shape& s, double mn, unsigned* changed);
cudaError_t launch_key_v_range(const Shape& s, double* key_vmax, double* key_vmin);
cudaError_t launch_stored_v(const Shape& s, float* v32);
// split: the two-kernel form's workspace (BudgetWeights above; its slots a multiple of the rows per
// block), or nullptr for the single kernel; the tf32 operand term always runs the single kernel.
cudaError_t launch_budget(const Shape& s, const BudgetParams& bp, const BudgetIn& in, const BudgetOut& out,
                          const BudgetWeights* split);
// Rows per block of the two-kernel form (0: it does not fit); its workspace per row of a launch.
int budget_split_rows_per_block(int d, int dv);
size_t budget_split_bytes_per_row(int64_t n_k);
int64_t budget_split_words(int64_t n_k);  // BudgetWeights::words
// The knot form's workspace (KnotWork): keys a row's weights span, splits of the products.
int64_t knot_keys_pad(int64_t n_k);
int knot_splits(int64_t n_k);
cudaError_t launch_verdict(const Shape& s, const VerdictIn& in, VerdictSums* sums, double* best, int blocks);
// How many elements of `tests` random m16n8k4 float64 products differ from the fma chain over their four
// products in ascending order (dmma_check.cu; 0 is what dmma.cuh assumes), or in descending order (the
// check's control: it must see differences), or -1 on a CUDA error.
int64_t dmma_chain_mismatches(uint64_t seed, int64_t tests, bool descending);
cudaError_t launch_worst(const Shape& s, const VerdictIn& in, double threshold, Candidate* out,
                         unsigned long long* count, unsigned long long cap, int blocks);
// The largest of best[0 .. n) and its k-th largest (1 <= k <= n), each at least 0, into out[0] and out[1].
cudaError_t launch_kth_largest(const double* best, int64_t n, int64_t k, double* out);

}  // namespace fc::gpu::detail
