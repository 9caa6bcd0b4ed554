// Subjects by name for the commands, through kernels/subject_registry.h when this build has it
// (FC_HAVE_SUBJECTS, set by tools/CMakeLists.txt when the flashcheck_subjects target exists), in this
// process or in a worker process.
// Header-only on purpose: the macro is defined for the flashcheck executable, not for the report library.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/subject.h"
#include <CLI/CLI.hpp>

#include "tools/report/list_options.h"
#include "tools/report/resources.h"
#include "tools/report/worker_subject.h"

#if defined(FC_HAVE_SUBJECTS)
#include "kernels/plugin/plugin_abi.h"
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

// Where subjects run: in this process, or in a worker process that a crash, a hang or a sticky error
// cannot take down with the command (tools/report/worker_subject.h).
struct Isolation {
  std::string mode = "auto";    // auto: plugins (and, with gpu_in_worker, cuda) in a worker | worker | in-process
  double case_timeout = 300;    // seconds a case may take in a worker before it counts as a hang
  bool gpu_in_worker = false;   // auto also isolates our CUDA subjects (fuzz: one bad launch must not
                                // poison the context for every later case)
};

inline void add_isolation_flags(CLI::App* cmd, Isolation& iso, const std::string& auto_means) {
  cmd->add_option("--isolation", iso.mode,
                  "Where the subject runs: auto (" + auto_means + "), worker (a separate process that a crash, a hang "
                  "or a sticky CUDA error cannot take down: each becomes a finding and a fresh worker takes the "
                  "next case) or in-process")
      ->check(CLI::IsMember({"auto", "worker", "in-process"}));
  cmd->add_option("--case-timeout", iso.case_timeout,
                  "Seconds one case may run in a worker before it is killed and reported as a hang (default 300)")
      ->check(CLI::PositiveNumber);
}

inline bool runs_in_worker(const std::string& name, const Isolation& iso) {
  if (iso.mode != "auto") return iso.mode == "worker";
  if (name.rfind("plugin:", 0) == 0) return true;
#if defined(FC_HAVE_SUBJECTS)
  return iso.gpu_in_worker && is_cuda_subject(name);
#else
  return false;  // no subject here runs on a GPU
#endif
}

inline std::unique_ptr<Subject> open_subject(const std::string& name, const Isolation& iso) {
  if (!runs_in_worker(name, iso)) return open_subject(name);
  try {
    return std::make_unique<WorkerSubject>(name, iso.case_timeout);
  } catch (const SubjectError& e) {
    // The worker's message already names the subject (it opened it with open_subject).
    throw UsageError(e.what());
  }
}

// The memory guard for one case: the host's, and the device's for our CUDA subjects run in this process
// (a worker's own context reports running out as such). Throws UsageError naming both sizes.
inline void require_memory_for_case(const std::string& subject, const Problem& p, const RunOptions& o,
                                    const Isolation& iso, const std::string& what) {
  require_host_memory(host_bytes_for_case(p), what);
#if defined(FC_HAVE_SUBJECTS)
  if (is_cuda_subject(subject) && !runs_in_worker(subject, iso))
    if (const auto free = gpu_free_bytes()) {
      const int bytes = int(storage_bytes(recipe_spec(o.recipe).input));
      require_device_memory(device_bytes_for_case(p, bytes, o.num_splits), *free, what);
    }
#else
  (void)subject, (void)o, (void)iso;
#endif
}

}  // namespace fc::report
