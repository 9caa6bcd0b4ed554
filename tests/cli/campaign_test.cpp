// The campaign planner and runner, with a fake subject: every axis value is drawn, two subjects see the
// same inputs, a subject's failure is a failed case (never a pass), and an interrupt stops the run with
// whole records only.
#include <gtest/gtest.h>

#include <functional>
#include <new>
#include <set>

#include "reference/exact_attention.h"
#include "tools/report/aggregate.h"
#include "tools/report/campaign.h"
#include "tools/report/fa3_inputs.h"
#include "tools/report/interrupt.h"
#include "tools/report/list_options.h"

namespace fc::report {
namespace {

// Returns the float64 exact attention rounded to the output format: the best any kernel can do.
class RoundedReference : public Subject {
 public:
  explicit RoundedReference(std::string name, bool fail = false) : name_(std::move(name)), fail_(fail) {}
  Capabilities capabilities() const override {
    Capabilities c;
    c.name = name_;
    c.recipes.assign(all_recipes.begin(), all_recipes.end());
    c.any_tile = true;
    c.causal = c.window = c.gqa = c.lse = true;
    return c;
  }
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override {
    if (fail_) throw SubjectError("device on fire");
    const Float64Attention ref = exact_attention_f64(p, in);
    SubjectOutput out;
    for (double x : ref.out.o) out.o.push_back(round_to(recipe_spec(o.recipe).output, x));
    out.lse = ref.out.lse;  // it declares an LSE, so it returns one
    return out;
  }

