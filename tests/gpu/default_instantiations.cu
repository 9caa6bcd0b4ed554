// The forward instantiations that the tile policy (kernels/tile_policy.h) picks by default, and nothing else, so
// that check_spills.py can read ptxas's report of exactly these: issue #5 asks for no local-memory
// spills in the default instantiations; kernel v2's (both formats, each head dim, with its guarded redo)
// are here too. Compiled only by that test (nvcc -Xptxas -v), never linked.
// FC_KNOWN_SPILLER adds instead one instantiation that is known to spill with CUDA 13.0 (bf16, d = 128,
// 128x64, l from fp32 p): the check's own test that it sees a spill when there is one.
// FC_KNOWN_SERIALIZER adds instead a kernel that writes a wgmma's accumulator before waiting for it, which
// ptxas must serialize: the control of the check that no kernel's wgmmas are serialized.
// FC_KNOWN_HOISTED_WAIT compiles instead one v2 kernel whose wait for P~ V shares the softmax step's block
// (FC_BUG_HOISTED_WAIT), which ptxas hoists above it: the control of check_sass_overlap.py.
#if defined(FC_KNOWN_HOISTED_WAIT)
#define FC_BUG_HOISTED_WAIT
#endif
#include "fwd_launch.cuh"
#include "fwd_v2_kernel.cuh"

namespace flashcheck::cuda {

constexpr long long kLong = 1 << 20;  // a sequence length above every length rule of the policy
using fc::tiles::default_tile_index;

#if defined(FC_KNOWN_HOISTED_WAIT)
template __global__ void fwd_v2_kernel<FwdV2Traits<Bf16, 128, 128>, false>(
    const __grid_constant__ FwdParams, const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
#elif defined(FC_KNOWN_SERIALIZER)
__global__ void known_serializer(float* out, uint64_t desc_a, uint64_t desc_b) {
  float d[16][4];
  tile::wgmma_fence();
  tile::wgmma_ss(tile::WgmmaBF16{}, d, desc_a, desc_b, 0);
  d[0][0] = 1.0f;  // an ordinary definition of an accumulator inside the wgmma's stage
  tile::wgmma_ss(tile::WgmmaBF16{}, d, desc_a, desc_b, 1);
  tile::wgmma_commit();
  tile::wgmma_wait<0>();
  for (int j = 0; j < 16; ++j)
    for (int e = 0; e < 4; ++e) out[threadIdx.x * 64 + 4 * j + e] = d[j][e];
}
#elif !defined(FC_KNOWN_SPILLER)
// v1's forward kernels themselves (not launch_tile, which would also compile each one's NaN redo kernel,
// a kernel the criterion leaves out).
#define FC_DEFAULT_V1(E, D, FP8, CAUSAL, N) \
  template __global__ void fwd_kernel<tile_traits_t<E, D, default_tile_index(D, FP8, CAUSAL, N)>>(const FwdParams);
#define FC_DEFAULT_16BIT(D) FC_DEFAULT_V1(Fp16, D, false, false, kLong) FC_DEFAULT_V1(Bf16, D, false, false, kLong)
#define FC_DEFAULT_FP8(D) FC_DEFAULT_V1(E4M3, D, true, false, kLong) FC_DEFAULT_V1(E5M2, D, true, false, kLong)
FC_DEFAULT_16BIT(32)
FC_DEFAULT_16BIT(64)
FC_DEFAULT_16BIT(96)
FC_DEFAULT_16BIT(128)
FC_DEFAULT_16BIT(256)
FC_DEFAULT_FP8(32)
FC_DEFAULT_FP8(64)
FC_DEFAULT_FP8(96)
FC_DEFAULT_FP8(128)
FC_DEFAULT_FP8(256)
// Short causal sequences at d = 64 (the only length/mask rule of the policy).
FC_DEFAULT_V1(Fp16, 64, false, true, 1024)
FC_DEFAULT_V1(Bf16, 64, false, true, 1024)
// Kernel v2: 16 kernels (the 128-row tile at each head dim, and d = 64's taller tile).
#define FC_V2(E, D, M, G)                                                                                \
  template __global__ void fwd_v2_kernel<FwdV2Traits<E, D, M>, G>(                                       \
      const __grid_constant__ FwdParams, const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap, \
      const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
#define FC_V2_DIM(D, M) \
  FC_V2(Fp16, D, M, false) FC_V2(Fp16, D, M, true) FC_V2(Bf16, D, M, false) FC_V2(Bf16, D, M, true)
FC_V2_DIM(64, 128)
FC_V2_DIM(64, fc::tiles::v2_tall_tile(64).m)
FC_V2_DIM(128, 128)
FC_V2_DIM(256, 128)
#else
template cudaError_t launch_tile<Bf16, 128, 0, false, true>(const FwdParams&, cudaStream_t);
#endif

}  // namespace flashcheck::cuda
