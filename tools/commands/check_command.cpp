// `flashcheck check`: one problem, from flags or a JSON file, on one subject. Prints the verdict and
// the worst elements with their error, bound and scaled ulps — the command to reproduce a case from
// a report (cases.csv has each case's flags) or to look at a problem by hand.
#include <cmath>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/command_registry.h"
#include "tools/report/aggregate.h"
#include "tools/report/campaign.h"
#include "tools/report/list_options.h"
#include "tools/report/report_writers.h"
#include "tools/report/subject_choice.h"

namespace fc::report {
namespace {

struct CheckFlags {
  std::string subject = "emulation", recipe = "fp16", mask = "none", dist = "normal", tile, problem_file;
  int64_t n = 128, nk = 0;
  int d = 64, dv = 0, batch = 1, heads_q = 1, heads_kv = 1;
  uint64_t seed = 1;
  int worst = 10;
  bool json = false;
  bool l_from_fp32_p = false, two_level = false;
};

// A problem file: the same fields as the flags (all optional), e.g.
//   {"subject": "emulation", "recipe": "bf16", "n_q": 127, "n_k": 300, "d": 64, "mask": "causal",
//    "distribution": "sinks", "seed": 7, "tile": "64x32"}
// Unknown fields are an error, so a typo does not silently run the default.
void apply_problem_file(CheckFlags& f, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--problem: cannot read " + path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("--problem: " + path + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw UsageError("--problem: " + path + " must hold a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    try {
      if (k == "subject") f.subject = v.get<std::string>();
      else if (k == "recipe") f.recipe = v.get<std::string>();
      else if (k == "mask") f.mask = v.get<std::string>();
      else if (k == "distribution") f.dist = v.get<std::string>();
      else if (k == "tile") f.tile = v.get<std::string>();
      else if (k == "n" || k == "n_q") f.n = v.get<int64_t>();
      else if (k == "n_k") f.nk = v.get<int64_t>();
      else if (k == "d") f.d = v.get<int>();
      else if (k == "dv") f.dv = v.get<int>();
      else if (k == "batch") f.batch = v.get<int>();
      else if (k == "heads_q") f.heads_q = v.get<int>();
      else if (k == "heads_kv") f.heads_kv = v.get<int>();
      else if (k == "seed") f.seed = v.get<uint64_t>();
      else if (k == "l_from_fp32_p") f.l_from_fp32_p = v.get<bool>();
      else if (k == "two_level_accum") f.two_level = v.get<bool>();
      else throw UsageError("--problem: " + path + ": unknown field '" + k + "'");
    } catch (const nlohmann::json::exception& e) {
      throw UsageError("--problem: " + path + ": field '" + k + "' has the wrong type: " + e.what());
    }
  }
}

int run(CheckFlags f) {
  if (!f.problem_file.empty()) apply_problem_file(f, f.problem_file);
  CaseRecord c;
  c.subject = f.subject;
  c.recipe = parse_recipes("--recipe", {f.recipe}).front();
  c.distribution = parse_distributions("--dist", {f.dist}).front();
  c.mask = parse_masks("--mask", {f.mask}).front();
  c.batch = f.batch;
  c.heads_q = f.heads_q;
  c.heads_kv = f.heads_kv;
  c.n_q = f.n;
  c.n_k = f.nk > 0 ? f.nk : f.n;
  c.d = f.d;
  c.dv = f.dv > 0 ? f.dv : f.d;
  c.seed = f.seed;
  c.l_from_fp32_p = f.l_from_fp32_p;
  c.two_level_accum = f.two_level;
  if (!f.tile.empty()) {
    const TileSize t = parse_tile("--tile", f.tile);
    c.tile_m = t.m;
    c.tile_n = t.n;
  }
  const Problem p = problem_of(c);
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (f.worst < 0) throw UsageError("--worst must be >= 0");

  auto subject = open_subject(f.subject);
  const Capabilities caps = subject->capabilities();
  if (auto why = unsupported(caps, p, options_of(c)))
    throw UsageError("subject '" + f.subject + "' cannot run this problem: " + *why);
  const CaseRecord r = run_case(*subject, caps, c, f.worst);

  if (f.json) {
    ReportData one;
    one.cases.push_back(r);
    std::printf("%s\n", to_json(one)["cases"][0].dump(1).c_str());
  } else {
    std::printf("subject   %s\nrecipe    %s\nproblem   %s\ninputs    %s, seed %llu\ntile      %s\nbudget    for %s\n"
                "options   l from %s, %s\n",
                r.subject.c_str(), std::string(recipe_spec(r.recipe).name).c_str(), p.describe().c_str(),
                std::string(distribution_name(r.distribution)).c_str(), (unsigned long long)r.seed,
                tile_name({r.tile_m, r.tile_n}).c_str(), r.budget_basis.c_str(),
                r.l_from_fp32_p ? "the fp32 p (FA-2 convention)" : "the rounded P",
                r.two_level_accum ? "two-level P.V accumulation" : "one P.V accumulation chain");
    if (r.status != "ok") {
      std::printf("status    %s: %s\n", r.status.c_str(), r.message.c_str());
    } else {
      const double n = r.elements ? double(r.elements) : 1.0;
      std::printf("verdict   %s: %llu violations in %llu elements (%llu NaN mismatches)\n",
                  r.violations ? "FAIL" : "PASS", (unsigned long long)r.violations, (unsigned long long)r.elements,
                  (unsigned long long)r.nan_mismatches);
      std::printf("err/bound Max = %s (Mean = %s), probabilistic bound max %s, LSE max %s\n",
                  md_number(r.max_ratio).c_str(), md_number(r.sum_ratio / n).c_str(),
                  md_number(r.max_ratio_probabilistic).c_str(), md_number(r.max_lse_ratio).c_str());
      std::printf("ulps      Max = %sε (Mean = %sε) scaled ulps of %s\n", md_number(r.max_scaled_ulps).c_str(),
                  md_number(r.sum_scaled_ulps / n).c_str(),
                  std::string(spec(recipe_spec(r.recipe).output).name).c_str());
      std::printf("RMSE      %s, max |error| %s\n\n", md_number(std::sqrt(r.sum_sq_error / n)).c_str(),
                  md_number(r.max_abs_error).c_str());
      if (!r.worst.empty()) {
        std::printf("%-3s %-22s %14s %14s %12s %12s %10s %12s\n", "#", "element", "got", "want", "error", "bound",
                    "err/bound", "scaled ulps");
        int k = 0;
        for (const WorstRecord& w : r.worst)
          std::printf("%-3d %-22s %14.7g %14.7g %12.4g %12.4g %10.4g %12.4g\n", ++k, w.where.c_str(), w.got, w.want,
                      w.error, w.bound, w.ratio, w.scaled_ulps);
      }
    }
  }
  if (r.status == "skipped") return 2;
  return (r.status != "ok" || r.violations) ? 1 : 0;
}

void add_check(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<CheckFlags>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Run one problem on one subject and print the worst elements with error, bound and scaled ulps.");
  auto* subject = cmd->add_option("--subject,-s", f->subject, "Subject (default emulation)");
  cmd->add_option_function<std::string>(
         "--plugin", [f](const std::string& path) { f->subject = "plugin:" + path; },
         "Kernel plugin behind include/flashcheck/plugin.h (= --subject plugin:<path>)")
      ->check(CLI::ExistingFile)
      ->excludes(subject);
  cmd->add_option("--recipe,-r", f->recipe, "Recipe: " + all_recipe_names() + " (default fp16)");
  cmd->add_option("--n", f->n, "Query length n_q (default 128)");
  cmd->add_option("--nk", f->nk, "Key length n_k (default: = n)");
  cmd->add_option("--d", f->d, "Head dim (default 64)");
  cmd->add_option("--dv", f->dv, "V head dim (default: = d)");
  cmd->add_option("--batch", f->batch, "Batch (default 1)");
  cmd->add_option("--heads-q", f->heads_q, "Query heads (default 1)");
  cmd->add_option("--heads-kv", f->heads_kv, "Key/value heads (default 1)");
  cmd->add_option("--mask,-m", f->mask, "none, causal, causal-top-left, window:L,R, window-top-left:L,R");
  cmd->add_option("--dist", f->dist, "Input distribution: " + all_distribution_names() + " (default normal)");
  cmd->add_option("--seed", f->seed, "Input seed (default 1)");
  cmd->add_option("--tile,-t", f->tile, "Tile BrxBc (default: the subject's)");
  cmd->add_flag("--l-from-fp32-p", f->l_from_fp32_p,
                "Sum l from the fp32 p, not from the rounded P (the FA-2 convention; the budget follows)");
  cmd->add_flag("--two-level", f->two_level,
                "fp8: promote the P.V accumulator to fp32 every key tile (the budget follows)");
  cmd->add_option("--problem", f->problem_file,
                  "JSON file with any of: subject recipe n_q n_k d dv batch heads_q heads_kv mask distribution "
                  "seed tile l_from_fp32_p two_level_accum (flags are read first, the file overrides)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--worst", f->worst, "How many worst elements to print (default 10)");
  cmd->add_flag("--json", f->json, "Print the case record as JSON (the report's format)");
  cmd->footer("Exit: 0 within budget; 1 violations or the subject failed; 2 usage or input error.");
  cmd->callback([f, &exit_code] {
    try {
      exit_code = run(*f);
    } catch (const UsageError& e) {
      std::fprintf(stderr, "flashcheck check: error: %s\n", e.what());
      exit_code = 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "flashcheck check: error: %s\n", e.what());
      exit_code = 2;
    }
  });
}

}  // namespace
}  // namespace fc::report

FC_REGISTER_COMMAND(check, fc::report::add_check);
