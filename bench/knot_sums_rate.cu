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
// (mma.sync m16n8k16, fp32 accumulation) with W scaled per row and |V - t| per column into fp16's range, both
// rounded up, and the result is made an upper bound by the accumulation's model (docs/error-analysis.md §3.2: a
// 16-product step truncates, losing at most eps_step (|c| + sum |a b|), eps_step = 17 2^-25 + 2^-23) over chains of
// kSplitKeys keys, whose results are added in double.
//
// A rate and tightness probe for that design, not the budget: the inputs are made on the device (scores
// N(0, sd^2), P their softmax per row, W1 = P (2^-8 + 10^-5), W2 = P 10^-5 (1 + |s| / 8), V bf16 N(0, 1), O = P V),
// all heads share one head's data, and the exact sums are computed in double for --check rows.
// Usage: knot_sums_rate [--n 16384] [--dv 128] [--heads 16] [--check 256] [--sd 1] [--reps 3] [--tol 1e-3]
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
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kSplitKeys = 1024;  // keys per accumulation chain (64 steps of 16)
constexpr int kColsPerWarp = 64;  // 8 n-tiles of 8 columns
constexpr int kWarps = 4;         // a block: 64 rows (a 16-row tile a warp) by 64 columns

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
__device__ __forceinline__ float score(int64_t i, int64_t j, float sd) { return sd * normal(uint64_t(i) + 1, uint64_t(j) + 1); }

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
__global__ void make_weights(int n, float sd, float* W1, float* W2, float* sc1, float* sc2) {
  const int64_t i = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (i >= n) return;
  float m = -INFINITY;
  for (int j = lane; j < n; j += 32) m = fmaxf(m, score(i, j, sd));
  m = warp_max(m);
  float l = 0;
  for (int j = lane; j < n; j += 32) l += expf(score(i, j, sd) - m);
  l = warp_sum(l);
  float m1 = 0, m2 = 0;
  for (int j = lane; j < n; j += 32) {
    const float s = score(i, j, sd), p = expf(s - m) / l;
    const float w1 = p * (0x1p-8f + 1e-5f), w2 = p * 1e-5f * (1 + fabsf(s) / 8);
    W1[i * n + j] = w1;
    W2[i * n + j] = w2;
    m1 = fmaxf(m1, w1);
    m2 = fmaxf(m2, w2);
  }
  m1 = warp_max(m1);
  m2 = warp_max(m2);
  if (lane == 0) sc1[i] = fp16_scale(m1), sc2[i] = fp16_scale(m2);
}

__global__ void make_v(int n, int dv, float* V) {
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < int64_t(n) * dv; x += int64_t(gridDim.x) * blockDim.x)
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

// Vt[c][j] = V[j][c] rc[c], rc[c] the power of two that keeps |V - t| <= 2 max_j |V[j][c]| below 2^15.
__global__ void make_vt(int n, int dv, const float* V, float* Vt, float* rc) {
  const int c = blockIdx.x;
  float mx = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, fabsf(V[int64_t(j) * dv + c]));
  __shared__ float red[32];
  mx = warp_max(mx);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  if (threadIdx.x < 32) {
    mx = warp_max(threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.f);
    if (threadIdx.x == 0) red[0] = fp16_scale(2 * mx);
  }
  __syncthreads();
  const float r = red[0];
  if (threadIdx.x == 0) rc[c] = r;
  for (int j = threadIdx.x; j < n; j += blockDim.x) Vt[int64_t(c) * n + j] = V[int64_t(j) * dv + c] * r;
}

// Two non-negative fp32 values rounded up to fp16 (so each operand is at or above its value), as an mma register.
__device__ __forceinline__ uint32_t pack_up(float lo, float hi) {
  const __half2 h = __halves2half2(__float2half_ru(lo), __float2half_ru(hi));
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The knot sums of one split of the keys, two knots a column per 16 rows (lo and hi, the tile's O range), and
// the bracket's weight sum_{j: V[j, c] in [lo, hi]} W1[i, j], which bounds what the interpolation adds: for o and v
// in [lo, hi] the interpolated |v - o| exceeds it by at most (hi - lo) / 2, and by nothing for v outside.
// Warp w: rows 16 (4 blockIdx.x + w) + g and + 8, columns 64 blockIdx.y + 8 nt + 2 t and + 1 (g = lane / 4,
// t = lane % 4: the m16n8k16 fragments). partial: [split][5][row][col] (F1 at lo, F1 at hi, F2 at lo, F2 at hi,
// the bracket's W1); knots: [16-row tile][2][col], unscaled.
constexpr int kSums = 5;
__global__ void __launch_bounds__(32 * kWarps) knot_kernel(int n, int dv, const float* W1, const float* W2,
                                                           const float* sc1, const float* sc2, const float* Vt,
                                                           const float* rc, const float* O, float* partial,
                                                           float* knots) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tile = blockIdx.x * kWarps + warp;
  const int64_t i0 = int64_t(tile) * 16;
  const int c0 = blockIdx.y * kColsPerWarp;
  const int split = blockIdx.z;
  // This lane's B columns (c0 + 8 nt + g): the knots over the tile's O, scaled by the column's rc.
  float tlo[8], thi[8];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c = c0 + 8 * nt + g;
    float lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < 16; ++r) {
      const float o = O[(i0 + r) * dv + c];
      lo = fminf(lo, o);
      hi = fmaxf(hi, o);
    }
    if (split == 0 && t == 0) {
      knots[(int64_t(tile) * 2 + 0) * dv + c] = lo;
      knots[(int64_t(tile) * 2 + 1) * dv + c] = hi;
    }
    tlo[nt] = lo * rc[c], thi[nt] = hi * rc[c];
  }
  const float s1_lo = sc1[i0 + g], s1_hi = sc1[i0 + g + 8], s2_lo = sc2[i0 + g], s2_hi = sc2[i0 + g + 8];
  float acc[kSums][8][4];
