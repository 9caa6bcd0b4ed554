// The GPU oracle in a build without CUDA: every entry point says so (reference/gpu_oracle.h).
#include <stdexcept>

#include "reference/gpu_oracle.h"

namespace fc::gpu {

namespace {
[[noreturn]] void unavailable() { throw std::runtime_error("GPU oracle: this flashcheck was built without CUDA"); }
}  // namespace

bool oracle_available(std::string* why) {
  if (why) *why = "this flashcheck was built without CUDA";
  return false;
}
DeviceFootprint oracle_footprint(const Problem&, Recipe) { return {}; }
Verdict judge_on_device(const Problem&, const BudgetRequest&, const DeviceTensors&, size_t) { unavailable(); }
Float64Attention reference_host_data(const Problem&, const RunOptions&, const AttentionInputs&) { unavailable(); }
Verdict judge_host_data(const Problem&, const BudgetRequest&, const AttentionInputs&, const std::vector<double>&,
                        const std::vector<double>&, size_t, Arrays*) {
  unavailable();
}

}  // namespace fc::gpu
