#include "reference/formats.h"

#include "reference/element_verdict.h"

#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fc {

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();

double max_of(int p, int emax, bool all_ones_exponent_is_nan_only) {
  // Largest significand 2 - 2^(1-p); OCP e4m3 loses its top code (all ones) to NaN, so its largest
  // significand is 2 - 2^(2-p).
  const double sig = all_ones_exponent_is_nan_only ? 2.0 - std::ldexp(1.0, 2 - p) : 2.0 - std::ldexp(1.0, 1 - p);
  return std::ldexp(sig, emax);
}

const std::array<FormatSpec, 7> specs = {{
    {"fp64", 64, 53, -1022, 1023, true, std::numeric_limits<double>::max()},
    {"fp32", 32, 24, -126, 127, true, max_of(24, 127, false)},
    {"tf32", 32, 11, -126, 127, true, max_of(11, 127, false)},
    {"fp16", 16, 11, -14, 15, true, max_of(11, 15, false)},
    {"bf16", 16, 8, -126, 127, true, max_of(8, 127, false)},
    {"e4m3", 8, 4, -6, 8, false, max_of(4, 8, true)},
    {"e5m2", 8, 3, -14, 15, true, max_of(3, 15, false)},
}};

// Exponent field width and bias of the storage encoding.
struct Layout {
  int exp_bits;
  int mant_bits;
  int bias;
};
Layout layout(Format f) {
  switch (f) {
    case Format::fp64: return {11, 52, 1023};
    case Format::fp32: return {8, 23, 127};
    case Format::tf32: return {8, 23, 127};  // fp32 container
    case Format::fp16: return {5, 10, 15};
    case Format::bf16: return {8, 7, 127};
    case Format::e4m3: return {4, 3, 7};
    case Format::e5m2: return {5, 2, 15};
  }
  throw std::logic_error("unknown format");
}
}  // namespace

double FormatSpec::unit_roundoff() const { return std::ldexp(1.0, -precision); }
double FormatSpec::min_normal() const { return std::ldexp(1.0, emin); }
double FormatSpec::min_subnormal() const { return std::ldexp(1.0, emin - precision + 1); }

const FormatSpec& spec(Format f) { return specs[static_cast<size_t>(f)]; }

std::optional<Format> parse_format(std::string_view name) {
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name) return static_cast<Format>(i);
  if (name == "fp8_e4m3") return Format::e4m3;
  if (name == "fp8_e5m2") return Format::e5m2;
  return std::nullopt;
}

double round_to(Format f, double x, Overflow overflow) {
  const FormatSpec& s = spec(f);
  if (std::isnan(x)) return x;
  if (std::isinf(x)) {
    if (overflow == Overflow::saturate) return std::copysign(s.max_finite, x);
    return s.has_inf ? x : std::numeric_limits<double>::quiet_NaN();
  }
  if (x == 0.0 || f == Format::fp64) return x;
  const double ax = std::fabs(x);
  const int lead = std::ilogb(ax);  // exponent of the leading bit
  const int quantum_exp = std::max(lead, s.emin) - (s.precision - 1);
  // ax / 2^q is exact (power-of-two scaling of a double far from double's own range limits) and
  // nearbyint rounds to nearest-even in the default mode: this is the single rounding.
  const double r = std::ldexp(std::nearbyint(std::ldexp(ax, -quantum_exp)), quantum_exp);
  if (r > s.max_finite) {
    if (overflow == Overflow::saturate) return std::copysign(s.max_finite, x);
    return s.has_inf ? std::copysign(inf, x) : std::numeric_limits<double>::quiet_NaN();
  }
  return std::copysign(r, x);
}

bool is_representable(Format f, double x) {
  if (std::isnan(x)) return true;
  if (std::isinf(x)) return spec(f).has_inf;
  return round_to(f, x) == x;
}

uint32_t encode(Format f, double x) {
  const Layout l = layout(f);
  const FormatSpec& s = spec(f);
  if (f == Format::fp64) throw std::invalid_argument("encode: fp64 bit patterns are 64-bit; use std::bit_cast");
  const uint32_t sign = std::signbit(x) ? 1u : 0u;
  const uint32_t exp_all = (1u << l.exp_bits) - 1;
  uint32_t e_field = 0, m_field = 0;
  if (std::isnan(x)) {
    e_field = exp_all;
    m_field = s.has_inf ? (1u << (l.mant_bits - 1)) : ((1u << l.mant_bits) - 1);
  } else if (std::isinf(x)) {
    if (!s.has_inf) throw std::invalid_argument(std::string("encode: ") + std::string(s.name) + " has no infinity");
    e_field = exp_all;
  } else if (x != 0.0) {
    if (!is_representable(f, x))
      throw std::invalid_argument(std::string("encode: value not representable in ") + std::string(s.name));
    const double ax = std::fabs(x);
    const int lead = std::ilogb(ax);
    if (lead < s.emin) {
      m_field = static_cast<uint32_t>(std::ldexp(ax, l.mant_bits - s.emin));
    } else {
      e_field = static_cast<uint32_t>(lead + l.bias);
      m_field = static_cast<uint32_t>(std::ldexp(ax, l.mant_bits - lead)) - (1u << l.mant_bits);
    }
  }
  return (sign << (l.exp_bits + l.mant_bits)) | (e_field << l.mant_bits) | m_field;
}

double decode(Format f, uint32_t bits) {
  const Layout l = layout(f);
  const FormatSpec& s = spec(f);
  if (f == Format::fp64) throw std::invalid_argument("decode: fp64 bit patterns are 64-bit; use std::bit_cast");
  const uint32_t m_field = bits & ((1u << l.mant_bits) - 1);
  const uint32_t e_field = (bits >> l.mant_bits) & ((1u << l.exp_bits) - 1);
  const bool neg = (bits >> (l.exp_bits + l.mant_bits)) & 1u;
  const uint32_t exp_all = (1u << l.exp_bits) - 1;
  double v;
  if (e_field == exp_all && s.has_inf) {
    v = m_field ? std::numeric_limits<double>::quiet_NaN() : inf;
  } else if (e_field == exp_all && m_field == (1u << l.mant_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();  // OCP e4m3: S.1111.111 is its only NaN
  } else if (e_field == 0) {
    v = std::ldexp(static_cast<double>(m_field), s.emin - l.mant_bits);
  } else {
    v = std::ldexp(static_cast<double>(m_field + (1u << l.mant_bits)), static_cast<int>(e_field) - l.bias - l.mant_bits);
  }
  if (f == Format::tf32 && !std::isnan(v)) v = round_to(Format::tf32, v);  // low 13 bits are not tf32's
  return neg ? -v : v;
}

double ulp(Format f, double x) {
  const FormatSpec& s = spec(f);
  return verdict::ulp({s.precision, s.emin, s.emax, s.has_inf, s.max_finite}, x);
}

double next_up(Format f, double x) {
  const FormatSpec& s = spec(f);
  if (std::isnan(x)) return x;
  if (x == -inf) return -s.max_finite;
  if (x >= s.max_finite) return s.has_inf ? inf : std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0) return s.min_subnormal();
  if (x > 0) return x + ulp(f, x);
  // Going up from a negative power of two crosses into the finer binade below it.
  const double ax = -x;
  const double step = (ax == std::ldexp(1.0, std::ilogb(ax)) && ax > s.min_normal()) ? ulp(f, ax) / 2 : ulp(f, ax);
  return -(ax - step);
}

double next_down(Format f, double x) { return -next_up(f, -x); }

}  // namespace fc
