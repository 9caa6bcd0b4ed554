// Progress on long work. On a terminal: one live line (carriage return) with cases done, cases per
// second and an ETA. Elsewhere (CI logs, pipes): a plain line every `period` seconds and at the end, so
// logs stay short and readable.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace fc::report {

class Progress {
 public:
  // quiet: print nothing. interactive: -1 = decide from isatty(fileno(out)), 0 = no, 1 = yes.
  Progress(std::string what, uint64_t total, std::FILE* out = stderr, bool quiet = false, int interactive = -1,
           double period_seconds = 10.0);
  void step(const std::string& last_case);  // thread-safe
  void finish(const std::string& note = "");

  static std::string format_duration(double seconds);

 private:
  void print_locked(bool final_line, const std::string& last_case);
  std::string what_;
  uint64_t total_, done_ = 0;
  std::FILE* out_;
  bool quiet_, tty_;
  double period_;
  std::chrono::steady_clock::time_point start_, last_print_;
  std::mutex mutex_;
  size_t last_width_ = 0;
};

}  // namespace fc::report
