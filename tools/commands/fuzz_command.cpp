// flashcheck fuzz: a time-boxed fuzz campaign against any subject (the GPU driver of docs/fuzzing.md),
// and the reproducer explainer.
//
//   flashcheck fuzz [--subject cuda] [--seconds 600] [--seed N] [--limits cpu|gpu] [--out DIR] [--jobs N]
//   flashcheck fuzz --explain FILE [--subject NAME] [--limits cpu|gpu] [--run]
//
// Cases come from random bytes decoded by properties/fuzz_decode.h (the libFuzzer target's
// decoder): lengths biased to the subject's tile grid and to the bug reports' seqlens, hostile values
// (raw bit patterns with NaN and subnormals, huge and tiny exponents, injected NaN) and the isolation
// probe (NaN / +-inf in one element must not change any output that does not depend on it). Every case
// is checked against the float64 reference (with its certified bound) and the error budget. The CPU
// side (decoding, reference, budget) runs on --jobs threads; the subject runs one case at a time.
// A finding writes <out>/<id>.bin (the reproducer: header line + bytes) and <id>.txt (the readable case,
// its findings and a ready-to-paste regression test). Exit 0: no violation; 1: violations; 2: usage
// (or no such subject / no GPU); 130: interrupted (Ctrl-C, SIGTERM) without violations, after the summary.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "properties/fuzz_check.h"
#include "properties/fuzz_decode.h"
#include "properties/fuzz_reproduce.h"
#include "properties/oracle.h"
#include "tools/command_registry.h"
#include "tools/commands/fuzz_large.h"
#include "tools/report/atomic_file.h"
#include "tools/report/interrupt.h"
#include "tools/report/oracle_option.h"
#include "tools/report/reproducer.h"
#include "tools/report/subject_choice.h"

namespace {

struct FuzzOptions {
  std::string subject = "emulation";
  double seconds = 60;
  uint64_t max_cases = 0;  // 0 = until the time is up
  uint64_t seed = 1;
  std::string limits;      // empty: gpu for cuda / plugin subjects, cpu for the emulation
  std::string out = "fuzz-findings";
  int jobs = 0;            // 0 = hardware threads, at most 16
  double period = 10;
  size_t max_reproducers = 50;
  std::string explain;
  bool run = false;
  bool quiet = false;
  bool no_score_guard = false, no_output_headroom = false;
  fc::report::Isolation isolation{"auto", 300, true};
  std::string oracle;
  bool large = false;        // the large-shape mode (tools/commands/fuzz_large.h)
  int64_t large_case = -1;   // with --large: that case alone
};

// The limits by name, with the domain guards as the options (or the reproducer) say.
fc::fuzz::FuzzLimits limits_with_guards(const std::string& name, bool score_guard, bool output_headroom) {
  const auto lim = fc::fuzz::FuzzLimits::by_name(name);
  if (!lim) throw std::invalid_argument("unknown limits '" + name + "' (cpu or gpu)");
  fc::fuzz::FuzzLimits l = *lim;
  l.score_guard = score_guard;
  l.output_headroom = output_headroom;
  return l;
}

// The subject behind a lock unless it declares that its runs may overlap (Capabilities::concurrent_runs:
// the emulation, but not with a bug that keeps state between runs): one case on the device at a time.
class SerialSubject : public fc::Subject {
 public:
  SerialSubject(std::unique_ptr<fc::Subject> s, bool serial) : inner_(std::move(s)), serial_(serial) {}
  fc::Capabilities capabilities() const override { return caps_ ? *caps_ : inner_->capabilities(); }
  fc::SubjectOutput run(const fc::Problem& p, const fc::AttentionInputs& in, const fc::RunOptions& o) override {
    if (!serial_) return inner_->run(p, in, o);
    std::lock_guard<std::mutex> lock(mutex_);
    return inner_->run(p, in, o);
  }
  void freeze_caps() { caps_ = inner_->capabilities(); }

