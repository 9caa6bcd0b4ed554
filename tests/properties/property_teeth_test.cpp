// Teeth: the property suite must catch every deliberate bug of the CPU emulation, and every property
// must catch at least one bug (or it is dead weight). Each expected (bug, property) pair runs under a
// fixed RapidCheck seed, must fail, and must shrink to a small case; the shrunk case is printed.
//
// Two contract properties (determinism, bounds) cannot be broken by a numerical bug in a deterministic
// emulation, so their teeth are two mutant subjects wrapped around the emulation here: one that is not
// run-to-run deterministic (a flipped last bit every other run, as a racy reduction would), one that
// leaves fully masked rows unwritten (stale memory). A third mutant puts causal masks on a separate path
// that ignores the alignment, which is what the mask-encoding property exists for.
//
// FC_TEETH_MATRIX=1 runs every property against every bug and mutant and prints the markdown table of
// docs/properties.md (ctest -L slow, or the executable directly).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/attention_properties.h"
#include "properties/rc_binding.h"

namespace fc {
namespace {

constexpr uint64_t kSeed = 0xfc0de5eedull;
constexpr int kMaxCases = 300;
// "Small": each bug's smallest shrunk case has at most this many attention scores (B * Hq * Nq * Nk).
constexpr size_t kSmall = 4096;

class NondeterministicSubject : public Subject {
 public:
  Capabilities capabilities() const override {
    Capabilities c = inner_.capabilities();
    c.name = "mutant:nondeterministic";
    return c;
  }
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override {
    SubjectOutput out = inner_.run(p, in, o);
    if (++calls_ % 2 == 0)
      for (double& x : out.o)
        if (std::isfinite(x) && x != 0) {
          x = std::nextafter(x, 2 * x);
          break;
        }
    return out;
  }

 private:
  EmulatedKernel inner_;
  int calls_ = 0;
};

class StaleRowsSubject : public Subject {
 public:
  Capabilities capabilities() const override {
    Capabilities c = inner_.capabilities();
    c.name = "mutant:stale_empty_rows";
    return c;
  }
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override {
    SubjectOutput out = inner_.run(p, in, o);
    for (int b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.n_q; ++i) {
        bool empty = true;
        for (int64_t j = 0; j < p.n_k && empty; ++j) empty = !p.visible(b, i, j);
        if (!empty) continue;
        for (int h = 0; h < p.heads_q; ++h)
          for (int c = 0; c < p.dv; ++c) out.o[p.o_index(b, h, i, c)] = 0.5;  // what was in the buffer before
      }
    return out;
  }

 private:
  EmulatedKernel inner_;
};

// Causal masks handled on their own path that ignores the alignment (always top-left): the bug class
// of FlashAttention #1778, PyTorch #103082 and CUTLASS #2336. Window masks keep the right alignment.
class CausalTopLeftSubject : public Subject {
 public:
  Capabilities capabilities() const override {
    Capabilities c = inner_.capabilities();
    c.name = "mutant:causal_always_top_left";
    return c;
  }
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override {
    Problem q = p;
    if (q.window.left < 0 && q.window.right == 0) q.window.align = Align::top_left;
    return inner_.run(q, in, o);
  }

