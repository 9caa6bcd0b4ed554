// Random-problem campaigns for the budget: the emulation against its bound over many generated inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/distributions.h"
#include "reference/error_budget.h"

namespace fc::budget_test {

struct Case {
  Problem problem;
  RunOptions options;
  Distribution distribution = Distribution::normal;
  uint64_t seed = 0;
  bool budget_tile_unknown = false;  // budget with tile_n = 0 ("Bc unknown")
  std::string describe() const;
};

// A random case for the recipe: shapes, masks, tiles (any Br, Bc >= 1), splits, FA-1/FA-2, l convention,
// accumulation model, two-level fp8 accumulation and the input distribution all drawn from rng.
// `max_keys` caps n_k; `max_work` caps B*Hq*Nq*Nk*(d+dv).
Case random_case(Recipe r, std::mt19937_64& rng, int64_t max_keys = 320, double max_work = 4e6);

// The case's inputs (make_inputs from its problem, distribution, recipe and seed), with the fp8 descales
// they were made for written into c.options.
AttentionInputs case_inputs(Case& c);

struct CaseResult {
  BudgetVerdict verdict;
  ErrorBudget budget;
  SubjectOutput out;
  Float64Attention ref;
};

// Runs the emulation (with `bug`) on the case, computes the budget (with `terms`) and checks it.
CaseResult run_case(const Case& c, const AttentionInputs& in, const BudgetTerms& terms = {},
                    DeliberateBug bug = DeliberateBug::none, bool budget_assumes_default_l = false);
CaseResult run_case(const Case& c, const BudgetTerms& terms = {}, DeliberateBug bug = DeliberateBug::none);

// Campaign statistics per recipe.
struct Campaign {
  BudgetVerdict verdict;
  size_t cases = 0;
  std::string worst_case;  // describe() of the case holding the max ratio
};
Campaign run_campaign(Recipe r, size_t min_elements, uint64_t seed, int64_t max_keys = 320, double max_work = 4e6,
                      const std::function<void(const Case&, const CaseResult&)>& on_case = {},
                      const BudgetTerms& terms = {});

}  // namespace fc::budget_test
