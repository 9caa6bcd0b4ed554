// The C ABI's declarations read into the suite's terms (include/flashcheck/plugin.h -> kernels/subject.h):
// a plugin's capabilities and the run plan it reports. Shared by the plugin subject and by tools that call
// a plugin's forward() themselves on device buffers (bench/oracle_scale.cpp), so that both budget a run
// from the same reading of its plan.
#pragma once

#include <cstddef>

#include "flashcheck/plugin.h"
#include "kernels/subject.h"
#include "reference/formats.h"

namespace fc {

// Storage width in bytes of a format inside an fc_tensor (fp32 and tf32 live in a float container).
size_t storage_bytes(Format f);

// The status's name as the ABI spells it ("FC_ERR_STICKY"), for messages.
const char* status_name(fc_status s);

// A BHND tensor stored contiguously: strides (heads * n * d, n * d, d, 1).
fc_tensor contiguous_tensor(void* data, int heads, int64_t n, int d);

// The ABI's problem description for (p, o): masks, flags, tile and split requests, fp8 descales;
// `key_lengths` is the caller's int32 copy in the buffers' memory (or null). Throws std::invalid_argument
// for descales the ABI's floats cannot carry.
fc_problem to_fc_problem(const Problem& p, const RunOptions& o, const int32_t* key_lengths);

// fc_capabilities -> Capabilities.
Capabilities to_capabilities(const fc_capabilities& raw);

// The run plan a v2 plugin reported for (p, o), checked: unknown fields stay unknown (the budget then takes
// the conservative side), values outside the ABI's enums, steps that do not divide the tile, and anything
// asked explicitly that did not run (tile, split count, l convention, two-level accumulation) throw
// std::invalid_argument naming it.
RunPlan decode_run_plan(const fc_run_plan& raw, const RunOptions& o, const Problem& p);

}  // namespace fc
