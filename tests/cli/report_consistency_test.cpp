// A report's files must tell the same story. From one small campaign, this test recomputes every
// summary number straight from the case records of report.json (independently of tools/report/
// aggregate.cpp), then checks that
//   - the markdown summary table prints exactly those numbers (same 3-digit formatting),
//   - summary.csv holds them at full precision, and cases.csv has one row per case,
//   - plots/plots.json was written from this very report.json (SHA-256) and lists the values the plot
//     script plotted, which agree with the case records; each PNG exists and is a PNG,
//   - `report --from report.json` re-renders the markdown and CSVs byte for byte,
//   - without the plot script, md/json/csv are still written and the markdown says plots are missing.
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "tools/report/report_writers.h"

namespace fc::cli_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double num(const json& v) {
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    return s == "inf" ? INFINITY : s == "-inf" ? -INFINITY : NAN;
  }
  return v.get<double>();
}

struct Expected {
  uint64_t cases = 0, elements = 0, violations = 0;
  double max_ratio = 0, sum_ratio = 0, max_ulps = 0, sum_ulps = 0, sum_sq = 0, max_abs = 0;
};

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream s(line);
  for (std::string cell; std::getline(s, cell, sep);) {
    const auto a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
  }
  return out;
}

std::string sha256_of(const fs::path& p) {
  std::FILE* pipe = ::popen(("sha256sum '" + p.string() + "'").c_str(), "r");
  char buf[128] = {};
  if (pipe) {
    if (!std::fgets(buf, sizeof buf, pipe)) buf[0] = 0;
    ::pclose(pipe);
  }
  return std::string(buf).substr(0, 64);
}

class ReportConsistency : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("consistency");
    const Result r = run_flashcheck({"report", "--recipes", "fp16,bf16,fp8_e4m3", "--n", "33,64", "--d", "16,32",
                                     "--masks", "none;causal", "--distributions", "normal,fa3_outliers", "--tiles",
                                     "16x16,32x32", "--cases", "6", "--jobs", "2", "--progress", "lines", "--out",
                                     (dir_->path / "r").string()});
    run_output_ = new std::string(r.output);
    exit_code_ = r.exit_code;
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete run_output_;
  }
  static fs::path folder() { return dir_->path / "r"; }
  static json report() { return json::parse(read_text(folder() / "report.json")); }

  static std::map<std::pair<std::string, std::string>, Expected> expected(const json& j) {
    std::map<std::pair<std::string, std::string>, Expected> e;
    for (const auto& c : j["cases"]) {
      if (c["status"] != "ok") continue;
      Expected& x = e[{c["recipe"].get<std::string>(), fc::report::subject_label(c["subject"].get<std::string>())}];
      ++x.cases;
      x.elements += c["elements"].get<uint64_t>();
      x.violations += c["violations"].get<uint64_t>();
      x.max_ratio = std::max(x.max_ratio, num(c["max_ratio"]));
      x.sum_ratio += num(c["sum_ratio"]);
      x.max_ulps = std::max(x.max_ulps, num(c["max_scaled_ulps"]));
      x.sum_ulps += num(c["sum_scaled_ulps"]);
      x.sum_sq += num(c["sum_sq_error"]);
      x.max_abs = std::max(x.max_abs, num(c["max_abs_error"]));
    }
    return e;
  }

  static TempDir* dir_;
  static std::string* run_output_;
  static int exit_code_;
};
TempDir* ReportConsistency::dir_ = nullptr;
std::string* ReportConsistency::run_output_ = nullptr;
int ReportConsistency::exit_code_ = -1;

TEST_F(ReportConsistency, RunsWithinBudgetAndWritesEveryFile) {
  EXPECT_EQ(exit_code_, 0) << *run_output_;
  for (const char* f : {"report.json", "report.md", "summary.csv", "cases.csv"})
    EXPECT_TRUE(fs::exists(folder() / f)) << f;
  const json j = report();
  EXPECT_FALSE(j["partial"].get<bool>());
  EXPECT_EQ(j["cases"].size(), j["planned_cases"].get<size_t>());
  EXPECT_EQ(j["cases"].size(), 18u);  // 6 cases x 3 recipes x 1 subject
  for (const char* k : {"git_commit", "compiler", "gpu", "driver", "command_line"})
    EXPECT_FALSE(j["environment"][k].get<std::string>().empty()) << k;
  EXPECT_EQ(j["campaign"]["seed"].get<uint64_t>(), 20240711u);
  EXPECT_EQ(j["recipes"].size(), 3u);
}

