// An upper bound of the exact A_k = sum_j E_j |V_jk| / sum_j E_j from the float64 reference's computed
// A (Float64Attention::abs_scale), per row: A+ = factor A + floor (docs/error-analysis.md §3.14). The budget
// takes W (§3.9) through it instead of summing w_j |V_jk| once per (row, key, column).
//
// The reference's weights are w_j = E_j K e^{theta_j} with |theta_j| <= eta_max (K common to the row), so
// sum E|V| / sum E <= e^{2 eta_max} sum w|V| / sum w; its sums of n non-negative terms and the division lose
// at most (1 + g)^3 with g = gamma_{n+2}; a weight in double's subnormal range has an absolute error of
// 2^-1074, which `underflow` (the reference's 2 n 2^-1074 max|V| / l) carries, times the same e^{2 eta_max}.
#pragma once

#include "reference/host_device.h"

namespace fc {

struct AbsScaleBound {
  double factor, floor;
};
// e = exp(eta_max), g = gamma_{n+2}, underflow as the reference computes them for the row.
FC_HOST_DEVICE inline AbsScaleBound abs_scale_bound(double e, double g, double underflow) {
  const double e2 = e * e, g1 = 1 + g;
  return {e2 * g1 * g1 * g1, e2 * underflow};
}
// A+ of one element from the reference's computed A and its row's factor and floor.
FC_HOST_DEVICE inline double abs_scale_upper(double factor, double a, double floor) { return factor * a + floor; }

}  // namespace fc
