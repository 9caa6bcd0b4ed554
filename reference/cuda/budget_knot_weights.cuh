// The knot form's row weights (docs/error-analysis.md §3.18), made by the row form's weights kernel
// (budget_kernel.cuh) as it makes each key's e, so that no kernel reads the e back to scale and round them:
//   W = e 2^14 and W3 = e^2 2^14 rounded up to fp16 per key, their sums, the alignment excess bounds and (in
//   budget_kernel.cuh's walk) the row's counts into KnotRowTerms;
//   knot_zeta_kernel then makes WZ for the rows with an underflowed key (rare), whose scale needs their
//   largest z first.
// The scale of W and W3 is budget_knots.h kKnotRowScale (a row's largest e is 1), known before any key is seen.
// The weights are the CPU's bit for bit (to_fp16 rounds up in one step on both).
#pragma once

#include <cuda_fp16.h>

#include "reference/budget_knots.h"
#include "reference/budget_sums.h"
#include "reference/cuda/oracle_common.cuh"

namespace fc::gpu::detail {

// The bits of an fp16 number held in a double (exact).
__device__ __forceinline__ uint16_t fp16_bits(double x) { return __half_as_ushort(__double2half(x)); }

// One lane's share of a row's knot weights, reduced over the warp by finish.
struct KnotRowWeights {
  double ws = 0, w3s = 0, x_sub = 0;
  float emax = 0, zmax = 0;

  // Visible key at ka (slot * keys_pad + j) with weights rw; p_sub its P may be subnormal, whi_of the upper
  // weight of weights (budget_sums.h row_whi) and key_vmax its largest |V| (read only where the excess needs it).
  template <class Whi, class Vmax>
  __device__ __forceinline__ void add(const KnotWork& kw, int64_t ka, const budget::RowWeights& rw, bool p_sub,
                                      const BudgetParams& bp, double vd, Whi&& whi_of, Vmax&& key_vmax) {
    const double e = rw.e, we = budget::knot_weight(e, budget::kKnotRowScale),
                 we3 = budget::knot_weight(e * e, budget::kKnotRowScale);
    kw.w[ka] = fp16_bits(we);
    kw.w3[ka] = fp16_bits(we3);
    ws += we, w3s += we3;
    emax = fmaxf(emax, rw.e), zmax = fmaxf(zmax, rw.z);
    if (bp.tc && p_sub)  // error_budget.cpp's knot_x_sub (rare: a subnormal P)
      x_sub = fmax(x_sub, budget::max2(double(whi_of(rw)), bp.p_floor) * align_mag(key_vmax(), bp.mn_op) * vd);
  }
  // A key the row does not see.
  __device__ __forceinline__ static void zero(const KnotWork& kw, int64_t ka) {
    kw.w[ka] = 0;
    kw.w3[ka] = 0;
  }
  // The row's terms (all lanes; lane 0 writes them): n its visible keys, the counts from the weights kernel's
  // walk; the keys of [0, covered_lo) and [covered_hi, keys_pad), which the walk did not reach, zeroed. WZ's
  // scale and sum stay 1 and 0 until knot_zeta_kernel.
  // x_small (error_budget.cpp's knot_x_small) is the upper weight of the row's largest e and z, from whi_of.
  template <class Whi>
  __device__ __forceinline__ void finish(const KnotWork& kw, int64_t slot, int64_t n, int n_blocks,
                                         int max_tile_blocks, int64_t covered_lo, int64_t covered_hi, int lane,
                                         const BudgetParams& bp, double vd, Whi&& whi_of) {
    for (int64_t j = lane; j < covered_lo; j += 32) zero(kw, slot * kw.keys_pad + j);
    for (int64_t j = covered_hi + lane; j < kw.keys_pad; j += 32) zero(kw, slot * kw.keys_pad + j);
    ws = warp_sum(ws), w3s = warp_sum(w3s);
    x_sub = warp_max(x_sub);
    const budget::RowWeights top{float(warp_max(double(emax))), float(warp_max(double(zmax)))};
    const bool any_zeta = top.z > 0;
    const double x_small = bp.tc ? budget::max2(double(whi_of(top)), bp.p_floor) * align_mag(bp.mn_op, bp.mn_op) * vd : 0.0;
    if (lane != 0) return;
    KnotRowTerms k{};
    const double nd = double(n);
    k.row = budget::KnotRow{budget::kKnotRowScale, budget::kKnotRowScale, 1.0, budget::double_sum_up(ws, nd),
                            budget::double_sum_up(w3s, nd), 0.0, budget::double_sum_low(w3s, nd)};
    k.x_sub = x_sub, k.x_small = x_small;
    k.n_blocks = n_blocks, k.max_tile_blocks = max_tile_blocks;
    k.any_zeta = any_zeta;
    kw.rows[slot] = k;
  }
};

// One warp a row of the launch with an underflowed key (KnotRowTerms::any_zeta; the others return at once and
// the products read zeros for them): WZ = z scz rounded up over all keys_pad keys (0 where z is), scz from the
// row's largest z, and their sum into the row's terms.
__global__ void knot_zeta_kernel(Shape s, BudgetWeights wts) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t slot = int64_t(blockIdx.x) * s.rows_per_block + warp;
  const KnotWork& kw = wts.knot;
  if (!kw.rows[slot].any_zeta) return;
  const BlockRows br = block_rows(s);
  int64_t lo, hi;  // the row's key range: its words of zeta_keys are the ones the weights kernel wrote
  row_key_range(s, br.i0 + warp, br.len, lo, hi);
  const unsigned* zk = wts.zeta_keys + slot * wts.words;
  auto z_of = [&](int64_t j) {
    return j >= lo && j < hi && (zk[j / 32] >> (j % 32) & 1u) ? double(wts.zeta[slot * s.n_k + j]) : 0.0;
  };
  double zmax = 0;
  for (int64_t j = lo + lane; j < hi; j += 32) zmax = fmax(zmax, z_of(j));
  const double scz = budget::fp16_scale(warp_max(zmax));
  double wzs = 0;
  for (int64_t j = lane; j < kw.keys_pad; j += 32) {
    const double wz = budget::knot_weight(z_of(j), scz);
    kw.wz[slot * kw.keys_pad + j] = fp16_bits(wz);
    wzs += wz;
  }
  wzs = warp_sum(wzs);
  if (lane == 0) {
    kw.rows[slot].row.scz = scz;
    kw.rows[slot].row.wz_up = budget::double_sum_up(wzs, double(wts.rows[slot].n));
  }
}

}  // namespace fc::gpu::detail
