// Kernel layer: fused forward for the fp32 recipe on CUDA cores (no tensor-core fp32 MMA exists; tf32
// would change the rounding). Deliberately simple: one warp per query row, 4 rows per block, key tiles of
// 32 keys staged in shared memory. Same masks, GQA, split-KV workspace and LSE as the tensor-core kernel.
//
// Rounding points (differ from softmax.h only where the fp32 path has no MMA):
//  s_ij  = fp32 dot product, one fmaf per element in order c = 0 .. d-1 starting from 0:
//          s <- fmaf(q_c, k_c, s).  Lane j of the warp computes key n0 + j of the tile.
//  m, mc, p, alpha: exactly as softmax.h (ex2.approx.ftz.f32, one fmaf for the exponent argument).
//  P~ = p (no rounding: the input format is fp32).
//  l   per tile: the 32 lanes' p are summed by an xor butterfly (offsets 16, 8, 4, 2, 1; each step
//      x <- fl32(x + shfl_xor(x, off))), then l <- fl32(fl32(l * alpha) + tile_sum).
//  a   a_c <- fl32(a_c * alpha), then for j = 0 .. 31: a_c <- fmaf(p_j, v_jc, a_c).
//  O   fl32(a_c * fl32(1/l)); LSE as softmax.h. Tile options do not apply (one fixed tiling).
#include <cmath>

#include "fwd_dispatch.h"
#include "head_dim_dispatch.h"
#include "mask.h"
#include "mma.h"
#include "normalise.h"

namespace flashcheck::cuda {

namespace {

constexpr int kRowsPerBlock = fc::tiles::kSimtFp32Tile.m;
constexpr int kKeysPerTile = fc::tiles::kSimtFp32Tile.n;

template <int kD>
__global__ void __launch_bounds__(kRowsPerBlock * 32) fwd_fp32_kernel(const FwdParams p) {
  constexpr int kPerLane = kD / 32;
  extern __shared__ float smem_f[];
  float* s_k = smem_f;                                  // [32][kD + 1]: +1 so lane j reading row j is conflict-free
  float* s_v = s_k + kKeysPerTile * (kD + 1);           // [32][kD]
  float* s_q = s_v + kKeysPerTile * kD;                 // [4][kD]

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int h = blockIdx.y / p.num_splits;
  const int split = blockIdx.y % p.num_splits;
  const int b = blockIdx.z;
  const int h_kv = h / p.group;
  const int m0 = blockIdx.x * kRowsPerBlock;
  const int row = m0 + warp;
  const int row_last = min(m0 + kRowsPerBlock, p.n_q) - 1;

  const RowMask mask = RowMask::make(p, b);
  int key_lo, key_hi;
  mask.key_range(m0, row_last, key_lo, key_hi);
  int nb_begin, nb_end;
  split_block_range(key_lo, key_hi, kKeysPerTile, p.num_splits, split, nb_begin, nb_end);

  const float* q_g = static_cast<const float*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
  const float* k_g = static_cast<const float*>(p.k) + b * p.k_stride[0] + h_kv * p.k_stride[1];
  const float* v_g = static_cast<const float*>(p.v) + b * p.v_stride[0] + h_kv * p.v_stride[1];

  for (int i = threadIdx.x; i < kRowsPerBlock * kD; i += blockDim.x) {
    const int r = i / kD, c = i % kD;
    s_q[i] = (m0 + r < p.n_q) ? q_g[static_cast<long long>(m0 + r) * p.q_stride[2] + c] : 0.0f;
  }

  float acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const float c = p.scale_log2;

  for (int nb = nb_begin; nb < nb_end; ++nb) {
    const int n0 = nb * kKeysPerTile;
    __syncthreads();  // previous tile fully consumed (and s_q written on the first pass)
    for (int i = threadIdx.x; i < kKeysPerTile * kD; i += blockDim.x) {
      const int r = i / kD, cc = i % kD;
      const bool valid = n0 + r < mask.kv_len;
      s_k[r * (kD + 1) + cc] = valid ? k_g[static_cast<long long>(n0 + r) * p.k_stride[2] + cc] : 0.0f;
      s_v[r * kD + cc] = valid ? v_g[static_cast<long long>(n0 + r) * p.v_stride[2] + cc] : 0.0f;
    }
    __syncthreads();

    float s = 0.0f;
    const float* qr = s_q + warp * kD;
    const float* kr = s_k + lane * (kD + 1);
#pragma unroll 8
    for (int cc = 0; cc < kD; ++cc) s = __fmaf_rn(qr[cc], kr[cc], s);
    if (row >= p.n_q || !mask.allowed(row, n0 + lane)) s = -INFINITY;

    float mx = s;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    mx = fmaxf(m, mx);
    const bool empty = mx == -INFINITY;
    const float alpha = empty ? 1.0f : tile::ex2(__fmul_rn(__fsub_rn(m, mx), c));
    const float mc = empty ? 0.0f : __fmul_rn(mx, c);
    m = mx;
    const float pv = tile::ex2(__fmaf_rn(s, c, -mc));
    float tile_sum = pv;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) tile_sum = __fadd_rn(tile_sum, __shfl_xor_sync(0xffffffffu, tile_sum, off));
    l = __fadd_rn(__fmul_rn(l, alpha), tile_sum);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] = __fmul_rn(acc[i], alpha);
    // Keys masked for this row are skipped, not multiplied by 0: a NaN in V there must not reach it.
    const unsigned seen = __ballot_sync(0xffffffffu, s != -INFINITY);
#pragma unroll 4
    for (int j = 0; j < kKeysPerTile; ++j) {
      const float pj = __shfl_sync(0xffffffffu, pv, j);
      if (!((seen >> j) & 1u)) continue;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[i] = __fmaf_rn(pj, s_v[j * kD + lane + 32 * i], acc[i]);
    }
  }

  if (row >= p.n_q) return;
  if (p.num_splits == 1) {
    float* o_row = static_cast<float*>(p.o) + b * p.o_stride[0] + h * p.o_stride[1] + row * p.o_stride[2];
    const float inv = inverse_l(l);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) o_row[lane + 32 * i] = normalised(acc[i], l, inv);
    if (p.lse && lane == 0)
      p.lse[lse_index(p, b, h, row)] = row_lse(m, l, p.scale_eff, p.lse_offset);
  } else {
    const long long idx = split_state_index(p, split, b, h, row);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) p.ws_acc[idx * kD + lane + 32 * i] = acc[i];
    if (lane == 0) {
      p.ws_m[idx] = m;
      p.ws_l[idx] = l;
    }
  }
}

template <int kD>
cudaError_t launch_fp32(const FwdParams& p, cudaStream_t stream) {
  const int smem = (kKeysPerTile * (kD + 1) + kKeysPerTile * kD + kRowsPerBlock * kD) * static_cast<int>(sizeof(float));
  cudaError_t err = cudaFuncSetAttribute(fwd_fp32_kernel<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.n_q + kRowsPerBlock - 1) / kRowsPerBlock, p.heads_q * p.num_splits, p.batch);
  fwd_fp32_kernel<kD><<<grid, kRowsPerBlock * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t run_fused_fp32(const FwdParams& p, cudaStream_t stream) {
  return dispatch_head_dim(p.d, [&](auto d) { return launch_fp32<decltype(d)::value>(p, stream); });
}

}  // namespace flashcheck::cuda
