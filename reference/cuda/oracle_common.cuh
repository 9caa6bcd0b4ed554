// Device side of the GPU oracle: reading the inputs' storage formats, the problem's visibility and
// offsets, the row a warp owns, and warp reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "reference/cuda/oracle_types.h"

namespace fc::gpu::detail {

// A stored element as a double (exact: every storage format is a subset of double).
__device__ __forceinline__ double load_stored(Storage s, const void* base, int64_t idx) {
  switch (s) {
    case Storage::f32: return static_cast<double>(static_cast<const float*>(base)[idx]);
    case Storage::f16: return static_cast<double>(__half2float(__ushort_as_half(static_cast<const uint16_t*>(base)[idx])));
    case Storage::bf16:
      return static_cast<double>(__uint_as_float(uint32_t(static_cast<const uint16_t*>(base)[idx]) << 16));
    case Storage::e4m3: {
      __nv_fp8_e4m3 x;
      x.__x = static_cast<const uint8_t*>(base)[idx];
      return static_cast<double>(static_cast<float>(x));
    }
    default: {
      __nv_fp8_e5m2 x;
      x.__x = static_cast<const uint8_t*>(base)[idx];
      return static_cast<double>(static_cast<float>(x));
    }
  }
}

__device__ __forceinline__ int64_t key_length(const Shape& s, int b) { return s.key_lengths ? s.key_lengths[b] : s.n_k; }
__device__ __forceinline__ bool visible(const Shape& s, int64_t i, int64_t j, int64_t len) {
  return key_visible(i, j, s.n_q, len, s.window_active, s.left, s.right, s.bottom_right,
                     s.dense ? s.dense[i * s.n_k + j] != 0 : true);
}
__device__ __forceinline__ int64_t q_base(const Shape& s, int b, int h, int64_t i) {
  return ((int64_t(b) * s.heads_q + h) * s.n_q + i) * s.d;
}
__device__ __forceinline__ int64_t k_base(const Shape& s, int b, int hk, int64_t j) {
  return ((int64_t(b) * s.heads_kv + hk) * s.n_k + j) * s.d;
}
__device__ __forceinline__ int64_t v_base(const Shape& s, int b, int hk, int64_t j) {
  return ((int64_t(b) * s.heads_kv + hk) * s.n_k + j) * s.dv;
}

// The row a warp owns: (b, h, i) of row index r in BHN order.
struct Row {
  int b, h, hk;
  int64_t i, r, len;
};
__device__ __forceinline__ Row row_of(const Shape& s, int64_t r) {
  Row w;
  w.r = r;
  w.i = r % s.n_q;
  const int64_t bh = r / s.n_q;
  w.h = int(bh % s.heads_q);
  w.b = int(bh / s.heads_q);
  w.hk = w.h / s.group;
  w.len = key_length(s, w.b);
  return w;
}

__device__ __forceinline__ double warp_sum(double x) {
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}
__device__ __forceinline__ double warp_max(double x) {  // NaN-free inputs
  for (int off = 16; off > 0; off /= 2) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ __forceinline__ int64_t warp_sum_i(int64_t x) {
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

}  // namespace fc::gpu::detail
