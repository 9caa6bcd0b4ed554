// Runner layer (public C++ API of flashcheck_cuda): validates an fc_problem / fc_buffers pair, moves host
// buffers to the device when needed, picks the tile and split-KV policy, launches, and returns an error
// instead of aborting. The C ABI (cuda_plugin.cpp) is a thin wrapper around these functions.
#pragma once

#include <string>

#include "flashcheck/plugin.h"

namespace flashcheck::cuda {

struct Status {
  fc_status code = FC_OK;
  std::string message;
  bool ok() const { return code == FC_OK; }
};

enum class Subject {
  kFused,    // v1: FA-2 style fused kernel (tensor cores for fp16/bf16/fp8, CUDA cores for fp32)
  kNaive,    // S and P materialised in global memory (GEMM, softmax, GEMM)
  kFusedV2   // v2: Hopper's TMA, wgmma and warp specialisation (fp16/bf16 at d = 64, 128, 256)
};

// Fills the capabilities the subject declares through the C ABI.
void capabilities(Subject subject, fc_capabilities* out);

// Runs one forward pass. Buffers may live in host memory (copied to and from the device internally, and
// the call returns after the results are back) or in device memory (the work is enqueued on
// buffers.stream and the call returns without synchronising).
Status forward(Subject subject, const fc_problem& problem, const fc_buffers& buffers);

// Policy, exposed for tests and the bench.
struct LaunchPlan {
  int tile_index = 0;          // into fc::tiles::tile_options(d, .) (tensor-core recipes)
  int tile_m = 0, tile_n = 0;  // the tile that will run (fp32: fc::tiles::kSimtFp32Tile)
  int step_n = 0;              // keys per online-softmax step, the narrowest (fc::tiles::softmax_step_n)
  int num_splits = 1;
};
Status plan(Subject subject, const fc_problem& problem, LaunchPlan* out);

}  // namespace flashcheck::cuda
