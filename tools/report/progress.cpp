#include "tools/report/progress.h"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

namespace fc::report {

Progress::Progress(std::string what, uint64_t total, std::FILE* out, bool quiet, int interactive, double period_seconds)
    : what_(std::move(what)), total_(total), out_(out), quiet_(quiet),
      tty_(interactive < 0 ? ::isatty(::fileno(out)) != 0 : interactive != 0), period_(period_seconds),
      start_(std::chrono::steady_clock::now()), last_print_(start_) {}

std::string Progress::format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = long(std::lround(s));
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, int(t % 3600 / 60));
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, int(t % 60));
  return fmt::format("{}s", t);
}

void Progress::step(const std::string& last_case) {
  std::lock_guard lock(mutex_);
  ++done_;
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  // A terminal line is cheap to redraw, but more than ~10 redraws a second is flicker.
  if ((tty_ && since >= 0.1) || (!tty_ && since >= period_)) {
    last_print_ = now;
    print_locked(false, last_case);
  }
}

void Progress::print_locked(bool final_line, const std::string& last_case) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? double(done_) / elapsed : 0;
  const double eta = rate > 0 ? double(total_ - std::min(done_, total_)) / rate : NAN;
  std::string line = fmt::format("{}: {}/{} cases ({:.0f}%), {:.2f} cases/s, elapsed {}", what_, done_, total_,
                                 total_ ? 100.0 * double(done_) / double(total_) : 100.0, rate,
                                 format_duration(elapsed));
  if (!final_line) line += ", ETA " + format_duration(eta);
  if (tty_) {
    if (!final_line && !last_case.empty()) line += "  " + last_case;
    if (line.size() > 150) line.resize(150);
    const size_t pad = last_width_ > line.size() ? last_width_ - line.size() : 0;
    std::fprintf(out_, "\r%s%s%s", line.c_str(), std::string(pad, ' ').c_str(), final_line ? "\n" : "");
    last_width_ = line.size();
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void Progress::finish(const std::string& note) {
  std::lock_guard lock(mutex_);
  if (quiet_) return;
  print_locked(true, "");
  if (!note.empty()) std::fprintf(out_, "%s\n", note.c_str());
}

}  // namespace fc::report
