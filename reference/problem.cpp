#include "reference/problem.h"

#include <sstream>
#include <stdexcept>

namespace fc {

namespace {
[[noreturn]] void reject(const std::string& field, const std::string& why) {
  throw std::invalid_argument("invalid problem: " + field + " " + why);
}
}  // namespace

void Problem::validate() const {
  if (batch < 1) reject("batch", "must be >= 1, got " + std::to_string(batch));
  if (heads_q < 1) reject("heads_q", "must be >= 1, got " + std::to_string(heads_q));
  if (heads_kv < 1) reject("heads_kv", "must be >= 1, got " + std::to_string(heads_kv));
  if (heads_q % heads_kv != 0)
    reject("heads_kv", "must divide heads_q (GQA), got heads_q=" + std::to_string(heads_q) +
                           " heads_kv=" + std::to_string(heads_kv));
  if (n_q < 1) reject("n_q", "must be >= 1, got " + std::to_string(n_q));
  if (n_k < 1) reject("n_k", "must be >= 1, got " + std::to_string(n_k));
  if (d < 1) reject("d", "must be >= 1, got " + std::to_string(d));
  if (dv < 1) reject("dv", "must be >= 1, got " + std::to_string(dv));
  if (scale && !std::isfinite(*scale)) reject("scale", "must be finite");
  if (scale && *scale == 0.0) reject("scale", "must be nonzero");
  if (!key_lengths.empty()) {
    if (key_lengths.size() != size_t(batch))
      reject("key_lengths", "must have one entry per batch (" + std::to_string(batch) + "), got " +
                                std::to_string(key_lengths.size()));
    for (size_t b = 0; b < key_lengths.size(); ++b)
      if (key_lengths[b] < 0 || key_lengths[b] > n_k)
        reject("key_lengths[" + std::to_string(b) + "]",
               "must be in [0, n_k=" + std::to_string(n_k) + "], got " + std::to_string(key_lengths[b]));
  }
  if (!dense_mask.empty() && dense_mask.size() != size_t(n_q) * size_t(n_k))
    reject("dense_mask", "must have n_q*n_k = " + std::to_string(size_t(n_q) * size_t(n_k)) +
                             " entries, got " + std::to_string(dense_mask.size()));
}

std::string window_name(const Window& w) {
  if (!w.active()) return "none";
  const bool tl = w.align == Align::top_left;
  if (w.left < 0 && w.right == 0) return tl ? "causal-top-left" : "causal";
  auto bound = [](int64_t x) { return x < 0 ? std::string("inf") : std::to_string(x); };
  return std::string(tl ? "window-top-left:" : "window:") + bound(w.left) + "," + bound(w.right);
}

std::optional<Window> parse_window(const std::string& text) {
  if (text == "none") return Window{};
  if (text == "causal" || text == "causal-bottom-right") return Window::causal(Align::bottom_right);
  if (text == "causal-top-left") return Window::causal(Align::top_left);
  for (const auto& [prefix, align] : {std::pair{std::string("window:"), Align::bottom_right},
                                      std::pair{std::string("window-top-left:"), Align::top_left}}) {
    if (text.rfind(prefix, 0) != 0) continue;
    const std::string rest = text.substr(prefix.size());
    const auto comma = rest.find(',');
    if (comma == std::string::npos) return std::nullopt;
    auto bound = [](const std::string& s) -> std::optional<int64_t> {
      if (s == "inf" || s == "-1") return -1;
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
      return std::stoll(s);
    };
    const auto l = bound(rest.substr(0, comma)), r = bound(rest.substr(comma + 1));
    if (!l || !r) return std::nullopt;
    return Window{*l, *r, align};
  }
  return std::nullopt;
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "B=" << batch << " Hq=" << heads_q << " Hkv=" << heads_kv << " Nq=" << n_q << " Nk=" << n_k
    << " d=" << d << " dv=" << dv << " scale=" << effective_scale() << " mask=" << window_name(window);
  if (!key_lengths.empty()) {
    s << " key_lengths=[";
    for (size_t b = 0; b < key_lengths.size(); ++b) s << (b ? "," : "") << key_lengths[b];
    s << "]";
  }
  if (!dense_mask.empty()) s << " dense_mask";
  return s.str();
}

}  // namespace fc
