#include "kernels/plugin/plugin_abi.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fc {

size_t storage_bytes(Format f) {
  switch (f) {
    case Format::fp32:
    case Format::tf32: return 4;
    case Format::fp16:
    case Format::bf16: return 2;
    case Format::e4m3:
    case Format::e5m2: return 1;
    case Format::fp64: return 8;
  }
  throw std::logic_error("unknown format");
}

const char* status_name(fc_status s) {
  switch (s) {
    case FC_OK: return "FC_OK";
    case FC_ERR_UNSUPPORTED: return "FC_ERR_UNSUPPORTED";
    case FC_ERR_INVALID: return "FC_ERR_INVALID";
    case FC_ERR_RUNTIME: return "FC_ERR_RUNTIME";
    case FC_ERR_OUT_OF_MEMORY: return "FC_ERR_OUT_OF_MEMORY";
    case FC_ERR_STICKY: return "FC_ERR_STICKY";
  }
  return "an unknown status";
}

fc_tensor contiguous_tensor(void* data, int heads, int64_t n, int d) {
  fc_tensor t{};
  t.data = data;
  t.stride[3] = 1;
  t.stride[2] = d;
  t.stride[1] = n * d;
  t.stride[0] = int64_t(heads) * n * d;
  return t;
}

Capabilities to_capabilities(const fc_capabilities& raw) {
  Capabilities c;
  c.name = raw.name ? raw.name : "";
  for (Recipe r : all_recipes)
    if (raw.recipes & (1u << static_cast<unsigned>(r))) c.recipes.push_back(r);
  const int nd = std::clamp<int>(raw.n_head_dims, 0, FC_MAX_HEAD_DIMS);
  for (int i = 0; i < nd; ++i) c.head_dims.push_back(raw.head_dims[i]);
  c.dv_may_differ = false;  // ABI v1 has no way to declare dv != d
  c.any_tile = false;
  if (raw.features & FC_CAP_TILE_SIZES) {
    const int nt = std::clamp<int>(raw.n_tiles, 0, FC_MAX_TILES);
    for (int i = 0; i < nt; ++i) c.tiles.push_back(TileSize{raw.tile_m[i], raw.tile_n[i]});
    if (raw.abi_version >= 2)
      for (Recipe r : all_recipes)
        if (raw.tile_recipes & (1u << static_cast<unsigned>(r))) c.tile_recipes.push_back(r);
  }
  c.causal = (raw.masks & (1u << FC_MASK_CAUSAL_TOP_LEFT)) && (raw.masks & (1u << FC_MASK_CAUSAL_BOTTOM_RIGHT));
  c.window = raw.masks & (1u << FC_MASK_WINDOW);
  c.dense_mask = raw.features & FC_CAP_DENSE_MASK;
  c.key_lengths = raw.features & FC_CAP_KEY_LENGTHS;
  c.gqa = raw.features & FC_CAP_GQA;
  c.lse = raw.features & FC_CAP_LSE;
  c.split_kv = raw.features & FC_CAP_SPLIT_KV;
  c.fa1 = raw.features & FC_CAP_FA1_NORMALISATION;
  c.l_from_fp32_p = raw.features & FC_CAP_L_FROM_FP32_P;
  c.two_level_accum = raw.features & FC_CAP_TWO_LEVEL_ACCUM;
  c.subtile_steps = raw.features & FC_CAP_SUBTILE_STEPS;
  c.deliberate_bugs = false;
  return c;
}

