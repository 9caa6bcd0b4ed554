// Regression tests for what the property suite and the GPU fuzzer found in our CUDA kernel, each the
// shrunk case they printed (docs/cuda-kernel.md, "Findings"). Labelled gpu: skips visibly without one.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kernels/subject_registry.h"
#include "properties/distributions.h"

namespace fc {
namespace {

std::unique_ptr<Subject> cuda_or_skip(std::string& why) {
  if (!gpu_available()) {
    why = "no usable CUDA device: GPU regression test SKIPPED, not passed";
    return nullptr;
  }
  return make_subject("cuda");
}

// Found by property budget/nan (H200, 2026-11-29): Nq = 3 > Nk = 2 with bottom-right causal leaves
// row 0 with no visible key; key 0's value row is NaN and visible to rows 1 and 2. The kernel's MMA
// multiplied row 0's zero P by the NaN and wrote NaN where the definition says 0.
TEST(CudaRegression, EmptyRowStaysZeroBesideANaNValueRow) {
  std::string why;
  auto cuda = cuda_or_skip(why);
  if (!cuda) GTEST_SKIP() << why;
  Problem p;
  p.heads_q = 2;
  p.n_q = 3;
  p.n_k = 2;
  p.d = p.dv = 32;
  p.window = Window::causal(Align::bottom_right);
  for (int splits : {1, 2}) {
    RunOptions o;
    o.recipe = Recipe::fp16;
    o.num_splits = splits;
    AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 1, &o);
    in.v[p.v_index(0, 0, 0, 0)] = NAN;
    const SubjectOutput out = cuda->run(p, in, o);
    for (int h = 0; h < p.heads_q; ++h) {
      for (int c = 0; c < p.dv; ++c) EXPECT_EQ(out.o[p.o_index(0, h, 0, c)], 0.0) << "head " << h << " splits " << splits;
      EXPECT_EQ(out.lse[p.lse_index(0, h, 0)], -INFINITY);
      EXPECT_TRUE(std::isnan(out.o[p.o_index(0, h, 1, 0)]));  // row 1 sees key 0: NaN is right there
    }
  }
}

}  // namespace
}  // namespace fc
