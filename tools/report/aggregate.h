// Pooling case records into what the tables and plots show. Every writer (markdown, CSV) and the
// consistency test go through these functions, so a number means the same thing in every file; the
// plot script computes its series independently from report.json and tests/cli checks they agree.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tools/report/report_data.h"

namespace fc::report {

// Pooled over cases: maxima are maxima, means are element-weighted (sum / elements), RMSE is
// sqrt(sum of squares / elements).
struct Pooled {
  uint64_t cases_ok = 0, cases_skipped = 0, cases_error = 0;
  uint64_t elements = 0, violations = 0, nan_mismatches = 0;
  double max_ratio = 0, sum_ratio = 0, max_ratio_probabilistic = 0;
  double max_scaled_ulps = 0, sum_scaled_ulps = 0;
  double max_abs_error = 0, sum_abs_error = 0, sum_sq_error = 0;
  double max_bound = 0, sum_bound = 0, max_lse_ratio = 0;
  uint64_t elements_unrounded = 0;
  double sum_sq_error_unrounded = 0;
  std::vector<uint64_t> histogram = std::vector<uint64_t>(kHistSize, 0);

  void add(const CaseRecord& c);
  double mean_ratio() const;
  double mean_scaled_ulps() const;
  double rmse() const;
  double rmse_unrounded() const;  // NaN when no case measured it
  double mean_abs_error() const;
  double mean_bound() const;
};

struct SummaryRow {
  std::string recipe, subject;
  Pooled pooled;
};
// One row per (recipe, subject) in campaign order (recipes, then subjects).
std::vector<SummaryRow> summarise(const ReportData& r);

// The FA-3 comparable rows: the fa3_outliers cases of each recipe x subject, pooled.
std::vector<SummaryRow> summarise_fa3(const ReportData& r);

// The paper's published RMSE (FlashAttention-3, arXiv 2407.08608, Table 3) for a recipe name.
struct PublishedRmse {
  std::string label;
  double rmse;
};
std::vector<PublishedRmse> fa3_published(const std::string& recipe);

// Per value of an axis (n_k, d or tile_n), per recipe and subject; x ascending.
enum class Axis { n, d, tile };
const char* axis_name(Axis a);
struct SeriesPoint {
  double x;
  Pooled pooled;
};
// series[recipe][subject] -> points
using Series = std::map<std::string, std::map<std::string, std::vector<SeriesPoint>>>;
Series series_by(const ReportData& r, Axis a);

// Totals over everything that ran.
Pooled total(const ReportData& r);

// Upper edge of histogram bin k (bin 0: 10^kHistLowExp; last bin: +inf) and lower edge.
double histogram_lower(int k);
double histogram_upper(int k);

}  // namespace fc::report
