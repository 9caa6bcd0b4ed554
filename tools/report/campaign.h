// The campaign runner: expands a CampaignSpec into cases, runs each one (subject -> float64 exact
// attention -> error budget -> check against the budget) on a few worker threads, and returns the
// records in plan order, so the report does not depend on thread timing.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/subject.h"
#include "tools/report/report_data.h"

namespace fc::report {

using SubjectFactory = std::function<std::unique_ptr<Subject>(const std::string& name)>;

struct Plan {
  std::vector<CaseRecord> cases;  // identity fields only
  std::vector<SkipNote> skipped;
};

// Draws the cases: for each recipe and subject, the grid N x d x mask x distribution x tile (the spec's
// tiles for a subject that takes any tile, the subject's own list otherwise) restricted to what the
// subject supports, then `spec.cases` of them (all when 0) in a seeded order that first covers every
// value of every axis. The selection and the input seeds depend on the recipe and the grid point, not
// on the subject, so two subjects are compared on identical inputs.
Plan plan_campaign(const CampaignSpec& spec, const std::map<std::string, Capabilities>& caps);

// The seed of a grid point's inputs.
uint64_t case_seed(uint64_t campaign_seed, Recipe r, int64_t n, int d, const std::string& mask, Distribution dist);

// The problem and the run options a case record describes (descales come from the inputs' generator).
Problem problem_of(const CaseRecord& c);
RunOptions options_of(const CaseRecord& c);

struct RunSettings {
  int jobs = 1;
  bool quiet = false;
  int interactive = -1;          // progress style: -1 from isatty, 0 plain periodic lines, 1 live line
  double progress_period = 10;   // seconds between plain lines
};

struct CampaignResult {
  std::vector<CaseRecord> cases;  // the finished ones, plan order
  std::vector<SkipNote> skipped;
  uint64_t planned = 0;
  bool partial = false;           // interrupted before every planned case ran
  std::string unrounded_source;   // fa3_outliers: where the unrounded inputs came from
  double wall_seconds = 0;
};

// Runs one case. `run_lock`, when given, is held around the subject's run (a GPU subject shared by the
// workers). Never throws for a subject's failure: the record says status "error" and why.
CaseRecord run_case(Subject& subject, const Capabilities& caps, CaseRecord c, int keep_worst,
                    std::mutex* run_lock = nullptr, std::string* unrounded_source = nullptr);

// Stops starting cases when interrupted() turns true (interrupt.h); cases in hand finish.
CampaignResult run_campaign(const CampaignSpec& spec, const SubjectFactory& make, const RunSettings& settings);

}  // namespace fc::report
