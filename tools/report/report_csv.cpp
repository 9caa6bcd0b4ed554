// CSV for spreadsheets and pandas: summary.csv (one row per recipe x subject, the markdown table's
// columns at full precision) and cases.csv (one row per case, with everything needed to rerun it).
#include <cmath>

#include <fmt/format.h>

#include "tools/report/aggregate.h"
#include "tools/report/list_options.h"
#include "tools/report/report_writers.h"
#include "tools/report/reproducer.h"

namespace fc::report {

namespace {
std::string full(double x) { return fmt::format("{}", x); }  // shortest round-trip text

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
}  // namespace

std::string render_summary_csv(const ReportData& r) {
  std::string csv =
      "recipe,subject,cases,cases_failed,elements,violations,nan_mismatches,max_ratio,mean_ratio,"
      "max_ratio_probabilistic,max_scaled_ulps,mean_scaled_ulps,rmse,max_abs_error,mean_abs_error,mean_bound,"
      "max_lse_ratio,fa3_rmse,fa3_rmse_unrounded\n";
  const auto fa3 = summarise_fa3(r);
  for (const auto& row : summarise(r)) {
    const Pooled& p = row.pooled;
    std::string fa3_rmse, fa3_unrounded;
    for (const auto& f : fa3)
      if (f.recipe == row.recipe && f.subject == row.subject && f.pooled.cases_ok) {
        fa3_rmse = full(f.pooled.rmse());
        fa3_unrounded = full(f.pooled.rmse_unrounded());
      }
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", row.recipe, csv_field(row.subject),
                       p.cases_ok, p.cases_error, p.elements, p.violations, p.nan_mismatches, full(p.max_ratio),
                       full(p.mean_ratio()), full(p.max_ratio_probabilistic), full(p.max_scaled_ulps),
                       full(p.mean_scaled_ulps()), full(p.rmse()), full(p.max_abs_error), full(p.mean_abs_error()),
                       full(p.mean_bound()), full(p.max_lse_ratio), fa3_rmse, fa3_unrounded);
  }
  return csv;
}

std::string render_cases_csv(const ReportData& r) {
  std::string csv =
      "subject,recipe,batch,heads_q,heads_kv,n_q,n_k,d,dv,mask,distribution,seed,tile_m,tile_n,budget_tile_n,"
      "q_descale,k_descale,v_descale,status,elements,violations,max_ratio,mean_ratio,max_scaled_ulps,"
      "mean_scaled_ulps,rmse,rmse_unrounded,max_abs_error,max_bound,seconds,message,reproduce\n";
  for (const CaseRecord& c : r.cases) {
    const double n = c.elements ? double(c.elements) : 1.0;
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
        csv_field(c.subject), recipe_spec(c.recipe).name, c.batch, c.heads_q, c.heads_kv, c.n_q, c.n_k, c.d, c.dv,
        csv_field(c.mask), distribution_name(c.distribution), c.seed, c.tile_m, c.tile_n, c.budget_tile_n,
        full(c.q_descale), full(c.k_descale), full(c.v_descale), c.status, c.elements, c.violations,
        full(c.max_ratio), full(c.sum_ratio / n), full(c.max_scaled_ulps), full(c.sum_scaled_ulps / n),
        full(std::sqrt(c.sum_sq_error / n)), std::isfinite(c.sum_sq_error_unrounded) ? full(std::sqrt(c.sum_sq_error_unrounded / n)) : "",
        full(c.max_abs_error), full(c.max_bound), full(c.seconds), csv_field(c.message), csv_field(render_command(c)));
  }
  return csv;
}

}  // namespace fc::report
