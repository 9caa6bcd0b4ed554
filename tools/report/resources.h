// Resource guards: before a command allocates for a problem, it estimates the memory the problem needs
// (host, and device when the subject runs there) and refuses, with exit 2 and both sizes, a problem the
// machine cannot hold. A problem too large for the machine is an input error, never a kernel verdict.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "reference/problem.h"

namespace fc::report {

// Bytes of host memory one case of this problem takes at its peak: the inputs (and, for the FA-3
// distribution, their unrounded copies), the subject's output, the float64 reference with its error
// bounds, the error budget (two at once while the l conventions or accumulation models are merged) and,
// for a subject in a worker, the copies that cross the process boundary. An estimate with margin,
// computed in floating point so that no size overflows.
double host_bytes_for_case(const Problem& p);
// Bytes of device memory our CUDA subjects take for it: Q, K, V, O and the LSE in their storage
// formats, and the split-KV partials.
double device_bytes_for_case(const Problem& p, int input_bytes, int num_splits);

// What this process may still allocate: the least of MemAvailable, the address-space limit
// (ulimit -v) left and the cgroup's memory limit left.
double available_host_bytes();

// "1.5 GiB".
std::string bytes_text(double bytes);

// Throws UsageError ("<what> needs about X of host memory; Y is available") when need > available.
void require_host_memory(double need, const std::string& what);
void require_device_memory(double need, double available, const std::string& what);

}  // namespace fc::report
