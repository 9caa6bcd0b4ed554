// The generators do what docs/properties.md says: lengths biased to tile boundaries, every mask kind,
// empty rows where asked, hostile values that really are NaN / subnormal / -0 in the input format, and
// nothing a subject does not claim (a CUDA-like capability set never yields an unsupported case).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "kernels/subject.h"
#include "properties/generators.h"
#include "properties/large_shapes.h"

namespace fc {
namespace {

Capabilities emulation_like() {
  Capabilities c;
  c.name = "emulation-like";
  c.recipes.assign(all_recipes.begin(), all_recipes.end());
  c.dv_may_differ = c.any_tile = c.causal = c.window = c.dense_mask = c.key_lengths = c.gqa = c.lse = true;
  c.split_kv = c.fa1 = c.l_from_fp32_p = c.two_level_accum = true;
  return c;
}

Capabilities cuda_like() {
  Capabilities c;
  c.name = "cuda-like";
  c.recipes = {Recipe::fp32, Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2};
  c.head_dims = {32, 64, 96, 128, 256};
  c.tiles = {{128, 64}, {128, 128}, {64, 64}, {128, 32}, {64, 32}};
  c.causal = c.dense_mask = c.key_lengths = c.gqa = c.lse = c.split_kv = c.l_from_fp32_p = c.two_level_accum = true;
  return c;
}

std::vector<GeneratedCase> sample(const Capabilities& caps, const CaseSpace& space, int n) {
  std::vector<GeneratedCase> out;
  const auto g = gen_case(caps, space);
  for (int i = 0; i < n; ++i) out.push_back(g(rc::Random(uint64_t(1000 + i)), 100).value());
  return out;
}

TEST(property_generators, lengths_are_biased_to_tile_boundaries) {
  const auto cases = sample(emulation_like(), {}, 2000);
  int boundary = 0, below_tile = 0, one = 0, unequal = 0, several_tiles = 0, long_rows = 0, wrapped = 0;
  for (const GeneratedCase& c : cases) {
    const Problem& p = c.problem;
    const int64_t bc = c.options.tile_n, r = p.n_k % bc;
    boundary += (p.n_k >= bc - 1) && (r == 0 || r == 1 || r == bc - 1);
    below_tile += p.n_k < bc;
    one += p.n_k == 1;
    unequal += p.n_q != p.n_k;
    several_tiles += p.n_k > bc;
    ASSERT_NO_THROW(p.validate()) << c.describe();
    if (std::max(p.n_q, p.n_k) > 300) {
      // Long rows: one dimension at 2^15 - 1 .. 2^16 + 1, the other at most 8, a tiny head dim.
      ++long_rows;
      wrapped += std::max(p.n_q, p.n_k) > 32768;
      ASSERT_LE(std::max(p.n_q, p.n_k), 65537) << c.describe();
      ASSERT_GE(std::max(p.n_q, p.n_k), 32767) << c.describe();
      ASSERT_LE(std::min(p.n_q, p.n_k), 8) << c.describe();
      ASSERT_LE(p.d, 2) << c.describe();
    }
  }
  EXPECT_GT(boundary, 2000 * 4 / 10) << "k*Bc-1, k*Bc, k*Bc+1";
  EXPECT_GT(below_tile, 100);
  EXPECT_GT(one, 50);
  EXPECT_GT(unequal, 2000 / 3);
  EXPECT_GT(several_tiles, 2000 / 3);
  EXPECT_GT(long_rows, 2000 / 12) << "one dimension past 2^15";
  EXPECT_GT(wrapped, long_rows / 3) << "past 32768";
}

// The kernels' wide head dims with short rows, and GQA group ratios beyond powers of two.
TEST(property_generators, wide_head_dims_and_group_ratios) {
  const auto cases = sample(emulation_like(), {}, 2000);
  std::set<int> wide, groups;
  int fp8_wide = 0, multi_kv_odd_group = 0;
  for (const GeneratedCase& c : cases) {
    const Problem& p = c.problem;
    if (p.d > 64) {
      wide.insert(p.d);
      ASSERT_LE(std::max(p.n_q, p.n_k), 96) << c.describe();
      const bool fp8 = c.options.recipe == Recipe::fp8_e4m3 || c.options.recipe == Recipe::fp8_e5m2;
      fp8_wide += fp8 && p.d > 192;
    }
    const int g = p.heads_q / p.heads_kv;
    groups.insert(g);
    multi_kv_odd_group += p.heads_kv > 1 && (g & (g - 1)) != 0;
  }
  EXPECT_EQ(wide, (std::set<int>{128, 256, 512}));
  EXPECT_EQ(groups, (std::set<int>{1, 2, 3, 4, 5, 6, 7, 8, 12, 16}));
  EXPECT_GT(fp8_wide, 2000 / 40);
  EXPECT_GT(multi_kv_odd_group, 2000 / 20);
}

// NaN past each key length (an uninitialised KV cache; a hostile edit may land there after it), and
// nowhere else.
TEST(property_generators, padding_past_key_lengths_is_nan) {
  int poisoned = 0;
  for (const GeneratedCase& c : sample(emulation_like(), {}, 1500)) {
    if (!c.nan_padding) continue;
    ASSERT_FALSE(c.problem.key_lengths.empty()) << c.describe();
    GeneratedCase clean = c;
    clean.nan_padding = false;
    RunOptions o;
    const AttentionInputs in = c.materialize(&o), ref = clean.materialize(&o);
    const Problem& p = c.problem;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_kv; ++h)
        for (int64_t j = 0; j < p.n_k; ++j)
          for (int x = 0; x < p.d; ++x) {
            const size_t k = p.k_index(b, h, j, x);
            const bool edited = std::any_of(c.edits.begin(), c.edits.end(), [&](const HostileEdit& e) {
              return e.tensor == 'k' && e.position % in.k.size() == k;
            });
            if (j >= p.key_length(b) && !edited) ASSERT_TRUE(std::isnan(in.k[k])) << c.describe();
            else ASSERT_EQ(std::isnan(in.k[k]), std::isnan(ref.k[k])) << c.describe();
          }
    ++poisoned;
  }
  EXPECT_GT(poisoned, 100);
}

TEST(property_generators, every_kind_appears) {
  const auto cases = sample(emulation_like(), {}, 2000);
  std::set<MaskKind> masks;
  std::set<Recipe> recipes;
  std::set<Distribution> dists;
  std::set<Hostile> hostile;
  int gqa = 0, dv_differs = 0, empty = 0, splits = 0, fa1 = 0, odd_d = 0, varlen_zero = 0;
  for (const GeneratedCase& c : cases) {
    masks.insert(c.mask);
    recipes.insert(c.options.recipe);
    dists.insert(c.distribution);
    for (const HostileEdit& e : c.edits) hostile.insert(e.kind);
    gqa += c.problem.heads_q != c.problem.heads_kv;
    dv_differs += c.problem.dv != c.problem.d;
    empty += c.problem.has_empty_row();
    splits += c.options.num_splits > 1;
    fa1 += c.options.normalisation == Normalisation::fa1;
    odd_d += c.problem.d % 2 == 1;
    for (int64_t l : c.problem.key_lengths) varlen_zero += l == 0;
  }
  EXPECT_EQ(masks.size(), 7u);
  EXPECT_EQ(recipes.size(), all_recipes.size());
  EXPECT_EQ(dists.size(), all_distributions.size());
  EXPECT_EQ(hostile.size(), 5u) << "every kind but NaN (weight 0 by default)";
  EXPECT_GT(gqa, 100);
  EXPECT_GT(dv_differs, 100);
  EXPECT_GT(empty, 100);
  EXPECT_GT(splits, 100);
  EXPECT_GT(fa1, 100);
  EXPECT_GT(odd_d, 100);
  EXPECT_GT(varlen_zero, 20);
}

TEST(property_generators, spaces_are_honoured) {
  CaseSpace empty;
  empty.need_empty_row = true;
  int with_empty = 0;
  for (const GeneratedCase& c : sample(emulation_like(), empty, 500)) with_empty += c.problem.has_empty_row();
  EXPECT_GT(with_empty, 500 * 95 / 100);

  CaseSpace nan;
  nan.need_nan = true;
  for (const GeneratedCase& c : sample(emulation_like(), nan, 300)) {
    RunOptions o;
    const AttentionInputs in = c.materialize(&o);
    bool any = false;
    for (const auto* t : {&in.q, &in.k, &in.v})
      for (double x : *t) any |= std::isnan(x);
    ASSERT_TRUE(any) << c.describe();
  }

  CaseSpace none;
  none.masks = false;
  for (const GeneratedCase& c : sample(emulation_like(), none, 300)) {
    ASSERT_FALSE(c.problem.window.active());
    ASSERT_TRUE(c.problem.key_lengths.empty());
    ASSERT_TRUE(c.problem.dense_mask.empty());
  }
}

TEST(property_generators, only_what_the_subject_claims) {
  const Capabilities caps = cuda_like();
  for (const GeneratedCase& c : sample(caps, {}, 1000)) {
    const auto why = unsupported(caps, c.problem, c.options);
    ASSERT_FALSE(why.has_value()) << *why << "\n" << c.describe();
    ASSERT_EQ(c.problem.d, c.problem.dv);
    ASSERT_NE(c.options.normalisation, Normalisation::fa1);
  }
}

// A recipe outside the subject's tile_recipes runs its one tiling: the generators never ask it for a
// tile, and unsupported() names such a request (our CUDA kernel's fp32 SIMT path).
TEST(property_generators, a_recipe_without_tile_options_is_asked_for_none) {
  Capabilities caps = cuda_like();
  caps.tile_recipes = {Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2};
  int fp32 = 0, tiled = 0;
  for (const GeneratedCase& c : sample(caps, {}, 600)) {
    if (c.options.recipe == Recipe::fp32) {
      ++fp32;
      ASSERT_EQ(c.options.tile_n, 0) << c.describe();
      ASSERT_EQ(c.options.tile_m, 0) << c.describe();
    } else if (c.options.tile_n != 0) {
      ++tiled;
    }
  }
  EXPECT_GT(fp32, 50);
  EXPECT_GT(tiled, 50) << "the other recipes still get their tiles";
  RunOptions o;
  o.recipe = Recipe::fp32;
  o.tile_m = 64, o.tile_n = 64;
  Problem p;
  p.d = p.dv = 64;
  const auto why = unsupported(caps, p, o);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("runs recipe fp32 with its one tiling"), std::string::npos) << *why;
  o.recipe = Recipe::fp16;
  EXPECT_FALSE(unsupported(caps, p, o).has_value());
}

