// Instantiations for head dim 96 (fp16 and bf16, every tile option).
#include "fwd_launch.cuh"

namespace flashcheck::cuda {
template <>
cudaError_t run_fused_hdim<96>(Recipe recipe, int tile_index, const FwdParams& p, cudaStream_t stream) {
  return dispatch_hdim_16bit<96>(recipe, tile_index, p, stream);
}
}  // namespace flashcheck::cuda