TEST_F(ReportConsistency, MarkdownTableMatchesJson) {
  const auto want = expected(report());
  const std::string md = read_text(folder() / "report.md");
  const auto start = md.find("## Error against the budget");
  ASSERT_NE(start, std::string::npos);
  std::stringstream lines(md.substr(start));
  std::string line;
  size_t rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("| ", 0) != 0 || line.find("---") != std::string::npos || line.find("| recipe") == 0) {
      if (rows && line.empty()) break;
      continue;
    }
    auto cells = split(line, '|');
    cells.erase(cells.begin());  // before the first '|'
    ASSERT_EQ(cells.size(), 11u) << line;
    const auto it = want.find({cells[0], cells[1]});
    ASSERT_NE(it, want.end()) << line;
    const Expected& x = it->second;
    const double n = double(x.elements);
    EXPECT_EQ(cells[2], std::to_string(x.cases)) << line;
    EXPECT_EQ(cells[3], std::to_string(x.elements)) << line;
    EXPECT_EQ(cells[4], std::to_string(x.violations)) << line;
    EXPECT_EQ(cells[5], fc::report::md_number(x.max_ratio)) << line;
    EXPECT_EQ(cells[6], fc::report::md_number(x.sum_ratio / n)) << line;
    EXPECT_EQ(cells[7], fc::report::md_number(x.max_ulps)) << line;
    EXPECT_EQ(cells[8], fc::report::md_number(x.sum_ulps / n)) << line;
    EXPECT_EQ(cells[9], fc::report::md_number(std::sqrt(x.sum_sq / n))) << line;
    EXPECT_EQ(cells[10], fc::report::md_number(x.max_abs)) << line;
    ++rows;
  }
  EXPECT_EQ(rows, want.size());
}

TEST_F(ReportConsistency, CsvMatchesJson) {
  const json j = report();
  const auto want = expected(j);
  std::stringstream csv(read_text(folder() / "summary.csv"));
  std::string line;
  std::getline(csv, line);
  const auto header = split(line, ',');
  auto col = [&](const std::string& name) {
    return size_t(std::find(header.begin(), header.end(), name) - header.begin());
  };
  size_t rows = 0;
  while (std::getline(csv, line) && !line.empty()) {
    const auto cells = split(line, ',');
    const auto it = want.find({cells[col("recipe")], cells[col("subject")]});
    ASSERT_NE(it, want.end()) << line;
    const Expected& x = it->second;
    EXPECT_EQ(std::stoull(cells[col("elements")]), x.elements);
    EXPECT_EQ(std::stoull(cells[col("violations")]), x.violations);
    EXPECT_DOUBLE_EQ(std::stod(cells[col("max_ratio")]), x.max_ratio);
    EXPECT_DOUBLE_EQ(std::stod(cells[col("mean_ratio")]), x.sum_ratio / double(x.elements));
    EXPECT_DOUBLE_EQ(std::stod(cells[col("rmse")]), std::sqrt(x.sum_sq / double(x.elements)));
    ++rows;
  }
  EXPECT_EQ(rows, want.size());
  std::stringstream cases(read_text(folder() / "cases.csv"));
  size_t case_rows = 0;
  while (std::getline(cases, line)) case_rows += !line.empty();
  EXPECT_EQ(case_rows, j["cases"].size() + 1);  // + header
}

