// The catalogue of real attention bugs (docs/known-bugs.md): each public report's mechanism is a variant
// of the CPU emulation (kernels/cpu/deliberate_bugs.h), and the general property suite must catch it in
// its default run, early. A test per entry runs the properties named for it exactly as the default
// property run does (the FC_PROPERTY_DEFAULT_RC_PARAMS seed and case count, the same generators) and
// asserts that each fails within the first quarter of its case budget, then shrinks to a small case.
// It prints the cases run up to the first failure, the seconds to it and the shrunk case.
//
// FC_KNOWN_BUGS_TABLE=1 runs every property against every entry with the whole budget and prints the
// table docs/known-bugs.md is made from (ctest label slow); FC_KNOWN_BUGS_SEED=<n> runs another seed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>

#include <rapidcheck/detail/Configuration.h>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/attention_properties.h"
#include "properties/rc_binding.h"

namespace fc {
namespace {

struct Entry {
  DeliberateBug bug;
  std::string report;
  std::vector<std::string> properties;  // those the default run must catch it with, early
  size_t small = 4096;                  // the shrunk case has at most this many scores (B * Hq * Nq * Nk)
};

const std::vector<Entry>& catalogue() {
  static const std::vector<Entry> entries = {
      {DeliberateBug::v_padding_not_zeroed, "flash-attention #1745", {"masked_keys", "budget"}},
      {DeliberateBug::k_smem_stale_past_end, "flash-attention #1395", {"determinism"}},
      {DeliberateBug::running_max_finite_sentinel, "FlashInfer #4451", {"budget", "lse"}},
      {DeliberateBug::masked_score_finite_sentinel, "FlashInfer #4452", {"empty_rows"}},
      {DeliberateBug::window_alignment_ignored, "CUTLASS #2336 (flash-attention #1778)", {"budget"}},
      {DeliberateBug::split_kv_stale_length, "flash-attention #1192", {"rescaling"}},
      {DeliberateBug::fp8_lazy_rescale_saturation, "flash-attention #2716", {"budget"}},
      {DeliberateBug::fp8_wide_head_dim_corrupt, "cudnn-frontend #981", {"budget"}},
      {DeliberateBug::gqa_group_division_inexact, "PyTorch #193893", {"budget"}},
      {DeliberateBug::index_int16_overflow, "xformers #719", {"budget"}, 65537},
  };
  return entries;
}

// gtest prints the parameter of a failing or listed test.
void PrintTo(const Entry& e, std::ostream* os) { *os << e.report << " (" << bug_name(e.bug) << ")"; }

// The default property run's parameters (tests/properties/CMakeLists.txt), whatever RC_PARAMS says:
// the catalogue is about what the default run catches. FC_KNOWN_BUGS_SEED=<n> replaces only the seed,
// to see how far another seed moves the first failure.
rc::detail::TestParams default_params() {
  rc::detail::TestParams p = rc::detail::configFromString(FC_PROPERTY_DEFAULT_RC_PARAMS).testParams;
  if (const char* seed = std::getenv("FC_KNOWN_BUGS_SEED"); seed && *seed) p.seed = std::strtoull(seed, nullptr, 10);
  return p;
}

struct FirstFailure {
  int cases = 0;          // cases run, the failing one included
  double seconds = 0;     // from the start to the end of the first failing case
  bool failed = false;
};

// The property as the default run runs it, but passing (unchecked) every case after the first `limit`
// until one has failed, so that the cases and their order are exactly the default run's and a bug
// caught late costs no more than `limit` cases; shrinking, after a failure, checks every case.
PropertyDef capped(const PropertyDef& def, int limit, const std::shared_ptr<FirstFailure>& first) {
  PropertyDef d = def;
  const auto t0 = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  d.check = [inner = def.check, limit, first, t0](Subject& s, const GeneratedCase& c) {
    if (!first->failed && first->cases >= limit) return PropertyResult::pass();
    if (!first->failed) ++first->cases;
    PropertyResult r = inner(s, c);
    if (r.failed() && !first->failed) {
      first->failed = true;
      first->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - *t0).count();
    }
    return r;
  };
  return d;
}

struct Caught {
  bool caught = false;
  int cases = 0;
  double seconds = 0;
  size_t scores = 0;
  std::string minimal, failure;
};

Caught run_entry(DeliberateBug bug, const PropertyDef& def, int limit) {
  EmulatedKernel subject(bug);
  auto first = std::make_shared<FirstFailure>();
  const PropertyOutcome o = check_property(capped(def, limit, first), subject,
                                           "known_bugs/" + std::string(bug_name(bug)) + "/" + def.name, default_params());
  Caught c;
  c.caught = !o.passed && !o.gave_up && first->failed && o.minimal.has_value();
  c.cases = first->cases;
  c.seconds = first->seconds;
  if (o.minimal) {
    c.scores = o.minimal->scores();
    c.minimal = o.minimal->describe();
  }
  c.failure = o.failure;
  return c;
}

class known_bug : public ::testing::TestWithParam<Entry> {};

TEST_P(known_bug, caught_early_by_the_default_run) {
  const Entry& e = GetParam();
  const int budget = default_params().maxSuccess, quarter = budget / 4;
  for (const std::string& name : e.properties) {
    const PropertyDef* def = find_property(name);
    ASSERT_NE(def, nullptr) << name;
    const Caught c = run_entry(e.bug, *def, quarter);
    std::cout << "[known bug] " << e.report << " (" << bug_name(e.bug) << ") x " << name << ": ";
    if (!c.caught) {
      std::cout << "NOT caught in the first " << quarter << " of " << budget << " cases\n";
      ADD_FAILURE() << name << " does not catch " << bug_name(e.bug) << " (" << e.report << ") within " << quarter
                    << " cases of the default run";
      continue;
    }
    std::cout << "caught at case " << c.cases << " of " << budget << " after " << c.seconds << " s; shrunk to "
              << c.scores << " scores: " << c.minimal << "\n    " << c.failure << "\n";
    EXPECT_LE(c.scores, e.small) << "shrunk case too large: " << c.minimal;
  }
}

INSTANTIATE_TEST_SUITE_P(catalogue, known_bug, ::testing::ValuesIn(catalogue()),
                         [](const ::testing::TestParamInfo<Entry>& info) { return std::string(bug_name(info.param.bug)); });

// Every entry against every property with the whole default budget: the table of docs/known-bugs.md.
TEST(known_bugs, table) {
  if (!std::getenv("FC_KNOWN_BUGS_TABLE")) GTEST_SKIP() << "set FC_KNOWN_BUGS_TABLE=1 to print the catalogue table";
  const int budget = default_params().maxSuccess;
  std::ostringstream md;
  md << "| report | bug | first property (case) | others catching it | shrunk scores | seconds |\n|---|---|---|---|---|---|\n";
  for (const Entry& e : catalogue()) {
    std::string best, others;
    Caught best_c;
    for (const PropertyDef& d : subject_properties()) {
      const Caught c = run_entry(e.bug, d, budget);
      std::cerr << e.report << " x " << d.name << ": "
                << (c.caught ? "case " + std::to_string(c.cases) + ", " + std::to_string(c.scores) + " scores, " +
                                   std::to_string(c.seconds) + " s: " + c.minimal
                             : std::string("not caught"))
                << std::endl;
      if (!c.caught) continue;
      if (best.empty() || c.cases < best_c.cases) {
        if (!best.empty()) others += (others.empty() ? "" : ", ") + best + " (" + std::to_string(best_c.cases) + ")";
        best = d.name;
        best_c = c;
      } else {
        others += (others.empty() ? "" : ", ") + d.name + " (" + std::to_string(c.cases) + ")";
      }
    }
    md << "| " << e.report << " | " << bug_name(e.bug) << " | "
       << (best.empty() ? "NOT CAUGHT" : best + " (" + std::to_string(best_c.cases) + ")") << " | " << others << " | "
       << best_c.scores << " | " << best_c.seconds << " |\n";
  }
  std::cout << md.str();
}

}  // namespace
}  // namespace fc
