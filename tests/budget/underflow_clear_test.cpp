// The underflow term's shortcut (reference/budget_terms.h underflow, kUnderflowClear): a product E e^-eta at
// or above fl(fl(thresh kUnderflowClear) eK) skips the division, and `underflow`'s flag is still the
// division's, fl(a / eK) < thresh, over the thresholds the budget makes (2^-124 and above) and common
// factors eK from 1 to 2^60, for products at that value, up to eight ulps above it, far above it and 2^-20
// below it. The control: without the margin (a factor of 1) the shortcut would skip some flagged products,
// so the check can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reference/budget_terms.h"

namespace fc {
namespace {

// The flag as the budget defines it, by the division.
bool flagged_by_division(double a, double eK, double thresh) { return a / eK < thresh; }

// What `underflow` says for the product a (taken as E with e^-eta = 1): a non-zero term is a flag.
bool flagged(double a, double eK, double thresh) {
  const budget::EtaExp x{1.0, 1.0, 0.0};
  const budget::Underflow uf = budget::underflow(a, x, eK, thresh, 1.0, 1.0, 0x1p-8, true);
  return uf.zeta != 0 || uf.zeta_l != 0;
}

struct Counts {
  int disagree = 0;       // underflow's flag differs from the division's
  int skipped_flag = 0;   // a product the shortcut with `margin` would skip, which the division flags
  int flagged_below = 0;  // flagged products 2^-20 below the shortcut's bound: the samples reach flags
};

Counts count(double margin) {
  std::mt19937_64 rng(20261204);
  std::uniform_real_distribution<double> log_thresh(-124.0, -100.0), log_eK(0.0, 60.0), far(1.0, 1e6);
  Counts n;
  for (int row = 0; row < 20000; ++row) {
    const double thresh = row % 10 == 0 ? 0x1p-124 : std::exp2(log_thresh(rng));
    const double eK = row % 7 == 0 ? 1.0 : std::exp2(log_eK(rng));
    const double clear = thresh * margin * eK;
    std::vector<double> as{clear, clear * far(rng), clear * (1 - 0x1p-20)};
    double up = clear;
    for (int k = 0; k < 8; ++k) as.push_back(up = std::nextafter(up, HUGE_VAL));
    for (double a : as) {
      const bool by_division = flagged_by_division(a, eK, thresh);
      n.disagree += flagged(a, eK, thresh) != by_division;
      n.skipped_flag += a >= clear && by_division;
    }
    n.flagged_below += flagged_by_division(clear * (1 - 0x1p-20), eK, thresh);
  }
  return n;
}

TEST(UnderflowClear, TheFlagIsTheDivisionsAndTheShortcutSkipsNoFlag) {
  const Counts n = count(budget::kUnderflowClear);
  EXPECT_EQ(n.disagree, 0);
  EXPECT_EQ(n.skipped_flag, 0);
  EXPECT_GT(n.flagged_below, 0);
}

TEST(UnderflowClear, WithoutTheMarginTheShortcutWouldSkipFlags) { EXPECT_GT(count(1.0).skipped_flag, 0); }

}  // namespace
}  // namespace fc