 private:
  std::unique_ptr<fc::Subject> inner_;
  bool serial_;
  std::optional<fc::Capabilities> caps_;
  std::mutex mutex_;
};

std::string default_limits(const std::string& subject) {
  return subject.rfind("emulation", 0) == 0 ? "cpu" : "gpu";
}

size_t input_elements(const fc::fuzz::FuzzCase& c) { return c.inputs.q.size() + c.inputs.k.size() + c.inputs.v.size(); }

// A regression test for the reproducer: literal values for small cases, the committed reproducer file
// for large ones.
std::string regression_test(const fc::fuzz::FuzzCase& c, const fc::fuzz::Reproducer& r, const std::string& name,
                            const std::string& subject) {
  (void)r;
  if (input_elements(c) <= 20000) return fc::fuzz::to_regression_test(c, name, subject);
  return fmt::format(
      "// Regression test from a fuzz reproducer too large for literals: copy the reproducer to\n"
      "// tests/fuzz/reproducers/{0}.bin. The case: {1}\n"
      "TEST(FuzzRegression, {0}) {{\n"
      "  const auto r = fc::fuzz::read_reproducer(FLASHCHECK_SOURCE_DIR \"/tests/fuzz/reproducers/{0}.bin\");\n"
      "  auto lim = *fc::fuzz::FuzzLimits::by_name(r.limits);\n"
      "  lim.score_guard = r.score_guard;\n"
      "  lim.output_headroom = r.output_headroom;\n"
      "  const auto c = fc::fuzz::decode_case(r.bytes, *r.caps, lim);\n"
      "  auto subject = fc::make_subject(\"{2}\");\n"
      "  const fc::fuzz::CaseVerdict v = fc::fuzz::check_case(*subject, c);\n"
      "  std::string findings;\n"
      "  for (const auto& f : v.findings) findings += f + \"\\n\";\n"
      "  EXPECT_TRUE(v.clean()) << findings;\n"
      "}}\n",
      name, c.problem.describe(), subject);
}

std::string test_name_from(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string(), out;
  for (char ch : stem) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "Case_" + out;
  return out;
}

int run_explain(const FuzzOptions& o, bool subject_given, bool limits_given) {
  fc::fuzz::Reproducer r = fc::fuzz::read_reproducer(o.explain);
  if (subject_given) r.subject = o.subject;
  if (limits_given) r.limits = o.limits;
  if (o.no_score_guard) r.score_guard = false;
  if (o.no_output_headroom) r.output_headroom = false;
  const fc::fuzz::FuzzLimits lim = limits_with_guards(r.limits, r.score_guard, r.output_headroom);
  std::unique_ptr<fc::Subject> subject;
  fc::Capabilities caps;
  if (r.caps && !o.run) {
    caps = *r.caps;
  } else {
    subject = fc::report::open_subject(r.subject, o.isolation);
    caps = subject->capabilities();
    if (r.caps && fc::fuzz::caps_to_line(*r.caps) != fc::fuzz::caps_to_line(caps))
      std::cerr << "flashcheck fuzz: note: the subject's capabilities differ from the reproducer's; decoding with the reproducer's\n";
    if (r.caps) caps = *r.caps;
  }
  const fc::fuzz::FuzzCase c = fc::fuzz::decode_case(r.bytes, caps, lim);
  std::cout << fmt::format("reproducer {} ({} bytes; subject {}, limits {})\n", o.explain, r.bytes.size(), r.subject, r.limits)
            << fc::fuzz::describe(c, 4096) << "\n";
  int code = 0;
  if (o.run) {
    const fc::fuzz::CaseVerdict v = fc::fuzz::check_case(*subject, c, 32);
    std::cout << fmt::format("verdict on {}: {} ({} O elements checked, worst error/bound {:.3g})\n", r.subject,
                             v.skipped ? "skipped: " + v.skip_reason : v.clean() ? "clean" : "VIOLATIONS",
                             v.budget.elements, v.budget.max_ratio);
    for (const auto& f : v.findings) std::cout << "  - " << f << "\n";
    code = v.clean() ? 0 : 1;
  }
  std::cout << "\n---- regression test (paste into tests/fuzz/regression_test.cpp) ----\n"
            << regression_test(c, r, test_name_from(o.explain), r.subject);
  return code;
}

struct Totals {
  uint64_t cases = 0, skipped = 0, with_findings = 0, oracle_errors = 0, probes = 0;
  uint64_t elements = 0, violations = 0, budget_violations = 0, semantic = 0, isolation = 0, subject_failures = 0, budget_defects = 0;
  uint64_t crashes = 0, hangs = 0;
  double worst_ratio = 0;
  std::string worst_case;
  std::vector<std::string> reproducers;
  uint64_t unwritten = 0;  // reproducers that could not be written (a full disk)
};

int run_campaign(const FuzzOptions& o) {
  const std::string limits_name = o.limits.empty() ? default_limits(o.subject) : o.limits;
  const auto lim = std::optional<fc::fuzz::FuzzLimits>(limits_with_guards(limits_name, !o.no_score_guard, !o.no_output_headroom));
  std::unique_ptr<fc::Subject> opened = fc::report::open_subject(o.subject, o.isolation);
  const bool serial = !opened->capabilities().concurrent_runs;
  SerialSubject subject(std::move(opened), serial);
  subject.freeze_caps();
  const fc::Capabilities caps = subject.capabilities();
  const int jobs = o.jobs > 0 ? o.jobs : std::clamp(int(std::thread::hardware_concurrency()), 1, 16);
  // The reproducer folder is checked before the campaign; when this run created it and wrote nothing
  // into it, it goes again at the end.
  fc::report::StagedFiles out_folder;
  out_folder.create_folder(o.out);
  fc::report::install_interrupt_handler();

  std::cerr << fmt::format("flashcheck fuzz: subject {} ({}), {} limits, {} s, seed {}, {} CPU worker(s); reproducers in {}\n",
                           o.subject, caps.name, limits_name, o.seconds, o.seed, jobs, o.out);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.seconds));
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  Totals t;
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };

  auto record_finding = [&](uint64_t idx, const std::vector<uint8_t>& bytes, const fc::fuzz::FuzzCase* c,
                            const std::vector<std::string>& findings) {
    // (called with the mutex held)
    if (t.reproducers.size() >= o.max_reproducers) return;
    const std::string id = fmt::format("fuzz-{}-{}", o.seed, idx);
    const std::string bin = (std::filesystem::path(o.out) / (id + ".bin")).string();
    fc::fuzz::Reproducer r;
    r.subject = o.subject;
    r.limits = limits_name;
    r.score_guard = lim->score_guard;
    r.output_headroom = lim->output_headroom;
    r.caps = caps;
    r.bytes = bytes;
    const std::string reproduce = fc::report::render_command(fc::report::FuzzReproducer{
        std::filesystem::absolute(bin).lexically_normal().string(), o.subject, limits_name, r.score_guard,
        r.output_headroom});
    std::string txt = "flashcheck fuzz finding " + id + " (subject " + o.subject + ")\n";
    for (const auto& f : findings) txt += "  - " + f + "\n";
    if (c) txt += "\n" + fc::fuzz::describe(*c, 512) + "\n" + regression_test(*c, r, "Fuzz_" + std::to_string(o.seed) + "_" + std::to_string(idx), o.subject);
    txt += "\nreproduce: " + reproduce + "\n";
    // The .bin and its .txt appear together or not at all.
    fc::report::StagedFiles files;
    try {
      files.stage(bin, fc::fuzz::reproducer_bytes(r));
      files.stage(std::filesystem::path(o.out) / (id + ".txt"), txt);
      files.commit();
    } catch (const fc::report::OutputError& e) {
      ++t.unwritten;
      std::cerr << fmt::format("flashcheck fuzz: FINDING in case {}: {}; its reproducer could not be written ({}), "
                               "nothing of it was kept\n", idx, findings.empty() ? "" : findings.front(), e.what());
      return;
    }
    t.reproducers.push_back(bin);
    std::cerr << fmt::format("flashcheck fuzz: FINDING in case {}: {}\n  reproduce: {}\n", idx,
                             findings.empty() ? "" : findings.front(), reproduce);
  };

  auto worker = [&] {
    while (!stop.load()) {
      if (clock::now() >= deadline || fc::report::interrupted()) break;
      const uint64_t idx = next.fetch_add(1);
      if (o.max_cases && idx >= o.max_cases) break;
      fc::fuzz::CaseGenerator gen(fc::fuzz::case_seed(o.seed, idx));
      const std::vector<uint8_t> bytes = gen.next_bytes();
      std::optional<fc::fuzz::FuzzCase> c;
      fc::fuzz::CaseVerdict v;
      std::string oracle_error;
      try {
        c = fc::fuzz::decode_case(bytes, caps, *lim);
        v = fc::fuzz::check_case(subject, *c);
      } catch (const std::exception& e) {
        oracle_error = std::string("the oracle failed (decoder, reference or budget): ") + e.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      ++t.cases;
      if (!oracle_error.empty()) {
        ++t.oracle_errors;
        ++t.with_findings;
        ++t.violations;
        record_finding(idx, bytes, c ? &*c : nullptr, {oracle_error});
        continue;
      }
      if (v.skipped) {
        ++t.skipped;
        continue;
      }
      t.probes += c->poison.tensor != 0;
      t.elements += v.budget.elements;
      if (v.budget.max_ratio > t.worst_ratio) {
        t.worst_ratio = v.budget.max_ratio;
        t.worst_case = fmt::format("case {}: {}", idx, c->problem.describe());
      }
      if (!v.clean()) {
        ++t.with_findings;
        t.violations += v.total_violations();
        t.budget_violations += v.budget.violations;
        t.semantic += v.semantic_violations;
        t.isolation += v.isolation_violations;
        t.budget_defects += v.budget_defects;
        t.subject_failures += v.subject_failed;
        t.crashes += v.failure == "crashed";
        t.hangs += v.failure == "timeout";
        record_finding(idx, bytes, &*c, v.findings);
      }
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < jobs; ++i) threads.emplace_back(worker);
  double last = 0;
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    bool done = clock::now() >= deadline || fc::report::interrupted() || (o.max_cases && next.load() >= o.max_cases);
    if (!o.quiet && (elapsed() - last >= o.period || done)) {
      last = elapsed();
      std::lock_guard<std::mutex> lock(mutex);
      std::cerr << fmt::format("[{:6.0f}s/{:.0f}s] {} cases ({:.1f}/s), {} skipped, {:.3g} O elements, worst error/bound {:.3g}, {} violation(s)\n",
                               last, o.seconds, t.cases, t.cases / std::max(last, 1e-9), t.skipped, double(t.elements),
                               t.worst_ratio, t.violations);
    }
    if (done) break;
  }
  stop = true;
  for (auto& th : threads) th.join();

  const double secs = elapsed();
  std::cout << fmt::format("flashcheck fuzz summary: subject {} ({}), {} limits, seed {}\n", o.subject, caps.name, limits_name, o.seed)
            << fmt::format("  time               {:.1f} s{}\n", secs, fc::report::interrupted() ? " (interrupted)" : "")
            << fmt::format("  cases              {} ({:.1f}/s), {} checked, {} skipped as unsupported\n", t.cases,
                           t.cases / std::max(secs, 1e-9), t.cases - t.skipped - t.oracle_errors, t.skipped)
            << fmt::format("  oracle             {}\n", fc::describe_oracle_use())
            << fmt::format("  isolation probes   {}\n", t.probes)
            << fmt::format("  elements checked   {} O elements (finite reference)\n", t.elements)
            << fmt::format("  worst error/bound  {:.4g}{}\n", t.worst_ratio, t.worst_case.empty() ? "" : " (" + t.worst_case + ")")
            << fmt::format("  violations         {} in {} case(s): {} budget, {} semantic (NaN/inf/masked rows), {} isolation, "
                           "{} subject failures ({} crashes, {} hangs), {} NaN/negative budget bounds, {} oracle errors\n",
                           t.violations, t.with_findings, t.budget_violations, t.semantic, t.isolation, t.subject_failures,
                           t.crashes, t.hangs, t.budget_defects, t.oracle_errors);
  for (const auto& r : t.reproducers) std::cout << "  reproducer         " << r << "\n";
  if (t.unwritten) std::cout << "  NOT WRITTEN        " << t.unwritten << " reproducer(s): the output folder is full or unwritable\n";
  if (t.reproducers.empty()) out_folder.discard();
  else out_folder.commit();
  std::cout << "  result             " << (t.with_findings ? "VIOLATIONS" : "clean")
            << (fc::report::interrupted() ? " (interrupted)" : "") << "\n";
  if (t.with_findings) return 1;
  if (fc::report::interrupted()) return 130;
  if (t.cases && t.skipped == t.cases) {
    std::cerr << "flashcheck fuzz: the subject declined every case: nothing was checked\n";
    return 2;
  }
  return 0;
}

