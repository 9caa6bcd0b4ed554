// The budget's e^{±eta} (reference/budget_terms.h eta_exp, docs/error-analysis.md §3.6): for eta up to
// kSmallEta the Taylor polynomial expm1_small is within one ulp of the exact e^x - 1 and e^-x (MPFR, 50
// digits) over the whole range, down to subnormal x; a polynomial cut after x^3 is not (the control: the
// check can fail); above the threshold eta_exp is the library's, and NaN stays NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "reference/budget_terms.h"
#include "reference/formats.h"
#include "reference/multiprecision.h"

namespace fc {
namespace {

// |got - exact| in ulps of the double nearest the exact value.
double ulps(double got, const mp_real& exact) {
  return static_cast<double>(abs(mp_real(got) - exact)) / ulp(Format::fp64, static_cast<double>(exact));
}

// Magnitudes log-uniform from 2^-1074 to kSmallEta, both signs, and the ends.
std::vector<double> small_arguments() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> expo(-1074.0, -8.0);
  std::vector<double> xs{0.0, budget::kSmallEta, -budget::kSmallEta, std::numeric_limits<double>::denorm_min(),
                         1e-6, -1e-6};
  for (int k = 0; k < 20000; ++k) {
    const double x = std::min(std::exp2(expo(rng)), budget::kSmallEta);
    xs.push_back(k % 2 ? -x : x);
  }
  return xs;
}

double worst_expm1_ulps(double (*f)(double)) {
  double worst = 0;
  for (const double x : small_arguments()) {
    if (x == 0) {
      EXPECT_EQ(f(x), 0.0);
      continue;
    }
    worst = std::max(worst, ulps(f(x), expm1(mp_real(x))));
  }
  return worst;
}

TEST(EtaExp, SmallPolynomialIsWithinAnUlp) {
  const double worst = worst_expm1_ulps(budget::expm1_small);
  EXPECT_LE(worst, 1.0);
  RecordProperty("worst_ulps", std::to_string(worst));
  // e^-x as 1 + expm1_small(-x), as eta_exp takes it.
  double worst_em = 0;
  for (const double x : small_arguments())
    worst_em = std::max(worst_em, ulps(1 + budget::expm1_small(-x), exp(mp_real(-x))));
  EXPECT_LE(worst_em, 1.0);
}

// The control: the same Horner form cut after x^3 misses by far more than an ulp near the threshold.
double expm1_cubic(double x) { return std::fma(x * x, std::fma(x, 1.0 / 6, 0.5), x); }
TEST(EtaExp, ACutPolynomialIsCaught) { EXPECT_GT(worst_expm1_ulps(expm1_cubic), 1.0); }

TEST(EtaExp, LargeEtaTakesTheLibraryAndNaNStays) {
  for (const double eta : {0x1p-8 * (1 + 0x1p-52), 0.01, 0.7, 30.0}) {
    const budget::EtaExp e = budget::eta_exp(eta);
    EXPECT_EQ(e.epm1, std::expm1(eta));
    EXPECT_EQ(e.em, std::exp(-eta));
    EXPECT_EQ(e.ep, 1 + std::expm1(eta));
  }
  const budget::EtaExp n = budget::eta_exp(std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isnan(n.ep) && std::isnan(n.em) && std::isnan(n.epm1));
  const budget::EtaExp s = budget::eta_exp(1e-6);  // the usual case: the polynomial
  EXPECT_EQ(s.epm1, budget::expm1_small(1e-6));
  EXPECT_EQ(s.em, 1 + budget::expm1_small(-1e-6));
}

}  // namespace
}  // namespace fc
