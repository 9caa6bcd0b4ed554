// The command line's promises: exit code 2 with a message naming the problem for bad flags, impossible
// shapes, unreadable input and unwritable folders; 1 for violations; 0 within budget; and Ctrl-C
// leaving a consistent report marked partial (exit 130), with no half-written file.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace fc::cli_test {
namespace {

namespace fs = std::filesystem;

// Exit code 2, and the output names what was wrong.
void expect_usage_error(const std::vector<std::string>& args, const std::vector<std::string>& mentions) {
  const Result r = run_flashcheck(args);
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  EXPECT_EQ(r.exit_code, 2) << "flashcheck " << joined << "\n" << r.output;
  for (const auto& m : mentions) EXPECT_NE(r.output.find(m), std::string::npos) << "flashcheck " << joined << ": output does not name '" << m << "':\n" << r.output;
}

TEST(CliUsage, VersionAndHelpExitZero) {
  Result v = run_flashcheck({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.output.find("flashcheck "), std::string::npos) << v.output;
  EXPECT_NE(v.output.find("commit"), std::string::npos) << v.output;
  for (const char* cmd : {"report", "check"}) {
    Result h = run_flashcheck({cmd, "--help"});
    EXPECT_EQ(h.exit_code, 0) << cmd;
    EXPECT_NE(h.output.find("Usage"), std::string::npos) << h.output;
  }
}

TEST(CliUsage, MissingOrUnknownSubcommandIsUsageError) {
  expect_usage_error({}, {"subcommand"});
  expect_usage_error({"frobnicate"}, {"frobnicate"});
}

TEST(CliUsage, UnknownFlagsAreUsageErrors) {
  expect_usage_error({"report", "--bogus"}, {"--bogus"});
  expect_usage_error({"check", "--frobs", "3"}, {"--frobs"});
  expect_usage_error({"report", "--progress", "sometimes"}, {"--progress"});
}

TEST(CliUsage, ImpossibleShapesAreUsageErrors) {
  expect_usage_error({"report", "--n", "0"}, {"--n", "'0'", "impossible"});
  expect_usage_error({"report", "--n", "64,abc"}, {"--n", "'abc'"});
  expect_usage_error({"report", "--d=-3"}, {"--d", "'-3'"});
  expect_usage_error({"report", "--heads-q", "3", "--heads-kv", "2"}, {"--heads-kv", "divide"});
  expect_usage_error({"report", "--batch", "0"}, {"--batch"});
  expect_usage_error({"report", "--tiles", "0x16"}, {"--tiles", "0x16"});
  expect_usage_error({"report", "--cases=-1"}, {"--cases"});
  expect_usage_error({"check", "--n", "0"}, {"n_q"});
  expect_usage_error({"check", "--heads-q", "3", "--heads-kv", "2"}, {"heads_kv"});
  expect_usage_error({"check", "--d", "0"}, {"d"});
}

TEST(CliUsage, UnknownNamesAreUsageErrors) {
  expect_usage_error({"report", "--recipes", "fp17"}, {"--recipes", "fp17", "fp16"});
  expect_usage_error({"report", "--distributions", "uniform"}, {"--distributions", "uniform", "fa3_outliers"});
  expect_usage_error({"report", "--masks", "diagonal"}, {"--masks", "diagonal"});
  expect_usage_error({"report", "--subjects", "nonesuch"}, {"nonesuch"});
  expect_usage_error({"check", "--recipe", "fp17"}, {"fp17"});
  expect_usage_error({"check", "--subject", "nonesuch"}, {"nonesuch"});
  expect_usage_error({"check", "--tile", "16xq"}, {"--tile", "q"});
}

TEST(CliUsage, UnreadableOrInvalidInputIsUsageError) {
  TempDir dir("input");
  expect_usage_error({"report", "--from", (dir.path / "missing.json").string()}, {"missing.json"});
  std::ofstream(dir.path / "garbage.json") << "{ not json";
  expect_usage_error({"report", "--from", (dir.path / "garbage.json").string()}, {"garbage.json", "JSON"});
  std::ofstream(dir.path / "other.json") << R"({"hello": 1})";
  expect_usage_error({"report", "--from", (dir.path / "other.json").string()}, {"not a flashcheck report"});
  std::ofstream(dir.path / "problem.json") << R"({"n_q": 16, "d": 8, "colour": "blue"})";
  expect_usage_error({"check", "--problem", (dir.path / "problem.json").string()}, {"colour"});
  std::ofstream(dir.path / "typed.json") << R"({"n_q": "sixteen"})";
  expect_usage_error({"check", "--problem", (dir.path / "typed.json").string()}, {"n_q"});
  // --from renders an existing report; it cannot be mixed with campaign flags.
  expect_usage_error({"report", "--from", (dir.path / "garbage.json").string(), "--n", "64"}, {"--from", "--n"});
}

TEST(CliUsage, UnwritableOutputFolderIsUsageErrorBeforeAnyWork) {
  TempDir dir("unwritable");
  std::ofstream(dir.path / "a-file") << "x";
  const std::string out = (dir.path / "a-file" / "report").string();
  const auto start = std::chrono::steady_clock::now();
  expect_usage_error({"report", "--recipes", "fp16", "--n", "513", "--d", "128", "--out", out}, {out});
  // The folder is checked before the campaign runs, not after it.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
  expect_usage_error({"report", "--recipes", "fp16", "--out", (dir.path / "a-file").string()}, {"a-file", "not a folder"});
}

// --oracle: every command that judges takes it; an unknown word is a usage error, "gpu" where there is
// no GPU oracle too (with the reason), and the output says which oracle judged.
TEST(CliUsage, OracleFlagIsCheckedAndReported) {
  for (const char* cmd : {"check", "report", "fuzz"})
    expect_usage_error({cmd, "--oracle", "fpga"}, {"--oracle", "fpga", "cpu, gpu, auto"});
  const Result help = run_flashcheck({"compare", "--help"});  // compare's other flags are required
  EXPECT_NE(help.output.find("--oracle"), std::string::npos) << help.output;
  const Result cpu = run_flashcheck({"check", "--recipe", "fp16", "--n", "32", "--d", "16", "--oracle", "cpu"});
  EXPECT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_NE(cpu.output.find("oracle    cpu (1 judgement)"), std::string::npos) << cpu.output;
  const Result gpu = run_flashcheck({"check", "--recipe", "fp16", "--n", "32", "--d", "16", "--oracle", "gpu"});
  if (gpu.exit_code == 2) {
    EXPECT_NE(gpu.output.find("no GPU oracle here"), std::string::npos) << gpu.output;
  } else {
    EXPECT_EQ(gpu.exit_code, 0) << gpu.output;
    EXPECT_NE(gpu.output.find("oracle    gpu (1 judgement)"), std::string::npos) << gpu.output;
  }
  TempDir dir("oracle");
  const Result rep = run_flashcheck({"report", "--recipes", "fp16", "--n", "32", "--d", "16", "--masks", "none",
                                     "--distributions", "normal", "--cases", "2", "--no-plots", "--quiet", "--out",
                                     (dir.path / "r").string(), "--oracle", "auto"});
  EXPECT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_text(dir.path / "r" / "report.md");
  EXPECT_NE(md.find("| oracle | "), std::string::npos) << md;
  EXPECT_NE(md.find(" judgements) |"), std::string::npos) << md;
}

TEST(CliUsage, CheckWithinBudgetExitsZeroAndPrintsWorstElements) {
  const Result r = run_flashcheck({"check", "--recipe", "bf16", "--n", "40", "--d", "16", "--mask", "causal", "--tile",
                                   "16x8", "--worst", "4"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"PASS", "err/bound", "scaled ulps", "bound", "O["})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
}

#ifdef FC_EXAMPLE_CPU_PLUGIN
// --plugin P means --subject plugin:P in check, report and fuzz; a missing file is a usage error.
TEST(CliUsage, PluginFlagRunsAKernelBehindTheCAbi) {
  const Result r = run_flashcheck({"check", "--plugin", FC_EXAMPLE_CPU_PLUGIN, "--recipe", "fp16", "--n", "33", "--d", "16"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
  const Result f = run_flashcheck({"fuzz", "--plugin", FC_EXAMPLE_CPU_PLUGIN, "--seconds", "2", "--limits", "cpu", "--quiet"});
  EXPECT_EQ(f.exit_code, 0) << f.output;
  TempDir dir("plugin-report");
  const Result rep = run_flashcheck({"report", "--plugin", FC_EXAMPLE_CPU_PLUGIN, "--recipes", "fp16", "--n", "64",
                                     "--d", "32", "--cases", "4", "--no-plots", "--quiet", "--out", dir.path.string()});
  EXPECT_EQ(rep.exit_code, 0) << rep.output;
  expect_usage_error({"check", "--plugin", "/no/such/plugin.so"}, {"--plugin", "/no/such/plugin.so"});
}
#endif

TEST(CliUsage, CheckProblemFile) {
  TempDir dir("problem");
  std::ofstream(dir.path / "p.json") << R"({"recipe": "fp16", "n_q": 20, "n_k": 37, "d": 8, "mask": "causal",
                                           "distribution": "sinks", "seed": 3, "tile": "8x8"})";
  const Result r = run_flashcheck({"check", "--problem", (dir.path / "p.json").string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["n_k"], 37);
  EXPECT_EQ(j["distribution"], "sinks");
  EXPECT_EQ(j["violations"], 0);
}

// --l-from-fp32-p and --two-level reach the subject and the budget (the record says so, and the verdict
// changes); --two-level outside fp8 is refused by name.
TEST(CliUsage, CheckOptionsReachTheSubjectAndTheBudget) {
  // Runs the problem without and with the option; both must pass, the records must name the option as
  // off and on, and the verdict (error/bound) must differ.
  auto expect_option_matters = [](std::vector<std::string> args, const std::string& flag, const char* field) {
    auto record = [](const std::vector<std::string>& a) {
      const Result r = run_flashcheck(a);
      EXPECT_EQ(r.exit_code, 0) << r.output;
      return nlohmann::json::parse(r.output);
    };
    const auto off = record(args);
    args.push_back(flag);
    const auto on = record(args);
    EXPECT_EQ(off[field], false) << flag;
    EXPECT_EQ(on[field], true) << flag;
    EXPECT_NE(off["max_ratio"], on["max_ratio"]) << flag;
  };
  expect_option_matters({"check", "--recipe", "fp8_e4m3", "--n", "512", "--d", "32", "--tile", "16x16", "--json"},
                        "--two-level", "two_level_accum");
  expect_option_matters({"check", "--recipe", "bf16", "--n", "256", "--d", "32", "--json"}, "--l-from-fp32-p",
                        "l_from_fp32_p");
  expect_usage_error({"check", "--recipe", "bf16", "--two-level"}, {"two_level_accum", "fp8"});
}

TEST(CliUsage, ViolationsExitOne) {
  // The emulation without the accumulator rescale is far outside the budget when the running max grows
  // at every tile.
  const Result r = run_flashcheck({"check", "--subject", "emulation+bug:a_not_rescaled", "--recipe", "fp32", "--n",
                                   "96", "--d", "16", "--dist", "increasing_scores", "--tile", "16x16"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL"), std::string::npos) << r.output;

  TempDir dir("violations");
  const Result rep = run_flashcheck({"report", "--subjects", "emulation+bug:a_not_rescaled", "--recipes", "fp32",
                                     "--n", "96", "--d", "16", "--distributions", "increasing_scores", "--tiles",
                                     "16x16", "--masks", "none", "--no-plots", "--out", dir.path.string()});
  EXPECT_EQ(rep.exit_code, 1) << rep.output;
  EXPECT_NE(read_text(dir.path / "report.md").find("**FAIL**"), std::string::npos);
}

// Ctrl-C reaches the whole process group, a plugin's worker process included: it must stop the
// campaign, never read as a crash of the subject.
class CtrlC : public ::testing::TestWithParam<std::string> {};

TEST_P(CtrlC, LeavesAConsistentPartialReport) {
  TempDir dir("interrupt");
  const fs::path out = dir.path / "report";
  // 48 large cases: about a minute of work, interrupted after a few seconds.
  const int pid = start_in_own_group({"report", "--subjects", GetParam(), "--recipes", "fp16", "--n", "513", "--d", "128",
                                      "--cases", "0", "--jobs", "1", "--no-plots", "--out", out.string()});
  ASSERT_GT(pid, 0);
  // Wait until the campaign has started (the folder exists once flags and subjects are checked).
  for (int i = 0; i < 200 && !fs::exists(out); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(interrupt_group(pid), 130);

  const auto j = nlohmann::json::parse(read_text(out / "report.json"));
  EXPECT_TRUE(j["partial"].get<bool>());
  EXPECT_LT(j["cases"].size(), j["planned_cases"].get<size_t>());
  for (const auto& c : j["cases"]) EXPECT_EQ(c["status"], "ok");  // every recorded case is whole
  const std::string md = read_text(out / "report.md");
  EXPECT_NE(md.find("PARTIAL"), std::string::npos);
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
}

#ifdef FC_EXAMPLE_CPU_PLUGIN
INSTANTIATE_TEST_SUITE_P(Subjects, CtrlC, ::testing::Values("emulation", std::string("plugin:") + FC_EXAMPLE_CPU_PLUGIN),
                         [](const auto& info) { return info.index == 0 ? std::string("emulation") : std::string("plugin_in_a_worker"); });
#else
INSTANTIATE_TEST_SUITE_P(Subjects, CtrlC, ::testing::Values("emulation"));
#endif

// A report that cannot be written (a full disk) leaves the folder's earlier report exactly as it was,
// and no temporary file.
TEST(CliUsage, AFailedWriteLeavesTheEarlierReportWhole) {
  TempDir dir("full-disk");
  const std::string out = (dir.path / "rep").string();
  const std::vector<std::string> args = {"report", "--recipes", "fp16", "--n", "40", "--d", "16", "--cases", "2",
                                         "--quiet", "--out", out};
  ASSERT_EQ(run_flashcheck(args).exit_code, 0);
  std::map<std::string, std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    if (e.is_regular_file()) before[e.path().string()] = read_text(e.path());
  ASSERT_TRUE(before.count(out + "/report.md"));
  std::vector<std::string> again = args;
  again.insert(again.end(), {"--seed", "99"});
  const Result r = run_flashcheck(again, "trap '' XFSZ; ulimit -f 8;");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing of this run was written"), std::string::npos) << r.output;
  std::map<std::string, std::string> after;
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    if (e.is_regular_file()) after[e.path().string()] = read_text(e.path());
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace fc::cli_test
