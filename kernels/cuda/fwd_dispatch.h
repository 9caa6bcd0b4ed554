// Device layer: run-time (recipe, head dim, tile) -> compiled instantiation. Each head dim lives in its
// own translation unit (fwd_hdim*.cu) so that a parallel build compiles them side by side.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "fwd_params.h"

namespace flashcheck::cuda {

enum class Recipe { kFp32 = 0, kFp16 = 2, kBf16 = 3, kE4M3 = 4, kE5M2 = 5 };

// The 16-bit tensor-core recipes, every tile option of tile_policy.h; fp8 at its one tile per head dim
// (tile_policy.h fp8_tile_index).
template <int kHeadDim>
cudaError_t run_fused_hdim(Recipe recipe, int tile_index, const FwdParams& p, cudaStream_t stream);
cudaError_t run_fused_e4m3(const FwdParams& p, cudaStream_t stream);
cudaError_t run_fused_e5m2(const FwdParams& p, cudaStream_t stream);

// Kernel v2 (fwd_v2_kernel.cuh; fp16 and bf16 at fc::tiles::kV2HeadDims): the TMA descriptors of Q, K,
// V and O (tensor_map.h; O's is used where p.o_tma is set), then the kernel, its guarded redo of the
// blocks that flagged a possible NaN leak (when p.redo is set), and the split-KV merge when
// p.num_splits > 1. One translation unit per head dim.
struct V2TensorMaps {
  CUtensorMap q, k, v, o;
};
// tile_m: the tile's rows, fc::tiles::v2_tile's or v2_tall_tile's for this head dim.
template <int kHeadDim>
cudaError_t run_fused_v2_hdim(Recipe recipe, int tile_m, const FwdParams& p, const V2TensorMaps& maps,
                              cudaStream_t stream);

// SIMT fp32 fused kernel (fwd_fp32.cu): one fixed tiling, any num_splits.
cudaError_t run_fused_fp32(const FwdParams& p, cudaStream_t stream);

// Split-KV merge (split_kv_merge.cu): combines p.num_splits partial states into O, written in the format
// out_kind names, and the LSE.
enum OutKind { kOutFp16 = 0, kOutBf16 = 1, kOutFp32 = 2 };
cudaError_t run_split_kv_merge(const FwdParams& p, int out_kind, cudaStream_t stream);

// Naive baseline (naive_attention.cu): S and P materialised in global memory. workspace holds
// batch*heads_q*n_q*n_k floats for S/P; recipe fp32/fp16/bf16.
cudaError_t run_naive(Recipe recipe, const FwdParams& p, float* workspace, float* row_sum, cudaStream_t stream);

// Strided 4-D copy (tensor_copy.cu), elements of elem_bytes (1, 2 or 4).
struct Strided4 {
  int64_t shape[4];
  int64_t stride[4];
};
cudaError_t copy_strided(void* dst, const Strided4& dst_view, const void* src, const Strided4& src_view,
                         int elem_bytes, cudaStream_t stream);

}  // namespace flashcheck::cuda
