#include "tools/report/aggregate.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fc::report {

double histogram_lower(int k) {
  if (k <= 0) return 0;
  return std::pow(10.0, kHistLowExp + (k - 1) * kHistStep);
}
double histogram_upper(int k) {
  if (k >= kHistSize - 1) return std::numeric_limits<double>::infinity();
  return std::pow(10.0, kHistLowExp + k * kHistStep);
}

void Pooled::add(const CaseRecord& c) {
  if (c.status == "skipped") {
    ++cases_skipped;
    return;
  }
  if (c.status != "ok") {
    ++cases_error;
    return;
  }
  ++cases_ok;
  elements += c.elements;
  violations += c.violations;
  nan_mismatches += c.nan_mismatches;
  max_ratio = std::max(max_ratio, c.max_ratio);
  sum_ratio += c.sum_ratio;
  max_ratio_probabilistic = std::max(max_ratio_probabilistic, c.max_ratio_probabilistic);
  max_scaled_ulps = std::max(max_scaled_ulps, c.max_scaled_ulps);
  sum_scaled_ulps += c.sum_scaled_ulps;
  max_abs_error = std::max(max_abs_error, c.max_abs_error);
  sum_abs_error += c.sum_abs_error;
  sum_sq_error += c.sum_sq_error;
  max_bound = std::max(max_bound, c.max_bound);
  sum_bound += c.sum_bound;
  max_lse_ratio = std::max(max_lse_ratio, c.max_lse_ratio);
  if (std::isfinite(c.sum_sq_error_unrounded)) {
    elements_unrounded += c.elements;
    sum_sq_error_unrounded += c.sum_sq_error_unrounded;
  }
  for (size_t k = 0; k < c.ratio_histogram.size() && k < histogram.size(); ++k) histogram[k] += c.ratio_histogram[k];
}

namespace {
double per(double sum, uint64_t n) { return n ? sum / double(n) : 0.0; }
}  // namespace

double Pooled::mean_ratio() const { return per(sum_ratio, elements); }
double Pooled::mean_scaled_ulps() const { return per(sum_scaled_ulps, elements); }
double Pooled::rmse() const { return std::sqrt(per(sum_sq_error, elements)); }
double Pooled::rmse_unrounded() const {
  return elements_unrounded ? std::sqrt(sum_sq_error_unrounded / double(elements_unrounded))
                            : std::numeric_limits<double>::quiet_NaN();
}
double Pooled::mean_abs_error() const { return per(sum_abs_error, elements); }
double Pooled::mean_bound() const { return per(sum_bound, elements); }

namespace {
// Recipe and subject order as the campaign lists them; names the campaign does not list (a JSON from
// elsewhere) follow in order of first appearance.
std::vector<std::pair<std::string, std::string>> row_keys(const ReportData& r) {
  std::vector<std::string> recipes, subjects;
  for (Recipe x : r.spec.recipes) recipes.emplace_back(recipe_spec(x).name);
  subjects = r.spec.subjects;
  for (const CaseRecord& c : r.cases) {
    const std::string rn(recipe_spec(c.recipe).name);
    if (std::find(recipes.begin(), recipes.end(), rn) == recipes.end()) recipes.push_back(rn);
    if (std::find(subjects.begin(), subjects.end(), c.subject) == subjects.end()) subjects.push_back(c.subject);
  }
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& rn : recipes)
    for (const auto& s : subjects) keys.emplace_back(rn, s);
  return keys;
}

std::vector<SummaryRow> summarise_if(const ReportData& r, bool fa3_only) {
  std::vector<SummaryRow> rows;
  for (const auto& [rn, s] : row_keys(r)) {
    SummaryRow row{rn, s, {}};
    bool any = false;
    for (const CaseRecord& c : r.cases) {
      if (recipe_spec(c.recipe).name != rn || c.subject != s) continue;
      if (fa3_only && c.distribution != Distribution::fa3_outliers) continue;
      row.pooled.add(c);
      any = true;
    }
    if (any) rows.push_back(std::move(row));
  }
  return rows;
}
}  // namespace

std::vector<SummaryRow> summarise(const ReportData& r) { return summarise_if(r, false); }
std::vector<SummaryRow> summarise_fa3(const ReportData& r) { return summarise_if(r, true); }

std::vector<PublishedRmse> fa3_published(const std::string& recipe) {
  if (recipe == "fp16") return {{"baseline FP16", 3.2e-4}, {"FA-2 FP16", 1.9e-4}, {"FA-3 FP16", 1.9e-4}};
  if (recipe == "fp8_e4m3") return {{"baseline FP8", 2.4e-2}, {"FA-3 FP8", 9.1e-3}};
  return {};
}

const char* axis_name(Axis a) {
  switch (a) {
    case Axis::n: return "n";
    case Axis::d: return "d";
    case Axis::tile: return "tile_n";
  }
  return "?";
}

Series series_by(const ReportData& r, Axis a) {
  Series out;
  for (const CaseRecord& c : r.cases) {
    if (c.status != "ok") continue;
    const double x = a == Axis::n ? double(c.n_k) : a == Axis::d ? double(c.d) : double(c.budget_tile_n);
    auto& points = out[std::string(recipe_spec(c.recipe).name)][c.subject];
    auto it = std::find_if(points.begin(), points.end(), [&](const SeriesPoint& p) { return p.x == x; });
    if (it == points.end()) {
      points.push_back({x, {}});
      it = points.end() - 1;
    }
    it->pooled.add(c);
  }
  for (auto& [rn, by_subject] : out)
    for (auto& [s, points] : by_subject)
      std::sort(points.begin(), points.end(), [](const SeriesPoint& p, const SeriesPoint& q) { return p.x < q.x; });
  return out;
}

Pooled total(const ReportData& r) {
  Pooled p;
  for (const CaseRecord& c : r.cases) p.add(c);
  return p;
}

}  // namespace fc::report
