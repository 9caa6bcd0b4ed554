// The worked numbers of the seed explainer (../shared/seed, Figures 1-3), each reproduced to the three
// decimals the text prints, through the algebra, the float64 reference and the MPFR reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/exact_attention_mp.h"
#include "reference/online_softmax.h"

namespace fc {
namespace {

// The text rounds exact values to 3 decimals; a reproduction must round to the same digits.
double r3(double x) { return std::round(x * 1000.0) / 1000.0; }
#define EXPECT_3DP(value, printed) EXPECT_EQ(r3(value), printed) << #value " = " << (value)

using State = SoftmaxState<double>;

void absorb_pair(State& st, double s0, double s1, std::vector<double> v) {
  const std::vector<double> s{s0, s1};
  absorb<double>(st, s, v);
}

TEST(SeedFigure1, DivideOnceAtTheEnd) {
  // Scores [1, 2], values [2, 0] and [0, 2].
  State st = State::identity(2);
  absorb_pair(st, 1, 2, {2, 0, 0, 2});
  EXPECT_3DP(std::exp(1.0 - 2.0), 0.368);
  EXPECT_3DP(st.l, 1.368);
  EXPECT_3DP(std::exp(1.0 - 2.0) / st.l, 0.269);  // probabilities [0.269, 0.731]
  EXPECT_3DP(1.0 / st.l, 0.731);
  EXPECT_3DP(st.a[0], 0.736);
  EXPECT_3DP(st.a[1], 2.0);
  const auto f = finalize(st);
  EXPECT_3DP(f.o[0], 0.538);
  EXPECT_3DP(f.o[1], 1.462);
}

TEST(SeedFigure2, SixScoresReadInPairs) {
  State st = State::identity(2);
  absorb_pair(st, 1, 2, {2, 0, 0, 2});
  EXPECT_EQ(st.m, 2.0);
  EXPECT_3DP(st.l, 1.368);
  EXPECT_3DP(st.a[0], 0.736);
  EXPECT_3DP(st.a[1], 2.0);

  // [0, 1] with values [1, 1], [2, 0]: the max stays 2.
  EXPECT_3DP(std::exp(0.0 - 2.0), 0.135);
  EXPECT_3DP(std::exp(0.0 - 2.0) + std::exp(1.0 - 2.0), 0.503);
  EXPECT_3DP(std::exp(-2.0) * 1 + std::exp(-1.0) * 2, 0.871);
  EXPECT_3DP(std::exp(-2.0) * 1 + std::exp(-1.0) * 0, 0.135);
  absorb_pair(st, 0, 1, {1, 1, 2, 0});
  EXPECT_EQ(st.m, 2.0);
  EXPECT_3DP(st.l, 1.871);
  EXPECT_3DP(st.a[0], 1.607);
  EXPECT_3DP(st.a[1], 2.135);

  // [3, 2] with values [0, 2], [1, 1]: the max grows to 3, the old state is scaled by exp(2 - 3).
  const double alpha = rescale_factor(st.m, 3.0);
  EXPECT_3DP(alpha, 0.368);
  EXPECT_3DP(st.l * alpha, 0.688);
  EXPECT_3DP(st.a[0] * alpha, 0.591);
  EXPECT_3DP(st.a[1] * alpha, 0.786);
  EXPECT_3DP(1 + std::exp(-1.0), 1.368);
  EXPECT_3DP(0 * 1 + 1 * std::exp(-1.0), 0.368);
  EXPECT_3DP(2 * 1 + 1 * std::exp(-1.0), 2.368);
  absorb_pair(st, 3, 2, {0, 2, 1, 1});
  EXPECT_EQ(st.m, 3.0);
  EXPECT_3DP(st.l, 2.056);
  EXPECT_3DP(st.a[0], 0.959);
  EXPECT_3DP(st.a[1], 3.153);
  const auto f = finalize(st);
  EXPECT_3DP(f.o[0], 0.466);
  EXPECT_3DP(f.o[1], 1.534);
}

// Figure 3: Q0 = [1, 0], Q1 = [0, 1] against K = [1,2], [2,1], [3,0], [2,1] (K0 = [1, 2] as printed; the
// others are the ones that give the printed score tiles) and V = [2,0], [0,2], [0,2], [1,1], without
// scaling or mask.
const std::vector<double> fig3_q{1, 0, 0, 1};
const std::vector<double> fig3_k{1, 2, 2, 1, 3, 0, 2, 1};
const std::vector<double> fig3_v{2, 0, 0, 2, 0, 2, 1, 1};

double dot2(const std::vector<double>& x, int i, const std::vector<double>& y, int j) {
  return x[2 * i] * y[2 * j] + x[2 * i + 1] * y[2 * j + 1];
}

TEST(SeedFigure3, TwoQueriesTwoTilesThroughTheAlgebra) {
  // Tile scores as printed.
  EXPECT_EQ(dot2(fig3_q, 0, fig3_k, 0), 1.0);
  const double tiles[2][2][2] = {{{1, 2}, {2, 1}}, {{3, 2}, {0, 1}}};  // [tile][query][key]
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) EXPECT_EQ(dot2(fig3_q, i, fig3_k, 2 * t + j), tiles[t][i][j]);

