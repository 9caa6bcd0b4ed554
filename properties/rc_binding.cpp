#include "properties/rc_binding.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include <rapidcheck/detail/Configuration.h>
#include <rapidcheck/detail/TestListener.h>

namespace fc {

namespace {

struct Probe {
  int skipped = 0;
  std::map<std::string, int> skip_reasons;
  std::optional<GeneratedCase> last_failure;
  std::string last_message;
  int runs = 0;
  size_t max_scores = 0, sum_scores = 0;
  int64_t max_n_q = 0, max_n_k = 0;
  std::map<std::string, int> coverage;
};

class SilentListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

std::string reason_key(const std::string& why) { return why.size() > 80 ? why.substr(0, 77) + "..." : why; }

rc::detail::Property make_property(const PropertyDef& def, Subject& subject, const std::shared_ptr<Probe>& probe) {
  const Capabilities caps = subject.capabilities();
  return rc::detail::toProperty([&def, &subject, probe, caps]() {
    const GeneratedCase c = *gen_case(caps, def.space);
    const PropertyResult r = def.check(subject, c);
    ++probe->runs;
    probe->max_scores = std::max(probe->max_scores, c.scores());
    probe->sum_scores += c.scores();
    probe->max_n_q = std::max(probe->max_n_q, c.problem.n_q);
    probe->max_n_k = std::max(probe->max_n_k, c.problem.n_k);
    ++probe->coverage["recipe " + std::string(recipe_spec(c.options.recipe).name)];
    ++probe->coverage["mask " + std::string(mask_kind_name(c.mask))];
    ++probe->coverage["dist " + std::string(distribution_name(c.distribution))];
    if (!c.edits.empty()) ++probe->coverage["hostile values"];
    if (r.skipped()) {
      ++probe->skipped;
      ++probe->skip_reasons[reason_key(r.message)];
      return;
    }
    if (r.failed()) {
      // The last failing run is the minimal case: RapidCheck re-runs it after shrinking.
      probe->last_failure = c;
      probe->last_message = r.message;
      RC_FAIL(def.name + " failed: " + r.message);
    }
  });
}

PropertyOutcome finish(const PropertyDef&, const std::string& id, const rc::detail::TestResult& result,
                       const Probe& probe, double seconds) {
  using namespace rc::detail;
  PropertyOutcome out;
  out.seconds = seconds;
  std::ostringstream msg;
  printResultMessage(result, msg);
  out.rapidcheck_message = msg.str();
  SuccessResult success;
  FailureResult failure;
  if (result.match(success)) {
    out.passed = true;
    out.successes = success.numSuccess;
    out.skipped = probe.skipped;
    out.skip_reasons = probe.skip_reasons;
    out.max_scores = probe.max_scores;
    out.mean_scores = probe.runs ? double(probe.sum_scores) / probe.runs : 0;
    out.max_n_q = probe.max_n_q;
    out.max_n_k = probe.max_n_k;
    out.coverage = probe.coverage;
  } else if (result.match(failure)) {
    out.successes = failure.numSuccess;
    out.shrinks = failure.reproduce.shrinkPath.size();
    out.minimal = probe.last_failure;
    out.failure = probe.last_message;
    Configuration config = configuration();
    config.reproduce.clear();
    config.reproduce[id] = failure.reproduce;
    out.reproduce = configToMinimalString(config);
  } else {
    out.gave_up = true;
  }
  return out;
}

}  // namespace

PropertyOutcome check_property(const PropertyDef& def, Subject& subject, const std::string& id) {
  auto probe = std::make_shared<Probe>();
  rc::detail::TestMetadata metadata;
  metadata.id = id;
  metadata.description = def.name;
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = rc::detail::checkProperty(make_property(def, subject, probe), metadata);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return finish(def, id, result, *probe, seconds);
}

PropertyOutcome check_property(const PropertyDef& def, Subject& subject, const std::string& id,
                               const rc::detail::TestParams& params) {
  auto probe = std::make_shared<Probe>();
  rc::detail::TestMetadata metadata;
  metadata.id = id;
  metadata.description = def.name;
  SilentListener listener;
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = rc::detail::checkProperty(make_property(def, subject, probe), metadata, params, listener);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return finish(def, id, result, *probe, seconds);
}

std::string summary(const PropertyDef& def, const std::string& subject_name, const PropertyOutcome& o) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(2);
  if (o.passed) {
    s << "property " << def.name << " on " << subject_name << ": " << o.successes << " cases passed ("
      << (o.successes - o.skipped) << " checked, " << o.skipped << " skipped) in " << o.seconds << " s";
    s << "\n  cases: up to Nq=" << o.max_n_q << " Nk=" << o.max_n_k << ", " << o.max_scores << " scores (mean "
      << o.mean_scores << ");";
    for (const auto& [what, n] : o.coverage) s << " " << what << ":" << n;
    for (const auto& [why, n] : o.skip_reasons) s << "\n  skipped " << n << "x: " << why;
    return s.str();
  }
  if (o.gave_up) {
    s << "property " << def.name << " on " << subject_name << ": RapidCheck gave up\n" << o.rapidcheck_message;
    return s.str();
  }
  s << "property " << def.name << " on " << subject_name << " FAILED after " << o.successes << " passing cases and "
    << o.shrinks << " shrinks (" << o.seconds << " s)\n";
  if (o.minimal)
    s << "  minimal case (" << o.minimal->scores() << " scores): " << o.minimal->describe() << "\n";
  s << "  " << o.failure << "\n";
  s << "  replay with: RC_PARAMS=\"" << o.reproduce << "\"";
  return s.str();
}

}  // namespace fc
