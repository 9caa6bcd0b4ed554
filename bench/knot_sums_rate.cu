// How fast, and how loose, the budget's centred sums are through knots on the fp16 tensor cores
// (docs/gpu-oracle.md, "Where the time goes"). Per element (i, c) the budget needs, for its two centred weights m
// (the deterministic one and the probabilistic model's), S_m(i, c) = sum_j W_m[i, j] |V[j, c] - O[i, c]|: today a
// per-(row, key, column) fp32 loop, the GPU oracle's largest cost. |V - o| is convex in o, so for o = O[i, c]
// between two knots lo <= o <= hi,
//   S_m(i, c) <= ((hi - o) F_m(lo) + (o - lo) F_m(hi)) / (hi - lo),  F_m(t)(i, c) = sum_j W_m[i, j] |V[j, c] - t|,
// and each F_m(t) is a matrix product. Here lo and hi are the smallest and largest O of each 16 rows (one mma tile)
// per column, so a warp holds four such sums per element, and a fifth: the weight of the keys whose V lies
// between the knots, sum_{lo <= V[j, c] <= hi} W1[i, j]. Only those keys make the interpolation exceed the exact
// sum, each by at most (hi - lo) / 2, so that times (hi - lo) / 2 certifies the excess, and an element where it
// passes --tol of the bound would take the exact per-key loop instead. The products run on the fp16 tensor cores
// (mma.sync m16n8k16, fp32 accumulation). Their operands are fp16 in device memory, as a weights kernel would
// write them: W scaled per row into fp16's range and rounded up, V scaled per column; a block stages each chunk
// of keys in shared memory by cp.async while it sums the one before, and makes |V - t| and the bracket's
// indicator in fp16 arithmetic (|V - t| rounded to nearest: u = 2^-11 relative, 2^-25 absolute). The result is
// made an upper bound by that and by the accumulation's model (docs/error-analysis.md §3.2: a 16-product step
// truncates, losing at most eps_step (|c| + sum |a b|), eps_step = 17 2^-25 + 2^-23) over chains of kSplitKeys
// keys, whose results are added in double. The probabilistic model's sum of squares sum_j W3[i, j] (V[j, c] - o)^2
// runs as a second kernel (knot_kernel<true>): its interpolation at the same knots exceeds it by exactly
// (o - lo) (hi - o) sum_j W3[i, j], a third product, so the knots give it up to the operands' rounding, which a
// certificate of its own bounds (the same terms' upper bounds less their lower bounds).
//
// A rate and tightness probe for that design, not the budget: the inputs are made on the device (scores
// N(0, sd^2), P their softmax per row, W1 = P (2^-8 + 10^-5), W2 = P 10^-5 (1 + |s| / 8), W3 = P^2, V bf16 N(0, 1),
// O = P V), all heads share one head's data, and the exact sums are computed in double for --check rows.
// --heavy H sums each row's H heaviest keys exactly instead (their weights 0 in the products); the selection is
// not timed.
// Usage: knot_sums_rate [--n 16384] [--dv 128] [--heads 16] [--check 256] [--sd 1] [--reps 3] [--tol 1e-3] [--heavy 0]
// Prints the device time of the knot kernels for --heads heads (CUDA events, median of --reps), the share of elements
// whose certified interpolation excess may pass --tol of their bound, and bound / exact over the check rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/mma.h"
#include "reference/cuda/hmma.cuh"

