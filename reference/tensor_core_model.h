// The tensor-core block-FMA model (after Fasi, Higham, Mikaitis & Pranesh, "Numerical behavior of NVIDIA
// tensor cores", 2021, and the bit-accurate models of Khattak & Mikaitis; the parameters per recipe are
// below), shared by the CPU emulation (which executes it) and the error budget (which bounds it).
//
// One block step computes d = c + sum_{i<b} a_i b_i: the products are exact, every term (c included) is
// aligned to the largest exponent e_max among them, bits below 2^(e_max - F) are truncated (no sticky
// bit), the aligned terms are summed exactly, and the result is rounded toward zero to fp32.
//
// A product's exponent for the alignment [M, measured]: for fp16 and bf16 operands it is the sum of the
// operands' exponent fields, e(a) + e(b) with e(x) = max(floor(log2 |x|), e_min of x's format): not the
// product's own exponent, which is one higher when the significands' product reaches [2, 4), and a
// subnormal operand counts at its format's smallest normal exponent. On one H200 (2026-12-01,
// bench/tensor_core_probe, 64 tiles of 64 x 8 per input family) this model reproduced 163,840 of 163,840
// results bit for bit for fp16 and for bf16, through mma.sync m16n8k16 and wgmma m64n8k16 alike (the two
// instructions gave identical bits on identical inputs); aligning at the product's magnitude (with
// subnormals at the smallest normal, the rule before) reproduced 92.9 % (fp16) and 96.4 % (bf16). The
// subnormal part was first found by the GPU fuzzer (seed 3, H200, 2026-11-29): fp16 Q = +-2^-24 against K
// up to 2^15.7. fp8 through mma.sync follows the same rule inside its two fp16 steps (measured for e5m2;
// see tensor_core_model). For tf32 the rule is not measured and the emulation keeps aligning at
// |a|' |b|' = max(|a|, min_normal) max(|b|, min_normal).
//
// The budget charges each truncation 2^-F max(|c|, max_i |a_i|' |b_i|'), which bounds both rules:
// 2^(e(a) + e(b)) <= |a|' |b|'.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "reference/recipe.h"

