// Number formats: exhaustive over every bit pattern of the <= 16-bit formats, and against MPFR's own
// rounding (precision and exponent range set to the format's) for random values.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "reference/formats.h"
#include "reference/multiprecision.h"

namespace fc {
namespace {

const Format small_formats[] = {Format::fp16, Format::bf16, Format::e4m3, Format::e5m2};
const Format all_formats[] = {Format::fp32, Format::tf32, Format::fp16, Format::bf16, Format::e4m3, Format::e5m2};

// MPFR's rounding to the format: precision p, and an exponent range that makes mpfr_subnormalize
// reproduce gradual underflow. Overflow in MPFR is to +-inf; the format's own rule is applied after.
double mpfr_oracle(Format f, mpfr_srcptr x) {
  const FormatSpec& s = spec(f);
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_set_emin(s.emin - s.precision + 2);
  mpfr_set_emax(s.emax + 1);
  mpfr_t r;
  mpfr_init2(r, s.precision);
  int t = mpfr_set(r, x, MPFR_RNDN);
  t = mpfr_check_range(r, t, MPFR_RNDN);
  mpfr_subnormalize(r, t, MPFR_RNDN);
  double out = mpfr_get_d(r, MPFR_RNDN);
  mpfr_clear(r);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  if (std::isinf(out) || std::fabs(out) > s.max_finite)
    out = s.has_inf ? std::copysign(std::numeric_limits<double>::infinity(), out) : std::numeric_limits<double>::quiet_NaN();
  return out;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b)); }

TEST(Formats, EveryBitPatternRoundTrips) {
  for (Format f : small_formats) {
    const FormatSpec& s = spec(f);
    size_t nans = 0;
    for (uint32_t bits = 0; bits < (1u << s.bits); ++bits) {
      const double v = decode(f, bits);
      if (std::isnan(v)) { ++nans; continue; }
      ASSERT_TRUE(is_representable(f, v)) << s.name << " " << bits;
      ASSERT_EQ(encode(f, v), bits) << s.name << " value " << v;
      ASSERT_TRUE(same(round_to(f, v), v)) << s.name << " " << v;
    }
    // fp16: 2*1023 NaNs; bf16: 2*127; e5m2: 2*3; OCP e4m3: exactly two (S.1111.111).
    const size_t expected = f == Format::e4m3 ? 2 : 2 * ((1u << (s.precision - 1)) - 1);
    EXPECT_EQ(nans, expected) << s.name;
  }
}

TEST(Formats, NeighboursAreConsecutiveBitPatterns) {
  for (Format f : small_formats) {
    const FormatSpec& s = spec(f);
    const uint32_t sign_bit = 1u << (s.bits - 1);
    for (uint32_t bits = 0; bits + 1 < sign_bit; ++bits) {
      const double v = decode(f, bits), w = decode(f, bits + 1);
      if (std::isnan(v) || std::isnan(w) || std::isinf(v)) continue;
      ASSERT_EQ(next_up(f, v), w) << s.name << " " << v;
      ASSERT_EQ(next_down(f, w), v) << s.name << " " << w;
      ASSERT_TRUE(same(next_down(f, -v), -w)) << s.name << " " << v;
      if (!std::isinf(w)) {
        ASSERT_EQ(ulp(f, v), w - v) << s.name << " " << v;
      }
      // Every midpoint rounds to the even neighbour, and just off the midpoint to the nearer one.
      if (!std::isinf(w)) {
        const double mid = v + (w - v) / 2;
        const double even = (encode(f, v) & 1u) ? w : v;
        ASSERT_EQ(round_to(f, mid), even) << s.name << " midpoint of " << v;
        ASSERT_EQ(round_to(f, std::nextafter(mid, 0.0)), v) << s.name;
        ASSERT_EQ(round_to(f, std::nextafter(mid, 1e300)), w) << s.name;
      }
    }
  }
}

TEST(Formats, DoubleRoundingTrap) {
  // Through float this becomes 1 + 2^-11 exactly, a tie, and then rounds to even 1.0; once, it is
  // above the midpoint and goes up.
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(round_to(Format::fp16, x), 1.0009765625);
  EXPECT_EQ(round_to(Format::fp16, double(float(x))), 1.0);
  mp_real y = mp_real(1) + pow(mp_real(2), -11) + pow(mp_real(2), -80);  // between doubles
  EXPECT_EQ(round_to(Format::fp16, y), 1.0009765625);
  EXPECT_EQ(round_to(Format::fp64, y), 1.0 + std::ldexp(1.0, -11));
}

