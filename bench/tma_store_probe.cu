// Does compute-sanitizer's initcheck see global memory written by TMA stores? Kernel v2 writes O at d = 256
// through shared memory and cp.async.bulk.tensor stores (fwd_v2_kernel.cuh, kOThroughSmem), and initcheck
// then reports the host's copy of O as reading uninitialised memory, while every element compares equal
// to the host-buffer run of the same problem (test_cuda_attention: an output prefilled with 0xFF bytes).
// This probe separates the tool from the kernel: one 64 x 64 tile of 16-bit values, written once by a
// TMA store and once by ordinary stores, each into its own fresh allocation, then copied to the host and
// checked. Run it plainly (exit 0: both tiles hold the written values) and under
// `compute-sanitizer --tool initcheck` (which of the two copies it reports). With --read-unwritten a kernel
// also reads an allocation nothing wrote: the control of scripts/device/initcheck_kernel_reads.sh, which
// must tell that read (a kernel's) from the host copies of TMA-written memory.
//
//   tma_store_probe [--read-unwritten]
// Exit 1 when a tile does not hold the values, 2 on a CUDA error or an unknown argument.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.h"
#include "kernels/cuda/wgmma.h"

namespace {

constexpr int kRows = 64, kCols = 64;
constexpr uint16_t kValue = 0x3c00;  // 1.0 in fp16

// Every 16-bit value of the tile is kValue, so the 128-byte swizzle does not matter to the check.
__global__ void tma_store_tile(const __grid_constant__ CUtensorMap map) {
  __shared__ __align__(1024) uint16_t tile[kRows * kCols];
  for (int i = threadIdx.x; i < kRows * kCols; i += blockDim.x) tile[i] = kValue;
  flashcheck::cuda::tile::fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {
    flashcheck::cuda::tile::tma_store_4d(&map, static_cast<uint32_t>(__cvta_generic_to_shared(tile)), 0, 0, 0, 0);
    flashcheck::cuda::tile::bulk_commit_group();
    flashcheck::cuda::tile::bulk_wait_group<0>();
  }
}

__global__ void plain_store_tile(uint16_t* out) {
  for (int i = threadIdx.x; i < kRows * kCols; i += blockDim.x) out[i] = kValue;
}

// Reads memory that nothing wrote (the control's uninitialised read) and stores what it read, so that the
// load is not removed.
__global__ void read_unwritten(const uint16_t* unwritten, uint16_t* out) {
  out[threadIdx.x] = unwritten[threadIdx.x];
}

bool holds_value(const uint16_t* device, const char* what) {
  std::vector<uint16_t> host(kRows * kCols);
  if (cudaMemcpy(host.data(), device, host.size() * 2, cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  int wrong = 0;
  for (uint16_t v : host) wrong += v != kValue;
  std::printf("%s: %d of %d values differ from the written one\n", what, wrong, kRows * kCols);
  return wrong == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool read_unwritten_too = argc == 2 && std::string(argv[1]) == "--read-unwritten";
  if (argc > 2 || (argc == 2 && !read_unwritten_too)) {
    std::fprintf(stderr, "usage: tma_store_probe [--read-unwritten]\n");
    return 2;
  }
  uint16_t *by_tma = nullptr, *by_stores = nullptr;
  if (cudaMalloc(&by_tma, kRows * kCols * 2) != cudaSuccess || cudaMalloc(&by_stores, kRows * kCols * 2) != cudaSuccess) {
    std::fprintf(stderr, "tma_store_probe: cudaMalloc failed\n");
    return 2;
  }
  CUtensorMap map{};
  const int64_t strides[3] = {kRows * kCols, kRows * kCols, kCols};  // batch, head, row (elements)
  const std::string why = flashcheck::cuda::make_tile_map(&map, by_tma, 2, kCols, kRows, 1, 1, strides, kRows);
  if (!why.empty()) {
    std::fprintf(stderr, "tma_store_probe: %s\n", why.c_str());
    return 2;
  }
  tma_store_tile<<<1, 128>>>(map);
  plain_store_tile<<<1, 128>>>(by_stores);
  uint16_t *unwritten = nullptr, *read_back = nullptr;
  if (read_unwritten_too) {
    if (cudaMalloc(&unwritten, 64) != cudaSuccess || cudaMalloc(&read_back, 64) != cudaSuccess) {
      std::fprintf(stderr, "tma_store_probe: cudaMalloc failed\n");
      return 2;
    }
    read_unwritten<<<1, 32>>>(unwritten, read_back);
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::fprintf(stderr, "tma_store_probe: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  const bool ok = holds_value(by_tma, "TMA store") & holds_value(by_stores, "ordinary stores");
  cudaFree(by_tma);
  cudaFree(by_stores);
  cudaFree(unwritten);
  cudaFree(read_back);
  return ok ? 0 : 1;
}
