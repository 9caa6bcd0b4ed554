// The GPU oracle's kernels and their launches (oracle_types.h). Compiled as C++17 device code, apart
// from the exact layer's C++20 headers; gpu_oracle.cpp is the host side.
#include <algorithm>

#include "reference/cuda/budget_kernel.cuh"
#include "reference/cuda/budget_knot_kernels.cuh"
#include "reference/cuda/budget_sums_kernel.cuh"
#include "reference/cuda/reference_kernel.cuh"
#include "reference/cuda/reference_tiled_kernel.cuh"
#include "reference/cuda/score_kernel.cuh"
#include "reference/cuda/verdict_kernel.cuh"

namespace fc::gpu::detail {

namespace {

size_t max_smem() {
  int dev = 0, bytes = 48 << 10;
  if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  return size_t(bytes);
}

// The most rows per block (8, 4, 2, 1: they divide the passes' 8-row alignment) whose shared memory fits.
template <class Bytes>
int fitting_rows(Bytes bytes) {
  for (int rows = kMaxRowsPerBlock; rows >= 1; rows /= 2)
    if (bytes(rows) <= max_smem()) return rows;
  return 0;
}

// The budget stages K's r_operand beside K when that still leaves room for a full block of rows.
bool budget_stages_k2(int d, int dv) { return budget_smem(d, dv, kMaxRowsPerBlock, true) <= max_smem(); }

// The pass's rows [row0, row0 + pass_rows) as blocks of `rows` rows: block0 and the grid size. Passes
// start at a multiple of kMaxRowsPerBlock rows of a (batch, head) and end at one or at a head's end.
unsigned place_pass(Shape& s, int rows) {
  s.rows_per_block = rows;
  const int64_t per_head = s.blocks_per_head();
  const int64_t end = s.row0 + s.pass_rows;
  s.block0 = (s.row0 / s.n_q) * per_head + (s.row0 % s.n_q) / rows;
  const int64_t block_end = (end / s.n_q) * per_head + (end % s.n_q + rows - 1) / rows;
  return unsigned(block_end - s.block0);
}

// Lets a kernel take up to the device's opt-in shared memory. Always this one value, never the launch's
// own size: the attribute belongs to the function, not to a launch, so with judgements on several threads
// (the fuzzer, the report) a smaller value set by one would fail another's launch in between ("invalid
// argument", "too many resources requested for launch": seen on the H200 under `fuzz --oracle gpu`).
template <class Kernel>
cudaError_t allow_max_smem(Kernel kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(max_smem()));
}

}  // namespace

int reference_rows_per_block(int d, int dv) {
  return fitting_rows([&](int rows) { return reference_smem(d, dv, rows); });
}
int budget_rows_per_block(int d, int dv) {
  const bool staged = budget_stages_k2(d, dv);
  return fitting_rows([&](int rows) { return budget_smem(d, dv, rows, staged); });
}

cudaError_t launch_reference(const Shape& pass, const double* key_vmax, const ReferenceOut& out, double* scores,
                             bool filled) {
  Shape s = pass;
  if (filled && scores != nullptr && s.dv <= kTiledMaxDv) {
    // The cache holds every score: the tiled kernel (32 rows a block, the same bits).
    const unsigned blocks = place_pass(s, kTiledRows);  // a block may reach past the pass: not its rows
    const cudaError_t e = allow_max_smem(reference_tiled_kernel);
    if (e != cudaSuccess) return e;
    reference_tiled_kernel<<<blocks, kTiledThreads, reference_tiled_smem(s.dv, s.in)>>>(s, key_vmax, out, scores);
    return cudaGetLastError();
  }
  const int rows = reference_rows_per_block(s.d, s.dv);
  if (rows == 0) return cudaErrorInvalidConfiguration;
  const unsigned blocks = place_pass(s, rows);
  const size_t smem = reference_smem(s.d, s.dv, rows);
  const cudaError_t e = allow_max_smem(reference_kernel);
  if (e != cudaSuccess) return e;
  reference_kernel<<<blocks, 32 * rows, smem>>>(s, key_vmax, out, scores, filled && scores != nullptr);
  return cudaGetLastError();
}

// Key tiles on the grid's y (at most 65,535 of them), row tiles of kScoreTile rows of one (batch, head) on x.
bool score_kernel_fits(const Shape& s) { return (s.n_k + kScoreTile - 1) / kScoreTile <= 65535; }

