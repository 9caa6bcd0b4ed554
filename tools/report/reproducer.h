// A case as the command that reproduces it, and back. `report` (its worst cases and every failed one),
// `check` (the case it ran), `compare` (its report) and `fuzz` (each finding) print reproducers with
// render_command, the one renderer; `check` and `compare` define their case flags with add_check_flags
// and add_compare_flags below, so a rendered command is parsed by exactly the options it was rendered
// for (tests/cli/reproducer_test.cpp parses every kind back and compares every field).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tools/npy/attention_npy.h"
#include "tools/report/report_data.h"

namespace fc::report {

// The flags of `flashcheck check` that make up a case (not how it is run or printed).
struct CheckFlags {
  std::string subject = "emulation", recipe = "fp16", mask = "none", dist = "normal", tile, problem_file;
  int64_t n = 128, nk = 0;
  int d = 64, dv = 0, batch = 1, heads_q = 1, heads_kv = 1;
  uint64_t seed = 1;
  bool l_from_fp32_p = false, two_level = false, fa1 = false;
  int num_splits = 1;
  std::optional<double> scale;
  std::vector<int64_t> key_lengths;
};
void add_check_flags(CLI::App* cmd, const std::shared_ptr<CheckFlags>& f);
// The case the flags describe (after the --problem file, if any). Throws UsageError naming the flag.
CaseRecord case_from_flags(CheckFlags f);

// The flags of `flashcheck compare` that make up a case: the inputs and candidate files, the recipe and
// what the candidate is said to have run.
struct CompareFlags {
  npy::InputOptions in;
  std::string candidate, candidate_lse, recipe, subject;
  int tile_n = 0;
  int num_splits = 0;
  std::string l_convention = "unknown";
  std::string accumulation = "unknown";
};
void add_compare_flags(CLI::App* cmd, CompareFlags& f);

// A `flashcheck fuzz` reproducer file, explained and run on a subject.
struct FuzzReproducer {
  std::string file, subject, limits;
  bool score_guard = true, output_headroom = true;
};

using Reproducible = std::variant<CaseRecord, CompareFlags, FuzzReproducer>;

// The arguments after "flashcheck" that reproduce the case, every field that defines it included.
std::vector<std::string> command_arguments(const Reproducible& c);
// "flashcheck check ...", each argument quoted for a POSIX shell where it needs it.
std::string render_command(const Reproducible& c);
// The words of a rendered command line (single quotes, as render_command writes them).
std::vector<std::string> split_command(const std::string& line);

}  // namespace fc::report