void add_fuzz_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<FuzzOptions>();
  CLI::App* cmd = app.add_subcommand("fuzz", "Time-boxed fuzz campaign (boundary-biased shapes, hostile values) against a subject; "
                                             "or --explain a reproducer");
  auto* subject_opt = cmd->add_option("--subject", opts->subject, "subject under test (emulation, cuda, plugin:<path>, ...)");
  auto* plugin_opt = cmd->add_option_function<std::string>(
                             "--plugin", [opts](const std::string& path) { opts->subject = "plugin:" + path; },
                             "kernel plugin behind include/flashcheck/plugin.h (= --subject plugin:<path>)")
                         ->check(CLI::ExistingFile)
                         ->excludes(subject_opt);
  cmd->add_option("--seconds", opts->seconds, "campaign length in seconds")->check(CLI::PositiveNumber);
  cmd->add_option("--max-cases", opts->max_cases, "stop after this many cases (0: until the time is up)");
  cmd->add_option("--seed", opts->seed, "campaign seed (case i is reproducible from seed and i alone)");
  auto* limits_opt = cmd->add_option("--limits", opts->limits, "problem size limits: cpu (small) or gpu (up to 4224 x 65537); "
                                                               "default gpu except for the emulation")
                         ->check(CLI::IsMember({"cpu", "gpu"}));
  cmd->add_option("--out", opts->out, "directory for reproducers (.bin) and their readable cases (.txt)");
  cmd->add_option("--jobs", opts->jobs, "CPU worker threads for decoding, reference and budget (0: all, at most 16)");
  cmd->add_option("--progress-period", opts->period, "seconds between progress lines");
  cmd->add_option("--max-reproducers", opts->max_reproducers, "write at most this many reproducers");
  cmd->add_flag("--quiet", opts->quiet, "no progress lines");
  cmd->add_flag("--no-score-guard", opts->no_score_guard,
                "let scores exceed 2^20 (beyond the fp32 exponent argument's accuracy; docs/fuzzing.md)");
  cmd->add_flag("--no-output-headroom", opts->no_output_headroom,
                "let |V| reach the output format's max_finite (the open overflow question; docs/fuzzing.md)");
  cmd->add_option("--explain", opts->explain, "print a reproducer (libFuzzer crash file or .bin) as a readable case and a regression test");
  cmd->add_flag("--run", opts->run, "with --explain: also run the case on the subject and print the verdict");
  fc::report::add_isolation_flags(cmd, opts->isolation, "a worker for plugins and our CUDA subjects");
  fc::report::add_oracle_flag(cmd, opts->oracle);
  auto* large_opt = cmd->add_flag("--large", opts->large,
                                  "the large-shape mode: production-size cases (N up to 64k, B*Hq up to 64) made and judged "
                                  "on the device, the subject (cuda or a plugin) run on device buffers in this process");
  cmd->add_option("--case", opts->large_case, "with --large: run that case alone (what a finding's reproducer says)")
      ->check(CLI::NonNegativeNumber)
      ->needs(large_opt);
  cmd->callback([opts, &exit_code, subject_opt, plugin_opt, limits_opt] {
    exit_code = fc::cli::run_command("fuzz", [&] {
      if (opts->large) {
        if (!opts->explain.empty()) throw fc::report::UsageError("--large and --explain do not go together");
        return fc::report::run_large_campaign({opts->subject == "emulation" && subject_opt->count() + plugin_opt->count() == 0
                                                   ? "cuda" : opts->subject,
                                               opts->seed, opts->seconds, opts->max_cases, opts->large_case,
                                               opts->period, opts->quiet});
      }
      fc::report::choose_oracle(opts->oracle);
      if (!opts->explain.empty())
        return run_explain(*opts, subject_opt->count() + plugin_opt->count() > 0, limits_opt->count() > 0);
      return run_campaign(*opts);
    });
  });
}

}  // namespace

FC_REGISTER_COMMAND(fuzz, add_fuzz_command);
