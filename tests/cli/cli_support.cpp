#include "cli_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tools/npy/npy_file.h"

namespace fc::cli_test {

namespace {
std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

std::string flashcheck_exe() {
  const char* e = std::getenv("FLASHCHECK_EXE");
  return e && *e ? e : FLASHCHECK_EXE;
}

Result run_flashcheck(const std::vector<std::string>& args, const std::string& env) {
  std::string cmd = env.empty() ? "" : env + " ";
  cmd += quote(flashcheck_exe());
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " 2>&1 </dev/null";
  Result r;
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

int start_in_own_group(const std::vector<std::string>& args) {
  const std::string exe = flashcheck_exe();
  std::vector<std::string> words = {exe};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  if (pid > 0) ::setpgid(pid, pid);
  return pid;
}

int interrupt_group(int pid) {
  ::kill(-pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 256 + WTERMSIG(status);
}

TempDir::TempDir(const std::string& name) {
  path = std::filesystem::temp_directory_path() / ("flashcheck-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_f8(const std::filesystem::path& p, std::vector<int64_t> shape, const std::vector<double>& values) {
  std::ofstream(p, std::ios::binary) << npy::f8_bytes(std::move(shape), values);
}

}  // namespace fc::cli_test
