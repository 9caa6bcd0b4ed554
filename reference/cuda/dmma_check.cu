// The assumption the score kernel and the tiled reference rest on (dmma.cuh), checked on the device it runs
// on: every element of an m16n8k4 float64 product is the fma chain over its four products in ascending
// order. Operands are drawn on the device from a counter-based hash: values of every exponent range the
// oracle meets, deep subnormal products, zeros, and C near -A·B (cancellation).
#include <cstdint>

#include "reference/cuda/dmma.cuh"
#include "reference/cuda/oracle_types.h"

namespace fc::gpu::detail {
namespace {

__device__ uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A double of test t, slot k: a uniform significand in (-1, 1) scaled per mode.
__device__ double draw(uint64_t seed, int64_t t, int k, int mode) {
  const uint64_t h = mix(seed ^ mix(uint64_t(t) * 64 + uint64_t(k)));
  const double x = (double(h >> 11) * 0x1p-53) * 2 - 1;
  const int e = int(h & 63) - 32;
  switch (mode) {
    case 0: return x;
    case 1: return ldexp(x, e);           // exponents spread over 2^±32
    case 2: return ldexp(x, -540 + e);    // products near the subnormal range
    case 3: return ldexp(x, -1000 + e);   // subnormal operands
    case 4: return (h & 3) == 0 ? 0.0 : ldexp(rint(x * 256), e);  // short significands and zeros (exact sums)
    default: return ldexp(x, 16 * e);     // exponents spread over 2^±512
  }
}

__global__ void dmma_check_kernel(uint64_t seed, int64_t tests, bool descending, unsigned long long* mismatches) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  unsigned long long bad = 0;
  for (int64_t k = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; k < tests; k += warps) {
    const int mode = int(k % 7);
    // A is 16 x 4 (slot 4 row + col), B 4 x 8 (slot 64 + 8 row + col), C 16 x 8 (slot 128 + 8 row + col).
    auto A = [&](int r, int c) { return draw(seed, k, 4 * r + c, mode % 6); };
    auto B = [&](int r, int c) { return draw(seed, k, 64 + 8 * r + c, mode % 6); };
    auto C = [&](int r, int c) {
      if (mode != 6) return draw(seed, k, 128 + 8 * r + c, mode);
      double s = 0;  // cancellation: C = -(A·B) rounded
      for (int x = 0; x < 4; ++x) s = fma(A(r, x), B(x, c), s);
      return -s;
    };
    double d[4] = {C(g, 2 * t), C(g, 2 * t + 1), C(g + 8, 2 * t), C(g + 8, 2 * t + 1)};
    dmma_16x8x4(d, A(g, t), A(g + 8, t), B(t, g));
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e / 2), c = 2 * t + e % 2;
      double chain = C(r, c);
      for (int y = 0; y < 4; ++y) {
        const int x = descending ? 3 - y : y;
        chain = fma(A(r, x), B(x, c), chain);
      }
      const bool same = __double_as_longlong(chain) == __double_as_longlong(d[e]) || (chain != chain && d[e] != d[e]);
      bad += same ? 0 : 1;
    }
  }
  if (bad) atomicAdd(mismatches, bad);
}

}  // namespace

int64_t dmma_chain_mismatches(uint64_t seed, int64_t tests, bool descending) {
  unsigned long long* count = nullptr;
  if (cudaMalloc(&count, sizeof(*count)) != cudaSuccess) return -1;
  unsigned long long host = 0;
  cudaError_t e = cudaMemset(count, 0, sizeof(*count));
  if (e == cudaSuccess) {
    dmma_check_kernel<<<264, 256>>>(seed, tests, descending, count);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(&host, count, sizeof(host), cudaMemcpyDeviceToHost);
  cudaFree(count);
  return e == cudaSuccess ? int64_t(host) : -1;
}

}  // namespace fc::gpu::detail
