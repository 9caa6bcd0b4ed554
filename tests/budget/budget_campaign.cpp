// The must-show campaign: >= 10^7 checked output elements per recipe, the emulation against its budget,
// zero violations expected. Prints the figures docs/error-analysis.md quotes.
//   budget_campaign [--elements N] [--recipe NAME|all] [--seed S] [--max-keys K] [--by-distribution 1]
//                   [--per-key-eta 0] [--knot-sums 1]
// --by-distribution 1 also prints, per recipe, the max scaled ulps and max err/B of each distribution.
// --per-key-eta 0 judges with every key's weight interval from its row's eta bound (budget_terms.h row_eta_bound)
// (BudgetTerms::per_key_eta, docs/error-analysis.md §3.6). --knot-sums 1 (with it) takes the centred sums from
// the knots where certified (BudgetTerms::knot_sums, §3.18) and prints how many elements did.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "tests/budget/budget_support.h"

using namespace fc;
using namespace fc::budget_test;

int main(int argc, char** argv) {
  size_t elements = 10000000;
  std::string recipe = "all";
  uint64_t seed = 20261129;
  int64_t max_keys = 320;
  bool by_distribution = false;
  BudgetTerms terms;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string k = argv[a];
    if (k == "--elements") elements = size_t(std::atof(argv[a + 1]));
    else if (k == "--recipe") recipe = argv[a + 1];
    else if (k == "--seed") seed = std::strtoull(argv[a + 1], nullptr, 10);
    else if (k == "--max-keys") max_keys = std::atoll(argv[a + 1]);
    else if (k == "--by-distribution") by_distribution = std::atoi(argv[a + 1]) != 0;
    else if (k == "--per-key-eta") terms.per_key_eta = std::atoi(argv[a + 1]) != 0;
    else if (k == "--knot-sums") terms.knot_sums = std::atoi(argv[a + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  size_t total_violations = 0;
  std::printf("| recipe | cases | O elements | LSE rows | violations | NaN mismatches | max err/B | mean err/B | max err/B_prob | elements > B_prob | max scaled ulps | max LSE err/B | seconds |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (Recipe r : all_recipes) {
    if (recipe != "all" && recipe != recipe_spec(r).name) continue;
    const auto t0 = std::chrono::steady_clock::now();
    std::map<std::string, std::pair<double, double>> per_dist;  // max scaled ulps, max err/B
    size_t knot_elements = 0;
    const auto tally = [&](const Case& c, const CaseResult& res) {
      knot_elements += res.budget.knot_elements();
      if (!by_distribution) return;
      auto& m = per_dist[std::string(distribution_name(c.distribution))];
      m.first = std::max(m.first, res.verdict.max_scaled_ulps);
      m.second = std::max(m.second, res.verdict.max_ratio);
    };
    const Campaign cam = run_campaign(r, elements, seed + uint64_t(r), max_keys, 4e6, tally, terms);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const BudgetVerdict& v = cam.verdict;
    std::printf("| %s | %zu | %zu | %zu | %zu | %zu | %.4f | %.4f | %.4f | %zu | %.1f | %.4f | %.0f |\n",
                std::string(recipe_spec(r).name).c_str(), cam.cases, v.elements, v.lse_checked, v.violations,
                v.nan_mismatches, v.max_ratio, v.mean_ratio(), v.max_ratio_probabilistic, v.exceed_probabilistic,
                v.max_scaled_ulps, v.max_lse_ratio, s);
    std::fprintf(stderr, "%s worst case: %s\n", std::string(recipe_spec(r).name).c_str(), cam.worst_case.c_str());
    if (terms.knot_sums)
      std::fprintf(stderr, "%s: %zu of %zu elements' centred sums from the knots\n", std::string(recipe_spec(r).name).c_str(),
                   knot_elements, v.elements);
    for (const auto& [name, m] : per_dist)
      std::fprintf(stderr, "  %s: max scaled ulps %.1f, max err/B %.4f\n", name.c_str(), m.first, m.second);
    std::fflush(stdout);
    total_violations += v.violations;
  }
  std::printf("total violations: %zu\n", total_violations);
  return total_violations == 0 ? 0 : 1;
}