  State q0 = State::identity(2), q1 = State::identity(2);
  const std::vector<double> v01(fig3_v.begin(), fig3_v.begin() + 4), v23(fig3_v.begin() + 4, fig3_v.end());
  absorb_pair(q0, 1, 2, v01);
  absorb_pair(q1, 2, 1, v01);
  EXPECT_EQ(q0.m, 2.0);
  EXPECT_EQ(q1.m, 2.0);
  EXPECT_3DP(q0.l, 1.368);
  EXPECT_3DP(q1.l, 1.368);
  EXPECT_3DP(q0.a[0], 0.736);
  EXPECT_3DP(q0.a[1], 2.0);
  EXPECT_3DP(q1.a[0], 2.0);
  EXPECT_3DP(q1.a[1], 0.736);

  // Second tile: Q0's max grows 2 -> 3 (factor 0.368), Q1's stays (factor 1).
  EXPECT_3DP(rescale_factor(q0.m, 3.0), 0.368);
  EXPECT_EQ(rescale_factor(q1.m, 2.0), 1.0);
  absorb_pair(q0, 3, 2, v23);
  absorb_pair(q1, 0, 1, v23);
  EXPECT_3DP(q0.l, 1.871);
  EXPECT_3DP(q1.l, 1.871);
  EXPECT_3DP(q0.a[0], 0.639);
  EXPECT_3DP(q0.a[1], 3.104);
  EXPECT_3DP(q1.a[0], 2.368);
  EXPECT_3DP(q1.a[1], 1.374);
  const auto o0 = finalize(q0), o1 = finalize(q1);
  EXPECT_3DP(o0.o[0], 0.341);
  EXPECT_3DP(o0.o[1], 1.659);
  EXPECT_3DP(o1.o[0], 1.266);
  EXPECT_3DP(o1.o[1], 0.734);
}

Problem fig3_problem() {
  Problem p;
  p.n_q = 2;
  p.n_k = 4;
  p.d = 2;
  p.dv = 2;
  p.scale = 1.0;
  return p;
}

TEST(SeedFigure3, FinalOutputsThroughBothReferences) {
  const Problem p = fig3_problem();
  const AttentionInputs in{fig3_q, fig3_k, fig3_v};
  const auto f64 = exact_attention_f64(p, in);
  const auto mp = exact_attention_mp(p, in);
  const double printed[2][2] = {{0.341, 1.659}, {1.266, 0.734}};
  for (int i = 0; i < 2; ++i)
    for (int c = 0; c < 2; ++c) {
      EXPECT_3DP(f64.out.o[p.o_index(0, 0, i, c)], printed[i][c]);
      EXPECT_3DP(static_cast<double>(mp.o[p.o_index(0, 0, i, c)]), printed[i][c]);
    }
  // Both rows end with l = 1.871 against their own max 3 and 2: LSE = max + log l.
  EXPECT_3DP(std::exp(static_cast<double>(mp.lse[0]) - 3.0), 1.871);
  EXPECT_3DP(std::exp(static_cast<double>(mp.lse[1]) - 2.0), 1.871);
}

TEST(SeedFigures1And2, ThroughBothReferences) {
  // One query whose scores are the figure's: q = [1], k_j = s_j, scale 1.
  Problem p;
  p.n_q = 1;
  p.d = 1;
  p.dv = 2;
  p.scale = 1.0;
  p.n_k = 2;
  auto f1 = exact_attention_f64(p, {{1}, {1, 2}, {2, 0, 0, 2}});
  auto m1 = exact_attention_mp(p, {{1}, {1, 2}, {2, 0, 0, 2}});
  EXPECT_3DP(f1.out.o[0], 0.538);
  EXPECT_3DP(f1.out.o[1], 1.462);
  EXPECT_3DP(static_cast<double>(m1.o[0]), 0.538);
  EXPECT_3DP(static_cast<double>(m1.o[1]), 1.462);
  p.n_k = 6;
  const AttentionInputs in2{{1}, {1, 2, 0, 1, 3, 2}, {2, 0, 0, 2, 1, 1, 2, 0, 0, 2, 1, 1}};
  auto f2 = exact_attention_f64(p, in2);
  auto m2 = exact_attention_mp(p, in2);
  EXPECT_3DP(f2.out.o[0], 0.466);
  EXPECT_3DP(f2.out.o[1], 1.534);
  EXPECT_3DP(static_cast<double>(m2.o[0]), 0.466);
  EXPECT_3DP(static_cast<double>(m2.o[1]), 1.534);
  EXPECT_3DP(std::exp(static_cast<double>(m2.lse[0]) - 3.0), 2.056);
}

}  // namespace
}  // namespace fc
