// Subjects by name for the commands, through kernels/subject_registry.h when this build has it
// (FC_HAVE_SUBJECTS, set by tools/CMakeLists.txt when the flashcheck_subjects target exists).
// Header-only on purpose: the macro is defined for the flashcheck executable, not for the report library.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/subject.h"
#include "tools/report/list_options.h"

#if defined(FC_HAVE_SUBJECTS)
#include "kernels/subject_registry.h"
#endif

namespace fc::report {

inline std::vector<std::string> subject_names_in_build() {
#if defined(FC_HAVE_SUBJECTS)
  return available_subjects();
#else
  return {};
#endif
}

// The default: the CPU emulation, plus the CUDA kernel when a GPU is usable.
inline std::vector<std::string> default_subjects() {
#if defined(FC_HAVE_SUBJECTS)
  std::vector<std::string> s = {"emulation"};
  const auto names = available_subjects();
  if (gpu_available() && std::find(names.begin(), names.end(), "cuda") != names.end()) s.push_back("cuda");
  return s;
#else
  return {};
#endif
}

// Throws UsageError for an unknown subject or one that cannot be opened here (no GPU, a bad plugin).
inline std::unique_ptr<Subject> open_subject(const std::string& name) {
#if defined(FC_HAVE_SUBJECTS)
  try {
    return make_subject(name);
  } catch (const SubjectError& e) {
    throw UsageError("subject '" + name + "' cannot be opened: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw UsageError("unknown subject '" + name + "': " + e.what() + " (available: " + join(available_subjects()) + ")");
  }
#else
  throw UsageError("subject '" + name + "': this flashcheck was built without the subject registry "
                   "(kernels/subject_registry.cpp, target flashcheck_subjects)");
#endif
}

}  // namespace fc::report
