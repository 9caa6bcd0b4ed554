// What an attention problem is: shapes, scale and mask. Every subject and the reference read the same
// description, so that "which keys does query i see" has exactly one answer in the whole suite.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/visibility.h"

namespace fc {

enum class Align { top_left, bottom_right };

// A key window relative to the query's aligned diagonal: key j is visible from query i when
// i + off - left <= j <= i + off + right, where off = 0 (top-left, PyTorch's causal) or
// key_length - n_q (bottom-right, FlashAttention's causal). A negative bound means unbounded.
// Causal is window(unbounded, 0).
struct Window {
  int64_t left = -1;
  int64_t right = -1;
  Align align = Align::bottom_right;

  bool active() const { return left >= 0 || right >= 0; }
  static Window causal(Align a) { return Window{-1, 0, a}; }
  bool operator==(const Window&) const = default;
};

struct Problem {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;  // heads_q must be a multiple: GQA groups of heads_q / heads_kv query heads
  int64_t n_q = 1;
  int64_t n_k = 1;
  int d = 1;   // Q.K head dimension
  int dv = 1;  // V head dimension
  std::optional<double> scale;  // unset means 1/sqrt(d)
  Window window;
  std::vector<int64_t> key_lengths;  // empty, or one per batch (varlen/padding): keys >= length masked
  std::vector<uint8_t> dense_mask;   // empty, or n_q * n_k row-major, nonzero = attend

  double effective_scale() const { return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(d)); }
  int kv_head(int hq) const { return hq / (heads_q / heads_kv); }
  int64_t key_length(int b) const { return key_lengths.empty() ? n_k : key_lengths[b]; }

  // Row-major BHND element offsets.
  size_t q_index(int b, int h, int64_t i, int c) const { return ((size_t(b) * heads_q + h) * n_q + i) * d + c; }
  size_t k_index(int b, int h, int64_t j, int c) const { return ((size_t(b) * heads_kv + h) * n_k + j) * d + c; }
  size_t v_index(int b, int h, int64_t j, int c) const { return ((size_t(b) * heads_kv + h) * n_k + j) * dv + c; }
  size_t o_index(int b, int h, int64_t i, int c) const { return ((size_t(b) * heads_q + h) * n_q + i) * dv + c; }
  size_t lse_index(int b, int h, int64_t i) const { return (size_t(b) * heads_q + h) * n_q + i; }
  size_t q_size() const { return size_t(batch) * heads_q * n_q * d; }
  size_t k_size() const { return size_t(batch) * heads_kv * n_k * d; }
  size_t v_size() const { return size_t(batch) * heads_kv * n_k * dv; }
  size_t o_size() const { return size_t(batch) * heads_q * n_q * dv; }
  size_t lse_size() const { return size_t(batch) * heads_q * n_q; }

  // The single definition of visibility used by the reference, the emulation and the generators.
  bool visible(int b, int64_t i, int64_t j) const {
    const int64_t len = key_length(b);
    if (j >= len) return false;
    return key_visible(i, j, n_q, len, window.active(), window.left, window.right, window.align == Align::bottom_right,
                       dense_mask.empty() || dense_mask[size_t(i) * n_k + j]);
  }

  // True when some query row of some batch sees no key at all (O = 0, LSE = -inf by definition).
  bool has_empty_row() const {
    for (int b = 0; b < batch; ++b)
      for (int64_t i = 0; i < n_q; ++i) {
        bool any = false;
        for (int64_t j = 0; j < n_k && !any; ++j) any = visible(b, i, j);
        if (!any) return true;
      }
    return false;
  }

  // Throws std::invalid_argument naming the offending field when the problem is impossible.
  void validate() const;
  std::string describe() const;
};

// Mask kinds by name, as the command line and reports spell them: none, causal (bottom-right),
// causal-top-left, window:L,R (bottom-right) or window-top-left:L,R; returns nullopt if unparseable.
std::optional<Window> parse_window(const std::string& text);
std::string window_name(const Window& w);

}  // namespace fc
