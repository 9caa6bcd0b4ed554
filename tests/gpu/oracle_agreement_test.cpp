// The CPU reference judges the GPU oracle (reference/gpu_oracle.h). On random small problems of every
// recipe, mask, GQA ratio, key length, dense mask and run option, with hostile values (NaN in Q, K or V,
// subnormals, zeros in V), and on budgets with open choices (l convention, accumulation, step width, splits):
//   - the GPU's O and LSE agree with the CPU float64 reference within the sum of their certified bounds,
//     and with the MPFR reference within the GPU's own bound, NaN exactly where the CPU has NaN;
//   - the GPU's budget (bounds, and the scale A that each takes from its reference) agrees to 1e-9
//     relative with the CPU's budget computed on the GPU's reference: the same terms
//     (reference/budget_terms.h, budget_sums.h) over the same rows. On its own reference the CPU's budget
//     can differ by more: the per-(key, column) sums centre at O rounded to fp32 (docs/error-analysis.md
//     §3.17), and where the two references' O lie on either side of an fp32 rounding boundary the
//     centred sums move by up to two fp32 ulps of O per unit weight (a case of this test did);
//   - the GPU's verdict on the emulation's output has the CPU's counts and maxima;
//   - the float64 tensor cores sum as the fma chains the score kernel and the tiled reference count on.
// Every judgement runs on a poisoned score cache and budget workspace (kPoisoned below). Skipped, visibly,
// where no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/check_pipeline.h"
#include "properties/oracle.h"
#include "reference/cuda/oracle_types.h"
#include "reference/exact_attention_mp.h"
#include "reference/gpu_oracle.h"
#include "tests/budget/budget_support.h"

