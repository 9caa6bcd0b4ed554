#include "properties/attention_properties.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "properties/check_pipeline.h"
#include "properties/oracle.h"
#include "reference/error_budget.h"

namespace fc {

namespace {

// Thrown inside a property body; guarded() turns it into a failed PropertyResult.
struct Failure {
  std::string what;
};

[[noreturn]] void fail(const std::string& what) { throw Failure{what}; }

// A subject that declines a case (SubjectRefused: outside its capabilities, or refused by the subject
// itself, as the CUDA kernel refuses a tile not compiled for this d) is a skip, not a failure.
template <class Body>
PropertyResult guarded(Body&& body) {
  try {
    return body();
  } catch (const Failure& f) {
    return PropertyResult::fail(f.what);
  } catch (const SubjectRefused& r) {
    return PropertyResult::skip(r.reason);
  } catch (const SubjectError& e) {
    return PropertyResult::fail(std::string("subject error: ") + e.what());
  } catch (const std::exception& e) {
    return PropertyResult::fail(std::string("exception: ") + e.what());
  }
}

std::string num(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

bool same_bits(double x, double y) { return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y); }

struct Prepared {
  Problem p;
  RunOptions o;
  AttentionInputs in;
};

Prepared prepare(const GeneratedCase& c) {
  Prepared r;
  r.p = c.problem;
  r.in = c.materialize(&r.o);
  return r;
}

std::string tile_text(const RunOptions& o) {
  std::ostringstream s;
  s << "Br=" << o.tile_m << " Bc=" << o.tile_n << " splits=" << o.num_splits
    << (o.normalisation == Normalisation::fa1 ? " fa1" : " fa2");
  return s.str();
}

SubjectOutput run(Subject& s, const Capabilities& caps, const Problem& p, const AttentionInputs& in, const RunOptions& o) {
  return run_subject(s, caps, p, in, o);
}

// A run with its budget: the check pipeline's, for the plan the subject ran.
struct Budgeted {
  RunOptions o;
  SubjectOutput out;
  ErrorBudget budget;
  BudgetVerdict verdict;
};

Budgeted run_budgeted(Subject& s, const Capabilities& caps, const Problem& p, const AttentionInputs& in,
                      const RunOptions& o, const Float64Attention& ref) {
  CheckedRun r = check_run(s, caps, p, in, o, ref);
  return Budgeted{o, std::move(r.out), std::move(r.judged.budget), std::move(r.judged.verdict)};
}

bool row_is_empty(const Problem& p, int b, int64_t i) {
  for (int64_t j = 0; j < p.n_k; ++j)
    if (p.visible(b, i, j)) return false;
  return true;
}

// Two runs of the same exact problem agree within the sum of their budgets (each is within its own
// budget of the exact result). NaN must agree; elements whose bound is not finite are not compared.
void compare_within(const Problem& p, const Budgeted& x, const Budgeted& y, const std::string& what) {
  for (size_t k = 0; k < x.out.o.size(); ++k) {
    const double a = x.out.o[k], b = y.out.o[k];
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b))
        fail(what + ": " + describe_index(p, k, false) + " is NaN in one run only: " + num(a) + " vs " + num(b) +
             " (" + tile_text(x.o) + " vs " + tile_text(y.o) + ")");
      continue;
    }
    const double tol = x.budget.o_bound[k] + y.budget.o_bound[k];
    if (!std::isfinite(tol)) continue;
    if (!(std::fabs(a - b) <= tol))
      fail(what + ": " + describe_index(p, k, false) + " = " + num(a) + " vs " + num(b) + ", |diff| " +
           num(std::fabs(a - b)) + " > bound " + num(tol) + " (" + tile_text(x.o) + " vs " + tile_text(y.o) + ")");
  }
  if (x.out.lse.size() != p.lse_size() || y.out.lse.size() != p.lse_size()) return;
  for (size_t r = 0; r < p.lse_size(); ++r) {
    const double a = x.out.lse[r], b = y.out.lse[r];
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      if (!same_bits(a, b) && !(std::isnan(a) && std::isnan(b)))
        fail(what + ": " + describe_index(p, r, true) + " = " + num(a) + " vs " + num(b));
      continue;
    }
    const double tol = x.budget.lse_bound[r] + y.budget.lse_bound[r];
    if (std::isfinite(tol) && !(std::fabs(a - b) <= tol))
      fail(what + ": " + describe_index(p, r, true) + " = " + num(a) + " vs " + num(b) + ", |diff| " +
           num(std::fabs(a - b)) + " > bound " + num(tol));
  }
}

