// tools/report/oracle_option.h.
#include "tools/report/oracle_option.h"

#include <stdexcept>

#include "properties/oracle.h"
#include "tools/report/list_options.h"

namespace fc::report {

void add_oracle_flag(CLI::App* cmd, std::string& flag) {
  cmd->add_option("--oracle", flag,
                  "Who judges: cpu (float64 on this machine's CPU, the default), gpu (the GPU oracle: the same "
                  "certified reference and budget terms on the device, for large shapes), or auto (the GPU when "
                  "one is usable). Reports and summaries say which judged, and how many cases the GPU oracle "
                  "could not take (those are judged on the CPU).");
}

void choose_oracle(const std::string& flag) {
  try {
    use_oracle(parse_oracle(flag.empty() ? "cpu" : flag));
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

}  // namespace fc::report
