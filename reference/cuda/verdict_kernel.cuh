// The verdict on the GPU: every element of the subject's O (and every LSE row) judged by
// reference/element_verdict.h, reduced to the counts, maxima, sums and histogram of BudgetVerdict. The
// worst elements are found in two passes: the first also keeps each thread's largest error/bound, whose
// k-th largest (over all threads) is a lower bound of the true k-th largest; the second collects every
// element at or above it.
#pragma once

#include "reference/cuda/oracle_common.cuh"
#include "reference/element_verdict.h"

namespace fc::gpu::detail {

// Non-negative doubles order as their bit patterns: atomicMax on the bits (NaN never comes here).
__device__ __forceinline__ void atomic_max_pos(unsigned long long* at, double x) {
  if (x > 0) atomicMax(at, static_cast<unsigned long long>(__double_as_longlong(x)));
}

// One O element or LSE row of the pass, as check_against_budget judges it: the element, and what the
// worst list would note (error, bound). idx and row count from the pass's first row (the workspace's
// indexing); the subject's tensors are read at the global position.
struct Judged {
  verdict::Element e;
  double got, want, noted_err, noted_bound;
  bool noted;
};
__device__ __forceinline__ Judged judge_o_at(const Shape& s, const VerdictIn& in, int64_t idx) {
  Judged j;
  const int64_t row = idx / s.dv;
  const bool empty_row = in.lse_ref[row] == -HUGE_VAL;
  j.got = load_stored(s.out, in.o, s.row0 * s.dv + idx);
  j.want = in.o_ref[idx];
  const double bound = in.o_bound[idx];
  j.e = verdict::judge_o(j.got, j.want, bound, in.o_bound_prob[idx], in.scale_a[idx], empty_row, in.format);
  j.noted = j.e.kind != verdict::Kind::skip;
  j.noted_err = j.e.err;
  j.noted_bound = j.e.kind == verdict::Kind::violation ? (j.e.nan_mismatch ? bound : 0.0) : bound;
  return j;
}
__device__ __forceinline__ Judged judge_lse_at(const Shape& s, const VerdictIn& in, int64_t row) {
  Judged j;
  const bool empty_row = in.lse_ref[row] == -HUGE_VAL;
  j.got = in.lse[s.row0 + row];
  j.want = in.lse_ref[row];
  const double bound = in.lse_bound[row];
  j.e = verdict::judge_lse(j.got, j.want, bound, empty_row);
  // check_against_budget notes an LSE row only when it is a violation.
  j.noted = j.e.kind == verdict::Kind::violation || (j.e.kind == verdict::Kind::checked && j.e.err > bound);
  j.noted_err = j.e.kind == verdict::Kind::violation ? HUGE_VAL : j.e.err;
  const bool nan_branch = j.want != j.want || j.got != j.got;
  j.noted_bound = j.e.kind == verdict::Kind::violation && !nan_branch && empty_row ? 0.0 : bound;
  return j;
}

// Pass 1: the sums; each thread's largest noted error/bound into best[thread]. The histogram is counted per
// block in shared memory and added once per bin: most elements fall in a few bins, and one global atomic
// per element on them serialised the kernel (Nsight Compute: 1.4 % of issue slots busy).
__global__ void verdict_kernel(Shape s, VerdictIn in, VerdictSums* sums, double* best) {
  __shared__ unsigned long long histogram[verdict::kHistSize];
  for (int b = threadIdx.x; b < verdict::kHistSize; b += blockDim.x) histogram[b] = 0;
  __syncthreads();
  const int64_t n_o = s.pass_rows * s.dv, n_lse = in.lse ? s.pass_rows : 0, total = n_o + n_lse;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  unsigned long long elements = 0, violations = 0, nan_mm = 0, lse_checked = 0, exceed = 0;
  double sum_ratio = 0, sum_su = 0, sum_sq = 0, max_ratio = 0, max_prob = 0, max_su = 0, max_abs = 0, max_lse = 0;
  double my_best = -1;
  for (int64_t x = tid; x < total; x += stride) {
    const bool is_lse = x >= n_o;
    const Judged j = is_lse ? judge_lse_at(s, in, x - n_o) : judge_o_at(s, in, x);
    if (j.noted) my_best = fmax(my_best, verdict::ratio(j.noted_err, j.noted_bound));
    if (j.e.kind == verdict::Kind::skip) continue;
    if (j.e.kind == verdict::Kind::violation) {
      ++violations;
      nan_mm += j.e.nan_mismatch;
      continue;
    }
    if (is_lse) {
      ++lse_checked;
      max_lse = fmax(max_lse, j.e.ratio);
      if (j.e.err > in.lse_bound[x - n_o]) ++violations;
      continue;
    }
    ++elements;
    sum_ratio += isfinite(j.e.ratio) ? j.e.ratio : 0.0;
    max_ratio = fmax(max_ratio, j.e.ratio);
    max_prob = fmax(max_prob, j.e.ratio_probabilistic);
    if (j.e.ratio_probabilistic > 1) ++exceed;
    max_su = fmax(max_su, j.e.scaled_ulps);
    sum_su += j.e.scaled_ulps;
    max_abs = fmax(max_abs, j.e.err);
    sum_sq += j.e.err * j.e.err;
    if (j.e.err > in.o_bound[x]) ++violations;
    atomicAdd(&histogram[verdict::histogram_bin(isfinite(j.e.ratio) ? j.e.ratio : HUGE_VAL)], 1ull);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < verdict::kHistSize; b += blockDim.x)
    if (histogram[b]) atomicAdd(&sums->histogram[b], histogram[b]);
  best[tid] = my_best;
  // The warp's totals, then one atomic each from its first lane (the counts and maxima are order-free; the
  // float64 sums, reports' means, were in atomic order before too).
  auto count = [](unsigned long long x) { return static_cast<unsigned long long>(warp_sum_i(int64_t(x))); };
  elements = count(elements), violations = count(violations), nan_mm = count(nan_mm);
  lse_checked = count(lse_checked), exceed = count(exceed);
  sum_ratio = warp_sum(sum_ratio), sum_su = warp_sum(sum_su), sum_sq = warp_sum(sum_sq);
  max_ratio = warp_max(max_ratio), max_prob = warp_max(max_prob), max_su = warp_max(max_su);
  max_abs = warp_max(max_abs), max_lse = warp_max(max_lse);
  if (threadIdx.x % 32 != 0) return;
  atomicAdd(&sums->elements, elements);
  atomicAdd(&sums->violations, violations);
  atomicAdd(&sums->nan_mismatches, nan_mm);
  atomicAdd(&sums->lse_checked, lse_checked);
  atomicAdd(&sums->exceed_probabilistic, exceed);
  atomicAdd(&sums->sum_ratio, sum_ratio);
  atomicAdd(&sums->sum_scaled_ulps, sum_su);
  atomicAdd(&sums->sum_sq_error, sum_sq);
  atomic_max_pos(&sums->max_ratio, max_ratio);
  atomic_max_pos(&sums->max_ratio_probabilistic, max_prob);
  atomic_max_pos(&sums->max_scaled_ulps, max_su);
  atomic_max_pos(&sums->max_abs_error, max_abs);
  atomic_max_pos(&sums->max_lse_ratio, max_lse);
}

// Between the passes: the largest of n thread maxima (best[]) and the k-th largest (1 <= k <= n), each at
// least 0, into out[0] and out[1]; one block. A radix select on the bit patterns, a byte at a time from
// the top (non-negative doubles order as their bits; a thread that noted nothing holds -1, taken as 0, as
// the threshold is at least 0 anyway): per byte, the histogram of the values that share the bytes chosen
// so far, then the byte where the count from the top reaches k. The values of a pass share their upper
// bytes, so a warp's lanes that fall in one bin add to it once, by their leader (one shared-memory atomic
// per value had serialised the kernel: 9.7 ms a pass at (1, 16, 16k, 128), H200). The host had copied all
// n (2 MB a pass) and selected there.
inline constexpr int kSelectThreads = 1024;
__global__ void __launch_bounds__(kSelectThreads) kth_largest_kernel(const double* best, int64_t n, int64_t k,
                                                                     double* out) {
  __shared__ unsigned hist[256];
  __shared__ unsigned long long prefix, top;
  __shared__ int64_t remaining_k;
  auto key = [&](int64_t x) {
    const double v = x < n ? best[x] : 0.0;
    return v > 0 ? static_cast<unsigned long long>(__double_as_longlong(v)) : 0ull;
  };
  if (threadIdx.x == 0) prefix = 0, remaining_k = k, top = 0;
  __syncthreads();
  // Every lane runs the same number of iterations (keys past n read as 0 and are not counted), so that
  // the warp's match below sees all its lanes.
  const int64_t rounds = (n + blockDim.x - 1) / blockDim.x;
  double my_top = 0;  // the values as keyed: NaN and what is not above 0 count as 0, so warp_max sees no NaN
  for (int64_t r = 0; r < rounds; ++r) {
    const double v = __longlong_as_double(static_cast<long long>(key(r * blockDim.x + threadIdx.x)));
    my_top = v > my_top ? v : my_top;
  }
  my_top = warp_max(my_top);
  if (threadIdx.x % 32 == 0) atomic_max_pos(&top, my_top);
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    const unsigned long long want = prefix, mask = shift == 56 ? 0ull : ~0ull << (shift + 8);
    for (int64_t r = 0; r < rounds; ++r) {
      const int64_t x = r * blockDim.x + threadIdx.x;
      const unsigned long long kx = key(x);
      const bool in = x < n && (kx & mask) == want;
      const int bin = in ? int((kx >> shift) & 0xffu) : -1;
      const unsigned same = __match_any_sync(0xffffffffu, bin);
      if (in && threadIdx.x % 32 == unsigned(__ffs(same) - 1)) atomicAdd(&hist[bin], unsigned(__popc(same)));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t seen = 0;
      int b = 255;
      for (; b > 0 && seen + hist[b] < remaining_k; --b) seen += hist[b];
      remaining_k -= seen;
      prefix = want | (static_cast<unsigned long long>(b) << shift);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[0] = __longlong_as_double(static_cast<long long>(top));
    out[1] = __longlong_as_double(static_cast<long long>(prefix));
  }
}

// Pass 2: every noted element whose error/bound reaches the threshold, up to `cap` of them.
__global__ void worst_kernel(Shape s, VerdictIn in, double threshold, Candidate* out, unsigned long long* count,
                             unsigned long long cap) {
  const int64_t n_o = s.pass_rows * s.dv, n_lse = in.lse ? s.pass_rows : 0, total = n_o + n_lse;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < total; x += int64_t(gridDim.x) * blockDim.x) {
    const bool is_lse = x >= n_o;
    const Judged j = is_lse ? judge_lse_at(s, in, x - n_o) : judge_o_at(s, in, x);
    if (!j.noted) continue;
    const double ratio = verdict::ratio(j.noted_err, j.noted_bound);
    if (!(ratio >= threshold)) continue;
    const unsigned long long at = atomicAdd(count, 1ull);
    if (at >= cap) continue;
    out[at] = Candidate{ratio, is_lse ? s.row0 + x - n_o : s.row0 * s.dv + x, is_lse ? 1 : 0, j.got, j.want, j.noted_err, j.noted_bound,
                        is_lse ? 0.0 : j.e.scaled_ulps};
  }
}

}  // namespace fc::gpu::detail
