// `flashcheck report`: the main job. Runs an error-budget campaign (the embedded default when no flag
// is given) and writes report.md, report.json, summary.csv, cases.csv and plots/ into one folder.
// `--from report.json` re-renders a folder from its JSON; `--rerun report.json` runs its campaign again.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "properties/oracle.h"
#include "tools/command_registry.h"
#include "tools/report/aggregate.h"
#include "tools/report/atomic_file.h"
#include "tools/report/campaign.h"
#include "tools/report/environment.h"
#include "tools/report/interrupt.h"
#include "tools/report/list_options.h"
#include "tools/report/oracle_option.h"
#include "tools/report/report_writers.h"
#include "tools/report/resources.h"
#include "tools/report/subject_choice.h"

namespace fc::report {
namespace {

namespace fs = std::filesystem;

struct ReportFlags {
  std::vector<std::string> recipes, subjects, n, d, masks, distributions, tiles;
  // Unset: the default campaign's (or the --rerun JSON's) value.
  std::optional<int> batch, heads_q, heads_kv, cases;
  std::optional<uint64_t> seed;
  std::string out = "flashcheck-report";
  int jobs = 0;
  std::string from, rerun, progress = "auto";
  bool no_plots = false, quiet = false, dry_run = false;
  Isolation isolation;
  std::string oracle;
};

// The command line that reproduces a campaign, spelled out in full (the report records it).
std::string command_for(const CampaignSpec& s, const std::string& out) {
  std::vector<std::string> ns, ds, tiles;
  for (auto n : s.n) ns.push_back(std::to_string(n));
  for (auto d : s.d) ds.push_back(std::to_string(d));
  for (const auto& t : s.tiles) tiles.push_back(tile_name(t));
  return fmt::format(
      "flashcheck report --subjects {} --recipes {} --n {} --d {} --masks '{}' --distributions {} --tiles {} "
      "--batch {} --heads-q {} --heads-kv {} --seed {} --cases {} --oracle {} --out {}",
      join(s.subjects), join(recipe_names(s.recipes)), join(ns), join(ds), join(s.masks, ";"),
      join(distribution_names(s.distributions)), join(tiles), s.batch, s.heads_q, s.heads_kv, s.seed, s.cases,
      oracle_name(current_oracle()), out);
}

int exit_code_for(const ReportData& r) {
  const Pooled t = total(r);
  if (r.partial) return 130;
  if (t.violations || t.cases_error) return 1;
  return t.cases_ok ? 0 : 2;  // every case declined (refused, or no memory): nothing was checked
}

void print_summary(const ReportData& r, const PlotStatus& plots, const fs::path& folder) {
  const Pooled t = total(r);
  std::printf("%-9s %-12s %6s %10s %10s %12s %12s %10s\n", "recipe", "subject", "cases", "elements", "violations",
              "max err/bnd", "max s.ulps", "RMSE");
  for (const auto& row : summarise(r))
    std::printf("%-9s %-12s %6llu %10llu %10llu %12s %12s %10s\n", row.recipe.c_str(), subject_label(row.subject).c_str(),
                (unsigned long long)row.pooled.cases_ok, (unsigned long long)row.pooled.elements,
                (unsigned long long)row.pooled.violations, md_number(row.pooled.max_ratio).c_str(),
                md_number(row.pooled.max_scaled_ulps).c_str(), md_number(row.pooled.rmse()).c_str());
  std::printf("%s: %llu violations, %llu failed cases, %zu cases%s; report in %s/report.md\n",
              (t.violations || t.cases_error) ? "FAIL" : t.cases_ok ? "PASS" : "NOTHING CHECKED",
              (unsigned long long)t.violations,
              (unsigned long long)t.cases_error, r.cases.size(), r.partial ? " (PARTIAL: interrupted)" : "",
              folder.string().c_str());
  if (plots.requested && !plots.made) std::fprintf(stderr, "flashcheck report: WARNING: plots not made: %s\n", plots.message.c_str());
}

int render_from(const ReportFlags& f, bool out_given) {
  const fs::path json = f.from;
  ReportData r = read_report(json);
  const fs::path folder = out_given ? fs::path(f.out) : json.parent_path().empty() ? fs::path(".") : json.parent_path();
  std::error_code ec;
  const bool same = fs::exists(folder / "report.json") && fs::equivalent(folder / "report.json", json, ec);
  StagedFiles files;
  const PlotStatus plots = write_report(r, folder, files, !same, !f.no_plots);
  print_summary(r, plots, folder);
  return r.partial ? (total(r).violations || total(r).cases_error ? 1 : 0) : exit_code_for(r);
}

CampaignSpec spec_from_flags(const ReportFlags& f) {
  CampaignSpec s;
  if (!f.rerun.empty()) {
    s = read_report(f.rerun).spec;
  } else {
    std::vector<std::string> subjects = f.subjects.empty() ? default_subjects() : f.subjects;
    if (subjects.empty())
      throw UsageError("no subject available: this flashcheck was built without the subject registry "
                       "(kernels/subject_registry.cpp)");
    s = default_campaign(subjects);
  }
  if (!f.subjects.empty()) s.subjects = f.subjects;
  if (!f.recipes.empty()) s.recipes = parse_recipes("--recipes", f.recipes);
  if (!f.n.empty()) s.n = parse_sizes("--n", f.n, 1 << 16);
  if (!f.d.empty()) {
    s.d.clear();
    for (auto v : parse_sizes("--d", f.d, 1024)) s.d.push_back(int(v));
  }
  if (!f.masks.empty()) s.masks = parse_masks("--masks", f.masks);
  if (!f.distributions.empty()) s.distributions = parse_distributions("--distributions", f.distributions);
  if (!f.tiles.empty()) s.tiles = parse_tiles("--tiles", f.tiles);
  if (f.batch) s.batch = *f.batch;
  if (f.heads_q) s.heads_q = *f.heads_q;
  if (f.heads_kv) s.heads_kv = *f.heads_kv;
  if (f.seed) s.seed = *f.seed;
  if (f.cases) s.cases = *f.cases;
  validate_campaign(s);
  return s;
}

int run(const ReportFlags& f, bool out_given) {
  if (!f.from.empty()) return render_from(f, out_given);

  // From here on, Ctrl-C means "stop after the case in hand and write what there is".
  install_interrupt_handler();
  choose_oracle(f.oracle);
  const CampaignSpec spec = spec_from_flags(f);
  // Open every subject before any work: an unknown name or a missing GPU is a usage error, now.
  std::map<std::string, Capabilities> caps;
  for (const auto& s : spec.subjects) caps[s] = open_subject(s, f.isolation)->capabilities();
  const Plan plan = plan_campaign(spec, caps);
  if (f.dry_run) {
    for (const auto& c : plan.cases) std::printf("%s seed=%llu\n", c.key().c_str(), (unsigned long long)c.seed);
    for (const auto& n : plan.skipped)
      std::printf("skipped %s %s: %llu grid points (%s)\n", n.recipe.c_str(), n.subject.c_str(),
                  (unsigned long long)n.grid_points, join(n.reasons, "; ").c_str());
    std::printf("%zu cases\n", plan.cases.size());
    return 0;
  }
  if (plan.cases.empty()) {
    std::string why;
    for (const auto& n : plan.skipped) why += "\n  " + n.recipe + " on " + n.subject + ": " + join(n.reasons, "; ");
    throw UsageError("no case of this campaign can run on its subjects:" + why);
  }
  // The memory guard, before any case allocates: the largest case must fit in the machine's memory,
  // and the workers run no more cases at once than fit together.
  int jobs = f.jobs > 0 ? f.jobs : std::max(1u, std::thread::hardware_concurrency());
  {
    std::vector<std::pair<double, const CaseRecord*>> needs;
    for (const auto& c : plan.cases) needs.push_back({host_bytes_for_case(problem_of(c)), &c});
    std::sort(needs.begin(), needs.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    // Every case, largest first: host memory, and device memory for the cases of our CUDA subjects run in
    // this process (a case's device need grows with its split count, which its host need does not show).
    for (const auto& [need, c] : needs)
      require_memory_for_case(c->subject, problem_of(*c), options_of(*c), f.isolation,
                              std::string(c == needs.front().second ? "the campaign's largest case" : "a case of the campaign") +
                                  " (" + problem_of(*c).describe() + ")");
    const double avail = available_host_bytes();
    double together = 0;
    int fit = 0;
    for (const auto& [need, c] : needs) {
      if (fit == jobs || together + need > avail) break;
      together += need;
      ++fit;
    }
    if (fit < jobs && size_t(fit) < needs.size()) {
      if (!f.quiet)
        std::fprintf(stderr, "flashcheck report: running %d case(s) at a time, not %d: the %d largest cases together "
                     "would need more than the %s of memory available\n", fit, jobs, jobs, bytes_text(avail).c_str());
      jobs = fit;
    }
  }
  // Fail on an unwritable folder before the campaign, not after a minute of work. The folder, when
  // this run creates it, goes again if the report cannot be written.
  const fs::path folder = f.out;
  StagedFiles files;
  files.create_folder(folder);

  RunSettings settings;
  settings.jobs = jobs;
  settings.quiet = f.quiet;
  settings.interactive = f.progress == "live" ? 1 : f.progress == "lines" ? 0 : -1;

  ReportData r;
  r.spec = spec;
  r.env = capture_environment(jobs, command_for(spec, f.out));
  for (Recipe rc : spec.recipes) {
    RunOptions o;
    o.recipe = rc;
    r.recipes.push_back(recipe_params(rc, o));
  }
  CampaignResult result =
      run_campaign(spec, [&f](const std::string& name) { return open_subject(name, f.isolation); }, settings);
  r.cases = std::move(result.cases);
  r.skipped = std::move(result.skipped);
  r.planned_cases = result.planned;
  r.partial = result.partial;
  r.wall_seconds = result.wall_seconds;
  r.env.unrounded_inputs = result.unrounded_source;
  r.env.oracle = describe_oracle_use();

  const PlotStatus plots = write_report(r, folder, files, true, !f.no_plots);
  print_summary(r, plots, folder);
  return exit_code_for(r);
}

void add_report(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Run an error-budget campaign and write report.md, report.json, summary.csv, cases.csv and plots/.\n"
      "With no flags: the embedded default campaign (every recipe; the CPU emulation, plus the CUDA kernel "
      "when a GPU is present; N 64,127,256,513; d 32,64,128; masks none,causal; six distributions incl. "
      "fa3_outliers; 48 cases per recipe x subject; seed 20240711). Flags override single axes.");
  cmd->add_option("--recipes", flags->recipes, "Recipes, comma separated: " + all_recipe_names() + ", or all")
      ->delimiter(',');
  cmd->add_option("--subjects", flags->subjects,
                  "Subjects: emulation, emulation+bug:<name>, cuda, cuda-naive, plugin:<path> (default: emulation, "
                  "and cuda when a GPU is usable)")
      ->delimiter(',');
  // --plugin P is --subjects plugin:P, spelled the way the C ABI's users look for it.
  cmd->add_option_function<std::vector<std::string>>(
         "--plugin",
         [flags](const std::vector<std::string>& paths) {
           for (const auto& p : paths) flags->subjects.push_back("plugin:" + p);
         },
         "Kernel plugin(s) behind include/flashcheck/plugin.h to add as subjects (= --subjects plugin:<path>)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--n", flags->n, "Sequence lengths N (n_q = n_k = N), comma separated")->delimiter(',');
  cmd->add_option("--d", flags->d, "Head dims d (= dv), comma separated")->delimiter(',');
  cmd->add_option("--masks", flags->masks, "Masks: none, causal, causal-top-left, window:L,R ... (use ';' between "
                                           "window masks)")
      ->delimiter(';');
  cmd->add_option("--distributions,--dist", flags->distributions,
                  "Input distributions: " + all_distribution_names() + ", or all")
      ->delimiter(',');
  cmd->add_option("--tiles", flags->tiles, "Tiles BrxBc for subjects that take any tile, e.g. 16x16,64x32")
      ->delimiter(',');
  cmd->add_option("--batch", flags->batch, "Batch size (default 1)");
  cmd->add_option("--heads-q", flags->heads_q, "Query heads (default 2)");
  cmd->add_option("--heads-kv", flags->heads_kv, "Key/value heads, dividing --heads-q (default 1: GQA)");
  cmd->add_option("--seed", flags->seed, "Campaign seed (default 20240711); every case's inputs derive from it");
  cmd->add_option("--cases", flags->cases, "Cases per recipe x subject drawn from the grid; 0 = the whole grid "
                                           "(default 48)");
  auto* out = cmd->add_option("--out,-o", flags->out, "Output folder (default flashcheck-report)");
  cmd->add_option("--jobs,-j", flags->jobs, "Worker threads (default: all cores)");
  auto* from = cmd->add_option("--from", flags->from,
                               "Re-render md, CSV and plots from an existing report.json (runs nothing)")
                   ->check(CLI::ExistingFile);
  cmd->add_option("--rerun", flags->rerun, "Run the campaign recorded in a report.json again (other flags override)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--progress", flags->progress, "Progress display: auto (live line on a terminal, periodic lines "
                                                 "otherwise), live, lines")
      ->check(CLI::IsMember({"auto", "live", "lines"}));
  cmd->add_flag("--no-plots", flags->no_plots, "Do not run the plot script");
  cmd->add_flag("--quiet,-q", flags->quiet, "No progress output");
  cmd->add_flag("--dry-run", flags->dry_run, "Print the cases the campaign would run, and exit");
  add_isolation_flags(cmd, flags->isolation, "a worker for plugins");
  add_oracle_flag(cmd, flags->oracle);
  for (const char* name : {"--recipes", "--subjects", "--plugin", "--n", "--d", "--masks", "--distributions", "--tiles", "--batch",
                           "--heads-q", "--heads-kv", "--seed", "--cases", "--rerun", "--dry-run", "--jobs", "--oracle"})
    from->excludes(cmd->get_option(name));
  cmd->footer("Exit: 0 every element within budget; 1 violations or a failed case (an error, a crash or a hang of "
              "the subject); 2 usage or input error, a campaign larger than the machine's memory, or one whose "
              "every case the subjects declined; "
              "130 interrupted by Ctrl-C (a partial report, marked \"partial\": true, is written first).");
  cmd->callback([flags, out, &exit_code] {
    exit_code = fc::cli::run_command("report", [&] { return run(*flags, out->count() > 0); });
  });
}

}  // namespace
}  // namespace fc::report

FC_REGISTER_COMMAND(report, fc::report::add_report);