namespace {

constexpr int kSplitKeys = 1024;  // keys per accumulation chain (64 steps of 16)
constexpr int kColsPerWarp = 64;  // 8 n-tiles of 8 columns
constexpr int kWarps = 4;         // a block: 64 rows (a 16-row tile a warp) by 64 columns
constexpr int kChunkKeys = 64;    // keys a block stages at a time
constexpr int kPitch = kChunkKeys / 2 + 4;  // 32-bit words a staged row (two fp16 each), padded
constexpr size_t kSmemBytes = 2 * (kColsPerWarp + kWarps * 2 * 16) * kPitch * 4;
constexpr float kSquareScale = 0x1p-8f;  // |V - t| below 2^7 for the squares' operands

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "knot_sums_rate: %s: %s\n", #x, cudaGetErrorString(e_));   \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__device__ __forceinline__ uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return uint32_t(x);
}
// A standard normal from (a, b) by Box-Muller on two hashed uniforms.
__device__ __forceinline__ float normal(uint64_t a, uint64_t b) {
  const float u1 = (mix(a * 0x9e3779b97f4a7c15ull + b) + 1.0f) * 0x1p-32f;
  const float u2 = mix(b * 0xbf58476d1ce4e5b9ull + a + 7) * 0x1p-32f;
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}
__device__ __forceinline__ float score(int64_t i, int64_t j, float sd) {
  return sd * normal(uint64_t(i) + 1, uint64_t(j) + 1);
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// A power of two that brings x's magnitude to [2^14, 2^15) (1 for 0).
__device__ __forceinline__ float fp16_scale(float x) {
  if (!(x > 0)) return 1.f;
  int e;
  frexpf(x, &e);  // x = f 2^e, f in [0.5, 1)
  return ldexpf(1.f, 15 - e);
}

// One warp a row: W1, W2 and each row's scales.
__global__ void make_weights(int n, float sd, float* W1, float* W2, float* W3, float* sc1, float* sc2, float* sc3) {
  const int64_t i = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (i >= n) return;
  float m = -INFINITY;
  for (int j = lane; j < n; j += 32) m = fmaxf(m, score(i, j, sd));
  m = warp_max(m);
  float l = 0;
  for (int j = lane; j < n; j += 32) l += expf(score(i, j, sd) - m);
  l = warp_sum(l);
  float m1 = 0, m2 = 0, m3 = 0;
  for (int j = lane; j < n; j += 32) {
    const float s = score(i, j, sd), p = expf(s - m) / l;
    const float w1 = p * (0x1p-8f + 1e-5f), w2 = p * 1e-5f * (1 + fabsf(s) / 8);
    W1[i * n + j] = w1;
    W2[i * n + j] = w2;
    W3[i * n + j] = p * p;
    m1 = fmaxf(m1, w1);
    m2 = fmaxf(m2, w2);
    m3 = fmaxf(m3, p * p);
  }
  m1 = warp_max(m1);
  m2 = warp_max(m2);
  m3 = warp_max(m3);
  if (lane == 0) sc1[i] = fp16_scale(m1), sc2[i] = fp16_scale(m2), sc3[i] = fp16_scale(m3);
}

__global__ void make_v(int n, int dv, float* V) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < int64_t(n) * dv; x += stride)
    V[x] = __bfloat162float(__float2bfloat16(normal(x + 12345, 99)));
}

// O = P V (P = W1 / (2^-8 + 10^-5)), one warp a row, dv / 32 columns a lane.
__global__ void make_o(int n, int dv, const float* W1, const float* V, float* O) {
  const int64_t i = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (i >= n) return;
  double acc[8] = {};
  for (int j = 0; j < n; ++j) {
    const double p = W1[i * n + j] / (0x1p-8 + 1e-5);
    for (int c = lane, k = 0; c < dv; c += 32, ++k) acc[k] += p * V[int64_t(j) * dv + c];
  }
  for (int c = lane, k = 0; c < dv; c += 32, ++k) O[i * dv + c] = float(acc[k]);
}

// rc[c]: the power of two that keeps |V - t| <= 2 max_j |V[j][c]| (the knots lie among the O, within V's range)
// below 2^15.
__global__ void column_scales(int n, int dv, const float* V, float* rc) {
  const int c = blockIdx.x;
  float mx = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, fabsf(V[int64_t(j) * dv + c]));
  __shared__ float red[32];
  mx = warp_max(mx);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  if (threadIdx.x < 32) {
    mx = warp_max(threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.f);
    if (threadIdx.x == 0) rc[c] = fp16_scale(2 * mx);
  }
}

// The operands as the kernel reads them, made once (a weights kernel would write them so): W scaled per row
// and rounded up to fp16, V scaled per column (a power of two, so bf16's values stay exact in fp16's normal
// range; a subnormal one rounds to nearest, within 2^-25) and transposed; for the sum of squares, W3 = P^2 and
// V scaled kSquareScale less, so that (V - t)^2 stays below 2^14.
__global__ void make_operands(int n, int dv, const float* W1, const float* W2, const float* W3, const float* sc1,
                              const float* sc2, const float* sc3, const float* V, const float* rc, __half* W1h,
                              __half* W2h, __half* W3h, __half* Vth, __half* Vsh) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < int64_t(n) * n; x += stride) {
    W1h[x] = __float2half_ru(W1[x] * sc1[x / n]);
    W2h[x] = __float2half_ru(W2[x] * sc2[x / n]);
    W3h[x] = __float2half_ru(W3[x] * sc3[x / n]);
  }
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < int64_t(n) * dv; x += stride) {
    const int64_t c = x / n, j = x % n;
    Vth[x] = __float2half_rn(V[j * dv + c] * rc[c]);
    Vsh[x] = __float2half_rn(V[j * dv + c] * rc[c] * kSquareScale);
  }
}

// The fused kernel's one-instruction wrappers (kernels/cuda/mma.h): cp.async, and mma.sync m16n8k16 on fp16.
using flashcheck::cuda::tile::cp_async_16;
using flashcheck::cuda::tile::smem_addr;
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  flashcheck::cuda::tile::mma(flashcheck::cuda::tile::MmaF16{}, d, a, b0, b1);
}

