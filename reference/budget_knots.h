// The knot form of the row form's centred sums (docs/error-analysis.md §3.18): SL = sum_j e_j |v_j - o| and
// SQ = sum_j e_j^2 (v_j - o)^2 for every row of a tile of kKnotRows rows from matrix products, which the fp16
// tensor cores make, instead of a loop per (row, key, column).
//
// |x - o| is convex in o: for o between two knots t0 <= o <= t1, with a = o - t0, b = t1 - o, h = t1 - t0,
//   |x - o| <= (b |x - t0| + a |x - t1|) / h,
// equal where x is outside (t0, t1), and above by at most 2ab/h where it is inside. So SL is at most the
// interpolation of F_k = sum_j e_j |v_j - t_k| (k = 0, 1), two products of the row's weights with |V - t_k|,
// and a third, M = the weight of the keys inside the bracket, bounds what the interpolation adds. The square
// is a quadratic in o: (x - o)^2 = (b (x - t0)^2 + a (x - t1)^2) / h - ab exactly, so SQ is the interpolation
// of G_k = sum_j e_j^2 (v_j - t_k)^2 less ab sum_j e_j^2. The knots of a column are the smallest and largest o
// of the tile's rows, rounded outward to fp16, so every row of the tile lies between them.
//
// Every product's operands are fp16 numbers, so that the tensor cores multiply them exactly: the weights
// scaled per row by a power of two into [2^14, 2^15) and rounded up, V scaled per column by a power of two
// (2 max |V| into [2^14, 2^15)), |v - t| and (v - t)^2 rounded to nearest in fp16 arithmetic, as a kernel makes
// them. The bounds below cover those roundings and the products' fp32 accumulation, so they hold for any sum
// of the products at or above the tensor cores' chains: the CPU budget adds them in double (budget_knot_walk.cpp),
// a GPU copy would read its chains. The interpolation is taken only where its certified excess is within
// kKnotTolerance of it (and the squares' correction at most half their interpolation); elsewhere the element
// keeps the row form's loop (budget_sums.h RowColumnSum).
#pragma once

#include <cmath>

#include "reference/budget_sums.h"
#include "reference/formats.h"
#include "reference/host_device.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace fc::budget {

inline constexpr int kKnotRows = 16;              // rows a tile shares its knots over (an mma tile's M)
inline constexpr double kKnotU = 0x1p-11;          // fp16's unit roundoff
inline constexpr double kKnotDelta = 0x1p-25;      // round to nearest's largest error below fp16's normal range
inline constexpr double kKnotLimit = 0x1p14;       // |knot| (scaled) at most this, so that |v - t| < 2^15
inline constexpr double kKnotSquareScale = 0x1p-8;  // the squares' V scale below the linear one: (v - t)^2 < 2^14
inline constexpr double kKnotTolerance = 0x1p-10;   // the interpolation's certified excess allowed, relative
// The tensor cores' accumulation (docs/error-analysis.md §3.2): an m16n8k16 step truncates its fp32 result,
// losing at most kKnotEpsStep (|c| + sum |a b|); a chain runs kKnotChainKeys keys from zero.
inline constexpr double kKnotEpsStep = 17 * 0x1p-25 + 0x1p-23;
inline constexpr int kKnotChainKeys = 1024;

enum class Round16 { nearest, up, down };

// x rounded to fp16 in one step (an fp16 number, returned as a double). Up and down through fp32 round in
// the same direction twice, which is one rounding, since fp16's numbers are fp32's.
FC_HOST_DEVICE inline double to_fp16(double x, Round16 r) {
#if defined(__CUDA_ARCH__)
  if (r == Round16::nearest) return __half2float(__double2half(x));
  if (r == Round16::up) return __half2float(__float2half_ru(__double2float_ru(x)));
  return __half2float(__float2half_rd(__double2float_rd(x)));
#else
  const double n = round_to(Format::fp16, x);
  if (r == Round16::up && n < x) return next_up(Format::fp16, n);
  if (r == Round16::down && n > x) return next_down(Format::fp16, n);
  return n;
#endif
}

// A row's scale of W and W3: fp16_scale (below) of its largest e and of that squared. Its largest e is 1: its
// largest score's key has E = exp(0) = 1 and every other E is at most 1 (budget_sums.h row_weights rounds E up to
// fp32, which keeps 1), so the scale is known before any key's weight is made (the GPU writes the fp16 weights
// as it makes each e). Any power of two would be sound (W = e 2^14 <= 2^14 cannot overflow); this one is tightest.
inline constexpr double kKnotRowScale = 0x1p14;

// The power of two that brings m > 0 into [2^14, 2^15) (1 for 0).
FC_HOST_DEVICE inline double fp16_scale(double m) {
  if (!(m > 0) || !(m <= 1e300)) return 1.0;
  int e;
  std::frexp(m, &e);  // m = f 2^e, f in [0.5, 1)
  return std::ldexp(1.0, 15 - e);
}

