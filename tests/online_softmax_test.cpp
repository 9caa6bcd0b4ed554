// The online-softmax algebra: identity, merge laws, tiling independence, the -inf guard, FA-1 = FA-2.
// In multiprecision the laws hold to ~1e-45 relative; tests ask 1e-30, as the property suite does.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reference/multiprecision.h"
#include "reference/online_softmax.h"

namespace fc {
namespace {

using State = SoftmaxState<mp_real>;

struct Row {
  std::vector<mp_real> s, v;  // n scores, n x dv values
};

Row random_row(std::mt19937_64& rng, int n, int dv, double masked_fraction) {
  std::normal_distribution<double> g(0, 3);
  std::uniform_real_distribution<double> unif(0, 1);
  Row r;
  for (int j = 0; j < n; ++j) r.s.push_back(unif(rng) < masked_fraction ? minus_infinity<mp_real>() : mp_real(g(rng)));
  for (int j = 0; j < n * dv; ++j) r.v.push_back(g(rng));
  return r;
}

State absorb_range(const Row& r, int from, int to, int dv) {
  State st = State::identity(dv);
  absorb<mp_real>(st, std::span<const mp_real>(r.s).subspan(from, to - from),
                  std::span<const mp_real>(r.v).subspan(size_t(from) * dv, size_t(to - from) * dv));
  return st;
}

void expect_close(const State& x, const State& y) {
  ASSERT_EQ(x.m, y.m);
  if (y.l == 0) {
    EXPECT_EQ(x.l, 0);
    return;
  }
  EXPECT_LT(abs(x.l - y.l) / y.l, mp_real(1e-30));
  for (size_t c = 0; c < x.a.size(); ++c) EXPECT_LT(abs(x.a[c] - y.a[c]), mp_real(1e-30) * y.l * 100);
}

TEST(OnlineSoftmax, IdentityIsNeutral) {
  std::mt19937_64 rng(1);
  const Row r = random_row(rng, 9, 3, 0.2);
  const State s = absorb_range(r, 0, 9, 3);
  expect_close(merge(s, State::identity(3)), s);
  expect_close(merge(State::identity(3), s), s);
  const State e = merge(State::identity(3), State::identity(3));
  EXPECT_EQ(e.m, minus_infinity<mp_real>());
  EXPECT_EQ(e.l, 0);
}

TEST(OnlineSoftmax, AnyTilingGivesTheSameState) {
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + int(rng() % 40), dv = 1 + int(rng() % 4);
    const Row r = random_row(rng, n, dv, 0.3);
    const State whole = absorb_range(r, 0, n, dv);
    const int tile = 1 + int(rng() % n);
    State tiled = State::identity(dv);
    for (int j = 0; j < n; j += tile) {
      const int e = std::min(n, j + tile);
      absorb<mp_real>(tiled, std::span<const mp_real>(r.s).subspan(j, e - j),
                      std::span<const mp_real>(r.v).subspan(size_t(j) * dv, size_t(e - j) * dv));
    }
    expect_close(tiled, whole);
  }
}

TEST(OnlineSoftmax, MergeIsAssociativeCommutativeAndMatchesConcatenation) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 3 + int(rng() % 30), dv = 2;
    const Row r = random_row(rng, n, dv, 0.3);
    const int c1 = 1 + int(rng() % (n - 2)), c2 = c1 + 1 + int(rng() % (n - c1 - 1));
    const State x = absorb_range(r, 0, c1, dv), y = absorb_range(r, c1, c2, dv), z = absorb_range(r, c2, n, dv);
    expect_close(merge(merge(x, y), z), merge(x, merge(y, z)));
    expect_close(merge(x, y), merge(y, x));
    expect_close(merge(merge(x, y), z), absorb_range(r, 0, n, dv));
  }
}

TEST(OnlineSoftmax, FullyMaskedTileCreatesNoNaN) {
  // -inf - -inf is NaN; the guard must keep an empty state empty and later tiles exact.
  using D = SoftmaxState<double>;
  const double ninf = minus_infinity<double>();
  D st = D::identity(1);
  const std::vector<double> masked{ninf, ninf}, v{std::nan(""), 5.0};  // masked values never read
  absorb<double>(st, masked, v);
  EXPECT_EQ(st.m, ninf);
  EXPECT_EQ(st.l, 0.0);
  EXPECT_EQ(st.a[0], 0.0);
  const auto empty = finalize(st);
  EXPECT_EQ(empty.o[0], 0.0);
  EXPECT_EQ(empty.lse, ninf);
  const std::vector<double> s{1.0}, v1{4.0};
  absorb<double>(st, s, v1);
  absorb<double>(st, masked, v);
  const auto f = finalize(st);
  EXPECT_EQ(f.o[0], 4.0);
  EXPECT_EQ(f.lse, 1.0);
  EXPECT_FALSE(std::isnan(merge(D::identity(1), D::identity(1)).l));
}

TEST(OnlineSoftmax, NaNScorePoisonsTheRowEvenAlone) {
  using D = SoftmaxState<double>;
  D st = D::identity(1);
  const std::vector<double> s{std::nan("")}, v{1.0};
  absorb<double>(st, s, v);
  EXPECT_TRUE(std::isnan(finalize(st).o[0]));
  EXPECT_TRUE(std::isnan(finalize(st).lse));
}

TEST(OnlineSoftmax, Fa1AndFa2Agree) {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 30; ++trial) {
    const int n = 1 + int(rng() % 30), dv = 3, tile = 1 + int(rng() % 7);
    const Row r = random_row(rng, n, dv, 0.25);
    State fa2 = State::identity(dv);
    auto fa1 = Fa1State<mp_real>::identity(dv);
    for (int j = 0; j < n; j += tile) {
      const int e = std::min(n, j + tile);
      const auto s = std::span<const mp_real>(r.s).subspan(j, e - j);
      const auto v = std::span<const mp_real>(r.v).subspan(size_t(j) * dv, size_t(e - j) * dv);
      absorb<mp_real>(fa2, s, v);
      absorb<mp_real>(fa1, s, v);
    }
    const auto o2 = finalize(fa2), o1 = finalize(fa1);
    if (o2.lse == minus_infinity<mp_real>()) {
      EXPECT_EQ(o1.lse, o2.lse);
      continue;
    }
    EXPECT_LT(abs(o1.lse - o2.lse), mp_real(1e-30));
    for (int c = 0; c < dv; ++c) EXPECT_LT(abs(o1.o[c] - o2.o[c]), mp_real(1e-30));
  }
}

}  // namespace
}  // namespace fc
