// The libFuzzer target: bytes -> a fuzz case (properties/fuzz_decode.h) -> the CPU emulation ->
// the float64 reference and the error budget. Built by clang with -fsanitize=fuzzer,address,undefined
// in its own small project (tests/fuzz/standalone), run by tests/fuzz/run_fuzzer.sh; docs/fuzzing.md.
//
// A finding is any budget violation, any NaN / inf the semantics do not imply, an output that a
// poisoned element it does not depend on changed (the isolation probe), an exception (the decoder only
// makes valid problems, so the reference must accept every one) or a sanitizer report. On a finding the
// target prints the findings, the readable case and a ready-to-paste regression test, then aborts, so
// libFuzzer writes the input as crash-<sha1>.
//
// Environment:
//   FC_FUZZ_BUG=<name>   run the emulation with DeliberateBug <name> (the planted-bug hunt)
//   FC_FUZZ_EXPLAIN=1    print every input's case and verdict (run on a crash file to read it)
//   FC_FUZZ_NO_LSE=1     drop the subject's LSE before the check, as for a kernel without one (a harder
//                        hunt: a wrong LSE is the easiest symptom of most planted bugs)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/fuzz_check.h"
#include "properties/fuzz_decode.h"
#include "properties/fuzz_reproduce.h"

namespace {

fc::DeliberateBug g_bug = fc::DeliberateBug::none;
bool g_explain = false;
bool g_no_lse = false;

// The emulation, optionally without its LSE.
class FuzzSubject : public fc::Subject {
 public:
  explicit FuzzSubject(fc::DeliberateBug bug) : inner_(bug) {}
  fc::Capabilities capabilities() const override {
    fc::Capabilities c = inner_.capabilities();
    if (g_no_lse) c.lse = false;
    return c;
  }
  fc::SubjectOutput run(const fc::Problem& p, const fc::AttentionInputs& in, const fc::RunOptions& o) override {
    fc::SubjectOutput out = inner_.run(p, in, o);
    if (g_no_lse) out.lse.clear();
    return out;
  }

 private:
  fc::EmulatedKernel inner_;
};

std::string subject_name() {
  return g_bug == fc::DeliberateBug::none ? "emulation" : "emulation+bug:" + std::string(fc::bug_name(g_bug));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* b = std::getenv("FC_FUZZ_BUG"); b && *b) {
    const auto bug = fc::parse_bug(b);
    if (!bug) {
      std::fprintf(stderr, "attention_fuzzer: unknown FC_FUZZ_BUG '%s'\n", b);
      std::exit(2);
    }
    g_bug = *bug;
  }
  if (const char* e = std::getenv("FC_FUZZ_EXPLAIN"); e && *e && std::strcmp(e, "0") != 0) g_explain = true;
  if (const char* e = std::getenv("FC_FUZZ_NO_LSE"); e && *e && std::strcmp(e, "0") != 0) g_no_lse = true;
  std::fprintf(stderr, "attention_fuzzer: subject %s%s\n", subject_name().c_str(), g_no_lse ? " (LSE not checked)" : "");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FuzzSubject subject(g_bug);
  static const fc::Capabilities caps = subject.capabilities();
  static const fc::fuzz::FuzzLimits limits = fc::fuzz::FuzzLimits::cpu();

  const fc::fuzz::FuzzCase c = fc::fuzz::decode_case({data, size}, caps, limits);
  fc::fuzz::CaseVerdict v = fc::fuzz::check_case(subject, c);
  if (!v.clean() && g_bug != fc::DeliberateBug::none) {
    // The planted-bug hunt counts only findings the bug causes: one the clean emulation shares is
    // another problem (noted, then the hunt goes on).
    static FuzzSubject clean_subject(fc::DeliberateBug::none);
    static size_t shared = 0;
    const fc::fuzz::CaseVerdict w = fc::fuzz::check_case(clean_subject, c);
    if (!w.clean()) {
      if (shared++ < 3)
        std::fprintf(stderr, "attention_fuzzer: a finding the clean emulation shares (not the planted bug): %s\n",
                     w.findings.empty() ? "" : w.findings.front().c_str());
      return 0;
    }
  }
  if (g_explain || !v.clean()) {
    std::fprintf(stderr, "\n==== flashcheck fuzz case (%zu bytes) ====\n%s", size, fc::fuzz::describe(c).c_str());
    if (v.skipped) std::fprintf(stderr, "skipped: %s\n", v.skip_reason.c_str());
    std::fprintf(stderr, "verdict: %s (%zu O elements checked, worst error/bound %.3g, %zu budget, %zu semantic, %zu isolation "
                 "violations, %zu NaN/negative budget bounds)\n",
                 v.clean() ? "clean" : "FINDING", v.budget.elements, v.budget.max_ratio, v.budget.violations,
                 v.semantic_violations, v.isolation_violations, v.budget_defects);
    for (const auto& f : v.findings) std::fprintf(stderr, "  - %s\n", f.c_str());
    if (!v.clean()) {
      std::fprintf(stderr, "---- regression test (tests/fuzz/regression_test.cpp) ----\n%s",
                   fc::fuzz::to_regression_test(c, "Reproducer", subject_name()).c_str());
      std::fflush(stderr);
      std::abort();  // libFuzzer saves the input as crash-<sha1>
    }
  }
  return 0;
}