namespace fc {
namespace {

// Every judgement of this file runs on a poisoned score cache and budget workspace (0x7f bytes at
// allocation, reference/cuda/gpu_oracle.cpp): a kernel that reads what no kernel wrote then fails a
// comparison instead of reading what an earlier judgement left there. Set before any test runs, unless the
// environment already says (compute-sanitizer's initcheck runs it with 0: an unwritten read is then
// uninitialised, which it reports).
const bool kPoisoned = setenv("FLASHCHECK_ORACLE_POISON", "1", 0) == 0;

// |a - b| <= tol, NaN only with NaN, infinities only with the same infinity.
bool agree(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol;
}

bool same_bound(double gpu, double cpu) {
  if (std::isinf(gpu) || std::isinf(cpu)) return gpu == cpu;
  return std::fabs(gpu - cpu) <= 1e-9 * std::fabs(cpu) + 1e-300;
}

void hostile(std::mt19937_64& rng, const Problem& p, AttentionInputs& in, const RunOptions& o) {
  std::uniform_real_distribution<double> u(0, 1);
  auto pick = [&](std::vector<double>& t) -> double& { return t[std::uniform_int_distribution<size_t>(0, t.size() - 1)(rng)]; };
  const double roll = u(rng);
  if (roll < 0.08) pick(in.v) = NAN;
  else if (roll < 0.12) pick(in.q) = NAN;
  else if (roll < 0.15) pick(in.k) = NAN;
  else if (roll < 0.25) {  // subnormal operands of the input format
    const Format f = recipe_spec(o.recipe).input;
    const double descale = o.recipe == Recipe::fp8_e4m3 || o.recipe == Recipe::fp8_e5m2 ? o.k_descale : 1.0;
    for (int x = 0; x < 4; ++x) pick(in.k) = spec(f).min_subnormal() * (1 + x) * descale;
  } else if (roll < 0.40) {  // zeros in V: columns count different keys and blocks (the budget's §3.9)
    const int zeros = std::uniform_int_distribution<int>(1, 1 + int(in.v.size() / 4))(rng);
    for (int x = 0; x < zeros; ++x) pick(in.v) = 0.0;
  }
  (void)p;
}

// Whether two arrays hold the same values element for element (NaN where the other has NaN); otherwise the
// first difference.
::testing::AssertionResult same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
  for (size_t x = 0; x < a.size(); ++x)
    if (!(a[x] == b[x] || (std::isnan(a[x]) && std::isnan(b[x]))))
      return ::testing::AssertionFailure() << "[" << x << "] " << a[x] << " and " << b[x];
  return ::testing::AssertionSuccess();
}

// A random case of the recipe (head and value dim `dims` where it is above 0), its inputs made hostile, and
// the emulation's output on them.
struct EmulatedCase {
  budget_test::Case c;
  RunOptions o;
  AttentionInputs in;
  SubjectOutput out;
};
EmulatedCase emulated_case(Recipe r, std::mt19937_64& rng, int dims = 0) {
  EmulatedCase e;
  e.c = budget_test::random_case(r, rng, 96, 2e5);
  if (dims > 0) e.c.problem.d = e.c.problem.dv = dims;
  e.o = e.c.options;
  e.in = make_inputs(e.c.problem, e.c.distribution, r, e.c.seed, &e.o);
  hostile(rng, e.c.problem, e.in, e.o);
  e.out = EmulatedKernel{}.run(e.c.problem, e.in, e.o);
  return e;
}

// The emulation's output on (p, in, o), judged by the GPU oracle for the plan it reports (8 worst kept).
struct EmulationJudged {
  SubjectOutput out;
  gpu::Arrays arrays;
  gpu::Verdict verdict;
};
EmulationJudged judge_emulation(const Problem& p, const AttentionInputs& in, const RunOptions& o) {
  EmulatedKernel emu;
  EmulationJudged j;
  j.out = emu.run(p, in, o);
  const BudgetBasis basis = budget_basis(emu.capabilities(), o, j.out.plan);
  const gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
  j.verdict = gpu::judge_host_data(p, req, in, j.out.o, j.out.lse, 8, &j.arrays);
  return j;
}

TEST(OracleAgreement, GpuReferenceBudgetAndVerdictAgreeWithTheCpu) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261201);
  // FC_ORACLE_AGREEMENT_CASES: fewer cases for a run under compute-sanitizer (the same sequence, a prefix).
  const char* env_cases = std::getenv("FC_ORACLE_AGREEMENT_CASES");
  const int cases = env_cases ? std::max(1, std::atoi(env_cases)) : 1200;
  size_t o_checked = 0, mp_checked = 0, bounds_checked = 0;
  for (int n = 0; n < cases; ++n) {
    const Recipe r = all_recipes[size_t(n) % all_recipes.size()];
    const EmulatedCase e = emulated_case(r, rng);
    const budget_test::Case& c = e.c;
    const Problem& p = c.problem;
    const AttentionInputs& in = e.in;
    const SubjectOutput& out = e.out;
    EmulatedKernel emu;
    // A quarter of the cases budget as for a subject that reports nothing (every open choice).
    const RunPlan plan = n % 4 == 3 ? RunPlan{} : out.plan;
    const BudgetBasis basis = budget_basis(emu.capabilities(), e.o, plan);
    const Float64Attention ref = exact_attention_f64(p, in);
    const ErrorBudget budget = budget_for(p, in, basis, ref);
    const BudgetVerdict cpu = check_against_budget(p, out.o, out.lse, ref, budget, recipe_spec(r).output);

    gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    gpu::Arrays g;
    const gpu::Verdict gv = gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &g);
    const std::string what = c.describe() + " basis " + basis.describe();
    // The CPU's budget on the GPU's reference: what the GPU's budget must equal.
    const ErrorBudget on_gpu_ref = budget_for(p, in, basis, g.ref);

    for (size_t x = 0; x < p.o_size(); ++x) {
      ASSERT_TRUE(agree(g.ref.out.o[x], ref.out.o[x], g.ref.o_error_bound[x] + ref.o_error_bound[x]))
          << what << " O[" << x << "] gpu " << g.ref.out.o[x] << " cpu " << ref.out.o[x];
      ASSERT_TRUE(same_bound(g.budget.o_bound[x], on_gpu_ref.o_bound[x]))
          << what << " bound O[" << x << "] gpu " << g.budget.o_bound[x] << " cpu " << on_gpu_ref.o_bound[x];
      ASSERT_TRUE(same_bound(g.budget.o_bound_probabilistic[x], on_gpu_ref.o_bound_probabilistic[x]))
          << what << " " << x;
      ASSERT_TRUE(same_bound(g.budget.scale_a[x], budget.scale_a[x])) << what << " A[" << x << "]";
      ++o_checked, ++bounds_checked;
    }
    for (size_t x = 0; x < p.lse_size(); ++x) {
      ASSERT_TRUE(agree(g.ref.out.lse[x], ref.out.lse[x], g.ref.lse_error_bound[x] + ref.lse_error_bound[x]))
          << what << " LSE[" << x << "] gpu " << g.ref.out.lse[x] << " cpu " << ref.out.lse[x];
      ASSERT_TRUE(same_bound(g.budget.lse_bound[x], on_gpu_ref.lse_bound[x]))
          << what << " LSE bound[" << x << "] gpu " << g.budget.lse_bound[x] << " cpu " << on_gpu_ref.lse_bound[x];
    }
    // The MPFR yardstick on the smaller problems: the GPU's certificate holds.
    if (p.o_size() * size_t(p.n_k) <= 20000) {
      const AttentionOutputs<mp_real> mp = exact_attention_mp(p, in);
      for (size_t x = 0; x < p.o_size(); ++x) {
        const double exact = static_cast<double>(mp.o[x]);
        ASSERT_TRUE(agree(g.ref.out.o[x], exact, g.ref.o_error_bound[x] * (1 + 1e-12) + 1e-300))
            << what << " O[" << x << "] gpu " << g.ref.out.o[x] << " MPFR " << exact << " bound " << g.ref.o_error_bound[x];
        ++mp_checked;
      }
    }
    // The verdicts. Each side measures errors from its own reference, and the two references differ by
    // up to the sum of their certified bounds: an error/bound moves by at most that sum over the bound.
    double ref_slack = 0, lse_slack = 0;
    for (size_t x = 0; x < p.o_size(); ++x)
      if (budget.o_bound[x] > 0 && std::isfinite(budget.o_bound[x]))
        ref_slack = std::max(ref_slack, (g.ref.o_error_bound[x] + ref.o_error_bound[x]) / budget.o_bound[x]);
    for (size_t x = 0; x < p.lse_size(); ++x)
      if (budget.lse_bound[x] > 0 && std::isfinite(budget.lse_bound[x]))
        lse_slack = std::max(lse_slack, (g.ref.lse_error_bound[x] + ref.lse_error_bound[x]) / budget.lse_bound[x]);
    EXPECT_EQ(gv.verdict.elements, cpu.elements) << what;
    EXPECT_EQ(gv.verdict.violations, cpu.violations) << what;
    EXPECT_EQ(gv.verdict.nan_mismatches, cpu.nan_mismatches) << what;
    EXPECT_EQ(gv.verdict.lse_checked, cpu.lse_checked) << what;
    EXPECT_NEAR(gv.verdict.max_ratio, cpu.max_ratio, 1e-6 * cpu.max_ratio + ref_slack + 1e-12) << what;
    EXPECT_NEAR(gv.verdict.max_lse_ratio, cpu.max_lse_ratio, 1e-6 * cpu.max_lse_ratio + lse_slack + 1e-12) << what;
    if (!cpu.worst.empty() && !gv.verdict.worst.empty() && std::isfinite(cpu.max_ratio) && cpu.worst.front().bound > 0) {
      EXPECT_NEAR(gv.verdict.worst.front().error / gv.verdict.worst.front().bound,
                  cpu.worst.front().error / cpu.worst.front().bound, 1e-6 + ref_slack + lse_slack) << what;
    }
    if (HasFailure()) return;
  }
  std::cout << cases << " problems: " << o_checked << " O elements and " << bounds_checked
            << " bounds against the CPU, " << mp_checked << " against MPFR\n";
}