// Bitwise equality of rows accepted by `keep(b, h, i)`.
template <class Keep>
void compare_bitwise(const Problem& p, const SubjectOutput& x, const SubjectOutput& y, const std::string& what,
                     Keep&& keep) {
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.n_q; ++i) {
        if (!keep(b, h, i)) continue;
        for (int c = 0; c < p.dv; ++c) {
          const size_t k = p.o_index(b, h, i, c);
          if (!same_bits(x.o[k], y.o[k]))
            fail(what + ": " + describe_index(p, k, false) + " = " + num(x.o[k]) + " vs " + num(y.o[k]) +
                 " (not bitwise equal)");
        }
        if (x.lse.size() == p.lse_size() && y.lse.size() == p.lse_size()) {
          const size_t r = p.lse_index(b, h, i);
          if (!same_bits(x.lse[r], y.lse[r]))
            fail(what + ": " + describe_index(p, r, true) + " = " + num(x.lse[r]) + " vs " + num(y.lse[r]) +
                 " (not bitwise equal)");
        }
      }
}

std::string verdict_text(const Problem& p, const BudgetVerdict& v) {
  std::ostringstream s;
  s << v.violations << " violation(s) (" << v.nan_mismatches << " NaN/inf mismatches) over " << v.elements
    << " O elements";
  if (!v.worst.empty()) {
    const WorstElement& w = v.worst.front();
    s << "; worst " << describe_index(p, w.index, w.is_lse) << ": got " << num(w.got) << " want " << num(w.want)
      << " error " << num(w.error) << " bound " << num(w.bound) << " (" << num(w.error / w.bound) << "x, "
      << num(w.scaled_ulps) << " scaled ulps)";
  }
  return s.str();
}

// Tile widths to try as "another tiling" for any-tile subjects; small ones first (more tiles).
constexpr int other_tiles[] = {1, 3, 8, 2, 5, 16, 7, 32, 64, 13, 128};

std::optional<TileSize> other_tile(const Capabilities& caps, const RunOptions& o, uint64_t aux) {
  if (caps.any_tile) {
    const size_t n = std::size(other_tiles);
    return TileSize{other_tiles[(aux >> 4) % n], other_tiles[(aux >> 12) % n]};
  }
  std::vector<TileSize> others;
  for (const TileSize& t : caps.tiles)
    if (!(t.m == o.tile_m && t.n == o.tile_n)) others.push_back(t);
  if (others.empty()) return std::nullopt;
  return others[(aux >> 4) % others.size()];
}

// Two runs of the same case under other options agree within their two budgets (skipped where the
// subject cannot run either).
PropertyResult agree_within_budgets(Subject& s, const Capabilities& caps, const Prepared& q, const RunOptions& a,
                                    const RunOptions& b, const std::string& what) {
  if (auto why = unsupported(caps, q.p, a)) return PropertyResult::skip(*why);
  if (auto why = unsupported(caps, q.p, b)) return PropertyResult::skip(*why);
  const Float64Attention ref = exact_reference(q.p, q.in, q.o);
  compare_within(q.p, run_budgeted(s, caps, q.p, q.in, a, ref), run_budgeted(s, caps, q.p, q.in, b, ref), what);
  return PropertyResult::pass();
}

double round_input(Recipe r, double x, double descale) {
  return round_to(recipe_spec(r).input, x / descale, Overflow::saturate) * descale;
}

}  // namespace

std::string describe_index(const Problem& p, size_t index, bool lse) {
  std::ostringstream s;
  if (lse) {
    const size_t i = index % size_t(p.n_q), h = (index / size_t(p.n_q)) % size_t(p.heads_q),
                 b = index / (size_t(p.n_q) * p.heads_q);
    s << "LSE[b=" << b << ",h=" << h << ",i=" << i << "]";
  } else {
    const size_t c = index % size_t(p.dv), i = (index / size_t(p.dv)) % size_t(p.n_q),
                 h = (index / (size_t(p.dv) * p.n_q)) % size_t(p.heads_q),
                 b = index / (size_t(p.dv) * p.n_q * p.heads_q);
    s << "O[b=" << b << ",h=" << h << ",i=" << i << ",c=" << c << "]";
  }
  return s.str();
}