#pragma unroll
  for (int m = 0; m < kSums; ++m)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][nt][e] = 0;
  const float* w1_lo = W1 + (i0 + g) * n;
  const float* w1_hi = W1 + (i0 + g + 8) * n;
  const float* w2_lo = W2 + (i0 + g) * n;
  const float* w2_hi = W2 + (i0 + g + 8) * n;
  const int64_t kb = int64_t(split) * kSplitKeys, ke = min(kb + kSplitKeys, int64_t(n));
  constexpr uint32_t kOnes = 0x3c003c00u;  // two fp16 ones
  for (int64_t j = kb; j < ke; j += 16) {
    const int64_t a = j + 2 * t;
    uint32_t A1[4], A2[4];
    {
      const float2 x0 = *reinterpret_cast<const float2*>(w1_lo + a), x1 = *reinterpret_cast<const float2*>(w1_hi + a);
      const float2 x2 = *reinterpret_cast<const float2*>(w1_lo + a + 8), x3 = *reinterpret_cast<const float2*>(w1_hi + a + 8);
      A1[0] = pack_up(x0.x * s1_lo, x0.y * s1_lo), A1[1] = pack_up(x1.x * s1_hi, x1.y * s1_hi);
      A1[2] = pack_up(x2.x * s1_lo, x2.y * s1_lo), A1[3] = pack_up(x3.x * s1_hi, x3.y * s1_hi);
      const float2 y0 = *reinterpret_cast<const float2*>(w2_lo + a), y1 = *reinterpret_cast<const float2*>(w2_hi + a);
      const float2 y2 = *reinterpret_cast<const float2*>(w2_lo + a + 8), y3 = *reinterpret_cast<const float2*>(w2_hi + a + 8);
      A2[0] = pack_up(y0.x * s2_lo, y0.y * s2_lo), A2[1] = pack_up(y1.x * s2_hi, y1.y * s2_hi);
      A2[2] = pack_up(y2.x * s2_lo, y2.y * s2_lo), A2[3] = pack_up(y3.x * s2_hi, y3.y * s2_hi);
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const float* vt = Vt + int64_t(c0 + 8 * nt + g) * n + a;
      const float2 v0 = *reinterpret_cast<const float2*>(vt), v8 = *reinterpret_cast<const float2*>(vt + 8);
      const float lo = tlo[nt], hi = thi[nt];
      uint32_t b0 = pack_up(fabsf(v0.x - lo), fabsf(v0.y - lo)), b1 = pack_up(fabsf(v8.x - lo), fabsf(v8.y - lo));
      mma(acc[0][nt], A1, b0, b1);
      mma(acc[2][nt], A2, b0, b1);
      b0 = pack_up(fabsf(v0.x - hi), fabsf(v0.y - hi)), b1 = pack_up(fabsf(v8.x - hi), fabsf(v8.y - hi));
      mma(acc[1][nt], A1, b0, b1);
      mma(acc[3][nt], A2, b0, b1);
      // The bracket's indicator: fp16 ones where lo <= v <= hi (V and the knots are scaled alike).
      auto in = [&](float v) { return lo <= v && v <= hi; };
      b0 = kOnes & ((in(v0.x) ? 0xffffu : 0u) | (in(v0.y) ? 0xffff0000u : 0u));
      b1 = kOnes & ((in(v8.x) ? 0xffffu : 0u) | (in(v8.y) ? 0xffff0000u : 0u));
      mma(acc[4][nt], A1, b0, b1);
    }
  }