// Passes: the same problems judged in passes of 8 rows give the same arrays, bit for bit (each row is
// computed alone), and the same verdict. The score cache neither, nor who fills it: without it (the kernels
// then recompute the scores in their later sweeps), and with the kernels' first sweeps filling it instead
// of the score kernel (FLASHCHECK_ORACLE_SCORE_KERNEL=0), the arrays are the same bits too. So is the
// budget in one kernel (FLASHCHECK_ORACLE_SPLIT_BYTES=0) and in two (the default), also with the
// weights' room for one block of rows at a time, so that a pass takes many launches.
TEST(OracleAgreement, PassesDoNotChangeTheResult) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261202);
  for (int n = 0; n < 60; ++n) {
    const Recipe r = all_recipes[size_t(n) % all_recipes.size()];
    budget_test::Case c = budget_test::random_case(r, rng, 96, 2e5);
    RunOptions o = c.options;
    AttentionInputs in = make_inputs(c.problem, c.distribution, r, c.seed, &o);
    const Problem& p = c.problem;
    EmulatedKernel emu;
    const SubjectOutput out = emu.run(p, in, o);
    const BudgetBasis basis = budget_basis(emu.capabilities(), o, out.plan);
    gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    gpu::Arrays one, many, uncached, swept, fused, narrow;
    const gpu::Verdict v1 = gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &one);
    ASSERT_EQ(setenv("FLASHCHECK_ORACLE_PASS_BYTES", "1", 1), 0);
    const gpu::Verdict vn = gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &many);
    unsetenv("FLASHCHECK_ORACLE_PASS_BYTES");
    ASSERT_EQ(setenv("FLASHCHECK_ORACLE_CACHE_BYTES", "0", 1), 0);
    const gpu::Verdict vu = gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &uncached);
    unsetenv("FLASHCHECK_ORACLE_CACHE_BYTES");
    ASSERT_EQ(setenv("FLASHCHECK_ORACLE_SCORE_KERNEL", "0", 1), 0);
    gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &swept);
    unsetenv("FLASHCHECK_ORACLE_SCORE_KERNEL");
    ASSERT_EQ(setenv("FLASHCHECK_ORACLE_SPLIT_BYTES", "0", 1), 0);
    gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &fused);
    unsetenv("FLASHCHECK_ORACLE_SPLIT_BYTES");
    // V as doubles, and the workspace of one block of rows (reference/cuda/oracle_types.h BudgetWeights).
    const size_t block_bytes = size_t(p.batch) * p.heads_kv * size_t(p.n_k) * p.dv * sizeof(double) +
                               size_t(gpu::detail::budget_split_rows_per_block(p.d, p.dv)) *
                                   gpu::detail::budget_split_bytes_per_row(p.n_k);
    ASSERT_EQ(setenv("FLASHCHECK_ORACLE_SPLIT_BYTES", std::to_string(block_bytes).c_str(), 1), 0);
    gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &narrow);
    unsetenv("FLASHCHECK_ORACLE_SPLIT_BYTES");
    const std::string what = c.describe();
    auto same = [&](const std::vector<double>& a, const std::vector<double>& b, const char* name) {
      ASSERT_TRUE(same_bits(a, b)) << what << " " << name;
    };
    same(one.ref.out.o, many.ref.out.o, "O");
    same(one.ref.out.lse, many.ref.out.lse, "LSE");
    same(one.budget.o_bound, many.budget.o_bound, "bound");
    same(one.budget.lse_bound, many.budget.lse_bound, "LSE bound");
    same(one.ref.out.o, uncached.ref.out.o, "O without the score cache");
    same(one.ref.o_error_bound, uncached.ref.o_error_bound, "O's certificate without the score cache");
    same(one.ref.out.lse, uncached.ref.out.lse, "LSE without the score cache");
    same(one.budget.o_bound, uncached.budget.o_bound, "bound without the score cache");
    same(one.budget.o_bound_probabilistic, uncached.budget.o_bound_probabilistic,
         "probabilistic bound without the score cache");
    same(one.budget.scale_a, uncached.budget.scale_a, "A without the score cache");
    same(one.budget.lse_bound, uncached.budget.lse_bound, "LSE bound without the score cache");
    same(one.ref.out.o, swept.ref.out.o, "O, the cache filled by the kernels' sweeps");
    same(one.ref.o_error_bound, swept.ref.o_error_bound, "O's certificate, the cache filled by the kernels' sweeps");
    same(one.budget.o_bound, swept.budget.o_bound, "bound, the cache filled by the kernels' sweeps");
    same(one.budget.o_bound_probabilistic, swept.budget.o_bound_probabilistic,
         "probabilistic bound, the cache filled by the kernels' sweeps");
    same(one.budget.lse_bound, swept.budget.lse_bound, "LSE bound, the cache filled by the kernels' sweeps");
    for (const auto& [other, how] : {std::pair{&fused, "the budget in one kernel"},
                                     std::pair{&narrow, "the weights of one block of rows a launch"}}) {
      same(one.budget.o_bound, other->budget.o_bound, (std::string("bound, ") + how).c_str());
      same(one.budget.o_bound_probabilistic, other->budget.o_bound_probabilistic,
           (std::string("probabilistic bound, ") + how).c_str());
      same(one.budget.scale_a, other->budget.scale_a, (std::string("A, ") + how).c_str());
      same(one.budget.lse_bound, other->budget.lse_bound, (std::string("LSE bound, ") + how).c_str());
      same(one.budget.lse_bound_probabilistic, other->budget.lse_bound_probabilistic,
           (std::string("probabilistic LSE bound, ") + how).c_str());
    }
    EXPECT_EQ(v1.verdict.max_ratio, vu.verdict.max_ratio) << what;
    EXPECT_EQ(v1.verdict.elements, vn.verdict.elements) << what;
    EXPECT_EQ(v1.verdict.violations, vn.verdict.violations) << what;
    EXPECT_EQ(v1.verdict.max_ratio, vn.verdict.max_ratio) << what;
    EXPECT_EQ(v1.ratio_histogram, vn.ratio_histogram) << what;
    ASSERT_EQ(v1.verdict.worst.size(), vn.verdict.worst.size()) << what;
    for (size_t x = 0; x < v1.verdict.worst.size(); ++x) EXPECT_EQ(v1.verdict.worst[x].index, vn.verdict.worst[x].index) << what;
    if (HasFailure()) return;
  }
}

