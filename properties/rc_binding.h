// Runs a PropertyDef against a Subject under RapidCheck: cases come from gen_case(caps, def.space), a
// failure shrinks to a minimal case, and the result carries the case counts, the skip reasons, the
// shrunk case and the RC_PARAMS="reproduce=..." line that replays it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <rapidcheck.h>

#include "properties/attention_properties.h"

namespace fc {

struct PropertyOutcome {
  bool passed = false;
  bool gave_up = false;           // RapidCheck gave up (too many discards) or errored
  int successes = 0;              // cases that passed (skipped ones included)
  int skipped = 0;                // cases the subject does not support, or that the property could not use
  std::map<std::string, int> skip_reasons;
  size_t max_scores = 0;          // the largest case run (B * Hq * Nq * Nk)
  double mean_scores = 0;
  int64_t max_n_q = 0, max_n_k = 0;
  std::map<std::string, int> coverage;  // cases per recipe, mask kind and distribution
  size_t shrinks = 0;             // accepted shrink steps
  std::optional<GeneratedCase> minimal;  // the shrunk counterexample
  std::string failure;            // the property's own message for the minimal case
  std::string rapidcheck_message; // RapidCheck's report (counterexample, assertion)
  std::string reproduce;          // RC_PARAMS value that replays the failure
  double seconds = 0;
};

// With the global configuration (RC_PARAMS: seed, max_success, reproduce, ...), the global reproduce
// map and RapidCheck's own listener: what the gtest bindings use. `id` must be stable across runs (a
// reproduce string names it): tests use "<suite>/<property>".
PropertyOutcome check_property(const PropertyDef& def, Subject& subject, const std::string& id);

// With explicit parameters (seed, max_success, max_size) and no output: the teeth tests.
PropertyOutcome check_property(const PropertyDef& def, Subject& subject, const std::string& id,
                               const rc::detail::TestParams& params);

// A multi-line human summary: "budget on cpu-emulation: 100 cases passed (3 skipped: ...) in 1.2 s",
// or the failure with its shrunk case and the RC_PARAMS line.
std::string summary(const PropertyDef& def, const std::string& subject_name, const PropertyOutcome& outcome);

}  // namespace fc
