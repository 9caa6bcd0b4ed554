// Device side of the GPU oracle: reading the inputs' storage formats, the problem's visibility and
// offsets, the rows a block owns and the key chunks it stages, and warp reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "reference/cuda/oracle_types.h"

namespace fc::gpu::detail {

// The storage format as a compile-time constant: with_storage(s, f) calls f(StorageTag<S>{}) for S = s,
// the one place where a run-time format picks a template (a load is then the format's own). f is a device
// lambda in the kernels and a host one at a launch; the pragma lets the one template call either.
template <Storage S>
using StorageTag = std::integral_constant<Storage, S>;
#pragma nv_exec_check_disable
template <class F>
__host__ __device__ __forceinline__ decltype(auto) with_storage(Storage s, F&& f) {
  switch (s) {
    case Storage::f32: return f(StorageTag<Storage::f32>{});
    case Storage::f16: return f(StorageTag<Storage::f16>{});
    case Storage::bf16: return f(StorageTag<Storage::bf16>{});
    case Storage::e4m3: return f(StorageTag<Storage::e4m3>{});
    default: return f(StorageTag<Storage::e5m2>{});
  }
}

// A stored element's bits, and their value as a double, the format known at compile time (apart, so that
// a load can be issued ahead of its use and held in one 32-bit register).
template <Storage S>
__device__ __forceinline__ uint32_t stored_bits(const void* base, int64_t idx) {
  if constexpr (S == Storage::f32) return static_cast<const uint32_t*>(base)[idx];
  else if constexpr (S == Storage::f16 || S == Storage::bf16) return static_cast<const uint16_t*>(base)[idx];
  else return static_cast<const uint8_t*>(base)[idx];
}
template <Storage S>
__device__ __forceinline__ double stored_value(uint32_t bits) {
  if constexpr (S == Storage::f32) return static_cast<double>(__uint_as_float(bits));
  else if constexpr (S == Storage::f16) return static_cast<double>(__half2float(__ushort_as_half(uint16_t(bits))));
  else if constexpr (S == Storage::bf16) return static_cast<double>(__uint_as_float(bits << 16));
  else if constexpr (S == Storage::e4m3) {
    __nv_fp8_e4m3 x;
    x.__x = uint8_t(bits);
    return static_cast<double>(static_cast<float>(x));
  } else {
    __nv_fp8_e5m2 x;
    x.__x = uint8_t(bits);
    return static_cast<double>(static_cast<float>(x));
  }
}
// A stored element's true value: its stored value times the descale. Only the fp8 storages carry one (the
// fp8 recipes; every other recipe's descales are 1, gpu_oracle.cpp shape_of), so the others skip the
// multiply, which in the score kernel waited on the float64 pipe behind the tensor cores' products (its
// largest stall samples; Nsight Compute at (1, 4, 4096, 128) bf16, H200: 1.22 ms with it, 1.13 ms without).
template <Storage S>
__device__ __forceinline__ double descaled_value(uint32_t bits, double descale) {
  if constexpr (S == Storage::e4m3 || S == Storage::e5m2) return stored_value<S>(bits) * descale;
  else return stored_value<S>(bits);
}
template <Storage S>
__device__ __forceinline__ double load_as(const void* base, int64_t idx) {
  return stored_value<S>(stored_bits<S>(base, idx));
}

// A stored element as a double (exact: every storage format is a subset of double), the format known at
// run time.
__device__ __forceinline__ double load_stored(Storage s, const void* base, int64_t idx) {
  return with_storage(s, [&](auto tag) { return load_as<decltype(tag)::value>(base, idx); });
}

// |x| raised to mn where it is non-zero and below it (the tensor cores align a product of a subnormal
// operand at the format's smallest normal: reference/tensor_core_model.h); NaN gives mn.
__device__ __forceinline__ double align_mag(double x, double mn) {
  const double a = fabs(x);
  return a == 0 || a >= mn ? a : mn;
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

// A block owns rows_per_block consecutive query rows of one (batch, head), a warp each, and stages the
// key chunks they all read in shared memory as doubles (float64 loads from shared memory cost what a
// float load does; a float -> double conversion per use would cost four fp64 operations): K transposed
// (kT[c * kPitch + t], lane t reads key t, 32 consecutive doubles) and V row-major (vS[t * dv + c], lane c
// reads column c).
inline constexpr int kChunk = 32;
static_assert(kChunk == kSummaryKeys, "a key chunk is a chunk of the score cache's summaries");
inline constexpr int kPitch = kChunk + 1;  // staging writes (consecutive c) spread over the banks

// Shared-memory regions start on 16-byte boundaries.
__host__ __device__ constexpr size_t smem_align(size_t bytes) { return (bytes + 15) / 16 * 16; }
__host__ __device__ constexpr size_t staged_k_bytes(int d) { return smem_align(sizeof(double) * size_t(d) * kPitch); }
__host__ __device__ constexpr size_t staged_v_bytes(int dv) { return smem_align(sizeof(double) * size_t(kChunk) * dv); }

struct BlockRows {
  int b, h, hk, rows;
  int64_t i0, len;   // the first row's index, the batch's key length
  int64_t lo, hi;    // the union of the rows' key ranges (window and key length)
  int64_t r0;        // the first row's index in BHN order
};

// Keys [lo, hi) that query i may see under the window and the key length (the dense mask is per key).
__device__ __forceinline__ void row_key_range(const Shape& s, int64_t i, int64_t len, int64_t& lo, int64_t& hi) {
  lo = 0, hi = len;
  if (s.window_active) {
    const int64_t off = s.bottom_right ? len - s.n_q : 0;
    if (s.left >= 0) lo = max(lo, i + off - s.left);
    if (s.right >= 0) hi = min(hi, i + off + s.right + 1);
  }
  if (hi < lo) hi = lo;
}

// Whether row i sees key j, given the row's key range [lo, hi) from row_key_range: within it only the dense
// mask can hide a key (visibility.h key_visible), so the full test runs only where there is one.
__device__ __forceinline__ bool sees_key(const Shape& s, int64_t i, int64_t j, int64_t lo, int64_t hi, int64_t len) {
  return j >= lo && j < hi && (s.dense == nullptr || visible(s, i, j, len));
}

__device__ __forceinline__ BlockRows block_rows(const Shape& s, int64_t block) {
  const int64_t per_head = s.blocks_per_head(), g = s.block0 + block;
  const int64_t bh = g / per_head;
  BlockRows br;
  br.rows = s.rows_per_block;
  br.h = int(bh % s.heads_q);
  br.b = int(bh / s.heads_q);
  br.hk = br.h / s.group;
  br.i0 = (g % per_head) * br.rows;
  br.r0 = bh * s.n_q + br.i0;
  br.len = key_length(s, br.b);
  int64_t lo_first, hi_first, lo_last, hi_last;
  const int64_t last = min(br.i0 + br.rows, s.n_q) - 1;
  row_key_range(s, br.i0, br.len, lo_first, hi_first);
  row_key_range(s, last, br.len, lo_last, hi_last);
  // Both ends move monotonically with i. A row with no key in range has lo = hi, which can lie past the
  // key length (a window's left end beyond a short batch): no row sees a key there, and the union ends at
  // the key length so that the staging never reads past the batch's keys.
  br.hi = min(max(hi_first, hi_last), br.len);
  br.lo = min(min(lo_first, lo_last), br.hi);
  return br;
}
__device__ __forceinline__ BlockRows block_rows(const Shape& s) { return block_rows(s, blockIdx.x); }

// Copies n rows of `width` stored elements from src (row-major from element `base`) into shared memory,
// element (t, c) to dst[t * row_pitch + c * col_pitch], mapped by f; rows n..kChunk-1 get f(0). The
// block's threads walk the elements in order, stepping (t, c) without a division per element, and issue
// kStageBatch loads before the first store so that their latencies overlap.
inline constexpr int kStageBatch = 8;
template <Storage S, class F>
__device__ __forceinline__ void stage_rows(const void* src, int64_t base, int width, int n, double* dst,
                                           int row_pitch, int col_pitch, F f) {
  const int step_t = blockDim.x / width, step_c = blockDim.x % width, total = kChunk * width;
  int t = threadIdx.x / width, c = threadIdx.x % width;
  for (int x0 = threadIdx.x; x0 < total; x0 += kStageBatch * blockDim.x) {
    double v[kStageBatch];
    int at[kStageBatch];
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k) {
      const int x = x0 + k * int(blockDim.x);
      at[k] = x < total ? t * row_pitch + c * col_pitch : -1;
      v[k] = x < total && t < n ? load_as<S>(src, base + x) : 0.0;
      t += step_t, c += step_c;
      if (c >= width) c -= width, ++t;
    }
#pragma unroll
    for (int k = 0; k < kStageBatch; ++k)
      if (at[k] >= 0) dst[at[k]] = f(v[k]);
  }
}
template <class F>
__device__ __forceinline__ void stage_rows_any(Storage st, const void* src, int64_t base, int width, int n,
                                               double* dst, int row_pitch, int col_pitch, F f) {
  with_storage(st, [&](auto tag) {
    stage_rows<decltype(tag)::value>(src, base, width, n, dst, row_pitch, col_pitch, f);
  });
}

// Cooperative staging of keys [j0, j0 + n) (n <= kChunk) of (b, hk), each stored value mapped by f; the
// caller synchronises. Keys past n stage as f(0).
template <class F>
__device__ __forceinline__ void stage_k(const Shape& s, const BlockRows& br, int64_t j0, int n, double* kT, F f) {
  stage_rows_any(s.in, s.k, k_base(s, br.b, br.hk, j0), s.d, n, kT, 1, kPitch, f);
}
template <class F>
__device__ __forceinline__ void stage_v(const Shape& s, const BlockRows& br, int64_t j0, int n, double* vS, F f) {
  stage_rows_any(s.in, s.v, v_base(s, br.b, br.hk, j0), s.dv, n, vS, s.dv, 1, f);
}

// Eight bytes from device to shared memory by the copy engine, issued by this thread and completed for
// it by cp_async_wait_all (or cp_async_wait_prior, which leaves the latest group in flight): the data lies
// in device memory, and its latency hides behind other work.
__device__ __forceinline__ void cp_async_8(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src) : "memory");
}
// Four bytes (a float).
__device__ __forceinline__ void cp_async_4(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
// Sixteen bytes (both addresses 16-byte aligned), through L2 only (.cg: the data is read once per block).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
// A hint that brings the line holding p into L2 ahead of its load: no register and no wait, for device
// memory whose latency the loads' own registers cannot be spent to hide.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_prior() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// The first chunk start at or below key lo: chunks start at multiples of kChunk, so that a chunk never
// straddles a softmax step that is a multiple of kChunk keys wide.
__device__ __forceinline__ int64_t chunk_floor(int64_t lo) { return lo / kChunk * kChunk; }

// Element c of a small register array whose index is known only at run time, by selects: an indexed
// access puts the array in local memory (the budget's segment masks did, a load per chunk).
template <int N>
__device__ __forceinline__ unsigned pick(const unsigned (&a)[N], int c) {
  unsigned r = a[0];
#pragma unroll
  for (int k = 1; k < N; ++k) r = c == k ? a[k] : r;
  return r;
}
template <int N>
__device__ __forceinline__ void put(unsigned (&a)[N], int c, unsigned v) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (c == k) a[k] = v;
}

__device__ __forceinline__ double warp_sum(double x) {
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}
// Inputs without NaN (-inf allowed): a compare and a select a step, where fmax's NaN handling took about
// thirteen instructions a step for doubles.
__device__ __forceinline__ double warp_max(double x) {
  for (int off = 16; off > 0; off /= 2) {
    const double y = __shfl_xor_sync(0xffffffffu, x, off);
    x = y > x ? y : x;
  }
  return x;
}
__device__ __forceinline__ int64_t warp_sum_i(int64_t x) {
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

}  // namespace fc::gpu::detail
