// Faithful reproducers: every command render_command prints parses back, through the options of the
// command it names, to an identical case (every field of the problem and of the run options), and
// running a printed reproducer gives the verdict it was printed for.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "cli_support.h"
#include "properties/distributions.h"
#include "properties/fuzz_decode.h"
#include "properties/fuzz_reproduce.h"
#include "reference/exact_attention.h"
#include "reference/formats.h"
#include "tools/report/campaign.h"
#include "tools/report/list_options.h"
#include "tools/report/reproducer.h"

namespace fc::report {
namespace {

using cli_test::Result;
using cli_test::run_flashcheck;
using cli_test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

// The words after "flashcheck <command>", parsed by a CLI11 app that has exactly the command's case flags.
template <class Setup>
void parse_as(const std::string& line, const std::string& command, Setup setup) {
  std::vector<std::string> words = split_command(line);
  ASSERT_GE(words.size(), 2u) << line;
  ASSERT_EQ(words[0], "flashcheck");
  ASSERT_EQ(words[1], command) << line;
  CLI::App app;
  setup(&app);
  std::vector<std::string> args(words.begin() + 2, words.end());
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
}

void expect_same_problem(const Problem& a, const Problem& b) {
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.heads_q, b.heads_q);
  EXPECT_EQ(a.heads_kv, b.heads_kv);
  EXPECT_EQ(a.n_q, b.n_q);
  EXPECT_EQ(a.n_k, b.n_k);
  EXPECT_EQ(a.d, b.d);
  EXPECT_EQ(a.dv, b.dv);
  EXPECT_EQ(a.scale.has_value(), b.scale.has_value());
  if (a.scale && b.scale) {
    EXPECT_EQ(std::bit_cast<uint64_t>(*a.scale), std::bit_cast<uint64_t>(*b.scale));
  }
  EXPECT_EQ(window_name(a.window), window_name(b.window));
  EXPECT_EQ(a.window.active(), b.window.active());
  if (a.window.active()) {
    EXPECT_EQ(a.window, b.window);
  }
  EXPECT_EQ(a.key_lengths, b.key_lengths);
  EXPECT_EQ(a.dense_mask, b.dense_mask);
}

void expect_same_options(const RunOptions& a, const RunOptions& b) {
  EXPECT_EQ(a.recipe, b.recipe);
  EXPECT_EQ(a.tile_m, b.tile_m);
  EXPECT_EQ(a.tile_n, b.tile_n);
  EXPECT_EQ(a.num_splits, b.num_splits);
  EXPECT_EQ(a.l_from_fp32_p, b.l_from_fp32_p);
  EXPECT_EQ(a.two_level_accum, b.two_level_accum);
  EXPECT_EQ(a.normalisation, b.normalisation);
  EXPECT_EQ(a.accumulation, b.accumulation);
  EXPECT_EQ(a.q_descale, b.q_descale);
  EXPECT_EQ(a.k_descale, b.k_descale);
  EXPECT_EQ(a.v_descale, b.v_descale);
}

// Random cases over every field check can express, with subject names and paths that need quoting.
TEST(Reproducer, EveryRenderedCheckCommandParsesBackToTheSameCase) {
  std::mt19937_64 rng(20261201);
  auto pick = [&](auto lo, auto hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const std::vector<std::string> subjects = {"emulation", "emulation+bug:a_not_rescaled", "cuda",
                                             "plugin:/tmp/my kernels/lib'k'.so", "plugin:relative/libk.so"};
  const std::vector<double> scales = {0.125, -0.5, 1e-300, 0.1, 3.0000000000000004, 1.0 / 3.0, -7e10};
  for (int i = 0; i < 500; ++i) {
    CaseRecord c;
    c.subject = subjects[size_t(pick(0, int64_t(subjects.size()) - 1))];
    c.recipe = all_recipes[size_t(pick(0, int64_t(all_recipes.size()) - 1))];
    c.batch = int(pick(1, 4));
    c.heads_kv = int(pick(1, 3));
    c.heads_q = c.heads_kv * int(pick(1, 3));
    c.n_q = pick(1, 5000);
    c.n_k = pick(0, 1) ? c.n_q : pick(1, 70000);
    c.d = int(pick(1, 256));
    c.dv = pick(0, 1) ? c.d : int(pick(1, 256));
    const Align align = pick(0, 1) ? Align::top_left : Align::bottom_right;
    const Window windows[] = {Window{}, Window::causal(align), Window{pick(0, 300), pick(-1, 40), align},
                              Window{-1, pick(1, 9), align}};
    c.mask = window_name(windows[pick(0, 3)]);
    c.distribution = all_distributions[size_t(pick(0, int64_t(all_distributions.size()) - 1))];
    c.seed = uint64_t(pick(0, INT64_MAX));
    if (pick(0, 1)) {
      c.tile_m = int(pick(1, 128));
      c.tile_n = int(pick(1, 128));
    }
    c.num_splits = int(pick(0, 4));
    c.l_from_fp32_p = pick(0, 1);
    c.two_level_accum = pick(0, 1);
    c.fa1 = pick(0, 1);
    if (pick(0, 1)) c.scale = scales[size_t(pick(0, int64_t(scales.size()) - 1))] * (1 + pick(0, 1000) * 1e-16);
    if (pick(0, 1))
      for (int b = 0; b < c.batch; ++b) c.key_lengths.push_back(pick(0, c.n_k));

    const std::string line = render_command(c);
    SCOPED_TRACE(line);
    auto flags = std::make_shared<CheckFlags>();
    parse_as(line, "check", [&](CLI::App* app) { add_check_flags(app, flags); });
    const CaseRecord back = case_from_flags(*flags);
    EXPECT_EQ(back.subject, c.subject);
    EXPECT_EQ(back.distribution, c.distribution);
    EXPECT_EQ(back.seed, c.seed);
    EXPECT_EQ(back.mask, c.mask);
    expect_same_problem(problem_of(back), problem_of(c));
    expect_same_options(options_of(back), options_of(c));
    EXPECT_EQ(back.key(), c.key());
    if (HasFailure()) break;
  }
}

TEST(Reproducer, EveryRenderedCompareCommandParsesBackToTheSameFlags) {
  TempDir dir("repro-compare");
  const fs::path odd = dir.path / "a folder with spaces and a 'quote'";
  fs::create_directories(odd);
  for (const char* f : {"q.npy", "k.npy", "v.npy", "o.npy", "lse.npy", "lengths.npy"}) std::ofstream(odd / f) << "x";
  auto at = [&](const char* f) { return (odd / f).string(); };
  std::mt19937_64 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 200; ++i) {
    CompareFlags f;
    f.in.q = at("q.npy");
    f.in.k = at("k.npy");
    f.in.v = at("v.npy");
    f.in.format = std::vector<std::string>{"", "fp16", "bf16", "e4m3", "e5m2", "fp32", "fp64"}[size_t(pick(0, 6))];
    if (pick(0, 1)) f.in.scale = std::ldexp(double(pick(1, 1 << 20)), int(pick(-40, 4))) * (pick(0, 1) ? 1 : -1);
    f.in.mask = window_name(std::vector<Window>{Window{}, Window::causal(Align::top_left), Window{pick(0, 99), pick(-1, 99)}}[size_t(pick(0, 2))]);
    if (pick(0, 1)) f.in.key_lengths = at("lengths.npy");
    if (pick(0, 1)) {
      f.in.q_descale = std::ldexp(1.0, int(pick(-20, 20)));
      f.in.k_descale = 0.1 * double(pick(1, 9));
      f.in.v_descale = 3.0;
    }
    f.candidate = at("o.npy");
    if (pick(0, 1)) f.candidate_lse = at("lse.npy");
    f.recipe = std::string(recipe_spec(all_recipes[size_t(pick(0, 5))]).name);
    f.tile_n = int(pick(0, 128));
    f.num_splits = int(pick(0, 8));
    f.l_convention = std::vector<std::string>{"unknown", "rounded-p", "fp32-p"}[size_t(pick(0, 2))];
    f.accumulation = std::vector<std::string>{"unknown", "tensor-core", "sequential"}[size_t(pick(0, 2))];
    if (pick(0, 1)) f.subject = "emulation";

    const std::string line = render_command(f);
    SCOPED_TRACE(line);
    CompareFlags back;
    parse_as(line, "compare", [&](CLI::App* app) { add_compare_flags(app, back); });
    EXPECT_EQ(command_arguments(back), command_arguments(f));
    EXPECT_EQ(back.in.format, f.in.format);
    EXPECT_EQ(back.in.scale, f.in.scale);
    EXPECT_EQ(back.in.mask, f.in.mask);
    EXPECT_EQ(back.in.key_lengths, f.in.key_lengths);
    EXPECT_EQ(back.in.q_descale, f.in.q_descale);
    EXPECT_EQ(back.in.k_descale, f.in.k_descale);
    EXPECT_EQ(back.in.v_descale, f.in.v_descale);
    EXPECT_EQ(back.candidate_lse, f.candidate_lse);
    EXPECT_EQ(back.tile_n, f.tile_n);
    EXPECT_EQ(back.num_splits, f.num_splits);
    EXPECT_EQ(back.l_convention, f.l_convention);
    EXPECT_EQ(back.accumulation, f.accumulation);
    EXPECT_EQ(back.subject, f.subject);
    if (HasFailure()) break;
  }
}

double num(const json& x) { return x.is_number() ? x.get<double>() : NAN; }
std::string exact17(double x) { return fmt::format("{}", x); }

// The case of the issue: a candidate within budget under a non-default scale, key lengths, an fp8 format
// with descales and a split count. Its printed reproducer, run as printed, gives the same verdict to the
// last bit (before, it dropped those flags and reported tens of thousands of violations).
TEST(Reproducer, ThePrintedCompareReproducerGivesTheSameVerdict) {
  TempDir dir("repro-run");
  Problem p;
  p.batch = 2;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.n_q = 40;
  p.n_k = 75;
  p.d = p.dv = 32;
  p.scale = 0.3;
  p.key_lengths = {75, 31};
  p.window = Window::causal(Align::top_left);
  RunOptions o;
  o.recipe = Recipe::fp8_e4m3;
  const AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 11, &o);
  ASSERT_NE(o.q_descale, 1.0) << "the generator gives fp8 inputs a descale";
  // The candidate: the exact output rounded to the recipe's output format (bf16).
  const Float64Attention ref = exact_attention_f64(p, in);
  std::vector<double> cand;
  for (double x : ref.out.o) cand.push_back(round_to(recipe_spec(o.recipe).output, x));
  auto stored = [](const std::vector<double>& t, double descale) {
    std::vector<double> s;
    for (double x : t) s.push_back(x / descale);
    return s;
  };
  cli_test::write_f8(dir.path / "q.npy", {2, 2, 40, 32}, stored(in.q, o.q_descale));
  cli_test::write_f8(dir.path / "k.npy", {2, 1, 75, 32}, stored(in.k, o.k_descale));
  cli_test::write_f8(dir.path / "v.npy", {2, 1, 75, 32}, stored(in.v, o.v_descale));
  cli_test::write_f8(dir.path / "o.npy", {2, 2, 40, 32}, cand);
  std::ofstream(dir.path / "lengths.npy", std::ios::binary) << [] {
    npy::Array a;
    a.kind = 'i';
    a.itemsize = 8;
    a.shape = {2};
    const int64_t v[2] = {75, 31};
    a.data.resize(16);
    std::memcpy(a.data.data(), v, 16);
    return npy::to_bytes(a);
  }();
  auto path = [&](const char* f) { return (dir.path / f).string(); };
  const Result first = run_flashcheck(
      {"compare", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--format", "e4m3", "--scale=0.3",
       "--mask", "causal-top-left", "--key-lengths", path("lengths.npy"), "--q-descale=" + exact17(o.q_descale),
       "--k-descale=" + exact17(o.k_descale), "--v-descale=" + exact17(o.v_descale), "--candidate",
       path("o.npy"), "--recipe", "fp8_e4m3", "--num-splits", "1", "--l-convention", "rounded-p", "--report",
       path("r1")});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const json j1 = json::parse(cli_test::read_text(dir.path / "r1" / "compare.json"));
  const std::string reproduce = j1["reproduce"];
  for (const char* flag : {"--scale=0.3", "--key-lengths", "--format e4m3", "--q-descale=", "--num-splits 1",
                           "--l-convention rounded-p", "--mask causal-top-left"})
    EXPECT_NE(reproduce.find(flag), std::string::npos) << flag << " missing from " << reproduce;
  std::vector<std::string> args = split_command(reproduce);
  args.erase(args.begin());
  args.insert(args.end(), {"--report", path("r2")});
  const Result second = run_flashcheck(args);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const json j2 = json::parse(cli_test::read_text(dir.path / "r2" / "compare.json"));
  EXPECT_EQ(j2["reproduce"], reproduce);
  EXPECT_EQ(j2["budget_basis"], j1["budget_basis"]);
  for (const char* field : {"elements", "violations", "max_ratio", "max_lse_ratio", "rmse"})
    EXPECT_EQ(num(j2["results"][0][field]), num(j1["results"][0][field])) << field;
}

