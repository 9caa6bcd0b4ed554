#include "tools/report/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace fc::report {

namespace fs = std::filesystem;

namespace {

// A name no other writer (thread or process) picks: the process id and a per-process counter.
fs::path temporary_next_to(const fs::path& path) {
  static std::atomic<unsigned> counter{0};
  return path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                               std::to_string(counter.fetch_add(1)));
}

// Writes the whole buffer with POSIX calls, so that the error (ENOSPC, EFBIG, EACCES, EROFS) is the
// system's own and a failed close is not lost.
void write_new_file(const fs::path& tmp, const fs::path& shown, std::string_view contents) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw OutputError("cannot write " + shown.string() + ": " + std::strerror(errno));
  size_t done = 0;
  int err = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    done += size_t(n);
  }
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    throw OutputError("cannot write " + shown.string() + ": " + std::strerror(err));
  }
}

// 0 when a file can be created next to `path` (the probe is removed again), else the errno.
int probe_error(const fs::path& path) {
  const fs::path probe = temporary_next_to(path);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink(probe.c_str());
  return 0;
}

}  // namespace

StagedFiles::~StagedFiles() { discard(); }

void StagedFiles::create_folder(const fs::path& folder) {
  std::error_code ec;
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
    throw OutputError("output folder " + folder.string() + " exists and is not a folder");
  // Remember each level this call creates, outermost first, so that discard() can remove them.
  std::vector<fs::path> missing;
  for (fs::path p = folder.lexically_normal(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  fs::create_directories(folder, ec);
  if (ec) throw OutputError("cannot create output folder " + folder.string() + ": " + ec.message());
  created_.insert(created_.end(), missing.rbegin(), missing.rend());
  if (const int err = probe_error(folder / ".flashcheck-probe")) {
    discard();
    throw OutputError("output folder " + folder.string() + " is not writable: " + std::strerror(err));
  }
}

fs::path StagedFiles::stage(const fs::path& path, std::string_view contents) {
  const fs::path tmp = temporary_next_to(path);
  write_new_file(tmp, path, contents);
  staged_.push_back({tmp, path});
  return tmp;
}

void StagedFiles::adopt(const fs::path& written, const fs::path& path) { staged_.push_back({written, path}); }

fs::path StagedFiles::scratch_folder(const fs::path& path) {
  const fs::path dir = temporary_next_to(path);
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) throw OutputError("cannot create " + dir.string() + ": " + ec.message());
  scratch_.push_back(dir);
  return dir;
}

void StagedFiles::remove_on_commit(const fs::path& path) { obsolete_.push_back(path); }

void StagedFiles::commit() {
  std::vector<fs::path> placed;
  for (const Entry& e : staged_) {
    std::error_code ec;
    fs::rename(e.tmp, e.final, ec);
    if (ec) {
      const std::string why = "cannot rename " + e.tmp.string() + " to " + e.final.string() + ": " + ec.message();
      for (const fs::path& p : placed) fs::remove(p, ec);
      discard();
      throw OutputError(why);
    }
    placed.push_back(e.final);
  }
  std::error_code ec;
  for (const fs::path& p : obsolete_)
    if (std::find(placed.begin(), placed.end(), p) == placed.end()) fs::remove(p, ec);
  for (const fs::path& p : scratch_) fs::remove_all(p, ec);
  staged_.clear();
  created_.clear();
  scratch_.clear();
  obsolete_.clear();
}

void StagedFiles::discard() noexcept {
  std::error_code ec;
  for (const Entry& e : staged_) fs::remove(e.tmp, ec);
  staged_.clear();
  for (const fs::path& p : scratch_) fs::remove_all(p, ec);
  scratch_.clear();
  obsolete_.clear();
  // Innermost first; a folder that holds anything (another run's files) stays.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    if (fs::is_empty(*it, ec)) fs::remove(*it, ec);
  created_.clear();
}

void check_can_create(const fs::path& path) {
  if (const int err = probe_error(path)) throw OutputError("cannot write " + path.string() + ": " + std::strerror(err));
}

}  // namespace fc::report