cudaError_t launch_scores(const Shape& pass, const ScoreOperands& op, double* scores) {
  if (!score_kernel_fits(pass)) return cudaErrorInvalidConfiguration;
  Shape s = pass;
  const unsigned row_tiles = place_pass(s, kScoreTile);  // a tile may reach past the pass: those rows are not written
  const unsigned key_tiles = unsigned((s.n_k + kScoreTile - 1) / kScoreTile);
  if (row_tiles == 0 || key_tiles == 0) return cudaSuccess;
  const dim3 grid(row_tiles, key_tiles);
  with_storage(s.in, [&](auto tag) { score_kernel<decltype(tag)::value><<<grid, kScoreThreads>>>(s, op, scores); });
  return cudaGetLastError();
}

cudaError_t launch_aligned_change(const Shape& s, double mn, unsigned* changed) {
  aligned_change_kernel<<<1024, 256>>>(s, mn, changed);
  return cudaGetLastError();
}

cudaError_t launch_stored_v(const Shape& s, float* v32) {
  stored_v_kernel<<<1024, 256>>>(s, v32);
  return cudaGetLastError();
}

cudaError_t launch_key_v_range(const Shape& s, double* key_vmax, double* key_vmin) {
  key_v_range_kernel<<<1024, 256>>>(s, key_vmax, key_vmin);
  return cudaGetLastError();
}

int budget_split_rows_per_block(int d, int dv) {
  for (int rows = kSplitRowsPerBlock; rows >= 1; rows /= 2)
    if (std::max(budget_smem(d, dv, rows, false, false), budget_sums_smem(rows, sums_cols(dv))) <= max_smem())
      return rows;
  return 0;
}
int64_t budget_split_words(int64_t n_k) { return (n_k + kChunk - 1) / kChunk; }
size_t budget_split_bytes_per_row(int64_t n_k) {
  return size_t(n_k) * kSplitWeightBytes + 3 * size_t(budget_split_words(n_k)) * sizeof(unsigned) +
         size_t(budget_split_words(n_k)) * sizeof(double) + sizeof(RowTerms);
}

int64_t knot_keys_pad(int64_t n_k) { return (n_k + kKnotChunkKeys - 1) / kKnotChunkKeys * kKnotChunkKeys; }
int knot_splits(int64_t n_k) { return int((knot_keys_pad(n_k) + kKnotSplitKeys - 1) / kKnotSplitKeys); }

namespace {

// The knot form after the weights kernel of one launch of n blocks (s.block0 the launch's first): WZ for the
// rows with an underflowed key, the products over the tiles of the heads the launch's rows belong to (blocks of four tiles of
// one head; those without a row of the launch return at once), each element's knots or chains.
void launch_knots(const Shape& s, const BudgetParams& bp, const BudgetIn& in, const BudgetOut& out,
                  const BudgetWeights& w, unsigned n, int rows) {
  knot_zeta_kernel<<<n, 32 * rows>>>(s, w);
  const int64_t per_head = s.blocks_per_head(), tiles_per_head = (s.n_q + budget::kKnotRows - 1) / budget::kKnotRows;
  const int64_t bh0 = s.block0 / per_head, heads = (s.block0 + n - 1) / per_head - bh0 + 1;
  const int64_t groups = (tiles_per_head + kKnotWarps - 1) / kKnotWarps;
  knot_tiles_kernel<<<unsigned((heads * tiles_per_head * s.dv + 255) / 256), 256>>>(s, in, w, n, bh0, heads);
  const dim3 grid(unsigned(heads * groups), unsigned((s.dv + kKnotCols - 1) / kKnotCols), unsigned(w.knot.splits));
  knot_products_kernel<0><<<grid, 32 * kKnotWarps, kKnotSmemBytes>>>(s, w, n, bh0, groups);
  knot_products_kernel<1><<<grid, 32 * kKnotWarps, kKnotSmemBytes>>>(s, w, n, bh0, groups);
  knot_products_kernel<2><<<grid, 32 * kKnotWarps, kKnotSmemBytes>>>(s, w, n, bh0, groups);
  const int64_t elements = int64_t(n) * rows * s.dv;
  knot_finalize_kernel<<<unsigned((elements + 255) / 256), 256>>>(s, bp, in, out, w, n);
  knot_chains_kernel<<<unsigned(std::min<int64_t>((elements + 7) / 8, 132 * 64)), 256>>>(s, bp, in, out, w, n);
}

}  // namespace

