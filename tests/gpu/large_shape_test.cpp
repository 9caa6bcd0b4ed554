// The generators' large-shape mode on our CUDA kernel (properties/large_shapes.h, large_case_run.h):
// cases of production size (N up to 64k, B·Hq up to 64, every mask kind, GQA, fp16/bf16/fp8), inputs made
// on the device, the kernel run on device buffers through the C ABI, its output judged on the device by
// the GPU oracle for the plan it reported. FLASHCHECK_LARGE_CASES cases (default 8) from the seed
// FLASHCHECK_LARGE_SEED (default 1); each is printed with its verdict and times, and a case reproduces
// from the seed and its position alone. Skipped, visibly, without a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "kernels/plugin/plugin_abi.h"
#include "properties/large_case_run.h"
#include "tests/gpu/cuda_plugin_path.h"

namespace fc {
namespace {

const fc_plugin* cuda_plugin() {
  void* h = dlopen(gpu_test::cuda_plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  auto entry = reinterpret_cast<fc_plugin_entry_fn>(dlsym(h, FC_PLUGIN_ENTRY_SYMBOL));
  return entry ? entry() : nullptr;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

TEST(LargeShapes, OurKernelStaysWithinItsBudget) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  const fc_plugin* plugin = cuda_plugin();
  ASSERT_NE(plugin, nullptr) << dlerror();
  fc_capabilities raw{};
  char message[1024] = {};
  ASSERT_EQ(plugin->capabilities(&raw, message, sizeof message), FC_OK) << message;
  const Capabilities caps = to_capabilities(raw);
  const int cases = env_int("FLASHCHECK_LARGE_CASES", 8), seed = env_int("FLASHCHECK_LARGE_SEED", 1);
  std::mt19937_64 rng{uint64_t(seed)};
  int judged = 0;
  double scores = 0, oracle_s = 0;
  for (int n = 0; n < cases; ++n) {
    const LargeCase c = draw_large_case(rng, caps);
    LargeResult r;
    try {
      r = run_large_case(*plugin, caps, c);
    } catch (const SubjectRefused& e) {
      std::printf("case %d (seed %d): %s\n  refused: %s\n", n, seed, c.describe().c_str(), e.reason.c_str());
      continue;
    }
    const BudgetVerdict& v = r.verdict.verdict;
    const gpu::Timing& t = r.verdict.timing;
    std::printf("case %d (seed %d): %s\n  budget for %s; kernel %.2f ms; %zu elements, %zu violations, max "
                "error/bound %.3g, LSE %.3g; oracle %.2f s; %.2f GiB of tensors\n",
                n, seed, c.describe().c_str(), r.basis.describe().c_str(), r.kernel_ms, v.elements, v.violations,
                v.max_ratio, v.max_lse_ratio, t.reference_s + t.budget_s + t.verdict_s, r.device_gib);
    std::fflush(stdout);
    EXPECT_EQ(v.violations, 0u) << c.describe();
    ++judged;
    scores += double(c.problem.batch) * c.problem.heads_q * double(c.problem.n_q) * double(c.problem.n_k);
    oracle_s += t.reference_s + t.budget_s + t.verdict_s;
  }
  std::printf("%d of %d cases judged, %.3g scores, %.1f s of oracle time\n", judged, cases, scores, oracle_s);
  EXPECT_GT(judged, 0);
}

}  // namespace
}  // namespace fc
