#include "properties/generators.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <sstream>

namespace fc {

namespace gen = rc::gen;

namespace {
rc::Gen<int64_t> just_len(int64_t x) { return gen::just(x); }

// rc::gen::weightedElement / weightedOneOf never shrink their choice; these do, toward the first
// alternative (list the simplest first). The index is drawn at full size so the weights hold at every size.
rc::Gen<size_t> weighted_index(std::vector<int> weights) {
  int total = 0;
  for (int w : weights) total += std::max(0, w);
  return gen::map(gen::resize(100, gen::inRange(0, std::max(1, total))), [weights](int x) {
    size_t i = 0;
    for (; i + 1 < weights.size(); ++i) {
      x -= std::max(0, weights[i]);
      if (x < 0) break;
    }
    return i;
  });
}

template <class T>
rc::Gen<T> weighted_value(std::vector<std::pair<int, T>> items) {
  std::vector<int> w;
  for (const auto& it : items) w.push_back(it.first);
  return gen::map(weighted_index(w), [items](size_t i) { return items[i].second; });
}

template <class T>
rc::Gen<T> weighted_gen(std::vector<std::pair<int, rc::Gen<T>>> items) {
  std::vector<int> w;
  for (const auto& it : items) w.push_back(it.first);
  return gen::mapcat(weighted_index(w), [items](size_t i) { return items[i].second; });
}
}  // namespace

std::string_view hostile_name(Hostile h) {
  switch (h) {
    case Hostile::nan: return "nan";
    case Hostile::negative_zero: return "-0";
    case Hostile::min_subnormal: return "min_subnormal";
    case Hostile::subnormal: return "subnormal";
    case Hostile::min_normal: return "min_normal";
    case Hostile::large: return "large";
  }
  return "?";
}

std::string_view mask_kind_name(MaskKind m) {
  switch (m) {
    case MaskKind::none: return "none";
    case MaskKind::causal_bottom_right: return "causal";
    case MaskKind::causal_top_left: return "causal-top-left";
    case MaskKind::window: return "window";
    case MaskKind::key_lengths: return "key_lengths";
    case MaskKind::dense: return "dense";
    case MaskKind::causal_and_key_lengths: return "causal+key_lengths";
  }
  return "?";
}

rc::Gen<TileSize> gen_tile(const Capabilities& caps, Recipe r) {
  if (caps.any_tile) {
    // Small tiles first: a shrunk counterexample has few keys per tile and few tiles.
    return gen::apply([](int m, int n) { return TileSize{m, n}; },
                      gen::element(16, 4, 8, 32, 64, 1, 2, 3, 5, 7, 13, 128),
                      gen::element(4, 8, 16, 32, 64, 1, 2, 3, 5, 7, 13, 128));
  }
  if (!caps.tiles.empty() && takes_tiles(caps, r)) {
    // The subject's default first ({0, 0}), then its selectable set.
    std::vector<TileSize> tiles = {TileSize{0, 0}};
    tiles.insert(tiles.end(), caps.tiles.begin(), caps.tiles.end());
    return gen::elementOf(tiles);
  }
  return gen::just(TileSize{0, 0});
}

rc::Gen<int64_t> gen_length(int bc, int64_t max_len) {
  if (bc <= 0) bc = 64;
  max_len = std::max<int64_t>(1, max_len);
  const int64_t kmax = std::max<int64_t>(1, (max_len + 1) / bc);
  auto clamp = [max_len](int64_t x) { return std::clamp<int64_t>(x, 1, max_len); };
  auto boundary = gen::apply([bc, clamp](int64_t k, int delta) { return clamp(k * bc + delta); },
                             gen::inRange<int64_t>(1, kmax + 1), gen::element(0, 1, -1));
  // Two or three tiles at any size (the multiple above grows with RapidCheck's size): the first cases
  // already step the online softmax more than once.
  auto few_tiles = gen::apply([bc, clamp](int64_t k, int delta) { return clamp(k * bc + delta); },
                              gen::element<int64_t>(2, 3), gen::element(1, 0, -1));
  auto below_tile = gen::map(gen::inRange<int64_t>(1, std::max<int64_t>(2, bc)), clamp);
  auto free = gen::inRange<int64_t>(1, max_len + 1);
  return weighted_gen<int64_t>({{1, just_len(1)}, {2, below_tile}, {5, boundary}, {2, few_tiles}, {2, free}});
}

rc::Gen<HostileEdit> gen_hostile_edit(int nan_weight) {
  std::vector<std::pair<int, Hostile>> kinds = {
      {2, Hostile::negative_zero}, {2, Hostile::min_subnormal}, {2, Hostile::subnormal},
      {1, Hostile::min_normal},    {1, Hostile::large},         {std::max(0, nan_weight), Hostile::nan}};
  return gen::apply(
      [](char t, uint64_t pos, Hostile k, uint32_t bits) { return HostileEdit{t, pos, k, bits}; },
      gen::element('q', 'k', 'v'), gen::arbitrary<uint64_t>(), weighted_value<Hostile>(kinds),
      gen::arbitrary<uint32_t>());
}

namespace {

bool row_has_masked_key(const Problem& p) {
  for (int b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.n_q; ++i)
      for (int64_t j = 0; j < p.n_k; ++j)
        if (!p.visible(b, i, j)) return true;
  return false;
}

size_t work(const Problem& p) {
  return size_t(p.batch) * p.heads_q * size_t(p.n_q) * size_t(p.n_k) * size_t(p.d + p.dv);
}

std::vector<MaskKind> mask_kinds(const Capabilities& caps, const CaseSpace& space) {
  if (!space.masks) return {MaskKind::none};
  std::vector<MaskKind> kinds;
  if (caps.causal) {
    kinds.push_back(MaskKind::causal_bottom_right);
    kinds.push_back(MaskKind::causal_top_left);
  }
  if (caps.window) kinds.push_back(MaskKind::window);
  if (caps.key_lengths) kinds.push_back(MaskKind::key_lengths);
  if (caps.dense_mask) kinds.push_back(MaskKind::dense);
  if (caps.causal && caps.key_lengths) kinds.push_back(MaskKind::causal_and_key_lengths);
  // "none" first (the simplest, what a shrunk case falls back to) unless the property needs a mask.
  const bool need_mask = (space.need_masked_key || space.need_empty_row) && !kinds.empty();
  if (!need_mask) kinds.insert(kinds.begin(), MaskKind::none);
  return kinds;
}

std::vector<int64_t> pick_key_lengths(const Problem& p, int bc, bool want_zero) {
  std::vector<int64_t> lengths;
  for (int b = 0; b < p.batch; ++b) {
    const int64_t n_k = p.n_k;
    const int64_t len = *weighted_gen<int64_t>(
        {{1, just_len(n_k)},
         {3, gen::map(gen_length(bc, n_k), [n_k](int64_t x) { return std::min<int64_t>(x, n_k); })},
         {1, just_len(0)}});
    lengths.push_back(len);
  }
  if (want_zero) lengths[size_t(*gen::inRange<int>(0, p.batch))] = 0;
  return lengths;
}

// A dense mask from a few shrinkable knobs: density, fully masked rows, one fully masked tile.
std::vector<uint8_t> pick_dense_mask(const Problem& p, int br, int bc, bool want_empty_row) {
  const int density_pct = *gen::element(50, 90, 10, 100, 0);
  const int zero_rows = *gen::inRange(0, 3) + (want_empty_row ? 1 : 0);
  const bool zero_tile = *gen::element(false, true);
  const uint64_t seed = *gen::noShrink(gen::arbitrary<uint64_t>());
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> m(size_t(p.n_q) * size_t(p.n_k));
  for (auto& x : m) x = int(rng() % 100) < density_pct;
  for (int r = 0; r < zero_rows; ++r) {
    const int64_t i = int64_t(rng() % uint64_t(p.n_q));
    for (int64_t j = 0; j < p.n_k; ++j) m[size_t(i) * p.n_k + j] = 0;
  }
  if (zero_tile) {
    br = std::max(1, br);
    bc = std::max(1, bc);
    const int64_t ti = int64_t(rng() % uint64_t((p.n_q + br - 1) / br)), tj = int64_t(rng() % uint64_t((p.n_k + bc - 1) / bc));
    for (int64_t i = ti * br; i < std::min<int64_t>(p.n_q, (ti + 1) * br); ++i)
      for (int64_t j = tj * bc; j < std::min<int64_t>(p.n_k, (tj + 1) * bc); ++j) m[size_t(i) * p.n_k + j] = 0;
  }
  return m;
}

Window pick_window(int bc) {
  auto bound = weighted_gen<int64_t>(
      {{1, just_len(0)}, {5, gen::inRange<int64_t>(0, std::max(2, 2 * bc))}, {2, just_len(-1)}});
  Window w;
  w.left = *bound;
  w.right = *bound;
  w.align = *gen::element(Align::bottom_right, Align::top_left);
  if (!w.active()) w.right = 0;
  return w;
}

}  // namespace

rc::Gen<GeneratedCase> gen_case(const Capabilities& caps, const CaseSpace& space) {
  return gen::exec([caps, space] {
    GeneratedCase c;
    Problem& p = c.problem;
    RunOptions& o = c.options;
    // fp8 recipes twice as often as the others: their narrow range, saturation and descales are where
    // format bugs live.
    std::vector<std::pair<int, Recipe>> recipes;
    for (Recipe r : caps.recipes) recipes.push_back({is_fp8(r) ? 2 : 1, r});
    o.recipe = *weighted_value<Recipe>(recipes);
    const TileSize t = *gen_tile(caps, o.recipe);
    o.tile_m = t.m;
    o.tile_n = t.n;
    const int bc = t.n > 0 ? t.n : 64, br = t.m > 0 ? t.m : 64;

    // Head dims: the subject's list, else small and odd ones, or the kernels' wide ones (with short rows).
    std::vector<int> dims, wide;
    if (!caps.head_dims.empty()) {
      dims = caps.head_dims;
    } else {
      for (int d : {4, 8, 16, 32, 64, 1, 2, 3, 5, 7, 13, 31, 33, 59})
        if (d <= space.max_d) dims.push_back(d);
      for (int d : {256, 128, 512})
        if (d > space.max_d && d <= space.max_wide_d) wide.push_back(d);
    }
    // Long rows (one dimension past 2^15 or 2^16, the other at most 8 keys or rows) where one row of
    // them fits the work cap with the head dim they get (at most 2, else the subject's smallest).
    const int d_min = *std::min_element(dims.begin(), dims.end());
    const int d_long = caps.head_dims.empty() ? 2 : d_min;
    const bool can_long = space.long_len >= 32767 && size_t(space.long_len) * size_t(2 * d_long) <= space.max_work;
    enum class Shape { ordinary, wide, long_rows };
    const Shape shape = *weighted_value<Shape>(
        {{6, Shape::ordinary}, {wide.empty() ? 0 : 3, Shape::wide}, {can_long ? 2 : 0, Shape::long_rows}});

    if (shape == Shape::long_rows) {
      const int64_t long_len = std::min<int64_t>(space.long_len, *gen::element<int64_t>(32769, 65537, 32767, 32768));
      const int64_t short_len = *gen_length(bc, 8);
      const bool long_q = *gen::element(true, false);
      p.n_q = long_q ? long_len : short_len;
      p.n_k = long_q ? short_len : long_len;
      p.d = p.dv = caps.head_dims.empty() ? *gen::element(1, 2) : d_long;
    } else {
      // Nk at Bc boundaries, Nq at Br boundaries or equal to Nk.
      const int64_t max_len = shape == Shape::wide ? std::min<int64_t>(space.max_len, 96) : space.max_len;
      const std::vector<int>& ds = shape == Shape::wide ? wide : dims;
      p.n_k = *gen_length(bc, max_len);
      p.n_q = *weighted_gen<int64_t>({{1, just_len(p.n_k)}, {3, gen_length(br, max_len)}});
      p.d = *gen::elementOf(ds);
      p.dv = p.d;
      if (caps.dv_may_differ && *weighted_value<bool>({{3, false}, {1, true}})) p.dv = *gen::elementOf(ds);
      // At full size from the first case: varlen batches and GQA groups need more than one of each.
      p.batch = *gen::resize(100, gen::inRange(1, space.max_batch + 1));
      p.heads_kv = *gen::resize(100, gen::inRange(1, space.max_heads_kv + 1));
      // GQA group ratios: powers of two and the others (3, 5, 6, 7, 12), up to 16.
      const int group = caps.gqa ? *weighted_value<int>({{3, 1}, {2, 2}, {2, 4}, {2, 3}, {1, 8}, {1, 5}, {1, 6},
                                                         {1, 7}, {1, 12}, {1, 16}})
                                 : 1;
      p.heads_q = p.heads_kv * group;
    }
    // Keep the CPU cost bounded: fewer batches first, then rows longer than 64, then heads.
    while (work(p) > space.max_work) {
      if (p.batch > 1) --p.batch;
      else if (std::max(p.n_q, p.n_k) > 64 || (p.heads_q == 1 && std::max(p.n_q, p.n_k) > 1)) {
        if (p.n_q >= p.n_k) p.n_q = (p.n_q + 1) / 2;
        else p.n_k = (p.n_k + 1) / 2;
      } else if (p.heads_q > 1) p.heads_kv = p.heads_q = 1;
      else break;
    }
    switch (*gen::element(0, 1, 2, 3)) {
      case 0: break;  // 1/sqrt(d)
      case 1: p.scale = 0.5; break;
      case 2: p.scale = 0.125; break;
      case 3: p.scale = 1.0; break;
    }

    // Masks of every kind the subject supports.
    c.mask = *gen::elementOf(mask_kinds(caps, space));
    switch (c.mask) {
      case MaskKind::none: break;
      case MaskKind::causal_bottom_right: p.window = Window::causal(Align::bottom_right); break;
      case MaskKind::causal_top_left: p.window = Window::causal(Align::top_left); break;
      case MaskKind::window: p.window = pick_window(bc); break;
      case MaskKind::key_lengths: p.key_lengths = pick_key_lengths(p, bc, space.need_empty_row); break;
      case MaskKind::dense: p.dense_mask = pick_dense_mask(p, br, bc, space.need_empty_row); break;
      case MaskKind::causal_and_key_lengths:
        p.window = Window::causal(*gen::element(Align::bottom_right, Align::top_left));
        p.key_lengths = pick_key_lengths(p, bc, false);
        break;
    }
    if (space.need_empty_row && !p.has_empty_row()) {
      // Bottom-right causal/window with Nq > Nk leaves the top rows empty (not for long key rows).
      if (p.window.active() && p.window.align == Align::bottom_right && p.n_k < space.max_len) {
        p.window.right = 0;
        p.n_q = std::max(p.n_q, p.n_k + 1 + *gen::inRange<int64_t>(0, std::max(2, bc)));
        p.n_q = std::min<int64_t>(p.n_q, std::max(space.max_len, p.n_k + 1));
        if (!p.dense_mask.empty()) p.dense_mask = pick_dense_mask(p, br, bc, true);
      } else if (caps.key_lengths) {
        p.key_lengths.assign(size_t(p.batch), p.n_k);
        p.key_lengths[0] = 0;
      }
    }
    if (space.need_masked_key && !row_has_masked_key(p) && caps.key_lengths && p.n_k > 1) {
      p.key_lengths.assign(size_t(p.batch), p.n_k);
      p.key_lengths[0] = p.n_k - 1 - *gen::inRange<int64_t>(0, p.n_k - 1);
    }

    // An uninitialised KV cache: NaN past each key length (masked, so it must change nothing).
    if (space.hostile && !p.key_lengths.empty()) c.nan_padding = *weighted_value<bool>({{1, false}, {3, true}});

    c.distribution = *gen::elementOf(all_distributions);
    c.seed = *gen::arbitrary<uint64_t>();
    if (space.hostile) {
      const int count = *weighted_value<int>({{6, 0}, {2, 1}, {1, 2}, {1, 3}});
      for (int e = 0; e < count; ++e) c.edits.push_back(*gen_hostile_edit(space.nan_weight));
    }
    if (space.need_nan) {
      HostileEdit e = *gen_hostile_edit(0);
      e.kind = Hostile::nan;
      c.edits.push_back(e);  // last, so that no other edit overwrites it
    }

    if (space.vary_options) {
      // Split-KV more often over varlen batches, where each sequence's own length must cut its splits.
      if (caps.split_kv) o.num_splits = *weighted_value<int>({{p.key_lengths.empty() ? 4 : 1, 1}, {1, 2}, {1, 3}, {1, 4}});
      if (caps.fa1) o.normalisation = *weighted_value<Normalisation>({{3, Normalisation::fa2}, {1, Normalisation::fa1}});
      if (caps.l_from_fp32_p) o.l_from_fp32_p = *weighted_value<bool>({{3, false}, {1, true}});
      const bool fp8 = is_fp8(o.recipe);
      if (caps.two_level_accum && fp8) o.two_level_accum = *gen::element(false, true);
      // Capabilities has no flag for it; the any-tile subject (the emulation) models both accumulations.
      if (caps.any_tile)
        o.accumulation = *weighted_value<Accumulation>({{3, Accumulation::tensor_core}, {1, Accumulation::ieee_fp32}});
    }
    c.aux = *gen::arbitrary<uint64_t>();
    return c;
  });
}

AttentionInputs GeneratedCase::materialize(RunOptions* options_out) const {
  RunOptions o = options;
  AttentionInputs in = make_inputs(problem, distribution, options.recipe, seed, &o);
  if (nan_padding) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int b = 0; b < problem.batch; ++b)
      for (int h = 0; h < problem.heads_kv; ++h)
        for (int64_t j = problem.key_length(b); j < problem.n_k; ++j) {
          std::fill_n(&in.k[problem.k_index(b, h, j, 0)], problem.d, nan);
          std::fill_n(&in.v[problem.v_index(b, h, j, 0)], problem.dv, nan);
        }
  }
  const FormatSpec& f = spec(recipe_spec(options.recipe).input);
  for (const HostileEdit& e : edits) {
    std::vector<double>& t = e.tensor == 'q' ? in.q : e.tensor == 'k' ? in.k : in.v;
    if (t.empty()) continue;
    const double descale = e.tensor == 'q' ? o.q_descale : e.tensor == 'k' ? o.k_descale : o.v_descale;
    const double sign = (e.bits >> 31) ? -1.0 : 1.0;
    double x = 0;
    switch (e.kind) {
      case Hostile::nan:
        x = std::bit_cast<double>(uint64_t(0x7ff8000000000000ull) | (uint64_t(e.bits) & 0xffffull) |
                                  (uint64_t(e.bits >> 31) << 63));
        break;
      case Hostile::negative_zero: x = std::bit_cast<double>(uint64_t(0x8000000000000000ull)); break;
      case Hostile::min_subnormal: x = sign * f.min_subnormal() * descale; break;
      case Hostile::subnormal: {
        const uint64_t span = (uint64_t(1) << (f.precision - 1)) - 1;  // subnormal multiples of the min
        x = sign * double(1 + (e.bits & 0x7fffffffu) % span) * f.min_subnormal() * descale;
        break;
      }
      case Hostile::min_normal: x = sign * f.min_normal() * descale; break;
      case Hostile::large: x = sign * 256.0 * descale; break;
    }
    t[e.position % t.size()] = x;
  }
  if (options_out) *options_out = o;
  return in;
}