// The sums kernel takes two or four columns a lane by the value dim (reference/cuda/budget_sums_kernel.cuh
// sums_cols), in groups of 64 or 128 columns: on each side of that choice, with a last group narrower than
// the rest (160), with the hostile values of the agreement test (zeros in V take the per-key counts, NaN
// and infinities) and with the random cases' masks (chunks a row sees in part), its bounds are the single
// kernel's, bit for bit, under every convention the cases draw.
TEST(OracleAgreement, SumsKernelsColumnsALaneKeepTheSingleKernelsBits) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261204);
  const int dims[] = {48, 64, 96, 128, 160, 256};
  size_t compared = 0;
  for (int n = 0; n < 36; ++n) {
    const EmulatedCase e = emulated_case(all_recipes[size_t(n) % all_recipes.size()], rng, dims[n % 6]);
    const budget_test::Case& c = e.c;
    const Problem& p = c.problem;
    const AttentionInputs& in = e.in;
    const SubjectOutput& out = e.out;
    const BudgetBasis basis = budget_basis(EmulatedKernel{}.capabilities(), e.o, out.plan);
    gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    gpu::Arrays split, single;
    gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &split);
    ASSERT_EQ(setenv("FLASHCHECK_ORACLE_SPLIT_BYTES", "0", 1), 0);
    gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &single);
    unsetenv("FLASHCHECK_ORACLE_SPLIT_BYTES");
    const std::string what = c.describe() + " basis " + basis.describe();
    auto same = [&](const std::vector<double>& a, const std::vector<double>& b, const char* name) {
      ASSERT_TRUE(same_bits(a, b)) << what << " " << name;
      compared += a.size();
    };
    same(split.budget.o_bound, single.budget.o_bound, "bound");
    same(split.budget.o_bound_probabilistic, single.budget.o_bound_probabilistic, "probabilistic bound");
    if (HasFailure()) return;
  }
  std::printf("36 problems, value dims 48-256: %zu bounds the same bits in one kernel and in two\n", compared);
}

// The row form (BudgetRequest::per_key_eta = false; docs/error-analysis.md §3.6): the GPU's weights kernel
// takes the row's eta bound before any key's weight and its sums kernel one weight a key; its bounds agree
// with the CPU's row form (BudgetTerms::per_key_eta = false) on the GPU's reference to 1e-9, on every recipe
// (those the row form leaves out keep the per-key form on both sides), value dims on each side of the sums
// kernel's two and four columns a lane, and the hostile values; and a budget with no split workspace is refused
// by name. How many bounds fall below the per-key form's is printed, not asserted: where the row's eta bound is
// about each key's own (equal scores), the per-key form's weights, each rounded up to fp32, carry more rounding
// slack than the row form's one weight a key (up to 5e-7 relative on the CPU's budgets of these problems, and a
// few percent on bounds of 1e-44, where each per-key weight's floor is fp32's smallest subnormal). Both are
// certified upper bounds of the same exact sums (budget_sums_test); the row form's soundness rests on its eta
// bound (RowEtaBound.AtLeastEveryKeysEta), not on this order.
TEST(OracleAgreement, RowFormAgreesWithTheCpu) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261205);
  const int dims[] = {48, 64, 128, 160};
  BudgetTerms row;
  row.per_key_eta = false;
  size_t compared = 0, below_per_key = 0;
  const char* env_cases = std::getenv("FC_ORACLE_AGREEMENT_CASES");  // a prefix under compute-sanitizer
  const int cases = env_cases ? std::clamp(std::atoi(env_cases), 1, 96) : 96;
  for (int n = 0; n < cases; ++n) {
    const EmulatedCase e = emulated_case(all_recipes[size_t(n) % all_recipes.size()], rng, dims[n % 4]);
    const Problem& p = e.c.problem;
    const RunPlan plan = n % 4 == 3 ? RunPlan{} : e.out.plan;
    const BudgetBasis basis = budget_basis(EmulatedKernel{}.capabilities(), e.o, plan);
    gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    req.per_key_eta = false;
    gpu::Arrays g, per_key;
    gpu::judge_host_data(p, req, e.in, e.out.o, e.out.lse, 8, &g);
    req.per_key_eta = true;
    gpu::judge_host_data(p, req, e.in, e.out.o, e.out.lse, 8, &per_key);
    const ErrorBudget cpu = budget_for(p, e.in, basis, g.ref, row);
    const std::string what = e.c.describe() + " basis " + basis.describe();
    for (size_t x = 0; x < p.o_size(); ++x) {
      ASSERT_TRUE(same_bound(g.budget.o_bound[x], cpu.o_bound[x]))
          << what << " bound O[" << x << "] gpu " << g.budget.o_bound[x] << " cpu " << cpu.o_bound[x];
      ASSERT_TRUE(same_bound(g.budget.o_bound_probabilistic[x], cpu.o_bound_probabilistic[x])) << what << " " << x;
      below_per_key += g.budget.o_bound[x] < per_key.budget.o_bound[x];
      ++compared;
    }
    for (size_t x = 0; x < p.lse_size(); ++x)
      ASSERT_TRUE(same_bound(g.budget.lse_bound[x], cpu.lse_bound[x])) << what << " LSE bound[" << x << "]";
  }
  // No split workspace: refused, not computed in another form.
  const EmulatedCase e = emulated_case(Recipe::bf16, rng, 64);
  const BudgetBasis basis = budget_basis(EmulatedKernel{}.capabilities(), e.o, e.out.plan);
  gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
  req.per_key_eta = false;
  ASSERT_EQ(setenv("FLASHCHECK_ORACLE_SPLIT_BYTES", "0", 1), 0);
  try {
    gpu::judge_host_data(e.c.problem, req, e.in, e.out.o, e.out.lse);
    ADD_FAILURE() << "the row form without the split workspace was not refused";
  } catch (const std::runtime_error& err) {
    EXPECT_NE(std::string(err.what()).find("row form"), std::string::npos) << err.what();
  }
  unsetenv("FLASHCHECK_ORACLE_SPLIT_BYTES");
  std::printf("%d problems: %zu bounds of the row form agree with the CPU's (%zu below the per-key form's)\n", cases,
              compared, below_per_key);
}

