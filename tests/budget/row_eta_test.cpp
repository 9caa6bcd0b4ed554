// budget_terms.h row_eta_bound (docs/error-analysis.md §3.6, the row form): at least every key's eta on
// random rows (scores of several spreads, tiles, raises, split or not, operand errors), and each of its
// choices is needed: with Delta at 0, the rescale's run at zmax, or no later raises, it falls below some
// key's eta.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "reference/budget_terms.h"

namespace fc {
namespace {

using budget::EtaTerms;

struct Row {
  double sigma, eps_max, zmax, zmin, run_first;
  int later_first;
  double largest_eta;  // max over the keys of key_eta (1 + 10^-6), as error_budget takes it
};

// A row walked as error_budget walks it: tiles in order, running maxima, the tiles that may raise them,
// each key's eta from its tile's running maximum and the raises after it.
Row random_row(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> g(0.0, 1.0);
  const int n = 1 + int(rng() % 300), tile = 1 + int(rng() % 64);
  const double spread[] = {0.5, 3.0, 30.0};
  const double sd = spread[rng() % 3], offset = 10 * g(rng);
  const bool split = rng() % 4 == 0, ramp = rng() % 3 == 0;  // ramp: rising scores, so that tiles raise
  const double eps_s = std::ldexp(1.0, -8 - int(rng() % 16)), abs_s = 0x1p-140;
  std::vector<double> z(n), R(n), op(n);
  for (int x = 0; x < n; ++x) {
    z[x] = offset + sd * g(rng) + (ramp ? 0.05 * x : 0.0);
    R[x] = std::fabs(z[x]) + u(rng) * 4;
    op[x] = rng() % 5 == 0 ? 1e-7 * u(rng) : 0.0;
  }
  Row r;
  r.sigma = std::ldexp(u(rng) + 0.5, -int(rng() % 4));
  r.eps_max = 0;
  for (int x = 0; x < n; ++x) r.eps_max = std::max(r.eps_max, eps_s * R[x] + abs_s + op[x]);
  r.zmax = *std::max_element(z.begin(), z.end());
  r.zmin = *std::min_element(z.begin(), z.end());
  const int T = (n + tile - 1) / tile;
  std::vector<double> run(T);
  std::vector<int> suffix(T + 1, 0), raise(T, 0);
  for (int t = 0; t < T; ++t) {
    const double tm = *std::max_element(z.begin() + t * tile, z.begin() + std::min(n, (t + 1) * tile));
    run[t] = t ? std::max(run[t - 1], tm) : tm;
    raise[t] = t > 0 && budget::may_raise(tm, run[t - 1], r.eps_max, split);
  }
  for (int t = T; t-- > 0;) suffix[t] = suffix[t + 1] + raise[t];
  r.run_first = run[0];
  r.later_first = suffix[1] + (split ? 1 : 0);
  r.largest_eta = 0;
  const EtaTerms all{true, true, true};
  for (int x = 0; x < n; ++x) {
    const int t = x / tile;
    const double e = budget::key_eta(r.sigma, eps_s, abs_s, R[x], op[x], r.zmax - z[x], r.zmax, run[t], r.eps_max,
                                     suffix[t + 1] + (split ? 1 : 0), all);
    r.largest_eta = std::max(r.largest_eta, e * (1 + 1e-6));
  }
  return r;
}

TEST(RowEtaBound, AtLeastEveryKeysEta) {
  std::mt19937_64 rng(20261204);
  const EtaTerms all{true, true, true};
  int delta_short = 0, run_short = 0, raises_short = 0;
  for (int t = 0; t < 20000; ++t) {
    const Row r = random_row(rng);
    ASSERT_GE(budget::row_eta_bound(r.sigma, r.eps_max, r.zmax, r.zmin, r.run_first, r.later_first, all),
              r.largest_eta)
        << "row " << t;
    // The controls: each choice at the other end of its range.
    delta_short += budget::row_eta_bound(r.sigma, r.eps_max, r.zmax, r.zmax, r.run_first, r.later_first, all) <
                   r.largest_eta;
    run_short += budget::row_eta_bound(r.sigma, r.eps_max, r.zmax, r.zmin, r.zmax, r.later_first, all) < r.largest_eta;
    raises_short += budget::row_eta_bound(r.sigma, r.eps_max, r.zmax, r.zmin, r.run_first, 0, all) < r.largest_eta;
  }
  std::cout << "of 20000 rows, the bound falls short with Delta at 0: " << delta_short << ", run at zmax: " << run_short
            << ", no later raises: " << raises_short << "\n";
  EXPECT_GT(delta_short, 5000);
  EXPECT_GT(run_short, 1000);
  EXPECT_GT(raises_short, 3000);
}

}  // namespace
}  // namespace fc
