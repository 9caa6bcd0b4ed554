// The plots come from matplotlib, driven by scripts/plot_report.py, which reads report.json and writes
// plots/*.png plus plots/plots.json (the values it plotted and the SHA-256 of the JSON it read). A
// missing python3 or matplotlib is not fatal: the report says so, visibly, and the rest is written.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tools/report/atomic_file.h"

namespace fc::report {

struct PlotStatus {
  bool requested = true;
  bool made = false;
  std::string python;               // the interpreter that ran the script
  std::string message;              // why not, when not made
  std::vector<std::string> files;   // relative to the report folder
};

// The script: $FLASHCHECK_PLOT_SCRIPT, else the source tree's scripts/plot_report.py, else an
// install's <prefix>/share/flashcheck/plot_report.py, else ./scripts/plot_report.py (a binary carried to
// another machine and run from a checkout).
std::filesystem::path plot_script();

// The interpreter: $FLASHCHECK_PYTHON, else the first of python3 (PATH) and /usr/bin/python3 that can
// import matplotlib (a pyenv or venv python3 often lacks Debian's python3-matplotlib).
std::string find_python(std::string* tried);

// Runs the script on `report_json` (a staged copy; plots.json records `recorded_as`) and adds its files
// to `files`, to be committed with the rest of the report.
PlotStatus make_plots(const std::filesystem::path& report_json, const std::filesystem::path& recorded_as,
                      const std::filesystem::path& folder, StagedFiles& files);

// The PNG names the script writes, for cleaning stale ones away when plotting fails.
const std::vector<std::string>& plot_files();

}  // namespace fc::report