// The knot form (BudgetRequest::knot_sums; docs/error-analysis.md §3.18): the CPU runs the products' chains as
// §3.2's model executes them (budget_knot_walk.h KnotChain), which reproduces the fp16 tensor cores bit for bit,
// so the GPU's bounds agree with the CPU's to 1e-9 like the row form's, whether from the knots or the chains.
// Where they do not, the hardware's chains differ from the model's: the test says so, and still requires the
// GPU's bound within the chains' factor of the CPU's where the CPU took the knots (both sound). The random
// problems of RowFormAgreesWithTheCpu have short rows, which the knots rarely certify; three of long rows of
// flat attention (bf16, fp16, e4m3 at 64 x 4,096, d 64 and 128) are where they do, so their CPU budgets must take
// the knots for most elements.
TEST(OracleAgreement, KnotFormAgreesWithTheCpu) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261206);
  BudgetTerms knots;
  knots.per_key_eta = false;
  knots.knot_sums = true;
  size_t compared = 0, from_knots = 0, apart = 0;
  const char* env_cases = std::getenv("FC_ORACLE_AGREEMENT_CASES");  // a prefix under compute-sanitizer
  const int cases = env_cases ? std::clamp(std::atoi(env_cases), 1, 48) : 48;
  // knot_here: how many of the problem's elements the CPU took from the knots (ASSERT returns from the lambda).
  auto compare = [&](const Problem& p, const RunOptions& o, const AttentionInputs& in, const SubjectOutput& out,
                     const std::string& what, size_t& knot_here) {
    const BudgetBasis basis = budget_basis(EmulatedKernel{}.capabilities(), o, out.plan);
    gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    req.per_key_eta = false;
    req.knot_sums = true;
    gpu::Arrays g;
    gpu::judge_host_data(p, req, in, out.o, out.lse, 8, &g);
    const ErrorBudget cpu = budget_for(p, in, basis, g.ref, knots);
    knot_here = 0;
    for (size_t x = 0; x < p.o_size(); ++x) {
      const double a = g.budget.o_bound[x], b = cpu.o_bound[x];
      ++compared;
      knot_here += !cpu.from_knots.empty() && cpu.from_knots[x];
      if (same_bound(a, b) && same_bound(g.budget.o_bound_probabilistic[x], cpu.o_bound_probabilistic[x])) continue;
      ++apart;
      ASSERT_TRUE(std::isfinite(a) && std::isfinite(b)) << what << " O[" << x << "] gpu " << a << " cpu " << b;
      ASSERT_TRUE(!cpu.from_knots.empty() && cpu.from_knots[x] && a <= b * budget::knot_chain_up() &&
                  a >= b / budget::knot_chain_up())
          << what << " O[" << x << "] gpu " << a << " cpu " << b;
    }
    for (size_t x = 0; x < p.lse_size(); ++x)
      ASSERT_TRUE(same_bound(g.budget.lse_bound[x], cpu.lse_bound[x])) << what << " LSE bound[" << x << "]";
    from_knots += knot_here;
  };
  for (int n = 0; n < cases; ++n) {
    const EmulatedCase e = emulated_case(all_recipes[size_t(n) % all_recipes.size()], rng, n % 2 ? 128 : 64);
    size_t k = 0;
    compare(e.c.problem, e.o, e.in, e.out, e.c.describe(), k);
    if (HasFatalFailure()) return;
  }
  for (const auto& [r, d] :
       {std::pair{Recipe::bf16, 64}, std::pair{Recipe::fp16, 128}, std::pair{Recipe::fp8_e4m3, 64}}) {
    Problem p;
    p.n_q = 64;
    p.n_k = 4096;
    p.d = p.dv = d;
    RunOptions o;
    o.recipe = r;
    const AttentionInputs in = make_inputs(p, Distribution::normal, r, 11, &o);
    const SubjectOutput out = EmulatedKernel{}.run(p, in, o);
    size_t k = 0;
    compare(p, o, in, out, std::string(recipe_spec(r).name) + " 64 x 4096", k);
    if (HasFatalFailure()) return;
    EXPECT_GT(k, p.o_size() / 2) << recipe_spec(r).name;
  }
  EXPECT_EQ(apart, 0u) << "elements whose bound is not the CPU's: the tensor cores' chains differ from the model's";
  std::printf("%zu bounds of the knot form compared (%zu from the CPU's knots), %zu not the CPU's\n", compared,
              from_knots, apart);
}

