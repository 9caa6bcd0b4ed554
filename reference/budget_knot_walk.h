// The knot form's walk on the CPU (BudgetTerms::knot_sums; reference/budget_knots.h, docs/error-analysis.md
// §3.18): what error_budget.cpp keeps per head, per tile of kKnotRows rows and per row, with the products'
// sums added in double where a GPU copy would read the tensor cores' chains.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/budget_knots.h"
#include "reference/budget_sums.h"

namespace fc::budget {

class KnotWalk {
 public:
  // A head's V in stored units by column (vs_col[c * n_k + j]): each column's scale, whether every value is
  // within delta of its fp16 value at both scales (else the column keeps the loop), those values, and whether
  // the column holds a nonzero value below small_below (the operands' normal range on the tensor cores, 0 for
  // none).
  void head(const std::vector<double>& vs_col, int64_t n_k, int dv, double small_below);
  bool small_column(int c) const { return small_[size_t(c)] != 0; }

  // A tile's knots per column from its rows' smallest and largest o (stored units; lo > hi where no row has
  // one: the column keeps the loop), and every key's operands at them.
  void tile(const std::vector<double>& lo, const std::vector<double>& hi);

  // One row: its n visible keys (ascending) with their row-form weights, and per column its o (stored units,
  // NaN where it has none); then at(c) holds each column's bounds, certified or not.
  void row(const std::vector<int64_t>& keys, const std::vector<RowWeights>& rw, size_t n, const std::vector<double>& o,
           double vd);
  const KnotBounds& at(int c) const { return bounds_[size_t(c)]; }

 private:
  int64_t n_k_ = 0;
  int dv_ = 0;
  std::vector<double> rc_, x_, x2_;  // per column its scale; per (column, key) its fp16 values at both scales
  std::vector<char> ok_, small_;
  std::vector<KnotPair> k_, k2_;  // the tile's knots per column, at both scales
  std::vector<float> d0_, d1_, q0_, q1_;  // per (column, key): |x - t| and (x - t)^2 at each knot
  std::vector<char> bracket_;
  std::vector<double> w_, w3_, wz_;  // the row's fp16 weights
  std::vector<KnotBounds> bounds_;
};

}  // namespace fc::budget
