// Fuzz cases for people: a readable description, a ready-to-paste regression test, and the reproducer
// files that `flashcheck fuzz` writes and reads back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "properties/fuzz_decode.h"

namespace fc::fuzz {

// A value as the printers show it (%.9g).
std::string fmt_double(double x);

// Readable description: the problem, options, value modes, and (for small cases) every tensor.
std::string describe(const FuzzCase& fc, size_t max_elements_printed = 64);
// A self-contained GoogleTest that rebuilds the case from exact hex-float literals, runs the named
// subject and asserts check_case is clean.
std::string to_regression_test(const FuzzCase& fc, std::string_view test_name, std::string_view subject_name);

// Reproducer files: libFuzzer writes raw bytes (decoded with the emulation's capabilities and the cpu
// limits); the driver writes a header line "FCFUZZ1 subject=<name> limits=<cpu|gpu> caps=<line>\n"
// before the bytes.
struct Reproducer {
  std::string subject = "emulation";
  std::string limits = "cpu";
  bool score_guard = true, output_headroom = true;  // header "guards=score,headroom" (default both)
  std::optional<Capabilities> caps;  // from the header; absent for raw libFuzzer files
  std::vector<uint8_t> bytes;
};
Reproducer read_reproducer(const std::string& path);
// The file's bytes (`flashcheck fuzz` writes them whole or not at all, tools/report/atomic_file.h).
std::string reproducer_bytes(const Reproducer& r);

}  // namespace fc::fuzz
