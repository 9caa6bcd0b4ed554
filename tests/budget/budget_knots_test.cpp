// The knot form of the centred sums (reference/budget_knots.h, docs/error-analysis.md §3.18): its fp16
// roundings are single roundings in the stated direction; its bounds are at or above the exact sums (MPFR) on
// random tiles of every 16- and 8-bit V format, hostile values included, whether or not the certificate holds;
// the certificate covers what the interpolation adds; and the controls show that the bracket and the operands'
// rounding terms are needed. The budget takes the knots on long rows of flat attention, within their tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/distributions.h"
#include "reference/budget_knot_walk.h"
#include "reference/budget_knots.h"
#include "reference/error_budget.h"
#include "reference/multiprecision.h"

namespace fc {
namespace {

using namespace budget;

TEST(KnotRounding, ToFp16RoundsOnceInEachDirection) {
  std::vector<double> values;  // every finite fp16 number, ascending
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const double v = decode(Format::fp16, bits);
    if (std::isfinite(v) && !(v == 0 && std::signbit(v))) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const double a = values[i], b = values[i + 1];
    for (double x : {a, b}) {
      ASSERT_EQ(to_fp16(x, Round16::up), x);
      ASSERT_EQ(to_fp16(x, Round16::down), x);
      ASSERT_EQ(to_fp16(x, Round16::nearest), x);
    }
    const double x = a + (b - a) * (0.001 + 0.998 * u(rng));  // strictly between
    ASSERT_EQ(to_fp16(x, Round16::up), b) << x;
    ASSERT_EQ(to_fp16(x, Round16::down), a) << x;
    ASSERT_EQ(to_fp16(x, Round16::nearest), round_to(Format::fp16, x)) << x;
  }
}

TEST(KnotRounding, ScaleBringsTheLargestIntoItsRange) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.5, 1.0);
  for (int t = 0; t < 10000; ++t) {
    const double m = std::ldexp(u(rng), int(rng() % 400) - 200);
    const double s = fp16_scale(m);
    ASSERT_EQ(s, std::ldexp(1.0, std::ilogb(s)));  // a power of two
    ASSERT_GE(m * s, 0x1p14);
    ASSERT_LT(m * s, 0x1p15);
  }
  EXPECT_EQ(fp16_scale(0.0), 1.0);
}

// A tile of one column: V's stored values, its descale, and per row the fp32 weights e and o (stored units).
struct Tile {
  std::vector<double> v;
  double vd = 1;
  std::vector<std::vector<float>> e;
  std::vector<float> o;
};

Format v_format(std::mt19937_64& rng) {
  const Format fs[] = {Format::bf16, Format::fp16, Format::e4m3, Format::e5m2};
  return fs[rng() % 4];
}

Tile random_tile(std::mt19937_64& rng) {
  Tile t;
  const Format f = v_format(rng);
  const int n = 1 + int(rng() % (rng() % 4 == 0 ? 1500 : 300));
  const int rows = 1 + int(rng() % kKnotRows);
  std::normal_distribution<double> g;
  const double mean = (rng() % 4 == 0) ? 3.0 : 0.0, sd = std::ldexp(1.0, int(rng() % 9) - 4);
  const double vds[] = {1.0, 0.37, 0x1p-5};
  t.vd = vds[rng() % 3];
  for (int j = 0; j < n; ++j) {
    const unsigned r = unsigned(rng() % 40);
    double x = mean + sd * g(rng);
    if (r == 0) x = 0;
    if (r == 1) x = spec(f).min_subnormal() * double(1 + rng() % 3);  // the format's subnormals
    if (r == 2) x = 40 * sd * g(rng);                                   // outliers
    t.v.push_back(round_to(f, x, Overflow::saturate));
  }
  const double sharp = (rng() % 3 == 0) ? 4.0 : (rng() % 2 ? 1.0 : 0.25);
  for (int i = 0; i < rows; ++i) {
    std::vector<float> e(static_cast<size_t>(n));
    std::vector<double> s(static_cast<size_t>(n));
    double smax = -1e300;
    for (int j = 0; j < n; ++j) smax = std::max(smax, s[size_t(j)] = sharp * g(rng));
    double we = 0, wv = 0;
    for (int j = 0; j < n; ++j) {
      double w = std::exp(s[size_t(j)] - smax);
      if (rng() % 50 == 0) w = 0;
      if (rng() % 50 == 0) w = std::ldexp(1.0, -140 - int(rng() % 20));
      e[size_t(j)] = round_up_f32(w);
      we += w;
      wv += w * t.v[size_t(j)];
    }
    t.e.push_back(e);
    // o: the row's weighted mean (realistic), or anywhere in V's range.
    const double vmin = *std::min_element(t.v.begin(), t.v.end()), vmax = *std::max_element(t.v.begin(), t.v.end());
    t.o.push_back(float(rng() % 4 ? (we > 0 ? wv / we : 0.0) : vmin + (vmax - vmin) * double(rng() % 1000) / 999));
  }
  return t;
}

