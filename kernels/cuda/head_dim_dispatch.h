// Device layer: a run-time head dim -> the compile-time one, over the head dims of the tile policy
// (kernels/tile_policy.h). Every dispatch by head dim goes through here, so adding a head dim to the
// table is the only change a new instantiation needs.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/tile_policy.h"

namespace flashcheck::cuda {

using fc::tiles::TileShape;

// f(std::integral_constant<int, d>{}) for the compiled head dim equal to d; cudaErrorInvalidValue for
// any other d.
template <int kIndex = 0, class F>
cudaError_t dispatch_head_dim(int d, F&& f) {
  if constexpr (kIndex == fc::tiles::kNumHeadDims) {
    return cudaErrorInvalidValue;
  } else {
    constexpr int kD = fc::tiles::kHeadDims[kIndex];
    if (d == kD) return f(std::integral_constant<int, kD>{});
    return dispatch_head_dim<kIndex + 1>(d, f);
  }
}

}  // namespace flashcheck::cuda
