// Writing a report folder. The order matters for a reader who looks while it is being written, and
// for what is left if something fails: report.json first (the record; the plots are made from it),
// then plots, CSVs, and report.md last, each file renamed into place whole (atomic_file.h).
#include <filesystem>

#include "tools/report/atomic_file.h"
#include "tools/report/report_writers.h"

namespace fc::report {

PlotStatus write_report(const ReportData& r, const std::filesystem::path& folder, bool write_json, bool plots) {
  ensure_writable_folder(folder);
  const auto json_path = folder / "report.json";
  if (write_json) write_file_atomically(json_path, to_json(r).dump(1) + "\n");
  PlotStatus st;
  st.requested = plots;
  if (plots) {
    std::error_code ec;
    std::filesystem::create_directories(folder / "plots", ec);
    st = make_plots(json_path, folder);
  } else {
    for (const auto& f : plot_files()) {  // stale plots would disagree with this JSON
      std::error_code ec;
      std::filesystem::remove(folder / f, ec);
    }
  }
  write_file_atomically(folder / "summary.csv", render_summary_csv(r));
  write_file_atomically(folder / "cases.csv", render_cases_csv(r));
  write_file_atomically(folder / "report.md", render_markdown(r, st));
  return st;
}

}  // namespace fc::report