struct RowResult {
  KnotBounds kb;
  double L_exact, Q_exact;  // |vd| sum e |v - o|, vd^2 sum e^2 (v - o)^2
  double excess_exact, excess;  // what the interpolation of the exact knot sums adds, and its certificate (scaled)
  double linear;                // the interpolation's bound (scaled)
};

// The knot form's steps for every row of the tile, as error_budget.cpp takes them (its sums in double), and
// the exact values in MPFR.
std::vector<RowResult> run_tile(const Tile& t) {
  const size_t n = t.v.size();
  double vmax = 0;
  for (double v : t.v) vmax = std::max(vmax, std::fabs(v));
  const double rc = fp16_scale(2 * vmax), rs = rc * kKnotSquareScale;
  for (double v : t.v) {
    EXPECT_TRUE(knot_value_exact(v, rc));
    EXPECT_TRUE(knot_value_exact(v, rs));
  }
  const double lo = *std::min_element(t.o.begin(), t.o.end()), hi = *std::max_element(t.o.begin(), t.o.end());
  const KnotPair k = knot_pair(lo, hi, rc), k2 = knot_pair(lo, hi, rs);
  EXPECT_TRUE(k.ok && k2.ok);
  std::vector<RowResult> out;
  for (size_t i = 0; i < t.o.size(); ++i) {
    const std::vector<float>& e = t.e[i];
    double emax = 0;
    for (float x : e) emax = std::max(emax, double(x));
    // Underflow weights z_j (S_Z's) on every third key of every other row, of an underflow threshold's size.
    std::vector<double> z(n, 0.0);
    if (i % 2)
      for (size_t j = 0; j < n; j += 3) z[j] = round_up_f32(std::ldexp(double(e[j]) + 0.5, -24 - int(j % 7)));
    const double zmax = *std::max_element(z.begin(), z.end());
    const double sc = fp16_scale(emax), sc3 = fp16_scale(emax * emax), scz = fp16_scale(zmax), nd = double(n);
    std::vector<double> W(n), W3(n), WZ(n);
    double ws = 0, w3s = 0, wzs = 0;
    for (size_t j = 0; j < n; ++j) {
      ws += W[j] = knot_weight(e[j], sc);
      w3s += W3[j] = knot_weight(double(e[j]) * e[j], sc3);
      wzs += WZ[j] = knot_weight(z[j], scz);
    }
    const KnotRow kr{sc,  sc3, scz, double_sum_up(ws, nd), double_sum_up(w3s, nd), double_sum_up(wzs, nd),
                     double_sum_low(w3s, nd)};
    // The products' sums as the tensor cores chain them (KnotChain, as the CPU budget takes them).
    KnotChain cF0, cF1, cM, cG0, cG1, cZ0, cZ1;
    mp_real L = 0, Q = 0, Z = 0, F0 = 0, F1 = 0, Lw = 0;
    const double o = t.o[i];
    for (size_t j = 0; j < n; ++j) {
      const double x = knot_value(t.v[j], rc), x2 = knot_value(t.v[j], rs);
      const int64_t key = int64_t(j);
      cF0.add(key, W[j], knot_distance(x, k.t0));
      cF1.add(key, W[j], knot_distance(x, k.t1));
      cM.add(key, W[j], in_bracket(x, k) ? 1.0 : 0.0);
      cG0.add(key, W3[j], knot_square(x2, k2.t0));
      cG1.add(key, W3[j], knot_square(x2, k2.t1));
      cZ0.add(key, WZ[j], knot_distance(x, k.t0));
      cZ1.add(key, WZ[j], knot_distance(x, k.t1));
      const mp_real d = abs(mp_real(t.v[j]) - mp_real(o)), xs = mp_real(t.v[j]) * mp_real(rc);
      L += mp_real(e[j]) * d;
      Q += mp_real(e[j]) * mp_real(e[j]) * d * d;
      Z += mp_real(z[j]) * d;
      F0 += mp_real(W[j]) * abs(xs - mp_real(k.t0));
      F1 += mp_real(W[j]) * abs(xs - mp_real(k.t1));
      Lw += mp_real(W[j]) * abs(xs - mp_real(o) * mp_real(rc));
    }
    const KnotSums s{cF0.total(), cF1.total(), cG0.total(), cG1.total(), cZ0.total(), cZ1.total(), cM.total()};
    RowResult r;
    r.kb = knot_bounds(s, kr, o, k, k2, rc, t.vd);
    r.L_exact = static_cast<double>(L * abs(mp_real(t.vd)));
    r.Q_exact = static_cast<double>(Q * mp_real(t.vd) * mp_real(t.vd));
    const KnotPosition at = knot_position(o * rc, k);
    const mp_real interp = at.h == 0 ? F0 : (mp_real(at.b) * F0 + mp_real(at.a) * F1) / mp_real(at.h);
    r.excess_exact = static_cast<double>(interp - Lw);
    r.excess = knot_excess(s.M * knot_chain_up(), at, kr.w_up);
    r.linear = knot_interpolate(knot_linear_up(s.F0, kr.w_up), knot_linear_up(s.F1, kr.w_up), at);
    // The exact values must be below the bounds to the last bit: compare in MPFR, not after a rounding.
    EXPECT_GE(mp_real(r.kb.L), L * abs(mp_real(t.vd)));
    EXPECT_GE(mp_real(r.kb.Q), Q * mp_real(t.vd) * mp_real(t.vd));
    EXPECT_GE(mp_real(r.kb.Z), Z * abs(mp_real(t.vd)));
    out.push_back(r);
  }
  return out;
}

