// Figures for docs/error-analysis.md beyond the campaign:
//  1. the benefit of summing l from the rounded P, per recipe (N = 4096, d = 64, Bc = 128, V mean
//     0 / 3 / 10);
//  2. the probabilistic variant against the worst case on typical random inputs;
//  3. tightness on aligned-rounding inputs;
//  4. how much looser the bounds get with every key's weight interval from its row's eta bound;
//  5. how much looser again with the centred sums from the knots (BudgetTerms::knot_sums), and how many
//     elements take them.
//   budget_report [--rows R] [--keys N]
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/distributions.h"
#include "reference/error_budget.h"
#include "tests/budget/adversarial.h"

using namespace fc;

namespace {

AttentionInputs offset_inputs(const Problem& p, Recipe r, double v_mean, uint64_t seed, RunOptions& o) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  AttentionInputs in;
  const Format f = recipe_spec(r).input;
  const bool fp8 = f == Format::e4m3 || f == Format::e5m2;
  auto fill = [&](std::vector<double>& t, size_t n, double mean, double& descale) {
    t.resize(n);
    double amax = 0;
    for (double& x : t) amax = std::max(amax, std::fabs(x = mean + g(rng)));
    descale = fp8 ? std::ldexp(1.0, int(std::ceil(std::log2(amax / spec(f).max_finite)))) : 1.0;
    for (double& x : t) x = round_to(f, x / descale, Overflow::saturate) * descale;
  };
  fill(in.q, p.q_size(), 0, o.q_descale);
  fill(in.k, p.k_size(), 0, o.k_descale);
  fill(in.v, p.v_size(), v_mean, o.v_descale);
  return in;
}

struct Err {
  double max_final = 0, rmse_final = 0, max_pre = 0, rmse_pre = 0;
};

Err errors(const Problem& p, const AttentionInputs& in, const RunOptions& o, const Float64Attention& ref) {
  EmulatedKernel k;
  const SubjectOutput out = k.run(p, in, o);
  Err e;
  for (size_t x = 0; x < out.o.size(); ++x) {
    const double ef = std::fabs(out.o[x] - ref.out.o[x]), ep = std::fabs(out.o_unrounded[x] - ref.out.o[x]);
    e.max_final = std::max(e.max_final, ef);
    e.max_pre = std::max(e.max_pre, ep);
    e.rmse_final += ef * ef;
    e.rmse_pre += ep * ep;
  }
  e.rmse_final = std::sqrt(e.rmse_final / double(out.o.size()));
  e.rmse_pre = std::sqrt(e.rmse_pre / double(out.o.size()));
  return e;
}

// Section 2's typical inputs (and section 4's): N = 1024, d = 64, 2 heads x 64 rows, with the descales they
// need.
constexpr std::array kTypical{Distribution::normal, Distribution::fa3_outliers, Distribution::v_mean};
AttentionInputs typical_case(Recipe r, Distribution dist, Problem& p, RunOptions& o) {
  p = Problem{};
  p.n_q = 64;
  p.n_k = 1024;
  p.d = p.dv = 64;
  p.heads_q = p.heads_kv = 2;
  o = RunOptions{};
  o.recipe = r;
  RunOptions ds = o;
  const AttentionInputs in = make_inputs(p, dist, r, 9, &ds);
  o.q_descale = ds.q_descale, o.k_descale = ds.k_descale, o.v_descale = ds.v_descale;
  return in;
}

