// The budget's underflow shortcut (reference/budget_terms.h underflow_clear_factor, by which the GPU
// weights kernel skips a division per key): no product E e^-eta at or above fl(f eK) is flagged by
// `underflow`, over the thresholds the budget makes (2^-124 and above) and common factors eK from 1 to
// 2^60, for products at it, up to eight ulps above it and far above it (and 2^-20 below it, which are
// flagged). The control: f = thresh itself lets some flagged product through, so the check can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reference/budget_terms.h"

namespace fc {
namespace {

// Whether `underflow` flags the product a = E * em (taken as E with em = 1): it then returns a non-zero term.
bool flagged(double a, double eK, double thresh) {
  const budget::EtaExp x{1.0, 1.0, 0.0};
  const budget::Underflow uf = budget::underflow(a, x, eK, thresh, 1.0, 1.0, 0x1p-8, true);
  return uf.zeta != 0 || uf.zeta_l != 0;
}

struct Counts {
  int flagged_above = 0, flagged_below = 0;
};

// Over many (thresh, eK): the products at or above clear = fl(factor(thresh) eK) that are flagged, and
// those 2^-20 below it that are (they should be: the helper sees a flag where there is one).
template <class Factor>
Counts count(Factor factor) {
  std::mt19937_64 rng(20261204);
  std::uniform_real_distribution<double> log_thresh(-124.0, -100.0), log_eK(0.0, 60.0), far(1.0, 1e6);
  Counts n;
  for (int row = 0; row < 20000; ++row) {
    const double thresh = row % 10 == 0 ? 0x1p-124 : std::exp2(log_thresh(rng));
    const double eK = row % 7 == 0 ? 1.0 : std::exp2(log_eK(rng));
    const double clear = factor(thresh) * eK;
    std::vector<double> above{clear, clear * far(rng)};
    double up = clear;
    for (int k = 0; k < 8; ++k) above.push_back(up = std::nextafter(up, HUGE_VAL));
    for (double a : above) n.flagged_above += flagged(a, eK, thresh);
    n.flagged_below += flagged(clear * (1 - 0x1p-20), eK, thresh);
  }
  return n;
}

TEST(UnderflowClear, NoProductAtOrAboveItIsFlagged) {
  const Counts n = count(budget::underflow_clear_factor);
  EXPECT_EQ(n.flagged_above, 0);
  EXPECT_GT(n.flagged_below, 0);
}

TEST(UnderflowClear, TheThresholdItselfIsNotEnough) {
  EXPECT_GT(count([](double thresh) { return thresh; }).flagged_above, 0);
}

}  // namespace
}  // namespace fc