TEST(KnotSums, BoundsCoverTheExactSumsAndTheCertificateItsExcess) {
  std::mt19937_64 rng(20261205);
  int certified = 0, rows = 0;
  double worst = 0;  // certified rows: the largest L bound / exact - 1
  for (int c = 0; c < 300; ++c) {
    const Tile t = random_tile(rng);
    for (const RowResult& r : run_tile(t)) {
      ++rows;
      ASSERT_GE(r.kb.L, r.L_exact) << "tile " << c;
      ASSERT_GE(r.kb.Q, r.Q_exact) << "tile " << c;
      ASSERT_GE(r.excess * (1 + 1e-12), r.excess_exact) << "tile " << c;
      if (!r.kb.certified) continue;
      ++certified;
      if (r.L_exact > 0) worst = std::max(worst, r.kb.L / r.L_exact - 1);
    }
  }
  // Where the knots are taken the bound is within the tolerance and the operands' rounding (the weights rounded
  // up, 2u; |v - t| to nearest, u; fp16's subnormal floor) of the exact sum.
  EXPECT_LE(worst, kKnotTolerance + 6 * kKnotU) << certified << " of " << rows << " rows certified";
  EXPECT_GT(certified, rows / 10);
  EXPECT_LT(certified, rows);
  std::printf("%d of %d rows certified; largest L bound / exact - 1 among them: %.3g\n", certified, rows, worst);
}