// The score kernel and the tiled reference give the row kernels' bits because each element of the tensor
// cores' float64 product is the fma chain over its four products in ascending order (reference/cuda/dmma.cuh);
// PassesDoNotChangeTheResult compares their results, this checks the instruction itself on operands of every
// exponent range, subnormal ones and cancellation. The control: the chain in descending order differs.
TEST(OracleAgreement, TensorCoresSumAsFmaChains) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  const int64_t tests = int64_t(1) << 18;  // 33.5 M elements
  EXPECT_EQ(gpu::detail::dmma_chain_mismatches(20261203, tests, false), 0);
  EXPECT_GT(gpu::detail::dmma_chain_mismatches(20261203, tests, true), 0);
}

// The budgets read the reference's fill of the score cache only where the tensor cores' alignment changes no
// value of Q or K (reference/cuda/gpu_oracle.cpp): with subnormal keys the budget must fill its own, whose
// R raises them to the format's minimum normal. Its bounds then equal, bit for bit, those of the kernels'
// own first sweeps (FLASHCHECK_ORACLE_SCORE_KERNEL=0), which always align; reading the reference's |k|
// instead changes R, and with it the bounds, of every row that sees such a key.
TEST(OracleAgreement, SubnormalInputsKeepTheBudgetsOwnScores) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261203);
  int aligned_cases = 0;
  for (int n = 0; n < 24; ++n) {
    const Recipe r = n % 2 ? Recipe::bf16 : Recipe::fp16;
    budget_test::Case c = budget_test::random_case(r, rng, 96, 2e5);
    RunOptions o = c.options;
    AttentionInputs in = make_inputs(c.problem, c.distribution, r, c.seed, &o);
    const double sub = spec(recipe_spec(r).input).min_subnormal();
    for (size_t x = 0; x < in.k.size(); x += 7) in.k[x] = sub * double(1 + x % 5) * (x % 2 ? 1 : -1);
    const Problem& p = c.problem;
    EmulatedKernel emu;
    const SubjectOutput out = emu.run(p, in, o);
    const BudgetBasis basis = budget_basis(emu.capabilities(), o, out.plan);
    gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    aligned_cases += basis.options.accumulation == Accumulation::tensor_core || basis.both_accumulations;
    gpu::Arrays filled, swept;
    gpu::judge_host_data(p, req, in, out.o, out.lse, 0, &filled);
    ASSERT_EQ(setenv("FLASHCHECK_ORACLE_SCORE_KERNEL", "0", 1), 0);
    gpu::judge_host_data(p, req, in, out.o, out.lse, 0, &swept);
    unsetenv("FLASHCHECK_ORACLE_SCORE_KERNEL");
    const std::string what = c.describe();
    ASSERT_EQ(filled.budget.o_bound.size(), swept.budget.o_bound.size()) << what;
    for (size_t x = 0; x < filled.budget.o_bound.size(); ++x)
      ASSERT_EQ(filled.budget.o_bound[x], swept.budget.o_bound[x]) << what << " bound[" << x << "]";
    for (size_t x = 0; x < filled.budget.lse_bound.size(); ++x)
      ASSERT_EQ(filled.budget.lse_bound[x], swept.budget.lse_bound[x]) << what << " LSE bound[" << x << "]";
  }
  EXPECT_GT(aligned_cases, 0) << "no case budgeted tensor-core accumulation, whose alignment is the point";
}

// Rows that see no key take no part: O = 0 and LSE = -inf, as on the CPU. A window past the keys gives such
// rows key ranges [lo, lo) that lie beyond the last chunk of the score cache's summaries (the fuzzer found a
// first sweep that read one: Nk = 1, window-top-left 45,64), which the poisoned cache (kPoisoned) shows.
TEST(OracleAgreement, RowsThatSeeNoKeyReadNoSummary) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  ASSERT_TRUE(kPoisoned);
  const std::string before = std::getenv("FLASHCHECK_ORACLE_POISON");
  ASSERT_EQ(setenv("FLASHCHECK_ORACLE_POISON", "1", 1), 0);  // this test's point, whatever the environment says
  for (const int64_t n_k : {1, 40, 100}) {
    Problem p;
    p.batch = 1, p.heads_q = 4, p.heads_kv = 2, p.n_q = 239, p.n_k = n_k, p.d = p.dv = 64;
    p.window = Window{45, 64, Align::top_left};
    RunOptions o;
    o.recipe = Recipe::bf16;
    const AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 7, &o);
    const EmulationJudged j = judge_emulation(p, in, o);
    const gpu::Arrays& g = j.arrays;
    const Float64Attention ref = exact_attention_f64(p, in);
    int empty_rows = 0;
    for (size_t x = 0; x < p.lse_size(); ++x) {
      empty_rows += ref.out.lse[x] == -HUGE_VAL;
      ASSERT_TRUE(agree(g.ref.out.lse[x], ref.out.lse[x], g.ref.lse_error_bound[x] + ref.lse_error_bound[x]))
          << "n_k " << n_k << " LSE[" << x << "] gpu " << g.ref.out.lse[x] << " cpu " << ref.out.lse[x];
    }
    for (size_t x = 0; x < p.o_size(); ++x)
      ASSERT_TRUE(agree(g.ref.out.o[x], ref.out.o[x], g.ref.o_error_bound[x] + ref.o_error_bound[x]))
          << "n_k " << n_k << " O[" << x << "] gpu " << g.ref.out.o[x] << " cpu " << ref.out.o[x];
    EXPECT_GT(empty_rows, 100) << "n_k " << n_k << ": the window leaves most rows without keys";
    EXPECT_EQ(j.verdict.verdict.violations, 0u) << "n_k " << n_k;
  }
  setenv("FLASHCHECK_ORACLE_POISON", before.c_str(), 1);
}

