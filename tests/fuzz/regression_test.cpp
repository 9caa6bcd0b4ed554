// Regression tests from fuzz findings: each is a reproducer turned into a test by
// `flashcheck fuzz --explain <file>` (or the libFuzzer target's crash printout), pasted here unchanged
// apart from its name. They must stay clean on the current code. docs/fuzzing.md.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/fuzz_case_decoder.h"
#if __has_include("kernels/subject_registry.h")
#include "kernels/subject_registry.h"
#endif

namespace {

// Found by the libFuzzer target from the committed seed tests/corpus/hostile-raw-bits-tf32 (0.2 s):
// error_budget (reference/error_budget.cpp) returns NaN for o_bound when tf32 operand rounding meets
// scores of ~1e5 (exp of the score-error term overflows and meets a zero: inf * 0). check_against_budget
// tests err > bound, so a NaN bound passes any error. The emulation's output is right here (equal to
// the reference); the finding is against the budget: an overflowing bound must be +inf, never NaN.
// Regression test from a fuzz reproducer (docs/fuzzing.md). The case:
//   problem: B=1 Hq=1 Hkv=1 Nq=5 Nk=19 d=2 dv=2 scale=0.707107 mask=none (scale unset: 1/sqrt(d))
//     key tiles: n_k = 19 = 2 * Bc + 3 (Bc = 8); n_q = 5
//   options: recipe=tf32 tile=4x8 num_splits=1 l_from_fp32_p=0 two_level_accum=0 normalisation=fa2 accumulation=tensor_core
//   values: Q: raw bits (made finite); K: raw bits (made finite); V: raw bits (non-finite patterns -> NaN); Q and K scaled by 2^-16 (score guard)
//     NaN inputs: 0
//     (86 input values: not printed)
TEST(FuzzRegression, BudgetBoundIsNeverNaN_Tf32ScoresNear2To17) {
  [[maybe_unused]] const double nan = std::numeric_limits<double>::quiet_NaN();
  [[maybe_unused]] const double inf = std::numeric_limits<double>::infinity();
  fc::fuzz::FuzzCase c;
  c.problem.batch = 1;
  c.problem.heads_q = 1;
  c.problem.heads_kv = 1;
  c.problem.n_q = 5;
  c.problem.n_k = 19;
  c.problem.d = 2;
  c.problem.dv = 2;
  c.options.recipe = fc::Recipe::tf32;
  c.options.tile_m = 4;
  c.options.tile_n = 8;
  c.options.num_splits = 1;
  c.options.l_from_fp32_p = false;
  c.options.two_level_accum = false;
  c.options.normalisation = fc::Normalisation::fa2;
  c.options.accumulation = fc::Accumulation::tensor_core;
  c.options.q_descale = 0x1p+0;
  c.options.k_descale = 0x1p+0;
  c.options.v_descale = 0x1p+0;
  c.inputs.q = {0x1.5e5732p+6, -0x1.03284ap-78, 0x1.29ee64p-44, 0x1.fc8732p+8, -0x1.3cc10ap-107, 0x1.f9f9e8p-44, 0x1.6adc34p-103, 0x1.1a7394p+8,
      -0x1.c36fdcp-39, 0x1.819b42p+8};
  c.inputs.k = {-0x1.71dd0ap+8, 0x1.7156c8p-86, 0x1.34fe8p-132, -0x1.25a656p+2, 0x1.8863fap-113, -0x1.347886p-1, -0x1.59c65ep+8, -0x1.a9af38p+8,
      0x1.64a014p-55, -0x1.a132ep-69, -0x1.37da5p-82, -0x1.a94ea6p+8, 0x1.bd9cfap-90, -0x1.9cf4eep-22, 0x1.913f08p+8, -0x1.3656b6p-114,
      -0x1.d55796p+8, 0x1.47736cp+8, 0x1.a9f5b6p+8, 0x1.76e776p+8, -0x1.46e4a2p+8, -0x1.b2c154p-26, 0x1.c432cap-11, 0x1.479176p+8,
      -0x1.769f58p-6, 0x1.757686p+8, 0x1.dc707p+8, -0x1.dd7088p-106, 0x1.522c06p-85, -0x1.48be66p+8, -0x1.3b9348p-44, -0x1.5e5c4cp-11,
      0x1.e0acbap+8, 0x1.b29a78p+8, 0x1.0afef2p-5, 0x1.96f2d2p+8, 0x1.f0ddep+8, 0x1.97db04p-88};
  c.inputs.v = {-0x1.18cec6p-14, 0x1.76c94p+24, -0x1.a130d4p+14, -0x1.e655bp+24, -0x1.4fd858p+24, 0x1.ca7c68p+15, 0x1.19ee96p+24, -0x1.36fe26p-1,
      0x1.71e034p+1, -0x1.dfe77ap-59, -0x1.1d645ap+24, -0x1.6416bcp-30, -0x1.afb462p+3, -0x1.0a268cp-8, 0x1.abe432p+24, -0x1.312efcp+24,
      0x1.434926p-77, -0x1.59cf5p-89, 0x1.aa0bacp-9, -0x1.e35c5ep-81, 0x1.1ddd7ep+24, 0x1.3d0ba4p+24, -0x1.74c46cp-8, 0x1.ef5ed6p+24,
      -0x1.7015dcp+24, 0x1.11aa3cp-90, -0x1.8976d4p+24, -0x1.87ad7ep+24, 0x1.6a1ebap+24, -0x1.c7553ep+24, 0x1.201e9ep+24, 0x1.489f2ep+24,
      0x1.c3d33ep+24, 0x1.919edep-22, 0x1.db7782p+24, 0x1.d89326p+24, -0x1.5cd1d2p-34, 0x1.6a301p+24};
  fc::EmulatedKernel subject;
  const fc::fuzz::CaseVerdict v = fc::fuzz::check_case(subject, c);
  std::string findings;
  for (const auto& f : v.findings) findings += f + "\n";
  EXPECT_TRUE(v.clean()) << findings;
}

// Found by `flashcheck fuzz --subject emulation --no-output-headroom` (case 719 of seed 1, in 1 s):
// the exact O is fp16's max_finite 65504 (a single key whose V is 65504); the emulation computes it
// 2^-11 high (l summed from the fp32 P while P.V uses the fp16-rounded P: within the budget's 66) and
// rounds it to fp16 with IEEE overflow: inf. The CUDA kernel converts O the same way. Disabled until
// the semantics decide: a saturating output conversion (cvt.rn.satfinite) in the kernel and the
// emulation makes it pass; or the semantics allow +-inf within one budget of max_finite. Until then
// the decoder keeps |V| <= max_finite / 2 (docs/fuzzing.md, "output headroom").
// Regression test from a fuzz reproducer (docs/fuzzing.md). The case:
//   problem: B=1 Hq=2 Hkv=2 Nq=1 Nk=1 d=7 dv=7 scale=1 mask=none
//     key tiles: n_k = 1 = 0 * Bc + 1 (Bc = 4); n_q = 1
//   options: recipe=fp16 tile=1x4 num_splits=2 l_from_fp32_p=1 two_level_accum=0 normalisation=fa2 accumulation=tensor_core
//   values: Q: small_int(int8 * 2^6); K: raw bits (made finite); V: exp_window(2^11 .. 2^19); Q and K scaled by 2^-6 (score guard)
//     NaN inputs: 0
//     (42 input values: not printed)
// The exact output is fp16's 65504; the emulation computes it 2^-11 high (within its bound) and IEEE
// rounding overflows to inf. docs/semantics.md allows that within one bound of the overflow threshold;
// any other infinity is still a finding.
TEST(FuzzRegression, OutputAtFp16MaxFiniteMayRoundToInfinity) {
  [[maybe_unused]] const double nan = std::numeric_limits<double>::quiet_NaN();
  [[maybe_unused]] const double inf = std::numeric_limits<double>::infinity();
  fc::fuzz::FuzzCase c;
  c.problem.batch = 1;
  c.problem.heads_q = 2;
  c.problem.heads_kv = 2;
  c.problem.n_q = 1;
  c.problem.n_k = 1;
  c.problem.d = 7;
  c.problem.dv = 7;
  c.problem.scale = 0x1p+0;
  c.options.recipe = fc::Recipe::fp16;
  c.options.tile_m = 1;
  c.options.tile_n = 4;
  c.options.num_splits = 2;
  c.options.l_from_fp32_p = true;
  c.options.two_level_accum = false;
  c.options.normalisation = fc::Normalisation::fa2;
  c.options.accumulation = fc::Accumulation::tensor_core;
  c.options.q_descale = 0x1p+0;
  c.options.k_descale = 0x1p+0;
  c.options.v_descale = 0x1p+0;
  c.inputs.q = {0x1.e4p+6, -0x1.4p+2, -0x1.28p+5, -0x1.9p+4, 0x1.6cp+6, -0x1.ap+4, 0x1.24p+6, 0x1.cp+3,
      0x1.28p+5, -0x1.6p+5, 0x1.dcp+6, 0x1.2p+4, -0x1.ep+6, 0x1.6cp+6};
  c.inputs.k = {-0x1.efcp+7, 0x1.64cp-3, 0x1.aacp-3, -0x1.9a8p-15, -0x1.228p-5, -0x1.fp-20, -0x1.b64p+7, -0x1.048p+0,
      -0x1.72cp+0, 0x1.8p-20, 0x1.364p+9, -0x1.e28p+9, -0x1.7c8p-2, 0x1.edcp+5};
  c.inputs.v = {0x1.ffcp+15, -0x1.ffcp+15, -0x1.f1p+15, 0x1.33p+13, 0x1.3dp+12, -0x1.dcp+15, 0x1.07p+14, -0x1.05p+13,
      -0x1.ffcp+15, 0x1.ffcp+15, 0x0p+0, 0x1.ffcp+15, 0x1.ffcp+15, 0x1p+11};
  fc::EmulatedKernel subject;
  const fc::fuzz::CaseVerdict v = fc::fuzz::check_case(subject, c);
  std::string findings;
  for (const auto& f : v.findings) findings += f + "\n";
  EXPECT_TRUE(v.clean()) << findings;
}

}  // namespace
