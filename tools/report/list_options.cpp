#include "tools/report/list_options.h"

#include <algorithm>
#include <charconv>

namespace fc::report {

namespace {
std::string quoted(const std::string& s) { return "'" + s + "'"; }

int64_t parse_int(const std::string& flag, const std::string& text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end)
    throw UsageError(flag + ": " + quoted(text) + " is not an integer");
  return v;
}
}  // namespace

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::vector<std::string> recipe_names(const std::vector<Recipe>& rs) {
  std::vector<std::string> out;
  for (Recipe r : rs) out.emplace_back(recipe_spec(r).name);
  return out;
}

std::vector<std::string> distribution_names(const std::vector<Distribution>& ds) {
  std::vector<std::string> out;
  for (Distribution d : ds) out.emplace_back(distribution_name(d));
  return out;
}

std::string all_recipe_names() {
  return join(recipe_names(std::vector<Recipe>(all_recipes.begin(), all_recipes.end())));
}
std::string all_distribution_names() {
  return join(distribution_names(std::vector<Distribution>(all_distributions.begin(), all_distributions.end())));
}

std::vector<Recipe> parse_recipes(const std::string& flag, const std::vector<std::string>& names) {
  std::vector<Recipe> out;
  for (const auto& n : names) {
    if (n == "all") {
      out.assign(all_recipes.begin(), all_recipes.end());
      continue;
    }
    auto r = parse_recipe(n);
    if (!r) throw UsageError(flag + ": unknown recipe " + quoted(n) + " (known: " + all_recipe_names() + ", all)");
    if (std::find(out.begin(), out.end(), *r) == out.end()) out.push_back(*r);
  }
  if (out.empty()) throw UsageError(flag + ": needs at least one recipe");
  return out;
}

std::vector<Distribution> parse_distributions(const std::string& flag, const std::vector<std::string>& names) {
  std::vector<Distribution> out;
  for (const auto& n : names) {
    if (n == "all") {
      out.assign(all_distributions.begin(), all_distributions.end());
      continue;
    }
    auto d = parse_distribution(n);
    if (!d)
      throw UsageError(flag + ": unknown distribution " + quoted(n) + " (known: " + all_distribution_names() + ", all)");
    if (std::find(out.begin(), out.end(), *d) == out.end()) out.push_back(*d);
  }
  if (out.empty()) throw UsageError(flag + ": needs at least one distribution");
  return out;
}

std::vector<std::string> parse_masks(const std::string& flag, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    auto w = parse_window(n);
    if (!w)
      throw UsageError(flag + ": unknown mask " + quoted(n) +
                       " (known: none, causal, causal-top-left, window:L,R, window-top-left:L,R)");
    const std::string canonical = window_name(*w);
    if (std::find(out.begin(), out.end(), canonical) == out.end()) out.push_back(canonical);
  }
  if (out.empty()) throw UsageError(flag + ": needs at least one mask");
  return out;
}

TileSize parse_tile(const std::string& flag, const std::string& text) {
  const auto x = text.find('x');
  TileSize t;
  if (x == std::string::npos) {
    t.m = t.n = int(parse_int(flag, text));
  } else {
    t.m = int(parse_int(flag, text.substr(0, x)));
    t.n = int(parse_int(flag, text.substr(x + 1)));
  }
  if (t.m < 1 || t.n < 1 || t.m > 4096 || t.n > 4096)
    throw UsageError(flag + ": tile " + quoted(text) + " must be BrxBc with 1 <= Br, Bc <= 4096");
  return t;
}

std::vector<TileSize> parse_tiles(const std::string& flag, const std::vector<std::string>& texts) {
  std::vector<TileSize> out;
  for (const auto& t : texts) {
    const TileSize ts = parse_tile(flag, t);
    if (std::find(out.begin(), out.end(), ts) == out.end()) out.push_back(ts);
  }
  if (out.empty()) throw UsageError(flag + ": needs at least one tile");
  return out;
}

std::string tile_name(const TileSize& t) {
  if (t.m == 0 && t.n == 0) return "default";
  return std::to_string(t.m) + "x" + std::to_string(t.n);
}

std::vector<int64_t> parse_sizes(const std::string& flag, const std::vector<std::string>& texts, int64_t max) {
  std::vector<int64_t> out;
  for (const auto& t : texts) {
    const int64_t v = parse_int(flag, t);
    if (v < 1) throw UsageError(flag + ": " + quoted(t) + " is impossible, sizes must be >= 1");
    if (v > max) throw UsageError(flag + ": " + quoted(t) + " is too large (at most " + std::to_string(max) + ")");
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty()) throw UsageError(flag + ": needs at least one value");
  return out;
}

CampaignSpec default_campaign(const std::vector<std::string>& subjects) {
  CampaignSpec s;
  s.subjects = subjects;
  s.recipes.assign(all_recipes.begin(), all_recipes.end());
  // 127 and 513: one short of / one past a tile boundary, so partial tiles are exercised.
  s.n = {64, 127, 256, 513};
  s.d = {32, 64, 128};
  s.masks = {"none", "causal"};
  s.distributions = {Distribution::normal, Distribution::fa3_outliers, Distribution::large_range,
                     Distribution::v_mean, Distribution::increasing_scores, Distribution::sinks};
  // 16x16: many tiles and rescales; 64x64 and 128x64 are compiled in our CUDA kernel for every d
  // here, 128x32 for d >= 96 (kernels/cuda/tile_policy.h), so the GPU run covers them too.
  s.tiles = {{16, 16}, {64, 64}, {128, 32}, {128, 64}};
  s.batch = 1;
  s.heads_q = 2;
  s.heads_kv = 1;
  s.cases = 48;
  return s;
}

void validate_campaign(const CampaignSpec& s) {
  if (s.subjects.empty()) throw UsageError("--subjects: needs at least one subject");
  if (s.recipes.empty()) throw UsageError("--recipes: needs at least one recipe");
  if (s.n.empty()) throw UsageError("--n: needs at least one sequence length");
  if (s.d.empty()) throw UsageError("--d: needs at least one head dim");
  if (s.masks.empty()) throw UsageError("--masks: needs at least one mask");
  if (s.distributions.empty()) throw UsageError("--distributions: needs at least one distribution");
  for (auto n : s.n)
    if (n < 1) throw UsageError("--n: " + std::to_string(n) + " is impossible, sizes must be >= 1");
  for (auto d : s.d)
    if (d < 1) throw UsageError("--d: " + std::to_string(d) + " is impossible, head dims must be >= 1");
  if (s.batch < 1) throw UsageError("--batch: " + std::to_string(s.batch) + " is impossible, must be >= 1");
  if (s.heads_q < 1) throw UsageError("--heads-q: " + std::to_string(s.heads_q) + " is impossible, must be >= 1");
  if (s.heads_kv < 1 || s.heads_q % s.heads_kv != 0)
    throw UsageError("--heads-kv: " + std::to_string(s.heads_kv) + " is impossible, it must divide --heads-q (" +
                     std::to_string(s.heads_q) + ")");
  for (const auto& t : s.tiles)
    if (t.m < 1 || t.n < 1) throw UsageError("--tiles: tile " + tile_name(t) + " is impossible");
  for (const auto& m : s.masks)
    if (!parse_window(m)) throw UsageError("--masks: unknown mask '" + m + "'");
  if (s.cases < 0) throw UsageError("--cases: " + std::to_string(s.cases) + " is impossible, must be >= 0");
  if (s.keep_worst < 0) throw UsageError("--keep-worst must be >= 0");
}

}  // namespace fc::report
