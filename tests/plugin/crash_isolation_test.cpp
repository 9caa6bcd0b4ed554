// Crash isolation: a plugin that segfaults on one case and one that hangs on one case are each a finding
// (status crashed / timeout, with the command that reproduces it) while every other case of the
// campaign runs; a sticky error costs its worker, not the campaign. Through the flashcheck executable,
// the way a user meets it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <thread>
#include <map>
#include <sstream>

#include "cli_support.h"

namespace fc::cli_test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The report of one campaign over both broken plugins: N = 8, 13, 32 per subject, n_q = 13 is the
// case each one fails on.
TEST(CrashIsolation, ASegfaultAndAHangAreFindingsAndTheCampaignCompletes) {
  TempDir dir("crash-isolation");
  const auto start = std::chrono::steady_clock::now();
  const Result r = run_flashcheck({"report", "--plugin", FC_BROKEN_SEGV_ON_CASE, "--plugin", FC_BROKEN_HANG_ON_CASE,
                                   "--recipes", "fp32", "--n", "8,13,32", "--d", "16", "--masks", "none",
                                   "--distributions", "normal", "--cases", "0", "--case-timeout", "3", "--no-plots",
                                   "--quiet", "--out", dir.path.string()});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;  // findings: a failed report, not a dead process (139)
  EXPECT_LT(seconds, 60.0) << "the hang was not cut off by --case-timeout";
  const json j = json::parse(read_text(dir.path / "report.json"));
  std::map<std::string, int> by_status;
  for (const json& c : j["cases"]) {
    const std::string subject = c["subject"], status = c["status"];
    ++by_status[status];
    if (c["n_q"] == 13) {
      const bool segv = subject.find("segv_on_case") != std::string::npos;
      EXPECT_EQ(status, segv ? "crashed" : "timeout") << c.dump();
      EXPECT_NE(c["message"].get<std::string>().find(segv ? "signal 11" : "did not finish within 3 s"), std::string::npos)
          << c["message"];
    } else {
      EXPECT_EQ(status, "ok") << c.dump();
      EXPECT_EQ(c["violations"], 0) << c.dump();
    }
  }
  EXPECT_EQ(by_status["ok"], 4);
  EXPECT_EQ(by_status["crashed"], 1);
  EXPECT_EQ(by_status["timeout"], 1);
  // Both findings are listed with the command that reproduces them.
  const std::string md = read_text(dir.path / "report.md");
  EXPECT_NE(md.find("| crashed |"), std::string::npos) << md;
  EXPECT_NE(md.find("| timeout |"), std::string::npos) << md;
  const size_t at = md.find("`flashcheck check --subject plugin:" + std::string(FC_BROKEN_SEGV_ON_CASE));
  ASSERT_NE(at, std::string::npos) << md;

  // The printed reproducer reproduces: the crash again, as a finding of `check` (exit 1).
  const std::string line = md.substr(at + 1, md.find('`', at + 1) - at - 1);
  std::vector<std::string> args;
  std::istringstream words(line.substr(std::string("flashcheck ").size()));
  for (std::string w; words >> w;) args.push_back(w);
  const Result again = run_flashcheck(args);
  EXPECT_EQ(again.exit_code, 1) << line << "\n" << again.output;
  EXPECT_NE(again.output.find("status    crashed"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("reproduce " + line), std::string::npos) << again.output;
}

// A worker started by a process whose standard input is closed: the socket pair then takes fd 0 and fd 3,
// the worker's end is already fd 3, and it must still reach the worker (a descriptor opened close-on-exec
// stays so when it is "moved" onto itself).
TEST(CrashIsolation, AWorkerStartsWithStandardInputClosed) {
  const Result r = run_flashcheck({"check", "--plugin", FC_BROKEN_SEGV_ON_CASE, "--recipe", "fp32", "--n", "8", "--d",
                                   "16", "--isolation", "worker"},
                                  "sh -c 'exec 0<&-; exec \"$0\" \"$@\"'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
}

// The fuzzer on the segfaulting plugin: the crash is a finding with a reproducer, and the campaign
// runs all its cases.
TEST(CrashIsolation, FuzzingGoesOnPastACrash) {
  TempDir dir("crash-fuzz");
  const Result r = run_flashcheck({"fuzz", "--plugin", FC_BROKEN_SEGV_ON_CASE, "--limits", "cpu", "--max-cases", "3000",
                                   "--seconds", "600", "--seed", "3", "--jobs", "2", "--quiet", "--out",
                                   dir.path.string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cases              3000 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("crashes"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("(0 crashes"), std::string::npos) << "no crash was found:\n" << r.output;
  EXPECT_NE(r.output.find("killed by signal 11"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reproduce: flashcheck fuzz --explain"), std::string::npos) << r.output;
}

// A sticky error (an illegal address on a GPU) leaves the process unusable: in a worker, the next case
// gets a fresh process and passes; in-process, every later case fails.
TEST(CrashIsolation, AStickyErrorCostsItsWorkerNotTheCampaign) {
  for (const std::string isolation : {"worker", "in-process"}) {
    TempDir dir("sticky-" + isolation);
    // N = 13 is the larger case, so it runs first (--jobs 1) and N = 8 comes after it.
    const Result r = run_flashcheck({"report", "--plugin", FC_BROKEN_STICKY_ON_CASE, "--recipes", "fp32", "--n",
                                     "8,13", "--d", "16", "--masks", "none", "--distributions", "normal", "--cases",
                                     "0", "--jobs", "1", "--isolation", isolation, "--no-plots", "--quiet", "--out",
                                     dir.path.string()});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const json j = json::parse(read_text(dir.path / "report.json"));
    ASSERT_EQ(j["cases"].size(), 2u);
    for (const json& c : j["cases"]) {
      if (c["n_q"] == 13) {
        EXPECT_EQ(c["status"], "error") << c.dump();
        EXPECT_NE(c["message"].get<std::string>().find("FC_ERR_STICKY"), std::string::npos) << c.dump();
      } else if (isolation == "worker") {
        EXPECT_EQ(c["status"], "ok") << c.dump();  // a fresh worker
      } else {
        EXPECT_EQ(c["status"], "error") << c.dump();  // the poisoned process refuses to run it
        EXPECT_NE(c["message"].get<std::string>().find("sticky error earlier"), std::string::npos) << c.dump();
      }
    }
  }
}


// Ctrl-C reaches the whole process group, the worker included, while it is busy in the subject: the
// worker ignores it and the command decides (the case in hand runs to its end, here the time limit),
// so an interrupt never reads as a crash of the kernel.
TEST(CrashIsolation, AnInterruptIsNotACrash) {
  TempDir dir("crash-interrupt");
  const std::string out = (dir.path / "rep").string();
  const int pid = start_in_own_group({"report", "--plugin", FC_BROKEN_HANG_ON_CASE, "--recipes", "fp32", "--n", "8,13",
                                      "--d", "16", "--masks", "none", "--distributions", "normal", "--cases", "0",
                                      "--jobs", "1", "--case-timeout", "4", "--no-plots", "--out", out});
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the N = 13 case runs first, and hangs
  EXPECT_EQ(interrupt_group(pid), 130);
  const json j = json::parse(read_text(fs::path(out) / "report.json"));
  ASSERT_EQ(j["cases"].size(), 1u);
  EXPECT_EQ(j["cases"][0]["status"], "timeout") << j["cases"][0].dump();
}

}  // namespace
}  // namespace fc::cli_test
