// The emulation's switchable bugs: the teeth of the property suite (every property must catch some
// bug, tests/properties/property_teeth_test.cpp), and the catalogue of real bugs from public reports
// (docs/known-bugs.md, tests/properties/known_bugs_test.cpp). They are gathered here: each function
// below is one decision of the emulated kernel, written as the correct kernel makes it and as each bug
// gets it wrong, so that the kernel's steps (emulated_steps.cpp) read as the algorithm with a hook per
// decision.
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

  // The catalogue: real bugs, each modelled on its public report (docs/known-bugs.md).
  v_padding_not_zeroed,          // flash-attention #1745: the last key tile's V rows past the key length are
                                 // loaded as they are (not zero-filled) and multiplied by P = 0: 0 * NaN = NaN
  k_smem_stale_past_end,         // flash-attention #1395: K rows past the key length keep what the shared
                                 // tile held before (the buffer outlives the run); their P is masked by a
                                 // multiplication by 0, so a stale NaN, or an exp2 overflow to inf, is NaN
  running_max_finite_sentinel,   // FlashInfer #4451: the running max starts at -5e4 (a raw score) instead of
                                 // -inf, so a row whose scores all lie below it underflows to O = 0, l = 0
  masked_score_finite_sentinel,  // FlashInfer #4452: masked scores are -5e4 instead of -inf, so a fully
                                 // masked row in a visited tile gets weight 1 per masked key: finite LSE
  window_alignment_ignored,      // CUTLASS #2336, sparkinfer #3 (the class flash-attention #1778 asked
                                 // about): causal and window masks aligned top-left whatever was asked
  split_kv_stale_length,         // flash-attention #1192: the split-KV partition is computed from one
                                 // length for the whole batch (a stale max_seqlen_k: here the shortest)
                                 // instead of each sequence's own; tiles past it belong to no split
  fp8_lazy_rescale_saturation,   // flash-attention #2716: fp8 keeps a stale max while the tile max grows by
                                 // at most 4 (log2 units), P up to 2^12 saturates at e4m3's 448, and l is
                                 // summed from the unclamped fp32 P
  fp8_wide_head_dim_corrupt,     // cudnn-frontend #981: fp8 with d, dv > 192 is accepted and computes a
                                 // fraction of the elements wrong (columns 192.. of each row block's last
                                 // row are not divided by l; the report's mechanism is not public)
  gqa_group_division_inexact,    // PyTorch #193893 (no public root cause; modelled generically): the kv head
                                 // is h * fp16(1 / group), wrong for groups that are not powers of two
  index_int16_overflow,          // xformers #719: row and key indices held in int16; rows and keys from 32768
                                 // on load through a negative offset (here: NaN)
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

  // --- The catalogue's decisions ---
  // The raw score masked keys get, and the running max starts from: -inf, or the finite sentinel.
  float masked_score() const;
  float initial_max() const;
  // Whether the mask's diagonal is aligned bottom-right, given what was asked.
  bool bottom_right(bool asked) const { return asked && bug != DeliberateBug::window_alignment_ignored; }
  // Tiles per split for a row whose key tiles are [first, last), `hint` the length the buggy partition
  // uses (the batch's shortest key length).
  int64_t split_tiles(int64_t first, int64_t last, int splits, int bc, int64_t hint) const;
  // How a key of a visited tile that the mask hides enters P.V: not at all (the correct kernel), with V
  // read from memory (padding V not zero-filled), or with V = 0 and a stale score (stale shared memory).
  enum class Hidden : uint8_t { skipped, v_read, stale_k };
  Hidden hidden_key(int64_t j, int64_t len, int64_t n_k) const;
  // Whether the subject keeps state from one run to the next (the stale shared K tile), so that its runs
  // must not overlap.
  bool keeps_state_across_runs() const { return bug == DeliberateBug::k_smem_stale_past_end; }
  // fp8 lazy rescale: the max the tile's P is taken against (the old one while the growth is small).
  float used_max(float m_old, float m_new, float c, bool fp8) const;
  bool l_from_unclamped_p(bool fp8) const { return fp8 && bug == DeliberateBug::fp8_lazy_rescale_saturation; }
  // Whether column `col` of row `i` skips the division by l (row block of br rows, n_q rows).
  bool wide_head_dim_skip(bool fp8, int d, int dv, int col, int64_t i, int br, int64_t n_q) const;
  // The kv head query head h reads (group = heads_q / heads_kv).
  int kv_head(int h, int group) const;
  // Whether row (or key) index x loads through a wrapped index.
  bool index_wraps(int64_t x) const { return bug == DeliberateBug::index_int16_overflow && x > 32767; }
};

}  // namespace fc
