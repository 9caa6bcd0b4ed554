#include "tools/report/resources.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "tools/report/list_options.h"

namespace fc::report {

namespace {

// A "Key:   123 kB" line of a /proc file, in bytes; nullopt when absent.
std::optional<double> proc_kb(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream s(line.substr(key.size() + 1));
      double kb = 0;
      if (s >> kb) return kb * 1024.0;
    }
  return std::nullopt;
}

std::optional<double> file_number(const char* file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stod(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

double host_bytes_for_case(const Problem& p) {
  const double qkv = double(p.batch) * (double(p.heads_q) * double(p.n_q) * p.d +
                                        double(p.heads_kv) * double(p.n_k) * (double(p.d) + p.dv));
  const double o = double(p.batch) * p.heads_q * double(p.n_q) * p.dv;
  const double lse = double(p.batch) * p.heads_q * double(p.n_q);
  // In doubles: the inputs three times over (the case's, the FA-3 unrounded copy or a worker's copy, a
  // generator's temporaries), O sixteen times (subject output and its unrounded form, the reference
  // and its bound, two budgets of four arrays each, a worker's copy), the LSE eight times; plus the
  // process itself.
  return 8.0 * (3.0 * qkv + 16.0 * o + 8.0 * lse) + 64.0 * 1024 * 1024;
}

double device_bytes_for_case(const Problem& p, int input_bytes, int num_splits) {
  const double qkv = double(p.batch) * (double(p.heads_q) * double(p.n_q) * p.d +
                                        double(p.heads_kv) * double(p.n_k) * (double(p.d) + p.dv));
  const double o = double(p.batch) * p.heads_q * double(p.n_q) * p.dv;
  const double lse = double(p.batch) * p.heads_q * double(p.n_q);
  const double splits = std::max(1, num_splits);
  return input_bytes * qkv + 4.0 * o * (1 + splits) + 4.0 * lse * (1 + splits) + 64.0 * 1024 * 1024;
}

double available_host_bytes() {
  double avail = proc_kb("/proc/meminfo", "MemAvailable").value_or(std::numeric_limits<double>::infinity());
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const double used = proc_kb("/proc/self/status", "VmSize").value_or(0);
    avail = std::min(avail, std::max(0.0, double(lim.rlim_cur) - used));
  }
  if (const auto max = file_number("/sys/fs/cgroup/memory.max")) {
    const double used = file_number("/sys/fs/cgroup/memory.current").value_or(0);
    avail = std::min(avail, std::max(0.0, *max - used));
  }
  return avail;
}

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  if (u == 6 && b >= 1024) return fmt::format("{:.3g} EiB", b);
  return fmt::format("{:.3g} {}", b, units[u]);
}

void require_host_memory(double need, const std::string& what) {
  const double avail = available_host_bytes();
  if (need > avail)
    throw UsageError(fmt::format("{} needs about {} of host memory (inputs, outputs, the float64 reference and "
                                 "the error budget); {} is available",
                                 what, bytes_text(need), bytes_text(avail)));
}

void require_device_memory(double need, double available, const std::string& what) {
  if (need > available)
    throw UsageError(fmt::format("{} needs about {} of device memory; {} is free on the GPU", what, bytes_text(need),
                                 bytes_text(available)));
}

}  // namespace fc::report