// Section 3's aligned-rounding inputs (and section 4's): 2 rows, 1024 keys, dv = 8.
AttentionInputs aligned_case(Recipe r, int d, uint64_t seed, Problem& p, RunOptions& o) {
  p = Problem{};
  p.n_q = 2;
  p.n_k = 1024;
  p.d = d;
  p.dv = 8;
  o = RunOptions{};
  o.recipe = r;
  return adversarial::aligned_rounding(p, r, seed);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 64, keys = 4096;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string k = argv[a];
    if (k == "--rows") rows = std::atoll(argv[a + 1]);
    else if (k == "--keys") keys = std::atoll(argv[a + 1]);
  }
  std::printf("## 1. l from the rounded P vs from the fp32 P (N=%lld, d=64, Bc=128, %lld rows, Q,K ~ N(0,1), V ~ N(mean,1))\n\n",
              (long long)keys, (long long)rows);
  std::printf("| recipe | V mean | max err before output rounding: fp32 P / rounded P (gain) | rmse before: gain | max err of O: fp32 P / rounded P (gain) | rmse of O: gain |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (Recipe r : all_recipes) {
    if (r == Recipe::fp32) continue;  // P is not rounded: the two conventions coincide
    for (double mean : {0.0, 3.0, 10.0}) {
      Problem p;
      p.n_q = rows;
      p.n_k = keys;
      p.d = p.dv = 64;
      RunOptions o;
      o.recipe = r;
      o.tile_n = 128;
      const AttentionInputs in = offset_inputs(p, r, mean, 42, o);
      const Float64Attention ref = exact_attention_f64(p, in);
      RunOptions of = o;
      of.l_from_fp32_p = true;
      const Err a = errors(p, in, of, ref), b = errors(p, in, o, ref);
      std::printf("| %s | %g | %.3g / %.3g (%.2fx) | %.2fx | %.3g / %.3g (%.2fx) | %.2fx |\n",
                  std::string(recipe_spec(r).name).c_str(), mean, a.max_pre, b.max_pre, a.max_pre / b.max_pre,
                  a.rmse_pre / b.rmse_pre, a.max_final, b.max_final, a.max_final / b.max_final, a.rmse_final / b.rmse_final);
      std::fflush(stdout);
    }
  }

  std::printf("\n## 2. Probabilistic variant vs worst case on typical inputs (N=1024, d=64, 64 rows, default tiles)\n\n");
  std::printf("| recipe | distribution | max err/B | max err/B_prob | elements > B_prob | median B_prob/B | mean err/B |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (Recipe r : all_recipes)
    for (Distribution dist : kTypical) {
      Problem p;
      RunOptions o;
      const AttentionInputs in = typical_case(r, dist, p, o);
      EmulatedKernel k;
      const SubjectOutput out = k.run(p, in, o);
      const Float64Attention ref = exact_attention_f64(p, in);
      const ErrorBudget b = error_budget(p, in, o, k.effective_tile(p, o).n, ref);
      const BudgetVerdict v = check_against_budget(p, out.o, out.lse, ref, b, recipe_spec(r).output);
      std::vector<double> q;
      for (size_t x = 0; x < b.o_bound.size(); ++x) q.push_back(b.o_bound_probabilistic[x] / b.o_bound[x]);
      std::nth_element(q.begin(), q.begin() + q.size() / 2, q.end());
      std::printf("| %s | %s | %.4f | %.4f | %zu | %.3f | %.4f |\n", std::string(recipe_spec(r).name).c_str(),
                  std::string(distribution_name(dist)).c_str(), v.max_ratio, v.max_ratio_probabilistic,
                  v.exceed_probabilistic, q[q.size() / 2], v.mean_ratio());
      std::fflush(stdout);
    }

  std::printf("\n## 3. Tightness on aligned-rounding inputs (1024 keys, dominant key + keys whose P rounds by ~u_P)\n\n");
  std::printf("| recipe | d | worst err/B | worst err/B_prob |\n|---|---|---|---|\n");
  for (Recipe r : all_recipes) {
    if (r == Recipe::fp32) continue;
    for (int d : {1, 16, 64}) {
      double worst = 0, worst_p = 0;
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        Problem p;
        RunOptions o;
        const AttentionInputs in = aligned_case(r, d, seed, p, o);
        EmulatedKernel k;
        const SubjectOutput out = k.run(p, in, o);
        const Float64Attention ref = exact_attention_f64(p, in);
        const ErrorBudget b = error_budget(p, in, o, k.effective_tile(p, o).n, ref);
        const BudgetVerdict v = check_against_budget(p, out.o, out.lse, ref, b, recipe_spec(r).output);
        worst = std::max(worst, v.max_ratio);
        worst_p = std::max(worst_p, v.max_ratio_probabilistic);
      }
      std::printf("| %s | %d | %.3f | %.3f |\n", std::string(recipe_spec(r).name).c_str(), d, worst, worst_p);
    }
  }

  // The weight interval of the row's eta bound for every key (BudgetTerms::per_key_eta = false): how much
  // looser each element's bound gets, on section 2's inputs and on section 3's at d = 64.
  std::printf("\n## 4. Every key's weight interval from the row's eta bound (N=1024, d=64; aligned: 1024 keys, d=64)\n\n");
  std::printf("| recipe | inputs | max err/B: per key / row's bound | bound with the row's / per key: min, median, max |"
              " same, probabilistic bound: median, max |\n|---|---|---|---|---|\n");
  BudgetTerms row_form;
  row_form.per_key_eta = false;
  for (Recipe r : all_recipes)
    for (int inputs = 0; inputs < 4; ++inputs) {
      if (inputs == 3 && r == Recipe::fp32) continue;
      Problem p;
      RunOptions o;
      const AttentionInputs in =
          inputs < 3 ? typical_case(r, kTypical[size_t(inputs)], p, o) : aligned_case(r, 64, 1, p, o);
      EmulatedKernel k;
      const SubjectOutput out = k.run(p, in, o);
      const Float64Attention ref = exact_attention_f64(p, in);
      const int tile = k.effective_tile(p, o).n;
      const ErrorBudget a = error_budget(p, in, o, tile, ref), b = error_budget(p, in, o, tile, ref, row_form);
      const BudgetVerdict va = check_against_budget(p, out.o, out.lse, ref, a, recipe_spec(r).output),
                          vb = check_against_budget(p, out.o, out.lse, ref, b, recipe_spec(r).output);
      std::vector<double> q, qp;
      for (size_t x = 0; x < a.o_bound.size(); ++x) {
        q.push_back(b.o_bound[x] / a.o_bound[x]);
        qp.push_back(b.o_bound_probabilistic[x] / a.o_bound_probabilistic[x]);
      }
      std::sort(q.begin(), q.end());
      std::sort(qp.begin(), qp.end());
      const std::string name = inputs < 3 ? std::string(distribution_name(kTypical[size_t(inputs)])) : "aligned rounding";
      std::printf("| %s | %s | %.4f / %.4f | %.5f, %.5f, %.5f | %.5f, %.5f |\n", std::string(recipe_spec(r).name).c_str(),
                  name.c_str(), va.max_ratio, vb.max_ratio, q.front(), q[q.size() / 2], q.back(), qp[qp.size() / 2], qp.back());
      std::fflush(stdout);
    }

  // The centred sums from the knots (BudgetTerms::knot_sums, budget_knots.h) against the row form's loop: the
  // share of elements the knots certify, and the bound's ratio over those elements. Section 2's inputs, and
  // longer rows of N(0, 1) (the regime of long flat attention the knots are for) and causal rows.
  std::printf("\n## 5. The centred sums from the knots, against the row form's loop (d=64)\n\n");
  std::printf("| recipe | inputs | elements from the knots | bound with the knots / the loop, over them: median, p99, max |"
              " same, probabilistic bound: median, max | the others' bound over the loop's: max |"
              " max err/B: loop / knots |\n|---|---|---|---|---|---|---|\n");
  BudgetTerms knots = row_form;
  knots.knot_sums = true;
  for (Recipe r : {Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2})
    for (int inputs = 0; inputs < 6; ++inputs) {
      Problem p;
      RunOptions o;
      AttentionInputs in;
      std::string name;
      if (inputs < 3) {
        in = typical_case(r, kTypical[size_t(inputs)], p, o);
        name = std::string(distribution_name(kTypical[size_t(inputs)])) + ", 64 x 1024";
      } else {
        in = typical_case(r, Distribution::normal, p, o);
        if (inputs == 3 || inputs == 4) {
          p.n_k = inputs == 3 ? 4096 : 16384;
          p.heads_q = p.heads_kv = 1;
          name = "normal, 64 x " + std::to_string(p.n_k);
        } else {
          p.n_q = p.n_k = 512;
          p.window = Window::causal(Align::bottom_right);
          name = "normal, causal 512 x 512";
        }
        RunOptions ds = o;
        in = make_inputs(p, Distribution::normal, r, 9, &ds);
        o.q_descale = ds.q_descale, o.k_descale = ds.k_descale, o.v_descale = ds.v_descale;
      }
      EmulatedKernel k;
      const SubjectOutput out = k.run(p, in, o);
      const Float64Attention ref = exact_attention_f64(p, in);
      const int tile = k.effective_tile(p, o).n;
      const ErrorBudget a = error_budget(p, in, o, tile, ref, row_form), b = error_budget(p, in, o, tile, ref, knots);
      const BudgetVerdict va = check_against_budget(p, out.o, out.lse, ref, a, recipe_spec(r).output),
                          vb = check_against_budget(p, out.o, out.lse, ref, b, recipe_spec(r).output);
      std::vector<double> q, qp;
      double others = 1;  // the elements that keep the loop: only the row's counts and excess move them
      for (size_t x = 0; x < a.o_bound.size(); ++x)
        if (b.from_knots[x]) {
          q.push_back(b.o_bound[x] / a.o_bound[x]);
          qp.push_back(b.o_bound_probabilistic[x] / a.o_bound_probabilistic[x]);
        } else {
          others = std::max(others, b.o_bound[x] / a.o_bound[x]);
        }
      std::sort(q.begin(), q.end());
      std::sort(qp.begin(), qp.end());
      const auto at = [](const std::vector<double>& v, double f) {
        return v.empty() ? 1.0 : v[size_t(f * double(v.size() - 1))];
      };
      std::printf("| %s | %s | %.1f %% | %.5f, %.5f, %.5f | %.5f, %.5f | %.7f | %.4f / %.4f |\n",
                  std::string(recipe_spec(r).name).c_str(), name.c_str(),
                  100.0 * double(b.knot_elements()) / double(b.o_bound.size()), at(q, 0.5), at(q, 0.99), at(q, 1.0),
                  at(qp, 0.5), at(qp, 1.0), others, va.max_ratio, vb.max_ratio);
      std::fflush(stdout);
    }
  return 0;
}