// The chains' factor (knot_chain_up) against the tensor cores' model (KnotChain): over random fp16 operands of
// every magnitude, subnormal ones included, and chains of up to five splits, the chain is at most the exact
// sum and the chain times the factor at least it. The control: the chain alone falls below the exact sum
// (the model truncates), so a factor is needed.
TEST(KnotChain, FactorCoversTheTensorCoresTruncation) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto operand = [&] {  // an fp16 number in [0, 2^15]: sometimes 0, sometimes subnormal
    const unsigned r = unsigned(rng() % 20);
    if (r == 0) return 0.0;
    if (r == 1) return to_fp16(std::ldexp(u(rng), -14 - int(rng() % 10)), Round16::nearest);
    return to_fp16(std::ldexp(0.5 + 0.5 * u(rng), int(rng() % 30) - 14), Round16::nearest);
  };
  int short_chains = 0;
  for (int c = 0; c < 400; ++c) {
    const int64_t n = 1 + int64_t(rng() % 5000);
    KnotChain chain;
    mp_real exact = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (rng() % 7 == 0) continue;  // keys the row does not see
      const double a = operand(), b = operand();
      chain.add(j, a, b);
      exact += mp_real(a) * mp_real(b);
    }
    const double got = chain.total();
    ASSERT_LE(mp_real(got), exact) << c;
    ASSERT_GE(mp_real(got) * mp_real(knot_chain_up()), exact) << c;
    short_chains += mp_real(got) < exact;
  }
  EXPECT_GT(short_chains, 200);
}

// The interpolation is a bound only between the knots: beyond them the secant of the convex sum falls short
// (one key at 0.3, knots 0 and 0.5, o = 1: the secant gives 0.1, the sum is 0.7), and knot_bounds refuses o
// outside its pair.
TEST(KnotSums, ExtrapolationFallsShortAndIsRefused) {
  const double F0 = 0.3, F1 = 0.2, o = 1.0;
  const KnotPosition beyond{o - 0.0, 0.5 - o, 0.5, true};
  EXPECT_LT(knot_interpolate(F0, F1, beyond), std::fabs(0.3 - o));
  const KnotPair k{0.0, 0.5, true};
  EXPECT_FALSE(knot_position(o, k).ok);
  const KnotRow r{1, 1, 1, 1, 1, 0, 1};
  EXPECT_FALSE(knot_bounds(KnotSums{F0, F1, 0, 0, 0, 0, 0}, r, o, k, k, 1.0, 1.0).certified);
}

// |v - t| rounded to nearest in fp16 can fall below the exact distance by more than the chains' factor covers:
// 1025 - 0.75 = 1024.25 rounds to 1024. The operands' term (d + 2 delta) / (1 - u) is what covers it.
TEST(KnotSums, WithoutTheOperandsTermTheLinearSumFallsShort) {
  const double x = 1025, t = 0.75, n = 1000;
  const double d = knot_distance(x, t);
  ASSERT_EQ(d, 1024.0);
  const double F = n * d, exact = n * (x - t);
  EXPECT_LT(F * knot_chain_up(), exact);            // control: the chains' factor alone
  EXPECT_GE(knot_linear_up(F, n), exact);           // the bound
  // The same for a square: (1025 - 0.75)^2 through g = 1024 and q = 2^20.
  const double q = knot_square(x * kKnotSquareScale, t * kKnotSquareScale);
  const double exact2 = n * (x - t) * (x - t) * kKnotSquareScale * kKnotSquareScale;
  EXPECT_LT(n * q * knot_chain_up(), exact2);
  EXPECT_GE(knot_square_up(n * q, n), exact2);
}

// The squares' correction is the exact identity (x - o)^2 = (b (x - t0)^2 + a (x - t1)^2) / h - ab: from exact
// knot sums the result is the sum itself up to float64 rounding, for any o between the knots.
TEST(KnotSums, SquaresCorrectionIsTheExactIdentity) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  for (int t = 0; t < 100000; ++t) {
    double t0 = u(rng), t1 = u(rng);
    if (t0 > t1) std::swap(t0, t1);
    const double o = t0 + (t1 - t0) * std::fabs(u(rng)) / 4, x = u(rng), w = std::fabs(u(rng));
    const KnotPosition at = knot_position(o, KnotPair{t0, t1, true});
    const KnotSquares sq = knot_squares(w * (x - t0) * (x - t0), w * (x - t1) * (x - t1), w, at);
    const double want = w * (x - o) * (x - o);
    ASSERT_NEAR(sq.bound, want, 1e-12 * sq.interpolation + 1e-300) << t;
  }
}