// A column's V as the products take it: x = v rc (exact, rc a power of two) rounded to nearest fp16. The knot
// form needs |x - that| <= kKnotDelta for every key (exact in fp16's normal range: V stored in 16 or 8 bits),
// which knot_value_exact tests.
FC_HOST_DEVICE inline double knot_value(double v, double scale) { return to_fp16(v * scale, Round16::nearest); }
FC_HOST_DEVICE inline bool knot_value_exact(double v, double scale) {
  const double x = v * scale;
  return std::fabs(knot_value(v, scale) - x) <= kKnotDelta;
}

// A tile's knots in one column, in the column's scaled units: lo and hi (the smallest and largest o) rounded
// outward to fp16. ok: they bracket, and |t| <= kKnotLimit.
struct KnotPair {
  double t0, t1;
  bool ok;
};
FC_HOST_DEVICE inline KnotPair knot_pair(double lo, double hi, double scale) {
  const double t0 = to_fp16(lo * scale, Round16::down), t1 = to_fp16(hi * scale, Round16::up);
  return {t0, t1, lo <= hi && t0 >= -kKnotLimit && t1 <= kKnotLimit};
}

// One key's operands: the weight (e scaled, rounded up), |x - t| and (x - t)^2 in fp16 arithmetic (each step
// rounded to nearest; x and t are fp16 numbers, so x - t is exact in double and rounds once, as the fp16
// subtraction does), and the bracket's indicator.
FC_HOST_DEVICE inline double knot_weight(double e, double scale) { return to_fp16(e * scale, Round16::up); }
FC_HOST_DEVICE inline double knot_distance(double x, double t) { return std::fabs(to_fp16(x - t, Round16::nearest)); }
FC_HOST_DEVICE inline double knot_square(double x, double t) {
  const double g = to_fp16(x - t, Round16::nearest);
  return to_fp16(g * g, Round16::nearest);
}
FC_HOST_DEVICE inline bool in_bracket(double x, const KnotPair& k) { return k.t0 <= x && x <= k.t1; }

// A chain of kKnotChainKeys / 16 steps from zero, over non-negative products, is at least (1 - eps)^steps their
// exact sum, so a sum of chains times this bounds the exact sum (the 1 + 2^-40 covers adding chains in double,
// and a sum in double of fewer than 2^30 terms).
FC_HOST_DEVICE inline double knot_chain_up() {
  return std::pow(1 - kKnotEpsStep, -double(kKnotChainKeys / 16)) * (1 + 0x1p-40);
}

// Upper bounds of the exact sums of W_j |x_j - t| and W_j (x_j - t)^2 (x_j = v_j rc exactly, W_j the fp16
// weights) from the products' sums F (of W_j knot_distance) and G (of W_j knot_square) and an upper bound of
// the weights' sum. With |x - x~| <= delta (x~ the fp16 value) and d = rn(x~ - t): |x - t| <= (d + 2 delta) /
// (1 - u). With g = rn(x~ - t) below 2^7 and q = rn(g^2): (x - t)^2 <= (q + delta (1 + 2^9) + 4 delta^2) /
// (1 - u)^3.
FC_HOST_DEVICE inline double knot_linear_up(double F, double w_sum_up) {
  return (F * knot_chain_up() + 2 * kKnotDelta * w_sum_up) / (1 - kKnotU) * (1 + 0x1p-50);
}
FC_HOST_DEVICE inline double knot_square_up(double G, double w3_sum_up) {
  const double per_key = kKnotDelta * (1 + 0x1p9) + 4 * kKnotDelta * kKnotDelta;
  return (G * knot_chain_up() + per_key * w3_sum_up) / ((1 - kKnotU) * (1 - kKnotU) * (1 - kKnotU)) * (1 + 0x1p-50);
}

// Where o lies between the knots: a = o - t0, b = t1 - o, h = t1 - t0 in double (each within 2^-53 of itself
// relatively, a rounded difference). ok: t0 <= o <= t1.
struct KnotPosition {
  double a, b, h;
  bool ok;
};
FC_HOST_DEVICE inline KnotPosition knot_position(double o, const KnotPair& k) {
  return {o - k.t0, k.t1 - o, k.t1 - k.t0, k.ok && k.t0 <= o && o <= k.t1};
}

// The interpolation (b F0 + a F1) / h of two upper bounds, rounded up: a, b and h each within 2^-53, and four
// roundings of its own, inside 1 + 2^-48. With h = 0, o is both knots and F0 is the sum itself.
FC_HOST_DEVICE inline double knot_interpolate(double F0, double F1, const KnotPosition& p) {
  if (p.h == 0) return F0;
  return (p.b * F0 + p.a * F1) / p.h * (1 + 0x1p-48);
}

