// The same property suite on our CUDA kernel v2 (make_subject("cuda-v2"), docs/cuda-kernel-v2.md).
// Labelled gpu; without a GPU every test skips with the reason.
#include "tests/properties/cuda_slot.h"

#ifndef FC_PROPERTY_DEFAULT_RC_PARAMS
#define FC_PROPERTY_DEFAULT_RC_PARAMS "max_success=200 seed=20261129"
#endif

namespace {
const bool fc_defaults = fc::testing_support::set_default_rc_params(FC_PROPERTY_DEFAULT_RC_PARAMS);
fc::testing_support::SubjectSlot make_cuda_v2() { return fc::testing_support::cuda_slot("cuda-v2"); }
}  // namespace

FC_BIND_PROPERTIES(cuda_v2, make_cuda_v2)
