// The error budget holds for the emulation over random problems of every recipe (CI-sized campaign; the
// >= 10^7-element campaign is tools budget_campaign, label slow).
#include <limits>
#include <gtest/gtest.h>

#include "tests/budget/budget_support.h"

namespace fc::budget_test {
namespace {

class BudgetCampaign : public ::testing::TestWithParam<Recipe> {};

TEST_P(BudgetCampaign, EmulationNeverExceedsTheBound) {
  const Recipe r = GetParam();
  const Campaign cam = run_campaign(r, 500000, 1234 + static_cast<uint64_t>(r));
  const BudgetVerdict& v = cam.verdict;
  std::cout << recipe_spec(r).name << ": cases " << cam.cases << " elements " << v.elements << " violations "
            << v.violations << " max ratio " << v.max_ratio << " mean ratio " << v.mean_ratio()
            << " max prob ratio " << v.max_ratio_probabilistic << " lse max ratio " << v.max_lse_ratio << "\n";
  EXPECT_EQ(v.violations, 0u) << cam.worst_case;
  EXPECT_EQ(v.nan_mismatches, 0u);
  EXPECT_LE(v.max_ratio, 1.0) << cam.worst_case;
  if (!v.worst.empty()) {
    const WorstElement& w = v.worst.front();
    std::cout << "  worst: index " << w.index << (w.is_lse ? " (lse)" : "") << " got " << w.got << " want " << w.want
              << " err " << w.error << " bound " << w.bound << " in " << cam.worst_case << "\n";
  }
}


// tile_n = 0 ("Bc unknown") must bound every Bc: it is never below the budget for the actual Bc.
TEST(BudgetUnknownTile, IsNeverBelowTheKnownTileBudget) {
  std::mt19937_64 rng(99);
  size_t checked = 0;
  for (int n = 0; n < 120; ++n) {
    const Recipe r = all_recipes[n % all_recipes.size()];
    Case c = random_case(r, rng, 200, 1e6);
    RunOptions ds = c.options;
    const AttentionInputs in = make_inputs(c.problem, c.distribution, r, c.seed, &ds);
    RunOptions o = c.options;
    o.q_descale = ds.q_descale, o.k_descale = ds.k_descale, o.v_descale = ds.v_descale;
    const Float64Attention ref = exact_attention_f64(c.problem, in);
    EmulatedKernel k;
    const ErrorBudget known = error_budget(c.problem, in, o, k.effective_tile(c.problem, o).n, ref);
    const ErrorBudget unknown = error_budget(c.problem, in, o, 0, ref);
    EXPECT_EQ(unknown.tile_n, 0);
    for (size_t x = 0; x < known.o_bound.size(); ++x) {
      if (!(known.o_bound[x] > 0)) continue;
      ++checked;
      ASSERT_GE(unknown.o_bound[x], known.o_bound[x] * (1 - 1e-12)) << c.describe() << " element " << x;
    }
    for (size_t x = 0; x < known.lse_bound.size(); ++x)
      ASSERT_GE(unknown.lse_bound[x], known.lse_bound[x] * (1 - 1e-12)) << c.describe() << " row " << x;
  }
  EXPECT_GT(checked, 1000u);
}

INSTANTIATE_TEST_SUITE_P(AllRecipes, BudgetCampaign, ::testing::ValuesIn(all_recipes),
                         [](const auto& info) { return std::string(recipe_spec(info.param).name); });

// fp16 overflows at 65520 = 65504 + ulp/2: an infinity is legitimate only when the exact value plus its
// bound reaches that threshold, and only with the exact value's sign.
TEST(LegitimateOverflow, OnlyWithinTheBoundOfTheThresholdAndOfTheRightSign) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(legitimate_overflow(inf, 65504.0, 16.0, Format::fp16));
  EXPECT_FALSE(legitimate_overflow(inf, 65504.0, 15.9, Format::fp16));
  EXPECT_FALSE(legitimate_overflow(-inf, 65504.0, 16.0, Format::fp16));
  EXPECT_TRUE(legitimate_overflow(-inf, -65500.0, 20.0, Format::fp16));
  EXPECT_FALSE(legitimate_overflow(inf, 1.0, 1e9, Format::e4m3));  // no infinity in the format
  EXPECT_FALSE(legitimate_overflow(65504.0, 65504.0, 16.0, Format::fp16));
}

}  // namespace
}  // namespace fc::budget_test
