// Precision recipes: which formats a fused kernel stores and rounds through. The recipe is what the
// error budget is derived for, and what every subject declares it supports.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "reference/formats.h"

namespace fc {

// Same numbering as fc_recipe in include/flashcheck/plugin.h.
enum class Recipe { fp32 = 0, tf32 = 1, fp16 = 2, bf16 = 3, fp8_e4m3 = 4, fp8_e5m2 = 5 };
inline constexpr std::array<Recipe, 6> all_recipes = {Recipe::fp32, Recipe::tf32, Recipe::fp16,
                                                      Recipe::bf16, Recipe::fp8_e4m3, Recipe::fp8_e5m2};

struct RecipeSpec {
  std::string_view name;
  Format input;     // Q, K, V storage (fp8: the stored value; true value = stored * descale)
  Format operand;   // what the score MMA multiplies (tf32 rounds fp32 inputs to tf32 operands)
  Format p_format;  // P is rounded to this before P.V (fp32: no rounding)
  Format output;    // O storage
};

// The fp8 recipes: inputs stored as value / descale, P rounded to e4m3/e5m2.
inline constexpr bool is_fp8(Recipe r) { return r == Recipe::fp8_e4m3 || r == Recipe::fp8_e5m2; }

inline const RecipeSpec& recipe_spec(Recipe r) {
  static const std::array<RecipeSpec, 6> specs = {{
      {"fp32", Format::fp32, Format::fp32, Format::fp32, Format::fp32},
      {"tf32", Format::fp32, Format::tf32, Format::tf32, Format::fp32},
      {"fp16", Format::fp16, Format::fp16, Format::fp16, Format::fp16},
      {"bf16", Format::bf16, Format::bf16, Format::bf16, Format::bf16},
      {"fp8_e4m3", Format::e4m3, Format::e4m3, Format::e4m3, Format::bf16},
      {"fp8_e5m2", Format::e5m2, Format::e5m2, Format::e5m2, Format::bf16},
  }};
  return specs[static_cast<size_t>(r)];
}

inline std::optional<Recipe> parse_recipe(std::string_view name) {
  for (Recipe r : all_recipes)
    if (recipe_spec(r).name == name) return r;
  if (name == "e4m3") return Recipe::fp8_e4m3;
  if (name == "e5m2") return Recipe::fp8_e5m2;
  return std::nullopt;
}

// How a kernel runs a recipe; every field is a run-time choice the budget depends on.
enum class Accumulation { ieee_fp32, tensor_core };  // sequential fp32 FMA, or the block-FMA model
enum class Normalisation { fa2, fa1 };

struct RunOptions {
  Recipe recipe = Recipe::fp16;
  int tile_m = 0;  // Br, query rows per tile; 0 = the subject's default
  int tile_n = 0;  // Bc, keys per tile; 0 = the subject's default
  int num_splits = 1;  // split-KV chunks merged at the end (1 = none, 0 = the subject decides)
  bool l_from_fp32_p = false;   // FA-2/FA-3 convention; default sums l from the rounded P
  bool two_level_accum = false; // fp8: promote the P.V accumulator to fp32 every tile
  Normalisation normalisation = Normalisation::fa2;
  Accumulation accumulation = Accumulation::tensor_core;
  double q_descale = 1, k_descale = 1, v_descale = 1;  // fp8 per-tensor scales
};

}  // namespace fc
