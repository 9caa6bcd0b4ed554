// The GPU oracle's kernels and their launches (oracle_types.h). Compiled as C++17 device code, apart
// from the exact layer's C++20 headers; gpu_oracle.cpp is the host side.
#include "reference/cuda/budget_kernel.cuh"
#include "reference/cuda/reference_kernel.cuh"
#include "reference/cuda/verdict_kernel.cuh"

namespace fc::gpu::detail {

namespace {
constexpr int kWarps = 4;  // rows per block (a warp each)
unsigned grid_for(int64_t rows) { return unsigned((rows + kWarps - 1) / kWarps); }
}  // namespace

cudaError_t launch_reference(const Shape& s, const ReferenceOut& out) {
  const size_t smem = size_t(kWarps) * (s.d + 64) * sizeof(double);
  const cudaError_t e = cudaFuncSetAttribute(reference_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  reference_kernel<<<grid_for(s.rows()), 32 * kWarps, smem>>>(s, out);
  return cudaGetLastError();
}

cudaError_t launch_key_vmax(const Shape& s, double* key_vmax) {
  key_vmax_kernel<<<1024, 256>>>(s, key_vmax);
  return cudaGetLastError();
}

cudaError_t launch_budget(const Shape& s, const BudgetParams& bp, const BudgetIn& in, const BudgetOut& out) {
  const size_t smem = size_t(kWarps) * budget_smem_per_warp(s.d);
  const cudaError_t e = cudaFuncSetAttribute(budget_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  budget_kernel<<<grid_for(s.rows()), 32 * kWarps, smem>>>(s, bp, in, out);
  return cudaGetLastError();
}

cudaError_t launch_verdict(const Shape& s, const VerdictIn& in, VerdictSums* sums, double* best, int blocks) {
  verdict_kernel<<<blocks, 256>>>(s, in, sums, best);
  return cudaGetLastError();
}

cudaError_t launch_worst(const Shape& s, const VerdictIn& in, double threshold, Candidate* out,
                         unsigned long long* count, unsigned long long cap, int blocks) {
  worst_kernel<<<blocks, 256>>>(s, in, threshold, out, count, cap);
  return cudaGetLastError();
}

}  // namespace fc::gpu::detail
