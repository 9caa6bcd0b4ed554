// Device layer: how many work tiles (one block of query rows of one (batch, head, split)) a forward has,
// for the host (the launch, the redo flags) and the device (tile_scheduler.h) alike.
#pragma once

#include <cuda_runtime.h>

#include "fwd_params.h"

namespace flashcheck::cuda {

__host__ __device__ inline long long work_tile_count(const FwdParams& p, int block_m) {
  return static_cast<long long>((p.n_q + block_m - 1) / block_m) * p.heads_q * p.num_splits * p.batch;
}

}  // namespace flashcheck::cuda
