#include "tools/report/plots.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

namespace fc::report {

namespace fs = std::filesystem;

namespace {
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a command; returns its exit status and the last lines of its output.
int run_captured(const std::string& command, std::string* output) {
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buf[1024];
  std::string all;
  while (std::fgets(buf, sizeof buf, pipe)) all += buf;
  const int status = ::pclose(pipe);
  if (output) *output = all.size() > 2000 ? all.substr(all.size() - 2000) : all;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

const std::vector<std::string>& plot_files() {
  static const std::vector<std::string> files = {"plots/ratio_histogram.png", "plots/error_vs_n.png",
                                                 "plots/error_vs_d.png", "plots/error_vs_tile.png",
                                                 "plots/plots.json"};
  return files;
}

fs::path plot_script() {
  if (const char* s = std::getenv("FLASHCHECK_PLOT_SCRIPT"); s && *s) return s;
  // The source tree it was built from; an install (<prefix>/bin/../share/flashcheck); a checkout it
  // runs in (a binary carried to another machine).
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates = {fs::path(FLASHCHECK_SOURCE_DIR) / "scripts" / "plot_report.py"};
  if (!ec) candidates.push_back(exe.parent_path() / ".." / "share" / "flashcheck" / "plot_report.py");
  candidates.push_back(fs::current_path(ec) / "scripts" / "plot_report.py");
  for (const fs::path& p : candidates)
    if (fs::exists(p, ec)) return p.lexically_normal();
  return fs::path(FLASHCHECK_SOURCE_DIR) / "scripts" / "plot_report.py";
}

std::string find_python(std::string* tried) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("FLASHCHECK_PYTHON"); p && *p) candidates.push_back(p);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const auto& py : candidates) {
    if (tried) *tried += (tried->empty() ? "" : ", ") + py;
    if (run_captured(shell_quote(py) + " -c 'import matplotlib'", nullptr) == 0) return py;
  }
  return "";
}

PlotStatus make_plots(const fs::path& report_json, const fs::path& recorded_as, const fs::path& folder,
                      StagedFiles& files) {
  PlotStatus st;
  // Plots of an earlier run in the same folder would silently disagree with this JSON: they go when
  // this report is committed, whether or not new ones are made.
  for (const auto& f : plot_files()) files.remove_on_commit(folder / f);
  const fs::path script = plot_script();
  if (!fs::exists(script)) {
    st.message = "plot script " + script.string() + " not found (set FLASHCHECK_PLOT_SCRIPT)";
    return st;
  }
  std::string tried;
  st.python = find_python(&tried);
  if (st.python.empty()) {
    st.message = "no python3 with matplotlib found (tried " + tried +
                 "); install python3-matplotlib (scripts/setup.sh) or set FLASHCHECK_PYTHON";
    return st;
  }
  // The script writes into a scratch folder; its files join the report's staged set.
  const fs::path scratch = files.scratch_folder(folder / "plots");
  std::string output;
  const int rc = run_captured(shell_quote(st.python) + " " + shell_quote(script.string()) + " " +
                                  shell_quote(report_json.string()) + " " + shell_quote(scratch.string()) + " " +
                                  shell_quote(recorded_as.string()),
                              &output);
  if (rc != 0) {
    st.message = "plot script failed (exit " + std::to_string(rc) + "): " + output;
    return st;
  }
  bool any = false;
  for (const auto& f : plot_files()) {
    const fs::path made = scratch / fs::path(f).filename();
    if (!fs::exists(made)) continue;
    if (!any) files.create_folder(folder / "plots");
    any = true;
    files.adopt(made, folder / f);
    if (f.ends_with(".png")) st.files.push_back(f);
  }
  st.made = !st.files.empty();
  if (!st.made) st.message = "plot script wrote no PNG";
  return st;
}

}  // namespace fc::report
