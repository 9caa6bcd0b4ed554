// Random attention inputs generated on the device, for shapes whose tensors are too large to build on the
// host: element x of tensor t is a standard normal from a counter-based hash of (seed, t, x) (Box-Muller),
// divided by the descale and rounded once to the recipe's storage format. Any element is reproducible from
// the seed alone, whatever the shape or launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

// Fills n elements of the recipe's storage (FC_RECIPE_FP16 / BF16: 2 bytes, FP8: 1 byte) at dst.
cudaError_t fill_normal_on_device(void* dst, size_t n, int recipe, uint64_t seed, int tensor, float descale);
