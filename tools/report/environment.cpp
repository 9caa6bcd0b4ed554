#include "tools/report/environment.h"

#include <sys/utsname.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>

#include "build_info.h"
#include "git_info.h"

namespace fc::report {

std::string first_line_of(const std::string& shell_command) {
  std::FILE* pipe = ::popen((shell_command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return "";
  char buf[512];
  std::string line;
  if (std::fgets(buf, sizeof buf, pipe)) line = buf;
  while (std::fgets(buf, sizeof buf, pipe)) {
  }
  const int rc = ::pclose(pipe);
  if (rc != 0) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

std::string version_string() {
  return std::string("flashcheck ") + FLASHCHECK_VERSION + " (git " + FLASHCHECK_GIT_DESCRIBE + ", commit " +
         FLASHCHECK_GIT_COMMIT + "; " + FLASHCHECK_COMPILER + ", " + FLASHCHECK_BUILD_TYPE + ", CUDA " +
         FLASHCHECK_CUDA_BUILD + ")";
}

Environment capture_environment(int jobs, const std::string& command_line) {
  Environment e;
  e.flashcheck_version = FLASHCHECK_VERSION;
  e.git_commit = FLASHCHECK_GIT_COMMIT;
  e.git_describe = FLASHCHECK_GIT_DESCRIBE;
  e.compiler = FLASHCHECK_COMPILER;
  e.build_type = FLASHCHECK_BUILD_TYPE;
  e.cxx_flags = FLASHCHECK_CXX_FLAGS;
  e.cuda_build = std::string(FLASHCHECK_CUDA_BUILD) == "ON" ? std::string("ON (") + FLASHCHECK_CUDA_COMPILER + ")"
                                                             : std::string("OFF");
  struct utsname u {};
  if (::uname(&u) == 0) e.host = std::string(u.sysname) + " " + u.release + " " + u.machine;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) e.cpu = line.substr(colon + 2);
      break;
    }
  // The GPU and driver as nvidia-smi names them; absent on a machine without one.
  const std::string gpu = first_line_of("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader");
  if (gpu.empty()) {
    e.gpu = "none";
    e.driver = "none";
  } else {
    const auto comma = gpu.rfind(',');
    e.gpu = gpu.substr(0, comma);
    e.driver = comma == std::string::npos ? "" : gpu.substr(comma + 2);
  }
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  e.started_utc = when;
  e.jobs = jobs;
  e.command_line = command_line;
  return e;
}

}  // namespace fc::report
