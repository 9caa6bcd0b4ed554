// The CPU emulation of the fused kernel: capabilities, the tile policy, and the driver that runs the
// steps of emulated_steps.h over batches, heads, rows, splits and key tiles.
#include "kernels/cpu/emulated_kernel.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/emulated_steps.h"
#include "kernels/tile_policy.h"

namespace fc {

EmulatedKernel::EmulatedKernel(DeliberateBug bug) : bug_(bug) {}

Capabilities EmulatedKernel::capabilities() const {
  Capabilities c;
  c.name = bug_ == DeliberateBug::none ? "cpu-emulation" : "cpu-emulation[bug=" + std::string(bug_name(bug_)) + "]";
  c.recipes.assign(all_recipes.begin(), all_recipes.end());
  c.dv_may_differ = true;
  c.any_tile = true;
  c.causal = c.window = c.dense_mask = c.key_lengths = c.gqa = c.lse = c.split_kv = true;
  c.fa1 = c.l_from_fp32_p = c.two_level_accum = true;
  c.deliberate_bugs = bug_ != DeliberateBug::none;
  c.concurrent_runs = !BugHooks{bug_}.keeps_state_across_runs();
  return c;
}

TileSize EmulatedKernel::effective_tile(const Problem& p, const RunOptions& o) const {
  const bool fp8 = is_fp8(o.recipe);
  const bool causal = p.window.active() && p.window.left < 0 && p.window.right == 0;
  const tiles::TileShape t = tiles::default_tile(p.d, o.recipe == Recipe::fp32, fp8, causal, p.n_q);
  return {o.tile_m > 0 ? o.tile_m : t.m, o.tile_n > 0 ? o.tile_n : t.n};
}

SubjectOutput EmulatedKernel::run(const Problem& p, const AttentionInputs& in, const RunOptions& o) {
  try {
    validate_inputs(p, in);
  } catch (const std::invalid_argument& e) {
    throw SubjectError(std::string("cpu-emulation: ") + e.what());
  }
  if (auto why = unsupported(capabilities(), p, o)) throw SubjectRefused(*why);

  const TileSize tile = effective_tile(p, o);
  const emulation::Setup st = emulation::make_setup(p, o, tile, effective_splits(o), BugHooks{bug_});

  SubjectOutput out;
  // The plan as run. The l_from_fp32_p_without_budget bug sums l from the fp32 P but reports the
  // convention that was asked for: that is the bug. fp8_lazy_rescale_saturation says it sums l from the
  // fp32 P (flash-attention's convention there); its bug is the saturation.
  out.plan.tile = tile;
  out.plan.step_n = tile.n;
  out.plan.num_splits = st.splits;
  out.plan.l_from_fp32_p = o.l_from_fp32_p || st.bugs.l_from_unclamped_p(st.fp8);
  out.plan.accumulation = st.tensor_core ? Accumulation::tensor_core : Accumulation::ieee_fp32;
  out.plan.two_level_accum = st.two_level;
  out.o.assign(p.o_size(), 0.0);
  out.lse.assign(p.lse_size(), -std::numeric_limits<double>::infinity());
  out.o_unrounded.assign(p.o_size(), 0.0);

  emulation::HeadOperands ops;
  emulation::TileWork work(st.bc);
  if (st.bugs.keeps_state_across_runs()) work.smem_k = &smem_k_;
  std::vector<emulation::RowState> states(size_t(st.splits));
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      emulation::load_head(st, p, in, b, h, ops);
      for (int64_t i = 0; i < p.n_q; ++i) {
        const emulation::RowSchedule sched = emulation::schedule_row(st, p, b, i);
        for (int sp = 0; sp < st.splits; ++sp) {
          emulation::RowState& rs = states[size_t(sp)];
          emulation::reset(st, rs, p.dv);
          int64_t nb0 = sched.first + sp * sched.per;
          const int64_t nb1 = std::min(nb0 + sched.per, sched.last);
          if (nb0 > nb1) nb0 = nb1;
          for (int64_t nb = nb0; nb < nb1; ++nb) {
            emulation::tile_scores(st, p, b, i, sched, nb, ops, work);
            emulation::softmax_step(st, rs, work);
            emulation::sum_l(st, rs, work);
            emulation::accumulate_pv(st, p, ops, rs, work);
          }
          emulation::finish_split(st, rs);
        }
        emulation::epilogue(st, p, b, h, i, states, out);
      }
    }
  return out;
}

}  // namespace fc
