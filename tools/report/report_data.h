// What a report is made of: the campaign that was asked for, the environment it ran in, and one record
// per case. Everything a writer prints is derived from this (aggregate.h), and this is exactly what
// report.json holds, so `flashcheck report --from report.json` re-renders the same report and
// `--rerun report.json` runs the same campaign again.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/subject.h"
#include "properties/distributions.h"
#include "reference/element_verdict.h"
#include "reference/recipe.h"

namespace fc::report {

inline constexpr int kReportSchemaVersion = 1;

// The campaign: the axes of the case grid and how many cases to draw from it.
struct CampaignSpec {
  std::vector<std::string> subjects;
  std::vector<Recipe> recipes;
  std::vector<int64_t> n;            // sequence lengths; each case has n_q = n_k = N
  std::vector<int> d;                // head dims (dv = d)
  std::vector<std::string> masks;    // parse_window() spellings: none, causal, window:L,R, ...
  std::vector<Distribution> distributions;
  std::vector<TileSize> tiles;       // for subjects that take any tile; others run their own set
  int batch = 1, heads_q = 2, heads_kv = 1;
  uint64_t seed = 20240711;          // FA-3's arXiv date: any fixed number would do
  int cases = 0;                     // per recipe x subject; 0 = the whole grid
  int keep_worst = 3;                // worst elements kept per case
};

// The error/bound histogram (reference/element_verdict.h, shared with the GPU oracle).
using verdict::histogram_bin;
using verdict::kHistBins;
using verdict::kHistHighExp;
using verdict::kHistLowExp;
using verdict::kHistSize;
using verdict::kHistStep;

struct WorstRecord {
  std::string where;  // "O[b,h,i,c]" or "LSE[b,h,i]"
  double got = 0, want = 0, error = 0, bound = 0, ratio = 0, scaled_ulps = 0;
};

// One case = (subject, recipe, problem shape, mask, distribution, seed, tile).
struct CaseRecord {
  std::string subject;
  Recipe recipe = Recipe::fp16;
  int batch = 1, heads_q = 1, heads_kv = 1;
  int64_t n_q = 1, n_k = 1;
  int d = 1, dv = 1;
  std::string mask = "none";
  Distribution distribution = Distribution::normal;
  uint64_t seed = 0;
  int tile_m = 0, tile_n = 0;         // what the subject was asked for (0 = its default)
  int budget_tile_n = 0;              // the softmax step the budget was derived for (0: any)
  std::string budget_basis;           // what the budget assumed, in words (properties/check_pipeline.h)
  bool l_from_fp32_p = false;         // RunOptions: l summed from the fp32 p (the FA-2 convention)
  bool two_level_accum = false;       // RunOptions: fp8 P.V promoted to fp32 every tile
  int num_splits = 1;                 // RunOptions: split-KV chunks (1 none, 0 the subject decides)
  bool fa1 = false;                   // RunOptions: FA-1 normalisation
  std::optional<double> scale;        // Problem: the softmax scale (unset: 1/sqrt(d))
  std::vector<int64_t> key_lengths;   // Problem: one per batch (empty: every key)
  double q_descale = 1, k_descale = 1, v_descale = 1;

  std::string status = "ok";          // ok | skipped (unsupported, or no memory for it) | error (the
                                      // subject failed) | crashed | timeout (its worker process died / hung)
  std::string message;                // why skipped / what failed
  double seconds = 0;

  // Measurements (status ok). Sums rather than means, so that cases pool exactly.
  uint64_t elements = 0, violations = 0, nan_mismatches = 0;
  double max_ratio = 0, sum_ratio = 0, max_ratio_probabilistic = 0;
  double max_scaled_ulps = 0, sum_scaled_ulps = 0;
  double max_abs_error = 0, sum_abs_error = 0, sum_sq_error = 0;
  double max_bound = 0, sum_bound = 0;
  double max_lse_ratio = 0;
  // Against the exact attention of the unrounded float64 inputs (fa3_outliers cases only; NaN otherwise).
  double sum_sq_error_unrounded = std::numeric_limits<double>::quiet_NaN();
  std::vector<uint64_t> ratio_histogram;  // kHistSize bins, see above
  std::vector<WorstRecord> worst;

  std::string key() const;  // a short readable identity for progress and tables
};

struct Environment {
  std::string flashcheck_version, git_commit, git_describe;
  std::string compiler, build_type, cxx_flags, cuda_build;
  std::string host, cpu, gpu, driver;
  std::string started_utc;
  int jobs = 1;
  std::string command_line;  // the flashcheck report invocation that made it
  std::string unrounded_inputs;  // how the fa3 "unrounded" inputs were obtained
  std::string oracle = "cpu";    // who judged: properties/oracle.h describe_oracle_use()
};

// Grid points a subject cannot run (its capabilities exclude the head dim, mask, tile...). They are
// not drawn as cases; the report lists how many there were and why.
struct SkipNote {
  std::string recipe, subject;
  uint64_t grid_points = 0;
  std::vector<std::string> reasons;  // distinct, at most a few
};

// A recipe as it was run: its formats and the run options, copied into the JSON so that a report
// re-rendered by a later flashcheck still shows what this one ran.
struct RecipeParams {
  std::string name, input, operand, p_format, output;
  double u_input = 0, u_output = 0;  // unit roundoffs 2^-p
  std::string accumulation, normalisation;
  bool l_from_fp32_p = false, two_level_accum = false;
};
RecipeParams recipe_params(Recipe r, const RunOptions& o);

struct ReportData {
  int schema = kReportSchemaVersion;
  CampaignSpec spec;
  Environment env;
  std::vector<RecipeParams> recipes;
  std::vector<CaseRecord> cases;
  std::vector<SkipNote> skipped;
  bool partial = false;        // interrupted: fewer cases than the campaign asked for
  uint64_t planned_cases = 0;  // how many the campaign had
  double wall_seconds = 0;
};

}  // namespace fc::report
