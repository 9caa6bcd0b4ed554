// Files appear whole or not at all. Every file a command writes (NPY, md, json, csv, png, fuzz
// reproducers) is staged under a temporary name in its own folder and renamed over the final name only
// when all of the command's files are complete (rename is atomic within a file system). When staging
// fails (a full disk, a read-only folder) or the command stops before committing, every temporary is
// removed, and so is every folder the set created, so a failed run leaves nothing behind.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fc::report {

// A file or folder that cannot be written. what() names the path and the system's reason.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();  // discards what was not committed

  // Creates the folder (and parents) and proves it writable with a probe file; folders this set
  // creates are removed again by discard() when they are empty. Throws OutputError.
  void create_folder(const std::filesystem::path& folder);
  // Writes `contents` under a temporary name next to `path` and returns that name; commit() renames
  // it to `path`. Throws OutputError naming `path` (the temporary is gone by then).
  std::filesystem::path stage(const std::filesystem::path& path, std::string_view contents);
  // A file another writer made complete under a temporary name (the plot script, in a scratch
  // folder): commit() renames it to `path`, discard() removes it.
  void adopt(const std::filesystem::path& written, const std::filesystem::path& path);
  // A fresh temporary folder next to `path`, removed with its contents by commit() and discard().
  std::filesystem::path scratch_folder(const std::filesystem::path& path);
  // A file that commit() removes (a stale plot the new report does not have); discard() keeps it.
  void remove_on_commit(const std::filesystem::path& path);
  // Renames every staged file into place, in staging order. Throws OutputError when a rename fails,
  // after removing what this set had already put in place.
  void commit();
  // Removes every temporary and the empty folders this set created.
  void discard() noexcept;

 private:
  struct Entry {
    std::filesystem::path tmp, final;
  };
  std::vector<Entry> staged_;
  std::vector<std::filesystem::path> created_, scratch_, obsolete_;
};

// Proves that a file can be created in the existing folder that holds `path` (a probe, removed again),
// so a command refuses an unwritable output before its work. Throws OutputError naming `path`.
void check_can_create(const std::filesystem::path& path);

}  // namespace fc::report
