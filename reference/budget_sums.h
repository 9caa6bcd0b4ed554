// The budget's per-(key, column) sums (docs/error-analysis.md §0, and §3.17 for their own arithmetic):
// for one (row, column), over the keys the row sees in ascending order, the centred sums
// sum c_j |V_j - O| (deterministic and probabilistic parts) and the probabilistic model's sum of squares
// (W needs no such sum: budget_terms.h w_bound). They are upper bounds, not values, so they are summed in
// fp32: every factor is an fp32 number at or above the exact one (the weights rounded up, V's stored values
// exact), each chunk of kSumChunk keys is an FMA chain from zero, the chains are added in double, and
// f32_sum_bound turns that into a certified upper bound of the exact sum. This loop runs once per (row,
// key, column), the budget's innermost; in float64 it was most of the GPU oracle's time. The CPU budget
// (error_budget.cpp) and the GPU's (reference/cuda/budget_column_sums.cuh) run this very code, in the
// same order, so they give the same bits from the same weights.
#pragma once

#include <cmath>

#include "reference/budget_terms.h"
#include "reference/host_device.h"

namespace fc::budget {

// A chain restarts at every key index that is a multiple of kSumChunk (counted from the sequence's first
// key), so the grouping does not depend on how a walk splits the keys.
inline constexpr int kSumChunk = 32;

// The smallest fp32 number >= x (the weights of the sums, so that each factor bounds the exact one).
FC_HOST_DEVICE inline float round_up_f32(double x) {
#if defined(__CUDA_ARCH__)
  return __double2float_ru(x);
#else
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, HUGE_VALF);
  return f;
#endif
}

// (1 - u)^-40, rounded up: a chain of m <= 32 FMAs of non-negative terms, one more rounding in each
// term's factors (|V - O| or a product) and the square's four (docs/error-analysis.md §3.17).
inline constexpr double kSumInflation = 1 + 41 * u32;

// The certified upper bound of the exact sum from `chains` (the chains' fp32 results added in double) over
// n terms, times `scale` (V's descale, or its square): each rounding of a chain loses at most u relatively
// or 2^-150 absolutely (a subnormal result), each term's factors u each, so the exact sum is at most
// (chains + n 2^-149) (1 - u)^-40.
FC_HOST_DEVICE inline double f32_sum_bound(double chains, double n, double scale) {
  return scale * (kSumInflation * (chains + n * 0x1p-149));
}

// One key's factors, rounded up (weight_interval, and E exp(eta) and zeta from underflow): whi, err_c, a
// third that is err_c_det under the default convention and the P-rounding weight uP ep + zeta under the
// FA-2 convention (l_fp32, whose err_c_det is err_c), ep = E exp(eta), and zeta.
struct SumWeights {
  float whi, err_c, third, ep, zeta;
};
FC_HOST_DEVICE inline SumWeights sum_weights(const WeightInterval& wi, double ep, double zeta, double uP, bool l_fp32) {
  return {round_up_f32(wi.whi), round_up_f32(wi.err_c), round_up_f32(l_fp32 ? uP * ep + zeta : wi.err_c_det),
          round_up_f32(ep), round_up_f32(zeta)};
}

// O in the units the sums run in (V's stored units: the true V is stored * vd): O / vd as fp32, and an
// upper bound of |vd| |O / vd - that fp32| (true units), which each centred sum adds per unit of its
// weights: |V - O| <= |V - O_f| + that. os - of is exact (of is os rounded to fewer bits); where os * vd
// == O and |vd| gap are exact too (vd = 1, the usual case: two FMAs test it) that is the shift. Otherwise the
// division lost up to 2^-53 |os| (2^-1074 below the normal range) and the product rounded: both are added
// and the result rounded up by 2^-50, above its four roundings' 2^-51.
struct CentredAt {
  float o;
  double shift;
};
FC_HOST_DEVICE inline CentredAt centred_at(double O, double vd) {
  const double os = O / vd;
  const float of = static_cast<float>(os);
  const double gap = std::fabs(os - static_cast<double>(of)), av = std::fabs(vd);
  double shift = av * gap;
  if (std::fma(os, vd, -O) != 0 || std::fma(av, gap, -shift) != 0)
    shift = (shift + av * (std::fabs(os) * 0x1p-53 + 0x1p-1074)) * (1 + 0x1p-50);
  return {of, shift};
}

