// The exact reference: float64 agrees with MPFR within its own certified bound (and the bound is far
// from vacuous), masks mean what docs/semantics.md says, NaN reaches only what depends on it, and
// impossible problems are rejected with the field named.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reference/exact_attention_mp.h"
#include "reference/formats.h"

namespace fc {
namespace {

AttentionInputs random_inputs(const Problem& p, std::mt19937_64& rng, double sigma = 1.0, Format f = Format::bf16) {
  std::normal_distribution<double> g(0, sigma);
  AttentionInputs in;
  for (size_t i = 0; i < p.q_size(); ++i) in.q.push_back(round_to(f, g(rng)));
  for (size_t i = 0; i < p.k_size(); ++i) in.k.push_back(round_to(f, g(rng)));
  for (size_t i = 0; i < p.v_size(); ++i) in.v.push_back(round_to(f, g(rng) + 2.0));
  return in;
}

Problem random_problem(std::mt19937_64& rng) {
  Problem p;
  p.batch = 1 + rng() % 2;
  p.heads_kv = 1 + rng() % 2;
  p.heads_q = p.heads_kv * (1 + rng() % 2);
  p.n_q = 1 + rng() % 20;
  p.n_k = 1 + rng() % 40;
  p.d = 1 + rng() % 24;
  p.dv = 1 + rng() % 8;
  switch (rng() % 5) {
    case 0: break;
    case 1: p.window = Window::causal(Align::top_left); break;
    case 2: p.window = Window::causal(Align::bottom_right); break;
    case 3: p.window = Window{int64_t(rng() % 5), int64_t(rng() % 3), Align::bottom_right}; break;
    case 4:
      for (int b = 0; b < p.batch; ++b) p.key_lengths.push_back(rng() % (p.n_k + 1));
      break;
  }
  return p;
}

TEST(ExactAttention, Float64AgreesWithMpfrWithinItsCertifiedBound) {
  std::mt19937_64 rng(5);
  double worst_ratio = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Problem p = random_problem(rng);
    const AttentionInputs in = random_inputs(p, rng, trial % 3 == 0 ? 8.0 : 1.0);
    const auto f64 = exact_attention_f64(p, in);
    const auto mp = exact_attention_mp(p, in);
    for (size_t e = 0; e < p.o_size(); ++e) {
      const double err = std::fabs(static_cast<double>(mp.o[e] - f64.out.o[e]));
      ASSERT_LE(err, f64.o_error_bound[e]) << p.describe() << " element " << e;
      // Not vacuous: 1e-10 is ~10^6 times below fp32 rounding at the output scale (|V| = O(1..10)).
      ASSERT_LE(f64.o_error_bound[e], 1e-10) << p.describe();
      if (f64.o_error_bound[e] > 0) worst_ratio = std::max(worst_ratio, err / f64.o_error_bound[e]);
    }
    for (size_t r = 0; r < p.lse_size(); ++r) {
      if (std::isinf(f64.out.lse[r])) {
        EXPECT_EQ(static_cast<double>(mp.lse[r]), f64.out.lse[r]);
        continue;
      }
      ASSERT_LE(std::fabs(static_cast<double>(mp.lse[r] - f64.out.lse[r])), f64.lse_error_bound[r]);
    }
  }
  RecordProperty("worst_error_over_certificate", std::to_string(worst_ratio));
  std::printf("float64 reference: worst |error| / certified bound = %.3g\n", worst_ratio);
}

// The reference's bound of the exact A = sum_j P_j |V_jk| (reference/abs_scale_bound.h, which the budget's W
// rests on): A+ = factor A + floor is at or above A computed in MPFR; the computed A alone is not (the
// control: it falls below the exact A somewhere).
TEST(ExactAttention, AbsScaleBoundIsAboveTheExactA) {
  std::mt19937_64 rng(11);
  int64_t checked = 0, below = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Problem p = random_problem(rng);
    const AttentionInputs in = random_inputs(p, rng, trial % 3 == 0 ? 8.0 : 1.0);
    const auto f64 = exact_attention_f64(p, in);
    const mp_real scale = p.effective_scale();
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int64_t i = 0; i < p.n_q; ++i) {
          std::vector<mp_real> s(size_t(p.n_k));
          std::vector<bool> vis(size_t(p.n_k));
          mp_real m = 0;
          bool any = false;
          for (int64_t j = 0; j < p.n_k; ++j) {
            vis[size_t(j)] = p.visible(b, i, j);
            if (!vis[size_t(j)]) continue;
            mp_real dot = 0;
            for (int c = 0; c < p.d; ++c)
              dot += mp_real(in.q[p.q_index(b, h, i, c)]) * mp_real(in.k[p.k_index(b, p.kv_head(h), j, c)]);
            s[size_t(j)] = scale * dot;
            if (!any || s[size_t(j)] > m) m = s[size_t(j)];
            any = true;
          }
          if (!any) continue;
          const size_t li = p.lse_index(b, h, i);
          for (int c = 0; c < p.dv; ++c) {
            mp_real num = 0, den = 0;
            for (int64_t j = 0; j < p.n_k; ++j) {
              if (!vis[size_t(j)]) continue;
              const mp_real w = exp(s[size_t(j)] - m);
              num += w * abs(mp_real(in.v[p.v_index(b, p.kv_head(h), j, c)]));
              den += w;
            }
            const mp_real exact = num / den;
            const double a = f64.abs_scale[p.o_index(b, h, i, c)];
            ASSERT_GE(mp_real(f64.abs_scale_factor[li] * a + f64.abs_scale_floor[li]), exact) << p.describe();
            below += mp_real(a) < exact;
            ++checked;
          }
        }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(below, 0) << "the computed A was never below the exact one: the control shows nothing";
}

