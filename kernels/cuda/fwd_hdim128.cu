// Instantiations for head dim 128 (fp16 and bf16, every tile option).
#include "fwd_launch.cuh"

namespace flashcheck::cuda {
template <>
cudaError_t run_fused_hdim<128>(Recipe recipe, int tile_index, const FwdParams& p, cudaStream_t stream) {
  return dispatch_hdim_16bit<128>(recipe, tile_index, p, stream);
}
}  // namespace flashcheck::cuda
