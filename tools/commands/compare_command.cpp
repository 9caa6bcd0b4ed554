// flashcheck compare: a candidate output (from any framework, as NPY) against the error budget of the
// exact result on the same inputs (docs/integration.md).
//
//   flashcheck compare --q Q.npy --k K.npy --v V.npy [--format F] [--scale S] [--mask M]
//                      [--key-lengths L.npy] --candidate O.npy [--candidate-lse LSE.npy] --recipe R
//                      [--tile-n N] [--num-splits N] [--l-convention unknown|rounded-p|fp32-p]
//                      [--accumulation unknown|tensor-core|sequential] [--report DIR] [--subject NAME]
//
// Exit status: 0 every element within its bound, 1 a violation (or a NaN/inf where the exact result has
// none), 2 bad input. The candidate is judged by the check pipeline (properties/check_pipeline.h) as a
// run whose plan is what the flags say: a softmax step width, split count, l convention or accumulation
// left unknown is budgeted on its conservative side; that only widens the bound, it never flags a
// correct kernel. --subject also runs one of our subjects on the same inputs, judged the same way.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "properties/check_pipeline.h"
#include "properties/oracle.h"
#include "reference/error_budget.h"
#include "reference/exact_attention.h"
#include "reference/recipe.h"
#include "tools/command_registry.h"
#include "tools/npy/attention_npy.h"
#include "tools/report/atomic_file.h"
#include "tools/report/oracle_option.h"
#include "tools/report/reproducer.h"
#include "tools/report/subject_choice.h"

namespace {

// The case is CompareFlags (tools/report/reproducer.h); these say where the report goes and how much
// is printed.
struct CompareOptions {
  fc::report::CompareFlags c;
  std::string report_dir;
  int worst = 8;
  bool quiet = false;
  fc::report::Isolation isolation;
  std::string oracle;
};

std::vector<double> candidate_values(const std::string& path, const std::vector<int64_t>& shape, fc::Format output) {
  const fc::npy::Array a = fc::npy::read(path);
  if (a.shape != shape) {
    fc::npy::Array want;
    want.shape = shape;
    throw fc::npy::NpyError(path + ": expected shape " + want.shape_string() + ", got " + a.shape_string());
  }
  std::vector<double> out(a.size());
  if (a.kind == 'f') {
    for (size_t i = 0; i < out.size(); ++i) out[i] = a.as_double(i);
  } else if (a.kind == 'u' && size_t(a.itemsize) * 8 == size_t(fc::spec(output).bits)) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = fc::decode(output, uint32_t(a.as_uint(i)));
  } else {
    throw fc::npy::NpyError(path + ": dtype " + a.dtype() + " is not a float array nor " + std::string(fc::spec(output).name) +
                            " bit patterns");
  }
  return out;
}

struct Outcome {
  std::string who;
  fc::BudgetVerdict verdict;
  std::string error;  // a subject that failed to run
};

std::string verdict_line(const Outcome& r) {
  if (!r.error.empty()) return fmt::format("{}: FAILED TO RUN: {}", r.who, r.error);
  const auto& v = r.verdict;
  return fmt::format("{}: {} ({} elements, {} violations, {} NaN/inf mismatches; max error/bound {:.3g}, mean {:.3g}; "
                     "max scaled ulps {:.3g}; max |error| {:.3g}, rmse {:.3g}; max LSE error/bound {:.3g})",
                     r.who, v.violations ? "VIOLATES THE BUDGET" : "within budget", v.elements, v.violations,
                     v.nan_mismatches, v.max_ratio, v.mean_ratio(), v.max_scaled_ulps, v.max_abs_error, v.rmse(),
                     v.max_lse_ratio);
}

nlohmann::json worst_json(const fc::Problem& p, const fc::BudgetVerdict& v) {
  nlohmann::json worst = nlohmann::json::array();
  for (const auto& w : v.worst) {
    auto num = [](double x) -> nlohmann::json { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(fmt::format("{}", x)); };
    worst.push_back({{"tensor", w.is_lse ? "lse" : "o"},
                     {"index", w.index},
                     {"position", fc::npy::o_position(p, w.index, w.is_lse)},
                     {"got", num(w.got)},
                     {"want", num(w.want)},
                     {"error", num(w.error)},
                     {"bound", num(w.bound)},
                     {"ratio", num(w.bound > 0 ? w.error / w.bound : INFINITY)},
                     {"scaled_ulps", num(w.scaled_ulps)},
                     {"violation", !(w.error <= w.bound)}});
  }
  return worst;
}

std::string worst_table(const fc::Problem& p, const fc::BudgetVerdict& v, bool markdown) {
  std::string s;
  if (markdown) s += "| element | got | exact | error | bound | error/bound | scaled ulps | |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& w : v.worst) {
    const std::string pos = std::string(w.is_lse ? "LSE" : "O") + fc::npy::o_position(p, w.index, w.is_lse);
    const double ratio = w.bound > 0 ? w.error / w.bound : INFINITY;
    const char* flag = w.error <= w.bound ? "" : "VIOLATION";
    s += markdown ? fmt::format("| {} | {:.9g} | {:.9g} | {:.3g} | {:.3g} | {:.3g} | {:.3g} | {} |\n", pos, w.got, w.want,
                                w.error, w.bound, ratio, w.scaled_ulps, flag)
                  : fmt::format("  {:<18} got {:<16.9g} exact {:<16.9g} |error| {:<10.3g} bound {:<10.3g} ratio {:<8.3g} {}\n",
                                pos, w.got, w.want, w.error, w.bound, ratio, flag);
  }
  return s;
}

