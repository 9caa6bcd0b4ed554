#include "kernels/cpu/deliberate_bugs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "reference/formats.h"

namespace fc {

namespace {

constexpr std::array<std::pair<DeliberateBug, std::string_view>, 19> kBugNames = {{
    {DeliberateBug::none, "none"},
    {DeliberateBug::a_not_rescaled, "a_not_rescaled"},
    {DeliberateBug::l_not_rescaled, "l_not_rescaled"},
    {DeliberateBug::rescale_inverted, "rescale_inverted"},
    {DeliberateBug::tail_not_masked, "tail_not_masked"},
    {DeliberateBug::causal_off_by_one, "causal_off_by_one"},
    {DeliberateBug::tile_local_max, "tile_local_max"},
    {DeliberateBug::division_skipped_after_last_tile_max_change, "division_skipped_after_last_tile_max_change"},
    {DeliberateBug::l_from_fp32_p_without_budget, "l_from_fp32_p_without_budget"},
    {DeliberateBug::v_padding_not_zeroed, "v_padding_not_zeroed"},
    {DeliberateBug::k_smem_stale_past_end, "k_smem_stale_past_end"},
    {DeliberateBug::running_max_finite_sentinel, "running_max_finite_sentinel"},
    {DeliberateBug::masked_score_finite_sentinel, "masked_score_finite_sentinel"},
    {DeliberateBug::window_alignment_ignored, "window_alignment_ignored"},
    {DeliberateBug::split_kv_stale_length, "split_kv_stale_length"},
    {DeliberateBug::fp8_lazy_rescale_saturation, "fp8_lazy_rescale_saturation"},
    {DeliberateBug::fp8_wide_head_dim_corrupt, "fp8_wide_head_dim_corrupt"},
    {DeliberateBug::gqa_group_division_inexact, "gqa_group_division_inexact"},
    {DeliberateBug::index_int16_overflow, "index_int16_overflow"},
}};

constexpr float kInf = std::numeric_limits<float>::infinity();
// FlashInfer's FA-2 "infinity" (math::inf = 5e4), on raw q.k scores (FlashInfer #4267, #4451, #4452).
constexpr float kSentinel = -5e4f;
// flash-attention #2716: the lazy rescale threshold, in log2 units (P is exp2(s c - m c + 8)).
constexpr float kRescaleThreshold = 4.0f;

}  // namespace

std::string_view bug_name(DeliberateBug bug) {
  for (const auto& [b, n] : kBugNames)
    if (b == bug) return n;
  return "unknown";
}

std::optional<DeliberateBug> parse_bug(std::string_view name) {
  for (const auto& [b, n] : kBugNames)
    if (n == name) return b;
  return std::nullopt;
}

int64_t BugHooks::window_end(int64_t hi, int64_t len, bool has_right_edge) const {
  if (bug == DeliberateBug::causal_off_by_one && has_right_edge) return std::min<int64_t>(len, hi + 1);
  return hi;
}

bool BugHooks::extra_window_key(int64_t j, int64_t diag, int64_t right, int64_t left, int64_t len) const {
  return bug == DeliberateBug::causal_off_by_one && right >= 0 && j < len && j == diag + right + 1 &&
         (left < 0 || j >= diag - left);
}

bool BugHooks::tail_visible(bool last_tile, int64_t j, int64_t len) const {
  return bug == DeliberateBug::tail_not_masked && last_tile && j >= len;
}

float BugHooks::running_max(float m_old, float tile_max) const {
  // fmaxf ignores NaN, as on the GPU.
  return bug == DeliberateBug::tile_local_max ? tile_max : std::fmax(m_old, tile_max);
}

float BugHooks::masked_score() const { return bug == DeliberateBug::masked_score_finite_sentinel ? kSentinel : -kInf; }

float BugHooks::initial_max() const { return bug == DeliberateBug::running_max_finite_sentinel ? kSentinel : -kInf; }

int64_t BugHooks::split_tiles(int64_t first, int64_t last, int splits, int bc, int64_t hint) const {
  // flash-attention's n_blocks_per_split = ceil(ceil(seqlen_k / Bc) / splits), from params.seqlen_k
  // where binfo.actual_seqlen_k was meant (the fix of #1192).
  if (bug == DeliberateBug::split_kv_stale_length && splits > 1) return ((hint + bc - 1) / bc + splits - 1) / splits;
  return (last - first + splits - 1) / splits;
}

BugHooks::Hidden BugHooks::hidden_key(int64_t j, int64_t len, int64_t n_k) const {
  if (j < len) return Hidden::skipped;  // inside the sequence: masked by assignment, never read
  if (bug == DeliberateBug::v_padding_not_zeroed && j < n_k) return Hidden::v_read;
  if (bug == DeliberateBug::k_smem_stale_past_end) return Hidden::stale_k;
  return Hidden::skipped;
}

float BugHooks::used_max(float m_old, float m_new, float c, bool fp8) const {
  if (fp8 && bug == DeliberateBug::fp8_lazy_rescale_saturation && m_old != -kInf && (m_new - m_old) * c <= kRescaleThreshold)
    return m_old;
  return m_new;
}

bool BugHooks::wide_head_dim_skip(bool fp8, int d, int dv, int col, int64_t i, int br, int64_t n_q) const {
  if (bug != DeliberateBug::fp8_wide_head_dim_corrupt || !fp8 || d <= 192 || dv <= 192 || col < 192) return false;
  return i % br == br - 1 || i == n_q - 1;
}

int BugHooks::kv_head(int h, int group) const {
  if (bug != DeliberateBug::gqa_group_division_inexact) return h / group;
  const float reciprocal = static_cast<float>(round_to(Format::fp16, 1.0 / group));  // below 1/group unless 2^-k
  return static_cast<int>(static_cast<float>(h) * reciprocal);
}

float BugHooks::alpha(float m_old, float m_new, float c) const {
  if (m_new == -kInf) return 1.0f;  // nothing visible yet
  if (bug == DeliberateBug::rescale_inverted && m_old != -kInf) return std::exp2((m_new - m_old) * c);
  return std::exp2((m_old - m_new) * c);
}

}  // namespace fc
