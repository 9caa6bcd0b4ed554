// The tensor-core block-FMA model (reference/tensor_core_model.h), against hand-computed steps and against
// a score the H200 produced.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reference/tensor_core_model.h"

namespace fc {
namespace {

constexpr double kFp16MinNormal = 0x1p-14;

// The bit-level exponent helpers are the library's functions: ilogb over every exponent field (normal and
// subnormal, random significands, both signs), ldexp(1, k) over k from below the subnormals to overflow.
TEST(TensorCoreModel, BitLevelExponentsAreTheLibrarys) {
  std::mt19937_64 rng(20261202);
  int checked = 0;
  for (uint64_t field = 0; field < 0x7ff; ++field)
    for (int r = 0; r < 64; ++r) {
      uint64_t u = field << 52 | (rng() & ((uint64_t(1) << 52) - 1)) | (r % 2 ? uint64_t(1) << 63 : 0);
      if (field == 0 && (u & ((uint64_t(1) << 52) - 1)) == 0) u |= uint64_t(1) << (r % 52);  // not zero
      double x;
      std::memcpy(&x, &u, sizeof x);
      ASSERT_EQ(exponent_of(x), std::ilogb(x)) << x;
      ++checked;
    }
  for (int k = -1100; k <= 1100; ++k) {
    const double want = std::ldexp(1.0, k), got = pow2(k);
    ASSERT_TRUE(got == want) << k;
  }
  EXPECT_EQ(checked, 0x7ff * 64);
}

// One step aligns to the largest term and truncates each term below 2^(E - 25).
TEST(TensorCoreModel, TermsBelowTheAlignmentGrainAreTruncated) {
  const double t[2] = {1.0, 0x1p-26};
  EXPECT_EQ(block_fma_step(0.0f, t, 2, 25), 1.0f);  // 2^-26 < 2^(0 - 25): dropped
  const double u[2] = {1.0, 0x1p-25};
  EXPECT_EQ(block_fma_step(0.0f, u, 2, 25), 1.0f);  // kept exactly, then RZ to fp32 drops it
  const double v[2] = {1.0, -0x1p-25};
  EXPECT_EQ(block_fma_step(0.0f, v, 2, 25), std::nextafter(1.0f, 0.0f));  // RZ of 1 - 2^-25
}

// A subnormal operand aligns at its format's smallest normal: 2^-24 (fp16 subnormal) times 0x1.a78p15 is
// 0x1.a78p-9, but it aligns as 2^-14 * 0x1.a78p15 = 0x1.a78p1, so a second product of 2^-30 falls below
// the grain 2^(1 - 25) and is lost. Aligned by value it would be kept.
TEST(TensorCoreModel, SubnormalOperandAlignsAtTheSmallestNormal) {
  const double q[2] = {0x1p-24, 0x1p-24}, k[2] = {0x1.a78p15, 0x1p-6};
  double t[2], a[2];
  for (int i = 0; i < 2; ++i) {
    t[i] = q[i] * k[i];
    a[i] = alignment_magnitude(q[i], kFp16MinNormal) * alignment_magnitude(k[i], kFp16MinNormal);
  }
  EXPECT_EQ(block_fma_step(0.0f, t, 2, 25, a), static_cast<float>(0x1.a78p-9));
  EXPECT_EQ(block_fma_step(0.0f, t, 2, 25), static_cast<float>(0x1.a78p-9 + 0x1p-30));
  EXPECT_EQ(alignment_magnitude(0.0, kFp16MinNormal), 0.0);  // zero does not move the alignment
  EXPECT_EQ(alignment_magnitude(-3.0, kFp16MinNormal), 3.0);
}

// A product's alignment exponent is the sum of its operands' exponent fields, not its own: 1.5 * 1.5 =
// 2.25 has exponent 1 but aligns at 2^(0 + 0), so with 1.5 * 1.5 - 1.5 * 1.5 cancelling, a third product
// of 2^-25 stays above the grain 2^(0 - 25) and survives; aligned at 2.25 (grain 2^-24) it would be lost.
// Measured on the H200 (bench/tensor_core_probe): this rule reproduced every fp16 and bf16 result.
TEST(TensorCoreModel, ProductsAlignAtTheSumOfTheirExponentFields) {
  const BlockFmaModel m = tensor_core_model(Recipe::fp16);
  ASSERT_TRUE(m.exponent_fields);
  const double a[3] = {1.5, -1.5, 0x1p-12}, b[3] = {1.5, 1.5, 0x1p-13};
  double t[3], fields[3], by_value[3];
  for (int i = 0; i < 3; ++i) {
    t[i] = a[i] * b[i];
    fields[i] = product_alignment(m, a[i], b[i], kFp16MinNormal, kFp16MinNormal);
    by_value[i] = alignment_magnitude(a[i], kFp16MinNormal) * alignment_magnitude(b[i], kFp16MinNormal);
  }
  EXPECT_EQ(fields[0], 1.0);
  EXPECT_EQ(block_fma_step(0.0f, t, 3, m.F, fields), 0x1p-25f);
  EXPECT_EQ(block_fma_step(0.0f, t, 3, m.F, by_value), 0.0f);
  EXPECT_EQ(product_alignment(m, 0.0, 3.0, kFp16MinNormal, kFp16MinNormal), 0.0);  // zero does not align
  EXPECT_EQ(product_alignment(m, 0x1p-24, 0x1.8p3, kFp16MinNormal, kFp16MinNormal), 0x1p-11);  // subnormal at e_min
  // fp8 (inside its fp16 steps) follows the rule too; tf32 is not measured and keeps |a|' |b|'.
  EXPECT_TRUE(tensor_core_model(Recipe::fp8_e5m2).exponent_fields);
  EXPECT_FALSE(tensor_core_model(Recipe::tf32).exponent_fields);
  EXPECT_EQ(product_alignment(tensor_core_model(Recipe::tf32), 1.5, 1.5, 0x1p-126, 0x1p-126), 2.25);
}

// fp8 mma.sync adds C after the products' two fp16 steps, rounding to nearest: with C = 1 and one product
// of 0.75 * 2^-23, C inside a step would keep the product above the grain and then truncate the sum to 1;
// added last, 1 + 0.75 * 2^-23 rounds up to 1 + 2^-23. The two steps take alternating key pairs.
TEST(TensorCoreModel, Fp8MmaSyncAddsCLastAfterTwoSteps) {
  const BlockFmaModel m = tensor_core_model(Recipe::fp8_e5m2);
  ASSERT_TRUE(m.fp16_halves);
  double t[32] = {}, a[32] = {};
  t[0] = a[0] = 0x1.8p-24;
  EXPECT_EQ(mma_step(m, 1.0f, t, a, 32), 1.0f + 0x1p-23f);
  EXPECT_EQ(block_fma_step(1.0f, t, 32, m.F, a), 1.0f);
  // Keys 0, 1 are in the first step and key 2 in the second: 1 - 1 at keys 0 and 1 cancels there, so
  // 2^-30 at key 2 meets only C = 0 in its step and survives; in one step with the 1s (contiguous halves,
  // keys 0-15) it would fall below the grain 2^-25 and be lost.
  double u[32] = {}, ua[32] = {};
  u[0] = ua[0] = 1.0, u[1] = -1.0, ua[1] = 1.0, u[2] = ua[2] = 0x1p-30;
  EXPECT_EQ(mma_step(m, 0.0f, u, ua, 32), 0x1p-30f);
  EXPECT_EQ(block_fma_step(0.0f, u, 16, m.F, ua), 0.0f);
}

// The GPU fuzzer's case (seed 3, H200, 2026-11-29): one row of fp16 Q and the only key of K, d = 32, two
// m16n8k16 steps. With one key LSE = fl32(s * scale); the H200 returned 0x1.a8b91p-4 (0.103692114). The
// model must give exactly that; by value it gives 0.103696287.
TEST(TensorCoreModel, ReproducesTheH200ScoreOfTheSubnormalFinding) {
  const double t = 0x1p-24;
  const std::vector<double> q = {0, -0.0, 0, t, 0, -0.0, 0, -0.0, 0, 0, 0, 0, 0, 0, 0, -t,
                                 -0.0, t, -t, -0.0, 0, 0, 0, -0.0, 0, 0, 0, -0.0, 0, 0, -0.0, t};
  const std::vector<double> k = {-0x1.928p-6, -0x1.e4cp+8, 0x1.b4cp+3, 0x1.94p+3, 0x1.128p-10, -0x1.3ap-17,
                                 0x1.a48p+3, 0x1.4dcp-8, -0x1.28cp+1, 0x1.a68p+3, -0x1.45p+1, 0x1.928p+3,
                                 -0x1.dfp+9, -0x1.528p+9, 0x1.d04p+12, -0x1.128p-6, -0x1.194p+0, 0x1.ba4p+0,
                                 -0x1.f44p+2, 0x1.5fp+14, -0x1.d2p+1, 0x1.72p-5, 0x1.e38p+14, -0x1.23cp+6,
                                 0x1.484p-7, 0x1.2c4p+3, 0x1.484p-7, -0x1.e9p+3, 0x1.424p-6, 0x1.8a8p+6,
                                 0x1.588p-7, 0x1.a78p+15};
  const float scale = 0x1.00a5p+5f;
  auto score = [&](bool by_alignment) {
    float acc = 0.0f;
    for (int c0 = 0; c0 < 32; c0 += 16) {
      double terms[16], align[16];
      for (int i = 0; i < 16; ++i) {
        terms[i] = q[c0 + i] * k[c0 + i];
        align[i] = product_alignment(tensor_core_model(Recipe::fp16), q[c0 + i], k[c0 + i], kFp16MinNormal, kFp16MinNormal);
      }
      acc = block_fma_step(acc, terms, 16, 25, by_alignment ? align : nullptr);
    }
    return acc * scale;
  };
  EXPECT_EQ(score(true), 0x1.a8b91p-4f);
  EXPECT_NE(score(false), 0x1.a8b91p-4f);
}

}  // namespace
}  // namespace fc