// Each row's `heavy` largest W1 (a non-negative float orders as its bits; ties at the threshold in key order),
// for the exact part: one warp a row, a binary search for the threshold, then the keys above it and at it.
__global__ void select_heavy(int n, int heavy, const float* W1, int* idx) {
  const int64_t i = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (i >= n) return;
  const uint32_t* w = reinterpret_cast<const uint32_t*>(W1 + i * n);
  auto count_at_least = [&](uint32_t tau) {
    int c = 0;
    for (int j = lane; j < n; j += 32) c += w[j] >= tau;
    for (int o = 16; o; o /= 2) c += __shfl_xor_sync(0xffffffffu, c, o);
    return c;
  };
  uint32_t lo = 0, hi = 0x7f800001u;  // count_at_least(lo) >= heavy > count_at_least(hi)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (count_at_least(mid) >= heavy) lo = mid;
    else hi = mid;
  }
  int taken = 0;
  for (int pass = 0; pass < 2 && taken < heavy; ++pass)
    for (int j0 = 0; j0 < n && taken < heavy; j0 += 32) {
      const int j = j0 + lane;
      const bool take = j < n && (pass == 0 ? w[j] > lo : w[j] == lo);
      const unsigned b = __ballot_sync(0xffffffffu, take);
      const int at = taken + __popc(b & ((1u << lane) - 1u));
      if (take && at < heavy) idx[i * heavy + at] = j;
      taken += __popc(b);
    }
}
// The heavy keys leave the products: their fp16 weights become 0.
__global__ void drop_heavy(int n, int heavy, const int* idx, __half* W1h, __half* W2h) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= int64_t(n) * heavy) return;
  const int64_t j = idx[x], i = x / heavy;
  W1h[i * n + j] = __float2half(0.f);
  W2h[i * n + j] = __float2half(0.f);
}

// The knot sums of one split of the keys, two knots a column per 16 rows (lo and hi, the tile's O range), and
// the bracket's weight sum_{j: V[j, c] in [lo, hi]} W1[i, j], which bounds what the interpolation adds: for o and v
// in [lo, hi] the interpolated |v - o| exceeds it by at most (hi - lo) / 2, and by nothing for v outside.
// Warp w: rows 16 (4 blockIdx.x + w) + g and + 8, columns 64 blockIdx.y + 8 nt + 2 t and + 1 (g = lane / 4,
// t = lane % 4: the m16n8k16 fragments). partial: [split][5][row][col] (F1 at lo, F1 at hi, F2 at lo, F2 at hi,
// the bracket's W1); knots: [16-row tile][2][col], unscaled.
//
// kSquares: the probabilistic model's sum of squares sum_j W3[i, j] (V[j, c] - o)^2 instead, from W3 alone and V
// scaled kSquareScale less: the products at the same two knots with (V - t)^2, and W3's row sum (B = 1). As
// (V - o)^2 is a quadratic in o, the interpolation exceeds the sum by exactly (o - lo) (hi - o) sum_j W3[i, j],
// so the two give the sum itself, up to the operands' rounding. partial: [split][3][row][col].
constexpr int kSums = 5;
template <bool kSquares>
__global__ void __launch_bounds__(32 * kWarps) knot_kernel(int n, int dv, const __half* W1h, const __half* W2h,
                                                           const __half* Vth, const float* rc, const float* O,
                                                           float* partial, float* knots) {
  constexpr int kS = kSquares ? 3 : kSums, kW = kSquares ? 1 : 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tile = blockIdx.x * kWarps + warp;
  const int64_t i0 = int64_t(tile) * 16;
  const int c0 = blockIdx.y * kColsPerWarp;
  const int split = blockIdx.z;
  // This lane's B columns (c0 + 8 nt + g): the knots over the tile's O, scaled by the column's rc into fp16,
  // lo rounded down and hi up so that they still hold every O of the tile between them.
  __half2 tlo[8], thi[8];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c = c0 + 8 * nt + g;
    float lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < 16; ++r) {
      const float o = O[(i0 + r) * dv + c];
      lo = fminf(lo, o);
      hi = fmaxf(hi, o);
    }
    const float r = rc[c] * (kSquares ? kSquareScale : 1.f);
    const __half lh = __float2half_rd(lo * r), hh = __float2half_ru(hi * r);
    if (split == 0 && t == 0) {
      knots[(int64_t(tile) * 2 + 0) * dv + c] = __half2float(lh) / r;
      knots[(int64_t(tile) * 2 + 1) * dv + c] = __half2float(hh) / r;
    }
    tlo[nt] = __half2half2(lh), thi[nt] = __half2half2(hh);
  }
  float acc[kS][8][4];
