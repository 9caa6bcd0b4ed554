// The budget's fp32 sums (reference/budget_sums.h, docs/error-analysis.md §3.17): the certified bound is
// at or above the exact sum, computed in MPFR from the same float64 weights, on random and hostile inputs
// (subnormal weights and values, cancellation at O, descales); and without its inflation or its absolute
// term the fp32 result falls below the exact sum on directed inputs (the controls), so both are needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "reference/budget_sums.h"
#include "reference/multiprecision.h"

namespace fc {
namespace {

using budget::ColumnSum;
using budget::ColumnSumBounds;
using budget::SumWeights;

struct Key {
  int64_t index;
  double whi, err_c, err_c_det, ep, zeta;
  float v;  // stored units
};

struct Case {
  std::vector<Key> keys;
  double O, vd, uP;
  bool l_fp32;
};

// The walk of error_budget.cpp and budget_column_sums.cuh: keys ascending, the chains restarting at every
// multiple of kSumChunk.
ColumnSumBounds run(const Case& c, double* chains_num = nullptr) {
  const budget::CentredAt at = budget::centred_at(c.O, c.vd);
  ColumnSum s;
  double sum_err_c = 0, sum_err_c_det = 0, sum_ep2 = 0;
  int64_t chunk = c.keys.empty() ? 0 : c.keys[0].index / budget::kSumChunk;
  for (const Key& k : c.keys) {
    if (k.index / budget::kSumChunk != chunk) {
      s.flush(c.l_fp32, false);
      chunk = k.index / budget::kSumChunk;
    }
    const budget::WeightInterval wi{k.whi, 0.0, k.err_c, k.err_c_det, 0.0};
    s.add(budget::sum_weights(wi, k.ep, k.zeta, c.uP, c.l_fp32), k.v, at.o, 0.0f, c.l_fp32, false);
    sum_err_c += k.err_c;
    sum_err_c_det += k.err_c_det;
    sum_ep2 += k.ep * k.ep;
  }
  s.flush(c.l_fp32, false);
  if (chains_num) *chains_num = s.num;
  return budget::column_sum_bounds(s, double(c.keys.size()), c.vd, 0.0, at.shift, sum_err_c, sum_err_c_det, sum_ep2,
                                   c.l_fp32, false);
}

struct Exact {
  mp_real num, num_det, p2, W, tp, tp_det, tp2;
};
Exact exact(const Case& c) {
  Exact e{0, 0, 0, 0, 0, 0, 0};
  const mp_real O = c.O;
  for (const Key& k : c.keys) {
    const mp_real v = mp_real(double(k.v)) * mp_real(c.vd);
    const mp_real dv = abs(v - O), av = abs(v);
    e.num += mp_real(k.err_c) * dv;
    e.num_det += mp_real(k.err_c_det) * dv;
    e.W += mp_real(k.whi) * av;
    e.p2 += (mp_real(k.ep) * dv) * (mp_real(k.ep) * dv);
    e.tp += (mp_real(c.uP) * mp_real(k.ep) + mp_real(k.zeta)) * av;
    e.tp_det += mp_real(k.zeta) * av;
    e.tp2 += (mp_real(k.ep) * av) * (mp_real(k.ep) * av);
  }
  return e;
}

// A weight: mostly ordinary, sometimes zero, tiny (fp32-subnormal or below) or an exact fp32 number.
double weight(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double r = u(rng);
  if (r < 0.05) return 0.0;
  if (r < 0.15) return std::ldexp(u(rng), -140 - int(rng() % 40));  // fp32 subnormal range and below
  if (r < 0.25) return double(float(u(rng)));                        // exact in fp32
  return std::ldexp(u(rng), -int(rng() % 30));
}
float value(std::mt19937_64& rng, bool huge) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  const unsigned r = rng() % 20;
  if (r == 0) return 0.0f;
  if (r == 1) return std::ldexp(n(rng), -135);  // subnormal
  if (r == 2 && huge) return std::ldexp(n(rng), 60);
  return n(rng);
}

Case random_case(std::mt19937_64& rng) {
  Case c;
  const int n = 1 + int(rng() % 150);
  int64_t j = int64_t(rng() % 100);
  const bool huge = rng() % 4 == 0;
  const double vds[] = {1.0, 0.37, 0x1p-5, 3.0e4};
  c.vd = vds[rng() % 4];
  c.uP = (rng() % 2) ? 0x1p-8 : 0x1p-11;
  c.l_fp32 = rng() % 3 == 0;
  double ws = 0, wv = 0;
  for (int x = 0; x < n; ++x) {
    j += 1 + int64_t(rng() % 3 == 0 ? rng() % 40 : 0);  // gaps, so that some chunks are skipped
    Key k{j, weight(rng), weight(rng), 0, weight(rng), weight(rng) * 1e-3, value(rng, huge)};
    k.err_c_det = k.err_c * 0.5;
    c.keys.push_back(k);
    ws += k.ep;
    wv += k.ep * double(k.v);
  }
  // O near the weighted mean (cancellation in |V - O|), or anywhere.
  c.O = (rng() % 2 && ws > 0 ? wv / ws : double(value(rng, false))) * c.vd;
  return c;
}

TEST(BudgetSums, RoundUpIsTheSmallestFloatAtOrAbove) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int t = 0; t < 200000; ++t) {
    const double x = std::ldexp(u(rng), int(rng() % 320) - 170);
    const float f = budget::round_up_f32(x);
    ASSERT_GE(double(f), x) << x;
    ASSERT_LT(double(std::nextafter(f, -HUGE_VALF)), x) << x;
  }
  EXPECT_EQ(budget::round_up_f32(0x1p-200), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(budget::round_up_f32(1.0), 1.0f);
  EXPECT_EQ(budget::round_up_f32(double(std::numeric_limits<float>::max()) * 1.0000001), HUGE_VALF);
}

