// Exact attention in float64 on the GPU, with the certificate of exact_attention_f64
// (reference/exact_attention.cpp): for a row with n visible keys, the computed scores differ from the
// exact ones by at most gamma_{d+1} |scale| sum |q||k_j| in any summation order, the exp and log of
// CUDA's double math library are within 1 ulp (CUDA C++ Programming Guide, mathematical functions,
// double precision), like glibc's, and the sums add gamma_n in any order. So the same bound holds:
// the formulas below are exact_attention_f64's.
//
// A block owns rows_per_block rows (a warp each) and stages each chunk of 32 keys in shared memory (K
// transposed, V row-major, as doubles). Two sweeps: the maximum score, then the weights (a lane per key) feeding
// l and the accumulators (a lane per column). With a score cache (two planes of [pass_rows * n_k] doubles,
// the budget's cache lent to it) filled by the score kernel (score_kernel.cuh; `filled`), both sweeps
// read each visible key's dot product and absolute dot product from it; with a cache and no score
// kernel, sweep 1 stores them and sweep 2 reads them instead of staging K again. Either way they are the
// same doubles as computed here, so the same results bit for bit.
#pragma once

#include "reference/abs_scale_bound.h"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

__device__ __forceinline__ double gamma53(double n) {
  const double u = 0x1p-53;
  return n * u / (1.0 - n * u);
}

// A row that takes no part in the sums (here and in reference_tiled_kernel.cuh): O = 0 and LSE = -inf
// without a visible key, NaN in both with a NaN score; o0 = lr * dv, the row's first O element. The
// warp's lanes write its columns.
__device__ __forceinline__ void write_idle_row(const Shape& s, const ReferenceOut& out, int64_t lr, int64_t o0,
                                               bool nan_score, int lane) {
  for (int c = lane; c < s.dv; c += 32) {
    out.o[o0 + c] = nan_score ? nan("") : 0.0;
    out.o_err[o0 + c] = 0.0;
    out.abs_scale[o0 + c] = 0.0;
  }
  if (lane == 0) {
    out.lse[lr] = nan_score ? nan("") : -HUGE_VAL;
    out.lse_err[lr] = 0.0;
    out.a_factor[lr] = 1.0;
    out.a_floor[lr] = 0.0;
  }
}

// Shared memory: the staged K and V chunks (true values: stored * descale), then per warp its row's Q and
// the chunk's weights.
__host__ __device__ constexpr size_t reference_warp_bytes(int d) { return smem_align(sizeof(double) * (size_t(d) + kChunk)); }
__host__ __device__ constexpr size_t reference_smem(int d, int dv, int rows) {
  return staged_k_bytes(d) + staged_v_bytes(dv) + size_t(rows) * reference_warp_bytes(d);
}