PropertyResult budget_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    if (auto why = unsupported(caps, q.p, q.o)) return PropertyResult::skip(*why);
    const Float64Attention ref = exact_reference(q.p, q.in, q.o);
    const Budgeted b = run_budgeted(s, caps, q.p, q.in, q.o, ref);
    PropertyResult r = b.verdict.violations ? PropertyResult::fail("outside the error budget: " + verdict_text(q.p, b.verdict))
                                            : PropertyResult::pass();
    r.verdict = b.verdict;
    return r;
  });
}

PropertyResult lse_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    if (!caps.lse) return PropertyResult::skip("subject has no LSE");
    const Prepared q = prepare(c);
    if (auto why = unsupported(caps, q.p, q.o)) return PropertyResult::skip(*why);
    const Float64Attention ref = exact_reference(q.p, q.in, q.o);
    const Budgeted b = run_budgeted(s, caps, q.p, q.in, q.o, ref);
    for (size_t r = 0; r < q.p.lse_size(); ++r) {
      const double got = b.out.lse[r], want = ref.out.lse[r];
      if (std::isnan(want) || std::isnan(got)) {
        if (std::isnan(want) != std::isnan(got))
          fail(describe_index(q.p, r, true) + " = " + num(got) + ", reference " + num(want) + " (NaN mismatch)");
        continue;
      }
      if (std::isinf(want) || std::isinf(got)) {
        if (got != want) fail(describe_index(q.p, r, true) + " = " + num(got) + ", reference " + num(want));
        continue;
      }
      const double bound = b.budget.lse_bound[r];
      if (!(std::fabs(got - want) <= bound))
        fail(describe_index(q.p, r, true) + " = " + num(got) + ", reference " + num(want) + ", error " +
             num(std::fabs(got - want)) + " > LSE bound " + num(bound));
    }
    return PropertyResult::pass();
  });
}

PropertyResult rescaling_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    RunOptions a = q.o, b = q.o;
    a.num_splits = 1;
    if (auto t = other_tile(caps, q.o, c.aux)) {
      b.tile_n = t->n;
      if (!caps.any_tile) b.tile_m = t->m;
    }
    b.num_splits = caps.split_kv ? 2 + int(c.aux % 3) : 1;
    if (a.tile_n == b.tile_n && a.num_splits == b.num_splits && a.tile_m == b.tile_m)
      return PropertyResult::skip("no other tiling or split-KV to compare");
    return agree_within_budgets(s, caps, q, a, b, "another tiling / split-KV merge");
  });
}

PropertyResult fa1_fa2_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    if (!caps.fa1) return PropertyResult::skip("subject has no FA-1 normalisation");
    const Prepared q = prepare(c);
    RunOptions a = q.o, b = q.o;
    a.normalisation = Normalisation::fa2;
    b.normalisation = Normalisation::fa1;
    return agree_within_budgets(s, caps, q, a, b, "FA-2 vs FA-1");
  });
}

PropertyResult tile_size_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    const auto t = other_tile(caps, q.o, c.aux);
    if (!t) return PropertyResult::skip("subject offers a single tile size");
    RunOptions b = q.o;
    b.tile_m = t->m;
    b.tile_n = t->n;
    return agree_within_budgets(s, caps, q, q.o, b, "another (Br, Bc)");
  });
}

