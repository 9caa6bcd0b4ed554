#include "tools/report/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace fc::report {

namespace fs = std::filesystem;

void write_file_atomically(const fs::path& path, const std::string& contents) {
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
    out.write(contents.data(), std::streamsize(contents.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  }
}

void ensure_writable_folder(const fs::path& folder) {
  std::error_code ec;
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
    throw std::runtime_error("output folder " + folder.string() + " exists and is not a folder");
  fs::create_directories(folder, ec);
  if (ec) throw std::runtime_error("cannot create output folder " + folder.string() + ": " + ec.message());
  const fs::path probe = folder / (".flashcheck-probe." + std::to_string(::getpid()));
  {
    std::ofstream out(probe);
    if (!out) throw std::runtime_error("output folder " + folder.string() + " is not writable: " + std::strerror(errno));
  }
  fs::remove(probe, ec);
}

}  // namespace fc::report
