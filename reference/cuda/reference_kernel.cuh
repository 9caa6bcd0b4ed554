// Exact attention in float64 on the GPU, with the certificate of exact_attention_f64
// (reference/exact_attention.cpp): for a row with n visible keys, the computed scores differ from the
// exact ones by at most gamma_{d+1} |scale| sum |q||k_j| in any summation order, the exp and log of
// CUDA's double math library are within 1 ulp (CUDA C++ Programming Guide, mathematical functions,
// double precision), like glibc's, and the sums add gamma_n in any order. So the same bound holds:
// the formulas below are exact_attention_f64's.
//
// One warp per query row, two sweeps over the keys: the maximum score, then the weights, l and the
// accumulators. Keys go in chunks of 32 (a lane each) for the scores; the chunk's weights then feed the
// columns (a lane per column, coalesced V reads).
#pragma once

#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

__device__ __forceinline__ double gamma53(double n) {
  const double u = 0x1p-53;
  return n * u / (1.0 - n * u);
}

// Shared memory: warps * (d + 64) doubles (the row's Q, the chunk's weights and visibility).
__global__ void reference_kernel(Shape s, ReferenceOut out) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int64_t r = int64_t(blockIdx.x) * warps + warp;
  if (r >= s.rows()) return;
  double* q = smem + size_t(warp) * (s.d + 64);
  double* wbuf = q + s.d;
  const Row row = row_of(s, r);
  const int64_t qb = q_base(s, row.b, row.h, row.i);
  for (int c = lane; c < s.d; c += 32) q[c] = load_stored(s.in, s.q, qb + c) * s.qd;
  __syncwarp();
  const double u = 0x1p-53, inf = HUGE_VAL;

  auto dot = [&](int64_t j, double* abs_dot) {
    const int64_t kb = k_base(s, row.b, row.hk, j);
    double acc = 0, acc_abs = 0;
    for (int c = 0; c < s.d; ++c) {
      const double kv = load_stored(s.in, s.k, kb + c) * s.kd;
      acc = fma(q[c], kv, acc);
      acc_abs = fma(fabs(q[c]), fabs(kv), acc_abs);
    }
    if (abs_dot) *abs_dot = acc_abs;
    return acc;
  };

  // Sweep 1: the maximum score, NaN, the number of visible keys.
  double m = -inf;
  bool nan_score = false;
  int64_t n = 0;
  for (int64_t j = lane; j < s.n_k; j += 32) {
    if (!visible(s, row.i, j, row.len)) continue;
    const double sc = s.scale * dot(j, nullptr);
    ++n;
    if (sc != sc) nan_score = true;
    else m = fmax(m, sc);
  }
  m = warp_max(m);
  n = warp_sum_i(n);
  nan_score = __any_sync(0xffffffffu, nan_score);
  const int64_t o0 = r * s.dv;
  if (nan_score || n == 0) {
    for (int c = lane; c < s.dv; c += 32) {
      out.o[o0 + c] = nan_score ? nan("") : 0.0;
      out.o_err[o0 + c] = 0.0;
    }
    if (lane == 0) {
      out.lse[r] = nan_score ? nan("") : -inf;
      out.lse_err[r] = 0.0;
    }
    return;
  }

  // Sweep 2: weights, l, a and the absolute accumulator, chunk by chunk.
  double l = 0, eta_max = 0, v_max = 0;
  double a[kCols], abs_a[kCols];
  for (int t = 0; t < kCols; ++t) a[t] = abs_a[t] = 0;
  const double g_d = gamma53(double(s.d) + 1) * fabs(s.scale);
  for (int64_t j0 = 0; j0 < s.n_k; j0 += 32) {
    const int64_t j = j0 + lane;
    const bool vis = j < s.n_k && visible(s, row.i, j, row.len);
    double w = 0;
    if (vis) {
      double ad;
      const double x = s.scale * dot(j, &ad) - m;
      eta_max = fmax(eta_max, g_d * ad + u * fabs(x) + 2.01 * u);
      w = exp(x);
      l += w;
    }
    const unsigned visible_lanes = __ballot_sync(0xffffffffu, vis);
    wbuf[lane] = w;
    __syncwarp();
    for (int t = 0; t < 32; ++t) {
      if (!(visible_lanes >> t & 1u)) continue;
      const double wt = wbuf[t];
      const int64_t vb = v_base(s, row.b, row.hk, j0 + t);
      for (int cc = 0; cc < kCols; ++cc) {
        const int c = lane + 32 * cc;
        if (c >= s.dv) break;
        const double val = load_stored(s.in, s.v, vb + c) * s.vd;
        a[cc] = fma(wt, val, a[cc]);
        abs_a[cc] = fma(wt, fabs(val), abs_a[cc]);
        v_max = fmax(v_max, fabs(val));
      }
    }
    __syncwarp();
  }
  l = warp_sum(l);
  eta_max = warp_max(eta_max);
  v_max = warp_max(v_max);
  // exp results in double's subnormal range carry an absolute, not relative, error.
  const double underflow = 2 * double(n) * 0x1p-1074 * v_max / l;
  const double e = exp(eta_max), g = gamma53(double(n) + 2);
  for (int cc = 0; cc < kCols; ++cc) {
    const int c = lane + 32 * cc;
    if (c >= s.dv) break;
    const double o = a[cc] / l;
    const double abs_scale = abs_a[cc] / l * (1 + g);
    out.o[o0 + c] = o;
    out.o_err[o0 + c] =
        1.001 * (2 * e * e * e * (e - 1) * abs_scale + g * (abs_scale + fabs(o)) + 2 * u * fabs(o) + underflow);
  }
  if (lane == 0) {
    const double lse = m + log(l);
    out.lse[r] = lse;
    out.lse_err[r] = 1.001 * (eta_max + g + 2 * u * fabs(log(l)) + u * fabs(lse));
  }
}

}  // namespace fc::gpu::detail
