// `--oracle cpu|gpu|auto`, the same for every command that judges (check, report, fuzz, compare, the
// property runner): which oracle computes the exact reference, the budget and the verdict
// (properties/oracle.h). The default is the CPU, so that a report made anywhere is made the same way.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace fc::report {

void add_oracle_flag(CLI::App* cmd, std::string& flag);

// Makes `flag` the process's oracle. Throws UsageError (tools/report/list_options.h) for an unknown word
// or for "gpu" where there is no GPU oracle, with the reason.
void choose_oracle(const std::string& flag);

}  // namespace fc::report