#pragma unroll
  for (int m = 0; m < kS; ++m)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][nt][e] = 0;
  // Chunks of kChunkKeys keys into shared memory by cp.async, the next one's while this one's are summed: the
  // block's 64 columns of V (every warp's B) and each warp's 16 rows of W1 and W2, rows padded to kPitch
  // 32-bit words so that a fragment's eight rows (or columns) fall in distinct banks.
  extern __shared__ uint32_t smem[];
  uint32_t* vs = smem;                                 // [2][64 columns][kPitch]
  uint32_t* as = smem + 2 * kColsPerWarp * kPitch;     // [2][kWarps][2 sums][16 rows][kPitch]
  auto a_at = [&](int buf, int wp, int m, int r) { return as + (((buf * kWarps + wp) * 2 + m) * 16 + r) * kPitch; };
  const int64_t kb = int64_t(split) * kSplitKeys, ke = min(kb + kSplitKeys, int64_t(n));
  auto load = [&](int64_t j0, int buf) {
    // V: 64 columns x kChunkKeys keys = 64 x 8 pieces of 16 bytes.
    for (int x = threadIdx.x; x < kColsPerWarp * kChunkKeys / 8; x += blockDim.x) {
      const int c = x / (kChunkKeys / 8), p = x % (kChunkKeys / 8);
      cp_async_16(smem_addr(vs + (buf * kColsPerWarp + c) * kPitch + 4 * p), Vth + int64_t(c0 + c) * n + j0 + 8 * p,
                  true);
    }
    // W: kWarps x kW weights x 16 rows x 8 pieces.
    for (int x = threadIdx.x; x < kWarps * kW * 16 * (kChunkKeys / 8); x += blockDim.x) {
      const int p = x % (kChunkKeys / 8), r = x / (kChunkKeys / 8) % 16, m = x / (kChunkKeys / 8) / 16 % kW,
                wp = x / (kChunkKeys / 8) / (16 * kW);
      const __half* src = (m ? W2h : W1h) + (int64_t(blockIdx.x) * kWarps * 16 + wp * 16 + r) * n + j0 + 8 * p;
      cp_async_16(smem_addr(a_at(buf, wp, m, r) + 4 * p), src, true);
    }
    flashcheck::cuda::tile::cp_async_commit();
  };
  load(kb, 0);
  int buf = 0;
  for (int64_t j0 = kb; j0 < ke; j0 += kChunkKeys, buf ^= 1) {
    if (j0 + kChunkKeys < ke) load(j0 + kChunkKeys, buf ^ 1);
    else flashcheck::cuda::tile::cp_async_commit();  // an empty group keeps the count of groups in flight
    flashcheck::cuda::tile::cp_async_wait<1>();
    __syncthreads();
    const uint32_t* a1 = a_at(buf, warp, 0, 0);
    const uint32_t* a2 = a_at(buf, warp, 1, 0);
    const uint32_t* v = vs + buf * kColsPerWarp * kPitch;
#pragma unroll
    for (int k = 0; k < kChunkKeys / 16; ++k) {
      const int w = 8 * k + t;  // the word of keys 16 k + 2 t, + 1
      uint32_t A1[4], A2[4] = {0, 0, 0, 0};
      fc::gpu::detail::hmma_a_fragment(a1, kPitch, g, w, A1);
      if constexpr (!kSquares) fc::gpu::detail::hmma_a_fragment(a2, kPitch, g, w, A2);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const uint32_t* vc = v + (8 * nt + g) * kPitch + w;
        const __half2 v0 = *reinterpret_cast<const __half2*>(vc), v8 = *reinterpret_cast<const __half2*>(vc + 4);
        using fc::gpu::detail::knot_bracket2, fc::gpu::detail::knot_distance2, fc::gpu::detail::knot_square2;
        if constexpr (kSquares) {
          // (v - t)^2 in fp16, each step rounded to nearest (finalize_squares inflates for it); W3's row sum.
          mma(acc[0][nt], A1, knot_square2(v0, tlo[nt]), knot_square2(v8, tlo[nt]));
          mma(acc[1][nt], A1, knot_square2(v0, thi[nt]), knot_square2(v8, thi[nt]));
          mma(acc[2][nt], A1, 0x3c003c00u, 0x3c003c00u);
          continue;
        }
        // |v - t| in fp16, rounded to nearest (finalize_kernel inflates for it).
        const uint32_t l0 = knot_distance2(v0, tlo[nt]), l8 = knot_distance2(v8, tlo[nt]);
        const uint32_t h0 = knot_distance2(v0, thi[nt]), h8 = knot_distance2(v8, thi[nt]);
        mma(acc[0][nt], A1, l0, l8);
        mma(acc[2][nt], A2, l0, l8);
        mma(acc[1][nt], A1, h0, h8);
        mma(acc[3][nt], A2, h0, h8);
        // The bracket's indicator: fp16 ones where lo <= v <= hi.
        mma(acc[4][nt], A1, knot_bracket2(v0, tlo[nt], thi[nt]), knot_bracket2(v8, tlo[nt], thi[nt]));
      }
    }
    __syncthreads();  // this buffer is read before the next chunk's copies overwrite it
  }
