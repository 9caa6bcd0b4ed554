// The same property suite on our CUDA kernel (make_subject("cuda")). Labelled gpu; without a GPU every
// test skips with the reason. Run on the GPU machine with:
//   ctest --test-dir <build> -L gpu -R property --output-on-failure
#include "tests/properties/property_binding.h"

#include "kernels/subject_registry.h"

#ifndef FC_PROPERTY_DEFAULT_RC_PARAMS
#define FC_PROPERTY_DEFAULT_RC_PARAMS "max_success=200 seed=20261129"
#endif

namespace {
const bool fc_defaults = fc::testing_support::set_default_rc_params(FC_PROPERTY_DEFAULT_RC_PARAMS);

fc::testing_support::SubjectSlot make_cuda() {
  fc::testing_support::SubjectSlot slot;
  slot.name = "cuda";
  if (!fc::gpu_available()) {
    slot.unavailable = "no usable CUDA device (fc::gpu_available() is false)";
    return slot;
  }
  try {
    slot.subject = fc::make_subject("cuda");
  } catch (const std::exception& e) {
    slot.unavailable = e.what();
  }
  return slot;
}
}  // namespace

FC_BIND_PROPERTIES(cuda, make_cuda)
