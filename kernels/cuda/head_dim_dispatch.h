// Device layer: a run-time head dim -> the compile-time one, over the head dims of the tile policy
// (kernels/tile_policy.h). Every dispatch by head dim goes through here, so adding a head dim to the
// table is the only change a new instantiation needs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <iterator>
#include <type_traits>

#include "kernels/tile_policy.h"

namespace flashcheck::cuda {

using fc::tiles::TileShape;

// f(std::integral_constant<int, d>{}) for the head dim of kDims (v1's fc::tiles::kHeadDims by default,
// v2's fc::tiles::kV2HeadDims) equal to d; cudaErrorInvalidValue for any other d.
template <const auto& kDims = fc::tiles::kHeadDims, size_t kIndex = 0, class F>
cudaError_t dispatch_head_dim(int d, F&& f) {
  if constexpr (kIndex == std::size(kDims)) {
    return cudaErrorInvalidValue;
  } else {
    constexpr int kD = kDims[kIndex];
    if (d == kD) return f(std::integral_constant<int, kD>{});
    return dispatch_head_dim<kDims, kIndex + 1>(d, f);
  }
}

}  // namespace flashcheck::cuda
