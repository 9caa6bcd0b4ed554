// The property suite on the CPU emulation: what CI runs (ctest -L property). The number of cases per
// property is RC_PARAMS' max_success; without RC_PARAMS it is the CI default set here. For a long run:
//   RC_PARAMS="max_success=2000" ctest -L property
#include "tests/properties/property_binding.h"

#include "kernels/cpu/emulated_kernel.h"

#ifndef FC_PROPERTY_DEFAULT_RC_PARAMS
#define FC_PROPERTY_DEFAULT_RC_PARAMS "max_success=200 seed=20261129"
#endif

namespace {
const bool fc_defaults = fc::testing_support::set_default_rc_params(FC_PROPERTY_DEFAULT_RC_PARAMS);

fc::testing_support::SubjectSlot make_emulation() {
  fc::testing_support::SubjectSlot slot;
  slot.name = "emulation";
  slot.subject = std::make_unique<fc::EmulatedKernel>();
  return slot;
}
}  // namespace

FC_BIND_PROPERTIES(emulation, make_emulation)