// How much the interpolation may exceed the exact sum: at most 2ab/h per unit of weight of a key inside the
// bracket (M_up, an upper bound of that weight), and at most 2 delta per unit of weight for a key whose fp16
// value is outside it while its exact value is inside (within delta of a knot; w_sum_up bounds their weight).
FC_HOST_DEVICE inline double knot_excess(double M_up, const KnotPosition& p, double w_sum_up) {
  const double inside = p.h == 0 ? 0.0 : 2 * p.a * p.b / p.h * M_up;
  return (inside + 2 * kKnotDelta * w_sum_up) * (1 + 0x1p-48);
}

// The squares' sum: the interpolation of G0 and G1 (upper bounds) less ab times a lower bound of sum_j W3_j (the
// squares' fp16 weights), rounded so that the result is an upper bound; never below 0, as the sum is not.
struct KnotSquares {
  double bound, interpolation, correction;
};
FC_HOST_DEVICE inline KnotSquares knot_squares(double G0, double G1, double w3_sum_low, const KnotPosition& p) {
  const double interp = knot_interpolate(G0, G1, p);
  const double corr = p.h == 0 ? 0.0 : p.a * p.b * w3_sum_low * (1 - 0x1p-48);
  return {std::fmax(interp - corr, 0.0) * (1 + 0x1p-50), interp, corr};
}

// Bounds of a sum of n non-negative terms from its value added in double in any order (each addition within
// 2^-53 of its result).
FC_HOST_DEVICE inline double double_sum_low(double s, double n) { return s * (1 - n * 0x1p-52); }
FC_HOST_DEVICE inline double double_sum_up(double s, double n) { return s * (1 + n * 0x1p-52); }

// The element takes the knots when the interpolation's certified excess is within kKnotTolerance of it, and
// the squares' correction removes at most half of their interpolation (so that the operands' rounding, a few
// u of the interpolation, stays a few u of the result).
FC_HOST_DEVICE inline bool knots_certified(double linear, double excess, const KnotSquares& sq) {
  return excess <= kKnotTolerance * linear && sq.correction <= 0.5 * sq.interpolation;
}

// One row's part: its weights' scales (sc for e, sc3 for e^2, scz for the underflow weights z) and bounds of its
// fp16 weights' sums (W's, W3's and WZ's above, W3's below; WZ's 0 in a row without an underflowed key).
struct KnotRow {
  double sc, sc3, scz, w_up, w3_up, wz_up, w3_low;
};
// One (row, column)'s products' sums: at the knots F0, F1 (of W |x - t|), G0, G1 (of W3 (x - t)^2) and Z0, Z1 (of
// WZ |x - t|, only in a row with an underflowed key), and M (W over the bracket).
struct KnotSums {
  double F0, F1, G0, G1, Z0, Z1, M;
};
// The element's bounds in true units, L >= sum e_j |v_j - o|, Q >= sum e_j^2 (v_j - o)^2 and Z >= sum z_j |v_j - o|
// (budget_sums.h row_bounds takes them), from its sums, o (stored units), the tile's knots of its column at the
// linear scale rc and the squares' (rc kKnotSquareScale), and V's descale; certified: the knots may be taken
// (knots_certified), and o lies between both pairs. Z needs no certificate of its own: it is an underflow
// threshold's size beside the rest. The scales are powers of two, so the way back is exact.
struct KnotBounds {
  double L, Q, Z;
  bool certified;
};
FC_HOST_DEVICE inline KnotBounds knot_bounds(const KnotSums& s, const KnotRow& r, double o, const KnotPair& k,
                                             const KnotPair& k2, double rc, double vd) {
  const double rs = rc * kKnotSquareScale;
  const KnotPosition at = knot_position(o * rc, k), at2 = knot_position(o * rs, k2);
  if (!at.ok || !at2.ok) return {0, 0, 0, false};
  const double linear = knot_interpolate(knot_linear_up(s.F0, r.w_up), knot_linear_up(s.F1, r.w_up), at);
  const double excess = knot_excess(s.M * knot_chain_up(), at, r.w_up);
  const KnotSquares sq = knot_squares(knot_square_up(s.G0, r.w3_up), knot_square_up(s.G1, r.w3_up), r.w3_low, at2);
  const double zeta = knot_interpolate(knot_linear_up(s.Z0, r.wz_up), knot_linear_up(s.Z1, r.wz_up), at);
  return {linear / (r.sc * rc) * std::fabs(vd), sq.bound / (r.sc3 * rs * rs) * (vd * vd),
          zeta / (r.scz * rc) * std::fabs(vd), knots_certified(linear, excess, sq)};
}

}  // namespace fc::budget
