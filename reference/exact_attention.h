// Exact attention: O = softmax(scale * Q K^T + mask) V and the log-sum-exp, on the exact values of
// the inputs. Two precisions: float64 (Eigen), which carries a certified bound on its own error so it
// can stand in for the exact result on large shapes, and MPFR multiprecision, the yardstick
// (exact_attention_mp.h).
//
// Semantics (docs/semantics.md): a row with no visible key gives O = 0 and LSE = -inf; NaN in an
// input reaches exactly the outputs that depend on it; +-inf inputs are rejected.
#pragma once

#include <vector>

#include "reference/online_softmax.h"
#include "reference/problem.h"

namespace fc {

// Inputs as exact values (already in their storage format), row-major BHND.
struct AttentionInputs {
  std::vector<double> q, k, v;
};

template <class T>
struct AttentionOutputs {
  std::vector<T> o;    // [B, Hq, Nq, dv]
  std::vector<T> lse;  // [B, Hq, Nq], natural log
};

// Throws std::invalid_argument for an invalid problem, wrongly sized tensors, or an infinite input
// (the message names the tensor and the element).
void validate_inputs(const Problem& p, const AttentionInputs& in);

// The float64 result, with per-element bounds on |O_f64 - O_exact| and |LSE_f64 - LSE_exact|.
struct Float64Attention {
  AttentionOutputs<double> out;
  std::vector<double> o_error_bound;
  std::vector<double> lse_error_bound;
  // A_ik = sum_j P_ij |V_jk| as computed beside O (the sum of weight * |V| over l; the certificate uses it
  // inflated by its own rounding): the scale of scaled ulps. 0 where O is NaN or the row sees no key.
  std::vector<double> abs_scale;
  // Per row ([B, Hq, Nq]): A+ = abs_scale_factor A + abs_scale_floor bounds the exact A from above
  // (reference/abs_scale_bound.h); 1 and 0 where O is NaN or the row sees no key.
  std::vector<double> abs_scale_factor, abs_scale_floor;
};
Float64Attention exact_attention_f64(const Problem& p, const AttentionInputs& in);

}  // namespace fc