TEST(Formats, OcpFp8Limits) {
  EXPECT_EQ(spec(Format::e4m3).max_finite, 448.0);
  EXPECT_EQ(spec(Format::e5m2).max_finite, 57344.0);
  EXPECT_EQ(spec(Format::e4m3).min_subnormal(), std::ldexp(1.0, -9));
  EXPECT_EQ(round_to(Format::e4m3, 464.0), 448.0);                    // tie to even stays finite
  EXPECT_TRUE(std::isnan(round_to(Format::e4m3, 464.5)));             // non-saturating: NaN
  EXPECT_EQ(round_to(Format::e4m3, 464.5, Overflow::saturate), 448.0);
  EXPECT_EQ(round_to(Format::e4m3, -1e9, Overflow::saturate), -448.0);
  EXPECT_TRUE(std::isnan(round_to(Format::e4m3, std::numeric_limits<double>::infinity())));
  EXPECT_EQ(round_to(Format::e4m3, std::numeric_limits<double>::infinity(), Overflow::saturate), 448.0);
  EXPECT_EQ(round_to(Format::e5m2, 61440.0), std::numeric_limits<double>::infinity());  // tie to even: 2^16
  EXPECT_EQ(round_to(Format::e5m2, 61439.0), 57344.0);
  EXPECT_EQ(round_to(Format::e5m2, 1e9, Overflow::saturate), 57344.0);
  EXPECT_EQ(encode(Format::e4m3, std::numeric_limits<double>::quiet_NaN()), 0x7Fu);
  EXPECT_EQ(encode(Format::e5m2, std::numeric_limits<double>::infinity()), 0x7Cu);
  EXPECT_THROW(encode(Format::e4m3, std::numeric_limits<double>::infinity()), std::invalid_argument);
  EXPECT_THROW(encode(Format::fp16, 1.0 + std::ldexp(1.0, -20)), std::invalid_argument);
}

TEST(Formats, Fp32MatchesTheHardwareConversion) {
  // double -> float is a single IEEE rounding, so it is an independent oracle for fp32.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const double x = std::bit_cast<double>(rng());
    if (std::isnan(x)) continue;
    ASSERT_TRUE(same(round_to(Format::fp32, x), double(float(x)))) << x;
  }
}

// Random doubles over the whole range of interest of each format, biased to the subnormal and
// overflow edges, against MPFR.
TEST(Formats, RandomDoublesMatchMpfr) {
  std::mt19937_64 rng(11);
  mpfr_t x;
  mpfr_init2(x, 53);
  for (Format f : all_formats) {
    const FormatSpec& s = spec(f);
    std::uniform_int_distribution<int> exponent(s.emin - s.precision - 3, s.emax + 2);
    for (int i = 0; i < 300000; ++i) {
      const double mant = std::bit_cast<double>((rng() >> 12) | 0x3FF0000000000000ull);  // [1, 2)
      const double v = std::ldexp(mant, exponent(rng)) * ((rng() & 1) ? -1 : 1);
      mpfr_set_d(x, v, MPFR_RNDN);
      ASSERT_TRUE(same(round_to(f, v), mpfr_oracle(f, x))) << s.name << " " << v;
    }
  }
  mpfr_clear(x);
}

TEST(Formats, MultiprecisionRoundsOnceAndMatchesMpfr) {
  std::mt19937_64 rng(13);
  for (Format f : {Format::fp64, Format::fp32, Format::fp16, Format::bf16, Format::e4m3, Format::e5m2}) {
    const FormatSpec& s = spec(f);
    std::uniform_int_distribution<int> exponent(std::max(s.emin - s.precision - 3, -1000), std::min(s.emax + 2, 1020));
    for (int i = 0; i < 20000; ++i) {
      // A value with ~166 significant bits: a double plus a tail far below its last bit.
      const double mant = std::bit_cast<double>((rng() >> 12) | 0x3FF0000000000000ull);
      const mp_real tail = mp_real(double(rng() >> 11)) * pow(mp_real(2), -110);
      const mp_real v = (mp_real(mant) + tail) * pow(mp_real(2), exponent(rng));
      const double got = round_to(f, v);
      double want;
      if (f == Format::fp64) {
        mpfr_t r;
        mpfr_init2(r, 53);
        mpfr_set(r, v.backend().data(), MPFR_RNDN);
        want = mpfr_get_d(r, MPFR_RNDN);
        mpfr_clear(r);
      } else {
        want = mpfr_oracle(f, v.backend().data());
      }
      ASSERT_TRUE(same(got, want)) << s.name << " " << v;
    }
  }
}

TEST(Formats, UlpAndLimits) {
  EXPECT_EQ(ulp(Format::fp16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(Format::bf16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp(Format::tf32, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(Format::fp16, 0.0), std::ldexp(1.0, -24));
  EXPECT_EQ(spec(Format::fp16).max_finite, 65504.0);
  EXPECT_EQ(spec(Format::bf16).unit_roundoff(), std::ldexp(1.0, -8));
  EXPECT_EQ(round_to(Format::tf32, 1.0 + std::ldexp(1.0, -11)), 1.0);  // tie to even
  EXPECT_EQ(round_to(Format::tf32, 1.0 + 3 * std::ldexp(1.0, -11)), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(encode(Format::tf32, 1.0 + std::ldexp(1.0, -10)), 0x3F802000u);
  EXPECT_EQ(decode(Format::fp16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(decode(Format::bf16, 0x7F80), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::signbit(decode(Format::fp16, 0x8000)));
  EXPECT_EQ(parse_format("e4m3"), Format::e4m3);
  EXPECT_FALSE(parse_format("fp12").has_value());
}

}  // namespace
}  // namespace fc
