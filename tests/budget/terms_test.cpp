// Every dominant term of the budget is needed: for each, an input on which the emulation stays within
// the full bound but exceeds the bound with that term removed. And the bound is tight: on inputs built
// to maximise the error (aligned P rounding), the worst error reaches a large fraction of the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>

#include "kernels/cpu/emulated_kernel.h"
#include "reference/error_budget.h"
#include "tests/budget/adversarial.h"

namespace fc {
namespace {

struct Outcome {
  BudgetVerdict full, without;
};

Outcome run_without(const Problem& p, const AttentionInputs& in, const RunOptions& o, BudgetTerms removed) {
  EmulatedKernel k;
  const SubjectOutput out = k.run(p, in, o);
  const Float64Attention ref = exact_attention_f64(p, in);
  const int bc = k.effective_tile(p, o).n;
  const Format of = recipe_spec(o.recipe).output;
  Outcome r;
  r.full = check_against_budget(p, out.o, out.lse, ref, error_budget(p, in, o, bc, ref), of);
  r.without = check_against_budget(p, out.o, {}, ref, error_budget(p, in, o, bc, ref, removed), of);
  return r;
}

void expect_needed(const char* term, const Outcome& r) {
  EXPECT_EQ(r.full.violations, 0u) << term << ": the full bound must hold";
  EXPECT_GT(r.without.violations, 0u) << term << ": removing it must let some element exceed the bound";
  std::cout << term << ": full bound max err/B " << r.full.max_ratio << "; without the term " << r.without.violations
            << " of " << r.without.elements << " elements exceed it, max err/B " << r.without.max_ratio << "\n";
}

Problem row_problem(int64_t nk, int d, double scale) {
  Problem p;
  p.n_q = 1;
  p.n_k = nk;
  p.d = d;
  p.dv = 1;
  p.scale = scale;
  return p;
}

// P rounding dominates fp16, bf16, tf32 and fp8: aligned rounding errors of P against V - O.
class PRounding : public ::testing::TestWithParam<Recipe> {};
TEST_P(PRounding, IsNeeded) {
  const Recipe r = GetParam();
  Problem p;
  p.n_q = 4;
  p.n_k = 512;
  p.d = p.dv = 16;
  RunOptions o;
  o.recipe = r;
  BudgetTerms t;
  t.p_rounding = false;
  expect_needed("p_rounding", run_without(p, adversarial::aligned_rounding(p, r, 1), o, t));
}
INSTANTIATE_TEST_SUITE_P(LowPrecision, PRounding,
                         ::testing::Values(Recipe::tf32, Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2),
                         [](const auto& i) { return std::string(recipe_spec(i.param).name); });

// Output rounding dominates fp16, bf16 and fp8 (bf16 output) when V has a large mean and little spread.
class OutputRounding : public ::testing::TestWithParam<Recipe> {};
TEST_P(OutputRounding, IsNeeded) {
  const Recipe r = GetParam();
  Problem p;
  p.n_q = 16;
  p.n_k = 200;
  p.d = p.dv = 16;
  AttentionInputs in;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  const Format f = recipe_spec(r).input;
  for (size_t x = 0; x < p.q_size(); ++x) in.q.push_back(round_to(f, g(rng)));
  for (size_t x = 0; x < p.k_size(); ++x) in.k.push_back(round_to(f, g(rng)));
  // V is one value of the format near 100, and its successor for every 40th key: D is tiny, while O sits
  // between two values of the output format.
  const double base = round_to(f, 100.0), next = next_up(f, base);
  for (int64_t j = 0; j < p.n_k; ++j)
    for (int c = 0; c < p.dv; ++c) in.v.push_back(j % 40 == 7 ? next : base);
  RunOptions o;
  o.recipe = r;
  BudgetTerms t;
  t.output_rounding = false;
  expect_needed("output_rounding", run_without(p, in, o, t));
}
INSTANTIATE_TEST_SUITE_P(LowPrecisionOutput, OutputRounding,
                         ::testing::Values(Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2),
                         [](const auto& i) { return std::string(recipe_spec(i.param).name); });

// P.V accumulation dominates fp32 (gamma_N): every key after the first adds just under half an ulp of
// the accumulator, so every FMA rounds the same way.
TEST(Terms, PvAccumulationIsNeededFp32) {
  Problem p = row_problem(2048, 1, 1.0);
  AttentionInputs in;
  in.q = {0.0};
  in.k.assign(p.n_k, 0.0);  // every score 0: P = 1
  in.v.assign(p.n_k, std::ldexp(1.0 - std::ldexp(1.0, -10), -24));
  in.v[0] = 1.0;
  RunOptions o;
  o.recipe = Recipe::fp32;
  o.accumulation = Accumulation::ieee_fp32;
  BudgetTerms t;
  t.pv_accumulation = false;
  const Outcome r = run_without(p, in, o, t);
  expect_needed("pv_accumulation", r);
  EXPECT_GT(r.full.max_ratio, 0.25) << "the fp32 accumulation bound is attained by aligned roundings";
}

// l accumulation (fp32): P of every later key is under half an ulp of l, and its V is 0, so only l errs.
TEST(Terms, LAccumulationIsNeededFp32) {
  Problem p = row_problem(1024, 1, 1.0);
  AttentionInputs in;
  in.q = {1.0};
  in.k.assign(p.n_k, double(float(std::log(0.9 * std::ldexp(1.0, -24)))));
  in.k[0] = 0.0;
  in.v.assign(p.n_k, 0.0);
  in.v[0] = 1.0;
  RunOptions o;
  o.recipe = Recipe::fp32;
  o.tile_n = 1;
  BudgetTerms t;
  t.l_accumulation = false;
  expect_needed("l_accumulation", run_without(p, in, o, t));
}

// Score accumulation (fp32): q.k = 2^24 + 1 - 2^24 is computed as 0 (the +1 is lost to a tie).
TEST(Terms, ScoresAreNeededFp32) {
  Problem p = row_problem(2, 3, 1.0);
  AttentionInputs in;
  in.q = {1.0, 1.0, 1.0};
  in.k = {16777216.0, 1.0, -16777216.0, 0.0, 0.0, 0.0};
  in.v = {1.0, -1.0};
  RunOptions o;
  o.recipe = Recipe::fp32;
  BudgetTerms t;
  t.scores = false;
  expect_needed("scores", run_without(p, in, o, t));
}

// Exponent argument (fp32): with scores near 10^4, fl(m c) is off by up to half an ulp of 1.4e4, and a
// different m per tile makes the error differ between keys. This term is never larger than the score term
// (|m| <= R), so it is shown needed with the score term removed as well (the scores here are exact).
TEST(Terms, ExponentIsNeededFp32) {
  Problem p = row_problem(2, 1, 1.0);
  const float c = float(1.4426950408889634074);
  double best = 0, s0 = 0, s1 = 0;
  for (int a = 0; a < 4000; ++a) {
    const float x0 = 10000.0f + 0.0625f * a, x1 = x0 + 0.25f;
    const double r0 = double(x0) * c - double(x0 * c), r1 = double(x1) * c - double(x1 * c);
    if (std::fabs(r0 - r1) > best) best = std::fabs(r0 - r1), s0 = x0, s1 = x1;
  }
  AttentionInputs in;
  in.q = {1.0};
  in.k = {s0, s1};
  in.v = {-1.0, 1.0};
  RunOptions o;
  o.recipe = Recipe::fp32;
  o.tile_n = 1;
  BudgetTerms t;
  t.exponent = false;
  t.rescale = false;
  t.scores = false;
  expect_needed("exponent (with scores and rescale)", run_without(p, in, o, t));
}

// Underflow of P: fp16 P below half the smallest subnormal rounds to 0; e4m3 P (times 2^8) likewise.
class Underflow : public ::testing::TestWithParam<Recipe> {};
TEST_P(Underflow, IsNeeded) {
  const Recipe r = GetParam();
  Problem p = row_problem(4096, 1, 1.0);
  AttentionInputs in;
  in.q = {1.0};
  const double gap = r == Recipe::fp16 ? -18.0 : -13.0;  // P = e^-18 < 2^-25, or 256 e^-13 < 2^-10
  in.k.assign(p.n_k, gap);
  in.k[0] = 0.0;
  in.v.assign(p.n_k, 1.0);
  in.v[0] = 0.0;
  RunOptions o;
  o.recipe = r;
  BudgetTerms t;
  t.underflow = false;
  const Outcome res = run_without(p, in, o, t);
  expect_needed("underflow", res);
  EXPECT_GT(res.full.max_ratio, 0.25);
}
INSTANTIATE_TEST_SUITE_P(SmallP, Underflow, ::testing::Values(Recipe::fp16, Recipe::fp8_e4m3),
                         [](const auto& i) { return std::string(recipe_spec(i.param).name); });

// tf32 operand rounding: every V just above 1 rounds down to 1 as a tf32 operand.
TEST(Terms, OperandRoundingIsNeededTf32) {
  Problem p = row_problem(64, 4, 0.5);
  AttentionInputs in;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g;
  for (int x = 0; x < 4; ++x) in.q.push_back(double(float(g(rng))));
  for (int x = 0; x < 64 * 4; ++x) in.k.push_back(double(float(g(rng))));
  in.v.assign(64, 1.0 + 0.45 * std::ldexp(1.0, -10));
  RunOptions o;
  o.recipe = Recipe::tf32;
  BudgetTerms t;
  t.operand_rounding = false;
  expect_needed("operand_rounding", run_without(p, in, o, t));
}

// Tightness: on aligned-rounding inputs the worst error is a large fraction of the bound.
class Tightness : public ::testing::TestWithParam<Recipe> {};
TEST_P(Tightness, AlignedRoundingReachesAQuarterOfTheBound) {
  const Recipe r = GetParam();
  double worst = 0;
  for (int d : {1, 16, 64})
    for (uint64_t seed : {1, 2}) {
      Problem p;
      p.n_q = 2;
      p.n_k = 1024;
      p.d = d;
      p.dv = 8;
      RunOptions o;
      o.recipe = r;
      const Outcome res = run_without(p, adversarial::aligned_rounding(p, r, seed), o, BudgetTerms{});
      EXPECT_EQ(res.full.violations, 0u);
      worst = std::max(worst, res.full.max_ratio);
    }
  std::cout << recipe_spec(r).name << ": worst err/B on aligned-rounding inputs " << worst << "\n";
  EXPECT_GE(worst, 0.25);
}
INSTANTIATE_TEST_SUITE_P(LowPrecision, Tightness,
                         ::testing::Values(Recipe::tf32, Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2),
                         [](const auto& i) { return std::string(recipe_spec(i.param).name); });

// BudgetTerms::per_key_eta = false gives every key the weight interval of its row's eta bound, which
// contains the key's own (§3.6): on every recipe each element's bound, probabilistic bound and LSE bound may
// only grow, and none is exceeded. budget_report's section 4 measures by how much they grow.
class RowEtaInterval : public ::testing::TestWithParam<Recipe> {};
TEST_P(RowEtaInterval, ContainsEveryKeysInterval) {
  const Recipe r = GetParam();
  BudgetTerms row_form;
  row_form.per_key_eta = false;
  for (int inputs = 0; inputs < 3; ++inputs) {
    Problem p;
    p.n_q = 16;
    p.n_k = 700;
    p.d = 32;
    p.dv = 8;
    RunOptions o;
    o.recipe = r;
    AttentionInputs in;
    if (inputs < 2) {
      in = adversarial::aligned_rounding(p, r, uint64_t(inputs + 1));
    } else {  // N(0, 2^2) scores' worth of spread, so that the keys' eta differ
      std::mt19937_64 rng(5);
      std::normal_distribution<double> g;
      const Format f = recipe_spec(r).input;
      auto fill = [&](std::vector<double>& t, size_t n, double sd) {
        t.resize(n);
        for (double& x : t) x = round_to(f, sd * g(rng), Overflow::saturate);
      };
      fill(in.q, p.q_size(), 1.5);
      fill(in.k, p.k_size(), 1.5);
      fill(in.v, p.v_size(), 1.0);
    }
    EmulatedKernel k;
    const SubjectOutput out = k.run(p, in, o);
    const Float64Attention ref = exact_attention_f64(p, in);
    const int bc = k.effective_tile(p, o).n;
    const ErrorBudget a = error_budget(p, in, o, bc, ref), b = error_budget(p, in, o, bc, ref, row_form);
    double grown = 1;
    for (size_t x = 0; x < a.o_bound.size(); ++x) {
      ASSERT_GE(b.o_bound[x], a.o_bound[x]) << "element " << x << ", inputs " << inputs;
      ASSERT_GE(b.o_bound_probabilistic[x], a.o_bound_probabilistic[x]) << "element " << x << ", inputs " << inputs;
      grown = std::max(grown, b.o_bound[x] / a.o_bound[x]);
    }
    for (size_t x = 0; x < a.lse_bound.size(); ++x) ASSERT_GE(b.lse_bound[x], a.lse_bound[x]) << "row " << x;
    EXPECT_EQ(check_against_budget(p, out.o, out.lse, ref, b, recipe_spec(r).output).violations, 0u);
    std::cout << recipe_spec(r).name << ", inputs " << inputs << ": the row's eta bound grows a bound by up to "
              << grown << "x\n";
  }
}
INSTANTIATE_TEST_SUITE_P(EveryRecipe, RowEtaInterval, ::testing::ValuesIn(all_recipes),
                         [](const auto& i) { return std::string(recipe_spec(i.param).name); });

}  // namespace
}  // namespace fc