#pragma unroll
  for (int m = 0; m < kS; ++m)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = i0 + g + 8 * (e / 2);
        const int col = c0 + 8 * nt + 2 * t + e % 2;
        partial[((int64_t(split) * kS + m) * n + row) * dv + col] = acc[m][nt][e];
      }
}

// The tensor cores' and the fp16 operands' constants (docs/error-analysis.md §3.2): a 16-product step's
// truncation, fp16's unit roundoff and half its smallest subnormal. A chain of kSplitKeys / 16 steps from 0 is at
// least (1 - eps_step)^steps the sum of its exact products, so chain_up() times it bounds that sum (with the
// doubles' roundings).
constexpr double kEpsStep = 17 * 0x1p-25 + 0x1p-23, kU16 = 0x1p-11, kDelta16 = 0x1p-25;
__device__ __forceinline__ double chain_up() { return pow(1 - kEpsStep, -double(kSplitKeys / 16)) * (1 + 1e-12); }

// Per element: each sum from its chains (upper bounds in double), unscaled, then the interpolation at O, and
// the interpolation's excess bound (hi - lo) / 2 times the bracket's W1. bound: [m][row][col]; excess: [row][col].
__global__ void finalize_kernel(int n, int dv, int splits, const float* partial, const float* knots, const float* sc1,
                                const float* sc2, const float* rc, const float* O, int heavy, const int* idx,
                                const float* W1, const float* W2, const float* V, double* bound, double* excess) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= int64_t(n) * dv) return;
  const int64_t row = x / dv;
  const int col = int(x % dv);
  // Each |v - t| was rounded to nearest in fp16 (u relative, or delta absolute below fp16's normal
  // range, as V itself may have been), so the exact one is at most (it + 2 delta) / (1 - u), and the weights,
  // rounded up, sum to at most n 2^15 a row: the exact sum is at most (chains + 2 delta n 2^15) / (1 - u). The
  // indicator is exact; a key whose V rounded across a knot (within delta of it) is left out of the bracket's
  // weight, and its excess is at most 2 delta / rc its weight.
  const double u = kU16, delta = kDelta16, chain = chain_up();
  const double w_sum = double(n) * 0x1p15;  // scaled
  const double o = O[x];
  const double lo = knots[((row / 16) * 2 + 0) * dv + col], hi = knots[((row / 16) * 2 + 1) * dv + col];
  double F[kSums];
  for (int m = 0; m < kSums; ++m) {
    double f = 0;
    for (int s = 0; s < splits; ++s) f += double(partial[((int64_t(s) * kSums + m) * n + row) * dv + col]);
    const double sc = double(m < 2 || m == 4 ? sc1[row] : sc2[row]);
    F[m] = m == 4 ? f * chain / sc : (f * chain + 2 * delta * w_sum) / (1 - u) / (sc * rc[col]);
  }
  // The heavy keys, left out of the products, exactly (in double, within 10^-12).
  double exact[2] = {0, 0};
  for (int h = 0; h < heavy; ++h) {
    const int64_t j = idx[row * heavy + h];
    const double d = fabs(double(V[j * dv + col]) - o);
    exact[0] += double(W1[row * n + j]) * d;
    exact[1] += double(W2[row * n + j]) * d;
  }
  const double lam = hi > lo ? (o - lo) / (hi - lo) : 0.0;
  for (int m = 0; m < 2; ++m)
    bound[(int64_t(m) * n + row) * dv + col] = ((1 - lam) * F[2 * m] + lam * F[2 * m + 1] + exact[m]) * (1 + 1e-12);
  excess[x] = ((hi - lo) / 2 * F[4] + 2 * delta / rc[col] * w_sum / sc1[row]) * (1 + 1e-12);
}

