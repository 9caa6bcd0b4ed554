// Files appear whole or not at all: each is written to a temporary name in the same folder and
// renamed over the final name (rename is atomic within a file system), so an interrupted or failed
// run never leaves a half-written report for a reader to trust.
#pragma once

#include <filesystem>
#include <string>

namespace fc::report {

// Throws std::runtime_error naming the path when the file cannot be written.
void write_file_atomically(const std::filesystem::path& path, const std::string& contents);

// Creates the folder (and parents) and proves it writable by writing and removing a probe file.
// Throws std::runtime_error naming the folder and the reason otherwise.
void ensure_writable_folder(const std::filesystem::path& folder);

}  // namespace fc::report
