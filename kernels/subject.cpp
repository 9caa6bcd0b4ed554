#include "kernels/subject.h"

#include <algorithm>
#include <cmath>

namespace fc {

bool takes_tiles(const Capabilities& caps, Recipe r) {
  return caps.tile_recipes.empty() ||
         std::find(caps.tile_recipes.begin(), caps.tile_recipes.end(), r) != caps.tile_recipes.end();
}

std::optional<std::string> unsupported(const Capabilities& caps, const Problem& p, const RunOptions& o) {
  const std::string who = caps.name.empty() ? "subject" : caps.name;
  const RecipeSpec& rs = recipe_spec(o.recipe);
  if (std::find(caps.recipes.begin(), caps.recipes.end(), o.recipe) == caps.recipes.end())
    return who + " does not support recipe " + std::string(rs.name);
  if (!caps.head_dims.empty() && std::find(caps.head_dims.begin(), caps.head_dims.end(), p.d) == caps.head_dims.end()) {
    std::string list;
    for (int d : caps.head_dims) list += (list.empty() ? "" : ",") + std::to_string(d);
    return who + " does not support head dim d=" + std::to_string(p.d) + " (supported: " + list + ")";
  }
  if (p.dv != p.d && !caps.dv_may_differ)
    return who + " needs dv == d (got d=" + std::to_string(p.d) + ", dv=" + std::to_string(p.dv) + ")";
  if (o.tile_m < 0 || o.tile_n < 0)
    return "tile sizes must be >= 1 (or 0 for the default), got " + std::to_string(o.tile_m) + "x" + std::to_string(o.tile_n);
  if ((o.tile_m != 0 || o.tile_n != 0) && !caps.any_tile && !takes_tiles(caps, o.recipe))
    return who + " runs recipe " + std::string(rs.name) + " with its one tiling (tile " + std::to_string(o.tile_m) +
           "x" + std::to_string(o.tile_n) + " asked)";
  if ((o.tile_m != 0 || o.tile_n != 0) && !caps.any_tile) {
    const bool ok = std::any_of(caps.tiles.begin(), caps.tiles.end(), [&](const TileSize& t) {
      return (o.tile_m == 0 || o.tile_m == t.m) && (o.tile_n == 0 || o.tile_n == t.n);
    });
    if (!ok) {
      std::string list;
      for (const TileSize& t : caps.tiles) list += (list.empty() ? "" : ",") + std::to_string(t.m) + "x" + std::to_string(t.n);
      return who + " does not support tile " + std::to_string(o.tile_m) + "x" + std::to_string(o.tile_n) +
             " (selectable: " + (list.empty() ? std::string("default only") : list) + ")";
    }
  }
  if (p.window.active()) {
    const bool causal = p.window.left < 0 && p.window.right == 0;
    if (causal && !caps.causal && !caps.window) return who + " does not support causal masks";
    if (!causal && !caps.window) return who + " does not support sliding-window masks (" + window_name(p.window) + ")";
  }
  if (!p.dense_mask.empty() && !caps.dense_mask) return who + " does not support dense masks";
  if (!p.key_lengths.empty() && !caps.key_lengths) return who + " does not support per-batch key lengths";
  if (p.heads_q != p.heads_kv && !caps.gqa)
    return who + " does not support GQA/MQA (heads_q=" + std::to_string(p.heads_q) + ", heads_kv=" +
           std::to_string(p.heads_kv) + ")";
  if (o.num_splits < 0) return "num_splits must be >= 0, got " + std::to_string(o.num_splits);
  if (o.num_splits > 1 && !caps.split_kv) return who + " does not support split-KV (num_splits=" + std::to_string(o.num_splits) + ")";
  if (o.normalisation == Normalisation::fa1 && !caps.fa1) return who + " does not support FA-1 normalisation";
  if (o.l_from_fp32_p && !caps.l_from_fp32_p) return who + " does not support summing l from the fp32 P";
  const bool fp8 = is_fp8(o.recipe);
  if (o.two_level_accum && !fp8) return "two_level_accum applies to the fp8 recipes only (recipe " + std::string(rs.name) + ")";
  if (o.two_level_accum && !caps.two_level_accum) return who + " does not support two-level fp8 accumulation";
  for (double ds : {o.q_descale, o.k_descale, o.v_descale}) {
    if (!std::isfinite(ds) || ds <= 0) return "descales must be finite and positive";
    if (!fp8 && ds != 1.0) return "descales other than 1 apply to the fp8 recipes only (recipe " + std::string(rs.name) + ")";
  }
  return std::nullopt;
}

std::string describe_plan(const RunPlan& plan) {
  std::string s = plan.tile.m > 0 || plan.tile.n > 0
                      ? "tile " + std::to_string(plan.tile.m) + "x" + std::to_string(plan.tile.n)
                      : std::string("tile not reported");
  s += plan.step_n > 0 ? ", steps of " + std::to_string(plan.step_n) + " keys" : ", softmax step unknown";
  s += plan.num_splits > 0 ? ", " + std::to_string(plan.num_splits) + (plan.num_splits == 1 ? " split" : " splits")
                           : ", splits unknown";
  s += !plan.l_from_fp32_p ? ", l convention unknown"
                           : *plan.l_from_fp32_p ? ", l from the fp32 p" : ", l from the rounded P";
  s += !plan.accumulation                                 ? ", accumulation unknown"
       : *plan.accumulation == Accumulation::tensor_core ? ", tensor-core accumulation"
                                                          : ", sequential fp32 accumulation";
  if (plan.two_level_accum) s += *plan.two_level_accum ? ", two-level P.V" : ", one P.V chain";
  return s;
}

}  // namespace fc