Problem one_head(int64_t nq, int64_t nk, int d = 1, int dv = 1) {
  Problem p;
  p.n_q = nq;
  p.n_k = nk;
  p.d = d;
  p.dv = dv;
  return p;
}

TEST(Masks, CausalAlignments) {
  Problem p = one_head(2, 4);
  p.window = Window::causal(Align::top_left);  // query i sees keys 0..i
  EXPECT_TRUE(p.visible(0, 0, 0));
  EXPECT_FALSE(p.visible(0, 0, 1));
  EXPECT_TRUE(p.visible(0, 1, 1));
  EXPECT_FALSE(p.visible(0, 1, 2));
  p.window = Window::causal(Align::bottom_right);  // the last query sees every key
  EXPECT_TRUE(p.visible(0, 0, 2));
  EXPECT_FALSE(p.visible(0, 0, 3));
  EXPECT_TRUE(p.visible(0, 1, 3));
  // More queries than keys: bottom-right leaves the first rows with no key at all.
  Problem q = one_head(4, 2);
  q.window = Window::causal(Align::bottom_right);
  EXPECT_FALSE(q.visible(0, 0, 0));
  EXPECT_FALSE(q.visible(0, 1, 0));
  EXPECT_TRUE(q.visible(0, 2, 0));
}

TEST(Masks, SlidingWindowAndKeyLengths) {
  Problem p = one_head(6, 6);
  p.window = Window{2, 1, Align::bottom_right};
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(p.visible(0, i, j), j >= i - 2 && j <= i + 1) << i << "," << j;
  p.window = Window{};
  p.batch = 2;
  p.key_lengths = {3, 0};
  EXPECT_TRUE(p.visible(0, 5, 2));
  EXPECT_FALSE(p.visible(0, 5, 3));
  EXPECT_FALSE(p.visible(1, 0, 0));
  // Bottom-right alignment follows each batch's own key length, as FlashAttention's varlen does.
  p.window = Window::causal(Align::bottom_right);
  p.key_lengths = {6, 4};
  EXPECT_TRUE(p.visible(0, 5, 5));
  EXPECT_TRUE(p.visible(1, 5, 3));
  EXPECT_FALSE(p.visible(1, 4, 3));
}

TEST(Semantics, FullyMaskedRowGivesZeroAndMinusInfinity) {
  Problem p = one_head(3, 2, 2, 2);
  p.window = Window::causal(Align::bottom_right);  // row 0 sees nothing
  std::mt19937_64 rng(9);
  const AttentionInputs in = random_inputs(p, rng);
  for (const auto& [o, lse] : {std::pair{exact_attention_f64(p, in).out.o, exact_attention_f64(p, in).out.lse}}) {
    EXPECT_EQ(o[0], 0.0);
    EXPECT_EQ(o[1], 0.0);
    EXPECT_EQ(lse[0], -INFINITY);
    EXPECT_TRUE(std::isfinite(lse[2]));
  }
  const auto mp = exact_attention_mp(p, in);
  EXPECT_EQ(mp.o[0], 0);
  EXPECT_EQ(mp.lse[0], minus_infinity<mp_real>());
}

