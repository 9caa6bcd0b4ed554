// The fuzzer's oracle for one case: the check pipeline's budget verdict (properties/check_pipeline.h),
// plus what the fuzzer checks on its own: the semantics of NaN, infinities and empty rows, the budget's
// own defects (a NaN or negative bound), and the isolation probe (one poisoned element must change only
// the outputs that depend on it).
#pragma once

#include <string>
#include <vector>

#include "properties/fuzz_decode.h"
#include "reference/error_budget.h"

namespace fc::fuzz {

// The oracle for one case.
struct CaseVerdict {
  bool skipped = false;
  std::string skip_reason;
  BudgetVerdict budget;                // the error budget's verdict (elements, worst ratio, violations)
  size_t semantic_violations = 0;      // NaN / inf / masked-row / shape mismatches found by the oracle itself
  size_t isolation_violations = 0;     // outputs changed by a poisoned element they do not depend on
  size_t budget_defects = 0;           // NaN or negative bounds from the budget on finite references: a
                                       // budget bug (every error would pass), reported as a finding
  bool subject_failed = false;         // SubjectError or any exception from the subject
  std::string failure;                 // how it failed: "error", "crashed" (its worker process died) or
                                       // "timeout" (it hung past the worker's time limit)
  std::vector<std::string> findings;   // first few, human-readable
  bool clean() const {
    return skipped || (budget.violations == 0 && semantic_violations == 0 && isolation_violations == 0 &&
                       budget_defects == 0 && !subject_failed);
  }
  size_t total_violations() const {
    return budget.violations + semantic_violations + isolation_violations + budget_defects + (subject_failed ? 1 : 0);
  }
};

CaseVerdict check_case(Subject& subject, const FuzzCase& fc, size_t max_findings = 8);

}  // namespace fc::fuzz