PropertyResult masked_keys_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    if (auto why = unsupported(caps, q.p, q.o)) return PropertyResult::skip(*why);
    const Problem& p = q.p;
    // Rows with at least one masked key; pick one, and change every key it does not see.
    std::vector<std::pair<int, int64_t>> rows;
    for (int b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.n_q; ++i)
        for (int64_t j = 0; j < p.n_k; ++j)
          if (!p.visible(b, i, j)) {
            rows.push_back({b, i});
            break;
          }
    if (rows.empty()) return PropertyResult::skip("no row with a masked key");
    const auto [b0, i0] = rows[c.aux % rows.size()];
    std::vector<int64_t> keys;
    for (int64_t j = 0; j < p.n_k; ++j)
      if (!p.visible(b0, i0, j)) keys.push_back(j);
    AttentionInputs changed = q.in;
    std::mt19937_64 rng(c.aux ^ 0x5bd1e995u);
    std::normal_distribution<double> g(0, 4);
    auto garbage = [&](double descale) {
      if (rng() % 8 == 0) return std::numeric_limits<double>::quiet_NaN();
      return round_input(q.o.recipe, g(rng) * descale, descale);
    };
    for (int h = 0; h < p.heads_kv; ++h)
      for (int64_t j : keys) {
        for (int x = 0; x < p.d; ++x) changed.k[p.k_index(b0, h, j, x)] = garbage(q.o.k_descale);
        for (int x = 0; x < p.dv; ++x) changed.v[p.v_index(b0, h, j, x)] = garbage(q.o.v_descale);
      }
    const SubjectOutput x = run(s, caps, p, q.in, q.o), y = run(s, caps, p, changed, q.o);
    compare_bitwise(p, x, y, "K/V changed at keys masked for these rows", [&](int b, int, int64_t i) {
      if (b != b0) return true;
      return std::none_of(keys.begin(), keys.end(), [&](int64_t j) { return p.visible(b, i, j); });
    });
    return PropertyResult::pass();
  });
}

PropertyResult mask_encoding_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    if (!caps.window) return PropertyResult::skip("subject has no window mask");
    const Prepared q = prepare(c);
    const Align align = (c.aux & 1) ? Align::top_left : Align::bottom_right;
    const int64_t wide = q.p.n_q + q.p.n_k;
    std::vector<std::pair<Window, Window>> pairs;
    if (caps.causal) pairs.push_back({Window::causal(align), Window{wide, 0, align}});
    pairs.push_back({Window{}, Window{wide, wide, align}});
    for (const auto& [w1, w2] : pairs) {
      Problem p1 = q.p, p2 = q.p;
      p1.window = w1;
      p2.window = w2;
      if (auto why = unsupported(caps, p1, q.o)) return PropertyResult::skip(*why);
      if (auto why = unsupported(caps, p2, q.o)) return PropertyResult::skip(*why);
      compare_bitwise(p1, run(s, caps, p1, q.in, q.o), run(s, caps, p2, q.in, q.o),
                      window_name(w1) + " vs " + window_name(w2), [](int, int, int64_t) { return true; });
    }
    return PropertyResult::pass();
  });
}

PropertyResult key_permutation_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    const Problem& p = q.p;
    if (p.window.active() || !p.key_lengths.empty() || !p.dense_mask.empty())
      return PropertyResult::skip("a mask makes key order meaningful");
    if (auto why = unsupported(caps, p, q.o)) return PropertyResult::skip(*why);
    std::vector<int64_t> perm(size_t(p.n_k));
    std::iota(perm.begin(), perm.end(), 0);
    if (c.aux & 1) {
      std::reverse(perm.begin(), perm.end());
    } else {
      std::mt19937_64 rng(c.aux);
      std::shuffle(perm.begin(), perm.end(), rng);
    }
    AttentionInputs permuted = q.in;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_kv; ++h)
        for (int64_t j = 0; j < p.n_k; ++j) {
          for (int x = 0; x < p.d; ++x) permuted.k[p.k_index(b, h, j, x)] = q.in.k[p.k_index(b, h, perm[j], x)];
          for (int x = 0; x < p.dv; ++x) permuted.v[p.v_index(b, h, j, x)] = q.in.v[p.v_index(b, h, perm[j], x)];
        }
    const Float64Attention ref1 = exact_reference(p, q.in, q.o), ref2 = exact_reference(p, permuted, q.o);
    compare_within(p, run_budgeted(s, caps, p, q.in, q.o, ref1), run_budgeted(s, caps, p, permuted, q.o, ref2),
                   std::string("keys ") + ((c.aux & 1) ? "reversed" : "shuffled"));
    return PropertyResult::pass();
  });
}

