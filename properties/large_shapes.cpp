#include "properties/large_shapes.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace fc {

namespace {

int64_t log_uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const double x = std::uniform_real_distribution<double>(std::log(double(lo)), std::log(double(hi) + 1))(rng);
  return std::clamp<int64_t>(int64_t(std::exp(x)), lo, hi);
}

}  // namespace

std::string LargeCase::describe() const {
  std::ostringstream s;
  s << recipe_spec(options.recipe).name << " " << problem.describe() << " seed=" << seed;
  return s.str();
}

LargeCase draw_large_case(std::mt19937_64& rng, const Capabilities& caps, const LargeLimits& lim) {
  LargeCase c;
  std::vector<Recipe> recipes;
  for (Recipe r : caps.recipes)
    if (r == Recipe::fp16 || r == Recipe::bf16 || is_fp8(r)) recipes.push_back(r);
  if (recipes.empty()) throw std::invalid_argument("no fp16, bf16 or fp8 recipe: the large-shape mode makes those inputs");
  c.options.recipe = recipes[std::uniform_int_distribution<size_t>(0, recipes.size() - 1)(rng)];
  if (is_fp8(c.options.recipe)) c.options.q_descale = c.options.k_descale = c.options.v_descale = 0.125;
  c.options.num_splits = 0;  // the subject decides
  std::vector<int> dims;
  for (int d : caps.head_dims)
    if (d <= 256) dims.push_back(d);
  if (dims.empty() && caps.head_dims.empty()) dims = {64, 128, 256};
  if (dims.empty()) throw std::invalid_argument("no head dim up to 256 (the GPU oracle's)");
  Problem& p = c.problem;
  p.d = p.dv = dims[std::uniform_int_distribution<size_t>(0, dims.size() - 1)(rng)];
  const int groups[] = {1, 2, 4, 8};
  const int group = caps.gqa ? groups[std::uniform_int_distribution<int>(0, 3)(rng)] : 1;
  // N and B·Hq, biased to the top of their ranges (three draws in four take N from 1024 up, one in two
  // B·Hq from a quarter of the maximum up), then shrunk together until the case fits max_scores.
  auto draw_n = [&] {
    const bool long_one = std::uniform_int_distribution<int>(0, 3)(rng) != 0 && lim.max_n >= 1024;
    return log_uniform(rng, long_one ? 1024 : 1, lim.max_n);
  };
  int64_t n_q = draw_n();
  int64_t n_k = std::uniform_int_distribution<int>(0, 1)(rng) ? n_q : draw_n();
  const int bh_lo = std::uniform_int_distribution<int>(0, 1)(rng) ? group : std::max(group, lim.max_bh / 4);
  int bh = int(log_uniform(rng, bh_lo, std::max(bh_lo, lim.max_bh)));
  bh = std::max(group, bh / group * group);
  while (double(bh) * double(n_q) * double(n_k) > lim.max_scores) {
    if (std::max(n_q, n_k) >= 1024 || bh <= group) {
      if (n_q >= n_k) n_q = std::max<int64_t>(1, n_q * 3 / 4);
      else n_k = std::max<int64_t>(1, n_k * 3 / 4);
    } else {
      bh = std::max(group, (bh / 2) / group * group);
    }
  }
  p.n_q = n_q;
  p.n_k = n_k;
  // B·Hq <= bh with Hq a multiple of the group.
  p.batch = std::uniform_int_distribution<int>(1, std::max(1, bh / group))(rng);
  p.heads_q = std::max(group, (bh / p.batch) / group * group);
  p.heads_kv = p.heads_q / group;
  // Masks, evenly: none, causal top-left, causal bottom-right, a window, key lengths.
  switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
    case 1:
      if (caps.causal) p.window = Window::causal(Align::top_left);
      break;
    case 2:
      if (caps.causal) p.window = Window::causal(Align::bottom_right);
      break;
    case 3:
      if (caps.window) {
        p.window.left = log_uniform(rng, 1, std::max<int64_t>(1, n_k));
        p.window.right = std::uniform_int_distribution<int>(0, 1)(rng) ? 0 : log_uniform(rng, 1, std::max<int64_t>(1, n_k));
        p.window.align = std::uniform_int_distribution<int>(0, 1)(rng) ? Align::top_left : Align::bottom_right;
      }
      break;
    case 4:
      if (caps.key_lengths)
        for (int b = 0; b < p.batch; ++b) p.key_lengths.push_back(std::uniform_int_distribution<int64_t>(0, n_k)(rng));
      break;
    default: break;
  }
  c.seed = rng();
  return c;
}

}  // namespace fc
