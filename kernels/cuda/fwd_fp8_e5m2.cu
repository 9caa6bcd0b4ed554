// fp8 e5m2 instantiations: every head dim and tile option, with and without two-level accumulation.
#include "fwd_launch.cuh"

namespace flashcheck::cuda {

template <bool kTwoLevel>
static cudaError_t for_dim(int tile_index, const FwdParams& p, cudaStream_t stream) {
  return dispatch_head_dim(p.d, [&](auto d) {
    return launch_any_tile<E5M2, decltype(d)::value, kTwoLevel>(tile_index, p, stream);
  });
}

cudaError_t run_fused_e5m2(int tile_index, const FwdParams& p, cudaStream_t stream) {
  return p.two_level ? for_dim<true>(tile_index, p, stream) : for_dim<false>(tile_index, p, stream);
}

}  // namespace flashcheck::cuda
