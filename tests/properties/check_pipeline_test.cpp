// The check pipeline's budget basis (properties/check_pipeline.h): what a subject reports is what the
// budget is derived for; what it does not report comes from the request where the request binds it,
// and otherwise takes its conservative side. And a budget for an open choice covers each way of making
// it.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/check_pipeline.h"
#include "properties/distributions.h"
#include "properties/oracle.h"
#include "reference/gpu_oracle.h"

namespace fc {
namespace {

Capabilities plain_caps() {
  Capabilities c;
  c.name = "plain";
  c.recipes.assign(all_recipes.begin(), all_recipes.end());
  c.tiles = {{64, 64}, {128, 32}};
  c.split_kv = c.l_from_fp32_p = c.two_level_accum = true;
  return c;
}

RunPlan full_plan() {
  RunPlan r;
  r.tile = {128, 128};
  r.step_n = 64;
  r.num_splits = 3;
  r.l_from_fp32_p = false;
  r.accumulation = Accumulation::tensor_core;
  r.two_level_accum = false;
  return r;
}

TEST(BudgetBasis, AReportedPlanIsWhatTheBudgetAssumes) {
  RunOptions asked;
  asked.recipe = Recipe::bf16;
  const BudgetBasis b = budget_basis(plain_caps(), asked, full_plan());
  EXPECT_EQ(b.tile_n, 64) << "the narrowest step, not the tile";
  EXPECT_EQ(b.options.num_splits, 3);
  EXPECT_FALSE(b.both_l_conventions);
  EXPECT_FALSE(b.options.l_from_fp32_p);
  EXPECT_FALSE(b.both_accumulations);
  EXPECT_EQ(b.options.accumulation, Accumulation::tensor_core);
}

TEST(BudgetBasis, AnUnreportedPlanTakesWhatTheRequestBindsAndElseTheConservativeSide) {
  Capabilities caps = plain_caps();
  RunOptions asked;
  asked.recipe = Recipe::fp16;
  asked.num_splits = 0;  // the subject decides
  BudgetBasis b = budget_basis(caps, asked, RunPlan{});
  EXPECT_EQ(b.tile_n, 0) << "default tile, step not reported: any step width";
  EXPECT_EQ(b.options.num_splits, 0) << "possibly split";
  EXPECT_TRUE(b.both_l_conventions);
  EXPECT_TRUE(b.both_accumulations);

  asked.tile_m = 64, asked.tile_n = 64, asked.num_splits = 2, asked.l_from_fp32_p = true;
  b = budget_basis(caps, asked, RunPlan{});
  EXPECT_EQ(b.tile_n, 64) << "an explicit tile of a subject that steps by its tile";
  EXPECT_EQ(b.options.num_splits, 2);
  EXPECT_FALSE(b.both_l_conventions);
  EXPECT_TRUE(b.options.l_from_fp32_p) << "the flag, accepted, binds";

  caps.subtile_steps = true;
  EXPECT_EQ(budget_basis(caps, asked, RunPlan{}).tile_n, 0) << "it may step in parts of the tile: any step";

  asked = RunOptions{};
  asked.recipe = Recipe::fp8_e4m3;
  RunPlan ran = full_plan();
  ran.two_level_accum.reset();
  EXPECT_EQ(budget_basis(plain_caps(), asked, ran).tile_n, 0)
      << "fp8 that may promote on its own: the any-Bc budget bounds both ways";
  asked.recipe = Recipe::fp32;
  EXPECT_FALSE(budget_basis(plain_caps(), asked, RunPlan{}).both_accumulations) << "fp32 runs on CUDA cores";
}

// The budget for an open choice is the elementwise max over its ways, so it is never below the budget
// of the way the subject took.
TEST(BudgetBasis, AnOpenChoiceIsBudgetedForEveryWay) {
  Problem p;
  p.batch = 1, p.heads_q = 2, p.heads_kv = 1, p.n_q = 19, p.n_k = 45, p.d = p.dv = 16;
  p.window = Window::causal(Align::bottom_right);
  for (Recipe r : {Recipe::tf32, Recipe::fp16, Recipe::bf16, Recipe::fp8_e5m2}) {
    RunOptions o;
    o.recipe = r;
    const AttentionInputs in = make_inputs(p, Distribution::sinks, r, 3, &o);
    const Float64Attention ref = exact_attention_f64(p, in);
    BudgetBasis open = budget_basis(plain_caps(), o, RunPlan{});
    open.options.num_splits = 1;
    const ErrorBudget wide = budget_for(p, in, open, ref);
    for (bool l_fp32 : {false, true})
      for (Accumulation a : {Accumulation::tensor_core, Accumulation::ieee_fp32}) {
        RunOptions one = o;
        one.l_from_fp32_p = l_fp32;
        one.accumulation = a;
        const ErrorBudget b = error_budget(p, in, one, 0, ref);
        for (size_t x = 0; x < b.o_bound.size(); ++x) ASSERT_GE(wide.o_bound[x], b.o_bound[x]);
        for (size_t x = 0; x < b.lse_bound.size(); ++x) ASSERT_GE(wide.lse_bound[x], b.lse_bound[x]);
      }
  }
}

// run_subject: a subject outside its capabilities is a refusal (a skip), and outputs of the wrong size
// are a failed run.
class WrongSize : public Subject {
 public:
  Capabilities capabilities() const override {
    Capabilities c;
    c.name = "wrong-size";
    c.recipes = {Recipe::fp16};
    c.lse = true;
    return c;
  }
  SubjectOutput run(const Problem& p, const AttentionInputs&, const RunOptions&) override {
    SubjectOutput out;
    out.o.assign(p.o_size(), 0.0);
    out.lse.assign(p.lse_size() - 1, 0.0);
    return out;
  }
};

TEST(RunSubject, RefusalsAreTypedAndWrongSizesAreFailures) {
  WrongSize s;
  Problem p;
  p.n_q = p.n_k = 4;
  p.d = p.dv = 8;
  RunOptions o;
  o.recipe = Recipe::bf16;
  const AttentionInputs in = make_inputs(p, Distribution::normal, Recipe::bf16, 1, &o);
  try {
    run_subject(s, s.capabilities(), p, in, o);
    ADD_FAILURE() << "bf16 is outside the subject's recipes";
  } catch (const SubjectRefused& e) {
    EXPECT_NE(e.reason.find("does not support recipe bf16"), std::string::npos) << e.reason;
  }
  o.recipe = Recipe::fp16;
  try {
    run_subject(s, s.capabilities(), p, in, o);
    ADD_FAILURE() << "a short LSE must fail the run";
  } catch (const SubjectRefused&) {
    ADD_FAILURE() << "not a refusal";
  } catch (const SubjectError& e) {
    EXPECT_NE(std::string(e.what()).find("3 LSE elements, expected B*Hq*Nq = 4"), std::string::npos) << e.what();
  }
}

// The emulation reports exactly what it ran, and the deliberate bug that misreports its l convention
// does so (that is the bug the budget then catches).
TEST(EmulationPlan, ReportsTheTileStepSplitsAndConventions) {
  Problem p;
  p.n_q = 20, p.n_k = 50, p.d = p.dv = 64;
  RunOptions o;
  o.recipe = Recipe::bf16;
  o.num_splits = 2;
  const AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 1, &o);
  EmulatedKernel k;
  SubjectOutput out = k.run(p, in, o);
  EXPECT_EQ(out.plan.tile, (TileSize{128, 128})) << "the CUDA kernel's default for d = 64 (kernels/tile_policy.h)";
  EXPECT_EQ(out.plan.step_n, 128);
  EXPECT_EQ(out.plan.num_splits, 2);
  EXPECT_EQ(out.plan.l_from_fp32_p, false);
  EXPECT_EQ(out.plan.accumulation, Accumulation::tensor_core);
  o.tile_m = 3, o.tile_n = 5, o.recipe = Recipe::fp32;
  out = k.run(p, make_inputs(p, Distribution::normal, o.recipe, 1, &o), o);
  EXPECT_EQ(out.plan.tile, (TileSize{3, 5}));
  EXPECT_EQ(out.plan.accumulation, Accumulation::ieee_fp32);
  EmulatedKernel liar(DeliberateBug::l_from_fp32_p_without_budget);
  EXPECT_EQ(liar.run(p, in, RunOptions{.recipe = Recipe::bf16}).plan.l_from_fp32_p, false);
}

// The oracle choice: the words the command line takes, what auto means here, and the count of
// judgements that every summary reports.
TEST(OracleChoice, ParsesTheFlagAndCountsTheJudgements) {
  EXPECT_EQ(parse_oracle("cpu"), Oracle::cpu);
  EXPECT_THROW(parse_oracle("fpga"), std::invalid_argument);
  std::string why;
  const bool gpu_here = gpu::oracle_available(&why);
  EXPECT_EQ(parse_oracle("auto"), gpu_here ? Oracle::gpu : Oracle::cpu);
  if (!gpu_here) {
    try {
      parse_oracle("gpu");
      ADD_FAILURE() << "--oracle gpu accepted without a GPU oracle";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("no GPU oracle here"), std::string::npos) << e.what();
    }
  }
  use_oracle(Oracle::cpu);
  const OracleUse before = oracle_use();
  Problem p;
  p.n_q = p.n_k = 8;
  p.d = p.dv = 16;
  RunOptions o;
  o.recipe = Recipe::fp16;
  const AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 3, &o);
  EmulatedKernel emu;
  const SubjectOutput out = emu.run(p, in, o);
  const Float64Attention ref = exact_reference(p, in, o);
  const Judgement j = judge_output(p, in, o, emu.capabilities(), out, ref);
  EXPECT_EQ(j.verdict.violations, 0u);
  const OracleUse after = oracle_use();
  EXPECT_EQ(after.cpu, before.cpu + 1);
  EXPECT_EQ(after.gpu, before.gpu);
  EXPECT_EQ(describe_oracle_use().rfind("cpu (", 0), 0u) << describe_oracle_use();
}

}  // namespace
}  // namespace fc