// Each bound the convention uses at or above its exact sum; and tight: the price is the inflation, the
// weights' rounding up and the centring shift (per unit weight), far below a relative 1e-5 of the sum
// beyond those.
void check_bounds(const ColumnSumBounds& b, const Exact& e, bool l_fp32, double shift, double sum_err_c, int t) {
  ASSERT_GE(mp_real(b.num), e.num) << "case " << t;
  if (!l_fp32) {
    ASSERT_GE(mp_real(b.num_det), e.num_det) << "case " << t;
    ASSERT_GE(mp_real(b.root) * mp_real(b.root), e.p2) << "case " << t;
  } else {
    ASSERT_GE(mp_real(b.tp), e.tp) << "case " << t;
    ASSERT_GE(mp_real(b.tp_det), e.tp_det) << "case " << t;
    ASSERT_GE(mp_real(b.tp_root) * mp_real(b.tp_root), e.tp2) << "case " << t;
  }
  EXPECT_LE(mp_real(b.num), e.num * mp_real(1 + 1e-5) + mp_real(2 * shift * sum_err_c) + mp_real(1e-30)) << t;
}

TEST(BudgetSums, BoundCoversTheExactSum) {
  std::mt19937_64 rng(20261203);
  int cases = 0;
  for (int t = 0; t < 4000; ++t) {
    const Case c = random_case(rng);
    double sum_err_c = 0;
    for (const Key& k : c.keys) sum_err_c += k.err_c;
    ASSERT_NO_FATAL_FAILURE(check_bounds(run(c), exact(c), c.l_fp32, budget::centred_at(c.O, c.vd).shift, sum_err_c, t));
    ++cases;
  }
  EXPECT_EQ(cases, 4000);
}

// Controls: the fp32 chains alone fall short of the exact sum, so the inflation and the absolute term are
// both needed.
TEST(BudgetSums, WithoutTheInflationTheChainFallsShort) {
  // 1 + 31 * 2^-25: exact fp32 weights and values, so no rounding up helps; RN drops every 2^-25.
  Case c{{}, 0.0, 1.0, 0x1p-8, false};
  for (int x = 0; x < 32; ++x) c.keys.push_back({x, x == 0 ? 1.0 : 0x1p-25, x == 0 ? 1.0 : 0x1p-25, 0, 0, 0, 1.0f});
  double chains = 0;
  const ColumnSumBounds b = run(c, &chains);
  const Exact e = exact(c);
  EXPECT_LT(mp_real(chains), e.num);  // the bare chain
  EXPECT_GE(mp_real(b.num), e.num);   // the certified bound
}

TEST(BudgetSums, WithoutTheAbsoluteTermSubnormalProductsAreLost) {
  // Products below fp32's subnormal range flush to 0 in the chain.
  Case c{{}, 0.0, 1.0, 0x1p-8, false};
  for (int x = 0; x < 20; ++x) c.keys.push_back({x, 0x1p-100, 0x1p-100, 0, 0, 0, 0x1p-60f});
  double chains = 0;
  const ColumnSumBounds b = run(c, &chains);
  const Exact e = exact(c);
  EXPECT_EQ(chains, 0.0);
  EXPECT_GT(e.num, mp_real(0));
  EXPECT_GE(mp_real(b.num), e.num);
}

// The centring shift with a descale that is not a power of two: O / vd rounds, and the shift has to cover
// that too. One key at O = fl(v vd): the exact |V - O| is the product's rounding, which |v - O_f| (0, as
// fl(O / vd) is v again) does not see. The control, the shift without the division's error, falls short.
TEST(BudgetSums, CentringShiftCoversTheDivision) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  int short_without = 0;
  for (int t = 0; t < 2000; ++t) {
    const double vd = 0.37;
    const float v = g(rng);
    const double O = double(v) * vd;
    const Case c{{{0, 1.0, 1.0, 1.0, 1.0, 0.0, v}}, O, vd, 0x1p-8, false};
    const Exact e = exact(c);
    ASSERT_GE(mp_real(run(c).num), e.num) << "case " << t;
    const double os = O / vd;
    const double old_shift = vd * std::fabs(os - double(float(os)));
    const double old_num = budget::f32_sum_bound(0.0f + std::fabs(v - float(os)), 1, vd) + old_shift;
    short_without += mp_real(old_num) < e.num;
  }
  EXPECT_GT(short_without, 100);
}

