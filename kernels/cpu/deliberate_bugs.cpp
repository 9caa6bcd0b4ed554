#include "kernels/cpu/deliberate_bugs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

namespace fc {

namespace {

constexpr std::array<std::pair<DeliberateBug, std::string_view>, 9> kBugNames = {{
    {DeliberateBug::none, "none"},
    {DeliberateBug::a_not_rescaled, "a_not_rescaled"},
    {DeliberateBug::l_not_rescaled, "l_not_rescaled"},
    {DeliberateBug::rescale_inverted, "rescale_inverted"},
    {DeliberateBug::tail_not_masked, "tail_not_masked"},
    {DeliberateBug::causal_off_by_one, "causal_off_by_one"},
    {DeliberateBug::tile_local_max, "tile_local_max"},
    {DeliberateBug::division_skipped_after_last_tile_max_change, "division_skipped_after_last_tile_max_change"},
    {DeliberateBug::l_from_fp32_p_without_budget, "l_from_fp32_p_without_budget"},
}};

constexpr float kInf = std::numeric_limits<float>::infinity();

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

float BugHooks::alpha(float m_old, float m_new, float c) const {
  if (m_new == -kInf) return 1.0f;  // nothing visible yet
  if (bug == DeliberateBug::rescale_inverted && m_old != -kInf) return std::exp2((m_new - m_old) * c);
  return std::exp2((m_old - m_new) * c);
}

}  // namespace fc