int run_compare(const CompareOptions& opts) {
  const fc::report::CompareFlags& o = opts.c;
  fc::report::choose_oracle(opts.oracle);
  const auto recipe = fc::parse_recipe(o.recipe);
  if (!recipe) throw std::invalid_argument("--recipe " + o.recipe + ": expected fp32, tf32, fp16, bf16, fp8_e4m3 or fp8_e5m2");
  // The yardstick subject is opened before any work: one that cannot be opened here (no GPU, a bad
  // plugin) is an error of the command, not a line in a passing report.
  std::unique_ptr<fc::Subject> yardstick;
  if (!o.subject.empty()) {
#ifdef FC_HAVE_SUBJECTS
    yardstick = fc::report::open_subject(o.subject, opts.isolation);
#else
    throw std::invalid_argument("--subject: this flashcheck was built without the subject registry");
#endif
  }
  // So is the report folder: an unwritable one fails now, and a failed write leaves nothing.
  fc::report::StagedFiles files;
  if (!opts.report_dir.empty()) files.create_folder(opts.report_dir);

  const fc::RecipeSpec& rs = fc::recipe_spec(*recipe);
  const fc::npy::LoadedProblem lp = fc::npy::load_problem(o.in, rs.input, [&](const fc::Problem& p) {
    fc::RunOptions asked;
    asked.recipe = *recipe;
    fc::report::require_memory_for_case(o.subject, p, asked, opts.isolation, "these inputs (" + p.describe() + ")");
  });
  const fc::Problem& p = lp.problem;
  const std::vector<double> cand = candidate_values(o.candidate, {p.batch, p.heads_q, p.n_q, p.dv}, rs.output);
  std::vector<double> cand_lse;
  if (!o.candidate_lse.empty()) {
    const fc::npy::Array l = fc::npy::read(o.candidate_lse);
    if (l.shape != std::vector<int64_t>{p.batch, p.heads_q, p.n_q} || l.kind != 'f')
      throw fc::npy::NpyError(o.candidate_lse + ": expected a float array of shape (" + std::to_string(p.batch) + ", " +
                              std::to_string(p.heads_q) + ", " + std::to_string(p.n_q) + "), got " + l.dtype() + " " +
                              l.shape_string());
    for (size_t i = 0; i < l.size(); ++i) cand_lse.push_back(l.as_double(i));
  }

  fc::RunOptions run;
  run.recipe = *recipe;
  run.q_descale = o.in.q_descale;
  run.k_descale = o.in.k_descale;
  run.v_descale = o.in.v_descale;
  run.num_splits = 0;  // the candidate decided
  // What the flags say the candidate ran; the rest stays unknown.
  fc::SubjectOutput candidate;
  candidate.o = cand;
  candidate.lse = cand_lse;
  candidate.plan.step_n = std::max(o.tile_n, 0);
  candidate.plan.num_splits = std::max(o.num_splits, 0);
  if (o.l_convention != "unknown") candidate.plan.l_from_fp32_p = o.l_convention == "fp32-p";
  if (o.accumulation != "unknown")
    candidate.plan.accumulation = o.accumulation == "tensor-core" ? fc::Accumulation::tensor_core : fc::Accumulation::ieee_fp32;
  const fc::Float64Attention ref = fc::exact_reference(p, lp.inputs, run);
  const size_t keep = size_t(std::max(opts.worst, 1));
  const fc::Judgement judged = fc::judge_output(p, lp.inputs, run, fc::Capabilities{}, candidate, ref, keep);
  std::vector<Outcome> outcomes;
  outcomes.push_back({"candidate " + o.candidate, judged.verdict, {}});

  // Optionally one of our subjects on the same inputs, for scale ("the error/bound against ours"): it
  // runs with its own defaults and is judged for the plan it reports. A run that fails is exit 1.
  bool yardstick_failed = false;
  if (yardstick) {
    Outcome ours{"subject " + o.subject, {}, {}};
    try {
      fc::RunOptions own = run;
      own.num_splits = 1;
      ours.verdict = fc::check_run(*yardstick, yardstick->capabilities(), p, lp.inputs, own, ref, {keep}).judged.verdict;
    } catch (const fc::SubjectRefused& e) {
      throw std::invalid_argument("--subject " + o.subject + " cannot run this problem: " + e.reason);
    } catch (const fc::SubjectError& e) {
      ours.error = e.what();
      yardstick_failed = true;
    }
    outcomes.push_back(ours);
  }

  const fc::BudgetVerdict& v = outcomes.front().verdict;
  const bool violation = v.violations > 0;
  const std::string header = fmt::format("flashcheck compare: recipe {}, {} (output {}; budget for {})", rs.name,
                                         p.describe(), fc::spec(rs.output).name, judged.basis.describe());
  std::cout << header << "\n";
  for (const auto& r : outcomes) std::cout << "  " << verdict_line(r) << "\n";
  std::cout << "  oracle: " << fc::describe_oracle_use() << "\n";
  if (!opts.quiet && !v.worst.empty()) std::cout << "worst elements of the candidate (error/bound, descending):\n" << worst_table(p, v, false);

  // The command that reproduces this verdict, every flag that shaped it included, with absolute paths.
  fc::report::CompareFlags absolute = o;
  for (std::string* path : {&absolute.in.q, &absolute.in.k, &absolute.in.v, &absolute.in.key_lengths, &absolute.candidate,
                            &absolute.candidate_lse})
    if (!path->empty()) *path = std::filesystem::absolute(*path).lexically_normal().string();
  const std::string reproduce = fc::report::render_command(absolute);

  if (!opts.report_dir.empty()) {
    nlohmann::json j;
    j["verdict"] = violation ? "violation" : "within budget";
    j["recipe"] = std::string(rs.name);
    j["problem"] = p.describe();
    j["shape"] = {{"batch", p.batch}, {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"n_q", p.n_q},
                  {"n_k", p.n_k},     {"d", p.d},             {"dv", p.dv}};
    j["mask"] = fc::window_name(p.window);
    j["scale"] = p.effective_scale();
    j["budget_basis"] = judged.basis.describe();
    j["budget_tile_n"] = judged.basis.tile_n;
    j["budget_num_splits"] = judged.basis.options.num_splits;
    j["l_convention"] = o.l_convention;
    j["accumulation"] = o.accumulation;
    j["inputs"] = {{"q", o.in.q}, {"k", o.in.k}, {"v", o.in.v}, {"format", std::string(fc::spec(lp.format).name)}};
    j["candidate"] = o.candidate;
    j["reproduce"] = reproduce;
    j["oracle"] = fc::describe_oracle_use();
    j["results"] = nlohmann::json::array();
    for (const auto& r : outcomes) {
      nlohmann::json e{{"who", r.who}};
      if (!r.error.empty()) {
        e["error"] = r.error;
      } else {
        const auto& x = r.verdict;
        e.update({{"elements", x.elements}, {"violations", x.violations}, {"nan_mismatches", x.nan_mismatches},
                  {"max_ratio", x.max_ratio}, {"mean_ratio", x.mean_ratio()},
                  {"max_ratio_probabilistic", x.max_ratio_probabilistic}, {"max_scaled_ulps", x.max_scaled_ulps},
                  {"mean_scaled_ulps", x.mean_scaled_ulps()}, {"max_abs_error", x.max_abs_error}, {"rmse", x.rmse()},
                  {"max_lse_ratio", x.max_lse_ratio}, {"worst", worst_json(p, x)}});
      }
      j["results"].push_back(e);
    }
    const auto json_path = std::filesystem::path(opts.report_dir) / "compare.json";
    const auto md_path = std::filesystem::path(opts.report_dir) / "compare.md";
    std::ostringstream md;
    md << "# flashcheck compare: " << (violation ? "VIOLATION" : "within budget") << "\n\n"
       << "- recipe: " << rs.name << " (output " << fc::spec(rs.output).name << ")\n"
       << "- problem: " << p.describe() << "\n"
       << "- budget: for " << judged.basis.describe() << " (what the candidate did not say takes its conservative side)\n"
       << "- inputs: " << o.in.q << ", " << o.in.k << ", " << o.in.v << "\n"
       << "- oracle: " << fc::describe_oracle_use() << "\n\n";
    for (const auto& r : outcomes) md << "- " << verdict_line(r) << "\n";
    md << "\n## Worst elements of the candidate\n\n" << worst_table(p, v, true) << "\nA reproducer: `" << reproduce << "`\n";
    files.stage(json_path, j.dump(2) + "\n");
    files.stage(md_path, md.str());
    files.commit();
    std::cout << "report: " << md_path.string() << " and " << json_path.string() << "\n";
  } else if (violation) {
    std::cout << "reproduce: " << reproduce << "\n";
  }
  if (yardstick_failed) return 1;
  return violation ? 1 : 0;
}

void add_compare_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "Check a candidate attention output (NPY) against the error budget");
  fc::report::add_compare_flags(cmd, opts->c);
  cmd->add_option("--report", opts->report_dir, "write compare.md and compare.json into this directory");
  cmd->add_option("--worst", opts->worst, "how many worst elements to show (default 8)");
  cmd->add_flag("--quiet", opts->quiet, "only the verdict lines");
  fc::report::add_isolation_flags(cmd, opts->isolation, "a worker for a plugin --subject");
  fc::report::add_oracle_flag(cmd, opts->oracle);
  cmd->callback([opts, &exit_code] { exit_code = fc::cli::run_command("compare", [&] { return run_compare(*opts); }); });
}

}  // namespace

FC_REGISTER_COMMAND(compare, add_compare_command);
