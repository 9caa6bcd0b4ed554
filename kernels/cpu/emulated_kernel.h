// The CPU emulation of the fused FA-2 forward kernel: the same tiled schedule (runtime Br, Bc >= 1 of any
// value), rounding at exactly the points the CUDA kernel rounds (kernels/cuda/softmax.h, fwd_fp32.cu,
// split_kv_merge.cu), with the tensor-core accumulation either modelled (block FMA, reference/
// tensor_core_model.h) or replaced by IEEE sequential fp32 FMA. It is a subject under test like any
// kernel, and the reference model of what the CUDA kernel should compute. docs/error-analysis.md derives
// the bound it is held to. The steps are emulated_steps.h; the switchable bugs deliberate_bugs.h.
#pragma once

#include <vector>

#include "kernels/cpu/deliberate_bugs.h"
#include "kernels/subject.h"

namespace fc {

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
  std::vector<float> smem_k_;  // k_smem_stale_past_end only: the shared K tile, as the last run left it
};

}  // namespace fc
