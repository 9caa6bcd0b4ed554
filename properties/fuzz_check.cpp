// The fuzzer's oracle (fuzz_check.h).
#include "properties/fuzz_check.h"

#include <bit>
#include <cctype>
#include <cmath>
#include <limits>

#include "properties/check_pipeline.h"
#include "properties/fuzz_reproduce.h"
#include "properties/oracle.h"

namespace fc::fuzz {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string where_o(const Problem& p, size_t idx) {
  const size_t c = idx % p.dv, row = idx / p.dv;
  const size_t i = row % p.n_q, h = (row / p.n_q) % p.heads_q, b = row / (p.n_q * p.heads_q);
  return "O[b=" + std::to_string(b) + ",h=" + std::to_string(h) + ",i=" + std::to_string(i) + ",c=" + std::to_string(c) + "]";
}
std::string where_row(const Problem& p, size_t row) {
  const size_t i = row % p.n_q, h = (row / p.n_q) % p.heads_q, b = row / (p.n_q * p.heads_q);
  return "LSE[b=" + std::to_string(b) + ",h=" + std::to_string(h) + ",i=" + std::to_string(i) + "]";
}

bool same_bits_or_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// Rows (LSE indices) whose outputs depend on element `index` of tensor t under the semantics: a Q row's
// own outputs when it sees any key; a K or V row's keys' viewers. A Q or K element reaches the whole
// row (scores, so every column of O and the LSE); a V element only its own column of O (see
// dependent()).
std::vector<char> dependent_rows(const Problem& p, char t, size_t index) {
  std::vector<char> dep(p.lse_size(), 0);
  if (t == 'q') {
    const size_t row = index / size_t(p.d);
    const size_t i = row % p.n_q, b = row / (p.n_q * p.heads_q);
    for (int64_t j = 0; j < p.n_k; ++j)
      if (p.visible(int(b), int64_t(i), j)) {
        dep[row] = 1;
        break;
      }
    return dep;
  }
  const size_t row = index / size_t(t == 'k' ? p.d : p.dv);
  const int64_t j = int64_t(row % size_t(p.n_k));
  const int hk = int((row / size_t(p.n_k)) % size_t(p.heads_kv));
  const int b = int(row / (size_t(p.n_k) * p.heads_kv));
  for (int h = 0; h < p.heads_q; ++h) {
    if (p.kv_head(h) != hk) continue;
    for (int64_t i = 0; i < p.n_q; ++i)
      if (p.visible(b, i, j)) dep[p.lse_index(b, h, i)] = 1;
  }
  return dep;
}

}  // namespace

