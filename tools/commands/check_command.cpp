// `flashcheck check`: one problem, from flags or a JSON file, on one subject. Prints the verdict and
// the worst elements with their error, bound and scaled ulps — the command to reproduce a case from
// a report (cases.csv has each case's flags) or to look at a problem by hand.
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "properties/oracle.h"

#include "tools/command_registry.h"
#include "tools/report/aggregate.h"
#include "tools/report/campaign.h"
#include "tools/report/list_options.h"
#include "tools/report/oracle_option.h"
#include "tools/report/report_writers.h"
#include "tools/report/reproducer.h"
#include "tools/report/subject_choice.h"

namespace fc::report {
namespace {

// How the case is run and printed (the case itself is CheckFlags, tools/report/reproducer.h).
struct CheckSettings {
  int worst = 10;
  bool json = false;
  Isolation isolation;
  std::string oracle;
};

int run(const CheckFlags& f, const CheckSettings& o) {
  const CaseRecord c = case_from_flags(f);
  const Problem p = problem_of(c);
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (o.worst < 0) throw UsageError("--worst must be >= 0");
  choose_oracle(o.oracle);
  // Before anything is allocated: a problem larger than the machine is refused with the size it needs.
  require_memory_for_case(c.subject, p, options_of(c), o.isolation, "this problem (" + p.describe() + ")");

  auto subject = open_subject(c.subject, o.isolation);
  const Capabilities caps = subject->capabilities();
  if (auto why = unsupported(caps, p, options_of(c)))
    throw UsageError("subject '" + c.subject + "' cannot run this problem: " + *why);
  const CaseRecord r = run_case(*subject, caps, c, o.worst);

  if (o.json) {
    ReportData one;
    one.cases.push_back(r);
    auto j = to_json(one)["cases"][0];
    j["reproduce"] = render_command(r);
    j["oracle"] = describe_oracle_use();
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("subject   %s\nrecipe    %s\nproblem   %s\ninputs    %s, seed %llu\ntile      %s\nbudget    for %s\n"
                "options   l from %s, %s\n",
                r.subject.c_str(), std::string(recipe_spec(r.recipe).name).c_str(), p.describe().c_str(),
                std::string(distribution_name(r.distribution)).c_str(), (unsigned long long)r.seed,
                tile_name({r.tile_m, r.tile_n}).c_str(), r.budget_basis.c_str(),
                r.l_from_fp32_p ? "the fp32 p (FA-2 convention)" : "the rounded P",
                r.two_level_accum ? "two-level P.V accumulation" : "one P.V accumulation chain");
    std::printf("reproduce %s\n", render_command(r).c_str());
    std::printf("oracle    %s\n", describe_oracle_use().c_str());
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
  auto o = std::make_shared<CheckSettings>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Run one problem on one subject and print the worst elements with error, bound and scaled ulps.");
  add_check_flags(cmd, f);
  cmd->add_option("--worst", o->worst, "How many worst elements to print (default 10)");
  cmd->add_flag("--json", o->json, "Print the case record as JSON (the report's format)");
  add_isolation_flags(cmd, o->isolation, "a worker for plugins");
  add_oracle_flag(cmd, o->oracle);
  cmd->footer("Exit: 0 within budget; 1 violations, or the subject failed, crashed or hung; 2 usage or input error, "
              "or a case that cannot run here (refused, or more memory than there is).");
  cmd->callback([f, o, &exit_code] { exit_code = fc::cli::run_command("check", [&] { return run(*f, *o); }); });
}

}  // namespace
}  // namespace fc::report

FC_REGISTER_COMMAND(check, fc::report::add_check);
