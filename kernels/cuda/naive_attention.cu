// Kernel layer: the naive baseline, a second GPU subject. It materialises S and P in global memory
// (batch * heads_q * n_q * n_k fp32 values): one GEMM kernel writes S, one kernel turns each row into P in
// place, a second GEMM kernel computes P.V. It exists to show what fusion saves (memory traffic and the
// O(N^2) footprint), not to be fast. Masks, GQA and key lengths as in the fused kernel.
//
// Rounding: s = sequential fmaf dot over c = 0 .. d-1; per row m = max, p = ex2(fmaf(s, c, -fl32(m c))),
// P~ = p rounded to the input format (fp16/bf16; fp32: none), stored as fp32; l = block tree sum of P~
// (256 threads, strided partial sums then a shared-memory halving tree); O = fl32(fmaf-sequential
// sum_j P~_ij V_jk over the row's visible keys j) * fl32(1/l), rounded to the output format.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "fwd_dispatch.h"
#include "mask.h"
#include "mma.h"
#include "normalise.h"

namespace flashcheck::cuda {

namespace {

template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ float round_p(float x);
template <> __device__ __forceinline__ float round_p<float>(float x) { return x; }
template <> __device__ __forceinline__ float round_p<__half>(float x) { return __half2float(__float2half_rn(x)); }
template <> __device__ __forceinline__ float round_p<__nv_bfloat16>(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

constexpr int kTile = 16;

// S[bh, i, j] = q_i . k_j, or -inf where masked. Block = 16x16 (rows i x keys j), grid.z = batch*heads_q.
template <typename T>
__global__ void naive_scores(const FwdParams p, float* s_out) {
  __shared__ float sq[kTile][kTile + 1];
  __shared__ float sk[kTile][kTile + 1];
  const int bh = blockIdx.z;
  const int b = bh / p.heads_q, h = bh % p.heads_q, h_kv = h / p.group;
  const int i = blockIdx.y * kTile + threadIdx.y;
  const int j = blockIdx.x * kTile + threadIdx.x;
  const T* q = static_cast<const T*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
  const T* k = static_cast<const T*>(p.k) + b * p.k_stride[0] + h_kv * p.k_stride[1];
  float s = 0.0f;
  for (int c0 = 0; c0 < p.d; c0 += kTile) {
    const int qi = blockIdx.y * kTile + threadIdx.y, kj = blockIdx.x * kTile + threadIdx.y;
    sq[threadIdx.y][threadIdx.x] = qi < p.n_q ? to_f(q[qi * p.q_stride[2] + c0 + threadIdx.x]) : 0.0f;
    sk[threadIdx.y][threadIdx.x] = kj < p.n_k ? to_f(k[kj * p.k_stride[2] + c0 + threadIdx.x]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kTile; ++c) s = __fmaf_rn(sq[threadIdx.y][c], sk[threadIdx.x][c], s);
    __syncthreads();
  }
  if (i >= p.n_q || j >= p.n_k) return;
  const RowMask mask = RowMask::make(p, b);
  s_out[(static_cast<long long>(bh) * p.n_q + i) * p.n_k + j] = mask.allowed(i, j) ? s : -INFINITY;
}

// One block per row: S -> P~ in place, l to row_sum.
template <typename T>
__global__ void naive_softmax(const FwdParams p, float* s_io, float* row_sum) {
  __shared__ float red[256];
  const long long row = blockIdx.x;
  float* s = s_io + row * p.n_k;
  const float c = p.scale_log2;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < p.n_k; j += blockDim.x) mx = fmaxf(mx, s[j]);
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  const float mc = mx == -INFINITY ? 0.0f : __fmul_rn(mx, c);
  float part = 0.0f;
  for (int j = threadIdx.x; j < p.n_k; j += blockDim.x) {
    const float pv = round_p<T>(tile::ex2(__fmaf_rn(s[j], c, -mc)));
    s[j] = pv;
    part = __fadd_rn(part, pv);
  }
  red[threadIdx.x] = part;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = __fadd_rn(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    row_sum[row] = red[0];
    if (p.lse)
      p.lse[row] = row_lse(mx, red[0], p.scale_eff, p.lse_offset);  // lse_offset = 0: no fp8 here
  }
}

// O[bh, i, c] = (sum_j P~_ij V_jc) / l_i. Block = 16x16 (rows i x columns c).
template <typename T>
__global__ void naive_pv(const FwdParams p, const float* prob, const float* row_sum) {
  __shared__ float sp[kTile][kTile + 1];
  __shared__ float sv[kTile][kTile + 1];
  const int bh = blockIdx.z;
  const int b = bh / p.heads_q, h = bh % p.heads_q, h_kv = h / p.group;
  const int i = blockIdx.y * kTile + threadIdx.y;
  const int c = blockIdx.x * kTile + threadIdx.x;
  const T* v = static_cast<const T*>(p.v) + b * p.v_stride[0] + h_kv * p.v_stride[1];
  const float* pr = prob + static_cast<long long>(bh) * p.n_q * p.n_k;
  const RowMask mask = RowMask::make(p, b);
  float a = 0.0f;
  for (int j0 = 0; j0 < p.n_k; j0 += kTile) {
    const int pj = j0 + threadIdx.x, vj = j0 + threadIdx.y;
    sp[threadIdx.y][threadIdx.x] = (i < p.n_q && pj < p.n_k) ? pr[static_cast<long long>(i) * p.n_k + pj] : 0.0f;
    sv[threadIdx.y][threadIdx.x] = vj < p.n_k ? to_f(v[vj * p.v_stride[2] + c]) : 0.0f;
    __syncthreads();
    // A masked key is not read: its P is 0, but 0 * NaN would still reach the row.
    if (i < p.n_q) {
#pragma unroll
      for (int j = 0; j < kTile; ++j)
        if (j0 + j < p.n_k && mask.allowed(i, j0 + j)) a = __fmaf_rn(sp[threadIdx.y][j], sv[j][threadIdx.x], a);
    }
    __syncthreads();
  }
  if (i >= p.n_q) return;
  const float l = row_sum[static_cast<long long>(bh) * p.n_q + i];
  T* o = static_cast<T*>(p.o) + b * p.o_stride[0] + h * p.o_stride[1] + i * p.o_stride[2];
  o[c] = from_f<T>(normalised(a, l, inverse_l(l)));
}

template <typename T>
cudaError_t naive_for(const FwdParams& p, float* ws, float* row_sum, cudaStream_t stream) {
  const int bh = p.batch * p.heads_q;
  const dim3 block(kTile, kTile);
  naive_scores<T><<<dim3((p.n_k + kTile - 1) / kTile, (p.n_q + kTile - 1) / kTile, bh), block, 0, stream>>>(p, ws);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  naive_softmax<T><<<static_cast<unsigned>(static_cast<long long>(bh) * p.n_q), 256, 0, stream>>>(p, ws, row_sum);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  naive_pv<T><<<dim3(p.d / kTile, (p.n_q + kTile - 1) / kTile, bh), block, 0, stream>>>(p, ws, row_sum);
  return cudaGetLastError();
}

}  // namespace

cudaError_t run_naive(Recipe recipe, const FwdParams& p, float* workspace, float* row_sum, cudaStream_t stream) {
  switch (recipe) {
    case Recipe::kFp32: return naive_for<float>(p, workspace, row_sum, stream);
    case Recipe::kFp16: return naive_for<__half>(p, workspace, row_sum, stream);
    case Recipe::kBf16: return naive_for<__nv_bfloat16>(p, workspace, row_sum, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace flashcheck::cuda