RunPlan decode_run_plan(const fc_run_plan& raw, const RunOptions& o, const Problem& p) {
  RunPlan plan;
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument("reports " + what + " [" + p.describe() + ", recipe " +
                                std::string(recipe_spec(o.recipe).name) + "]");
  };
  if (raw.tile_m < 0 || raw.tile_n < 0 || raw.step_n < 0 || raw.num_splits < 0)
    bad("a negative tile, step or split count in its run plan");
  plan.tile = TileSize{raw.tile_m, raw.tile_n};
  plan.step_n = raw.step_n;
  plan.num_splits = raw.num_splits;
  if (plan.step_n > 0 && plan.tile.n > 0 && plan.tile.n % plan.step_n != 0)
    bad("softmax steps of " + std::to_string(plan.step_n) + " keys in a " + std::to_string(plan.tile.n) +
        "-key tile (steps must divide the tile)");
  switch (raw.l_convention) {
    case FC_L_UNKNOWN: break;
    case FC_L_ROUNDED_P: plan.l_from_fp32_p = false; break;
    case FC_L_FP32_P: plan.l_from_fp32_p = true; break;
    default: bad("an unknown l convention " + std::to_string(raw.l_convention));
  }
  switch (raw.accumulation) {
    case FC_ACCUM_UNKNOWN: break;
    case FC_ACCUM_SEQUENTIAL_FP32: plan.accumulation = Accumulation::ieee_fp32; break;
    case FC_ACCUM_TENSOR_CORE: plan.accumulation = Accumulation::tensor_core; break;
    default: bad("an unknown accumulation " + std::to_string(raw.accumulation));
  }
  switch (raw.two_level_accum) {
    case FC_UNKNOWN: break;
    case FC_NO: plan.two_level_accum = false; break;
    case FC_YES: plan.two_level_accum = true; break;
    default: bad("an unknown two-level value " + std::to_string(raw.two_level_accum));
  }
  // What was asked explicitly must be what ran: a kernel that silently runs something else than it
  // was asked is wrong even when its output is close (and its budget would be for the wrong run).
  if (o.tile_n > 0 && plan.tile.n > 0 && (plan.tile.n != o.tile_n || (o.tile_m > 0 && plan.tile.m != o.tile_m)))
    bad("running tile " + std::to_string(plan.tile.m) + "x" + std::to_string(plan.tile.n) + " where " +
        std::to_string(o.tile_m) + "x" + std::to_string(o.tile_n) + " was asked");
  if (o.num_splits > 0 && plan.num_splits > 0 && plan.num_splits != o.num_splits)
    bad("running " + std::to_string(plan.num_splits) + " split(s) where " + std::to_string(o.num_splits) + " were asked");
  if (o.l_from_fp32_p && plan.l_from_fp32_p == false) bad("l from the rounded P where the fp32 p was asked");
  if (o.two_level_accum && plan.two_level_accum == false) bad("one P.V chain where two-level accumulation was asked");
  return plan;
}

fc_problem to_fc_problem(const Problem& p, const RunOptions& o, const int32_t* key_lengths) {
  fc_problem f{};
  f.batch = p.batch;
  f.heads_q = p.heads_q;
  f.heads_kv = p.heads_kv;
  f.n_q = p.n_q;
  f.n_k = p.n_k;
  f.d = p.d;
  f.dv = p.dv;
  f.scale = p.effective_scale();
  f.mask = FC_MASK_NONE;
  f.window_left = -1;
  f.window_right = -1;
  f.window_align = FC_ALIGN_TOP_LEFT;
  if (p.window.active()) {
    if (p.window.left < 0 && p.window.right == 0) {
      f.mask = p.window.align == Align::top_left ? FC_MASK_CAUSAL_TOP_LEFT : FC_MASK_CAUSAL_BOTTOM_RIGHT;
    } else {
      f.mask = FC_MASK_WINDOW;
      f.window_left = p.window.left < 0 ? -1 : p.window.left;
      f.window_right = p.window.right < 0 ? -1 : p.window.right;
      f.window_align = p.window.align == Align::top_left ? FC_ALIGN_TOP_LEFT : FC_ALIGN_BOTTOM_RIGHT;
    }
  }
  f.key_lengths = key_lengths;
  f.dense_mask = p.dense_mask.empty() ? nullptr : p.dense_mask.data();
  f.recipe = static_cast<int32_t>(o.recipe);
  const bool fp8 = is_fp8(o.recipe);
  f.q_descale = fp8 ? float(o.q_descale) : 1.0f;
  f.k_descale = fp8 ? float(o.k_descale) : 1.0f;
  f.v_descale = fp8 ? float(o.v_descale) : 1.0f;
  if (fp8 && (double(f.q_descale) != o.q_descale || double(f.k_descale) != o.k_descale ||
              double(f.v_descale) != o.v_descale))
    throw std::invalid_argument("plugin subject: fp8 descales must be fp32 values (the ABI carries floats)");
  f.flags = 0;
  if (o.l_from_fp32_p) f.flags |= FC_FLAG_L_FROM_FP32_P;
  if (o.two_level_accum) f.flags |= FC_FLAG_TWO_LEVEL_ACCUM;
  if (o.normalisation == Normalisation::fa1) f.flags |= FC_FLAG_FA1_NORMALISATION;
  f.tile_m = o.tile_m;
  f.tile_n = o.tile_n;
  f.num_splits = o.num_splits;
  return f;
}

}  // namespace fc
