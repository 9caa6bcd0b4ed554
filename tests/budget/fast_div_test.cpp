// The budget kernels' division by a launch-constant divisor (reference/cuda/fast_div.h), on the host: the
// same function the kernels call, with the multiply-high done in 64 bits instead of __umulhi.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "reference/cuda/fast_div.h"

namespace fc::gpu::detail {
namespace {

constexpr uint32_t kMaxDividend = 0x7fffffffu;  // the contract: 0 <= x < 2^31

// Dividends that stress the rounding of the multiplier: small ones, the neighbours of multiples of d, the
// top of the range, and random ones.
std::vector<uint32_t> dividends(uint32_t d, std::mt19937& rng) {
  std::vector<uint32_t> x;
  for (uint32_t v = 0; v < 2048; ++v) x.push_back(v);
  for (uint64_t k = 1; k * d <= kMaxDividend && k < 4096; k = k * 3 / 2 + 1)
    for (int64_t dx = -1; dx <= 1; ++dx) x.push_back(uint32_t(int64_t(k * d) + dx));
  const uint32_t top = kMaxDividend - kMaxDividend % d;  // the largest multiple of d in range
  for (uint32_t v : {kMaxDividend, kMaxDividend - 1, top, top - 1}) x.push_back(v);
  std::uniform_int_distribution<uint32_t> any(0, kMaxDividend);
  for (int k = 0; k < 512; ++k) x.push_back(any(rng));
  return x;
}

TEST(FastDiv, EqualsTheDivisionForEveryDivisorTheKernelsUse) {
  // The budget divides by its softmax step (the kernels' tile width, at most 2^16 here) and by the
  // block-FMA model's width; every divisor up to 4096, then powers of two and their neighbours beyond.
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (uint32_t p = 4096; p <= (1u << 30); p *= 2)
    for (uint32_t d : {p - 1, p, p + 1, p / 3 * 2 + 1}) divisors.push_back(d);
  divisors.push_back(kMaxDividend);
  std::mt19937 rng(7);
  int64_t checked = 0;
  for (uint32_t d : divisors) {
    const FastDiv f = make_fast_div(d);
    for (uint32_t x : dividends(d, rng)) {
      ASSERT_EQ(fast_div(f, x), x / d) << "x = " << x << ", d = " << d;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10'000'000);
}

TEST(FastDiv, AMultiplierOneTooSmallIsCaught) {
  // The check's control: the same walk over dividends finds the error of a multiplier one below the
  // right one (for d = 3 the quotient of 3 comes out 0).
  std::mt19937 rng(7);
  int wrong_divisors = 0;
  for (uint32_t d : {3u, 7u, 100u, 1000u}) {
    FastDiv f = make_fast_div(d);
    f.m -= 1;
    bool wrong = false;
    for (uint32_t x : dividends(d, rng)) wrong = wrong || fast_div(f, x) != x / d;
    wrong_divisors += wrong;
  }
  EXPECT_EQ(wrong_divisors, 4);
}

}  // namespace
}  // namespace fc::gpu::detail