// The worst list when more elements tie at its threshold than the device list holds (65,536): V is zero
// but for one element, of a key that only the last six rows see (causal), so every other element of O is
// exact (error 0: a tie at a threshold of 0) and the elements with an error are at most six. All of them must head the
// worst list, whatever order the ties arrive in.
TEST(OracleAgreement, WorstListKeepsTheWorstAmongManyTies) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  Problem p;
  p.batch = 1, p.heads_q = p.heads_kv = 1, p.n_q = p.n_k = 640, p.d = 32, p.dv = 128;
  p.window = Window::causal(Align::top_left);
  RunOptions o;
  o.recipe = Recipe::bf16;
  AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 5, &o);
  std::fill(in.v.begin(), in.v.end(), 0.0);
  const int64_t key = p.n_k - 6;
  in.v[size_t(key) * p.dv + 5] = 1.25;
  const EmulationJudged j = judge_emulation(p, in, o);
  const SubjectOutput& out = j.out;
  const gpu::Arrays& a = j.arrays;
  const gpu::Verdict& v = j.verdict;
  ASSERT_GT(out.o.size(), size_t(65536));
  std::vector<size_t> with_error;
  for (size_t x = 0; x < out.o.size(); ++x)
    if (out.o[x] != a.ref.out.o[x]) with_error.push_back(x);
  ASSERT_FALSE(with_error.empty());
  ASSERT_LE(with_error.size(), size_t(6));
  EXPECT_EQ(v.verdict.violations, 0u);
  std::vector<size_t> top;
  for (const WorstElement& w : v.verdict.worst)
    if (!w.is_lse && w.error > 0) top.push_back(w.index);
  std::sort(top.begin(), top.end());
  EXPECT_EQ(top, with_error);
}

