// Device layer: strided 4-D element copy. The runner uses it to repack views that the fused kernel cannot
// read directly (innermost stride != 1, rows not 16-byte aligned) and to scatter into such outputs.
#include <cstdint>

#include "fwd_dispatch.h"

namespace flashcheck::cuda {

namespace {

template <typename T>
__global__ void copy_strided_kernel(T* dst, Strided4 dv, const T* src, Strided4 sv, long long total) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long r = i;
    const long long c = r % sv.shape[3]; r /= sv.shape[3];
    const long long n = r % sv.shape[2]; r /= sv.shape[2];
    const long long h = r % sv.shape[1];
    const long long b = r / sv.shape[1];
    dst[b * dv.stride[0] + h * dv.stride[1] + n * dv.stride[2] + c * dv.stride[3]] =
        src[b * sv.stride[0] + h * sv.stride[1] + n * sv.stride[2] + c * sv.stride[3]];
  }
}

template <typename T>
cudaError_t launch(void* dst, const Strided4& dv, const void* src, const Strided4& sv, cudaStream_t stream) {
  const long long total = sv.shape[0] * sv.shape[1] * sv.shape[2] * sv.shape[3];
  if (total == 0) return cudaSuccess;
  const long long want = (total + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want < 65535 ? want : 65535);
  copy_strided_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<T*>(dst), dv, static_cast<const T*>(src), sv, total);
  return cudaGetLastError();
}

}  // namespace

cudaError_t copy_strided(void* dst, const Strided4& dst_view, const void* src, const Strided4& src_view,
                         int elem_bytes, cudaStream_t stream) {
  switch (elem_bytes) {
    case 1: return launch<uint8_t>(dst, dst_view, src, src_view, stream);
    case 2: return launch<uint16_t>(dst, dst_view, src, src_view, stream);
    case 4: return launch<uint32_t>(dst, dst_view, src, src_view, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace flashcheck::cuda
