// `flashcheck fuzz --large`: the generators' large-shape mode (properties/large_shapes.h) as a time-boxed
// campaign. Case i of seed s is drawn from (s, i) alone, its inputs made on the device, the subject (a
// plugin in this process: cuda or plugin:<path>) run on device buffers through the C ABI, and its output
// judged on the device by the GPU oracle (properties/large_case_run.h). A finding prints the command that
// replays exactly that case (--seed s --case i). Device buffers cannot cross to a worker process, so the
// subject runs in this one; a sticky CUDA error ends the campaign as a finding.
#pragma once

#include <cstdint>
#include <string>

namespace fc::report {

struct LargeCampaign {
  std::string subject;     // cuda, cuda-naive or plugin:<path>
  uint64_t seed = 1;
  double seconds = 60;
  uint64_t max_cases = 0;  // 0: until the time is up
  int64_t only_case = -1;  // >= 0: that case alone
  double period = 10;      // seconds between progress lines
  bool quiet = false;
};

// The exit code: 0 every judged case within budget, 1 findings (violations or a failed subject), 2 the
// subject declined every case, 130 interrupted. Throws UsageError where there is no GPU oracle, for a
// subject that is not a plugin, or in a build without CUDA.
int run_large_campaign(const LargeCampaign& c);

}  // namespace fc::report
