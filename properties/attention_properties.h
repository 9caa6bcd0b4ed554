// The properties every attention subject must pass, written once over fc::Subject: the CPU emulation,
// the CUDA kernel and any plugin run exactly this code. Each property is a plain function of a subject
// and a generated case; properties/rc_binding.h turns it into a RapidCheck property (generation,
// shrinking, reproduce strings), and tests/properties/ binds it to concrete subjects.
//
// A property runs only where the subject claims support (fc::unsupported) and otherwise says what it
// skipped. A subject that throws (SubjectError, or anything else) fails: an error is never a pass.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/subject.h"
#include "properties/generators.h"
#include "reference/error_budget.h"

namespace fc {

struct PropertyResult {
  enum class Outcome { pass, fail, skip };
  Outcome outcome = Outcome::pass;
  std::string message;  // why it failed, or what was skipped
  std::optional<BudgetVerdict> verdict;  // the budget property's verdict (the same-case test reads it)

  static PropertyResult pass() { return {}; }
  static PropertyResult fail(std::string why) { return {Outcome::fail, std::move(why), std::nullopt}; }
  static PropertyResult skip(std::string why) { return {Outcome::skip, std::move(why), std::nullopt}; }
  bool failed() const { return outcome == Outcome::fail; }
  bool skipped() const { return outcome == Outcome::skip; }
};

using PropertyFn = std::function<PropertyResult(Subject&, const GeneratedCase&)>;

struct PropertyDef {
  std::string name;     // stable identifier: test names, docs/properties.md, the bug table
  std::string summary;  // one line
  CaseSpace space;      // what the generated cases must look like
  PropertyFn check;
};

// --- The properties (each also listed in subject_properties()) ---------------------------------------

// O and LSE match the exact reference within the per-element error budget of the case's recipe.
PropertyResult budget_property(Subject& s, const GeneratedCase& c);
// LSE matches the reference within its own derived bound; -inf exactly for rows with no visible key.
PropertyResult lse_property(Subject& s, const GeneratedCase& c);
// Rescaling invariant on the subject: another key-tile width and a split-KV run (chunks merged) give the
// same result within the two budgets.
PropertyResult rescaling_property(Subject& s, const GeneratedCase& c);
// FA-1 (normalise every tile) and FA-2 (divide once) agree within their budgets.
PropertyResult fa1_fa2_property(Subject& s, const GeneratedCase& c);
// Another (Br, Bc) from the subject's selectable set agrees within the two budgets.
PropertyResult tile_size_property(Subject& s, const GeneratedCase& c);
// Changing K/V (to anything, NaN included) at keys masked for a set of rows leaves those rows bitwise
// unchanged.
PropertyResult masked_keys_property(Subject& s, const GeneratedCase& c);
// causal == window(L >= Nq + Nk, 0) and no mask == window(L, L), bitwise.
PropertyResult mask_encoding_property(Subject& s, const GeneratedCase& c);
// Without a mask, permuting keys and values together changes O only within the two budgets.
PropertyResult key_permutation_property(Subject& s, const GeneratedCase& c);
// Adding a constant to each row's scores (exactly: K[:,0] = kappa, Q[i,0] = 0 vs c_i) leaves O unchanged
// within the two budgets, and moves LSE by exactly the shift within the two LSE bounds.
PropertyResult shift_property(Subject& s, const GeneratedCase& c);
// Rows with no visible key: O = 0 exactly and LSE = -inf, NaN inputs included.
PropertyResult empty_rows_property(Subject& s, const GeneratedCase& c);
// NaN reaches exactly the outputs that depend on it (the reference's NaN pattern), in O and LSE.
PropertyResult nan_property(Subject& s, const GeneratedCase& c);
// The same input gives bitwise the same output, run after run, also after a run on NaN inputs (a
// kernel's state, shared memory or scratch, must not carry over), and a batch's rows do not depend on
// the other batches (one batch alone gives bitwise that batch's rows).
PropertyResult determinism_property(Subject& s, const GeneratedCase& c);
// Output sizes are exactly [B,Hq,Nq,dv] and [B,Hq,Nq]; nothing but 0 in rows that must be 0; no inf
// in O; LSE never +inf and -inf only for empty rows. (Plugin subjects also check poisoned guard
// margins around O and LSE on every run: kernels/plugin/plugin_subject.h.)
PropertyResult bounds_property(Subject& s, const GeneratedCase& c);

const std::vector<PropertyDef>& subject_properties();
const PropertyDef* find_property(std::string_view name);

// Helpers shared with the tests.
std::string describe_index(const Problem& p, size_t o_index, bool lse);

}  // namespace fc