PropertyResult shift_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    const Problem& p = q.p;
    if (auto why = unsupported(caps, p, q.o)) return PropertyResult::skip(*why);
    const FormatSpec& f = spec(recipe_spec(q.o.recipe).input);
    auto representable = [&](double x, double descale) {
      return std::isfinite(x / descale) && is_representable(recipe_spec(q.o.recipe).input, x / descale);
    };
    // kappa: a power of two no larger than the largest |K|, so that it is representable.
    double amax = 0;
    for (double x : q.in.k)
      if (std::isfinite(x)) amax = std::max(amax, std::fabs(x));
    double kappa = amax > 0 ? std::ldexp(1.0, std::ilogb(amax)) : q.o.k_descale;
    if (!representable(kappa, q.o.k_descale)) kappa = q.o.k_descale;
    if (!representable(kappa, q.o.k_descale)) return PropertyResult::skip("no representable kappa");
    AttentionInputs base = q.in, shifted;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_kv; ++h)
        for (int64_t j = 0; j < p.n_k; ++j) base.k[p.k_index(b, h, j, 0)] = kappa;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int64_t i = 0; i < p.n_q; ++i) base.q[p.q_index(b, h, i, 0)] = 0.0;
    shifted = base;
    // Per-row shifts of 2^-1 .. 2^5 in score units, either sign, as powers of two (exact products).
    const double scale = p.effective_scale();
    std::mt19937_64 rng(c.aux);
    std::vector<double> shift(p.lse_size(), 0.0);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int64_t i = 0; i < p.n_q; ++i) {
          const double target = std::ldexp(1.0, int(rng() % 7) - 1) * ((rng() & 1) ? -1.0 : 1.0);
          double ci = std::copysign(std::ldexp(1.0, std::ilogb(std::fabs(target / (scale * kappa)))), target);
          while (ci != 0 && !representable(ci, q.o.q_descale)) {
            if (std::fabs(ci / q.o.q_descale) > f.max_finite) ci /= 2;
            else ci = 0;
          }
          shifted.q[p.q_index(b, h, i, 0)] = ci;
          shift[p.lse_index(b, h, i)] = scale * ci * kappa;
        }
    const Float64Attention ref1 = exact_reference(p, base, q.o), ref2 = exact_reference(p, shifted, q.o);
    Budgeted x = run_budgeted(s, caps, p, base, q.o, ref1), y = run_budgeted(s, caps, p, shifted, q.o, ref2);
    // LSE moves by exactly the shift: compare lse - shift.
    if (y.out.lse.size() == p.lse_size())
      for (size_t r = 0; r < p.lse_size(); ++r)
        if (std::isfinite(y.out.lse[r])) {
          const double moved = y.out.lse[r] - shift[r];
          y.budget.lse_bound[r] += 4 * std::numeric_limits<double>::epsilon() * std::fabs(y.out.lse[r]);
          y.out.lse[r] = moved;
        }
    compare_within(p, x, y, "scores shifted by a per-row constant");
    return PropertyResult::pass();
  });
}

PropertyResult empty_rows_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    const Problem& p = q.p;
    if (auto why = unsupported(caps, p, q.o)) return PropertyResult::skip(*why);
    std::vector<std::pair<int, int64_t>> empty;
    for (int b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.n_q; ++i)
        if (row_is_empty(p, b, i)) empty.push_back({b, i});
    if (empty.empty()) return PropertyResult::skip("no fully masked row");
    const SubjectOutput out = run(s, caps, p, q.in, q.o);
    for (const auto& [b, i] : empty)
      for (int h = 0; h < p.heads_q; ++h) {
        for (int x = 0; x < p.dv; ++x) {
          const size_t k = p.o_index(b, h, i, x);
          if (!(out.o[k] == 0.0)) fail("fully masked row: " + describe_index(p, k, false) + " = " + num(out.o[k]) + ", must be 0");
        }
        if (out.lse.size() == p.lse_size()) {
          const size_t r = p.lse_index(b, h, i);
          if (!(out.lse[r] == -std::numeric_limits<double>::infinity()))
            fail("fully masked row: " + describe_index(p, r, true) + " = " + num(out.lse[r]) + ", must be -inf");
        }
      }
    return PropertyResult::pass();
  });
}

