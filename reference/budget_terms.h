// The terms of the error budget, one function per section of docs/error-analysis.md §3 (and the
// combination of §0), each a pure function of scalars. reference/error_budget.cpp walks a row's keys and
// columns and calls them; they are written so that a GPU implementation of the same walk can call the
// very same definitions (FC_HOST_DEVICE), and the two budgets cannot drift.
//
// Notation as in error_budget.cpp: sigma = |scale * q_descale * k_descale| (natural-log units per score
// unit); E_j = exp(-sigma Delta_j) the exact unnormalised weight (max 1); eta_j the log-bound of a
// weight's error; zeta_j its absolute (underflow) part; u = 2^-24.
#pragma once

#include <cmath>

#include "reference/host_device.h"

namespace fc::budget {

inline constexpr double u32 = 0x1p-24;

FC_HOST_DEVICE inline double max2(double a, double b) { return a < b ? b : a; }
FC_HOST_DEVICE inline double min2(double a, double b) { return b < a ? b : a; }

// gamma_n = n u / (1 - n u) for fp32 (Higham).
FC_HOST_DEVICE inline double gamma32(double n) { return n * u32 / (1 - n * u32); }

// §3.1 tf32 operands: the exact score error of the RN-rounded operands (a little widened for the
// budget's own double arithmetic).
FC_HOST_DEVICE inline double operand_rounding(double dot_rounded, double dot_exact) {
  return std::fabs(dot_rounded - dot_exact) * (1 + 0x1p-40);
}

// §3.2 Score accumulation over d: |s^ - s~| <= eps R + abs, for `steps` chained roundings (IEEE: d
// sequential fmaf; tensor core: ceil(d / b) block steps of `step` each). Includes the budget's own
// double-precision scores (2^-50).
struct ScoreAccumulation {
  double eps, abs;
};
FC_HOST_DEVICE inline ScoreAccumulation score_accumulation(bool tensor_core, int d, int block, double step) {
  const int steps = tensor_core ? (d + block - 1) / block : d;
  double eps = tensor_core ? steps * step * (1 + steps * step) : gamma32(d);
  eps += 0x1p-50;
  return {eps, steps * 0x1p-149};
}

// The ex2.approx log-bound: 2 ulp from the correctly rounded result, 5u(1 + 5u).
inline constexpr double kEx2Rel = 5 * u32 * (1 + 5 * u32);

// §3.3 Exponent argument: the FFMA, fl(m_t c) and the rounded c, plus one ex2; delta = m - z_j on exact
// scores, run = the running max of the key's tile, eps_max the largest score error of the row.
FC_HOST_DEVICE inline double exponent_argument(double sigma, double delta, double run, double eps_max) {
  return u32 * sigma * ((delta + 2 * eps_max) * 2 + std::fabs(run) + eps_max) * (1 + 4 * u32) + kEx2Rel;
}

// §3.4 Rescale factors: the telescoped argument roundings of every later alpha, and one ex2 per later
// tile that may raise the running max (C, +1 with split-KV merge weights).
FC_HOST_DEVICE inline double rescale_factors(double sigma, double zmax, double run, double eps_max, int later_raises) {
  return 2 * u32 * sigma * (zmax - run + 2 * eps_max) * (1 + 4 * u32) + kEx2Rel * later_raises;
}
// §3.6 A key's eta, the log-bound of its weight's error (before the 1 + 10^-6 every eta takes): the score
// error (§3.2, with R_j) and the tf32 operands' (§3.1), the exponent argument (§3.3) and the rescale
// factors (§3.4) of its tile's running maximum run and the later raises.
struct EtaTerms {
  bool scores, exponent, rescale;
};
FC_HOST_DEVICE inline double key_eta(double sigma, double eps_s, double abs_s, double R, double op_err, double delta,
                                     double zmax, double run, double eps_max, int later_raises, EtaTerms on) {
  double e = 0;
  if (on.scores) e += sigma * (eps_s * R + abs_s);
  e += sigma * op_err;
  if (on.exponent) e += exponent_argument(sigma, delta, run, eps_max);
  if (on.rescale) e += rescale_factors(sigma, zmax, run, eps_max, later_raises);
  return e;
}

// §3.6's row form: an upper bound of every visible key's eta (key_eta times the 1 + 10^-6 that every eta
// takes) from the row's quantities alone, known before any key's weight: each term at its largest over the
// row. The score and operand errors at eps_max (the largest eps_s R_j + abs_s + op_err_j, with or without
// EtaTerms::scores, which only the per-key form drops); the exponent argument, increasing in Delta and
// |run|, at Delta = zmax - zmin and |run| = max(|run_first|, |zmax|) (the running maxima rise from the
// first tile's to zmax); the rescale term, falling in run and rising in the later
// raises, at run_first with the first tile's count (later_first, the most). The terms are non-negative and
// each is monotone in float64 too (rounding to nearest is monotone); the factor 1 + 2^-40 covers the
// per-key sum's other grouping of the score terms (two products by sigma there, one here).
FC_HOST_DEVICE inline double row_eta_bound(double sigma, double eps_max, double zmax, double zmin, double run_first,
                                           int later_first, EtaTerms on) {
  double e = sigma * eps_max;
  if (on.exponent) e += exponent_argument(sigma, zmax - zmin, max2(std::fabs(run_first), std::fabs(zmax)), eps_max);
  if (on.rescale) e += rescale_factors(sigma, zmax, run_first, eps_max, later_first);
  return e * (1 + 1e-6) * (1 + 0x1p-40);
}

// §3.4 Whether tile t may raise the computed running max: its exact max plus the score margin exceeds the
// running max before it minus the margin (always, with split-KV).
FC_HOST_DEVICE inline bool may_raise(double tile_max, double run_before, double eps_max, bool split) {
  return split || tile_max + eps_max > run_before - eps_max;
}

// §3.7 Underflow of small P: whether a key's weight may fall below the flush / P-normal threshold, and
// then its absolute error min(own value, theta), for the weight (zeta) and for l summed from the fp32 p
// (zeta_l, only the ftz part).
// e^x - 1 for |x| <= kSmallEta by its Taylor polynomial through x^6, in FMAs (the same bits on the CPU,
// whose budget is compiled with FMA where the CPU has it, and on the GPU): the remainder is below
// |x|^7 / 5040 (1 + |x|), under 2^-60 relative, and the roundings (the fifth-order bracket q to a few u,
// x^2 q below 2^-9 |x|, the last FMA's half ulp) keep the result within one ulp of e^x - 1. The budget's
// eta, inflated by 10^-6 relative before it gets here (error_budget.cpp), covers an ulp of its exponentials
// many times over: e^eta's margin is then above 10^-6 eta >= 3 10^-13, e^-eta's likewise (docs/error-analysis.md
// §3.6). In the GPU budget's weights kernel CUDA's expm1 and exp were about a sixth of its instructions.
inline constexpr double kSmallEta = 0x1p-8;
FC_HOST_DEVICE inline double expm1_small(double x) {
  double q = std::fma(x, 1.0 / 720, 1.0 / 120);
  q = std::fma(x, q, 1.0 / 24);
  q = std::fma(x, q, 1.0 / 6);
  q = std::fma(x, q, 0.5);
  return std::fma(x * x, q, x);
}

// A key's e^eta, e^-eta and e^eta - 1: the last as expm1 and e^eta as 1 + it (within an ulp of exp's), for
// the usual small eta by expm1_small, else by the library's expm1 and exp (eta is >= 0; NaN takes the
// library's path and stays NaN).
struct EtaExp {
  double ep, em, epm1;
};
FC_HOST_DEVICE inline EtaExp eta_exp(double eta) {
  if (eta <= kSmallEta) {
    const double epm1 = expm1_small(eta);
    return {1 + epm1, 1 + expm1_small(-eta), epm1};
  }
  const double epm1 = std::expm1(eta);
  return {1 + epm1, std::exp(-eta), epm1};
}

struct Underflow {
  double zeta, zeta_l;
};
// A key is flagged when fl(a / eK) < thresh, a = E e^-eta. Most keys are far above it, and a product
// a >= fl(fl(thresh kUnderflowClear) eK) cannot be flagged, so they skip the division (a sixth of the GPU
// weights kernel's float64 work per key had been it): with thresh normal (>= 2^-124, error_budget.cpp) and
// eK = e^{sigma eps} >= 1 that product is at least thresh eK (1 + 2^-40)(1 - 2^-53)^2 (an overflow to +inf
// only makes it larger), so fl(a / eK) >= thresh (1 + 2^-40)(1 - 2^-53)^3 > thresh. A NaN a or eK fails the
// comparison and takes the division. The flag is the division's, bit for bit.
inline constexpr double kUnderflowClear = 1 + 0x1p-40;
FC_HOST_DEVICE inline Underflow underflow(double E, const EtaExp& x, double eK, double thresh, double theta_abs,
                                          double theta_ftz, double uP, bool enabled) {
  const double a = E * x.em;
  if (!enabled || a >= thresh * kUnderflowClear * eK) return {0.0, 0.0};
  const bool flagged = a / eK < thresh;
  const double val = E * x.ep * eK;
  if (!flagged) return {0.0, 0.0};
  return {min2(val * (1 + uP), theta_abs * eK), min2(val, theta_ftz * eK)};
}

// §3.6 The score-dependent weight interval, per key: the upper weight, the contribution to the lower
// bound of l (den), the centred weight error (err_c, and its deterministic part err_c_det), and the
// contribution to the upper bound of l (lhi). l_fp32: l sums the fp32 p, so P rounding is not centred.
struct WeightInterval {
  double whi, den, err_c, err_c_det, lhi;
};
// The centred errors take e^eta - 1 as expm1(eta): eta is often ~1e-6, where exp(eta) - 1 keeps only about
// 30 correct bits, and the sums round these weights up to fp32 (budget_sums.h), so two budgets whose
// exp differs in the last bit (glibc's and CUDA's) would otherwise round them apart now and then.
FC_HOST_DEVICE inline WeightInterval weight_interval(double E, const EtaExp& x, double uP, const Underflow& uf,
                                                     bool l_fp32) {
  const double ep = x.ep, em = x.em, epm1 = x.epm1;
  WeightInterval w;
  w.whi = E * ep * (1 + uP) + uf.zeta;
  if (!l_fp32) {
    w.den = max2(0.0, E * em * (1 - uP) - uf.zeta);
    w.err_c = E * (epm1 * (1 + uP) + uP) + uf.zeta;  // E (e^eta (1 + uP) - 1)
    w.err_c_det = E * epm1 + uf.zeta;
    w.lhi = w.whi;
  } else {
    w.den = max2(0.0, E * em - uf.zeta_l);
    w.err_c = E * epm1 + uf.zeta_l;
    w.err_c_det = w.err_c;
    w.lhi = E * ep + uf.zeta_l;
  }
  return w;
}

// §3.8 l accumulation, lane sums / SIMT butterfly / FA-1: gamma of the roundings along an addend's path
// (`roundings` already counts the raises and the merge).
FC_HOST_DEVICE inline double l_sums(double roundings) { return gamma32(roundings); }
// §3.8 l on the tensor cores: l <- MMA(P~, ones, C = l) per b-key block, the P.V chain with V = 1, plus
// the alignment excess of a possibly subnormal P~ (excess over the lower bound den of l).
FC_HOST_DEVICE inline double l_chain(int blocks, double step, int raises_and_merge, double trunc_step, double excess,
                                     double den) {
  return blocks * step * (1 + blocks * step) + gamma32(raises_and_merge) + blocks * trunc_step * excess / den;
}

// §3.9 P.V accumulation relative to W = sum_j w_j |V_jk| / l, from the column's counts of nonzero-V keys
// and blocks; §3.10 FA-1's renormalisations (fa1_tiles, 0 without FA-1); §5 the probabilistic variant
// (sqrt(n) for round-to-nearest only: the tensor core's truncation is one-signed).
enum class PvMode { tensor_core_any_tile, tensor_core_two_level, tensor_core, sequential };
struct PvCounts {
  int nz_keys, nz_blocks, nz_max_tile_blocks;
};
FC_HOST_DEVICE inline double pv_accumulation(PvMode mode, const PvCounts& c, double step, int keys, int tiles,
                                             int raises, int merge, double fa1_tiles, bool probabilistic,
                                             double lambda) {
  double e;
  switch (mode) {
    case PvMode::tensor_core_any_tile:  // every key its own block, in one chain or per tile: bounds any Bc
      e = c.nz_keys * step * (1 + c.nz_keys * step) + gamma32(double(keys + raises + merge));
      break;
    case PvMode::tensor_core_two_level:  // per-tile block chain from zero, then an fp32 add per tile
      e = c.nz_max_tile_blocks * step * (1 + c.nz_max_tile_blocks * step) + gamma32(double(tiles + raises + merge));
      break;
    case PvMode::tensor_core:  // one chain of block steps through the accumulator; rescales multiply
      e = c.nz_blocks * step * (1 + c.nz_blocks * step) + gamma32(double(raises + merge));
      break;
    default:  // sequential fp32 FMA
      e = gamma32(double(c.nz_keys + raises + merge));
  }
  // §3.10: FA-1 renormalises at every tile of the row block's key range.
  const double fa1 = fa1_tiles > 0 ? gamma32(3.0 * fa1_tiles) : 0.0;
  e += fa1;
  if (!probabilistic || mode != PvMode::sequential) return e;
  // FA-1's per-tile renormalisation stays worst case: once l stops growing, every tile repeats the same
  // roundings, so its errors are not independent.
  return min2(e, lambda * std::sqrt(double(c.nz_keys + raises + merge)) * u32 + fa1);
}

// §3.9 W = sum_j whi_j |V_jk| (E units, before the division by den) without a sum per (row, key, column):
// whi_j <= E_j e^{eta_max} (1 + uP) + zeta_j, so W <= e^{eta_max} (1 + uP) sumE A+_k + sum_j zeta_j max_c |V_jc|,
// with A+_k >= the exact sum_j E_j |V_jk| / sum_j E_j the reference's bound (reference/abs_scale_bound.h)
// and eta_max, sumE, zeta_vmax over the row's visible keys.
FC_HOST_DEVICE inline double w_multiplier(double eta_max, double uP, double sumE) {
  return std::exp(eta_max) * (1 + uP) * sumE;
}
FC_HOST_DEVICE inline double w_bound(double w_mult, double a_plus, double zeta_vmax) {
  return w_mult * a_plus + zeta_vmax;
}

// §3.11 The final division (a * fl(1/l)) and the fp8 v_descale: 2 or 3 roundings.
FC_HOST_DEVICE inline double final_division(bool fp8) { return std::pow(1 + u32, fp8 ? 3 : 2) - 1; }

// §3.13 Split-KV merge: two roundings per split on each sum (and FA-1's two more).
FC_HOST_DEVICE inline int merge_roundings(int splits, bool fa1) { return splits > 1 ? 2 * splits + (fa1 ? 2 : 0) : 0; }

// §3.16 Domain: a score, m c or the accumulator could overflow fp32 (no claim: +inf).
FC_HOST_DEVICE inline bool outside_domain(double rmax, double eps_s, double c32, double acc_mag) {
  return !(rmax * (1 + eps_s) < 0x1p126) || !(rmax * c32 < 0x1p126) || !(acc_mag < 0x1p126);
}

// §0 The bound of one element of O from its parts, all relative to the exact row (§3.6 weights):
//  tc_, tp_  the centred weight error and (l from the fp32 p) the uncentred P rounding, over den;
//  top       §3.1 the tf32 V operand error; epv, Wn, Xn §3.9; el §3.8; fin §3.11; §3.12 output rounding
//  (u_out relative, out_abs absolute); floor_abs §3.7's absolute floor; oe §3.14 the reference's error.
// eps_l >= 1 (the chain's alignment excess over a vanishing lower bound of l, with scores far outside
// the model): l may be 0, so no claim. Found by the libFuzzer target (a negative bound).
struct ElementParts {
  double abs_o, oe, tc, tp, top, epv, Wn, Xn, el, eps_fin, u_out, out_abs, floor_abs;
  bool with_reference;
};
FC_HOST_DEVICE inline double element_bound(const ElementParts& e) {
  if (!(e.el < 1)) return HUGE_VAL;
  const double Y = e.abs_o + e.oe + e.tc + e.tp;
  const double eacc = (e.epv * e.Wn + e.Xn * (1 + e.epv) + e.el * Y) / (1 - e.el);
  const double Z = Y + e.top + eacc;
  const double fin = e.eps_fin * Z;
  const double outr = e.u_out * (Z + fin) + e.out_abs;
  return (e.tc + e.tp + e.top + eacc + fin + outr + e.floor_abs) * (1 + 1e-9) + (e.with_reference ? e.oe : 0.0);
}

// §3.15 LSE per row: lse = fl(fl(m^ se) + fl(logf(l^) - off)), with l between den (1 - el) and lhi (1 + el)
// times the row's exact sum sumE; S the fp8 pre-scale, ref_lse the reference, ref_err its bound.
struct LseParts {
  double den, lhi, sumE, el, S, sigma, zmax, eps_max, ref_lse, ref_err;
  bool fp8, with_reference;
};
FC_HOST_DEVICE inline double lse_bound(const LseParts& r) {
  if (!(r.el < 1)) return HUGE_VAL;
  const double lo = r.den * (1 - r.el), hi = r.lhi * (1 + r.el);
  const double L = max2(std::log(hi / r.sumE), -std::log(lo / r.sumE));
  const double logl = std::fabs(std::log(r.S * r.sumE)) + L + r.sigma * r.eps_max;
  const double off = r.fp8 ? 8 * std::log(2.0) : 0.0;
  double e = L + 2.01 * u32 * r.sigma * (std::fabs(r.zmax) + r.eps_max) + 4 * u32 * logl + u32 * (logl + off) +
             (r.fp8 ? u32 * off : 0.0);
  e += u32 * (std::fabs(r.ref_lse) + e) * 1.01;
  return e * (1 + 1e-9) + (r.with_reference ? r.ref_err : 0.0);
}

}  // namespace fc::budget
