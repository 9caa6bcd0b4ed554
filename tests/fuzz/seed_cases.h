// The seed corpus (tests/corpus), as field choices for the case decoder: the seed explainer's worked
// examples and the shapes of real tile-boundary bugs (docs/fuzzing.md, docs/known-bugs.md),
// scaled to the cpu limits where the original is larger. fuzz_seed_corpus writes them; fuzz_decoder_test
// checks that the committed files are still exactly what they encode (regenerate after changing the
// decoder: `build/tests/fuzz/fuzz_seed_corpus tests/corpus`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "properties/fuzz_check.h"
#include "properties/fuzz_decode.h"
#include "properties/fuzz_reproduce.h"

namespace fc::fuzz::seeds {

struct Seed {
  std::string name;  // the file name in tests/corpus
  std::vector<WantedField> fields;
  std::vector<uint8_t> values;  // the front stream (small_int mode: one int8 per element)
};

// Index of a value in the decoder's option lists (properties/fuzz_decode.cpp), for readable seeds.
inline uint64_t tile_index(int t) {
  const int tiles[] = {4, 1, 2, 3, 8, 16, 5, 32, 7, 64, 128};
  for (uint64_t i = 0; i < sizeof tiles / sizeof *tiles; ++i)
    if (tiles[i] == t) return i;
  return 0;
}
inline uint64_t dim_index(int d) {
  const int dims[] = {2, 1, 3, 4, 8, 16, 5, 7, 32, 64, 128, 256};
  for (uint64_t i = 0; i < sizeof dims / sizeof *dims; ++i)
    if (dims[i] == d) return i;
  return 0;
}
inline uint64_t recipe_index(Recipe r) { return static_cast<uint64_t>(r); }  // the emulation lists all, in order
inline uint8_t i8(int x) { return static_cast<uint8_t>(static_cast<int8_t>(x)); }
inline std::vector<uint8_t> ints(std::initializer_list<int> xs) {
  std::vector<uint8_t> b;
  for (int x : xs) b.push_back(i8(x));
  return b;
}
// The ".size" that admits a count c (2^size > c; sizes are log-uniform, see biased_length).
inline uint64_t size_for(uint64_t c) {
  uint64_t k = 0;
  while ((uint64_t(1) << k) <= c) ++k;
  return k;
}
// A literal length n (mode 1: n = 1 + literal).
inline std::vector<WantedField> length(const std::string& which, int64_t n) {
  return {{which + ".mode", 1}, {which + ".size", size_for(uint64_t(n - 1))}, {which + ".literal", uint64_t(n - 1)}};
}
// A tile-boundary length t * Bc + residue (mode 0; residue option r as in biased_length).
inline std::vector<WantedField> boundary(const std::string& which, uint64_t tiles, uint64_t residue_option) {
  return {{which + ".mode", 0}, {which + ".size", size_for(tiles)}, {which + ".tiles", tiles}, {which + ".residue", residue_option}};
}
inline std::vector<WantedField> operator+(std::vector<WantedField> a, const std::vector<WantedField>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
// Pseudo-random small ints for larger seeds (deterministic).
inline std::vector<uint8_t> noise(size_t n, uint32_t seed, int amplitude = 4) {
  std::vector<uint8_t> b(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : b) {
    s = s * 1664525u + 1013904223u;
    x = i8(int((s >> 16) % uint32_t(2 * amplitude + 1)) - amplitude);
  }
  return b;
}

inline std::vector<Seed> all() {
  std::vector<Seed> s;
  // Figure 3: Q0 = [1, 0], Q1 = [0, 1]; K = [1,2], [2,1], [3,0], [2,1]; V = [2,0], [0,2], [0,2], [1,1];
  // scale 1, no mask; two key tiles of 2 (as drawn), in three recipes.
  const auto fig3_values = ints({1, 0, 0, 1, /*K*/ 1, 2, 2, 1, 3, 0, 2, 1, /*V*/ 2, 0, 0, 2, 0, 2, 1, 1});
  const auto fig3 = std::vector<WantedField>{{"tile_m", tile_index(2)}, {"tile_n", tile_index(2)}, {"d", dim_index(2)},
                                             {"scale.mode", 1}} +
                    length("n_k", 4) + length("n_q", 2);
  s.push_back({"seed-figure3-fp32", fig3 + std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp32)}}, fig3_values});
  s.push_back({"seed-figure3-fp16", fig3 + std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}}, fig3_values});
  s.push_back({"seed-figure3-bf16-tile1x3", fig3 + std::vector<WantedField>{{"recipe", recipe_index(Recipe::bf16)},
                                                                            {"tile_m", tile_index(1)}, {"tile_n", tile_index(3)}},
               fig3_values});
  // Figures 1 and 2 as one-query problems: q = [1], k_j = s_j, V rows as printed, scale 1.
  const auto one_query = std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp32)}, {"tile_n", tile_index(2)},
                                                  {"d", dim_index(1)}, {"dv.differs", 1}, {"dv", dim_index(2)},
                                                  {"scale.mode", 1}} +
                         length("n_q", 1);
  s.push_back({"seed-figure1", one_query + length("n_k", 2), ints({1, /*K*/ 1, 2, /*V*/ 2, 0, 0, 2})});
  s.push_back({"seed-figure2", one_query + length("n_k", 6),
               ints({1, /*K*/ 1, 2, 0, 1, 3, 2, /*V*/ 2, 0, 0, 2, 1, 1, 2, 0, 0, 2, 1, 1})});

  // Real bug shapes.
  // FA2 #334: sequence length 1 (one query, one key), fp16.
  s.push_back({"bug-fa2-seqlen1-fp16", std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}, {"d", dim_index(8)}} +
                                           length("n_k", 1) + length("n_q", 1),
               noise(24, 1)});
  // cuDNN #196678: n_k % 128 == 64 with a mask: the padded half of the last key tile. Scaled: Bc = 8,
  // n_k = 2 * 8 + 4, padding mask (key lengths) in two batches.
  s.push_back({"bug-cudnn-half-tile-padding",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::bf16)}, {"tile_n", tile_index(8)}, {"batch", 1},
                                        {"d", dim_index(4)}, {"mask.key_lengths", 1}, {"key_len[0].kind", 2},
                                        {"key_len[1].kind", 3}, {"key_len[1].literal", 12}} +
                   boundary("n_k", 2, 3) + length("n_q", 5),
               noise(2 * 5 * 4 + 2 * 20 * 8, 2)});
  // xformers #191937: kv_len % 32 == 1 (bf16 + mask): n_k = 129 with Bc = 32, causal.
  s.push_back({"bug-xformers-kv-mod-32-eq-1",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::bf16)}, {"tile_m", tile_index(16)},
                                        {"tile_n", tile_index(32)}, {"d", dim_index(2)}, {"mask.window", 1}} +
                   boundary("n_k", 4, 0) + length("n_q", 3),
               noise(3 * 2 + 2 * 129 * 2, 3)});
  // FA2 #443: varlen causal with key sequences of length 1 (and one of length 0).
  s.push_back({"bug-fa2-varlen-causal-keylen1",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}, {"tile_n", tile_index(4)}, {"batch", 1},
                                        {"mask.window", 1}, {"mask.key_lengths", 1}, {"key_len[0].kind", 3},
                                        {"key_len[0].literal", 1}, {"key_len[1].kind", 3}, {"key_len[1].literal", 1}} +
                   length("n_k", 3) + length("n_q", 6),
               noise(3 * 6 * 2 + 2 * 3 * 3 * 2, 4)});
  // FA #1778 / flashinfer #4401: n_q > n_k with bottom-right causal: the top rows see no key (O = 0, LSE = -inf).
  s.push_back({"bug-causal-bottom-right-empty-rows",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}, {"tile_m", tile_index(4)},
                                        {"tile_n", tile_index(2)}, {"mask.window", 1}} +
                   length("n_k", 3) + length("n_q", 9),
               noise(9 * 2 + 3 * 2 * 2, 5)});
  // pytorch #103749 / #109517: fully masked rows from a dense mask, split-KV with an empty chunk.
  s.push_back({"bug-fully-masked-rows-split-kv",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}, {"tile_n", tile_index(4)},
                                        {"mask.dense", 1}, {"dense.kind", 2}, {"dense.density", 2}, {"dense.seed", 7},
                                        {"num_splits", 4}} +
                   length("n_k", 13) + length("n_q", 7),
               noise(7 * 2 + 13 * 2 * 2, 6)});
  // pytorch #121558: large bf16 inputs (133120 = 65 * 2^11).
  s.push_back({"bug-pytorch-large-bf16",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::bf16)}, {"tile_n", tile_index(8)}, {"d", dim_index(4)},
                                        {"q.shift", 21}, {"k.shift", 21}} +
                   length("n_k", 11) + length("n_q", 2),
               ints({65, 65, 64, -65, 65, 1, 0, 2, /*K*/ 65, 65, 65, 65, -65, 3, 2, 1, 1, 1, 1, 1, 65, -65, 65, -65,
                     2, 2, 2, 2, 64, 64, 64, 64, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 65, 65, 65, 64, 9, 9, 9, 9,
                     /*V*/ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                     25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44})});
  // flashinfer #4267: every valid logit below the -5e4 sentinel (|q| = 448, |k| = 1872, fp16).
  s.push_back({"bug-flashinfer-logits-below-sentinel",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}, {"tile_n", tile_index(4)}, {"d", dim_index(1)},
                                        {"scale.mode", 1}, {"q.shift", 5}, {"k.shift", 7}} +
                   length("n_k", 6) + length("n_q", 2),
               ints({56, 55, /*K*/ -117, -118, -117, -116, -118, -117, /*V*/ 1, 2, 3, 4, 5, 6})});
  // triton #5971: one huge logit among ordinary ones (fp16 and fp8 e4m3 with a descale).
  for (Recipe r : {Recipe::fp16, Recipe::fp8_e4m3}) {
    auto v = noise(3 * 4 + 10 * 4 * 2, 8);
    v[3 * 4 + 4 * 7] = i8(120);  // key 7 points along query 0
    v[0] = i8(120);
    s.push_back({std::string("bug-triton-one-huge-logit-") + std::string(recipe_spec(r).name),
                 std::vector<WantedField>{{"recipe", recipe_index(r)}, {"tile_n", tile_index(4)}, {"d", dim_index(4)},
                                          {"q.shift", 5}, {"k.shift", 5}} +
                     length("n_k", 10) + length("n_q", 3),
                 v});
  }
  // NaN in one head of one batch, and the isolation probe with +inf in another: neighbours untouched.
  s.push_back({"hostile-nan-one-head-inf-probe",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}, {"tile_n", tile_index(4)}, {"batch", 1},
                                        {"heads_kv", 1}, {"group", 1}, {"nan.count", 1}, {"nan[0].tensor", 1},
                                        {"nan[0].index", 2 * 6 * 2 + 5}, {"poison", 1}, {"poison.tensor", 2},
                                        {"poison.index", 3 * 6 * 2 + 3}, {"poison.value", 1}} +
                   length("n_k", 6) + length("n_q", 3),
               noise(2 * 4 * 3 * 2 + 2 * 2 * 6 * 2 * 2, 9)});
  // GQA, sliding window, subnormal inputs (exp_window deep in fp16's subnormal range).
  s.push_back({"hostile-gqa-window-subnormal",
               std::vector<WantedField>{{"recipe", recipe_index(Recipe::fp16)}, {"tile_m", tile_index(3)},
                                        {"tile_n", tile_index(5)}, {"heads_kv", 1}, {"group", 2}, {"mask.window", 3},
                                        {"window.left", 4}, {"window.right", 2}, {"q.mode", 1}, {"q.e_lo", 40 - 24},
                                        {"q.span", 6}, {"k.mode", 1}, {"k.e_lo", 40 - 20}, {"k.span", 8}} +
                   length("n_k", 17) + length("n_q", 7),
               noise(6 * 7 * 2 * 2 + 2 * 17 * 2 * 2 + 2 * 17 * 2, 10, 100)});
  // Raw bit patterns in every recipe, NaN patterns kept.
  for (Recipe r : all_recipes)
    s.push_back({std::string("hostile-raw-bits-") + std::string(recipe_spec(r).name),
                 std::vector<WantedField>{{"recipe", recipe_index(r)}, {"tile_n", tile_index(8)}, {"q.mode", 2},
                                          {"k.mode", 2}, {"v.mode", 2}, {"v.nonfinite", 1}} +
                     length("n_k", 19) + length("n_q", 5),
                 noise(4 * (5 * 2 + 19 * 2 * 2), 11 + uint32_t(r), 127)});
  return s;
}

}  // namespace fc::fuzz::seeds