PropertyResult nan_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    const Problem& p = q.p;
    if (auto why = unsupported(caps, p, q.o)) return PropertyResult::skip(*why);
    const Float64Attention ref = exact_reference(p, q.in, q.o);
    const SubjectOutput out = run(s, caps, p, q.in, q.o);
    for (size_t k = 0; k < out.o.size(); ++k)
      if (std::isnan(out.o[k]) != std::isnan(ref.out.o[k]))
        fail(describe_index(p, k, false) + " = " + num(out.o[k]) + " but the reference is " + num(ref.out.o[k]) +
             (std::isnan(out.o[k]) ? " (NaN leaked into an output that does not depend on it)"
                                   : " (NaN lost from an output that depends on it)"));
    if (out.lse.size() == p.lse_size())
      for (size_t r = 0; r < out.lse.size(); ++r)
        if (std::isnan(out.lse[r]) != std::isnan(ref.out.lse[r]))
          fail(describe_index(p, r, true) + " = " + num(out.lse[r]) + " but the reference is " + num(ref.out.lse[r]));
    return PropertyResult::pass();
  });
}

PropertyResult determinism_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    const Problem& p = q.p;
    if (auto why = unsupported(caps, p, q.o)) return PropertyResult::skip(*why);
    const SubjectOutput first = run(s, caps, p, q.in, q.o);
    // What ran before must not matter: a run on a longer, unmasked problem whose every input is NaN (the
    // leftovers of a previous kernel in shared memory or scratch), then this input again.
    Problem other = p;
    other.n_k = p.n_k + 128;
    other.window = Window{};
    other.key_lengths.clear();
    other.dense_mask.clear();
    const bool poisoned = !unsupported(caps, other, q.o);
    if (poisoned) {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      AttentionInputs all_nan;
      all_nan.q.assign(other.q_size(), nan);
      all_nan.k.assign(other.k_size(), nan);
      all_nan.v.assign(other.v_size(), nan);
      run(s, caps, other, all_nan, q.o);
    }
    for (int again = 0; again < 2; ++again)
      compare_bitwise(p, first, run(s, caps, p, q.in, q.o),
                      "run " + std::to_string(again + 2) + (poisoned && again == 0 ? " (after a run on NaN inputs)" : "") +
                          " vs run 1",
                      [](int, int, int64_t) { return true; });
    if (p.batch < 2 || q.o.num_splits == 0) return PropertyResult::pass();
    // One batch alone gives bitwise that batch's rows.
    const int b0 = int(c.aux % uint64_t(p.batch));
    Problem one = p;
    one.batch = 1;
    if (!p.key_lengths.empty()) one.key_lengths = {p.key_lengths[size_t(b0)]};
    if (auto why = unsupported(caps, one, q.o)) return PropertyResult::pass();
    AttentionInputs in1;
    in1.q.assign(q.in.q.begin() + ptrdiff_t(p.q_index(b0, 0, 0, 0)), q.in.q.begin() + ptrdiff_t(p.q_index(b0, 0, 0, 0) + one.q_size()));
    in1.k.assign(q.in.k.begin() + ptrdiff_t(p.k_index(b0, 0, 0, 0)), q.in.k.begin() + ptrdiff_t(p.k_index(b0, 0, 0, 0) + one.k_size()));
    in1.v.assign(q.in.v.begin() + ptrdiff_t(p.v_index(b0, 0, 0, 0)), q.in.v.begin() + ptrdiff_t(p.v_index(b0, 0, 0, 0) + one.v_size()));
    const SubjectOutput alone = run(s, caps, one, in1, q.o);
    for (size_t k = 0; k < one.o_size(); ++k) {
      const size_t kk = p.o_index(b0, 0, 0, 0) + k;
      if (!same_bits(alone.o[k], first.o[kk]))
        fail("batch " + std::to_string(b0) + " alone differs from the batched run at " + describe_index(p, kk, false) +
             ": " + num(alone.o[k]) + " vs " + num(first.o[kk]));
    }
    if (alone.lse.size() == one.lse_size() && first.lse.size() == p.lse_size())
      for (size_t r = 0; r < one.lse_size(); ++r) {
        const size_t rr = p.lse_index(b0, 0, 0) + r;
        if (!same_bits(alone.lse[r], first.lse[rr]))
          fail("batch " + std::to_string(b0) + " alone differs from the batched run at " + describe_index(p, rr, true) +
               ": " + num(alone.lse[r]) + " vs " + num(first.lse[rr]));
      }
    return PropertyResult::pass();
  });
}

