// The emulation's switchable bugs: the teeth of the property suite (every property must catch some
// bug, tests/properties/property_teeth_test.cpp). They are gathered here: each function below is one
// decision of the emulated kernel, written as the correct kernel makes it and as each bug gets it
// wrong, so that the kernel's steps (emulated_steps.cpp) read as the algorithm with a hook per decision.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fc {

enum class DeliberateBug {
  none,
  a_not_rescaled,        // the accumulator is not multiplied by alpha when the running max grows
  l_not_rescaled,        // the running sum is not multiplied by alpha
  rescale_inverted,      // alpha = exp(m_new - m_old) instead of exp(m_old - m_new)
  tail_not_masked,       // the last key tile's out-of-range keys (j >= n_k or >= key length) are visible,
                         // with score 0 and value 0 for j >= n_k (padding) and their real K/V otherwise
  causal_off_by_one,     // a window's right edge lets one more key through (j <= diag + right + 1)
  tile_local_max,        // the running max is the current tile's max only (m_old not folded in)
  division_skipped_after_last_tile_max_change,  // O = a (no division by l) when the last tile raised the max
  l_from_fp32_p_without_budget,  // l summed from the fp32 P while V uses the rounded P, reported as the
                                 // default convention (the budget then assumes the centred form)
};

std::string_view bug_name(DeliberateBug bug);
std::optional<DeliberateBug> parse_bug(std::string_view name);

// The decisions a bug can change, each the correct one under DeliberateBug::none.
struct BugHooks {
  DeliberateBug bug = DeliberateBug::none;

  // Keys past a window's right edge: causal_off_by_one lets one more through. `hi` is the end of the
  // row block's key range, `len` the key length; extra_window_key is the one key it admits past the edge
  // of row `diag` (the caller still applies the dense mask).
  int64_t window_end(int64_t hi, int64_t len, bool has_right_edge) const;
  bool extra_window_key(int64_t j, int64_t diag, int64_t right, int64_t left, int64_t len) const;
  // A key at or past the key length in the row's last tile: visible under tail_not_masked.
  bool tail_visible(bool last_tile, int64_t j, int64_t len) const;
  // The running max after a tile whose own max is tile_max.
  float running_max(float m_old, float tile_max) const;
  // The rescale factor for a max that moved from m_old to m_new (c = |scale| log2 e, folded in fp32).
  float alpha(float m_old, float m_new, float c) const;
  bool rescale_l() const { return bug != DeliberateBug::l_not_rescaled; }
  bool rescale_a() const { return bug != DeliberateBug::a_not_rescaled; }
  // Whether l is summed from the fp32 p, given what was asked.
  bool l_from_fp32(bool asked) const { return asked || bug == DeliberateBug::l_from_fp32_p_without_budget; }
  // Whether the epilogue divides by l.
  bool skip_division(bool last_tile_raised_max) const {
    return bug == DeliberateBug::division_skipped_after_last_tile_max_change && last_tile_raised_max;
  }
};

}  // namespace fc