 private:
  EmulatedKernel inner_;
};

struct Culprit {
  std::string name;
  std::function<std::unique_ptr<Subject>()> make;
};

std::vector<Culprit> culprits() {
  std::vector<Culprit> all;
  for (DeliberateBug bug : {DeliberateBug::a_not_rescaled, DeliberateBug::l_not_rescaled, DeliberateBug::rescale_inverted,
                            DeliberateBug::tail_not_masked, DeliberateBug::causal_off_by_one, DeliberateBug::tile_local_max,
                            DeliberateBug::division_skipped_after_last_tile_max_change,
                            DeliberateBug::l_from_fp32_p_without_budget})
    all.push_back({std::string(bug_name(bug)), [bug] { return std::make_unique<EmulatedKernel>(bug); }});
  all.push_back({"mutant:nondeterministic", [] { return std::make_unique<NondeterministicSubject>(); }});
  all.push_back({"mutant:stale_empty_rows", [] { return std::make_unique<StaleRowsSubject>(); }});
  all.push_back({"mutant:causal_always_top_left", [] { return std::make_unique<CausalTopLeftSubject>(); }});
  return all;
}

// The pairs CI asserts: for each bug, the properties designed to catch it (a subset of the caught
// cells of the matrix in docs/properties.md; FC_TEETH_MATRIX=1 regenerates the matrix, whose other
// cells depend on the generators' exact choices). Every bug has at least one, every property at least
// one bug.
const std::map<std::string, std::vector<std::string>>& expected() {
  static const std::map<std::string, std::vector<std::string>> e = {
      {"a_not_rescaled", {"budget", "rescaling", "tile_size", "key_permutation"}},
      {"l_not_rescaled", {"budget", "lse", "rescaling"}},
      {"rescale_inverted", {"budget", "lse", "fa1_fa2"}},
      {"tail_not_masked", {"budget", "masked_keys", "shift", "empty_rows", "nan", "bounds"}},
      {"causal_off_by_one", {"budget", "masked_keys", "empty_rows", "nan"}},
      {"tile_local_max", {"budget", "rescaling", "tile_size"}},
      {"division_skipped_after_last_tile_max_change", {"budget", "fa1_fa2"}},
      {"l_from_fp32_p_without_budget", {"budget"}},
      {"mutant:nondeterministic", {"determinism"}},
      {"mutant:stale_empty_rows", {"empty_rows", "bounds"}},
      {"mutant:causal_always_top_left", {"budget", "mask_encoding"}},
  };
  return e;
}

rc::detail::TestParams params() {
  rc::detail::TestParams p;
  p.seed = kSeed;
  p.maxSuccess = kMaxCases;
  p.maxSize = 100;
  return p;
}

const Culprit& culprit(const std::string& name) {
  static const std::vector<Culprit> all = culprits();
  for (const Culprit& c : all)
    if (c.name == name) return c;
  throw std::invalid_argument("unknown culprit " + name);
}

class teeth : public ::testing::TestWithParam<std::string> {};

TEST_P(teeth, caught) {
  const std::string bug = GetParam();
  const auto& props = expected().at(bug);
  std::unique_ptr<Subject> subject = culprit(bug).make();
  int caught = 0;
  size_t smallest = SIZE_MAX;
  for (const std::string& name : props) {
    const PropertyDef* def = find_property(name);
    ASSERT_NE(def, nullptr) << name;
    const PropertyOutcome o = check_property(*def, *subject, "teeth/" + bug + "/" + name, params());
    std::cout << "[teeth] " << bug << " x " << name << ": ";
    if (o.passed) {
      std::cout << "NOT caught in " << o.successes << " cases (" << o.skipped << " skipped)\n";
      ADD_FAILURE() << "property " << name << " did not catch " << bug << " in " << o.successes << " cases";
      continue;
    }
    ASSERT_FALSE(o.gave_up) << o.rapidcheck_message;
    ASSERT_TRUE(o.minimal.has_value());
    ++caught;
    std::cout << "caught after " << o.successes << " passing cases, " << o.shrinks << " shrinks, "
              << o.seconds << " s; minimal case " << o.minimal->scores() << " scores: " << o.minimal->describe()
              << "\n    " << o.failure << "\n";
    smallest = std::min(smallest, o.minimal->scores());
  }
  EXPECT_GT(caught, 0);
  EXPECT_LE(smallest, kSmall) << bug << ": no property shrank it to a small case";
  std::cout << "[teeth] " << bug << ": caught by " << caught << "/" << props.size()
            << " expected properties; smallest shrunk case " << smallest << " scores\n";
}

INSTANTIATE_TEST_SUITE_P(property, teeth, ::testing::Values(
    "a_not_rescaled", "l_not_rescaled", "rescale_inverted", "tail_not_masked", "causal_off_by_one",
    "tile_local_max", "division_skipped_after_last_tile_max_change", "l_from_fp32_p_without_budget",
    "mutant:nondeterministic", "mutant:stale_empty_rows", "mutant:causal_always_top_left"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string n = info.param;
      for (char& c : n)
        if (c == ':') c = '_';
      return n;
    });

TEST(property_teeth, every_property_has_a_bug) {
  std::map<std::string, int> kills;
  for (const auto& [bug, props] : expected())
    for (const auto& p : props) ++kills[p];
  for (const PropertyDef& d : subject_properties()) EXPECT_GT(kills[d.name], 0) << d.name << " kills no bug";
}

// The full matrix for docs/properties.md: every property x every culprit.
TEST(property_teeth, matrix) {
  if (!std::getenv("FC_TEETH_MATRIX")) GTEST_SKIP() << "set FC_TEETH_MATRIX=1 to print the bug x property matrix";
  std::ostringstream md;
  md << "| bug \\ property |";
  for (const PropertyDef& d : subject_properties()) md << " " << d.name << " |";
  md << "\n|---|";
  for (size_t i = 0; i < subject_properties().size(); ++i) md << "---|";
  md << "\n";
  for (const Culprit& c : culprits()) {
    std::unique_ptr<Subject> subject = c.make();
    md << "| " << c.name << " |";
    for (const PropertyDef& d : subject_properties()) {
      const PropertyOutcome o = check_property(d, *subject, "matrix/" + c.name + "/" + d.name, params());
      if (o.passed) md << " - |";
      else if (o.minimal) md << " " << o.minimal->scores() << " |";
      else md << " ? |";
      std::cerr << c.name << " x " << d.name << ": " << (o.passed ? "pass" : "CAUGHT") << " " << o.seconds << " s"
                << (o.minimal ? " minimal: " + o.minimal->describe() : std::string()) << std::endl;
    }
    md << "\n";
  }
  std::cout << md.str();
}

}  // namespace
}  // namespace fc