// The row form (budget_sums.h RowColumnSum): every key's weights are the row's constants times E_j plus
// zeta_j, and the three chains (SL, SQ, SZ) bound the same exact sums as the per-key form's.
struct RowCase {
  std::vector<int64_t> index;
  std::vector<double> E, zeta;
  std::vector<float> v;
  double O, vd, uP;
  budget::EtaExp eta;
};
RowCase random_row_case(std::mt19937_64& rng) {
  const Case base = random_case(rng);
  RowCase c;
  c.O = base.O, c.vd = base.vd, c.uP = base.uP;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  c.eta = budget::eta_exp(rng() % 8 == 0 ? 0.05 * u(rng) : 1e-6 * (1 + u(rng)));
  for (const Key& k : base.keys) {
    c.index.push_back(k.index);
    c.E.push_back(std::min(1.0, k.ep));
    c.zeta.push_back(rng() % 10 == 0 ? weight(rng) * 1e-3 : 0.0);
    c.v.push_back(k.v);
  }
  return c;
}
// with_zeta = false leaves the zeta chain out (a control).
ColumnSumBounds run_row(const RowCase& c, bool with_zeta = true) {
  const budget::CentredAt at = budget::centred_at(c.O, c.vd);
  const budget::RowFactors f = budget::row_factors(c.eta, c.uP);
  budget::RowColumnSum s;
  double sum_err_c = 0, sum_err_c_det = 0, sum_ep2 = 0;
  int64_t chunk = c.index.empty() ? 0 : c.index[0] / budget::kSumChunk;
  for (size_t x = 0; x < c.E.size(); ++x) {
    if (c.index[x] / budget::kSumChunk != chunk) {
      s.flush();
      chunk = c.index[x] / budget::kSumChunk;
    }
    s.add(budget::row_weights(c.E[x], c.zeta[x]), c.v[x], at.o, with_zeta && c.zeta[x] > 0);
    sum_err_c += c.E[x] * f.kc + c.zeta[x];
    sum_err_c_det += c.E[x] * f.kd + c.zeta[x];
    sum_ep2 += (c.E[x] * c.eta.ep) * (c.E[x] * c.eta.ep);
  }
  s.flush();
  return budget::row_sum_bounds(s, double(c.E.size()), c.vd, 0.0, at.shift, sum_err_c, sum_err_c_det, sum_ep2, f);
}
// The exact sums of the per-key form with each key's weights from the row's constants.
Exact exact_row(const RowCase& c) {
  const budget::RowFactors f = budget::row_factors(c.eta, c.uP);
  Case k{{}, c.O, c.vd, c.uP, false};
  for (size_t x = 0; x < c.E.size(); ++x)
    k.keys.push_back({c.index[x], 0.0, c.E[x] * f.kc + c.zeta[x], c.E[x] * f.kd + c.zeta[x], c.E[x] * c.eta.ep,
                      c.zeta[x], c.v[x]});
  return exact(k);
}

TEST(BudgetSums, RowFormBoundCoversTheExactSum) {
  std::mt19937_64 rng(20261204);
  int with_zeta = 0;
  for (int t = 0; t < 4000; ++t) {
    const RowCase c = random_row_case(rng);
    const ColumnSumBounds b = run_row(c);
    const budget::RowFactors f = budget::row_factors(c.eta, c.uP);
    double sum_err_c = 0;
    for (size_t x = 0; x < c.E.size(); ++x) sum_err_c += c.E[x] * f.kc + c.zeta[x];
    ASSERT_NO_FATAL_FAILURE(check_bounds(b, exact_row(c), false, budget::centred_at(c.O, c.vd).shift, sum_err_c, t));
    EXPECT_EQ(b.vop, 0.0);
    // The excess's upper weight from e and z: at least E e^eta (1 + uP) + zeta, exactly.
    for (size_t x = 0; x < c.E.size(); ++x)
      ASSERT_GE(mp_real(double(budget::row_whi(budget::row_weights(c.E[x], c.zeta[x]), f))),
                mp_real(c.E[x]) * mp_real(c.eta.ep) * (1 + mp_real(c.uP)) + mp_real(c.zeta[x]))
          << "case " << t << " key " << x;
    for (double z : c.zeta) with_zeta += z > 0;
  }
  EXPECT_GT(with_zeta, 1000);  // the zeta chain ran
}

// Control: without the zeta chain the row form misses the underflowed keys' part.
TEST(BudgetSums, RowFormWithoutTheZetaChainFallsShort) {
  RowCase c{{}, {}, {}, {}, 0.0, 1.0, 0x1p-8, budget::eta_exp(1e-6)};
  for (int x = 0; x < 40; ++x) {
    c.index.push_back(x);
    c.E.push_back(x == 0 ? 1.0 : 1e-30);
    c.zeta.push_back(x == 0 ? 0.0 : 1e-3);
    c.v.push_back(1.0f);
  }
  const Exact e = exact_row(c);
  EXPECT_GE(mp_real(run_row(c).num), e.num);
  EXPECT_LT(mp_real(run_row(c, false).num), e.num);
}

}  // namespace
}  // namespace fc
