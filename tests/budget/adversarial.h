// Inputs built to maximise the error the budget allows: one dominant key at index 0 and many keys whose P
// values all round with a relative error near +-u_P, each paired with a V that makes its term of the
// centred error sum_j (P~_j - P_j)(V_j - O) point the same way ("aligned rounding").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "reference/exact_attention.h"
#include "reference/recipe.h"

namespace fc::adversarial {

struct AlignedOptions {
  double min_weight = 0.02;   // keep keys whose P (relative to the max) is at least this
  double min_align = 0.75;    // |relative rounding error| >= min_align * u_P
  double v_up = 1.0;          // V of keys whose P rounds up (V_j > O makes (P~ - P)(V - O) > 0)
  double v_down = -1.0;       // V of keys whose P rounds down
  double v_max_key = 0.0;     // V of the dominant key
  bool only_down = false;     // every key rounds down (for the l-from-fp32-P experiment)
};

// Candidate scores: values of the input format in [m - span, m) (and, for fp8, sums of two such values,
// using two head-dim coordinates) whose P = exp2(fma(s, c, -fl(m c))) rounds to the P format with a large
// relative error. Q rows are (1, 1, 0, ...), K rows (a, b, 0, ...), so the score is a + b exactly.
inline AttentionInputs aligned_rounding(const Problem& p, Recipe r, uint64_t seed, const AlignedOptions& ao = {}) {
  const RecipeSpec& rs = recipe_spec(r);
  const bool fp8 = r == Recipe::fp8_e4m3 || r == Recipe::fp8_e5m2;
  const double S = fp8 ? 256.0 : 1.0;
  const double uP = r == Recipe::fp32 ? 0.0 : spec(rs.p_format).unit_roundoff();
  const double scale = p.effective_scale();
  const float c = static_cast<float>(std::fabs(scale) * 1.4426950408889634074);
  const Format in_f = rs.operand;  // tf32: operand-representable, so only P rounds
  const bool two = p.d >= 2;
  // The dominant key's score m: a value of the format near 2 (fp8: 4 = 2 + 2).
  const double a_max = 2.0;
  const double m = two ? 2 * a_max : a_max;
  const float mc = static_cast<float>(m) * c;
  // Candidate coordinates: format values in [a_max - span, a_max].
  std::vector<double> coords;
  const double span = std::log(1 / ao.min_weight) / std::fabs(scale) / (two ? 2 : 1) * 1.05;
  {
    std::mt19937_64 g(seed ^ 0x5eed);
    const bool dense = ulp(in_f, a_max) * 4000 < span;  // too many values to enumerate: sample them
    if (dense) {
      std::uniform_real_distribution<double> u01(a_max - span, a_max);
      for (int n = 0; n < 4000; ++n) coords.push_back(round_to(in_f, u01(g)));
      std::sort(coords.begin(), coords.end(), std::greater<double>());
    } else {
      for (double x = a_max; x >= a_max - span && coords.size() < 20000; x = next_down(in_f, x)) coords.push_back(x);
    }
  }
  struct Cand { double a, b; int dir; };
  std::vector<Cand> cands;
  auto consider = [&](double a, double b) {
    const double s = a + b;
    if (s >= m) return;
    const float pv = std::exp2(std::fma(static_cast<float>(s), c, -mc));
    const double x = double(pv) * S;
    if (pv < ao.min_weight) return;
    const double rr = round_to(rs.p_format, x, fp8 ? Overflow::saturate : Overflow::ieee);
    const double rho = (rr - x) / x;
    if (std::fabs(rho) >= ao.min_align * uP && uP > 0) cands.push_back({a, b, rho > 0 ? 1 : -1});
  };
  if (two) {
    for (size_t i = 0; i < coords.size() && cands.size() < 200000; ++i)
      for (size_t j = i; j < coords.size() && j < i + 64; ++j) consider(coords[i], coords[j]);
  } else {
    for (double a : coords) consider(a, 0.0);
  }
  std::vector<Cand> up, down;
  for (const Cand& x : cands) (x.dir > 0 ? up : down).push_back(x);
  std::mt19937_64 rng(seed);
  AttentionInputs in;
  in.q.assign(p.q_size(), 0.0);
  in.k.assign(p.k_size(), 0.0);
  in.v.assign(p.v_size(), 0.0);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.n_q; ++i) {
        in.q[p.q_index(b, h, i, 0)] = scale < 0 ? -1.0 : 1.0;
        if (two) in.q[p.q_index(b, h, i, 1)] = scale < 0 ? -1.0 : 1.0;
      }
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_kv; ++h)
      for (int64_t j = 0; j < p.n_k; ++j) {
        double a = a_max, bb = two ? a_max : 0.0, v = ao.v_max_key;
        if (j > 0) {
          const bool want_up = !ao.only_down && (rng() & 1);
          const std::vector<Cand>& pool = want_up ? up : down;
          if (!pool.empty()) {
            const Cand& x = pool[rng() % pool.size()];
            a = x.a;
            bb = x.b;
            v = want_up ? ao.v_up : ao.v_down;
          }
        }
        in.k[p.k_index(b, h, j, 0)] = a;
        if (two) in.k[p.k_index(b, h, j, 1)] = bb;
        for (int cc = 0; cc < p.dv; ++cc) in.v[p.v_index(b, h, j, cc)] = v;
      }
  return in;
}

// Row sums that show how they were summed (docs/error-analysis.md §3.8): with scale = ln 2 the exponent's
// constant c is 1 exactly, and integer scores make every p = 2^s exact. Key 0 scores 0 (every row's max,
// so that LSE = logf(l)), the others -20 plus up to three terms in [-4, 0]: P from 2^-20 down to 2^-32,
// whose sums round (fp16 keeps 2^-24 and flushes the rest). Q rows (1, b1, b2, b3, 0, ...), bits random.
inline void power_of_two_weights(Problem& p, AttentionInputs& in, uint64_t seed) {
  p.scale = std::log(2.0);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> bit(0, 1), small(-4, 0);
  std::fill(in.q.begin(), in.q.end(), 0.0);
  std::fill(in.k.begin(), in.k.end(), 0.0);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.n_q; ++i) {
        in.q[p.q_index(b, h, i, 0)] = 1;
        for (int c = 1; c < 4; ++c) in.q[p.q_index(b, h, i, c)] = bit(rng);
      }
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_kv; ++h)
      for (int64_t j = 1; j < p.n_k; ++j) {
        in.k[p.k_index(b, h, j, 0)] = -20;
        for (int c = 1; c < 4; ++c) in.k[p.k_index(b, h, j, c)] = small(rng);
      }
}

}  // namespace fc::adversarial
