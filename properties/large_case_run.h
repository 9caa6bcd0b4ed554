// Runs a large-shape case (properties/large_shapes.h) on the device: inputs made there
// (properties/cuda/device_inputs.h), a plugin that takes device buffers (FC_MEMORY_DEVICE) run on them
// through the C ABI (our CUDA kernel, or anyone's), and its output judged there by the GPU oracle for the
// plan it reported. Nothing but the verdict crosses to the host. Built where CUDA is.
#pragma once

#include "flashcheck/plugin.h"
#include "kernels/subject.h"
#include "properties/check_pipeline.h"
#include "properties/large_shapes.h"
#include "reference/gpu_oracle.h"

namespace fc {

struct LargeResult {
  gpu::Verdict verdict;
  BudgetBasis basis;     // what the budget was derived for (the plan the subject reported)
  float kernel_ms = 0;
  double device_gib = 0;  // inputs and outputs on the device (the oracle's workspace is in verdict.timing)
};

// Makes the inputs on the device, runs the plugin on them, judges its output for the plan it reported.
// Throws SubjectRefused when the plugin declines the case, SubjectOutOfMemory / SubjectSticky /
// SubjectError as its status says when it fails, std::runtime_error when the device does (with the bytes,
// when it is memory).
LargeResult run_large_case(const fc_plugin& plugin, const Capabilities& caps, const LargeCase& c);

}  // namespace fc
