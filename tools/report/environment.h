// The environment block of a report: which code (git commit), built how (compiler, flags), on what
// (CPU, GPU, driver), when and with which command. Recorded once at the start of a campaign.
#pragma once

#include <string>

#include "tools/report/report_data.h"

namespace fc::report {

Environment capture_environment(int jobs, const std::string& command_line);

// "flashcheck 0.1.0 (git v0.1-3-gabc, commit ...)" for --version.
std::string version_string();

// The output of a shell command's first line, or "" when it fails (nvidia-smi on a machine without).
std::string first_line_of(const std::string& shell_command);

}  // namespace fc::report
