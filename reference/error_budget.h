// The error budget: a per-element a-priori bound |O^_ik - O_ik| <= B_ik for a fused FA-2 forward pass
// under a precision recipe, derived term by term in docs/error-analysis.md, and the check of a
// subject's output against it. The bound is built on the scale A_ik = sum_j P_ij |V_jk| (and the
// centred D_ik), not on |O_ik|: near-zero outputs come from cancellation, and an element-relative
// bound cannot hold for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/element_verdict.h"
#include "reference/exact_attention.h"
#include "reference/recipe.h"

namespace fc {

// Each term of the derivation can be switched off, so tests can show that every dominant term is
// needed (removing it lets some input exceed the bound).
struct BudgetTerms {
  bool scores = true;       // Q.K^T accumulation over d
  bool exponent = true;     // exp2 argument (folded log2(e)*scale, FFMA) and ex2.approx error
  bool rescale = true;      // rescale factors, one per running-max increase
  bool p_rounding = true;   // P rounded to the recipe's P format
  bool pv_accumulation = true;
  bool l_accumulation = true;
  bool division = true;     // the final a * (1/l)
  bool output_rounding = true;
  bool underflow = true;    // P below the P format's normal range
  bool reference = true;    // the float64 reference's own certified error
  bool operand_rounding = true;  // tf32: the fp32 inputs rounded to tf32 operands (Q, K in S; V in P.V)
  // Not a term but its form: false takes the row form where its sums apply (the default convention without
  // tf32's operand term): every key of a row gets the weight interval of the row's eta bound (sound and
  // looser, §3.6), and the sums over (key, column) one weight a key; measured by budget_report's section 4
  // (the GPU oracle takes it on request: BudgetRequest::per_key_eta).
  bool per_key_eta = true;
  // With the row form: the centred sums of each tile of 16 rows through knots (budget_knots.h, §3.18), as fp16
  // matrix products would make them, where V's stored values are exact in fp16 after a power-of-two scale
  // and the knots' certificate holds; elsewhere the row form's loop. Every element of such a row takes the
  // row's counts and an excess bounded from the row, so that none needs a walk over its column's keys but for
  // its chains. The CPU computes what a GPU copy of the products would bound (looser by about u16 = 2^-11,
  // the operands' rounding).
  bool knot_sums = false;
};

// The probabilistic variant's lambda (Higham-Mary): each sqrt(n) term holds with probability
// >= 1 - 2 exp(-lambda^2 / 2) under the model of independent mean-zero round-to-nearest errors.
inline constexpr double kProbabilisticLambda = 5.0;

struct ErrorBudget {
  std::vector<double> o_bound;                // worst case, per element of O
  std::vector<double> o_bound_probabilistic;  // the sqrt(n) variant (Higham-Mary), per element
  std::vector<double> lse_bound;              // per row
  std::vector<double> scale_a;                // A_ik = sum_j P_ij |V_jk|
  std::vector<double> scale_d;                // D_ik = sum_j P_ij |V_jk - O_ik|
  std::vector<double> lse_bound_probabilistic;  // per row
  int tile_n = 0;                             // the Bc the budget was computed for (0: unknown, any Bc)
  std::vector<uint8_t> from_knots;            // per element: its centred sums came from the knots (knot_sums)
  size_t knot_elements() const;               // how many did
};

// The per-run constants of the budget (docs/error-analysis.md §3), resolved once from the problem, the
// options and the step width; error_budget and the GPU oracle (reference/cuda/) both start from these.
struct BudgetConstants {
  bool tile_unknown;   // tile_n was 0: budget for any step width (tile_n below is then 1)
  int tile_n;
  bool fp8, simt, tc, fa1, two_level, l_fp32, splits_unknown, op_round, op_term;
  int splits_opt, block;  // the split count budgeted (2 when unknown), the block-FMA model's b
  double step, trunc_step, uP, S, theta_ftz, theta_abs, thresh;
  double qd, kd, vd, sigma, sgn, c32, mn_op, mn_p, eps_s, abs_s;
  double eps_fin, u_out, out_abs;
};
BudgetConstants budget_constants(const Problem& p, const RunOptions& o, int tile_n, const BudgetTerms& terms = {});

// tile_n is the key-tile width the subject used (the number of tiles and running-max increases
// depend on it); pass the subject's actual Bc (EmulatedKernel::effective_tile(p, o).n for the emulation),
// or 0 when it is unknown: the budget then holds for any Bc (it is larger). o.num_splits = 0 ("the
// subject decides") is budgeted as possibly split.
// The bound is derived in docs/error-analysis.md.
ErrorBudget error_budget(const Problem& p, const AttentionInputs& in, const RunOptions& o, int tile_n,
                         const Float64Attention& ref, const BudgetTerms& terms = {});

// An error expressed in ulps of the output format at the scale A_ik ("scaled ulps").
double scaled_ulps(double error, double scale_a, Format output);

struct WorstElement {
  size_t index;  // into O (or LSE rows when is_lse)
  bool is_lse;
  double got, want, error, bound, scaled_ulps;
};

struct BudgetVerdict {
  size_t elements = 0;      // O elements checked (finite reference)
  size_t violations = 0;    // elements (O or LSE) beyond their bound, or NaN/inf mismatches
  size_t nan_mismatches = 0;
  size_t lse_checked = 0;               // LSE rows checked (finite reference)
  size_t exceed_probabilistic = 0;      // O elements beyond the probabilistic variant (not a violation)
  double max_ratio = 0, sum_ratio = 0;            // error / bound
  double max_ratio_probabilistic = 0;
  double max_scaled_ulps = 0, sum_scaled_ulps = 0;
  double max_abs_error = 0, sum_sq_error = 0;
  double max_lse_ratio = 0;
  std::vector<WorstElement> worst;  // the few largest error/bound, descending
  double mean_ratio() const { return elements ? sum_ratio / double(elements) : 0; }
  double mean_scaled_ulps() const { return elements ? sum_scaled_ulps / double(elements) : 0; }
  double rmse() const;
  void add(const BudgetVerdict& other, size_t keep_worst = 8);
};

// The output format's numbers as the per-element verdict (reference/element_verdict.h) takes them.
verdict::OutputFormat output_format(Format output);

// IEEE round-to-nearest overflows at max_finite + ulp/2, so an exact value within its bound of that
// threshold may legitimately come out as +-inf of its own sign (docs/semantics.md, "Outputs at the edge
// of the output format"). True when `got` is such an overflow.
bool legitimate_overflow(double got, double want, double bound, Format output);

// Compares a subject's O (and LSE, when given) with the reference: NaN where the reference is NaN,
// exact 0 / -inf for rows with no visible key, and |error| <= bound everywhere else.
BudgetVerdict check_against_budget(const Problem& p, const std::vector<double>& o, const std::vector<double>& lse,
                                   const Float64Attention& ref, const ErrorBudget& budget, Format output,
                                   size_t keep_worst = 8);

}  // namespace fc