size_t GeneratedCase::scores() const {
  return size_t(problem.batch) * problem.heads_q * size_t(problem.n_q) * size_t(problem.n_k);
}

std::string GeneratedCase::describe() const {
  std::ostringstream s;
  s << recipe_spec(options.recipe).name << " " << problem.describe() << " maskgen=" << mask_kind_name(mask)
    << " Br=" << options.tile_m << " Bc=" << options.tile_n << " splits=" << options.num_splits
    << (options.normalisation == Normalisation::fa1 ? " fa1" : " fa2") << (options.l_from_fp32_p ? " l_from_fp32_p" : "")
    << (options.two_level_accum ? " two_level" : "")
    << (options.accumulation == Accumulation::ieee_fp32 ? " ieee_fp32_accum" : "")
    << (nan_padding ? " nan_padding" : "") << " dist=" << distribution_name(distribution) << " seed=" << seed << " aux=" << aux;
  for (const HostileEdit& e : edits) {
    const size_t size = e.tensor == 'q' ? problem.q_size() : e.tensor == 'k' ? problem.k_size() : problem.v_size();
    s << " " << e.tensor << "[" << (size ? e.position % size : 0) << "]=" << hostile_name(e.kind);
  }
  if (!problem.dense_mask.empty()) {
    size_t ones = 0;
    for (uint8_t m : problem.dense_mask) ones += m != 0;
    s << " dense_ones=" << ones << "/" << problem.dense_mask.size();
  }
  return s.str();
}

std::ostream& operator<<(std::ostream& os, const GeneratedCase& c) { return os << c.describe(); }

}  // namespace fc
