// The C ABI's declarations read into the suite's terms (include/flashcheck/plugin.h -> kernels/subject.h):
// a plugin's capabilities and the run plan it reports. Shared by the plugin subject and by tools that call
// a plugin's forward() themselves on device buffers (bench/oracle_scale.cpp), so that both budget a run
// from the same reading of its plan.
#pragma once

#include "flashcheck/plugin.h"
#include "kernels/subject.h"

namespace fc {

// fc_capabilities -> Capabilities.
Capabilities to_capabilities(const fc_capabilities& raw);

// The run plan a v2 plugin reported for (p, o), checked: unknown fields stay unknown (the budget then takes
// the conservative side), values outside the ABI's enums, steps that do not divide the tile, and anything
// asked explicitly that did not run (tile, split count, l convention, two-level accumulation) throw
// std::invalid_argument naming it.
RunPlan decode_run_plan(const fc_run_plan& raw, const RunOptions& o, const Problem& p);

}  // namespace fc
