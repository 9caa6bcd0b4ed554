// properties/cuda/device_inputs.h on the GPU.
#include "properties/cuda/device_inputs.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "flashcheck/plugin.h"

namespace {

__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_kernel(void* dst, size_t n, int recipe, uint64_t seed, int tensor, float descale) {
  for (size_t x = size_t(blockIdx.x) * blockDim.x + threadIdx.x; x < n; x += size_t(gridDim.x) * blockDim.x) {
    const uint64_t h = mix(seed * 0x100000001B3ull ^ (uint64_t(tensor) << 56) ^ x);
    const double u1 = (double(h >> 11) + 0.5) * 0x1p-53, u2 = (double(mix(h) >> 11) + 0.5) * 0x1p-53;
    const float v = float(sqrt(-2 * log(u1)) * cospi(2 * u2)) / descale;
    if (recipe == FC_RECIPE_BF16) static_cast<__nv_bfloat16*>(dst)[x] = __float2bfloat16_rn(v);
    else if (recipe == FC_RECIPE_FP16) static_cast<__half*>(dst)[x] = __float2half_rn(v);
    else if (recipe == FC_RECIPE_FP8_E4M3) static_cast<__nv_fp8_e4m3*>(dst)[x] = __nv_fp8_e4m3(v);
    else static_cast<__nv_fp8_e5m2*>(dst)[x] = __nv_fp8_e5m2(v);
  }
}

}  // namespace

cudaError_t fill_normal_on_device(void* dst, size_t n, int recipe, uint64_t seed, int tensor, float descale) {
  fill_kernel<<<4096, 256>>>(dst, n, recipe, seed, tensor, descale);
  return cudaGetLastError();
}