#pragma unroll
  for (int m = 0; m < kSums; ++m)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = i0 + g + 8 * (e / 2);
        const int col = c0 + 8 * nt + 2 * t + e % 2;
        partial[((int64_t(split) * kSums + m) * n + row) * dv + col] = acc[m][nt][e];
      }
}

// Per element: each sum from its chains (upper bounds in double), unscaled, then the interpolation at O, and
// the interpolation's excess bound (hi - lo) / 2 times the bracket's W1. bound: [m][row][col]; excess: [row][col].
__global__ void finalize_kernel(int n, int dv, int splits, const float* partial, const float* knots, const float* sc1,
                                const float* sc2, const float* rc, const float* O, double* bound, double* excess) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= int64_t(n) * dv) return;
  const int64_t row = x / dv;
  const int col = int(x % dv);
  // A chain of kSplitKeys / 16 truncating steps from 0 is at least (1 - eps)^steps the sum of its exact products;
  // |v - t| in fp32 rounds to nearest before it is rounded up to fp16 (2^-24 relative); the doubles' roundings.
  const double eps = 17 * 0x1p-25 + 0x1p-23;
  const double up = pow(1 - eps, -double(kSplitKeys / 16)) * (1 + 0x1p-23) * (1 + 1e-12);
  const double o = O[x];
  const double lo = knots[((row / 16) * 2 + 0) * dv + col], hi = knots[((row / 16) * 2 + 1) * dv + col];
  double F[kSums];
  for (int m = 0; m < kSums; ++m) {
    double f = 0;
    for (int s = 0; s < splits; ++s) f += double(partial[((int64_t(s) * kSums + m) * n + row) * dv + col]);
    const double scale = double(m < 2 || m == 4 ? sc1[row] : sc2[row]) * (m == 4 ? 1.0 : double(rc[col]));
    F[m] = f * up / scale;
  }
  const double lam = hi > lo ? (o - lo) / (hi - lo) : 0.0;
  for (int m = 0; m < 2; ++m)
    bound[(int64_t(m) * n + row) * dv + col] = ((1 - lam) * F[2 * m] + lam * F[2 * m + 1]) * (1 + 1e-12);
  excess[x] = (hi - lo) / 2 * F[4];
}

// The exact sums of the check rows, in double: exact[m][r][col] (m = 0, 1), and the interpolation of the exact
// F1 at the knots, exact[2][r][col] (what the interpolation alone gives, for the excess certificate's check).
__global__ void exact_kernel(int n, int dv, int rows, const float* W1, const float* W2, const float* V, const float* O,
                             const float* knots, double* exact) {
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (r >= rows) return;
  const int64_t i = int64_t(r) * (n / rows);
  for (int c = lane; c < dv; c += 32) {
    const double o = O[i * dv + c];
    const double lo = knots[((i / 16) * 2 + 0) * dv + c], hi = knots[((i / 16) * 2 + 1) * dv + c];
    double s1 = 0, s2 = 0, f_lo = 0, f_hi = 0;
    for (int j = 0; j < n; ++j) {
      const double v = V[int64_t(j) * dv + c], w1 = W1[i * n + j];
      const double d = fabs(v - o);
      s1 += w1 * d;
      s2 += double(W2[i * n + j]) * d;
      f_lo += w1 * fabs(v - lo);
      f_hi += w1 * fabs(v - hi);
    }
    const double lam = hi > lo ? (o - lo) / (hi - lo) : 0.0;
    exact[(int64_t(0) * rows + r) * dv + c] = s1;
    exact[(int64_t(1) * rows + r) * dv + c] = s2;
    exact[(int64_t(2) * rows + r) * dv + c] = (1 - lam) * f_lo + lam * f_hi;
  }
}