cudaError_t launch_budget(const Shape& pass, const BudgetParams& bp, const BudgetIn& in, const BudgetOut& out,
                          const BudgetWeights* split) {
  Shape s = pass;
  using Kernel = void (*)(Shape, BudgetParams, BudgetIn, BudgetOut, BudgetWeights);
  if (split != nullptr && !bp.op_round) {
    // The two kernels, over as many of the pass's blocks at a time as the weights' slots hold.
    const int rows = budget_split_rows_per_block(s.d, s.dv);
    if (rows == 0 || split->slots < rows) return cudaErrorInvalidConfiguration;
    const unsigned blocks = place_pass(s, rows);
    const size_t smem = budget_smem(s.d, s.dv, rows, false, false, !in.scores_filled);
    const int cols = sums_cols(s.dv);
    const size_t sums_smem = budget_sums_smem(rows, cols);
    const Kernel weights = bp.l_fp32     ? budget_kernel<false, false, true, true>
                           : bp.knots    ? budget_kernel<false, false, false, true, true, true>
                           : bp.row_form ? budget_kernel<false, false, false, true, true>
                                         : budget_kernel<false, false, false, true>;
    using SumsKernel = void (*)(Shape, BudgetParams, BudgetIn, BudgetOut, BudgetWeights, int);
    static constexpr SumsKernel kSums[2][2] = {{budget_sums_kernel<false, 2>, budget_sums_kernel<false, 4>},
                                               {budget_sums_kernel<true, 2>, budget_sums_kernel<true, 4>}};
    static constexpr SumsKernel kRowSums[2] = {budget_sums_kernel<false, 2, true>, budget_sums_kernel<false, 4, true>};
    const SumsKernel sums = bp.row_form && !bp.l_fp32 ? kRowSums[cols == 4] : kSums[bp.l_fp32][cols == 4];
    cudaError_t e = allow_max_smem(weights);
    if (e == cudaSuccess) e = allow_max_smem(sums);
    if (e != cudaSuccess) return e;
    const int64_t per_launch = split->slots / rows;
    // V's fp16 values per column for this budget's flags (the small values' bound is the recipe's).
    if (bp.knots)
      knot_v_kernel<<<unsigned(int64_t(s.batch) * s.heads_kv * s.dv), 256>>>(s, bp, split->v32, split->knot);
    const int groups = (s.dv + 32 * cols - 1) / (32 * cols);
    const int64_t block0 = s.block0;
    for (int64_t k0 = 0; k0 < blocks; k0 += per_launch) {
      s.block0 = block0 + k0;
      const unsigned n = unsigned(std::min<int64_t>(per_launch, blocks - k0));
      weights<<<n, 32 * rows, smem>>>(s, bp, in, out, *split);
      if (bp.knots) launch_knots(s, bp, in, out, *split, n, rows);
      else sums<<<n * unsigned(groups), 32 * rows, sums_smem>>>(s, bp, in, out, *split, groups);
    }
    return cudaGetLastError();
  }
  if (bp.row_form) return cudaErrorNotSupported;  // the row form is the two kernels' (the host says so first)
  const int rows = budget_rows_per_block(s.d, s.dv);
  if (rows == 0) return cudaErrorInvalidConfiguration;
  const unsigned blocks = place_pass(s, rows);
  // With the score cache K's operand serves the first sweep only, computed there (and K staged alone).
  const bool staged = in.scores == nullptr && budget_stages_k2(s.d, s.dv);
  const size_t smem = budget_smem(s.d, s.dv, rows, staged);
  static constexpr Kernel kernels[2][2][2] = {
      {{budget_kernel<false, false, false, false>, budget_kernel<false, false, true, false>},
       {budget_kernel<false, true, false, false>, budget_kernel<false, true, true, false>}},
      {{budget_kernel<true, false, false, false>, budget_kernel<true, false, true, false>},
       {budget_kernel<true, true, false, false>, budget_kernel<true, true, true, false>}}};
  const Kernel kernel = kernels[staged][bp.op_round][bp.l_fp32];
  const cudaError_t e = allow_max_smem(kernel);
  if (e != cudaSuccess) return e;
  kernel<<<blocks, 32 * rows, smem>>>(s, bp, in, out, BudgetWeights{});
  return cudaGetLastError();
}

cudaError_t launch_verdict(const Shape& s, const VerdictIn& in, VerdictSums* sums, double* best, int blocks) {
  verdict_kernel<<<blocks, 256>>>(s, in, sums, best);
  return cudaGetLastError();
}

cudaError_t launch_kth_largest(const double* best, int64_t n, int64_t k, double* out) {
  kth_largest_kernel<<<1, kSelectThreads>>>(best, n, k, out);
  return cudaGetLastError();
}

cudaError_t launch_worst(const Shape& s, const VerdictIn& in, double threshold, Candidate* out,
                         unsigned long long* count, unsigned long long cap, int blocks) {
  worst_kernel<<<blocks, 256>>>(s, in, threshold, out, count, cap);
  return cudaGetLastError();
}

}  // namespace fc::gpu::detail
