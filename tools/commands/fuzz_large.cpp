#include "tools/commands/fuzz_large.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "tools/report/interrupt.h"
#include "tools/report/list_options.h"
#include "tools/report/subject_choice.h"

#if defined(FLASHCHECK_HAVE_LARGE_CASES)
#include "properties/fuzz_decode.h"
#include "properties/large_case_run.h"
#endif

namespace fc::report {

#if defined(FLASHCHECK_HAVE_LARGE_CASES)

namespace {

LargeCase draw_case(uint64_t seed, uint64_t index, const Capabilities& caps) {
  std::mt19937_64 rng{fuzz::case_seed(seed, index)};
  return draw_large_case(rng, caps);
}

std::string worst_text(const BudgetVerdict& v) {
  if (v.worst.empty()) return "";
  const WorstElement& w = v.worst.front();
  return fmt::format("; worst {}[{}]: got {:.9g}, reference {:.9g}, error {:.3g} > bound {:.3g}", w.is_lse ? "LSE" : "O",
                     w.index, w.got, w.want, w.error, w.bound);
}

}  // namespace

int run_large_campaign(const LargeCampaign& o) {
  std::string why;
  if (!gpu::oracle_available(&why)) throw UsageError("--large judges on the device and needs the GPU oracle: " + why);
  const std::unique_ptr<Subject> subject = open_subject(o.subject);  // in this process: device buffers
  const fc_plugin* table = subject->plugin_table();
  if (!table)
    throw UsageError("--large runs a plugin on device buffers; '" + o.subject +
                     "' is not a plugin (use cuda, cuda-naive or plugin:<path>)");
  const Capabilities caps = subject->capabilities();
  install_interrupt_handler();
  std::fprintf(stderr, "flashcheck fuzz: subject %s (%s), large shapes on the device, %s, seed %llu\n", o.subject.c_str(),
               caps.name.c_str(), o.only_case >= 0 ? fmt::format("case {} alone", o.only_case).c_str()
                                                   : fmt::format("{:.0f} s", o.seconds).c_str(),
               static_cast<unsigned long long>(o.seed));
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  uint64_t cases = 0, judged = 0, declined = 0, elements = 0, violations = 0, with_findings = 0, failures = 0,
           oracle_errors = 0;
  double scores = 0, oracle_s = 0, worst = 0, last_progress = 0;
  std::string worst_case;
  bool sticky = false;
  const uint64_t first = o.only_case >= 0 ? uint64_t(o.only_case) : 0;
  for (uint64_t idx = first;; ++idx) {
    if (o.only_case >= 0 && idx > first) break;
    if (o.only_case < 0 && (elapsed() >= o.seconds || (o.max_cases && cases >= o.max_cases))) break;
    if (interrupted()) break;
    const LargeCase c = draw_case(o.seed, idx, caps);
    ++cases;
    const std::string reproduce = fmt::format("flashcheck fuzz --subject {} --large --seed {} --case {}", o.subject, o.seed, idx);
    try {
      const LargeResult r = run_large_case(*table, caps, c);
      const BudgetVerdict& v = r.verdict.verdict;
      ++judged;
      elements += v.elements;
      scores += double(c.problem.batch) * c.problem.heads_q * double(c.problem.n_q) * double(c.problem.n_k);
      oracle_s += r.verdict.timing.reference_s + r.verdict.timing.budget_s + r.verdict.timing.verdict_s;
      if (v.max_ratio > worst) {
        worst = v.max_ratio;
        worst_case = fmt::format("case {}: {}", idx, c.describe());
      }
      if (v.violations) {
        ++with_findings;
        violations += v.violations;
        std::fprintf(stderr, "flashcheck fuzz: FINDING in large case %llu (%s): %zu element(s) beyond the error budget (%s)%s\n  reproduce: %s\n",
                     static_cast<unsigned long long>(idx), c.describe().c_str(), v.violations, r.basis.describe().c_str(),
                     worst_text(v).c_str(), reproduce.c_str());
      }
    } catch (const SubjectRefused&) {
      ++declined;
    } catch (const SubjectSticky& e) {
      ++with_findings, ++failures;
      sticky = true;
      std::fprintf(stderr, "flashcheck fuzz: FINDING in large case %llu (%s): %s; the process is unusable, the campaign "
                   "stops\n  reproduce: %s\n", static_cast<unsigned long long>(idx), c.describe().c_str(), e.what(), reproduce.c_str());
      break;
    } catch (const SubjectOutOfMemory& e) {
      ++declined;  // a resource limit of this machine, not a verdict on the subject
      std::fprintf(stderr, "flashcheck fuzz: large case %llu does not fit: %s\n", static_cast<unsigned long long>(idx), e.what());
    } catch (const SubjectError& e) {
      ++with_findings, ++failures;
      std::fprintf(stderr, "flashcheck fuzz: FINDING in large case %llu (%s): the subject failed: %s\n  reproduce: %s\n",
                   static_cast<unsigned long long>(idx), c.describe().c_str(), e.what(), reproduce.c_str());
    } catch (const std::exception& e) {  // the inputs, the device or the oracle: as the fuzzer counts it
      ++with_findings, ++oracle_errors;
      std::fprintf(stderr, "flashcheck fuzz: FINDING in large case %llu (%s): the oracle failed (inputs, device or "
                   "judgement): %s\n  reproduce: %s\n", static_cast<unsigned long long>(idx), c.describe().c_str(),
                   e.what(), reproduce.c_str());
    }
    if (!o.quiet && elapsed() - last_progress >= o.period) {
      last_progress = elapsed();
      std::fprintf(stderr, "[%6.0fs/%.0fs] %llu cases, %llu judged, %.3g scores, worst error/bound %.3g, %llu violation(s)\n",
                   last_progress, o.seconds, static_cast<unsigned long long>(cases), static_cast<unsigned long long>(judged),
                   scores, worst, static_cast<unsigned long long>(violations));
    }
  }
  std::printf("flashcheck fuzz summary: subject %s (%s), large shapes on the device, seed %llu\n", o.subject.c_str(),
              caps.name.c_str(), static_cast<unsigned long long>(o.seed));
  std::printf("  time               %.1f s%s; oracle %.1f s\n", elapsed(), interrupted() ? " (interrupted)" : "", oracle_s);
  std::printf("  cases              %llu, %llu judged, %llu declined\n", static_cast<unsigned long long>(cases),
              static_cast<unsigned long long>(judged), static_cast<unsigned long long>(declined));
  std::printf("  oracle             gpu (%llu judgements)\n", static_cast<unsigned long long>(judged));
  std::printf("  elements checked   %llu O elements (%.3g scores)\n", static_cast<unsigned long long>(elements), scores);
  std::printf("  worst error/bound  %.4g%s\n", worst, worst_case.empty() ? "" : (" (" + worst_case + ")").c_str());
  std::printf("  violations         %llu in %llu case(s), %llu subject failure(s)%s, %llu oracle error(s)\n",
              static_cast<unsigned long long>(violations), static_cast<unsigned long long>(with_findings),
              static_cast<unsigned long long>(failures), sticky ? ", the last one sticky" : "",
              static_cast<unsigned long long>(oracle_errors));
  std::printf("  result             %s\n", with_findings ? "VIOLATIONS" : "clean");
  if (with_findings) return 1;
  if (interrupted()) return 130;
  if (cases && declined == cases) {
    std::fprintf(stderr, "flashcheck fuzz: the subject declined every large case: nothing was checked\n");
    return 2;
  }
  return 0;
}

#else

int run_large_campaign(const LargeCampaign&) {
  throw UsageError("--large makes and judges its cases on the device: this flashcheck was built without CUDA");
}

#endif

}  // namespace fc::report