TEST(Semantics, NaNReachesOnlyWhatDependsOnIt) {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.n_q = 4;
  p.n_k = 5;
  p.d = 3;
  p.dv = 3;
  p.window = Window::causal(Align::top_left);
  std::mt19937_64 rng(10);
  const AttentionInputs clean = random_inputs(p, rng);
  const auto base = exact_attention_f64(p, clean).out;
  auto check = [&](const AttentionInputs& in, auto depends) {
    const auto out = exact_attention_f64(p, in).out;
    const auto mp = exact_attention_mp(p, in);
    for (int h = 0; h < 2; ++h)
      for (int64_t i = 0; i < p.n_q; ++i)
        for (int c = 0; c < p.dv; ++c) {
          const size_t e = p.o_index(0, h, i, c);
          if (depends(h, i, c)) {
            EXPECT_TRUE(std::isnan(out.o[e])) << h << " " << i << " " << c;
            EXPECT_TRUE(boost::multiprecision::isnan(mp.o[e]));
          } else {
            EXPECT_EQ(out.o[e], base.o[e]) << h << " " << i << " " << c;
          }
        }
  };
  AttentionInputs in = clean;
  in.q[p.q_index(0, 1, 2, 0)] = NAN;  // query row 2 of head 1: that row only
  check(in, [](int h, int64_t i, int) { return h == 1 && i == 2; });
  in = clean;
  in.k[p.k_index(0, 0, 2, 1)] = NAN;  // key 2: every row that sees it (causal: i >= 2), both heads
  check(in, [](int, int64_t i, int) { return i >= 2; });
  in = clean;
  in.v[p.v_index(0, 0, 1, 2)] = NAN;  // value 1, column 2: that column of rows that see key 1
  check(in, [](int, int64_t i, int c) { return i >= 1 && c == 2; });
  in = clean;
  in.k[p.k_index(0, 0, 4, 0)] = NAN;  // key 4 is masked for every row (n_q = 4): no effect
  in.v[p.v_index(0, 0, 4, 0)] = NAN;
  check(in, [](int, int64_t, int) { return false; });
}

TEST(Semantics, InfiniteInputsAreRejectedByName) {
  Problem p = one_head(2, 2, 2, 2);
  AttentionInputs in{{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}};
  in.k[3] = -INFINITY;
  try {
    exact_attention_f64(p, in);
    FAIL() << "accepted -inf";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("K[3] is -inf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exact_attention_mp(p, in), std::invalid_argument);
}

TEST(Validation, ImpossibleProblemsNameTheField) {
  auto message = [](Problem p) {
    try {
      p.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  Problem p = one_head(2, 2);
  p.heads_q = 3;
  p.heads_kv = 2;
  EXPECT_NE(message(p).find("heads_kv"), std::string::npos);
  p = one_head(0, 2);
  EXPECT_NE(message(p).find("n_q"), std::string::npos);
  p = one_head(2, 2);
  p.key_lengths = {3};
  EXPECT_NE(message(p).find("key_lengths[0]"), std::string::npos);
  p = one_head(2, 2);
  p.dense_mask = {1, 0, 1};
  EXPECT_NE(message(p).find("dense_mask"), std::string::npos);
  p = one_head(2, 2);
  p.scale = NAN;
  EXPECT_NE(message(p).find("scale"), std::string::npos);
  p = one_head(2, 2);
  p.d = 0;
  EXPECT_NE(message(p).find(" d "), std::string::npos);
  Problem ok = one_head(2, 3, 4, 5);
  EXPECT_EQ(message(ok), "accepted");
  EXPECT_THROW(exact_attention_f64(ok, AttentionInputs{{1}, {1}, {1}}), std::invalid_argument);
}

TEST(Masks, ParseAndNameRoundTrip) {
  for (const char* name : {"none", "causal", "causal-top-left", "window:3,0", "window-top-left:inf,2"}) {
    const auto w = parse_window(name);
    ASSERT_TRUE(w.has_value()) << name;
    EXPECT_EQ(window_name(*w), name);
  }
  EXPECT_EQ(*parse_window("window:inf,0"), Window::causal(Align::bottom_right));
  EXPECT_FALSE(parse_window("window:x,1").has_value());
  EXPECT_FALSE(parse_window("diagonal").has_value());
}

}  // namespace
}  // namespace fc
