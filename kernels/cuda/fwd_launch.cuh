// Device layer: maps the run-time tile index of one head dim onto the compiled instantiations.
#pragma once

#include <type_traits>

#include "fwd_dispatch.h"
#include "fwd_kernel.cuh"
#include "head_dim_dispatch.h"

namespace flashcheck::cuda {

// The kernel traits of tile option kTile (kernels/tile_policy.h) at one head dim and format.
template <typename Elem, int kHeadDim, int kTile, bool kTwoLevel = false, bool kLFromFp32 = false>
struct TileTraits {
  static constexpr TileShape shape = fc::tiles::tile_options(kHeadDim, kTile);
  using Tr = FwdKernelTraits<Elem, kHeadDim, shape.m, shape.n, shape.warps, kTwoLevel, shape.stages, kLFromFp32>;
  // The single-buffer pipeline needs one softmax step per tile; tiles stepping in 32-key parts keep two.
  using Tr2 = FwdKernelTraits<Elem, kHeadDim, shape.m, shape.n, shape.warps, kTwoLevel, 2, kLFromFp32>;
  using type = std::conditional_t<(Tr2::kSubTiles > 1), Tr2, Tr>;
};
template <typename Elem, int kHeadDim, int kTile, bool kTwoLevel = false, bool kLFromFp32 = false>
using tile_traits_t = typename TileTraits<Elem, kHeadDim, kTile, kTwoLevel, kLFromFp32>::type;

template <typename Elem, int kHeadDim, int kTile, bool kTwoLevel = false, bool kLFromFp32 = false>
cudaError_t launch_tile(const FwdParams& p, cudaStream_t stream) {
  return launch_fwd<tile_traits_t<Elem, kHeadDim, kTile, kTwoLevel, kLFromFp32>>(p, stream);
}

template <typename Elem, int kHeadDim, bool kTwoLevel = false, bool kLFromFp32 = false>
cudaError_t launch_any_tile(int tile_index, const FwdParams& p, cudaStream_t stream) {
  switch (tile_index) {
    case 0: return launch_tile<Elem, kHeadDim, 0, kTwoLevel, kLFromFp32>(p, stream);
    case 1: return launch_tile<Elem, kHeadDim, 1, kTwoLevel, kLFromFp32>(p, stream);
    case 2: return launch_tile<Elem, kHeadDim, 2, kTwoLevel, kLFromFp32>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

// fp8 (Elem = E4M3 or E5M2): every head dim, each at its one tile (tile_policy.h fp8_tile_index), with and
// without two-level accumulation.
template <typename Elem>
cudaError_t dispatch_fp8(const FwdParams& p, cudaStream_t stream) {
  return dispatch_head_dim(p.d, [&](auto d) {
    constexpr int kD = decltype(d)::value, kTile = fc::tiles::fp8_tile_index(kD);
    return p.two_level ? launch_tile<Elem, kD, kTile, true>(p, stream) : launch_tile<Elem, kD, kTile, false>(p, stream);
  });
}

template <int kHeadDim>
cudaError_t dispatch_hdim_16bit(Recipe recipe, int tile_index, const FwdParams& p, cudaStream_t stream) {
  switch (recipe) {
    case Recipe::kFp16:
      return p.l_from_fp32_p ? launch_any_tile<Fp16, kHeadDim, false, true>(tile_index, p, stream)
                             : launch_any_tile<Fp16, kHeadDim>(tile_index, p, stream);
    case Recipe::kBf16:
      return p.l_from_fp32_p ? launch_any_tile<Bf16, kHeadDim, false, true>(tile_index, p, stream)
                             : launch_any_tile<Bf16, kHeadDim>(tile_index, p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace flashcheck::cuda
