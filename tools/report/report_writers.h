// The report's files. report.json is the record (everything else is rendered from it: the markdown,
// the CSVs and, through scripts/plot_report.py, the plots); see docs/report-format.md for every field.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/report/atomic_file.h"
#include "tools/report/plots.h"
#include "tools/report/report_data.h"

namespace fc::report {

nlohmann::json to_json(const ReportData& r);
// Throws UsageError (list_options.h) naming the field when the JSON is not a flashcheck report.
ReportData report_from_json(const nlohmann::json& j);
ReportData read_report(const std::filesystem::path& path);

std::string render_markdown(const ReportData& r, const PlotStatus& plots);
std::string render_summary_csv(const ReportData& r);
std::string render_cases_csv(const ReportData& r);

// How numbers appear in the markdown tables: 3 significant digits ("0.0123", "4.56e-05"). The
// consistency test formats report.json's values with the same function and compares the text.
std::string md_number(double x);

// How the tables and plots name a subject: as given, except plugin:<path>, shown by its file name
// (the full path, often a temporary folder on another machine, stays in report.json and the commands).
std::string subject_label(const std::string& subject);

// Stages report.json (unless `write_json` is false: --from re-renders next to an existing one), the
// plots, summary.csv, cases.csv and report.md in `files` (which may already hold the folder, created
// before the campaign), and commits them together. Throws OutputError, having removed everything of
// this run, when a file cannot be written. Returns the plot status.
PlotStatus write_report(const ReportData& r, const std::filesystem::path& folder, StagedFiles& files, bool write_json,
                        bool plots);

}  // namespace fc::report
