// docs/hostile-inputs.md as tests: every row of its table is one test, run in a fresh folder of fixtures,
// so the table cannot drift from what the command line does.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli_support.h"

namespace fc::cli_test {
namespace {

namespace fs = std::filesystem;

struct Row {
  int line = 0;
  std::string input, under, command, message;
  int exit_code = 0;
};

void PrintTo(const Row& r, std::ostream* os) { *os << "docs/hostile-inputs.md:" << r.line << " `" << r.command << "`"; }

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string unquote(const std::string& s) {
  const std::string t = trim(s);
  return t.size() >= 2 && t.front() == '`' && t.back() == '`' ? t.substr(1, t.size() - 2) : t;
}

std::vector<Row> rows() {
  std::ifstream in(FLASHCHECK_SOURCE_DIR "/docs/hostile-inputs.md");
  std::vector<Row> out;
  int n = 0;
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("| input |", 0) == 0) {
      table = true;
      continue;
    }
    if (!table || line.rfind("|---", 0) == 0) continue;
    if (line.empty() || line[0] != '|') break;
    std::vector<std::string> cells;
    std::stringstream s(line.substr(1));
    for (std::string c; std::getline(s, c, '|');) cells.push_back(c);
    if (cells.size() < 5) throw std::runtime_error("docs/hostile-inputs.md:" + std::to_string(n) + ": not five cells");
    out.push_back({n, trim(cells[0]), trim(cells[1]), unquote(cells[2]), unquote(cells[4]), std::stoi(trim(cells[3]))});
  }
  return out;
}

// Everything under a folder, with sizes: a refused command must leave it as it was.
std::map<std::string, uintmax_t> listing(const fs::path& dir) {
  std::map<std::string, uintmax_t> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    files[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? e.file_size() : 0;
  return files;
}

std::string npy_header(const std::string& descr, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
  dict.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes += {char(1), char(0), char(dict.size() & 0xFF), char(dict.size() >> 8)};
  return bytes + dict;
}

void make_fixtures(const fs::path& dir) {
  // fp16 values (11 significant bits) that are not e4m3 values.
  auto tensor = [](size_t n, int salt) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(double(1025 + (i * 37 + size_t(salt) * 101) % 1000), -11) * (i % 3 ? 1 : -1);
    return v;
  };
  write_f8(dir / "q.npy", {1, 2, 16, 8}, tensor(256, 1));
  write_f8(dir / "k.npy", {1, 1, 24, 8}, tensor(192, 2));
  write_f8(dir / "v.npy", {1, 1, 24, 8}, tensor(192, 3));
  write_f8(dir / "o.npy", {1, 2, 16, 8}, std::vector<double>(256, 0.0));
  std::ofstream(dir / "file") << "a regular file";
  std::ofstream(dir / "garbage.json") << "{ not json";
  std::ofstream(dir / "wrap.npy", std::ios::binary) << npy_header("<f8", "(4294967296, 4294967296, 1, 2)");
  std::ofstream(dir / "wide.npy", std::ios::binary) << npy_header("<f2", "(1, 1, 2, 3000000000)");
  std::ofstream(dir / "trunc.npy", std::ios::binary) << npy_header("<f8", "(1, 2, 16, 8)") << std::string(100, '\0');
  fs::copy_file(FC_EXAMPLE_CPU_PLUGIN, dir / "libexample.so");
}

bool gpu_present() {
  static const bool present = std::system("nvidia-smi -L 2>/dev/null | grep -q '^GPU'") == 0;
  return present;
}

class Hostile : public ::testing::TestWithParam<Row> {};

TEST_P(Hostile, ExitsWithItsCodeAndMessageAndLeavesNothing) {
  const Row& row = GetParam();
  if (row.input.find("no GPU") != std::string::npos && gpu_present()) GTEST_SKIP() << "a GPU is present";
  TempDir dir("hostile-" + std::to_string(row.line));
  make_fixtures(dir.path);
  const auto before = listing(dir.path);

  std::string command = row.command;
  const std::map<std::string, std::string> placeholders = {
      {"$SEGV", FC_BROKEN_SEGV_ON_CASE}, {"$HANG", FC_BROKEN_HANG_ON_CASE}, {"$STICKY", FC_BROKEN_STICKY_ON_CASE},
      {"$REFUSES", FC_BROKEN_REFUSES}};
  for (const auto& [name, value] : placeholders)
    for (size_t at; (at = command.find(name)) != std::string::npos;) command.replace(at, name.size(), value);
  std::vector<std::string> args;
  std::istringstream words(command);
  for (std::string w; words >> w;) args.push_back(w);

  std::string env = "cd '" + dir.path.string() + "' &&";
  if (row.under == "full disk") env += " trap '' XFSZ; ulimit -f 1;";
  else if (row.under == "8 GiB") env += " ulimit -v 8388608;";
  else ASSERT_EQ(row.under, "") << "docs/hostile-inputs.md:" << row.line << ": unknown condition";
  const Result r = run_flashcheck(args, env);

  SCOPED_TRACE("docs/hostile-inputs.md:" + std::to_string(row.line) + ": flashcheck " + command);
  EXPECT_EQ(r.exit_code, row.exit_code) << r.output;
  EXPECT_NE(r.output.find(row.message), std::string::npos) << "the output does not contain '" << row.message << "':\n"
                                                          << r.output;
  EXPECT_EQ(listing(dir.path), before) << "the command left files behind (or changed them)";
}

INSTANTIATE_TEST_SUITE_P(Table, Hostile, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return "line" + std::to_string(info.param.line); });

TEST(HostileTable, HasEveryRowOfTheIssue) { EXPECT_GE(rows().size(), 40u); }

}  // namespace
}  // namespace fc::cli_test
