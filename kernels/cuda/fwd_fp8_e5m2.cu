// fp8 e5m2 instantiations: every head dim and tile option, with and without two-level accumulation.
#include "fwd_launch.cuh"

namespace flashcheck::cuda {

template <bool kTwoLevel>
static cudaError_t for_dim(int tile_index, const FwdParams& p, cudaStream_t stream) {
  switch (p.d) {
    case 32: return launch_any_tile<E5M2, 32, kTwoLevel>(tile_index, p, stream);
    case 64: return launch_any_tile<E5M2, 64, kTwoLevel>(tile_index, p, stream);
    case 96: return launch_any_tile<E5M2, 96, kTwoLevel>(tile_index, p, stream);
    case 128: return launch_any_tile<E5M2, 128, kTwoLevel>(tile_index, p, stream);
    case 256: return launch_any_tile<E5M2, 256, kTwoLevel>(tile_index, p, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t run_fused_e5m2(int tile_index, const FwdParams& p, cudaStream_t stream) {
  return p.two_level ? for_dim<true>(tile_index, p, stream) : for_dim<false>(tile_index, p, stream);
}

}  // namespace flashcheck::cuda