PropertyResult bounds_property(Subject& s, const GeneratedCase& c) {
  return guarded([&] {
    const Capabilities caps = s.capabilities();
    const Prepared q = prepare(c);
    const Problem& p = q.p;
    if (auto why = unsupported(caps, p, q.o)) return PropertyResult::skip(*why);
    const SubjectOutput out = run(s, caps, p, q.in, q.o);  // checks the sizes
    bool any_nan_input = false;
    for (const auto* t : {&q.in.q, &q.in.k, &q.in.v})
      for (double x : *t) any_nan_input |= std::isnan(x);
    for (int b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.n_q; ++i) {
        const bool empty = row_is_empty(p, b, i);
        for (int h = 0; h < p.heads_q; ++h) {
          for (int x = 0; x < p.dv; ++x) {
            const size_t k = p.o_index(b, h, i, x);
            const double v = out.o[k];
            if (empty && !(v == 0.0)) fail(describe_index(p, k, false) + " = " + num(v) + " in a row that must be 0");
            if (std::isinf(v)) fail(describe_index(p, k, false) + " = " + num(v) + " (O is a convex combination of V)");
            if (std::isnan(v) && !any_nan_input) fail(describe_index(p, k, false) + " is NaN without a NaN input");
          }
          if (out.lse.size() != p.lse_size()) continue;
          const size_t r = p.lse_index(b, h, i);
          const double l = out.lse[r];
          if (l == std::numeric_limits<double>::infinity()) fail(describe_index(p, r, true) + " = +inf");
          if (empty != (l == -std::numeric_limits<double>::infinity()) && !std::isnan(l))
            fail(describe_index(p, r, true) + " = " + num(l) + (empty ? " in an empty row (must be -inf)" : " (-inf only for empty rows)"));
          if (std::isnan(l) && !any_nan_input) fail(describe_index(p, r, true) + " is NaN without a NaN input");
        }
      }
    return PropertyResult::pass();
  });
}

const std::vector<PropertyDef>& subject_properties() {
  static const std::vector<PropertyDef> defs = [] {
    CaseSpace plain;
    plain.nan_weight = 1;
    CaseSpace no_nan;
    CaseSpace masked = plain;
    masked.need_masked_key = true;
    CaseSpace unmasked;
    unmasked.masks = false;
    CaseSpace empty_rows;
    empty_rows.need_empty_row = true;
    empty_rows.nan_weight = 3;
    CaseSpace nan;
    nan.need_nan = true;
    nan.nan_weight = 2;
    return std::vector<PropertyDef>{
        {"budget", "O and LSE within the per-element error budget of the exact reference", plain, budget_property},
        {"lse", "LSE within its own derived bound; -inf exactly for empty rows", plain, lse_property},
        {"rescaling", "another key tiling and split-KV chunk merging agree within the budgets", no_nan,
         rescaling_property},
        {"fa1_fa2", "FA-1 and FA-2 normalisation agree within their budgets", no_nan, fa1_fa2_property},
        {"tile_size", "another (Br, Bc) agrees within the budgets", no_nan, tile_size_property},
        {"masked_keys", "K/V at masked keys have no influence (bitwise)", masked, masked_keys_property},
        {"mask_encoding", "causal == window(inf, 0) and none == window(inf, inf) (bitwise)", plain,
         mask_encoding_property},
        {"key_permutation", "permuting keys and values together changes O only within the budgets", unmasked,
         key_permutation_property},
        {"shift", "adding a per-row constant to the scores changes O only within the budgets", no_nan,
         shift_property},
        {"empty_rows", "fully masked rows give O = 0 and LSE = -inf", empty_rows, empty_rows_property},
        {"nan", "NaN reaches exactly the outputs that depend on it", nan, nan_property},
        {"determinism", "bitwise identical output run after run (after NaN inputs too), and per batch", plain,
         determinism_property},
        {"bounds", "exact output sizes, nothing but 0 / -inf in empty rows, no inf", plain, bounds_property},
    };
  }();
  return defs;
}

const PropertyDef* find_property(std::string_view name) {
  for (const PropertyDef& d : subject_properties())
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace fc