 private:
  std::string name_;
  bool fail_;
};

CampaignSpec small_spec() {
  CampaignSpec s;
  s.subjects = {"a", "b"};
  s.recipes = {Recipe::fp16, Recipe::bf16};
  s.n = {17, 40};
  s.d = {8, 16};
  s.masks = {"none", "causal"};
  s.distributions = {Distribution::normal, Distribution::fa3_outliers};
  s.tiles = {{8, 8}, {16, 4}};
  s.heads_q = 2;
  s.heads_kv = 1;
  s.cases = 5;
  return s;
}

std::map<std::string, Capabilities> caps_of(const CampaignSpec& s) {
  std::map<std::string, Capabilities> caps;
  for (const auto& name : s.subjects) caps[name] = RoundedReference(name).capabilities();
  return caps;
}

TEST(Campaign, DrawsEveryAxisValueAndTheSameCasesForEachSubject) {
  const CampaignSpec s = small_spec();
  const Plan plan = plan_campaign(s, caps_of(s));
  ASSERT_EQ(plan.cases.size(), 2u * 2u * 5u);
  std::map<std::string, std::vector<std::string>> keys;
  for (const auto& c : plan.cases) {
    std::string k = c.key();
    keys[c.subject].push_back(k.substr(k.find(' ')) + " " + std::to_string(c.seed));
  }
  EXPECT_EQ(keys["a"], keys["b"]);  // same grid points, same seeds
  for (Recipe r : s.recipes) {
    std::set<int64_t> ns;
    std::set<int> ds;
    std::set<std::string> masks;
    std::set<int> tiles;
    for (const auto& c : plan.cases)
      if (c.recipe == r && c.subject == "a") {
        ns.insert(c.n_k);
        ds.insert(c.d);
        masks.insert(c.mask);
        tiles.insert(c.tile_n);
      }
    EXPECT_EQ(ns.size(), 2u);
    EXPECT_EQ(ds.size(), 2u);
    EXPECT_EQ(masks.size(), 2u);
    EXPECT_EQ(tiles.size(), 2u);
  }
  // Deterministic: the same spec gives the same plan.
  const Plan again = plan_campaign(s, caps_of(s));
  for (size_t i = 0; i < plan.cases.size(); ++i) EXPECT_EQ(plan.cases[i].seed, again.cases[i].seed);
}

TEST(Campaign, ExactSubjectIsWithinBudgetAndFailingSubjectIsAFailedCase) {
  CampaignSpec s = small_spec();
  s.cases = 3;
  RunSettings settings;
  settings.jobs = 2;
  settings.quiet = true;
  const CampaignResult r = run_campaign(
      s, [](const std::string& name) { return std::make_unique<RoundedReference>(name, name == "b"); }, settings);
  EXPECT_FALSE(r.partial);
  ASSERT_EQ(r.cases.size(), 12u);
  for (const auto& c : r.cases) {
    if (c.subject == "a") {
      EXPECT_EQ(c.status, "ok") << c.message;
      EXPECT_EQ(c.violations, 0u) << c.key();
      EXPECT_GT(c.elements, 0u);
      uint64_t in_hist = 0;
      for (auto h : c.ratio_histogram) in_hist += h;
      EXPECT_EQ(in_hist, c.elements);
      if (c.distribution == Distribution::fa3_outliers) {
        EXPECT_TRUE(std::isfinite(c.sum_sq_error_unrounded));
      }
    } else {
      EXPECT_EQ(c.status, "error");
      EXPECT_NE(c.message.find("device on fire"), std::string::npos);
    }
  }
  ReportData data;
  data.spec = s;
  data.cases = r.cases;
  EXPECT_EQ(total(data).cases_error, 6u);
  EXPECT_EQ(r.unrounded_source, "float64 generator replay");
}

// How a subject's failure is recorded: a crash or a hang of its worker is a failed case (a finding);
// running out of memory is the machine's limit, a skip, never a verdict on the kernel.
TEST(Campaign, FailureKindsAreRecordedByWhatTheyMean) {
  struct Throws : RoundedReference {
    std::function<void()> thrower;
    explicit Throws(std::function<void()> t) : RoundedReference("t"), thrower(std::move(t)) {}
    SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override {
      thrower();
      return RoundedReference::run(p, in, o);
    }
  };
  CaseRecord c;
  c.subject = "t";
  c.n_q = c.n_k = 16;
  c.d = c.dv = 8;
  auto status_of = [&](std::function<void()> t) {
    Throws s(std::move(t));
    const CaseRecord r = run_case(s, s.capabilities(), c, 3);
    return r.status + ": " + r.message;
  };
  EXPECT_EQ(status_of([] { throw SubjectCrashed("k crashed: killed by signal 11"); }), "crashed: k crashed: killed by signal 11");
  EXPECT_EQ(status_of([] { throw SubjectTimedOut("k did not finish"); }), "timeout: k did not finish");
  EXPECT_EQ(status_of([] { throw SubjectOutOfMemory("k: out of memory"); }), "skipped: k: out of memory");
  EXPECT_EQ(status_of([] { throw std::bad_alloc(); }), "skipped: out of host memory (std::bad_alloc) while running this case");
  EXPECT_EQ(status_of([] { throw SubjectSticky("k: illegal address"); }), "error: subject failed: k: illegal address");
  EXPECT_EQ(status_of([] {}).substr(0, 4), "ok: ");
  ReportData data;
  for (const char* st : {"crashed", "timeout", "error", "skipped"}) {
    data.cases.push_back(c);
    data.cases.back().status = st;
  }
  EXPECT_EQ(total(data).cases_error, 3u);
  EXPECT_EQ(total(data).cases_skipped, 1u);
}

TEST(Campaign, InterruptedRunKeepsWholeRecordsOnly) {
  CampaignSpec s = small_spec();
  RunSettings settings;
  settings.quiet = true;
  request_interrupt();
  const CampaignResult r =
      run_campaign(s, [](const std::string& name) { return std::make_unique<RoundedReference>(name); }, settings);
  clear_interrupt();
  EXPECT_TRUE(r.partial);
  EXPECT_LT(r.cases.size(), r.planned);
}

TEST(Campaign, UnroundedFa3InputsReplayTheGenerator) {
  Problem p;
  p.n_q = p.n_k = 50;
  p.d = p.dv = 8;
  const UnroundedInputs u = unrounded_fa3_inputs(p, 1234);
  EXPECT_EQ(u.source, "float64 generator replay");
  const AttentionInputs fp16 = make_inputs(p, Distribution::fa3_outliers, Recipe::fp16, 1234);
  for (size_t i = 0; i < fp16.q.size(); ++i) EXPECT_EQ(round_to(Format::fp16, u.inputs.q[i], Overflow::saturate), fp16.q[i]);
}

TEST(Campaign, ImpossibleCampaignsAreUsageErrors) {
  CampaignSpec s = small_spec();
  s.heads_q = 3;
  s.heads_kv = 2;
  EXPECT_THROW(validate_campaign(s), UsageError);
  EXPECT_THROW(parse_sizes("--n", {"0"}, 100), UsageError);
  EXPECT_THROW(parse_tile("--tiles", "8x0"), UsageError);
  EXPECT_THROW(parse_recipes("--recipes", {"fp12"}), UsageError);
}

}  // namespace
}  // namespace fc::report