// report.md's worst-case commands and cases.csv's reproduce column re-run to the recorded numbers.
TEST(Reproducer, TheReportsCommandsReproduceTheirCases) {
  TempDir dir("repro-report");
  const Result r = run_flashcheck({"report", "--recipes", "bf16,fp8_e5m2", "--n", "33,70", "--d", "16", "--masks",
                                   "none;window:5,inf", "--cases", "3", "--no-plots", "--quiet", "--out",
                                   dir.path.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json rep = json::parse(cli_test::read_text(dir.path / "report.json"));
  const std::string md = cli_test::read_text(dir.path / "report.md");
  int reproduced = 0;
  for (const json& c : rep["cases"]) {
    CaseRecord k;
    k.subject = c["subject"];
    k.recipe = parse_recipes("", {c["recipe"].get<std::string>()}).front();
    k.batch = c["batch"];
    k.heads_q = c["heads_q"];
    k.heads_kv = c["heads_kv"];
    k.n_q = c["n_q"];
    k.n_k = c["n_k"];
    k.d = c["d"];
    k.dv = c["dv"];
    k.mask = c["mask"];
    k.distribution = parse_distributions("", {c["distribution"].get<std::string>()}).front();
    k.seed = c["seed"];
    k.tile_m = c["tile_m"];
    k.tile_n = c["tile_n"];
    const std::string line = render_command(k);
    EXPECT_NE(cli_test::read_text(dir.path / "cases.csv").find(line), std::string::npos) << line;
    if (md.find(line) == std::string::npos) continue;  // report.md shows the worst case per recipe
    std::vector<std::string> args = split_command(line);
    args.erase(args.begin());
    args.push_back("--json");
    const Result again = run_flashcheck(args);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    const json j = json::parse(again.output.substr(again.output.find('{')));
    EXPECT_EQ(j["max_ratio"], c["max_ratio"]) << line;
    EXPECT_EQ(j["elements"], c["elements"]) << line;
    EXPECT_EQ(j["q_descale"], c["q_descale"]) << line;
    EXPECT_EQ(j["reproduce"], line);
    ++reproduced;
  }
  EXPECT_EQ(reproduced, 2) << "one worst case per recipe";
}

// A fuzz finding's reproducer runs the same case: `fuzz --explain FILE --run` decodes it to the case
// the campaign checked.
TEST(Reproducer, TheFuzzReproducerRunsTheSameCase) {
  TempDir dir("repro-fuzz");
  const Result found = run_flashcheck({"fuzz", "--subject", "emulation+bug:tail_not_masked", "--limits", "cpu",
                                       "--max-cases", "50", "--max-reproducers", "1", "--quiet", "--out",
                                       dir.path.string()});
  ASSERT_EQ(found.exit_code, 1) << found.output;
  const size_t at = found.output.find("reproduce: ");
  ASSERT_NE(at, std::string::npos) << found.output;
  const std::string line = found.output.substr(at + 11, found.output.find('\n', at) - at - 11);
  std::vector<std::string> args = split_command(line);
  ASSERT_GE(args.size(), 4u);
  EXPECT_EQ(args[1], "fuzz");
  EXPECT_EQ(args[2], "--explain");
  const fuzz::Reproducer rep = fuzz::read_reproducer(args[3]);
  const fuzz::FuzzCase c = fuzz::decode_case(rep.bytes, *rep.caps, *fuzz::FuzzLimits::by_name(rep.limits));
  args.erase(args.begin());
  const Result again = run_flashcheck(args);
  EXPECT_EQ(again.exit_code, 1) << again.output;  // the planted bug again
  EXPECT_NE(again.output.find(fuzz::describe(c, 4096)), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("VIOLATIONS"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace fc::report