float run_knots(int n, int dv, int heads, int reps, const float* W1, const float* W2, const float* sc1, const float* sc2,
                const float* Vt, const float* rc, const float* O, float* partial, float* knots, double* bound,
                double* excess) {
  const int splits = (n + kSplitKeys - 1) / kSplitKeys;
  const dim3 grid(n / (16 * kWarps), dv / kColsPerWarp, splits);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
    CHECK(cudaEventRecord(a));
    for (int h = 0; h < heads; ++h) {
      knot_kernel<<<grid, 32 * kWarps>>>(n, dv, W1, W2, sc1, sc2, Vt, rc, O, partial, knots);
      finalize_kernel<<<unsigned((int64_t(n) * dv + 255) / 256), 256>>>(n, dv, splits, partial, knots, sc1, sc2, rc, O,
                                                                        bound, excess);
    }
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
  int n = 16384, dv = 128, heads = 16, check = 256, reps = 3;
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
    else {
      std::fprintf(stderr, "knot_sums_rate: unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  if (n < kSplitKeys || n % kSplitKeys || dv < kColsPerWarp || dv % kColsPerWarp || dv > 256 || check < 1 || check > n ||
      heads < 1 || reps < 1 || !(sd > 0) || !(tol > 0)) {
    std::fprintf(stderr, "knot_sums_rate: --n a multiple of %d, --dv a multiple of %d up to 256, 1 <= --check <= n, "
                 "positive --heads, --reps, --sd, --tol\n", kSplitKeys, kColsPerWarp);
    return 2;
  }
  const int splits = n / kSplitKeys;
  float *W1, *W2, *sc1, *sc2, *V, *Vt, *rc, *O, *partial, *knots;
  double *bound, *excess, *exact;
  CHECK(cudaMalloc(&W1, size_t(n) * n * 4));
  CHECK(cudaMalloc(&W2, size_t(n) * n * 4));
  CHECK(cudaMalloc(&sc1, size_t(n) * 4));
  CHECK(cudaMalloc(&sc2, size_t(n) * 4));
  CHECK(cudaMalloc(&V, size_t(n) * dv * 4));
  CHECK(cudaMalloc(&Vt, size_t(n) * dv * 4));
  CHECK(cudaMalloc(&rc, size_t(dv) * 4));
  CHECK(cudaMalloc(&O, size_t(n) * dv * 4));
  CHECK(cudaMalloc(&partial, size_t(splits) * kSums * n * dv * 4));
  CHECK(cudaMalloc(&knots, size_t(n / 16) * 2 * dv * 4));
  CHECK(cudaMalloc(&bound, size_t(2) * n * dv * 8));
  CHECK(cudaMalloc(&excess, size_t(n) * dv * 8));
  CHECK(cudaMalloc(&exact, size_t(3) * check * dv * 8));
  make_weights<<<(n + 7) / 8, 256>>>(n, sd, W1, W2, sc1, sc2);
  make_v<<<1024, 256>>>(n, dv, V);
  make_o<<<(n + 7) / 8, 256>>>(n, dv, W1, V, O);
  make_vt<<<dv, 1024>>>(n, dv, V, Vt, rc);
  CHECK(cudaDeviceSynchronize());
  const float ms = run_knots(n, dv, heads, reps, W1, W2, sc1, sc2, Vt, rc, O, partial, knots, bound, excess);
  exact_kernel<<<(check + 7) / 8, 256>>>(n, dv, check, W1, W2, V, O, knots, exact);
  CHECK(cudaDeviceSynchronize());

  std::vector<double> hb(size_t(2) * n * dv), hx(size_t(n) * dv), he(size_t(3) * check * dv);
  CHECK(cudaMemcpy(hb.data(), bound, hb.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hx.data(), excess, hx.size() * 8, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(he.data(), exact, he.size() * 8, cudaMemcpyDeviceToHost));
  // An element whose certified excess passes tol of its bound would go to the exact per-key loop.
  size_t wide = 0;
  for (size_t x = 0; x < hx.size(); ++x) wide += !(hx[x] <= tol * hb[x]);
  std::printf("(1, %d, %d, %d), scores N(0, %g^2): knot kernels %.2f ms for %d heads (median of %d); "
              "elements whose interpolation excess may pass %g of the bound: %zu of %zu (%.3f %%)\n",
              heads, n, dv, sd, ms, heads, reps, tol, wide, hx.size(), 100.0 * wide / hx.size());
  for (int m = 0; m < 2; ++m) {
    std::vector<double> ratio;
    size_t below = 0, uncovered = 0;
    for (int r = 0; r < check; ++r)
      for (int c = 0; c < dv; ++c) {
        const int64_t i = int64_t(r) * (n / check);
        const double ex = he[(size_t(m) * check + r) * dv + c], b = hb[(size_t(m) * n + i) * dv + c];
        if (!(ex > 0)) continue;
        if (!(b >= ex)) ++below;
        // The certificate bounds the exact interpolation's excess over the exact sum (W1's; W2's would be it
        // times the row's largest W2 / W1, not computed here).
        const double interp = he[(size_t(2) * check + r) * dv + c];
        if (m == 0 && !(interp - ex <= hx[size_t(i) * dv + c] * (1 + 1e-9) + 1e-300)) ++uncovered;
        ratio.push_back(b / ex);
      }
    std::sort(ratio.begin(), ratio.end());
    auto q = [&](double p) { return ratio[std::min(ratio.size() - 1, size_t(p * ratio.size()))]; };
    std::printf("  sum %d: %zu elements of %d rows; bound below the exact sum: %zu%s; bound / exact min %.6f "
                "median %.6f p99 %.6f p99.9 %.6f max %.6f\n", m + 1, ratio.size(), check, below,
                m == 0 ? (", interpolation excess beyond its certificate: " + std::to_string(uncovered)).c_str() : "", ratio.front(),
                q(0.5), q(0.99), q(0.999), ratio.back());
  }
  return 0;
}