// The sum of squares per element (knot_kernel<true>): the interpolation of its two products at O, less
// (o - lo) (hi - o) times a lower bound of W3's row sum. In scaled units (|V| and the knots below 2^6): V rounded
// within delta, d = rn(v - t), b = rn(d^2), so the exact (V - t)^2 is at most
// (b + delta (1 + 2^9) + 4 delta^2) / (1 - u)^3, and the weights, rounded up, sum to at most n 2^15 a row. A
// weight w rounded up to fp16 is at most w (1 + 2^-10) + 2^-24, and the chain of the row sum truncates, so that
// sum is at least (chains - n 2^-24) / (1 + 2^-10). bound3: [row][col].
// Its certificate, cert3 >= bound3 - the exact sum: the same two terms' upper bounds less their lower bounds. The
// exact (V - t)^2 is at least (b - delta (1 + 2^10)) / (1 + u)^3, a weight at least (w - 2^-24) / (1 + 2^-10), and
// a chain is at most its exact sum, so each product is at least (chains - n 2^-24 2^14 - delta (1 + 2^10) n 2^15)
// / ((1 + 2^-10) (1 + u)^3); the row sum is at most its chains times chain_up().
__global__ void finalize_squares(int n, int dv, int splits, const float* partial, const float* knots, const float* sc3,
                                 const float* rc, const float* O, double* bound3, double* cert3) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= int64_t(n) * dv) return;
  const int64_t row = x / dv;
  const int col = int(x % dv);
  const double u = kU16, delta = kDelta16, chain = chain_up();
  const double rs = double(rc[col]) * kSquareScale, sc = sc3[row];
  double f[3] = {0, 0, 0};
  for (int m = 0; m < 3; ++m)
    for (int s = 0; s < splits; ++s) f[m] += double(partial[((int64_t(s) * 3 + m) * n + row) * dv + col]);
  const double per_key = delta * (1 + 0x1p9) + 4 * delta * delta, w_sum = double(n) * 0x1p15;
  double G[2];
  for (int h = 0; h < 2; ++h) G[h] = (f[h] * chain + per_key * w_sum) / ((1 - u) * (1 - u) * (1 - u)) / (sc * rs * rs);
  const double row_sum = fmax(0.0, (f[2] - double(n) * 0x1p-24) / (1 + 0x1p-10)) / sc * (1 - 1e-12);
  const double o = O[x];
  const double lo = knots[((row / 16) * 2 + 0) * dv + col], hi = knots[((row / 16) * 2 + 1) * dv + col];
  const double lam = hi > lo ? (o - lo) / (hi - lo) : 0.0;
  const double interp_up = ((1 - lam) * G[0] + lam * G[1]) * (1 + 1e-12), gap = (o - lo) * (hi - o);
  bound3[x] = interp_up - gap * (1 - 1e-12) * row_sum;
  double G_lo[2];
  for (int h = 0; h < 2; ++h)
    G_lo[h] = (f[h] - double(n) * (0x1p-24 * 0x1p14 + delta * (1 + 0x1p10) * 0x1p15)) /
              ((1 + 0x1p-10) * (1 + u) * (1 + u) * (1 + u)) / (sc * rs * rs);
  const double interp_lo = ((1 - lam) * G_lo[0] + lam * G_lo[1]) * (1 - 1e-12);
  const double row_sum_up = f[2] * chain / sc * (1 + 1e-12);
  cert3[x] = ((interp_up - interp_lo) + gap * (1 + 1e-12) * row_sum_up - gap * (1 - 1e-12) * row_sum) * (1 + 1e-12);
}

// The exact sums of the check rows, in double: exact[m][r][col] (m = 0, 1; m = 3 the sum of squares), and the
// interpolation of the exact F1 at the knots, the heavy keys exact, exact[2][r][col] (what the interpolation
// alone gives, for the excess certificate's check).
__global__ void exact_kernel(int n, int dv, int rows, const float* W1, const float* W2, const float* W3, const float* V,
                             const float* O, const float* knots, int heavy, const int* idx, double* exact) {
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (r >= rows) return;
  const int64_t i = int64_t(r) * (n / rows);
  for (int c = lane; c < dv; c += 32) {
    const double o = O[i * dv + c];
    const double lo = knots[((i / 16) * 2 + 0) * dv + c], hi = knots[((i / 16) * 2 + 1) * dv + c];
    double s1 = 0, s2 = 0, s3 = 0, f_lo = 0, f_hi = 0;
    for (int j = 0; j < n; ++j) {
      const double v = V[int64_t(j) * dv + c], w1 = W1[i * n + j];
      const double d = fabs(v - o);
      s1 += w1 * d;
      s2 += double(W2[i * n + j]) * d;
      s3 += double(W3[i * n + j]) * d * d;
      f_lo += w1 * fabs(v - lo);
      f_hi += w1 * fabs(v - hi);
    }
    // The heavy keys are summed exactly, not interpolated.
    for (int h = 0; h < heavy; ++h) {
      const int64_t j = idx[i * heavy + h];
      const double v = V[j * dv + c], w1 = W1[i * n + j];
      f_lo += w1 * (fabs(v - o) - fabs(v - lo));
      f_hi += w1 * (fabs(v - o) - fabs(v - hi));
    }
    const double lam = hi > lo ? (o - lo) / (hi - lo) : 0.0;
    exact[(int64_t(0) * rows + r) * dv + c] = s1;
    exact[(int64_t(1) * rows + r) * dv + c] = s2;
    exact[(int64_t(2) * rows + r) * dv + c] = (1 - lam) * f_lo + lam * f_hi;
    exact[(int64_t(3) * rows + r) * dv + c] = s3;
  }
}

