#include "tests/budget/budget_support.h"

#include <algorithm>
#include <sstream>

namespace fc::budget_test {

std::string Case::describe() const {
  std::ostringstream s;
  s << recipe_spec(options.recipe).name << " " << problem.describe() << " dist=" << distribution_name(distribution)
    << " seed=" << seed << " tile=" << options.tile_m << "x" << options.tile_n << " splits=" << options.num_splits
    << (options.l_from_fp32_p ? " l_from_fp32_p" : "") << (options.two_level_accum ? " two_level" : "")
    << (options.normalisation == Normalisation::fa1 ? " fa1" : "")
    << (options.accumulation == Accumulation::ieee_fp32 ? " ieee" : " tensor_core")
    << (budget_tile_unknown ? " budget_tile=unknown" : "");
  return s.str();
}

Case random_case(Recipe r, std::mt19937_64& rng, int64_t max_keys, double max_work) {
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  Case c;
  Problem& p = c.problem;
  static const int dims[] = {1, 3, 8, 16, 17, 32, 48, 64, 96, 128};
  p.d = dims[uni(0, 9)];
  p.dv = coin(0.8) ? p.d : dims[uni(0, 9)];
  p.batch = int(uni(1, 2));
  p.heads_kv = int(uni(1, 2));
  p.heads_q = p.heads_kv * int(uni(1, 2));
  p.n_k = uni(1, max_keys);
  p.n_q = uni(1, 48);
  while (double(p.batch) * p.heads_q * p.n_q * p.n_k * (p.d + p.dv) > max_work && p.n_q > 1) p.n_q /= 2;
  while (double(p.batch) * p.heads_q * p.n_q * p.n_k * (p.d + p.dv) > max_work && p.n_k > 1) p.n_k /= 2;
  if (coin(0.1)) p.scale = coin(0.5) ? 1.0 : -0.3;
  switch (uni(0, 6)) {
    case 0: p.window = Window::causal(Align::bottom_right); break;
    case 1: p.window = Window::causal(Align::top_left); break;
    case 2: p.window = Window{uni(0, 40), uni(0, 10), coin(0.5) ? Align::top_left : Align::bottom_right}; break;
    default: break;
  }
  if (coin(0.2)) {
    p.key_lengths.resize(p.batch);
    for (auto& l : p.key_lengths) l = uni(0, p.n_k);
  }
  if (coin(0.1)) {
    p.dense_mask.resize(size_t(p.n_q * p.n_k));
    for (auto& m : p.dense_mask) m = coin(0.7);
  }
  RunOptions& o = c.options;
  o.recipe = r;
  static const int tiles[] = {0, 1, 2, 3, 7, 16, 32, 64, 128};
  o.tile_m = tiles[uni(0, 8)];
  o.tile_n = coin(0.3) ? int(uni(1, 80)) : tiles[uni(0, 8)];
  o.num_splits = coin(0.2) ? int(uni(2, 4)) : (coin(0.05) ? 0 : 1);
  o.l_from_fp32_p = coin(0.3);
  o.normalisation = coin(0.15) ? Normalisation::fa1 : Normalisation::fa2;
  o.accumulation = coin(0.3) ? Accumulation::ieee_fp32 : Accumulation::tensor_core;
  const bool fp8 = r == Recipe::fp8_e4m3 || r == Recipe::fp8_e5m2;
  o.two_level_accum = fp8 && coin(0.5);
  c.distribution = all_distributions[uni(0, all_distributions.size() - 1)];
  c.budget_tile_unknown = coin(0.08);
  c.seed = rng();
  return c;
}

CaseResult run_case(const Case& c, const AttentionInputs& in, const BudgetTerms& terms, DeliberateBug bug,
                    bool budget_assumes_default_l) {
  EmulatedKernel k(bug);
  CaseResult res;
  res.out = k.run(c.problem, in, c.options);
  res.ref = exact_attention_f64(c.problem, in);
  RunOptions bo = c.options;
  if (budget_assumes_default_l) bo.l_from_fp32_p = false;
  const int bc = c.budget_tile_unknown ? 0 : k.effective_tile(c.problem, c.options).n;
  res.budget = error_budget(c.problem, in, bo, bc, res.ref, terms);
  res.verdict = check_against_budget(c.problem, res.out.o, res.out.lse, res.ref, res.budget,
                                     recipe_spec(c.options.recipe).output);
  return res;
}

AttentionInputs case_inputs(Case& c) {
  RunOptions ds = c.options;
  AttentionInputs in = make_inputs(c.problem, c.distribution, c.options.recipe, c.seed, &ds);
  c.options.q_descale = ds.q_descale;
  c.options.k_descale = ds.k_descale;
  c.options.v_descale = ds.v_descale;
  return in;
}

CaseResult run_case(const Case& c, const BudgetTerms& terms, DeliberateBug bug) {
  Case c2 = c;
  const AttentionInputs in = case_inputs(c2);
  return run_case(c2, in, terms, bug);
}

Campaign run_campaign(Recipe r, size_t min_elements, uint64_t seed, int64_t max_keys, double max_work,
                      const std::function<void(const Case&, const CaseResult&)>& on_case, const BudgetTerms& terms) {
  std::mt19937_64 rng(seed);
  Campaign cam;
  while (cam.verdict.elements < min_elements) {
    const Case c = random_case(r, rng, max_keys, max_work);
    const CaseResult res = run_case(c, terms);
    if (res.verdict.max_ratio > cam.verdict.max_ratio || res.verdict.violations) cam.worst_case = c.describe();
    cam.verdict.add(res.verdict);
    ++cam.cases;
    if (on_case) on_case(c, res);
  }
  return cam;
}

}  // namespace fc::budget_test
