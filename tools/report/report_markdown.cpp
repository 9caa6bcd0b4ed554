// report.md: the page a kernel engineer reads. Tables follow two published styles: Boost.Math's
// accuracy tables ("Max = x (Mean = y)" per data set and platform) and glibc's libm-test-ulps
// ("Function: ... / type: max ulps"), with error measured against the derived budget rather than a
// fixed tolerance. docs/report-format.md explains every column.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "tools/report/aggregate.h"
#include "tools/report/list_options.h"
#include "tools/report/report_writers.h"
#include "tools/report/reproducer.h"

namespace fc::report {

std::string subject_label(const std::string& subject) {
  if (subject.rfind("plugin:", 0) != 0) return subject;
  return "plugin:" + std::filesystem::path(subject.substr(7)).filename().string();
}

std::string md_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return "0";
  return fmt::format("{:.3g}", x);
}

namespace {

std::string verdict_line(const ReportData& r, const Pooled& t) {
  std::string v;
  if (t.violations == 0 && t.cases_error == 0 && t.cases_ok == 0)
    v = fmt::format("**NOTHING CHECKED**: the subjects declined all {} cases", t.cases_skipped);
  else if (t.violations == 0 && t.cases_error == 0)
    v = fmt::format("**PASS**: 0 violations in {} elements over {} cases", t.elements, t.cases_ok);
  else
    v = fmt::format("**FAIL**: {} violations in {} elements, {} failed cases, over {} cases", t.violations, t.elements,
                    t.cases_error, t.cases_ok + t.cases_error);
  if (r.partial)
    v += fmt::format(" — **PARTIAL**: interrupted after {} of {} planned cases", r.cases.size(), r.planned_cases);
  return v;
}

std::string cell_max_mean(double max, double mean, const std::string& unit = "") {
  return fmt::format("Max = {}{} (Mean = {}{})", md_number(max), unit, md_number(mean), unit);
}

}  // namespace

