// The example CPU plugin (examples/plugins/cpu_reference_plugin.c), loaded through PluginSubject,
// stays within the error budget for its recipes and masks (the whole property suite runs on it in
// tests/properties/property_plugin_test.cpp), and a plugin failing mid-run fails a property. The plugin
// is what downstream users copy: if it failed, the route would be wrong.
#include <gtest/gtest.h>

#include <iostream>

#include "kernels/plugin/plugin_subject.h"
#include "kernels/subject_registry.h"
#include "properties/distributions.h"
#include "reference/error_budget.h"
#ifdef FC_HAVE_PROPERTIES
#include "properties/attention_properties.h"
#include "properties/rc_binding.h"
#endif

namespace fc {
namespace {

struct Shape {
  int batch, heads_q, heads_kv;
  int64_t n_q, n_k;
  int d;
  std::string mask;
  std::vector<int64_t> key_lengths;
};

TEST(ExamplePlugin, WithinBudgetAcrossRecipesMasksAndDistributions) {
  auto subject = make_subject(std::string("plugin:") + FC_EXAMPLE_CPU_PLUGIN);
  const std::vector<Shape> shapes = {
      {1, 1, 1, 1, 1, 8, "none", {}},
      {2, 4, 2, 17, 65, 16, "none", {}},
      {1, 2, 1, 33, 33, 32, "causal", {}},
      {1, 2, 2, 40, 23, 8, "causal-top-left", {}},
      {2, 2, 1, 31, 47, 16, "window:5,3", {}},
      {2, 2, 2, 12, 50, 16, "causal", {50, 9}},
      {1, 1, 1, 9, 70, 64, "window-top-left:4,0", {}},
  };
  const std::vector<Distribution> dists = {Distribution::normal, Distribution::fa3_outliers, Distribution::large_range,
                                           Distribution::v_mean, Distribution::increasing_scores};
  size_t checked = 0;
  for (Recipe r : {Recipe::fp32, Recipe::fp16, Recipe::bf16})
    for (const Shape& s : shapes)
      for (Distribution dist : dists) {
        Problem p;
        p.batch = s.batch;
        p.heads_q = s.heads_q;
        p.heads_kv = s.heads_kv;
        p.n_q = s.n_q;
        p.n_k = s.n_k;
        p.d = p.dv = s.d;
        p.window = *parse_window(s.mask);
        p.key_lengths = s.key_lengths;
        RunOptions o;
        o.recipe = r;
        const uint64_t seed = 1000 * checked + 7;
        const AttentionInputs in = make_inputs(p, dist, r, seed, &o);
        const SubjectOutput out = subject->run(p, in, o);
        const Float64Attention ref = exact_attention_f64(p, in);
        // The plugin walks keys one at a time: a key tile of 1, which is also the conservative choice.
        const ErrorBudget budget = error_budget(p, in, o, 1, ref);
        const BudgetVerdict v = check_against_budget(p, out.o, out.lse, ref, budget, recipe_spec(r).output);
        EXPECT_EQ(v.violations, 0u) << recipe_spec(r).name << " " << p.describe() << " dist="
                                    << distribution_name(dist) << " seed=" << seed << ": max error/bound "
                                    << v.max_ratio << ", max LSE error/bound " << v.max_lse_ratio;
        EXPECT_EQ(out.lse.size(), p.lse_size());
        ++checked;
      }
  EXPECT_EQ(checked, 3u * 7u * 5u);
}

#ifdef FC_HAVE_PROPERTIES
// A plugin that fails mid-run fails the property instead of passing it.
TEST(BrokenPlugin, ErrorMidRunFailsTheBudgetProperty) {
  auto subject = PluginSubject::open(FC_BROKEN_FAIL_MIDRUN);
  {  // the plugin's first call succeeds (with zeros); every later one fails with an error code
    Problem p;
    RunOptions o;
    o.recipe = Recipe::fp32;
    p.d = p.dv = 1;
    subject->run(p, AttentionInputs{{0.5}, {0.25}, {1.0}}, o);
  }
  const PropertyDef* def = find_property("budget");
  ASSERT_NE(def, nullptr);
  rc::detail::TestParams params;
  params.seed = 1;
  params.maxSuccess = 10;
  params.maxSize = 20;
  params.disableShrinking = true;
  const PropertyOutcome outcome = check_property(*def, *subject, "broken/budget", params);
  EXPECT_FALSE(outcome.passed);
  EXPECT_NE((outcome.failure + outcome.rapidcheck_message).find("simulated device fault"), std::string::npos)
      << outcome.failure << "\n" << outcome.rapidcheck_message;
}
#endif

}  // namespace
}  // namespace fc
