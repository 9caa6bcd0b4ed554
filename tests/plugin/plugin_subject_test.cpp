// PluginSubject against deliberately broken plugins and the example CPU plugin: every way a plugin can
// fail is a SubjectError with a message that says what happened, never an output that could pass.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/plugin/plugin_subject.h"
#include "kernels/subject_registry.h"
#include "reference/formats.h"

namespace fc {
namespace {

Problem small_problem() {
  Problem p;
  p.batch = 2;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.n_q = 5;
  p.n_k = 7;
  p.d = p.dv = 4;
  return p;
}

AttentionInputs ramp_inputs(const Problem& p, Format f) {
  AttentionInputs in;
  auto fill = [&](std::vector<double>& x, size_t n, double phase) {
    x.resize(n);
    for (size_t i = 0; i < n; ++i) x[i] = round_to(f, std::sin(0.37 * double(i) + phase));
  };
  fill(in.q, p.q_size(), 0.1);
  fill(in.k, p.k_size(), 1.3);
  fill(in.v, p.v_size(), 2.9);
  return in;
}

RunOptions fp32_options() {
  RunOptions o;
  o.recipe = Recipe::fp32;
  return o;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const SubjectError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a SubjectError";
  return {};
}

TEST(PluginSubject, RefusesAnotherAbiVersionBeforeReadingAnythingElse) {
  const std::string msg = error_of([] { PluginSubject::open(FC_BROKEN_ABI_FUTURE); });
  EXPECT_NE(msg.find("was built for flashcheck ABI v99, this flashcheck speaks v1 to v2"), std::string::npos) << msg;
  EXPECT_NE(msg.find(FC_BROKEN_ABI_FUTURE), std::string::npos) << "the message names the plugin: " << msg;
}

TEST(PluginSubject, ThroughTheRegistryToo) {
  const std::string msg = error_of([] { make_subject(std::string("plugin:") + FC_BROKEN_ABI_FUTURE); });
  EXPECT_NE(msg.find("ABI v99"), std::string::npos) << msg;
}

// A v1 plugin still loads; it never sees fc_buffers.plan, so whatever that holds after its call is not
// read: its run plan is unknown (and the budget takes the conservative side of every choice).
TEST(PluginSubject, AnAbiV1PluginRunsWithAnUnknownPlan) {
  auto s = PluginSubject::open(FC_BROKEN_ABI_V1);
  const Problem p = small_problem();
  const SubjectOutput out = s->run(p, ramp_inputs(p, Format::fp32), fp32_options());
  EXPECT_EQ(out.plan, RunPlan{});
}

// A v2 plugin's plan must agree with what was asked explicitly: one split asked, three reported.
TEST(PluginSubject, APlanThatContradictsTheRequestIsAFailedRun) {
  auto s = PluginSubject::open(FC_BROKEN_WRONG_PLAN);
  const Problem p = small_problem();
  const std::string msg = error_of([&] { s->run(p, ramp_inputs(p, Format::fp32), fp32_options()); });
  EXPECT_NE(msg.find("reports running 3 split(s) where 1 were asked"), std::string::npos) << msg;
}

// The example plugin reports what it ran: one key per step and no split. It never rounds P and
// multiplies and adds separately, which neither l convention nor accumulation model names: it leaves
// those unknown.
TEST(PluginSubject, TheExamplePluginReportsItsPlan) {
  auto s = PluginSubject::open(FC_EXAMPLE_CPU_PLUGIN);
  const Problem p = small_problem();
  const SubjectOutput out = s->run(p, ramp_inputs(p, Format::fp32), fp32_options());
  EXPECT_EQ(out.plan.step_n, 1);
  EXPECT_EQ(out.plan.num_splits, 1);
  EXPECT_FALSE(out.plan.accumulation.has_value());
  EXPECT_FALSE(out.plan.l_from_fp32_p.has_value());
}

TEST(PluginSubject, MissingLibraryAndMissingSymbolAreClear) {
  EXPECT_NE(error_of([] { PluginSubject::open("/nonexistent/libnothing.so"); }).find("cannot load plugin"),
            std::string::npos);
  // A shared library without the entry point: the C runtime's libm is one on every Linux.
  void* libm = dlopen("libm.so.6", RTLD_NOW);
  ASSERT_TRUE(libm);
  Dl_info info{};
  ASSERT_TRUE(dladdr(dlsym(libm, "cos"), &info) && info.dli_fname);
  const std::string path = info.dli_fname;
  const std::string msg = error_of([&] { PluginSubject::open(path); });
  EXPECT_NE(msg.find("does not export flashcheck_plugin_entry"), std::string::npos) << msg;
  // A plugin is a file: a bare name is looked for in the current folder, never on the library path
  // (where dlopen would find libm itself).
  const std::string bare = error_of([] { PluginSubject::open("libm.so.6"); });
  EXPECT_NE(bare.find("cannot load plugin libm.so.6: no such file"), std::string::npos) << bare;
}

TEST(PluginSubject, ErrorMidRunIsAFailedRunWithThePluginsMessage) {
  auto s = PluginSubject::open(FC_BROKEN_FAIL_MIDRUN);
  const Problem p = small_problem();
  const auto in = ramp_inputs(p, Format::fp32);
  EXPECT_NO_THROW(s->run(p, in, fp32_options()));
  const std::string msg = error_of([&] { s->run(p, in, fp32_options()); });
  EXPECT_NE(msg.find("FC_ERR_RUNTIME"), std::string::npos) << msg;
  EXPECT_NE(msg.find("simulated device fault in call 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Nq=5"), std::string::npos) << "the message carries the problem: " << msg;
}

TEST(PluginSubject, PoisonMarginCatchesOneElementPastO) {
  auto s = PluginSubject::open(FC_BROKEN_OVERRUN);
  const Problem p = small_problem();
  const std::string msg = error_of([&] { s->run(p, ramp_inputs(p, Format::fp32), fp32_options()); });
  EXPECT_NE(msg.find("wrote outside O"), std::string::npos) << msg;
  EXPECT_NE(msg.find("after the end, the first at element " + std::to_string(p.o_size())), std::string::npos) << msg;
}

TEST(PluginSubject, PoisonMarginCatchesOneElementBeforeO) {
  auto s = PluginSubject::open(FC_BROKEN_UNDERRUN);
  const Problem p = small_problem();
  const std::string msg = error_of([&] { s->run(p, ramp_inputs(p, Format::fp32), fp32_options()); });
  EXPECT_NE(msg.find("wrote outside O"), std::string::npos) << msg;
  EXPECT_NE(msg.find("before the start, the furthest at element -1"), std::string::npos) << msg;
}

TEST(PluginSubject, UnwrittenOutputIsNaNNotZero) {
  auto s = PluginSubject::open(FC_BROKEN_SILENT);
  const Problem p = small_problem();
  const auto out = s->run(p, ramp_inputs(p, Format::fp32), fp32_options());
  ASSERT_EQ(out.o.size(), p.o_size());
  for (double x : out.o) EXPECT_TRUE(std::isnan(x));
  for (double x : out.lse) EXPECT_TRUE(std::isnan(x));
}

TEST(PluginSubject, UndeclaredRecipeIsRefusedBeforeTheCall) {
  auto s = PluginSubject::open(FC_BROKEN_SILENT);
  RunOptions o;
  o.recipe = Recipe::bf16;
  const Problem p = small_problem();
  const std::string msg = error_of([&] { s->run(p, ramp_inputs(p, Format::bf16), o); });
  EXPECT_NE(msg.find("does not declare recipe bf16"), std::string::npos) << msg;
}

TEST(PluginSubject, ExampleCapabilitiesConvert) {
  auto s = PluginSubject::open(FC_EXAMPLE_CPU_PLUGIN);
  const Capabilities c = s->capabilities();
  EXPECT_EQ(c.name, "example-cpu-fp32");
  EXPECT_EQ(c.recipes, (std::vector<Recipe>{Recipe::fp32, Recipe::fp16, Recipe::bf16}));
  EXPECT_TRUE(c.causal && c.window && c.gqa && c.key_lengths && c.dense_mask && c.lse);
  EXPECT_FALSE(c.split_kv || c.fa1 || c.any_tile || c.deliberate_bugs);
  EXPECT_TRUE(c.tiles.empty());
}

TEST(PluginSubject, ProblemTranslation) {
  Problem p = small_problem();
  p.window = Window::causal(Align::top_left);
  RunOptions o;
  o.recipe = Recipe::bf16;
  o.l_from_fp32_p = true;
  o.tile_n = 64;
  EXPECT_EQ(to_fc_problem(p, o, nullptr).mask, FC_MASK_CAUSAL_TOP_LEFT);
  EXPECT_EQ(to_fc_problem(p, o, nullptr).flags, FC_FLAG_L_FROM_FP32_P);
  EXPECT_EQ(to_fc_problem(p, o, nullptr).tile_n, 64);
  EXPECT_DOUBLE_EQ(to_fc_problem(p, o, nullptr).scale, 0.5);
  p.window = Window{3, 1, Align::bottom_right};
  const fc_problem f = to_fc_problem(p, o, nullptr);
  EXPECT_EQ(f.mask, FC_MASK_WINDOW);
  EXPECT_EQ(f.window_left, 3);
  EXPECT_EQ(f.window_right, 1);
  EXPECT_EQ(f.window_align, FC_ALIGN_BOTTOM_RIGHT);
}

TEST(SubjectRegistry, UnknownNamesAndThisBuild) {
  EXPECT_THROW(make_subject("no-such-subject"), std::invalid_argument);
  EXPECT_THROW(make_subject("plugin:"), std::invalid_argument);
#ifndef FLASHCHECK_TEST_HAVE_CUDA
  EXPECT_FALSE(gpu_available());
  EXPECT_THROW(make_subject("cuda"), SubjectError);
#endif
}

}  // namespace
}  // namespace fc