std::string render_markdown(const ReportData& r, const PlotStatus& plots) {
  std::string md;
  auto out = [&](const std::string& s) { md += s; };
  const Pooled t = total(r);
  const auto rows = summarise(r);

  out("# flashcheck error-budget report\n\n");
  out(verdict_line(r, t) + ".\n\n");
  out(fmt::format("Campaign of {} cases ({} planned), seed {}, {} subject(s), {} recipe(s); wall time {:.1f} s.\n\n",
                  r.cases.size(), r.planned_cases, r.spec.seed, r.spec.subjects.size(), r.spec.recipes.size(),
                  r.wall_seconds));
  out("Every element of O is compared with the float64 exact attention of the same (rounded) inputs, and its "
      "error with the a-priori bound the budget derives for it (reference/error_budget.h). A ratio "
      "error/bound above 1 is a violation. Scaled ulps are the error in ulps of the output format at the "
      "scale A = sum_j P_ij |V_jk|.\n\n");

  out("## Error against the budget, per recipe and subject\n\n");
  out("| recipe | subject | cases | elements | violations | max err/bound | mean err/bound | max scaled ulps | "
      "mean scaled ulps | RMSE | max abs error |\n");
  out("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& row : rows) {
    const Pooled& p = row.pooled;
    out(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", row.recipe, subject_label(row.subject), p.cases_ok,
                    p.elements, p.violations, md_number(p.max_ratio), md_number(p.mean_ratio()),
                    md_number(p.max_scaled_ulps), md_number(p.mean_scaled_ulps()), md_number(p.rmse()),
                    md_number(p.max_abs_error)));
  }
  out("\n");

  // Boost.Math's layout: one row per data set (here: recipe), one column per implementation.
  std::vector<std::string> subjects;
  for (const auto& row : rows)
    if (std::find(subjects.begin(), subjects.end(), row.subject) == subjects.end()) subjects.push_back(row.subject);
  std::vector<std::string> recipes;
  for (const auto& row : rows)
    if (std::find(recipes.begin(), recipes.end(), row.recipe) == recipes.end()) recipes.push_back(row.recipe);
  auto find_row = [&](const std::string& rn, const std::string& s) -> const SummaryRow* {
    for (const auto& row : rows)
      if (row.recipe == rn && row.subject == s) return &row;
    return nullptr;
  };
  out("### In Boost.Math's style\n\nError as a fraction of the budget, and in scaled ulps (ε = one ulp of the "
      "output format at the scale A):\n\n");
  out("| recipe |");
  for (const auto& s : subjects) out(fmt::format(" {} err/bound | {} scaled ulps |", subject_label(s), subject_label(s)));
  out("\n|---|");
  for (size_t i = 0; i < subjects.size(); ++i) out("---|---|");
  out("\n");
  for (const auto& rn : recipes) {
    out("| " + rn + " |");
    for (const auto& s : subjects) {
      const SummaryRow* row = find_row(rn, s);
      if (!row || !row->pooled.cases_ok) {
        out(" - | - |");
        continue;
      }
      out(" " + cell_max_mean(row->pooled.max_ratio, row->pooled.mean_ratio()) + " | " +
          cell_max_mean(row->pooled.max_scaled_ulps, row->pooled.mean_scaled_ulps(), "ε") + " |");
    }
    out("\n");
  }
  out("\n");

  out("### In glibc's libm-test-ulps style\n\nMaximal known error in scaled ulps, rounded up, per recipe and "
      "subject (\"-\": not run):\n\n```\n# Maximal error of recipes (scaled ulps of the output format):\n");
  for (const auto& rn : recipes) {
    out(fmt::format("Recipe: \"{}\":\n", rn));
    for (const auto& s : subjects) {
      const SummaryRow* row = find_row(rn, s);
      if (row && row->pooled.cases_ok)
        out(fmt::format("{}: {}\n", subject_label(s), (long long)std::ceil(row->pooled.max_scaled_ulps)));
      else
        out(fmt::format("{}: -\n", subject_label(s)));
    }
    out("\n");
  }
  out("```\n\n");

  out("## FA-3 comparable: RMSE on the FlashAttention-3 distribution\n\n");
  out("Q, K, V entries drawn from N(0,1) + N(0,100)·Bernoulli(0.001) (the fa3_outliers distribution), as in "
      "FlashAttention-3 (Shah et al., arXiv 2407.08608, §4.3, Table 3). The paper's RMSE is measured against an "
      "FP64 reference on the inputs *before* they are rounded to FP16/FP8, so its error includes input rounding. "
      "Ours is measured both ways: against the exact attention of the rounded inputs (the kernel's own error, "
      "what the budget bounds) and against the exact attention of the unrounded float64 inputs (the paper's "
      "way). The paper does not state its sequence length or head dim; ours are the campaign's shapes, pooled. "
      "The paper's FP8 baseline uses per-tensor scaling like ours; its FA-3 FP8 figure adds block quantisation "
      "and incoherent processing, which no subject here does.\n\n");
  out("| recipe | subject | cases | elements | RMSE vs exact(rounded inputs) | RMSE vs exact(unrounded fp64 inputs) | "
      "FA-3 paper, Table 3 |\n|---|---|---:|---:|---:|---:|---|\n");
  const auto fa3 = summarise_fa3(r);
  bool any_fa3 = false;
  for (const auto& row : fa3) {
    if (!row.pooled.cases_ok) continue;
    any_fa3 = true;
    std::string paper;
    for (const auto& pub : fa3_published(row.recipe)) paper += (paper.empty() ? "" : "; ") + pub.label + " " + md_number(pub.rmse);
    if (paper.empty()) paper = "(no published value)";
    out(fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", row.recipe, subject_label(row.subject), row.pooled.cases_ok,
                    row.pooled.elements, md_number(row.pooled.rmse()), md_number(row.pooled.rmse_unrounded()), paper));
  }
  if (!any_fa3) out("| - | - | 0 | 0 | - | - | no fa3_outliers case in this campaign |\n");
  out(fmt::format("\nUnrounded inputs: {}.\n\n", r.env.unrounded_inputs.empty() ? "n/a" : r.env.unrounded_inputs));

  out("## Plots\n\n");
  if (plots.made) {
    const std::vector<std::pair<std::string, std::string>> captions = {
        {"plots/ratio_histogram.png", "Histogram of error/bound per recipe (all elements; 1 = the budget)"},
        {"plots/error_vs_n.png", "Error and bound against sequence length N"},
        {"plots/error_vs_d.png", "Error and bound against head dim d"},
        {"plots/error_vs_tile.png", "Error and bound against key-tile width Bc"}};
    for (const auto& [file, caption] : captions)
      if (std::find(plots.files.begin(), plots.files.end(), file) != plots.files.end())
        out(fmt::format("**{}**\n\n![{}]({})\n\n", caption, caption, file));
    out(fmt::format("Plotted by scripts/plot_report.py with {} from report.json; plots/plots.json lists the "
                    "plotted values.\n\n", plots.python));
  } else if (!plots.requested) {
    out("> **Plots not made**: --no-plots was given.\n\n");
  } else {
    out("> **WARNING: plots not made**: " + plots.message + "\n> The tables above and report.json / CSV are complete.\n\n");
  }

  out("## Worst case per recipe and subject\n\n");
  out("| recipe | subject | case | seed | max err/bound | worst element | got | want | error | bound | scaled ulps |\n");
  out("|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
  std::vector<std::string> reproduce;
  for (const auto& row : rows) {
    const CaseRecord* worst = nullptr;
    for (const CaseRecord& c : r.cases)
      if (c.status == "ok" && recipe_spec(c.recipe).name == row.recipe && c.subject == row.subject &&
          (!worst || c.max_ratio > worst->max_ratio))
        worst = &c;
    if (!worst) continue;
    reproduce.push_back(render_command(*worst));
    const std::string shape = fmt::format("N={} d={} {} {} tile {}", worst->n_k, worst->d, worst->mask,
                                          distribution_name(worst->distribution),
                                          tile_name({worst->tile_m, worst->tile_n}));
    if (worst->worst.empty()) {
      out(fmt::format("| {} | {} | {} | {} | {} | - | | | | | |\n", row.recipe, subject_label(row.subject), shape, worst->seed,
                      md_number(worst->max_ratio)));
      continue;
    }
    const WorstRecord& w = worst->worst.front();
    out(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", row.recipe, subject_label(row.subject), shape,
                    worst->seed, md_number(worst->max_ratio), w.where, md_number(w.got), md_number(w.want),
                    md_number(w.error), md_number(w.bound), md_number(w.scaled_ulps)));
  }
  if (!reproduce.empty()) {
    out("\nReproduce a worst case (flashcheck check prints its worst elements; cases.csv has every case's "
        "arguments):\n\n```\n");
    for (const auto& line : reproduce) out(line + "\n");
    out("```\n\n");
  }

  std::vector<const CaseRecord*> failed;
  for (const CaseRecord& c : r.cases)
    if (c.status != "ok" || c.violations) failed.push_back(&c);
  if (!failed.empty()) {
    out("## Violations and failed cases\n\n| case | seed | status | violations | max err/bound | message | reproduce |\n"
        "|---|---:|---|---:|---:|---|---|\n");
    for (const CaseRecord* c : failed)
      out(fmt::format("| {} | {} | {} | {} | {} | {} | `{}` |\n", c->key(), c->seed, c->status, c->violations,
                      md_number(c->max_ratio), c->message, render_command(*c)));
    out("\n");
  }
  if (!r.skipped.empty() || t.cases_skipped) {
    out("## Skipped (outside a subject's capabilities)\n\n| recipe | subject | grid points | why (examples) |\n|---|---|---:|---|\n");
    for (const SkipNote& n : r.skipped)
      out(fmt::format("| {} | {} | {} | {} |\n", n.recipe, subject_label(n.subject), n.grid_points, join(n.reasons, "; ")));
    for (const CaseRecord& c : r.cases)
      if (c.status == "skipped") out(fmt::format("| {} | {} | 1 | {} |\n", recipe_spec(c.recipe).name, subject_label(c.subject), c.message));
    out("\n");
  }

  out("## Campaign\n\n");
  const CampaignSpec& s = r.spec;
  std::vector<std::string> ns, ds, tiles;
  for (auto n : s.n) ns.push_back(std::to_string(n));
  for (auto d : s.d) ds.push_back(std::to_string(d));
  for (const auto& tl : s.tiles) tiles.push_back(tile_name(tl));
  out(fmt::format("| axis | values |\n|---|---|\n| subjects | {} |\n| recipes | {} |\n| N (n_q = n_k) | {} |\n"
                  "| d (= dv) | {} |\n| masks | {} |\n| distributions | {} |\n| tiles (Br x Bc, any-tile subjects) | {} |\n"
                  "| batch, heads_q, heads_kv | {}, {}, {} |\n| cases per recipe x subject | {} |\n| seed | {} |\n\n",
                  join(s.subjects, ", "), join(recipe_names(s.recipes), ", "), join(ns, ", "), join(ds, ", "),
                  join(s.masks, ", "), join(distribution_names(s.distributions), ", "), join(tiles, ", "), s.batch,
                  s.heads_q, s.heads_kv, s.cases == 0 ? std::string("all") : std::to_string(s.cases), s.seed));
  out("Re-run this campaign: `flashcheck report --rerun report.json --out DIR`. Re-render this page, the CSVs "
      "and the plots from the JSON alone: `flashcheck report --from report.json`.\n\n");

  out("## Environment\n\n");
  const Environment& e = r.env;
  out(fmt::format("| | |\n|---|---|\n| flashcheck | {} (git {}) |\n| commit | {} |\n| compiler | {} ({}) |\n"
                  "| flags | `{}` |\n| CUDA build | {} |\n| host | {} |\n| CPU | {} |\n| GPU | {} |\n| driver | {} |\n"
                  "| started | {} |\n| worker threads | {} |\n| command | `{}` |\n| oracle | {} |\n\n",
                  e.flashcheck_version, e.git_describe, e.git_commit, e.compiler, e.build_type, e.cxx_flags,
                  e.cuda_build, e.host, e.cpu, e.gpu, e.driver, e.started_utc, e.jobs, e.command_line, e.oracle));
  out("### Recipes\n\n| recipe | Q,K,V | MMA operands | P | O | u(input) | u(output) | accumulation | "
      "normalisation | l from fp32 P | two-level accum |\n|---|---|---|---|---|---:|---:|---|---|---|---|\n");
  for (const RecipeParams& p : r.recipes)
    out(fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", p.name, p.input, p.operand,
                    p.p_format, p.output, md_number(p.u_input), md_number(p.u_output), p.accumulation,
                    p.normalisation, p.l_from_fp32_p ? "yes" : "no", p.two_level_accum ? "yes" : "no"));
  out("\nFP8 cases scale each tensor by a power-of-two per-tensor descale (cases.csv lists them).\n");
  return md;
}

}  // namespace fc::report
