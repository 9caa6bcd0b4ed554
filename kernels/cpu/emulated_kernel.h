// The CPU emulation of the fused FA-2 forward kernel: the same tiled schedule (runtime Br, Bc >= 1 of any
// value), rounding at exactly the points the CUDA kernel rounds (kernels/cuda/softmax.h, fwd_fp32.cu,
// split_kv_merge.cu), with the tensor-core accumulation either modelled (block FMA, reference/
// tensor_core_model.h) or replaced by IEEE sequential fp32 FMA. It is a subject under test like any
// kernel, and the reference model of what the CUDA kernel should compute. docs/error-analysis.md derives
// the bound it is held to.
#pragma once

#include <optional>
#include <string_view>

#include "kernels/subject.h"

namespace fc {

// Switchable bugs: the teeth of the property suite. Reachable only through the constructor.
enum class DeliberateBug {
  none,
  a_not_rescaled,        // the accumulator is not multiplied by alpha when the running max grows
  l_not_rescaled,        // the running sum is not multiplied by alpha
  rescale_inverted,      // alpha = exp(m_new - m_old) instead of exp(m_old - m_new)
  tail_not_masked,       // the last key tile's out-of-range keys (j >= n_k or >= key length) are visible,
                         // with score 0 and value 0 for j >= n_k (padding) and their real K/V otherwise
  causal_off_by_one,     // a window's right edge lets one more key through (j <= diag + right + 1)
  tile_local_max,        // the running max is the current tile's max only (m_old not folded in)
  division_skipped_after_last_tile_max_change,  // O = a (no division by l) when the last tile raised the max
  l_from_fp32_p_without_budget,  // l summed from the fp32 P while V uses the rounded P, reported as the
                                 // default convention (the budget then assumes the centred form)
};

std::string_view bug_name(DeliberateBug bug);
std::optional<DeliberateBug> parse_bug(std::string_view name);

class EmulatedKernel : public Subject {
 public:
  explicit EmulatedKernel(DeliberateBug bug = DeliberateBug::none);
  Capabilities capabilities() const override;
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override;

  // The tile a run with these options uses: the one asked for, else the CUDA kernel's default for this
  // head dim, recipe, mask and length (kernels/tile_policy.h, fc::tiles::default_tile). Each tile is
  // one online-softmax step. The run plan (SubjectOutput::plan) reports it.
  TileSize effective_tile(const Problem& p, const RunOptions& o) const;
  int effective_splits(const RunOptions& o) const { return o.num_splits <= 0 ? 1 : o.num_splits; }

  DeliberateBug bug() const { return bug_; }

 private:
  DeliberateBug bug_;
};

}  // namespace fc
