// Running the flashcheck executable from a test: its exit code and everything it printed.
#pragma once

#include <filesystem>
#include <cstdint>
#include <string>
#include <vector>

namespace fc::cli_test {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// The executable under test: $FLASHCHECK_EXE when set (a build carried to another machine), else the
// path compiled in.
std::string flashcheck_exe();

// Runs flashcheck_exe() with the arguments (each shell-quoted); `env` is prepended (e.g. "FOO=1").
Result run_flashcheck(const std::vector<std::string>& args, const std::string& env = "");

// Starts flashcheck_exe() with the arguments in a process group of its own (as a terminal runs a job),
// output discarded; returns its pid. interrupt_group sends SIGINT to the whole group, as Ctrl-C does,
// waits, and returns the exit code (256 + the signal if it died of one, unlike any exit code).
int start_in_own_group(const std::vector<std::string>& args);
int interrupt_group(int pid);

// A fresh folder under the test's temporary directory, removed at destruction.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name);
  ~TempDir();
};

std::string read_text(const std::filesystem::path& p);

// A float64 .npy file, for inputs of the NPY route.
void write_f8(const std::filesystem::path& p, std::vector<int64_t> shape, const std::vector<double>& values);

}  // namespace fc::cli_test