TEST_F(ReportConsistency, PlotsWereMadeFromThisJson) {
  const std::string md = read_text(folder() / "report.md");
  if (!fs::exists(folder() / "plots" / "plots.json")) {
    // No matplotlib here: that must be visible in the report, never silent.
    EXPECT_NE(md.find("WARNING: plots not made"), std::string::npos);
    GTEST_SKIP() << "no python3 with matplotlib on this machine; the report says so";
  }
  const json side = json::parse(read_text(folder() / "plots" / "plots.json"));
  EXPECT_EQ(side["source_sha256"].get<std::string>(), sha256_of(folder() / "report.json"));
  for (const char* png : {"ratio_histogram.png", "error_vs_n.png", "error_vs_d.png", "error_vs_tile.png"}) {
    const std::string bytes = read_text(folder() / "plots" / png);
    ASSERT_GT(bytes.size(), 1000u) << png;
    EXPECT_EQ(bytes.substr(1, 3), "PNG") << png;
    EXPECT_NE(md.find(std::string("plots/") + png), std::string::npos) << png;
    EXPECT_TRUE(side["plots"].contains(png)) << png;
  }
  // The plotted series, recomputed from the case records.
  const json j = report();
  struct Point {
    uint64_t elements = 0;
    double sum_err = 0, sum_bound = 0, max_ratio = 0;
    std::vector<uint64_t> hist;
  };
  std::map<std::string, std::map<std::string, std::map<double, Point>>> by_n;
  std::map<std::string, std::map<std::string, std::vector<uint64_t>>> hist;
  for (const auto& c : j["cases"]) {
    Point& p = by_n[c["recipe"]][c["subject"]][c["n_k"].get<double>()];
    p.elements += c["elements"].get<uint64_t>();
    p.sum_err += num(c["sum_abs_error"]);
    p.sum_bound += num(c["sum_bound"]);
    p.max_ratio = std::max(p.max_ratio, num(c["max_ratio"]));
    auto& h = hist[c["recipe"]][c["subject"]];
    const auto ch = c["ratio_histogram"].get<std::vector<uint64_t>>();
    h.resize(ch.size());
    for (size_t k = 0; k < ch.size(); ++k) h[k] += ch[k];
  }
  size_t points = 0;
  for (const auto& [recipe, subjects] : by_n)
    for (const auto& [subject, xs] : subjects) {
      const json& s = side["plots"]["error_vs_n.png"][recipe][subject];
      ASSERT_EQ(s["x"].size(), xs.size()) << recipe << " " << subject;
      size_t k = 0;
      for (const auto& [x, p] : xs) {
        EXPECT_EQ(s["x"][k].get<double>(), x);
        EXPECT_NEAR(s["mean_error"][k].get<double>(), p.sum_err / double(p.elements), 1e-12 * p.sum_err / double(p.elements));
        EXPECT_NEAR(s["mean_bound"][k].get<double>(), p.sum_bound / double(p.elements), 1e-12 * p.sum_bound / double(p.elements));
        EXPECT_EQ(s["max_ratio"][k].get<double>(), p.max_ratio);
        ++k;
        ++points;
      }
      EXPECT_EQ(side["plots"]["ratio_histogram.png"][recipe][subject]["counts"].get<std::vector<uint64_t>>(),
                hist[recipe][subject]);
    }
  EXPECT_GT(points, 0u);
}

TEST_F(ReportConsistency, FromJsonRerendersExactly) {
  TempDir again("rerender");
  const Result r = run_flashcheck({"report", "--from", (folder() / "report.json").string(), "--out", again.path.string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"report.json", "report.md", "summary.csv", "cases.csv"})
    EXPECT_EQ(read_text(again.path / f), read_text(folder() / f)) << f << " differs after --from";
}

TEST_F(ReportConsistency, MissingPlotterIsVisibleButNotFatal) {
  TempDir np("noplots");
  const Result r = run_flashcheck({"report", "--from", (folder() / "report.json").string(), "--out", np.path.string()},
                                  "FLASHCHECK_PLOT_SCRIPT=/nonexistent/plot_report.py");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("plots not made"), std::string::npos) << r.output;
  const std::string md = read_text(np.path / "report.md");
  EXPECT_NE(md.find("WARNING: plots not made"), std::string::npos);
  EXPECT_NE(md.find("/nonexistent/plot_report.py"), std::string::npos);
  for (const char* f : {"report.json", "summary.csv", "cases.csv"}) EXPECT_TRUE(fs::exists(np.path / f)) << f;
  EXPECT_FALSE(fs::exists(np.path / "plots" / "error_vs_n.png"));
}

}  // namespace
}  // namespace fc::cli_test