// Two blocks per SM (at most 128 registers): the staging's latency hides behind the other block.
__global__ void __launch_bounds__(32 * kMaxRowsPerBlock, 2)
    reference_kernel(Shape s, const double* key_vmax, ReferenceOut out, double* scores, bool filled) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockRows br = block_rows(s);
  unsigned char* base = reinterpret_cast<unsigned char*>(smem);
  double* kT = reinterpret_cast<double*>(base);
  double* vS = reinterpret_cast<double*>(base + staged_k_bytes(s.d));
  double* q = reinterpret_cast<double*>(base + staged_k_bytes(s.d) + staged_v_bytes(s.dv) +
                                        size_t(warp) * reference_warp_bytes(s.d));
  double* wbuf = q + s.d;
  const int64_t i = br.i0 + warp;
  const bool active = i < s.n_q;
  const int64_t r = br.r0 + warp, lr = r - s.row0;  // global row, row in this pass's workspace
  int64_t lo = 0, hi = 0;
  if (active) {
    row_key_range(s, i, br.len, lo, hi);
    const int64_t qb = q_base(s, br.b, br.h, i);
    for (int c = lane; c < s.d; c += 32) q[c] = load_stored(s.in, s.q, qb + c) * s.qd;
  }
  const double kd = s.kd, vd = s.vd;
  auto k_value = [kd](double x) { return x * kd; };
  auto v_value = [vd](double x) { return x * vd; };
  const double u = 0x1p-53, inf = HUGE_VAL;
  auto dot = [&](int t) {  // the score's dot of key t of the staged chunk
    double acc = 0;
    for (int c = 0; c < s.d; ++c) acc = fma(q[c], kT[c * kPitch + t], acc);
    return acc;
  };
  auto dot_abs = [&](int t, double& abs_dot) {
    double acc = 0, acc_abs = 0;
    for (int c = 0; c < s.d; ++c) {
      const double qc = q[c], kc = kT[c * kPitch + t];
      acc = fma(qc, kc, acc);
      acc_abs = fma(fabs(qc), fabs(kc), acc_abs);
    }
    abs_dot = acc_abs;
    return acc;
  };

  const bool cached = scores != nullptr;  // block-uniform; filled (the score kernel's) implies cached
  double* cache_dot = cached ? scores + lr * s.n_k : nullptr;
  double* cache_abs = cached ? cache_dot + s.pass_rows * s.n_k : nullptr;

  // Sweep 1: the maximum score, NaN, the number of visible keys.
  double m = -inf;
  bool nan_score = false;
  int64_t n = 0;
  for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi; j0 += kChunk) {
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    if (!filled) {
      __syncthreads();
      stage_k(s, br, j0, nc, kT, k_value);
      __syncthreads();
    }
    const int64_t j = j0 + lane;
    if (active && lane < nc && sees_key(s, i, j, lo, hi, br.len)) {
      double sc;
      if (filled) {
        sc = s.scale * cache_dot[j];
      } else if (cached) {  // dot_abs's first sum is dot's, in the same order
        double ad;
        const double dt = dot_abs(lane, ad);
        cache_dot[j] = dt;
        cache_abs[j] = ad;
        sc = s.scale * dt;
      } else {
        sc = s.scale * dot(lane);
      }
      ++n;
      if (sc != sc) nan_score = true;
      else m = fmax(m, sc);
    }
  }
  m = warp_max(m);
  n = warp_sum_i(n);
  nan_score = __any_sync(0xffffffffu, nan_score);
  const int64_t o0 = lr * s.dv;
  const bool done = !active || nan_score || n == 0;
  if (active && done) write_idle_row(s, out, lr, o0, nan_score, lane);
  if (__syncthreads_and(done)) return;

  // Sweep 2: weights, l, a and the absolute accumulator, chunk by chunk.
  double l = 0, eta_max = 0, v_max = 0;  // v_max in stored units
  const int64_t kv0 = (int64_t(br.b) * s.heads_kv + br.hk) * s.n_k;
  double a[kCols], abs_a[kCols];
  for (int t = 0; t < kCols; ++t) a[t] = abs_a[t] = 0;
  const double g_d = gamma53(double(s.d) + 1) * fabs(s.scale);
  for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi; j0 += kChunk) {
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    __syncthreads();
    if (!cached) stage_k(s, br, j0, nc, kT, k_value);
    stage_v(s, br, j0, nc, vS, v_value);
    __syncthreads();
    if (done) continue;
    const int64_t j = j0 + lane;
    const bool vis = lane < nc && sees_key(s, i, j, lo, hi, br.len);
    double w = 0;
    if (vis) {
      double ad;
      const double dt = cached ? (ad = cache_abs[j], cache_dot[j]) : dot_abs(lane, ad);
      const double x = s.scale * dt - m;
      eta_max = fmax(eta_max, g_d * ad + u * fabs(x) + 2.01 * u);
      w = exp(x);
      l += w;
      v_max = fmax(v_max, key_vmax[kv0 + j]);
    }
    const unsigned visible_lanes = __ballot_sync(0xffffffffu, vis);
    wbuf[lane] = w;
    __syncwarp();
    for (int t = 0; t < nc; ++t) {
      if (!(visible_lanes >> t & 1u)) continue;
      const double wt = wbuf[t];
      for (int cc = 0; cc < kCols; ++cc) {
        const int c = lane + 32 * cc;
        if (c >= s.dv) break;
        const double val = vS[t * s.dv + c];
        a[cc] = fma(wt, val, a[cc]);
        abs_a[cc] = fma(wt, fabs(val), abs_a[cc]);
      }
    }
    __syncwarp();
  }
  if (done) return;
  l = warp_sum(l);
  eta_max = warp_max(eta_max);
  v_max = warp_max(v_max) * fabs(s.vd);  // exact: the largest |V| of the visible keys
  // exp results in double's subnormal range carry an absolute, not relative, error.
  const double underflow = 2 * double(n) * 0x1p-1074 * v_max / l;
  const double e = exp(eta_max), g = gamma53(double(n) + 2);
  for (int cc = 0; cc < kCols; ++cc) {
    const int c = lane + 32 * cc;
    if (c >= s.dv) break;
    const double o = a[cc] / l;
    const double abs_scale = abs_a[cc] / l * (1 + g);
    out.o[o0 + c] = o;
    out.abs_scale[o0 + c] = o != o ? 0.0 : abs_a[cc] / l;
    out.o_err[o0 + c] =
        1.001 * (2 * e * e * e * (e - 1) * abs_scale + g * (abs_scale + fabs(o)) + 2 * u * fabs(o) + underflow);
  }
  if (lane == 0) {
    const double lse = m + log(l);
    out.lse[lr] = lse;
    out.lse_err[lr] = 1.001 * (eta_max + g + 2 * u * fabs(log(l)) + u * fabs(lse));
    const AbsScaleBound ab = abs_scale_bound(e, g, underflow);
    out.a_factor[lr] = ab.factor;
    out.a_floor[lr] = ab.floor;
  }
}

}  // namespace fc::gpu::detail
