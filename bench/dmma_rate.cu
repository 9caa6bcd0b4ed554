// The float64 tensor cores' issue rate per mma shape (m8n8k4, and sm_90's m16n8k4, m16n8k8, m16n8k16): each
// warp runs eight independent accumulator chains, so that the rate, not a chain's latency, is measured.
// Chose the shape of the GPU oracle's score kernel and tiled reference (reference/cuda/dmma.cuh).
// Usage: dmma_rate [blocks per SM (default 2)]; prints TFLOP/s per shape (CUDA events, the median of 5).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

template <int kM, int kK>
__device__ __forceinline__ void mma(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
  if constexpr (kM == 8)
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
        : "+d"(d[0]), "+d"(d[1]) : "d"(a[0]), "d"(b[0]));
  else if constexpr (kK == 4)
    asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3]) : "d"(a[0]), "d"(a[1]), "d"(b[0]));
  else
    asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}

template <int kM, int kK>
__global__ void rate_kernel(int iters, double seed, double* out) {
  double d[8][4] = {}, a[4], b[2];
  for (int x = 0; x < 4; ++x) a[x] = seed * (threadIdx.x + x + 1);
  for (int x = 0; x < 2; ++x) b[x] = seed * (threadIdx.x - x);
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int c = 0; c < 8; ++c) mma<kM, kK>(d[c], a, b);
  double s = 0;
  for (int c = 0; c < 8; ++c)
    for (int e = 0; e < 4; ++e) s += d[c][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;  // keeps the chains live
}

template <int kM, int kK>
double tflops(int blocks, int threads, int iters, double* out) {
  rate_kernel<kM, kK><<<blocks, threads>>>(8, 1e-3, out);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms(5);
  for (float& m : ms) {
    cudaEventRecord(e0);
    rate_kernel<kM, kK><<<blocks, threads>>>(iters, 1e-3, out);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&m, e0, e1);
  }
  std::sort(ms.begin(), ms.end());
  const double flops = 2.0 * kM * 8 * kK * 8 * double(iters) * blocks * (threads / 32);
  return flops / (ms[2] * 1e-3) / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  const int per_sm = argc > 1 ? std::atoi(argv[1]) : 2;
  cudaDeviceProp prop;
  if (per_sm < 1 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "dmma_rate: %s\n", per_sm < 1 ? "blocks per SM must be >= 1" : "no CUDA device");
    return 2;
  }
  const int threads = 256, blocks = prop.multiProcessorCount * per_sm;
  double* out = nullptr;
  if (cudaMalloc(&out, sizeof(double) * blocks * threads) != cudaSuccess) return 1;
  const double r884 = tflops<8, 4>(blocks, threads, 4000, out), r1684 = tflops<16, 4>(blocks, threads, 2000, out),
               r1688 = tflops<16, 8>(blocks, threads, 1000, out);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "dmma_rate: %s\n", cudaGetErrorString(e));
    return 1;
  }
  std::printf("%s, %d SMs, %d blocks of %d threads: float64 mma m8n8k4 %.1f, m16n8k4 %.1f, m16n8k8 %.1f TFLOP/s\n",
              prop.name, prop.multiProcessorCount, blocks, threads, r884, r1684, r1688);
  cudaFree(out);
  return 0;
}
