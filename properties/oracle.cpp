// properties/oracle.h.
#include "properties/oracle.h"

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "reference/gpu_oracle.h"

namespace fc {

namespace {
std::atomic<Oracle> chosen{Oracle::cpu};
std::mutex use_mutex;
OracleUse use;

std::string with_commas(uint64_t n) {
  std::string s = std::to_string(n);
  for (int at = int(s.size()) - 3; at > 0; at -= 3) s.insert(size_t(at), ",");
  return s;
}
}  // namespace

Oracle parse_oracle(std::string_view flag) {
  if (flag == "cpu") return Oracle::cpu;
  std::string why;
  if (flag == "gpu") {
    if (!gpu::oracle_available(&why)) throw std::runtime_error("--oracle gpu: no GPU oracle here (" + why + ")");
    return Oracle::gpu;
  }
  if (flag == "auto") return gpu::oracle_available(&why) ? Oracle::gpu : Oracle::cpu;
  throw std::invalid_argument("--oracle: '" + std::string(flag) + "' is not one of cpu, gpu, auto");
}

const char* oracle_name(Oracle o) { return o == Oracle::gpu ? "gpu" : "cpu"; }

void use_oracle(Oracle o) { chosen = o; }
Oracle current_oracle() { return chosen; }

OracleUse oracle_use() {
  std::lock_guard<std::mutex> lock(use_mutex);
  return use;
}

std::string describe_oracle_use() {
  const OracleUse u = oracle_use();
  const uint64_t total = u.gpu + u.cpu;
  std::string s = oracle_name(current_oracle());
  s += " (" + with_commas(total) + (total == 1 ? " judgement" : " judgements");
  if (u.cpu_fallback > 0)
    s += "; " + with_commas(u.cpu_fallback) + " on the CPU: " + u.fallback_reason;
  else if (current_oracle() == Oracle::gpu && u.cpu > 0)
    s += "; " + with_commas(u.cpu) + " on the CPU";
  return s + ")";
}

namespace oracle_detail {
void count(Oracle judged_by, const std::string* fallback_reason) {
  std::lock_guard<std::mutex> lock(use_mutex);
  if (judged_by == Oracle::gpu) {
    ++use.gpu;
    return;
  }
  ++use.cpu;
  if (fallback_reason) {
    if (use.cpu_fallback++ == 0) use.fallback_reason = *fallback_reason;
  }
}
}  // namespace oracle_detail

Float64Attention exact_reference(const Problem& p, const AttentionInputs& in, const RunOptions& options) {
  if (current_oracle() == Oracle::gpu) {
    try {
      return gpu::reference_host_data(p, options, in);
    } catch (const std::invalid_argument&) {
      // Outside the GPU oracle's scope: the CPU computes it (the judgement that follows counts it).
    }
  }
  return exact_attention_f64(p, in);
}

}  // namespace fc
