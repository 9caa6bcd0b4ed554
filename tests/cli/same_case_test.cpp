// One case, every entry point: the budget property, the fuzz oracle, the report's case runner, the
// `check` command and the `compare` command (the subject's own output, read back from NPY files) all
// judge it through the check pipeline, so each must report the same verdict and the same bounds. Run for
// the CPU emulation, the example C plugin and (where a GPU is usable) our CUDA kernel.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>

#include "cli_support.h"
#include "kernels/subject_registry.h"
#include "properties/attention_properties.h"
#include "properties/fuzz_check.h"
#include "tools/npy/npy_file.h"
#include "tools/report/campaign.h"

namespace fc::cli_test {
namespace {

using nlohmann::json;

// What an entry point says about the case.
struct Seen {
  std::string who;
  uint64_t elements = 0, violations = 0;
  double max_ratio = -1, worst_bound = -1, max_lse_ratio = -1;
};

double num(const json& v) {
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    return s == "inf" ? INFINITY : s == "-inf" ? -INFINITY : NAN;
  }
  return v.get<double>();
}

Seen from_verdict(const std::string& who, const BudgetVerdict& v) {
  return {who, v.elements, v.violations, v.max_ratio, v.worst.empty() ? -1.0 : v.worst.front().bound, v.max_lse_ratio};
}

// The case, as every entry point spells it.
report::CaseRecord the_case(const std::string& subject) {
  report::CaseRecord c;
  c.subject = subject;
  c.recipe = Recipe::fp16;
  c.batch = 1, c.heads_q = 2, c.heads_kv = 1;
  c.n_q = 37, c.n_k = 70;
  c.d = c.dv = 32;
  c.mask = "causal";
  c.distribution = Distribution::normal;
  c.seed = 5;
  return c;
}

// The example plugin: $FC_EXAMPLE_CPU_PLUGIN when set (a build carried to another machine), else the path
// compiled in.
std::string plugin_subject() {
  const char* e = std::getenv("FC_EXAMPLE_CPU_PLUGIN");
  return std::string("plugin:") + (e && *e ? e : FC_EXAMPLE_CPU_PLUGIN);
}

class SameCase : public ::testing::TestWithParam<std::string> {};

TEST_P(SameCase, EveryEntryPointGivesTheSameBoundAndVerdict) {
  const std::string name = GetParam() == "example_plugin" ? plugin_subject() : GetParam();
  if (name == "cuda" && !gpu_available()) GTEST_SKIP() << "no usable CUDA device: the CUDA case is SKIPPED, not passed";
  auto subject = make_subject(name);
  const Capabilities caps = subject->capabilities();
  const report::CaseRecord rec = the_case(name);
  const Problem p = report::problem_of(rec);
  RunOptions o;
  o.recipe = rec.recipe;
  const AttentionInputs in = make_inputs(p, rec.distribution, rec.recipe, rec.seed, &o);
  std::vector<Seen> seen;

  // 1. The report's case runner (also what `check` runs).
  const report::CaseRecord r = report::run_case(*subject, caps, rec, 8);
  ASSERT_EQ(r.status, "ok") << r.message;
  seen.push_back({"report", r.elements, r.violations, r.max_ratio, r.worst.empty() ? -1.0 : r.worst.front().bound,
                  r.max_lse_ratio});

  // 2. The budget property on the same generated case (no hostile edits: the same inputs).
  GeneratedCase g;
  g.problem = p;
  g.options = o;
  g.distribution = rec.distribution;
  g.seed = rec.seed;
  g.mask = MaskKind::causal_bottom_right;
  const PropertyResult pr = budget_property(*subject, g);
  ASSERT_FALSE(pr.skipped()) << pr.message;
  ASSERT_TRUE(pr.verdict.has_value());
  seen.push_back(from_verdict("budget property", *pr.verdict));

  // 3. The fuzz oracle.
  fuzz::FuzzCase fc;
  fc.problem = p;
  fc.options = o;
  fc.inputs = in;
  const fuzz::CaseVerdict fv = fuzz::check_case(*subject, fc);
  ASSERT_FALSE(fv.skipped) << fv.skip_reason;
  seen.push_back(from_verdict("fuzz oracle", fv.budget));

  // 4. `flashcheck check --json`.
  const Result chk = run_flashcheck({"check", "--subject", name, "--recipe", "fp16", "--n", "37", "--nk", "70", "--d",
                                     "32", "--heads-q", "2", "--heads-kv", "1", "--mask", "causal", "--dist", "normal",
                                     "--seed", "5", "--worst", "8", "--json"});
  ASSERT_EQ(chk.exit_code, r.violations ? 1 : 0) << chk.output;
  const json cj = json::parse(chk.output.substr(chk.output.find('{')));
  seen.push_back({"check", cj["elements"].get<uint64_t>(), cj["violations"].get<uint64_t>(), num(cj["max_ratio"]),
                  cj["worst"].empty() ? -1.0 : num(cj["worst"][0]["bound"]), num(cj["max_lse_ratio"])});
  EXPECT_EQ(cj["budget_basis"].get<std::string>(), r.budget_basis);

  // 5. `flashcheck compare` on the subject's own output, with its reported plan as flags.
  TempDir dir("same_case");
  const SubjectOutput out = subject->run(p, in, o);
  auto path = [&](const char* f) { return (dir.path / f).string(); };
  write_f8(path("q.npy"), {p.batch, p.heads_q, p.n_q, p.d}, in.q);
  write_f8(path("k.npy"), {p.batch, p.heads_kv, p.n_k, p.d}, in.k);
  write_f8(path("v.npy"), {p.batch, p.heads_kv, p.n_k, p.dv}, in.v);
  write_f8(path("o.npy"), {p.batch, p.heads_q, p.n_q, p.dv}, out.o);
  std::vector<std::string> args = {"compare", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"),
                                   "--format", "fp16", "--mask", "causal", "--recipe", "fp16", "--candidate",
                                   path("o.npy"), "--worst", "8", "--report", path("report")};
  if (!out.lse.empty()) {
    write_f8(path("lse.npy"), {p.batch, p.heads_q, p.n_q}, out.lse);
    args.insert(args.end(), {"--candidate-lse", path("lse.npy")});
  }
  if (out.plan.step_n > 0) args.insert(args.end(), {"--tile-n", std::to_string(out.plan.step_n)});
  if (out.plan.num_splits > 0) args.insert(args.end(), {"--num-splits", std::to_string(out.plan.num_splits)});
  if (out.plan.l_from_fp32_p) args.insert(args.end(), {"--l-convention", *out.plan.l_from_fp32_p ? "fp32-p" : "rounded-p"});
  if (out.plan.accumulation)
    args.insert(args.end(), {"--accumulation", *out.plan.accumulation == Accumulation::tensor_core ? "tensor-core"
                                                                                                     : "sequential"});
  const Result cmp = run_flashcheck(args);
  ASSERT_EQ(cmp.exit_code, r.violations ? 1 : 0) << cmp.output;
  const json mj = json::parse(read_text(dir.path / "report" / "compare.json"));
  const json& res = mj["results"][0];
  seen.push_back({"compare", res["elements"].get<uint64_t>(), res["violations"].get<uint64_t>(), num(res["max_ratio"]),
                  res["worst"].empty() ? -1.0 : num(res["worst"][0]["bound"]), num(res["max_lse_ratio"])});
  EXPECT_EQ(mj["budget_basis"].get<std::string>(), r.budget_basis);

  std::cout << name << ": budget for " << r.budget_basis << "; " << r.elements << " elements, max error/bound "
            << r.max_ratio << "\n";
  EXPECT_GT(seen.front().elements, 0u);
  for (const Seen& s : seen) {
    EXPECT_EQ(s.elements, seen.front().elements) << s.who;
    EXPECT_EQ(s.violations, seen.front().violations) << s.who;
    EXPECT_EQ(s.max_ratio, seen.front().max_ratio) << s.who;
    EXPECT_EQ(s.worst_bound, seen.front().worst_bound) << s.who;
    EXPECT_EQ(s.max_lse_ratio, seen.front().max_lse_ratio) << s.who;
  }
}

INSTANTIATE_TEST_SUITE_P(Subjects, SameCase, ::testing::Values("emulation", "example_plugin", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fc::cli_test
