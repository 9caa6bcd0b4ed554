// Which oracle judges: the exact reference, the error budget and the verdict computed on the CPU (float64
// with Eigen, reference/exact_attention.h) or on the GPU (reference/gpu_oracle.h, the same certificate
// and the same budget terms). It is one choice per process, made once by the command line (`--oracle
// cpu|gpu|auto`); every judgement of the check pipeline and every reference the properties and the fuzzer
// compute go through it, so that a report, a fuzz finding or a property run can say which oracle judged.
//
// A case the GPU oracle cannot take (head dims or a softmax step beyond its scope, values it cannot
// store) is judged on the CPU instead and counted, so that nothing goes unjudged and the count is told.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reference/exact_attention.h"
#include "reference/problem.h"
#include "reference/recipe.h"

namespace fc {

enum class Oracle { cpu, gpu };

// "cpu", "gpu" or "auto" (the GPU when this build has the GPU oracle and a device is usable, else the
// CPU). Throws std::invalid_argument for another word, std::runtime_error for "gpu" without a usable GPU
// oracle (with the reason).
Oracle parse_oracle(std::string_view flag);
const char* oracle_name(Oracle o);

// The process's oracle (the CPU until use_oracle is called).
void use_oracle(Oracle o);
Oracle current_oracle();

// How the judgements so far were made: by the GPU, by the CPU, and how many of the CPU's were cases the
// GPU oracle could not take while it was chosen (the first reason kept).
struct OracleUse {
  uint64_t gpu = 0, cpu = 0, cpu_fallback = 0;
  std::string fallback_reason;
};
OracleUse oracle_use();
// One line for reports and summaries, e.g. "gpu (1,200 judgements)" or "gpu (1,180 judgements; 20 on the
// CPU: outside the GPU oracle's scope: ...)".
std::string describe_oracle_use();

namespace oracle_detail {
void count(Oracle judged_by, const std::string* fallback_reason = nullptr);
}  // namespace oracle_detail

// The exact reference of (p, in) by the process's oracle.
Float64Attention exact_reference(const Problem& p, const AttentionInputs& in, const RunOptions& options);

}  // namespace fc
