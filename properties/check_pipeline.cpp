#include "properties/check_pipeline.h"

#include <algorithm>

#include "properties/oracle.h"
#include "reference/gpu_oracle.h"

namespace fc {

namespace {

void max_into(std::vector<double>& into, const std::vector<double>& from) {
  for (size_t i = 0; i < into.size() && i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

}  // namespace

std::string BudgetBasis::describe() const {
  std::string s = tile_n > 0 ? "Bc=" + std::to_string(tile_n) : std::string("any Bc");
  s += options.num_splits > 0 ? ", " + std::to_string(options.num_splits) + (options.num_splits == 1 ? " split" : " splits")
                              : ", possibly split";
  s += both_l_conventions ? ", l from either P" : options.l_from_fp32_p ? ", l from the fp32 p" : ", l from the rounded P";
  s += both_accumulations                                 ? ", either accumulation"
       : options.accumulation == Accumulation::tensor_core ? ", tensor-core accumulation"
                                                           : ", sequential fp32 accumulation";
  if (is_fp8(options.recipe) && options.two_level_accum) s += ", two-level P.V";
  if (options.normalisation == Normalisation::fa1) s += ", FA-1 normalisation";
  return s;
}

bool BudgetBasis::operator==(const BudgetBasis& b) const {
  const RunOptions &x = options, &y = b.options;
  return tile_n == b.tile_n && both_l_conventions == b.both_l_conventions &&
         both_accumulations == b.both_accumulations && x.recipe == y.recipe &&
         x.num_splits == y.num_splits && x.l_from_fp32_p == y.l_from_fp32_p && x.two_level_accum == y.two_level_accum &&
         x.normalisation == y.normalisation && x.accumulation == y.accumulation && x.q_descale == y.q_descale &&
         x.k_descale == y.k_descale && x.v_descale == y.v_descale;
}

BudgetBasis budget_basis(const Capabilities& caps, const RunOptions& asked, const RunPlan& ran) {
  BudgetBasis b;
  b.options = asked;
  b.options.tile_m = b.options.tile_n = 0;  // the budget sees the step width only (tile_n below)
  // The step: reported; else an explicit tile of a subject that steps by its whole tile; else any.
  if (ran.step_n > 0) b.tile_n = ran.step_n;
  else if (asked.tile_n > 0 && !caps.subtile_steps) b.tile_n = asked.tile_n;
  // Split-KV: reported, else an explicit request (0 asks the subject to decide: possibly split).
  b.options.num_splits = ran.num_splits > 0 ? ran.num_splits : std::max(asked.num_splits, 0);
  // l: reported, else the FA-2 flag when asked (a subject that accepts it honours it), else unknown.
  if (ran.l_from_fp32_p) b.options.l_from_fp32_p = *ran.l_from_fp32_p;
  else if (asked.l_from_fp32_p) b.options.l_from_fp32_p = true;
  else b.both_l_conventions = true;
  // Accumulation: reported, else both models (fp32 runs on CUDA cores whatever is asked).
  b.options.accumulation = ran.accumulation.value_or(Accumulation::tensor_core);
  b.both_accumulations = !ran.accumulation && asked.recipe != Recipe::fp32;
  // fp8 two-level accumulation: reported, else as asked; unknown (a kernel may promote on its own):
  // the any-Bc budget, which bounds one chain and per-tile promotion alike.
  if (!is_fp8(asked.recipe)) {
    b.options.two_level_accum = false;
  } else if (ran.two_level_accum) {
    b.options.two_level_accum = *ran.two_level_accum;
  } else if (!asked.two_level_accum) {
    b.tile_n = 0;
  }
  return b;
}

ErrorBudget budget_for(const Problem& p, const AttentionInputs& in, const BudgetBasis& basis, const Float64Attention& ref,
                       const BudgetTerms& terms) {
  std::vector<bool> conventions = {basis.options.l_from_fp32_p};
  if (basis.both_l_conventions) conventions = {false, true};
  std::vector<Accumulation> models = {basis.options.accumulation};
  if (basis.both_accumulations) models = {Accumulation::tensor_core, Accumulation::ieee_fp32};
  ErrorBudget merged;
  bool first = true;
  for (bool l_fp32 : conventions)
    for (Accumulation a : models) {
      RunOptions o = basis.options;
      o.l_from_fp32_p = l_fp32;
      o.accumulation = a;
      ErrorBudget b = error_budget(p, in, o, basis.tile_n, ref, terms);
      if (first) {
        merged = std::move(b);
        first = false;
        continue;
      }
      max_into(merged.o_bound, b.o_bound);
      max_into(merged.o_bound_probabilistic, b.o_bound_probabilistic);
      max_into(merged.lse_bound, b.lse_bound);
      max_into(merged.lse_bound_probabilistic, b.lse_bound_probabilistic);
    }
  return merged;
}

Judgement judge_output(const Problem& p, const AttentionInputs& in, const RunOptions& asked, const Capabilities& caps,
                       const SubjectOutput& out, const Float64Attention& ref, size_t keep_worst) {
  Judgement j;
  j.basis = budget_basis(caps, asked, out.plan);
  std::string fallback;
  if (current_oracle() == Oracle::gpu) {
    // The GPU oracle computes its own reference (the same certificate as `ref`'s), the budget for the
    // basis and the verdict; the budget arrays come back for the reports.
    try {
      const gpu::BudgetRequest req{j.basis.options, j.basis.tile_n, j.basis.both_l_conventions,
                                   j.basis.both_accumulations};
      gpu::Arrays arrays;
      const gpu::Verdict v = gpu::judge_host_data(p, req, in, out.o, out.lse, keep_worst, &arrays);
      j.budget = std::move(arrays.budget);
      j.verdict = v.verdict;
      oracle_detail::count(Oracle::gpu);
      return j;
    } catch (const std::invalid_argument& e) {
      fallback = std::string("outside the GPU oracle's scope: ") + e.what();
    }
  }
  j.budget = budget_for(p, in, j.basis, ref);
  j.verdict = check_against_budget(p, out.o, out.lse, ref, j.budget, recipe_spec(asked.recipe).output, keep_worst);
  oracle_detail::count(Oracle::cpu, fallback.empty() ? nullptr : &fallback);
  return j;
}

SubjectOutput run_subject(Subject& s, const Capabilities& caps, const Problem& p, const AttentionInputs& in,
                          const RunOptions& o, std::mutex* run_lock) {
  if (auto why = unsupported(caps, p, o)) throw SubjectRefused(*why);
  SubjectOutput out;
  {
    std::unique_lock<std::mutex> lock;
    if (run_lock) lock = std::unique_lock<std::mutex>(*run_lock);
    out = s.run(p, in, o);
  }
  const std::string who = caps.name.empty() ? "the subject" : caps.name;
  if (out.o.size() != p.o_size())
    throw SubjectError(who + " returned " + std::to_string(out.o.size()) + " O elements, expected B*Hq*Nq*dv = " +
                       std::to_string(p.o_size()));
  if ((caps.lse || !out.lse.empty()) && out.lse.size() != p.lse_size())
    throw SubjectError(who + " returned " + std::to_string(out.lse.size()) + " LSE elements, expected B*Hq*Nq = " +
                       std::to_string(p.lse_size()));
  return out;
}

CheckedRun check_run(Subject& s, const Capabilities& caps, const Problem& p, const AttentionInputs& in,
                     const RunOptions& o, const Float64Attention& ref, const CheckSettings& settings) {
  CheckedRun r;
  r.out = run_subject(s, caps, p, in, o, settings.run_lock);
  r.judged = judge_output(p, in, o, caps, r.out, ref, settings.keep_worst);
  return r;
}

}  // namespace fc
