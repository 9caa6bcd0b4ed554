#include "tools/report/fa3_inputs.h"

#include <random>

namespace fc::report {

namespace {
// The two evaluation orders C++ allows for `g(rng) + (unif(rng) < 0.001 ? 10.0 * g(rng) : 0.0)`:
// the operands of + are unsequenced, so the replay tries both and keeps the one that matches.
AttentionInputs replay(const Problem& p, uint64_t seed, bool normal_first) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(Distribution::fa3_outliers));
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  AttentionInputs in;
  in.q.resize(p.q_size());
  in.k.resize(p.k_size());
  in.v.resize(p.v_size());
  for (auto* t : {&in.q, &in.k, &in.v})
    for (double& x : *t) {
      if (normal_first) {
        const double base = g(rng);
        const double extra = unif(rng) < 0.001 ? 10.0 * g(rng) : 0.0;
        x = base + extra;
      } else {
        const double extra = unif(rng) < 0.001 ? 10.0 * g(rng) : 0.0;
        const double base = g(rng);
        x = base + extra;
      }
    }
  return in;
}

bool rounds_to(const AttentionInputs& exact, const AttentionInputs& rounded) {
  auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (round_to(Format::fp32, a[i], Overflow::saturate) != b[i]) return false;
    return true;
  };
  return same(exact.q, rounded.q) && same(exact.k, rounded.k) && same(exact.v, rounded.v);
}
}  // namespace

UnroundedInputs unrounded_fa3_inputs(const Problem& p, uint64_t seed) {
  AttentionInputs fp32 = make_inputs(p, Distribution::fa3_outliers, Recipe::fp32, seed);
  for (bool normal_first : {true, false}) {
    AttentionInputs exact = replay(p, seed, normal_first);
    if (rounds_to(exact, fp32)) return {std::move(exact), "float64 generator replay"};
  }
  return {std::move(fp32), "fp32-rounded inputs (generator replay did not match)"};
}

}  // namespace fc::report
