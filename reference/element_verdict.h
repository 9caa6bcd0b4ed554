// The verdict on one output element (and one LSE row) against its bound: what check_against_budget
// (reference/error_budget.cpp) counts for each element, written once for the CPU and the GPU oracle
// (reference/cuda/). Scalars only.
#pragma once

#include <cmath>

#include "reference/host_device.h"

namespace fc::verdict {

// What the verdict needs of the output format (formats.h's FormatSpec, as plain numbers).
struct OutputFormat {
  int precision, emin, emax;
  bool has_inf;
  double max_finite;
};

// ulp(x) in the format: the spacing at |x| (the smallest normal's below it), as formats.h's ulp.
FC_HOST_DEVICE inline double ulp(const OutputFormat& f, double x) {
  const double ax = std::fabs(x);
  if (ax != ax) return x;
  if (ax == HUGE_VAL) return std::ldexp(1.0, f.emax - f.precision + 1);
  int lead = ax == 0.0 ? f.emin : std::ilogb(ax);
  if (lead < f.emin) lead = f.emin;
  if (lead > f.emax) lead = f.emax;
  return std::ldexp(1.0, lead - f.precision + 1);
}

// IEEE round-to-nearest overflows at max_finite + ulp/2, so an exact value within its bound of that
// threshold may legitimately come out as +-inf of its own sign (docs/semantics.md).
FC_HOST_DEVICE inline bool legitimate_overflow(double got, double want, double bound, const OutputFormat& f) {
  if (!(std::fabs(got) == HUGE_VAL) || !(std::fabs(want) < HUGE_VAL) || !f.has_inf || std::signbit(got) != std::signbit(want))
    return false;
  return std::fabs(want) + bound >= f.max_finite + ulp(f, f.max_finite) / 2;
}

// The histogram of error/bound that reports draw: bin 0 holds ratios below 10^kHistLowExp (zeros
// included), bins 1..kHistBins quarter decades [10^(lo + (k-1) w), 10^(lo + k w)), the last bin everything
// at or above 10^kHistHighExp (and +inf).
inline constexpr double kHistLowExp = -8.0, kHistHighExp = 1.0, kHistStep = 0.25;
inline constexpr int kHistBins = 36;  // (high - low) / step
inline constexpr int kHistSize = kHistBins + 2;
FC_HOST_DEVICE inline int histogram_bin(double ratio) {
  if (!(ratio >= std::pow(10.0, kHistLowExp))) return 0;  // zero, tiny (and NaN, which never comes here)
  if (ratio >= std::pow(10.0, kHistHighExp)) return kHistSize - 1;
  const int k = 1 + int(std::floor((std::log10(ratio) - kHistLowExp) / kHistStep));
  return k < 1 ? 1 : (k > kHistBins ? kHistBins : k);
}

// error / bound, with 0 for no error and +inf for an error against a zero (or NaN) bound.
FC_HOST_DEVICE inline double ratio(double err, double bound) { return err == 0 ? 0.0 : (bound > 0 ? err / bound : HUGE_VAL); }

enum class Kind {
  skip,          // a legitimate overflow, or NaN where the reference is NaN: not counted
  checked,       // a finite comparison: counts as an element
  violation,     // NaN / inf mismatch, or a nonzero output in a row with no visible key
};

struct Element {
  Kind kind;
  bool nan_mismatch;   // a violation by NaN / inf
  double err, ratio, ratio_probabilistic, scaled_ulps;
};

// One element of O: got (the subject's) against want (the reference), with its bound, the probabilistic
// bound and the scale A (for scaled ulps); empty_row: the row sees no key (exactly 0 is required).
FC_HOST_DEVICE inline Element judge_o(double got, double want, double bound, double bound_prob, double scale_a,
                                      bool empty_row, const OutputFormat& f) {
  Element e{Kind::skip, false, 0, 0, 0, 0};
  if (legitimate_overflow(got, want, bound, f)) return e;
  if (want != want || got != got || !(std::fabs(got) < HUGE_VAL)) {
    if (!(want != want && got != got)) {
      e.kind = Kind::violation;
      e.nan_mismatch = true;
      e.err = e.ratio = e.scaled_ulps = HUGE_VAL;
    }
    return e;
  }
  if (empty_row) {
    if (got != 0.0) {
      e.kind = Kind::violation;
      e.err = std::fabs(got);
      e.ratio = e.scaled_ulps = HUGE_VAL;
    }
    return e;
  }
  e.kind = Kind::checked;
  e.err = std::fabs(got - want);
  e.ratio = ratio(e.err, bound);
  e.ratio_probabilistic = ratio(e.err, bound_prob);
  e.scaled_ulps = e.err / ulp(f, std::fabs(scale_a));
  return e;
}

// One LSE row: NaN must match; a row with no visible key must give -inf; any other infinity is a
// violation (counted as a NaN/inf mismatch); else |got - want| against the bound.
FC_HOST_DEVICE inline Element judge_lse(double got, double want, double bound, bool empty_row) {
  Element e{Kind::skip, false, 0, 0, 0, 0};
  if (want != want || got != got) {
    if (!(want != want && got != got)) {
      e.kind = Kind::violation;
      e.nan_mismatch = true;
      e.err = e.ratio = HUGE_VAL;
    }
    return e;
  }
  if (empty_row || std::fabs(got) == HUGE_VAL) {
    if (!(empty_row && got == -HUGE_VAL)) {
      e.kind = Kind::violation;
      e.nan_mismatch = !empty_row;
      e.err = e.ratio = HUGE_VAL;
    }
    return e;
  }
  e.kind = Kind::checked;
  e.err = std::fabs(got - want);
  e.ratio = ratio(e.err, bound);
  return e;
}

}  // namespace fc::verdict
