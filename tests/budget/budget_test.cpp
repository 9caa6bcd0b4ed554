// The error budget holds for the emulation over random problems of every recipe (CI-sized campaign; the
// >= 10^7-element campaign is tools budget_campaign, label slow).
#include <cstring>
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
    const AttentionInputs in = case_inputs(c);
    const RunOptions& o = c.options;
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

// The budget of one output column depends on that column of V and of the reference alone, so permuting
// V's columns (and the reference's with them) permutes every bound bit for bit. The CPU budget walks
// columns with no V of 0 (and none below the operands' normal range) eight at a time and the others one
// at a time (error_budget.cpp, walk_group / walk_column): zeros placed in one column move it, and the
// columns sharing its group, from one walk to the other, so this also holds the two walks to the same bits.
TEST(BudgetColumns, PermutingVColumnsPermutesTheBoundsBitForBit) {
  std::mt19937_64 rng(7);
  size_t compared = 0;
  for (int n = 0; n < 48; ++n) {
    const Recipe r = all_recipes[n % all_recipes.size()];
    Case c = random_case(r, rng, 96, 4e5);
    Problem& p = c.problem;
    p.dv = 24;  // three groups of eight
    AttentionInputs in = case_inputs(c);
    const RunOptions& o = c.options;
    const int zero_col = int(rng() % 24);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_kv; ++h)
        for (int64_t j = 0; j < p.n_k; j += 3) in.v[p.v_index(b, h, j, zero_col)] = 0.0;
    // perm[c]: the column of the permuted problem that holds column c: a shift by 8 to 15 columns, so that
    // the zero column lands in another group of eight and its group's other columns spread over two.
    std::vector<int> perm(24);
    for (int x = 0; x < 24; ++x) perm[x] = (x + 8 + (n % 8)) % 24;
    AttentionInputs in2 = in;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_kv; ++h)
        for (int64_t j = 0; j < p.n_k; ++j)
          for (int x = 0; x < 24; ++x) in2.v[p.v_index(b, h, j, perm[x])] = in.v[p.v_index(b, h, j, x)];
    const Float64Attention ref = exact_attention_f64(p, in);
    Float64Attention ref2 = ref;
    const size_t rows = p.lse_size();
    for (size_t row = 0; row < rows; ++row)
      for (int x = 0; x < 24; ++x) {
        const size_t a = row * 24 + size_t(x), b2 = row * 24 + size_t(perm[x]);
        ref2.out.o[b2] = ref.out.o[a];
        ref2.o_error_bound[b2] = ref.o_error_bound[a];
        ref2.abs_scale[b2] = ref.abs_scale[a];
      }
    EmulatedKernel k;
    const int tile = k.effective_tile(p, o).n;
    const ErrorBudget b1 = error_budget(p, in, o, tile, ref), b2 = error_budget(p, in2, o, tile, ref2);
    ASSERT_EQ(b1.lse_bound, b2.lse_bound) << c.describe();
    for (size_t row = 0; row < rows; ++row)
      for (int x = 0; x < 24; ++x) {
        const size_t a = row * 24 + size_t(x), b = row * 24 + size_t(perm[x]);
        ASSERT_EQ(std::memcmp(&b1.o_bound[a], &b2.o_bound[b], sizeof(double)), 0)
            << c.describe() << " row " << row << " column " << x << ": " << b1.o_bound[a] << " vs " << b2.o_bound[b];
        ASSERT_EQ(std::memcmp(&b1.o_bound_probabilistic[a], &b2.o_bound_probabilistic[b], sizeof(double)), 0)
            << c.describe() << " row " << row << " column " << x;
        ASSERT_EQ(std::memcmp(&b1.scale_d[a], &b2.scale_d[b], sizeof(double)), 0) << c.describe();
        ++compared;
      }
  }
  EXPECT_GT(compared, 10000u);
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
