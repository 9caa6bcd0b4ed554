// The exact side on the GPU: float64 exact attention with its certified bound (the same certificate as
// exact_attention_f64), the error budget for a basis (the same terms, reference/budget_terms.h, walked
// over the same rows), and the verdict on a subject's output (reference/element_verdict.h), reduced on the
// device so that only counts, maxima, a histogram and the worst elements cross to the host. Built from
// reference/cuda/ where nvcc is found; elsewhere every entry point says it is unavailable.
//
// Scope: any shape whose tensors fit in device memory (64-bit offsets throughout), d and dv up to 256
// (the staged chunks), softmax steps up to 128 keys, every recipe, mask, GQA, key lengths and dense mask;
// budgets for every basis (the default BudgetTerms). Beyond that a problem is refused by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/error_budget.h"
#include "reference/exact_attention.h"
#include "reference/recipe.h"

namespace fc::gpu {

// True when this build has the GPU oracle and this process sees a usable CUDA device; otherwise false,
// with the reason in *why.
bool oracle_available(std::string* why = nullptr);

// Device bytes the oracle needs for a problem beyond the tensors it is given (its own outputs and
// workspace), and the bytes of the tensors themselves in their storage formats (Q, K, V, O, LSE, masks).
struct DeviceFootprint {
  size_t workspace = 0, tensors = 0;
  size_t total() const { return workspace + tensors; }
};
DeviceFootprint oracle_footprint(const Problem& p, Recipe r);

// The budget as the pipeline resolved it (properties/check_pipeline.h BudgetBasis, in plain fields so
// that the exact layer does not depend on the properties layer).
struct BudgetRequest {
  RunOptions options;             // recipe, descales, num_splits (0 unknown), l convention, accumulation...
  int tile_n = 0;                 // 0: any step width
  bool both_l_conventions = false;
  bool both_accumulations = false;
  // BudgetTerms::per_key_eta: false gives the row form (docs/error-analysis.md §3.6) where the CPU budget
  // takes it (the default convention without tf32's operand term); it runs in the two-kernel budget, and a
  // problem whose workspace for it cannot be had is refused.
  bool per_key_eta = true;
  // With the row form: BudgetTerms::knot_sums (docs/error-analysis.md §3.18), the centred sums from products on
  // the fp16 tensor cores where their certificate holds.
  bool knot_sums = false;
};

// Tensors already on the device, contiguous BHND in their storage formats: fp32 / tf32 inputs as float,
// fp16 / bf16 as uint16 bit patterns, fp8 as uint8; O in the recipe's output format (fp32 as float,
// fp16 / bf16 as uint16); LSE as float (nullptr: the subject has none). Stored fp8 values are value /
// descale (options.q_descale ...).
struct DeviceTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const float* lse = nullptr;
};

struct Timing {
  double reference_s = 0, budget_s = 0, verdict_s = 0;  // device time of each stage (CUDA events)
  size_t peak_device_bytes = 0;                          // what the oracle allocated, at most
};

struct Verdict {
  BudgetVerdict verdict;                 // as check_against_budget counts it (worst: the top keep_worst)
  std::vector<uint64_t> ratio_histogram;  // error/bound of every checked O element (verdict::histogram_bin)
  Timing timing;
};

// Judges a subject's output on the device. Throws std::invalid_argument for an invalid problem and
// std::runtime_error when the device fails or the problem does not fit (the message gives the bytes).
Verdict judge_on_device(const Problem& p, const BudgetRequest& basis, const DeviceTensors& t, size_t keep_worst = 8);

// The exact reference alone from host data: O, LSE and their certified bounds, as exact_attention_f64
// returns them. The inputs must be exact values of the recipe's input format (fp8: value / descale).
Float64Attention reference_host_data(const Problem& p, const RunOptions& options, const AttentionInputs& in);

// The same from host data (small problems; the agreement test): uploads the inputs (exact values) and the
// output, and also returns the full reference and budget arrays when `arrays` is given.
struct Arrays {
  Float64Attention ref;
  ErrorBudget budget;
};
Verdict judge_host_data(const Problem& p, const BudgetRequest& basis, const AttentionInputs& in,
                        const std::vector<double>& o, const std::vector<double>& lse, size_t keep_worst = 8,
                        Arrays* arrays = nullptr);

}  // namespace fc::gpu