// fp32 products, not contracted into the FMA that adds them (the chain's rounding points are the model's).
FC_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FC_HOST_DEVICE inline float fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// One key's step of one (row, column)'s fp32 chains: the sums' arithmetic, which ColumnSum::add and the CPU
// budget's groups of columns (error_budget.cpp) both run. l_fp32 (the FA-2 convention): num_det is num,
// tp / tp_det the uncentred P rounding, and p2 squares ep |V| instead of ep |V - O|. op_round (tf32): vop
// sums whi |tf32(V) - V|, the caller's `vop_diff`.
struct ChainRefs {
  float &num, &num_det, &p2, &tp, &tp_det, &vop;
};
FC_HOST_DEVICE inline void add_key(const SumWeights& w, float v, float o, float vop_diff, bool l_fp32, bool op_round,
                                   ChainRefs f) {
  const float av = std::fabs(v);
  const float dv = std::fabs(v - o);
  f.num = fma_f32(w.err_c, dv, f.num);
  if (op_round) f.vop = fma_f32(w.whi, vop_diff, f.vop);
  if (!l_fp32) {
    f.num_det = fma_f32(w.third, dv, f.num_det);
    const float x = mul_rn(w.ep, dv);
    f.p2 = fma_f32(x, x, f.p2);
  } else {
    f.tp = fma_f32(w.third, av, f.tp);
    f.tp_det = fma_f32(w.zeta, av, f.tp_det);
    const float x = mul_rn(w.ep, av);
    f.p2 = fma_f32(x, x, f.p2);
  }
}

// One (row, column)'s sums: chains (double) and this chunk's fp32 partials (add_key above).
struct ColumnSum {
  double num = 0, num_det = 0, p2 = 0, tp = 0, tp_det = 0, vop = 0;
  float f_num = 0, f_num_det = 0, f_p2 = 0, f_tp = 0, f_tp_det = 0, f_vop = 0;

  FC_HOST_DEVICE void add(const SumWeights& w, float v, float o, float vop_diff, bool l_fp32, bool op_round) {
    add_key(w, v, o, vop_diff, l_fp32, op_round, ChainRefs{f_num, f_num_det, f_p2, f_tp, f_tp_det, f_vop});
  }
  // The chunk's chains into the double sums (at every multiple of kSumChunk keys, and at the end); only the
  // sums the conventions use, so that a GPU copy with the conventions constant holds no others.
  FC_HOST_DEVICE void flush(bool l_fp32, bool op_round) {
    num += f_num, p2 += f_p2;
    f_num = f_p2 = 0;
    if (op_round) vop += f_vop, f_vop = 0;
    if (!l_fp32) {
      num_det += f_num_det, f_num_det = 0;
    } else {
      tp += f_tp, tp_det += f_tp_det;
      f_tp = f_tp_det = 0;
    }
  }
};

// The column's sums in true units, as the element bound (§0) takes them: upper bounds over the row's n
// visible keys, the centred ones with the reference's error oe and the centring shift per unit weight
// (sum_err_c, sum_err_c_det, sum_ep2: the row's KeySums), sqrt for the probabilistic roots. vop only with
// tf32's operand term (op_round): without it there is no such term, not even the chains' subnormal floor.
struct ColumnSumBounds {
  double num, num_det, root, tp, tp_det, tp_root, vop;
};
FC_HOST_DEVICE inline ColumnSumBounds column_sum_bounds(const ColumnSum& s, double n, double vd, double oe,
                                                        double shift, double sum_err_c, double sum_err_c_det,
                                                        double sum_ep2, bool l_fp32, bool op_round) {
  const double av = std::fabs(vd), r = oe + shift;
  ColumnSumBounds b;
  b.num = f32_sum_bound(s.num, n, av) + r * sum_err_c;
  b.num_det = l_fp32 ? b.num : f32_sum_bound(s.num_det, n, av) + r * sum_err_c_det;
  b.vop = op_round ? f32_sum_bound(s.vop, n, av) : 0.0;
  b.root = l_fp32 ? 0.0 : std::sqrt(f32_sum_bound(s.p2, n, vd * vd)) + r * std::sqrt(sum_ep2);
  b.tp = l_fp32 ? f32_sum_bound(s.tp, n, av) : 0.0;
  b.tp_det = l_fp32 ? f32_sum_bound(s.tp_det, n, av) : 0.0;
  b.tp_root = l_fp32 ? std::sqrt(f32_sum_bound(s.p2, n, vd * vd)) : 0.0;
  return b;
}

