// Writing a report folder: report.json (the record; the plots are made from it), the plots, the CSVs
// and report.md are all staged first and renamed into place together (atomic_file.h), so a reader
// never sees a half-written report and a failed write leaves nothing of this run.
#include <filesystem>

#include "tools/report/atomic_file.h"
#include "tools/report/report_writers.h"

namespace fc::report {

PlotStatus write_report(const ReportData& r, const std::filesystem::path& folder, StagedFiles& files, bool write_json,
                        bool plots) {
  files.create_folder(folder);
  const auto json_path = folder / "report.json";
  const auto json_read = write_json ? files.stage(json_path, to_json(r).dump(1) + "\n") : json_path;
  PlotStatus st;
  st.requested = plots;
  if (plots) {
    st = make_plots(json_read, json_path, folder, files);
  } else {
    for (const auto& f : plot_files()) files.remove_on_commit(folder / f);  // they would disagree with this JSON
  }
  files.stage(folder / "summary.csv", render_summary_csv(r));
  files.stage(folder / "cases.csv", render_cases_csv(r));
  files.stage(folder / "report.md", render_markdown(r, st));
  files.commit();
  return st;
}

}  // namespace fc::report
