#include "tools/report/campaign.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <new>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "properties/check_pipeline.h"
#include "properties/oracle.h"
#include "reference/error_budget.h"
#include "tools/report/aggregate.h"
#include "tools/report/fa3_inputs.h"
#include "tools/report/interrupt.h"
#include "tools/report/list_options.h"
#include "tools/report/progress.h"

namespace fc::report {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t mix(uint64_t h, uint64_t v) { return splitmix(h ^ splitmix(v)); }

uint64_t hash_string(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across platforms, unlike std::hash
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::vector<TileSize> tiles_for(const CampaignSpec& spec, const Capabilities& caps, Recipe r) {
  if (caps.any_tile) return spec.tiles.empty() ? std::vector<TileSize>{TileSize{}} : spec.tiles;
  if (caps.tiles.empty() || !takes_tiles(caps, r)) return {TileSize{}};
  // A fixed-tile subject runs the spec's tiles it has, or its whole list when none match.
  std::vector<TileSize> common;
  for (const auto& t : spec.tiles)
    if (std::find(caps.tiles.begin(), caps.tiles.end(), t) != caps.tiles.end()) common.push_back(t);
  return common.empty() ? caps.tiles : common;
}

std::string where_of(const Problem& p, const WorstElement& w) {
  size_t idx = w.index;
  if (w.is_lse) {
    const size_t i = idx % size_t(p.n_q);
    idx /= size_t(p.n_q);
    return fmt::format("LSE[{},{},{}]", idx / size_t(p.heads_q), idx % size_t(p.heads_q), i);
  }
  const size_t c = idx % size_t(p.dv);
  idx /= size_t(p.dv);
  const size_t i = idx % size_t(p.n_q);
  idx /= size_t(p.n_q);
  return fmt::format("O[{},{},{},{}]", idx / size_t(p.heads_q), idx % size_t(p.heads_q), i, c);
}

}  // namespace

uint64_t case_seed(uint64_t campaign_seed, Recipe r, int64_t n, int d, const std::string& mask, Distribution dist) {
  uint64_t h = splitmix(campaign_seed);
  h = mix(h, uint64_t(r));
  h = mix(h, uint64_t(n));
  h = mix(h, uint64_t(d));
  h = mix(h, hash_string(mask));
  h = mix(h, uint64_t(dist));
  return h >> 1;  // 63 bits: fits a signed 64-bit integer, for JSON readers without unsigned types
}

Problem problem_of(const CaseRecord& c) {
  Problem p;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.n_q = c.n_q;
  p.n_k = c.n_k;
  p.d = c.d;
  p.dv = c.dv;
  p.window = parse_window(c.mask).value_or(Window{});
  p.scale = c.scale;
  p.key_lengths = c.key_lengths;
  return p;
}

RunOptions options_of(const CaseRecord& c) {
  RunOptions o;
  o.recipe = c.recipe;
  o.tile_m = c.tile_m;
  o.tile_n = c.tile_n;
  o.l_from_fp32_p = c.l_from_fp32_p;
  o.two_level_accum = c.two_level_accum;
  o.num_splits = c.num_splits;
  o.normalisation = c.fa1 ? Normalisation::fa1 : Normalisation::fa2;
  return o;
}

Plan plan_campaign(const CampaignSpec& spec, const std::map<std::string, Capabilities>& caps) {
  Plan plan;
  for (Recipe r : spec.recipes) {
    for (const std::string& subject : spec.subjects) {
      const Capabilities& cap = caps.at(subject);
      SkipNote skip{std::string(recipe_spec(r).name), subject, 0, {}};
      std::vector<CaseRecord> grid;
      for (int64_t n : spec.n)
        for (int d : spec.d)
          for (const std::string& mask : spec.masks)
            for (Distribution dist : spec.distributions)
              for (const TileSize& t : tiles_for(spec, cap, r)) {
                CaseRecord c;
                c.subject = subject;
                c.recipe = r;
                c.batch = spec.batch;
                c.heads_q = spec.heads_q;
                c.heads_kv = spec.heads_kv;
                c.n_q = c.n_k = n;
                c.d = c.dv = d;
                c.mask = mask;
                c.distribution = dist;
                c.seed = case_seed(spec.seed, r, n, d, mask, dist);
                c.tile_m = t.m;
                c.tile_n = t.n;
                RunOptions o;
                o.recipe = r;
                o.tile_m = t.m;
                o.tile_n = t.n;
                if (auto why = unsupported(cap, problem_of(c), o)) {
                  ++skip.grid_points;
                  if (skip.reasons.size() < 4 && std::find(skip.reasons.begin(), skip.reasons.end(), *why) == skip.reasons.end())
                    skip.reasons.push_back(*why);
                  continue;
                }
                grid.push_back(std::move(c));
              }
      if (skip.grid_points) plan.skipped.push_back(skip);
      if (spec.cases > 0 && size_t(spec.cases) < grid.size()) {
        // Seeded by recipe only, so every subject draws the same grid points where their tiles agree.
        std::mt19937_64 rng(mix(splitmix(spec.seed), uint64_t(r) + 1000));
        std::vector<size_t> order(grid.size());
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        // First pass: take a case whenever it brings a value of some axis not seen yet, so the plots
        // against N, d and tile have every value; then fill up in the shuffled order.
        std::set<std::string> seen;
        std::vector<size_t> chosen;
        std::vector<bool> taken(grid.size(), false);
        auto values = [&](const CaseRecord& c) {
          return std::vector<std::string>{"n" + std::to_string(c.n_k), "d" + std::to_string(c.d), "m" + c.mask,
                                          "x" + std::string(distribution_name(c.distribution)),
                                          "t" + std::to_string(c.tile_m) + "x" + std::to_string(c.tile_n)};
        };
        for (size_t k : order) {
          if (chosen.size() == size_t(spec.cases)) break;
          bool fresh = false;
          for (const auto& v : values(grid[k])) fresh |= !seen.count(v);
          if (!fresh) continue;
          for (const auto& v : values(grid[k])) seen.insert(v);
          chosen.push_back(k);
          taken[k] = true;
        }
        for (size_t k : order) {
          if (chosen.size() == size_t(spec.cases)) break;
          if (!taken[k]) chosen.push_back(k);
        }
        std::sort(chosen.begin(), chosen.end());  // grid order reads better in tables
        for (size_t k : chosen) plan.cases.push_back(grid[k]);
      } else {
        for (auto& c : grid) plan.cases.push_back(std::move(c));
      }
    }
  }
  return plan;
}

CaseRecord run_case(Subject& subject, const Capabilities& caps, CaseRecord c, int keep_worst, std::mutex* run_lock,
                    std::string* unrounded_source) {
  const auto start = std::chrono::steady_clock::now();
  auto done = [&](CaseRecord& r) -> CaseRecord& {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  const Problem p = problem_of(c);
  RunOptions o = options_of(c);
  try {
    p.validate();
    const AttentionInputs in = make_inputs(p, c.distribution, c.recipe, c.seed, &o);
    c.q_descale = o.q_descale;
    c.k_descale = o.k_descale;
    c.v_descale = o.v_descale;
    SubjectOutput out;
    try {
      out = run_subject(subject, caps, p, in, o, run_lock);
    } catch (const SubjectRefused& e) {
      c.status = "skipped";
      c.message = e.reason;
      return done(c);
    } catch (const SubjectCrashed& e) {
      c.status = "crashed";
      c.message = e.what();
      return done(c);
    } catch (const SubjectTimedOut& e) {
      c.status = "timeout";
      c.message = e.what();
      return done(c);
    } catch (const SubjectOutOfMemory& e) {
      c.status = "skipped";  // the machine's limit, not a verdict on the kernel
      c.message = e.what();
      return done(c);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      c.status = "error";
      c.message = std::string("subject failed: ") + e.what();
      return done(c);
    }
    const Float64Attention ref = exact_reference(p, in, o);
    const Judgement judged = judge_output(p, in, o, caps, out, ref, size_t(keep_worst));
    const ErrorBudget& budget = judged.budget;
    const BudgetVerdict& v = judged.verdict;
    c.budget_tile_n = judged.basis.tile_n;
    c.budget_basis = judged.basis.describe();
    c.elements = v.elements;
    c.violations = v.violations;
    c.nan_mismatches = v.nan_mismatches;
    c.max_ratio = v.max_ratio;
    c.sum_ratio = v.sum_ratio;
    c.max_ratio_probabilistic = v.max_ratio_probabilistic;
    c.max_scaled_ulps = v.max_scaled_ulps;
    c.sum_scaled_ulps = v.sum_scaled_ulps;
    c.max_abs_error = v.max_abs_error;
    c.sum_sq_error = v.sum_sq_error;
    c.max_lse_ratio = v.max_lse_ratio;
    for (const WorstElement& w : v.worst)
      c.worst.push_back({where_of(p, w), w.got, w.want, w.error, w.bound, w.bound > 0 ? w.error / w.bound : 0,
                         w.scaled_ulps});
    // What the verdict does not keep: the distribution of error/bound, and the size of the bound itself
    // (for the plots of error and bound against N, d and tile).
    c.ratio_histogram.assign(kHistSize, 0);
    for (size_t i = 0; i < ref.out.o.size(); ++i) {
      if (!std::isfinite(ref.out.o[i])) continue;
      const double err = std::fabs(out.o[i] - ref.out.o[i]);
      const double bound = budget.o_bound[i];
      double ratio = err / bound;
      if (err == 0) ratio = 0;
      if (!std::isfinite(ratio)) {
        ++c.ratio_histogram[kHistSize - 1];
      } else {
        ++c.ratio_histogram[histogram_bin(ratio)];
      }
      if (std::isfinite(err)) c.sum_abs_error += err;
      if (std::isfinite(bound)) {
        c.sum_bound += bound;
        c.max_bound = std::max(c.max_bound, bound);
      }
    }
    if (c.distribution == Distribution::fa3_outliers) {
      // The FA-3 paper's way: against the exact attention of the inputs before rounding (doubles, which
      // only the CPU oracle takes).
      UnroundedInputs u = unrounded_fa3_inputs(p, c.seed);
      if (unrounded_source) *unrounded_source = u.source;
      const Float64Attention ref_u = exact_attention_f64(p, u.inputs);
      double s = 0;
      for (size_t i = 0; i < ref.out.o.size(); ++i) {
        if (!std::isfinite(ref.out.o[i]) || !std::isfinite(ref_u.out.o[i])) continue;
        const double e = out.o[i] - ref_u.out.o[i];
        s += e * e;
      }
      c.sum_sq_error_unrounded = s;
    }
  } catch (const std::bad_alloc&) {
    c.status = "skipped";  // the machine's limit, not a verdict on the kernel
    c.message = "out of host memory (std::bad_alloc) while running this case";
  } catch (const std::exception& e) {
    c.status = "error";
    c.message = e.what();
  }
  return done(c);
}

CampaignResult run_campaign(const CampaignSpec& spec, const SubjectFactory& make, const RunSettings& settings) {
  const auto start = std::chrono::steady_clock::now();
  // One instance per subject to read capabilities; the emulation is also instantiated per worker so
  // workers never share its state; other subjects (a GPU, a plugin) are shared and run one at a time.
  std::map<std::string, std::unique_ptr<Subject>> shared;
  std::map<std::string, Capabilities> caps;
  std::map<std::string, std::mutex> locks;
  for (const auto& s : spec.subjects) {
    shared[s] = make(s);
    caps[s] = shared[s]->capabilities();
    locks[s];
  }
  Plan plan = plan_campaign(spec, caps);
  CampaignResult result;
  result.planned = plan.cases.size();
  result.skipped = plan.skipped;

  // Largest first (n^2 d), so that two workers do not end on one long case each.
  std::vector<size_t> order(plan.cases.size());
  std::iota(order.begin(), order.end(), 0);
  auto cost = [&](size_t i) {
    const CaseRecord& c = plan.cases[i];
    return double(c.n_q) * double(c.n_k) * double(c.d + c.dv);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost(a) > cost(b); });

  std::vector<CaseRecord> records(plan.cases.size());
  std::vector<char> finished(plan.cases.size(), 0);
  std::atomic<size_t> next{0};
  std::mutex source_mutex;
  Progress progress("report", plan.cases.size(), stderr, settings.quiet, settings.interactive, settings.progress_period);
  auto per_worker = [](const std::string& name) { return name.rfind("emulation", 0) == 0; };

  auto worker = [&] {
    std::map<std::string, std::unique_ptr<Subject>> own;
    for (;;) {
      if (interrupted()) return;
      const size_t k = next.fetch_add(1);
      if (k >= order.size()) return;
      const size_t i = order[k];
      const CaseRecord& planned = plan.cases[i];
      Subject* subject = nullptr;
      std::mutex* lock = nullptr;
      if (per_worker(planned.subject)) {
        auto& s = own[planned.subject];
        if (!s) s = make(planned.subject);
        subject = s.get();
      } else {
        subject = shared[planned.subject].get();
        lock = &locks[planned.subject];
      }
      std::string source;
      records[i] = run_case(*subject, caps[planned.subject], planned, spec.keep_worst, lock, &source);
      finished[i] = 1;
      if (!source.empty()) {
        std::lock_guard g(source_mutex);
        result.unrounded_source = source;
      }
      progress.step(records[i].key());
    }
  };
  const int jobs = std::max(1, settings.jobs);
  std::vector<std::thread> threads;
  for (int t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  for (size_t i = 0; i < records.size(); ++i)
    if (finished[i]) result.cases.push_back(std::move(records[i]));
  result.partial = result.cases.size() < plan.cases.size();
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finish(result.partial ? fmt::format("interrupted: {} of {} cases ran; writing a partial report",
                                               result.cases.size(), plan.cases.size())
                                 : "");
  return result;
}

std::string CaseRecord::key() const {
  std::string k = fmt::format("{} {} N={} d={} {} {} tile={}{}{}", subject, recipe_spec(recipe).name, n_k, d, mask,
                              distribution_name(distribution), tile_name({tile_m, tile_n}),
                              l_from_fp32_p ? " l-from-fp32-p" : "", two_level_accum ? " two-level" : "");
  if (num_splits != 1) k += fmt::format(" splits={}", num_splits);
  if (fa1) k += " fa1";
  if (scale) k += fmt::format(" scale={}", *scale);
  if (!key_lengths.empty()) k += " key-lengths";
  return k;
}

RecipeParams recipe_params(Recipe r, const RunOptions& o) {
  const RecipeSpec& s = recipe_spec(r);
  RecipeParams p;
  p.name = std::string(s.name);
  p.input = std::string(spec(s.input).name);
  p.operand = std::string(spec(s.operand).name);
  p.p_format = std::string(spec(s.p_format).name);
  p.output = std::string(spec(s.output).name);
  p.u_input = spec(s.input).unit_roundoff();
  p.u_output = spec(s.output).unit_roundoff();
  p.accumulation = o.accumulation == Accumulation::tensor_core ? "tensor_core" : "ieee_fp32";
  p.normalisation = o.normalisation == Normalisation::fa2 ? "fa2" : "fa1";
  p.l_from_fp32_p = o.l_from_fp32_p;
  p.two_level_accum = o.two_level_accum;
  return p;
}

}  // namespace fc::report