// The selection between the verdict's passes: the largest thread maximum and the k-th largest (each at
// least 0) as std::nth_element finds them, on arrays with "noted nothing" (-1), zeros, many ties,
// values that share their upper bytes (the radix select's later rounds), k = 1, k = n and k between.
TEST(OracleAgreement, VerdictSelectsTheKthLargestOnTheDevice) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261204);
  double* d_in = nullptr;
  double* d_out = nullptr;
  const int64_t most = 262144;
  ASSERT_EQ(cudaMalloc(&d_in, most * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, 2 * sizeof(double)), cudaSuccess);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t n = trial % 3 == 0 ? most : int64_t(1 + rng() % most);
    std::vector<double> v(static_cast<size_t>(n));
    const double base = std::ldexp(1.0, int(rng() % 40) - 20);
    for (double& x : v) {
      switch (rng() % 6) {
        case 0: x = -1; break;
        case 1: x = 0; break;
        case 2: x = base; break;  // ties
        case 3: x = base * (1 + std::ldexp(double(rng() % 64), -50)); break;  // the same upper bytes
        default: x = std::ldexp(double(rng() % (1u << 20)), int(rng() % 60) - 40); break;
      }
    }
    if (trial % 5 == 4) std::fill(v.begin(), v.end(), -1.0);  // nothing noted in the pass
    for (int64_t k : {int64_t(1), n, int64_t(1 + rng() % n), std::min<int64_t>(n, 8)}) {
      ASSERT_EQ(cudaMemcpy(d_in, v.data(), size_t(n) * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(gpu::detail::launch_kth_largest(d_in, n, k, d_out), cudaSuccess);
      double got[2];
      ASSERT_EQ(cudaMemcpy(got, d_out, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
      std::vector<double> w = v;
      std::nth_element(w.begin(), w.begin() + (k - 1), w.end(), std::greater<double>());
      const double want_kth = std::max(0.0, w[size_t(k - 1)]);
      const double want_max = std::max(0.0, *std::max_element(v.begin(), v.end()));
      EXPECT_EQ(got[0], want_max) << "n " << n << " k " << k;
      EXPECT_EQ(got[1], want_kth) << "n " << n << " k " << k;
      ++checked;
    }
  }
  cudaFree(d_in);
  cudaFree(d_out);
  EXPECT_EQ(checked, 240);
}

// Judgements on several threads at once (the fuzzer and the report judge that way) give what each gives
// alone: problems of different head dims need different shared memory, and no launch may fail or change
// because another thread launched in between.
TEST(OracleAgreement, ConcurrentJudgementsMatchSerialOnes) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  struct Job {
    Problem p;
    gpu::BudgetRequest req;
    AttentionInputs in;
    SubjectOutput out;
    gpu::Verdict serial, concurrent;
    std::string error;
  };
  std::mt19937_64 rng(20261203);
  std::vector<Job> jobs;
  const int dims[] = {32, 64, 96, 128, 256};
  for (int n = 0; n < 40; ++n) {
    const Recipe r = all_recipes[size_t(n) % all_recipes.size()];
    budget_test::Case c = budget_test::random_case(r, rng, 128, 2e5);
    c.problem.d = c.problem.dv = dims[n % 5];
    c.problem.key_lengths.clear();
    RunOptions o = c.options;
    Job j;
    j.p = c.problem;
    j.in = make_inputs(j.p, c.distribution, r, c.seed, &o);
    EmulatedKernel emu;
    j.out = emu.run(j.p, j.in, o);
    const BudgetBasis basis = budget_basis(emu.capabilities(), o, j.out.plan);
    j.req = {basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    j.serial = gpu::judge_host_data(j.p, j.req, j.in, j.out.o, j.out.lse, 8, nullptr);
    jobs.push_back(std::move(j));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&jobs, t] {
      for (size_t x = size_t(t); x < jobs.size(); x += 8) {
        Job& j = jobs[x];
        try {
          j.concurrent = gpu::judge_host_data(j.p, j.req, j.in, j.out.o, j.out.lse, 8, nullptr);
        } catch (const std::exception& e) {
          j.error = e.what();
        }
      }
    });
  for (auto& th : threads) th.join();
  for (const Job& j : jobs) {
    ASSERT_EQ(j.error, "") << j.p.describe();
    EXPECT_EQ(j.serial.verdict.elements, j.concurrent.verdict.elements) << j.p.describe();
    EXPECT_EQ(j.serial.verdict.violations, j.concurrent.verdict.violations) << j.p.describe();
    EXPECT_EQ(j.serial.verdict.max_ratio, j.concurrent.verdict.max_ratio) << j.p.describe();
  }
}

// The pipeline under --oracle gpu: the same verdicts as the CPU's on the same runs, and a case outside the
// GPU oracle's scope (d = 320) judged on the CPU and counted as such.
TEST(OracleAgreement, ThePipelineJudgesOnTheGpuAndFallsBackOutsideItsScope) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  std::mt19937_64 rng(20261203);
  EmulatedKernel emu;
  for (int n = 0; n < 40; ++n) {
    const Recipe r = all_recipes[size_t(n) % all_recipes.size()];
    budget_test::Case c = budget_test::random_case(r, rng, 64, 2e5);
    RunOptions o = c.options;
    const AttentionInputs in = make_inputs(c.problem, c.distribution, r, c.seed, &o);
    const SubjectOutput out = emu.run(c.problem, in, o);
    use_oracle(Oracle::cpu);
    const Judgement cpu = judge_output(c.problem, in, o, emu.capabilities(), out, exact_reference(c.problem, in, o));
    use_oracle(Oracle::gpu);
    const OracleUse before = oracle_use();
    const Judgement gpu = judge_output(c.problem, in, o, emu.capabilities(), out, exact_reference(c.problem, in, o));
    EXPECT_EQ(oracle_use().gpu, before.gpu + 1) << c.describe();
    EXPECT_EQ(gpu.verdict.elements, cpu.verdict.elements) << c.describe();
    EXPECT_EQ(gpu.verdict.violations, cpu.verdict.violations) << c.describe();
    // The pipeline's GPU budget is the CPU's budget on the GPU's reference (which is the same bits on every
    // run: its sums run in a fixed order); on the CPU's own reference it may differ where the two O lie on
    // either side of an fp32 rounding boundary (the first test above).
    gpu::Arrays g;
    const gpu::BudgetRequest req{gpu.basis.options, gpu.basis.tile_n, gpu.basis.both_l_conventions,
                                 gpu.basis.both_accumulations};
    gpu::judge_host_data(c.problem, req, in, out.o, out.lse, 8, &g);
    const ErrorBudget on_gpu_ref = budget_for(c.problem, in, gpu.basis, g.ref);
    ASSERT_EQ(gpu.budget.o_bound.size(), on_gpu_ref.o_bound.size()) << c.describe();
    for (size_t x = 0; x < on_gpu_ref.o_bound.size(); ++x)
      ASSERT_TRUE(same_bound(gpu.budget.o_bound[x], on_gpu_ref.o_bound[x])) << c.describe() << " O[" << x << "]";
  }
  Problem wide;
  wide.n_q = wide.n_k = 4;
  wide.d = wide.dv = 320;
  RunOptions o;
  o.recipe = Recipe::bf16;
  const AttentionInputs in = make_inputs(wide, Distribution::normal, o.recipe, 5, &o);
  const SubjectOutput out = emu.run(wide, in, o);
  const OracleUse before = oracle_use();
  const Judgement j = judge_output(wide, in, o, emu.capabilities(), out, exact_reference(wide, in, o));
  EXPECT_EQ(j.verdict.violations, 0u);
  const OracleUse after = oracle_use();
  EXPECT_EQ(after.cpu_fallback, before.cpu_fallback + 1);
  EXPECT_NE(describe_oracle_use().find("on the CPU: outside the GPU oracle's scope"), std::string::npos)
      << describe_oracle_use();
  use_oracle(Oracle::cpu);
}

// Refusals: a problem whose workspace does not fit is refused with the size it needs, before anything is
// allocated; a dv beyond the oracle's scope is refused by name.
TEST(OracleAgreement, RefusesWhatDoesNotFitWithTheSize) {
  std::string why;
  if (!gpu::oracle_available(&why)) GTEST_SKIP() << "no GPU oracle here (" << why << "): SKIPPED, not passed";
  // Rows go in passes of bounded workspace; the per-key range of |V| (2 B Hkv Nk doubles, 512 GiB here)
  // does not.
  Problem p;
  p.batch = 64, p.heads_q = 64, p.heads_kv = 64, p.n_q = 16, p.n_k = int64_t(1) << 26, p.d = p.dv = 128;
  gpu::BudgetRequest req;
  req.options.recipe = Recipe::bf16;
  try {
    gpu::judge_on_device(p, req, gpu::DeviceTensors{});
    ADD_FAILURE() << "a 512 GiB workspace was not refused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB of device workspace"), std::string::npos) << e.what();
  }
  p = Problem{};
  p.dv = 1000;
  p.d = 8;
  try {
    gpu::judge_on_device(p, req, gpu::DeviceTensors{});
    ADD_FAILURE() << "dv = 1000 was not refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dv = 1000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fc
