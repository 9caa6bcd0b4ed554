// The same property suite on our CUDA kernel v1 (make_subject("cuda")). Labelled gpu; without a GPU every
// test skips with the reason. Run on the GPU machine with:
//   ctest --test-dir <build> -L gpu -R property --output-on-failure
#include "tests/properties/cuda_slot.h"

#ifndef FC_PROPERTY_DEFAULT_RC_PARAMS
#define FC_PROPERTY_DEFAULT_RC_PARAMS "max_success=200 seed=20261129"
#endif

namespace {
const bool fc_defaults = fc::testing_support::set_default_rc_params(FC_PROPERTY_DEFAULT_RC_PARAMS);
fc::testing_support::SubjectSlot make_cuda() { return fc::testing_support::cuda_slot("cuda"); }
}  // namespace

FC_BIND_PROPERTIES(cuda, make_cuda)
