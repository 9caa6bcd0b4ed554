// The knot form's walk on the CPU (BudgetTerms::knot_sums; reference/budget_knots.h, docs/error-analysis.md
// §3.18): what error_budget.cpp keeps per head, per tile of kKnotRows rows and per row, with the products'
// sums added in double where a GPU copy would read the tensor cores' chains.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/budget_knots.h"
#include "reference/budget_sums.h"
#include "reference/tensor_core_model.h"

namespace fc::budget {

// One product sum as the fp16 tensor cores chain it (docs/error-analysis.md §3.2's block-FMA model, which
// reproduces mma.sync m16n8k16 on fp16 bit for bit on the H200): the products of each aligned group of 16 keys
// in one block step, a chain from zero per split of kKnotChainKeys keys, the chains added in double in split
// order. Keys come in ascending order; a zero product moves neither the alignment nor the sum, so the keys a
// row does not see are left out.
class KnotChain {
 public:
  void add(int64_t j, double a, double b) {
    if (a == 0 || b == 0) return;
    if (j / 16 != step_) {
      flush_step();
      if (j / kKnotChainKeys != split_) {
        sum_ += double(c_);
        c_ = 0;
        split_ = j / kKnotChainKeys;
      }
      step_ = j / 16;
    }
    t_[n_] = a * b;  // exact: two fp16 numbers
    align_[n_++] = product_alignment(model_, a, b, 0x1p-14, 0x1p-14);
  }
  double total() {
    flush_step();
    return sum_ + double(c_);
  }

 private:
  void flush_step() {
    if (n_) c_ = block_fma_step(c_, t_, n_, model_.F, align_);
    n_ = 0;
  }
  BlockFmaModel model_ = tensor_core_model(Recipe::fp16);
  double t_[16], align_[16];
  int n_ = 0;
  int64_t step_ = -1, split_ = -1;
  float c_ = 0;
  double sum_ = 0;
};

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