TEST(property_generators, hostile_values_are_what_they_claim) {
  CaseSpace space;
  space.nan_weight = 2;
  int checked = 0;
  for (const GeneratedCase& c : sample(emulation_like(), space, 1500)) {
    if (c.edits.empty()) continue;
    RunOptions o;
    const AttentionInputs in = c.materialize(&o);
    const Format f = recipe_spec(c.options.recipe).input;
    const FormatSpec& s = spec(f);
    // Every input is a value of the input format (times the fp8 descale), or NaN; never inf.
    for (const auto& [t, descale] : {std::pair{&in.q, o.q_descale}, std::pair{&in.k, o.k_descale}, std::pair{&in.v, o.v_descale}})
      for (double x : *t) {
        ASSERT_FALSE(std::isinf(x)) << c.describe();
        if (!std::isnan(x)) {
          ASSERT_TRUE(is_representable(f, x / descale)) << x << " " << c.describe();
        }
      }
    // The last edit to a position is what is there.
    const HostileEdit& e = c.edits.back();
    const std::vector<double>& t = e.tensor == 'q' ? in.q : e.tensor == 'k' ? in.k : in.v;
    const double descale = e.tensor == 'q' ? o.q_descale : e.tensor == 'k' ? o.k_descale : o.v_descale;
    const double x = t[e.position % t.size()] / descale;
    switch (e.kind) {
      case Hostile::nan: EXPECT_TRUE(std::isnan(x)); break;
      case Hostile::negative_zero: EXPECT_TRUE(x == 0 && std::signbit(x)); break;
      case Hostile::min_subnormal: EXPECT_EQ(std::fabs(x), s.min_subnormal()); break;
      case Hostile::subnormal: EXPECT_TRUE(std::fabs(x) > 0 && std::fabs(x) < s.min_normal()) << x; break;
      case Hostile::min_normal: EXPECT_EQ(std::fabs(x), s.min_normal()); break;
      case Hostile::large: EXPECT_EQ(std::fabs(x), 256.0); break;
    }
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

TEST(property_generators, describe_is_readable) {
  const auto c = sample(emulation_like(), {}, 1).front();
  const std::string d = c.describe();
  for (const char* field : {"B=", "Nq=", "Nk=", "d=", "Br=", "Bc=", "dist=", "seed=", "mask="})
    EXPECT_NE(d.find(field), std::string::npos) << field << " missing in " << d;
}

// The large-shape mode (properties/large_shapes.h): every draw is a valid problem within the limits (N up to
// 64k, B·Hq up to 64, the score cap), GQA groups divide, head dims are the subject's; and the draws reach
// the ends of the range (a sequence past 32k, a case with 64 heads' worth of B·Hq) and every mask kind.
TEST(property_generators, large_shapes_stay_within_their_limits_and_reach_them) {
  Capabilities caps;
  caps.recipes = {Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2};
  caps.head_dims = {64, 128, 256};
  caps.causal = caps.window = caps.key_lengths = caps.gqa = true;
  const LargeLimits lim;
  std::mt19937_64 rng(7);
  int64_t longest = 0;
  int widest = 0;
  std::set<std::string> masks;
  std::set<int> groups;
  for (int n = 0; n < 20000; ++n) {
    const LargeCase c = draw_large_case(rng, caps, lim);
    const Problem& p = c.problem;
    ASSERT_NO_THROW(p.validate()) << c.describe();
    ASSERT_LE(std::max(p.n_q, p.n_k), lim.max_n) << c.describe();
    ASSERT_LE(p.batch * p.heads_q, lim.max_bh) << c.describe();
    ASSERT_LE(double(p.batch) * p.heads_q * double(p.n_q) * double(p.n_k), lim.max_scores) << c.describe();
    ASSERT_EQ(p.heads_q % p.heads_kv, 0) << c.describe();
    ASSERT_TRUE(p.d == 64 || p.d == 128 || p.d == 256) << c.describe();
    ASSERT_FALSE(unsupported(caps, p, c.options).has_value()) << c.describe();
    longest = std::max(longest, std::max(p.n_q, p.n_k));
    widest = std::max(widest, p.batch * p.heads_q);
    masks.insert(!p.key_lengths.empty() ? "lengths" : !p.window.active() ? "none"
                 : p.window.left < 0 && p.window.right == 0 ? "causal" : "window");
    groups.insert(p.heads_q / p.heads_kv);
  }
  EXPECT_GT(longest, 32768);
  EXPECT_EQ(widest, lim.max_bh);
  EXPECT_EQ(masks.size(), 4u);
  EXPECT_EQ(groups, (std::set<int>{1, 2, 4, 8}));
}

}  // namespace
}  // namespace fc