// The device time of `launch` for every head (CUDA events, the median of reps after a warm-up).
template <class Launch>
float timed(int heads, int reps, Launch launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps + 1; ++r) {
    CHECK(cudaEventRecord(a));
    for (int h = 0; h < heads; ++h) launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    if (r > 0) ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int n = 16384, dv = 128, heads = 16, check = 256, reps = 3, heavy = 0;
  float sd = 1;
  double tol = 1e-3;
  for (int x = 1; x < argc; ++x) {
    const std::string f = argv[x];
    if (x + 1 >= argc) {
      std::fprintf(stderr, "knot_sums_rate: %s needs a value\n", f.c_str());
      return 2;
    }
    const char* v = argv[++x];
    if (f == "--n") n = std::atoi(v);
    else if (f == "--dv") dv = std::atoi(v);
    else if (f == "--heads") heads = std::atoi(v);
    else if (f == "--check") check = std::atoi(v);
    else if (f == "--sd") sd = float(std::atof(v));
    else if (f == "--reps") reps = std::atoi(v);
    else if (f == "--tol") tol = std::atof(v);
    else if (f == "--heavy") heavy = std::atoi(v);
    else {
      std::fprintf(stderr, "knot_sums_rate: unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  if (n < kSplitKeys || n % kSplitKeys || dv < kColsPerWarp || dv % kColsPerWarp || dv > 256 || check < 1 ||
      check > n || heads < 1 || reps < 1 || !(sd > 0) || !(tol > 0) || heavy < 0 || heavy > 256) {
    std::fprintf(stderr, "knot_sums_rate: --n a multiple of %d, --dv a multiple of %d up to 256, 1 <= --check <= n, "
                 "positive --heads, --reps, --sd, --tol, 0 <= --heavy <= 256\n", kSplitKeys, kColsPerWarp);
    return 2;
  }
  const int splits = n / kSplitKeys;
  float *W1, *W2, *W3, *sc1, *sc2, *sc3, *V, *rc, *O, *partial, *partial3, *knots, *knots3;
  __half *W1h, *W2h, *W3h, *Vth, *Vsh;
  double *bound, *bound3, *cert3, *excess, *exact;
  CHECK(cudaMalloc(&W1, size_t(n) * n * 4));
  CHECK(cudaMalloc(&W2, size_t(n) * n * 4));
  CHECK(cudaMalloc(&W3, size_t(n) * n * 4));
  CHECK(cudaMalloc(&sc1, size_t(n) * 4));
  CHECK(cudaMalloc(&sc2, size_t(n) * 4));
  CHECK(cudaMalloc(&sc3, size_t(n) * 4));
  CHECK(cudaMalloc(&V, size_t(n) * dv * 4));
  CHECK(cudaMalloc(&W1h, size_t(n) * n * 2));
  CHECK(cudaMalloc(&W2h, size_t(n) * n * 2));
  CHECK(cudaMalloc(&W3h, size_t(n) * n * 2));
  CHECK(cudaMalloc(&Vth, size_t(n) * dv * 2));
  CHECK(cudaMalloc(&Vsh, size_t(n) * dv * 2));
  CHECK(cudaMalloc(&rc, size_t(dv) * 4));
  CHECK(cudaMalloc(&O, size_t(n) * dv * 4));
  CHECK(cudaMalloc(&partial, size_t(splits) * kSums * n * dv * 4));
  CHECK(cudaMalloc(&partial3, size_t(splits) * 3 * n * dv * 4));
  CHECK(cudaMalloc(&knots, size_t(n / 16) * 2 * dv * 4));
  CHECK(cudaMalloc(&knots3, size_t(n / 16) * 2 * dv * 4));
  CHECK(cudaMalloc(&bound, size_t(2) * n * dv * 8));
  CHECK(cudaMalloc(&bound3, size_t(n) * dv * 8));
  CHECK(cudaMalloc(&cert3, size_t(n) * dv * 8));
  CHECK(cudaMalloc(&excess, size_t(n) * dv * 8));
  CHECK(cudaMalloc(&exact, size_t(4) * check * dv * 8));
  make_weights<<<(n + 7) / 8, 256>>>(n, sd, W1, W2, W3, sc1, sc2, sc3);
  make_v<<<1024, 256>>>(n, dv, V);
  make_o<<<(n + 7) / 8, 256>>>(n, dv, W1, V, O);
  column_scales<<<dv, 1024>>>(n, dv, V, rc);
  make_operands<<<4096, 256>>>(n, dv, W1, W2, W3, sc1, sc2, sc3, V, rc, W1h, W2h, W3h, Vth, Vsh);
  int* idx = nullptr;
  if (heavy > 0) {
    CHECK(cudaMalloc(&idx, size_t(n) * heavy * 4));
    select_heavy<<<(n + 7) / 8, 256>>>(n, heavy, W1, idx);
    drop_heavy<<<unsigned((int64_t(n) * heavy + 255) / 256), 256>>>(n, heavy, idx, W1h, W2h);
  }
  CHECK(cudaDeviceSynchronize());
  const dim3 grid(n / (16 * kWarps), dv / kColsPerWarp, splits);
  const unsigned elements = unsigned((int64_t(n) * dv + 255) / 256);
  CHECK(cudaFuncSetAttribute(knot_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
  CHECK(cudaFuncSetAttribute(knot_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
  const float ms = timed(heads, reps, [&] {
    knot_kernel<false><<<grid, 32 * kWarps, kSmemBytes>>>(n, dv, W1h, W2h, Vth, rc, O, partial, knots);
    finalize_kernel<<<elements, 256>>>(n, dv, splits, partial, knots, sc1, sc2, rc, O, heavy, idx, W1, W2, V, bound,
                                       excess);
  });
  const float ms3 = timed(heads, reps, [&] {
    knot_kernel<true><<<grid, 32 * kWarps, kSmemBytes>>>(n, dv, W3h, nullptr, Vsh, rc, O, partial3, knots3);
    finalize_squares<<<elements, 256>>>(n, dv, splits, partial3, knots3, sc3, rc, O, bound3, cert3);
  });
  exact_kernel<<<(check + 7) / 8, 256>>>(n, dv, check, W1, W2, W3, V, O, knots, heavy, idx, exact);
  CHECK(cudaDeviceSynchronize());

  std::vector<double> hb(size_t(2) * n * dv), hb3(size_t(n) * dv), hc3(size_t(n) * dv), hx(size_t(n) * dv),
      he(size_t(4) * check * dv);
  CHECK(cudaMemcpy(hb.data(), bound, hb.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hx.data(), excess, hx.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hb3.data(), bound3, hb3.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hc3.data(), cert3, hc3.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(he.data(), exact, he.size() * 8, cudaMemcpyDeviceToHost));
  // An element whose certified excess passes tol of its bound would go to the exact per-key loop.
  size_t wide = 0;
  for (size_t x = 0; x < hx.size(); ++x) wide += !(hx[x] <= tol * hb[x]);
  std::printf("(1, %d, %d, %d), scores N(0, %g^2), %d heaviest keys a row exact: knot kernels %.2f ms for %d heads "
              "(median of %d); elements whose interpolation excess may pass %g of the bound: %zu of %zu (%.3f %%)\n",
              heads, n, dv, sd, heavy, ms, heads, reps, tol, wide, hx.size(), 100.0 * wide / hx.size());
  size_t wide3 = 0;
  for (size_t x = 0; x < hc3.size(); ++x) wide3 += !(hc3[x] <= tol * hb3[x]);
  std::printf("  the sum of squares (sum 3): knot kernels %.2f ms for %d heads; elements whose certified rounding "
              "excess may pass %g of the bound: %zu (%.3f %%)\n", ms3, heads, tol, wide3, 100.0 * wide3 / hc3.size());
  for (int m = 0; m < 3; ++m) {
    std::vector<double> ratio;
    size_t below = 0, uncovered = 0;
    for (int r = 0; r < check; ++r)
      for (int c = 0; c < dv; ++c) {
        const int64_t i = int64_t(r) * (n / check);
        const double ex = he[(size_t(m < 2 ? m : 3) * check + r) * dv + c];
        const double b = m < 2 ? hb[(size_t(m) * n + i) * dv + c] : hb3[size_t(i) * dv + c];
        if (!(ex > 0)) continue;
        if (!(b >= ex)) ++below;
        // The certificate bounds the exact interpolation's excess over the exact sum (W1's; W2's would be it
        // times the row's largest W2 / W1, not computed here).
        const double interp = he[(size_t(2) * check + r) * dv + c];
        if (m == 0 && !(interp - ex <= hx[size_t(i) * dv + c] * (1 + 1e-9) + 1e-300)) ++uncovered;
        // The sum of squares' certificate covers all its excess.
        if (m == 2 && !(b - ex <= hc3[size_t(i) * dv + c] * (1 + 1e-9) + 1e-300)) ++uncovered;
        ratio.push_back(b / ex);
      }
    std::sort(ratio.begin(), ratio.end());
    auto q = [&](double p) { return ratio[std::min(ratio.size() - 1, size_t(p * ratio.size()))]; };
    const std::string cert = m == 0   ? ", interpolation excess beyond its certificate: " + std::to_string(uncovered)
                             : m == 2 ? ", excess beyond its certificate: " + std::to_string(uncovered)
                                      : "";
    std::printf("  sum %d: %zu elements of %d rows; bound below the exact sum: %zu%s; bound / exact min %.6f "
                "median %.6f p99 %.6f p99.9 %.6f max %.6f\n", m + 1, ratio.size(), check, below, cert.c_str(),
                ratio.front(), q(0.5), q(0.99), q(0.999), ratio.back());
  }
  return 0;
}
