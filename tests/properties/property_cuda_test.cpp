// The property suite on one of our CUDA subjects: kernel v1 (make_subject("cuda")) in property_cuda_test,
// kernel v2 (make_subject("cuda-v2"), docs/cuda-kernel-v2.md) in property_cuda_v2_test, both built from
// this file (tests/properties/CMakeLists.txt sets FC_CUDA_SUBJECT and FC_CUDA_BINDING). Labelled gpu;
// without a GPU every test skips with the reason. Run on the GPU machine with:
//   ctest --test-dir <build> -L gpu -R property --output-on-failure
#include "tests/properties/cuda_slot.h"

#ifndef FC_PROPERTY_DEFAULT_RC_PARAMS
#define FC_PROPERTY_DEFAULT_RC_PARAMS "max_success=200 seed=20261129"
#endif
#ifndef FC_CUDA_SUBJECT
#define FC_CUDA_SUBJECT "cuda"
#define FC_CUDA_BINDING cuda
#endif

namespace {
const bool fc_defaults = fc::testing_support::set_default_rc_params(FC_PROPERTY_DEFAULT_RC_PARAMS);
fc::testing_support::SubjectSlot make_cuda_slot() { return fc::testing_support::cuda_slot(FC_CUDA_SUBJECT); }
}  // namespace

FC_BIND_PROPERTIES(FC_CUDA_BINDING, make_cuda_slot)