CaseVerdict check_case(Subject& subject, const FuzzCase& fc, size_t max_findings) {
  CaseVerdict v;
  const Problem& p = fc.problem;
  const RunOptions& o = fc.options;
  auto note = [&](std::string s) {
    if (v.findings.size() < max_findings) v.findings.push_back(std::move(s));
  };
  const Capabilities caps = subject.capabilities();
  SubjectOutput out;
  try {
    out = run_subject(subject, caps, p, fc.inputs, o);
  } catch (const SubjectRefused& e) {
    v.skipped = true;
    v.skip_reason = e.reason;
    return v;
  } catch (const SubjectOutOfMemory& e) {
    v.skipped = true;  // the machine's limit, not a verdict on the kernel
    v.skip_reason = e.what();
    return v;
  } catch (const std::exception& e) {
    v.subject_failed = true;
    v.failure = dynamic_cast<const SubjectCrashed*>(&e)    ? "crashed"
                : dynamic_cast<const SubjectTimedOut*>(&e) ? "timeout"
                                                           : "error";
    note(std::string("subject failed on valid input: ") + e.what());
    return v;
  }

  const Float64Attention ref = exact_reference(p, fc.inputs, o);
  const Judgement judged = judge_output(p, fc.inputs, o, caps, out, ref);
  const ErrorBudget& budget = judged.budget;
  v.budget = judged.verdict;
  if (v.budget.violations) {
    std::string s = std::to_string(v.budget.violations) + " element(s) beyond the error budget (" +
                    judged.basis.describe() + ")";
    if (!v.budget.worst.empty()) {
      const WorstElement& w = v.budget.worst.front();
      s += "; worst " + (w.is_lse ? where_row(p, w.index) : where_o(p, w.index)) + ": got " + fmt_double(w.got) +
           ", reference " + fmt_double(w.want) + ", error " + fmt_double(w.error) + " > bound " + fmt_double(w.bound);
    }
    note(s);
  }

  // The budget itself: a NaN or negative bound on an element with a finite reference lets any error
  // pass (check_against_budget compares err > bound), so it is a finding against the budget.
  for (size_t idx = 0; idx < p.o_size(); ++idx)
    if (std::isfinite(ref.out.o[idx]) && std::isfinite(ref.out.lse[idx / size_t(p.dv)]) && !(budget.o_bound[idx] >= 0)) {
      ++v.budget_defects;
      note("error_budget gives " + where_o(p, idx) + " the bound " + fmt_double(budget.o_bound[idx]) +
           " (reference " + fmt_double(ref.out.o[idx]) + "): a NaN or negative bound passes every error");
    }
  for (size_t row = 0; row < p.lse_size(); ++row)
    if (std::isfinite(ref.out.lse[row]) && !(budget.lse_bound[row] >= 0)) {
      ++v.budget_defects;
      note("error_budget gives " + where_row(p, row) + " the bound " + fmt_double(budget.lse_bound[row]) +
           ": a NaN or negative bound passes every error");
    }

  // The semantics, checked here independently of the budget's own NaN handling: NaN exactly where the
  // reference has NaN, never inf, exact 0 / -inf for rows without a visible key.
  const bool has_lse = !out.lse.empty();
  for (size_t row = 0; row < p.lse_size(); ++row) {
    const double rl = ref.out.lse[row];
    const bool empty_row = rl == -kInf;
    for (int c = 0; c < p.dv; ++c) {
      const size_t idx = row * size_t(p.dv) + size_t(c);
      const double got = out.o[idx], want = ref.out.o[idx];
      std::string bad;
      if (empty_row) {
        if (got != 0.0) bad = "a row with no visible key must give exactly 0";
      } else if (std::isnan(want) != std::isnan(got)) {
        bad = std::isnan(want) ? "the reference is NaN (the row depends on a NaN input), the subject is not"
                               : "NaN that no input of this element implies";
      } else if (std::isinf(got) && !legitimate_overflow(got, want, budget.o_bound[idx], recipe_spec(fc.options.recipe).output)) {
        bad = "infinite output (the reference is finite and not within its bound of overflow)";
      }
      if (!bad.empty()) {
        ++v.semantic_violations;
        note(where_o(p, idx) + ": got " + fmt_double(got) + ", reference " + fmt_double(want) + ": " + bad);
      }
    }
    if (has_lse) {
      const double got = out.lse[row];
      std::string bad;
      if (empty_row) {
        if (got != -kInf) bad = "a row with no visible key must give LSE = -inf";
      } else if (std::isnan(rl) != std::isnan(got)) {
        bad = std::isnan(rl) ? "the reference LSE is NaN, the subject's is not" : "NaN LSE that no input implies";
      } else if (std::isinf(got)) {
        bad = "infinite LSE (the reference is finite)";
      }
      if (!bad.empty()) {
        ++v.semantic_violations;
        note(where_row(p, row) + ": got " + fmt_double(got) + ", reference " + fmt_double(rl) + ": " + bad);
      }
    }
  }

  // The isolation probe: one element poisoned, every output that does not depend on it bit-identical
  // to the clean run; with NaN, every output that does depend on it NaN. An infinite input may also be
  // rejected (SubjectError / invalid_argument), as the reference rejects it.
  if (fc.poison.tensor) {
    AttentionInputs bad = fc.inputs;
    std::vector<double>& t = fc.poison.tensor == 'q' ? bad.q : fc.poison.tensor == 'k' ? bad.k : bad.v;
    t[fc.poison.index] = fc.poison.value;
    const bool is_nan = std::isnan(fc.poison.value);
    SubjectOutput out2;
    bool rejected = false;
    try {
      out2 = subject.run(p, bad, o);
    } catch (const std::exception& e) {
      rejected = true;
      if (is_nan) {
        ++v.isolation_violations;
        note(std::string("subject failed on a NaN input (NaN is in the domain): ") + e.what());
      }
    }
    if (!rejected) {
      if (out2.o.size() != out.o.size() || out2.lse.size() != out.lse.size()) {
        ++v.isolation_violations;
        note("poisoned run returned outputs of another size");
      } else {
        const std::vector<char> dep_row = dependent_rows(p, fc.poison.tensor, fc.poison.index);
        const bool v_poison = fc.poison.tensor == 'v';
        const int v_col = v_poison ? int(fc.poison.index % size_t(p.dv)) : -1;
        const std::string what = std::string(1, char(std::toupper(fc.poison.tensor))) + "[" +
                                 std::to_string(fc.poison.index) + "] = " + fmt_double(fc.poison.value);
        for (size_t row = 0; row < p.lse_size(); ++row) {
          for (int c = 0; c < p.dv; ++c) {
            const size_t idx = row * size_t(p.dv) + size_t(c);
            const bool dep = dep_row[row] && (!v_poison || c == v_col);
            if (!dep && !same_bits_or_nan(out.o[idx], out2.o[idx])) {
              ++v.isolation_violations;
              note(where_o(p, idx) + " changed from " + fmt_double(out.o[idx]) + " to " + fmt_double(out2.o[idx]) +
                   " when " + what + ", on which it does not depend");
            } else if (dep && is_nan && !std::isnan(out2.o[idx])) {
              ++v.isolation_violations;
              note(where_o(p, idx) + " is " + fmt_double(out2.o[idx]) + " with " + what + ", on which it depends: must be NaN");
            }
          }
          if (has_lse) {
            const bool dep = dep_row[row] && !v_poison;  // the LSE depends on the scores only
            if (!dep && !same_bits_or_nan(out.lse[row], out2.lse[row])) {
              ++v.isolation_violations;
              note(where_row(p, row) + " changed from " + fmt_double(out.lse[row]) + " to " + fmt_double(out2.lse[row]) +
                   " when " + what + ", on which it does not depend");
            } else if (dep && is_nan && !std::isnan(out2.lse[row])) {
              ++v.isolation_violations;
              note(where_row(p, row) + " is " + fmt_double(out2.lse[row]) + " with " + what + ", on which it depends: must be NaN");
            }
          }
        }
      }
    }
  }
  return v;
}

}  // namespace fc::fuzz