// The emulated kernel on the problem, and the row form's budget with the loop and with the knots; the verdict is
// the knots budget's.
struct BothForms {
  ErrorBudget loop, knots;
  BudgetVerdict verdict;
};
BothForms both_forms(const Problem& p, const AttentionInputs& in, const RunOptions& o) {
  EmulatedKernel kernel;
  const SubjectOutput out = kernel.run(p, in, o);
  const Float64Attention ref = exact_attention_f64(p, in);
  const int tile = kernel.effective_tile(p, o).n;
  BudgetTerms row_form;
  row_form.per_key_eta = false;
  BudgetTerms knots = row_form;
  knots.knot_sums = true;
  BothForms f{error_budget(p, in, o, tile, ref, row_form), error_budget(p, in, o, tile, ref, knots), {}};
  f.verdict = check_against_budget(p, out.o, out.lse, ref, f.knots, recipe_spec(o.recipe).output);
  return f;
}

// The budget takes the knots on long rows of flat attention, and there its bounds are within the tolerance and
// the operands' rounding of the row form's loop, and still hold for the emulated kernel.
TEST(KnotSums, TheBudgetTakesTheKnotsOnLongRows) {
  Problem p;
  p.n_q = 32;
  p.n_k = 8192;
  p.d = p.dv = 64;
  RunOptions o;
  o.recipe = Recipe::bf16;
  const AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 9, &o);
  const BothForms f = both_forms(p, in, o);
  const ErrorBudget &a = f.loop, &b = f.knots;
  EXPECT_EQ(a.knot_elements(), 0u);
  EXPECT_GT(b.knot_elements(), b.o_bound.size() * 3 / 4);  // 99.7 % at 16,384 keys (budget_report §5)
  std::printf("%zu of %zu elements from the knots\n", b.knot_elements(), b.o_bound.size());
  for (size_t x = 0; x < a.o_bound.size(); ++x) {
    ASSERT_GE(b.o_bound[x], a.o_bound[x] * (1 - 1e-5)) << x;
    ASSERT_LE(b.o_bound[x], a.o_bound[x] * (1 + kKnotTolerance + 6 * kKnotU)) << x;
  }
  EXPECT_EQ(f.verdict.violations, 0u);
  EXPECT_GT(f.verdict.max_ratio, 0.0);
}

// With the knots every element of a row takes the row's counts and an alignment excess bounded from the row,
// whether or not the knots certify it: at or above what its own column's walk gives. N(0, 1) inputs with zeros
// and the format's smallest subnormal put in V (the columns whose counts and excess differ from the row's),
// fp16 and e4m3: where the knots certify the element, within the loop's own margin (their sums may be below
// the loop's); where they do not, the sums are the loop's, and the bound is at or above its exactly (rows of 24
// keys, where a row excess without the small values' term falls short).
TEST(KnotSums, RowCountsAndExcessCoverEveryColumn) {
  for (int64_t keys : {2048, 24})
    for (Recipe r : {Recipe::fp16, Recipe::fp8_e4m3})
      for (uint64_t seed : {5, 6}) {
        Problem p;
        p.n_q = 32;
        p.n_k = keys;
        p.d = p.dv = 32;
        RunOptions o;
        o.recipe = r;
        AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, seed, &o);
        const double tiny = spec(recipe_spec(r).input).min_subnormal() * o.v_descale;
        for (int64_t j = 0; j < p.n_k; j += 5) in.v[p.v_index(0, 0, j, int(j % p.dv))] = j % 2 ? tiny : 0.0;
        const BothForms f = both_forms(p, in, o);
        const ErrorBudget &a = f.loop, &b = f.knots;
        size_t above = 0;
        for (size_t x = 0; x < a.o_bound.size(); ++x) {
          const double margin = b.from_knots[x] ? 1 - 1e-5 : 1.0;
          ASSERT_GE(b.o_bound[x], a.o_bound[x] * margin) << x;
          ASSERT_GE(b.o_bound_probabilistic[x], a.o_bound_probabilistic[x] * margin) << x;
          above += b.o_bound[x] > a.o_bound[x];
        }
        EXPECT_GT(above, 0u);
        EXPECT_EQ(f.verdict.violations, 0u);
      }
}

}  // namespace
}  // namespace fc