// The row form (BudgetTerms::per_key_eta = false under the default convention, without tf32's operand
// term; docs/error-analysis.md §3.6 and §3.17): every key's interval is that of the row's eta bound, so its
// centred weights are row constants times E_j plus zeta_j (err_c = kc E + zeta, err_c_det = kd E + zeta,
// ep = e^eta E), and the sums over (key, column) need one weight a key: SL = sum e_j |v - o|, SQ = sum
// (e_j |v - o|)^2 and, over the keys with zeta_j > 0 (underflow, rare), SZ = sum z_j |v - o|, with e_j
// and z_j E_j and zeta_j rounded up. Four fp32 operations per (key, column) instead of five.
struct RowWeights {
  float e, z;
};
FC_HOST_DEVICE inline RowWeights row_weights(double E, double zeta) { return {round_up_f32(E), round_up_f32(zeta)}; }
// The row's constants from its eta bound (budget_terms.h row_eta_bound): kc = e^eta (1 + uP) - 1 and
// kd = e^eta - 1 (weight_interval's brackets, the same expressions), ep2 = e^{2 eta}, kw = e^eta (1 + uP)
// (the upper weight's).
struct RowFactors {
  double kc, kd, ep2, kw;
};
FC_HOST_DEVICE inline RowFactors row_factors(const EtaExp& x, double uP) {
  return {x.epm1 * (1 + uP) + uP, x.epm1, x.ep * x.ep, x.ep * (1 + uP)};
}
// A key's upper weight in the row form from what the sums read of it: whi = E e^eta (1 + uP) + zeta <=
// e kw + z, in float64 with three roundings (kw's, the product's, the sum's), which 1 + 2^-50 covers;
// rounded up. The excess term's weight (§3.9), where the per-key form takes its own whi.
FC_HOST_DEVICE inline float row_whi(const RowWeights& w, const RowFactors& f) {
  return round_up_f32((double(w.e) * f.kw + double(w.z)) * (1 + 0x1p-50));
}

// One key's step of the row form's chains (the same rounding points as add_key's: an FMA a term, the
// square of a rounded product); zeta only for a key with zeta_j > 0.
FC_HOST_DEVICE inline void add_key_row(const RowWeights& w, float v, float o, bool zeta, float& sl, float& sq,
                                       float& sz) {
  const float dv = std::fabs(v - o);
  sl = fma_f32(w.e, dv, sl);
  const float y = mul_rn(w.e, dv);
  sq = fma_f32(y, y, sq);
  if (zeta) sz = fma_f32(w.z, dv, sz);
}

// One (row, column)'s row-form sums: chains (double) and this chunk's fp32 partials.
struct RowColumnSum {
  double sl = 0, sq = 0, sz = 0;
  float f_sl = 0, f_sq = 0, f_sz = 0;

  FC_HOST_DEVICE void add(const RowWeights& w, float v, float o, bool zeta) {
    add_key_row(w, v, o, zeta, f_sl, f_sq, f_sz);
  }
  FC_HOST_DEVICE void flush() {
    sl += f_sl, sq += f_sq, sz += f_sz;
    f_sl = f_sq = f_sz = 0;
  }
};

// The row form's sums as column_sum_bounds gives the per-key form's, from upper bounds in true units of
// L >= sum e_j |v - o|, Q >= sum (e_j |v - o|)^2 and Z >= sum z_j |v - o|: num <= kc L + Z, num_det <= kd L + Z,
// the root's sum <= e^{2 eta} Q (the products by the row's constants add two float64 roundings, inside
// kSumInflation's margin of about u over (1 - u)^-40). L and Q come from the chains (row_sum_bounds) or from
// the knots (budget_knots.h).
FC_HOST_DEVICE inline ColumnSumBounds row_bounds(double L, double Q, double Z, double oe, double shift, double sum_err_c,
                                                 double sum_err_c_det, double sum_ep2, const RowFactors& f) {
  const double r = oe + shift;
  ColumnSumBounds b{};
  b.num = f.kc * L + Z + r * sum_err_c;
  b.num_det = f.kd * L + Z + r * sum_err_c_det;
  b.root = std::sqrt(f.ep2 * Q) + r * std::sqrt(sum_ep2);
  return b;
}
// The same from the chains, each bound by f32_sum_bound.
FC_HOST_DEVICE inline ColumnSumBounds row_sum_bounds(const RowColumnSum& s, double n, double vd, double oe,
                                                     double shift, double sum_err_c, double sum_err_c_det,
                                                     double sum_ep2, const RowFactors& f) {
  const double av = std::fabs(vd);
  return row_bounds(f32_sum_bound(s.sl, n, av), f32_sum_bound(s.sq, n, vd * vd), f32_sum_bound(s.sz, n, av), oe,
                    shift, sum_err_c, sum_err_c_det, sum_ep2, f);
}

}  // namespace fc::budget