namespace fc {

struct BlockFmaModel {
  int b = 16;  // products per block step (the MMA's k extent)
  int F = 25;  // fractional bits kept below the largest term's leading bit (23 + extra alignment bits)
  // A product's alignment exponent: the sum of the operands' exponent fields (measured, fp16/bf16), else
  // that of |a|' |b|' (see above).
  bool exponent_fields = true;
  // What the error budget charges per step, relative to |c| + sum |a_i b_i|: (b + 1) 2^-F for the
  // truncations plus 2^-23 for the final round-toward-zero. For fp8 the budget is more conservative than
  // the model the emulation executes (see budget_F).
  int budget_F = 25;
  // fp8 mma.sync (m16n8k32) runs on the fp16 tensor cores: two steps of b/2 products from zero, keys
  // 4j, 4j + 1 of the instruction first, then 4j + 2, 4j + 3, and C added at the end by an fp32 add
  // (round to nearest). See mma_step.
  bool fp16_halves = false;
  double step_bound() const { return double(b + 1) * std::ldexp(1.0, -budget_F) + std::ldexp(1.0, -23); }
};

// H100/H200 mma.sync parameters per recipe. fp16/bf16: b = 16, F = 25 (m16n8k16). tf32: b = 8, F = 25
// (m16n8k8), not measured. fp8 via mma.sync m16n8k32: two fp16 steps of 16 and C added last (measured on
// the H200 with bench/tensor_core_probe: 163,840 of 163,840 e5m2 results; e4m3's narrow range cannot tell
// this model from several others, all with C added last), not the 13-bit wgmma accumulator. The budget
// charges a 32-product step with F = 24: (33 2^-24 + 2^-23) per instruction, more than the two steps'
// 2 (17 2^-25 + 2^-23) plus 2^-24 for adding C, and more than a sequential round-to-nearest fp32 sum of the
// 33 terms (gamma_33(2^-24) < 35 * 2^-24). A wgmma fp8 kernel (F = 13) is NOT covered: see
// docs/error-analysis.md. fp32 has no tensor-core path (the fp32 recipe is always IEEE sequential FMA).
inline BlockFmaModel tensor_core_model(Recipe r) {
  switch (r) {
    case Recipe::tf32: return {8, 25, false, 25, false};
    case Recipe::fp8_e4m3:
    case Recipe::fp8_e5m2: return {32, 25, true, 24, true};
    default: return {16, 25, true, 25, false};
  }
}

// std::ilogb(x) for finite x != 0, and std::ldexp(1.0, k), from the bits: the emulation calls them per
// product and per block step, where the library calls were half of its time (perf, 2026-12-02).
inline int exponent_of(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  const int field = int(u >> 52 & 0x7ff);
  if (field != 0) return field - 1023;
  return 63 - __builtin_clzll(u & ((uint64_t(1) << 52) - 1)) - 1074;  // subnormal: its leading bit
}
inline double pow2(int k) {
  if (k < -1022 || k > 1023) return std::ldexp(1.0, k);  // outside the normal range: the library's
  const uint64_t u = uint64_t(k + 1023) << 52;
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The magnitude an operand x of a format with smallest normal min_normal has for the alignment.
inline double alignment_magnitude(double x, double min_normal) {
  const double a = std::fabs(x);
  return a == 0 || a >= min_normal ? a : min_normal;
}

// The magnitude the product a b has for the alignment under model m: 2^(e(a) + e(b)) with exponent
// fields, else |a|' |b|'; 0 when a or b is 0 (a zero product does not move the alignment).
inline double product_alignment(const BlockFmaModel& m, double a, double b, double min_normal_a, double min_normal_b) {
  if (a == 0 || b == 0) return 0.0;
  if (!m.exponent_fields || !std::isfinite(a) || !std::isfinite(b))
    return alignment_magnitude(a, min_normal_a) * alignment_magnitude(b, min_normal_b);
  const int ea = std::max(exponent_of(a), exponent_of(min_normal_a));
  const int eb = std::max(exponent_of(b), exponent_of(min_normal_b));
  return pow2(ea + eb);
}

// Round a double toward zero to fp32 (the tensor core's final normalisation).
inline float round_toward_zero_f32(double x) {
  float f = static_cast<float>(x);  // RN
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

// One block step: c + sum of n exact products t[0..n) (n <= 64), truncated per term at 2^(e_max - F)
// and rounded toward zero. align[0..n), when given, are the products' alignment magnitudes (see above);
// otherwise |t|. Non-finite inputs fall back to plain IEEE sums (NaN / inf propagate).
inline float block_fma_step(float c, const double* t, int n, int F, const double* align = nullptr) {
  // The largest magnitude, NaN ignored (as std::fmax would; a comparison instead of its library call).
  double mx = std::isnan(c) ? 0.0 : std::fabs(static_cast<double>(c));
  for (int i = 0; i < n; ++i) {
    const double v = align ? align[i] : std::fabs(t[i]);
    if (v > mx) mx = v;
  }
  if (!(mx < INFINITY)) {  // inf or NaN somewhere (fmax ignores NaN: check explicitly)
    double s = c;
    for (int i = 0; i < n; ++i) s += t[i];
    return static_cast<float>(s);
  }
  bool nan = std::isnan(c);
  for (int i = 0; i < n; ++i) nan |= std::isnan(t[i]);
  if (nan) return NAN;
  if (mx == 0) return c + 0.0f;
  const int e = exponent_of(mx);
  const double q = pow2(e - F), iq = pow2(F - e);
  double s = std::trunc(static_cast<double>(c) * iq);
  for (int i = 0; i < n; ++i) s += std::trunc(t[i] * iq);  // integers < 2^(F+8): exact in double
  return round_toward_zero_f32(s * q);
}

// One MMA instruction over n <= m.b exact products t (alignment magnitudes `align`) with accumulator c:
// one block step (16-bit operands, tf32), or for fp8 (m.fp16_halves) two steps of b/2 from zero over
// alternating key pairs and then c + that in fp32, round to nearest.
inline float mma_step(const BlockFmaModel& m, float c, const double* t, const double* align, int n) {
  if (!m.fp16_halves) return block_fma_step(c, t, n, m.F, align);
  double t0[32], a0[32], t1[32], a1[32];
  int n0 = 0, n1 = 0;
  for (int i = 0; i < n && i < 64; ++i) {
    if ((i / 2) % 2 == 0) t0[n0] = t[i], a0[n0++] = align[i];
    else t1[n1] = t[i], a1[n1++] = align[i];
  }
  const float halves = block_fma_step(block_fma_step(0.0f, t0, n0, m.F, a0), t1, n1, m.F, a1);
  return c + halves;
}

}  // namespace fc
