// Number formats the kernels store and compute in, with exactly one rounding from double.
//
// Why not Eigen::half or a cast through float: double -> float -> half rounds twice and gets the
// 1 + 2^-11 + 2^-40 trap wrong. Here every conversion scales by a power of two (exact) and rounds to an
// integer once, in round-to-nearest-even.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fc {

enum class Format { fp64, fp32, tf32, fp16, bf16, e4m3, e5m2 };

struct FormatSpec {
  std::string_view name;
  int bits;        // storage bits (tf32 is stored in an fp32 container; its own width is 19)
  int precision;   // significand bits p, hidden bit included
  int emin;        // exponent of the smallest normal
  int emax;        // exponent of the largest finite
  bool has_inf;    // OCP e4m3 has none: its all-ones exponent still holds normal numbers
  double max_finite;
  double unit_roundoff() const;  // u = 2^-p
  double min_normal() const;     // 2^emin
  double min_subnormal() const;  // 2^(emin - p + 1)
};

const FormatSpec& spec(Format f);
std::optional<Format> parse_format(std::string_view name);  // fp64 fp32 tf32 fp16 bf16 e4m3 e5m2

// What happens to a finite value beyond max_finite after rounding. ieee: +-inf, or NaN for a format
// without infinities (OCP "non-saturating"). saturate: +-max_finite, and +-inf becomes +-max_finite
// (OCP "saturating", NVIDIA's satfinite).
enum class Overflow { ieee, saturate };

// Round x to the nearest value of f, ties to even, in one step. NaN stays NaN.
double round_to(Format f, double x, Overflow overflow = Overflow::ieee);
bool is_representable(Format f, double x);

// Bit patterns. encode requires a representable value (or NaN / inf where the format has one) and
// throws std::invalid_argument otherwise; tf32 uses the fp32 container with the low 13 bits zero.
uint32_t encode(Format f, double x);
double decode(Format f, uint32_t bits);

// The spacing of f's values at |x| (the ulp of the binade holding x; subnormal spacing below
// min_normal). For x at a power of two this is the spacing above x, as in Goldberg's definition.
double ulp(Format f, double x);
double next_up(Format f, double x);
double next_down(Format f, double x);

}  // namespace fc
