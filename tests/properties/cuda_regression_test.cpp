// Regression tests for what the property suite and the GPU fuzzer found in our CUDA kernels, each the
// shrunk case they printed (docs/cuda-kernel.md, "Findings"), run on v1 and (where it applies) v2, and
// kernel v2 against the CPU emulation bit for bit. Labelled gpu: skips visibly without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <random>

#include "kernels/subject_registry.h"
#include "kernels/tile_policy.h"
#include "properties/check_pipeline.h"
#include "properties/distributions.h"
#include "properties/generators.h"
#include "reference/error_budget.h"
#include "reference/exact_attention.h"
#include "reference/formats.h"
#include "tests/budget/adversarial.h"

namespace fc {
namespace {

std::unique_ptr<Subject> cuda_or_skip(std::string& why, const char* name = "cuda") {
  if (!gpu_available()) {
    why = "no usable CUDA device: GPU regression test SKIPPED, not passed";
    return nullptr;
  }
  return make_subject(name);
}

// Found by property budget/nan (H200, 2026-11-29): Nq = 3 > Nk = 2 with bottom-right causal leaves
// row 0 with no visible key; key 0's value row is NaN and visible to rows 1 and 2. The kernel's MMA
// multiplied row 0's zero P by the NaN and wrote NaN where the definition says 0.
void expect_empty_row_zero(Subject& subject, int d) {
  Problem p;
  p.heads_q = 2;
  p.n_q = 3;
  p.n_k = 2;
  p.d = p.dv = d;
  p.window = Window::causal(Align::bottom_right);
  for (int splits : {1, 2}) {
    RunOptions o;
    o.recipe = Recipe::fp16;
    o.num_splits = splits;
    AttentionInputs in = make_inputs(p, Distribution::normal, o.recipe, 1, &o);
    in.v[p.v_index(0, 0, 0, 0)] = NAN;
    const SubjectOutput out = subject.run(p, in, o);
    for (int h = 0; h < p.heads_q; ++h) {
      for (int c = 0; c < p.dv; ++c) EXPECT_EQ(out.o[p.o_index(0, h, 0, c)], 0.0) << "head " << h << " splits " << splits;
      EXPECT_EQ(out.lse[p.lse_index(0, h, 0)], -INFINITY);
      EXPECT_TRUE(std::isnan(out.o[p.o_index(0, h, 1, 0)]));  // row 1 sees key 0: NaN is right there
    }
  }
}

TEST(CudaRegression, EmptyRowStaysZeroBesideANaNValueRow) {
  std::string why;
  auto cuda = cuda_or_skip(why);
  if (!cuda) GTEST_SKIP() << why;
  expect_empty_row_zero(*cuda, 32);
}

TEST(CudaRegression, EmptyRowStaysZeroBesideANaNValueRow_V2) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_empty_row_zero(*v2, 64);
}

// Found by property masked_keys (H200, 2026-11-29), shrunk to bf16 Nq = Nk = 2, d = 256, causal,
// V[key 1] = NaN: row 0 does not see key 1 but got NaN, because the tensor-core P.V computes 0 * NaN for
// it. Now one V element (key j, column c) is NaN on a diagonal tile: exactly the rows that see key j must
// be NaN, and only in column c. Every recipe and head dim of both GPU subjects, every mask shape that
// makes boundary tiles, split or not.
struct MaskCase {
  const char* name;
  Window window;
  bool key_lengths;
};

void expect_nan_only_where_seen(Subject& subject, const char* subject_name) {
  const Capabilities caps = subject.capabilities();
  const MaskCase cases[] = {
      {"causal-top-left", Window::causal(Align::top_left), false},
      {"causal-bottom-right", Window::causal(Align::bottom_right), false},
      {"window 5,3", Window{5, 3, Align::top_left}, false},
      {"key lengths", Window{}, true},
  };
  for (Recipe recipe : caps.recipes) {
    for (int d : caps.head_dims) {
      for (const MaskCase& mc : cases) {
        for (int splits : {1, 3}) {
          Problem p;
          p.batch = 1;
          p.heads_q = 2;
          p.n_q = 70;
          p.n_k = 150;
          p.d = p.dv = d;
          p.window = mc.window;
          if (mc.key_lengths) p.key_lengths = {97};
          RunOptions o;
          o.recipe = recipe;
          o.num_splits = caps.split_kv ? splits : 1;
          if (!caps.split_kv && splits != 1) continue;
          if (unsupported(caps, p, o)) continue;
          AttentionInputs in = make_inputs(p, Distribution::normal, recipe, 7, &o);
          const int j = 60, c = d / 2 + 1;  // key 60: inside the diagonal band of rows ~60
          in.v[p.v_index(0, 0, j, c)] = NAN;
          const SubjectOutput out = subject.run(p, in, o);
          int wrong = 0;
          for (int h = 0; h < p.heads_q; ++h)
            for (int i = 0; i < p.n_q; ++i)
              for (int col = 0; col < p.dv; ++col) {
                const bool want_nan = col == c && p.visible(0, i, j);
                const bool got_nan = std::isnan(out.o[p.o_index(0, h, i, col)]);
                if (want_nan != got_nan && ++wrong <= 3)
                  ADD_FAILURE() << subject_name << " " << recipe_spec(recipe).name << " d=" << d << " " << mc.name
                                << " splits=" << o.num_splits << ": row " << i << " column " << col
                                << (got_nan ? " is NaN but does not see key " : " is not NaN but sees key ") << j;
              }
          EXPECT_EQ(wrong, 0) << subject_name << " " << recipe_spec(recipe).name << " d=" << d << " " << mc.name;
        }
      }
    }
  }
}

TEST(CudaRegression, NaNValueReachesOnlyRowsThatSeeItsKey) {
  std::string why;
  auto cuda = cuda_or_skip(why);
  if (!cuda) GTEST_SKIP() << why;
  expect_nan_only_where_seen(*cuda, "cuda");
}

TEST(CudaRegression, NaNValueReachesOnlyRowsThatSeeItsKey_V2) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_nan_only_where_seen(*v2, "cuda-v2");
}

TEST(CudaRegression, NaNValueReachesOnlyRowsThatSeeItsKey_Naive) {
  std::string why;
  auto naive = cuda_or_skip(why, "cuda-naive");
  if (!naive) GTEST_SKIP() << why;
  expect_nan_only_where_seen(*naive, "cuda-naive");
}

// NaN in V beyond each batch's key length (keys no row sees) puts a NaN in a boundary tile of every
// work tile, so every block is flagged and redone: more of them than the H200 has SMs, so v2's guarded
// redo, one block per SM walking the redo list, redoes several tiles per block. The output must be the
// output with those keys' values zero, bit for bit: O and LSE finite, split or not.
void expect_unseen_nans_change_nothing(Subject& subject, const char* subject_name) {
  const Capabilities caps = subject.capabilities();
  for (Recipe recipe : {Recipe::fp16, Recipe::bf16}) {
    for (int splits : {1, 3}) {
      Problem p;
      p.batch = 2;
      p.heads_q = p.heads_kv = 48;  // 2 x 48 x 3 = 288 work tiles of 128 rows
      p.n_q = 300;
      p.n_k = 300;
      p.d = p.dv = 64;
      p.key_lengths = {291, 200};
      RunOptions o;
      o.recipe = recipe;
      o.num_splits = caps.split_kv ? splits : 1;
      if (!caps.split_kv && splits != 1) continue;
      if (unsupported(caps, p, o)) continue;
      AttentionInputs clean = make_inputs(p, Distribution::normal, recipe, 5, &o), poisoned = clean;
      for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_kv; ++h)
          for (int64_t j = p.key_lengths[b]; j < p.n_k; ++j)
            for (int c = 0; c < p.dv; ++c) {
              clean.v[p.v_index(b, h, j, c)] = 0.0;
              poisoned.v[p.v_index(b, h, j, c)] = NAN;
            }
      const SubjectOutput want = subject.run(p, clean, o), got = subject.run(p, poisoned, o);
      const std::string what = std::string(subject_name) + " " + std::string(recipe_spec(recipe).name) + " splits=" +
                               std::to_string(o.num_splits);
      size_t differ = 0;
      for (size_t x = 0; x < want.o.size(); ++x) differ += std::memcmp(&want.o[x], &got.o[x], sizeof(double)) != 0;
      EXPECT_EQ(differ, 0u) << what << ": O elements that differ from the run without the unseen NaNs";
      EXPECT_TRUE(std::memcmp(want.lse.data(), got.lse.data(), want.lse.size() * sizeof(double)) == 0) << what;
      EXPECT_TRUE(std::all_of(got.o.begin(), got.o.end(), [](double x) { return std::isfinite(x); })) << what;
    }
  }
}

TEST(CudaRegression, UnseenNaNValuesChangeNothing) {
  std::string why;
  auto cuda = cuda_or_skip(why);
  if (!cuda) GTEST_SKIP() << why;
  expect_unseen_nans_change_nothing(*cuda, "cuda");
}

TEST(CudaRegression, UnseenNaNValuesChangeNothing_V2) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_unseen_nans_change_nothing(*v2, "cuda-v2");
}

// Found by the GPU fuzzer (seed 3, H200, 2026-11-29): fp16, d = 32, Nk = 1, Q = +-2^-24 (subnormal)
// against K up to 2^15.7; LSE off by 4.2e-6 against a bound of 9.3e-7. The kernel was right and the
// tensor-core model was not: the MMA aligns a product of a subnormal operand at the format's smallest
// normal exponent (reference/tensor_core_model.h). With one key, l = 1 and LSE = fl(s * scale), so the
// LSE shows the score's bits: the kernel must match the emulation, which runs the model, bit for bit, and
// stay within the budget, which bounds it. fp16 and bf16 (fp8's LSE adds a logf the CPU need not match
// to the bit: budget only), random subnormal Q against K of every magnitude, each head dim.
// The tile the emulation takes to mirror v2 at head dim d: 128 rows by v2's key tile, one step per tile.
RunOptions with_v2_tile(RunOptions o, int d) {
  const fc::tiles::TileShape t = fc::tiles::v2_tile(d);
  o.tile_m = t.m;
  o.tile_n = t.n;
  return o;
}

// One batch of `heads` query and key/value heads, n_q queries, n_k keys, head dim d.
Problem one_batch(int heads, int64_t n_q, int64_t n_k, int d) {
  Problem p;
  p.batch = 1;
  p.heads_q = p.heads_kv = heads;
  p.n_q = n_q;
  p.n_k = n_k;
  p.d = p.dv = d;
  return p;
}

// v2 (its scores are wgmma's, the first k-step without an addend: issue_qk) runs at d = 64, 128, 256.
void expect_subnormal_scores_as_modelled(Subject& cuda, bool v2) {
  auto emulation = make_subject("emulation");
  const Capabilities caps = cuda.capabilities();
  const std::vector<Recipe> recipes =
      v2 ? std::vector<Recipe>{Recipe::fp16, Recipe::bf16} : std::vector<Recipe>{Recipe::fp16, Recipe::bf16, Recipe::fp8_e4m3};
  const std::vector<int> dims = v2 ? std::vector<int>{64, 128, 256} : std::vector<int>{32, 64, 128};
  // bf16 also with K in [2^-8, 2): every product of a step is then below 2^-126, where a hardware that
  // aligned at a zero addend's exponent (v1 adds a zeroed accumulator, v2 none) would differ from the model.
  for (Recipe recipe : recipes) {
    for (const bool tiny : {false, true}) {
      if (tiny && recipe != Recipe::bf16) continue;
      const FormatSpec& f = spec(recipe_spec(recipe).input);
      for (int d : dims) {
        Problem p = one_batch(2, 96, 1, d);
        RunOptions o;
        o.recipe = recipe;
        AttentionInputs in = make_inputs(p, Distribution::normal, recipe, 11, &o);
        std::mt19937_64 rng(1000 + d);
        std::uniform_int_distribution<int> small(0, 3), sign(0, 1), expo(-8, tiny ? 0 : f.emax - 1);
        std::uniform_real_distribution<double> frac(1.0, 2.0);
        const double qd = recipe == Recipe::fp8_e4m3 ? o.q_descale : 1.0, kd = recipe == Recipe::fp8_e4m3 ? o.k_descale : 1.0;
        for (double& q : in.q) q = (sign(rng) ? -1 : 1) * small(rng) * f.min_subnormal() * qd;
        for (double& k : in.k) k = round_to(recipe_spec(recipe).input, (sign(rng) ? -1 : 1) * std::ldexp(frac(rng), expo(rng))) * kd;
        const Float64Attention ref = exact_attention_f64(p, in);
        const CheckedRun run = check_run(cuda, caps, p, in, o, ref);
        const SubjectOutput& got = run.out;
        const BudgetVerdict& v = run.judged.verdict;
        EXPECT_EQ(v.violations, 0u) << recipe_spec(recipe).name << " d=" << d << ": worst LSE error/bound "
                                    << v.max_lse_ratio;
        if (recipe == Recipe::fp8_e4m3) continue;
        const SubjectOutput emu = emulation->run(p, in, v2 ? with_v2_tile(o, d) : o);
        int differ = 0;
        for (size_t r = 0; r < got.lse.size(); ++r)
          if (got.lse[r] != emu.lse[r] && ++differ <= 3)
            ADD_FAILURE() << recipe_spec(recipe).name << " d=" << d << " row " << r << ": GPU LSE " << got.lse[r]
                          << " != model " << emu.lse[r];
        EXPECT_EQ(differ, 0) << recipe_spec(recipe).name << " d=" << d << (tiny ? " (products below 2^-126)" : "");
      }
    }
  }
}

TEST(CudaRegression, SubnormalOperandsAlignAtTheSmallestNormal) {
  std::string why;
  auto cuda = cuda_or_skip(why);
  if (!cuda) GTEST_SKIP() << why;
  expect_subnormal_scores_as_modelled(*cuda, false);
}

TEST(CudaRegression, SubnormalOperandsAlignAtTheSmallestNormal_V2) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_subnormal_scores_as_modelled(*v2, true);
}

// The 16-bit kernels sum l on the tensor cores (P~ times ones, fwd_kernel.cuh kLOnTensorCores), and with
// two m-tiles per warp the two share one accumulator, so that a NaN in one row's P~ reaches the row 16
// below or above it through NaN * 0. Such a warp must be redone (fwd_params.h redo), also on full tiles
// with no mask, where the V NaN guard is off. A NaN in row 3 of Q (m-tile 0 of warp 0, partner row 19):
// only row 3 may be NaN, every other row within the budget. Every head dim, split or not.
void expect_nan_query_row_in_its_row(Subject& cuda) {
  const Capabilities caps = cuda.capabilities();
  for (Recipe recipe : {Recipe::fp16, Recipe::bf16}) {
    for (int d : caps.head_dims) {
      for (int splits : {1, 2}) {
        Problem p;
        p.batch = 1;
        p.heads_q = p.heads_kv = 2;
        p.n_q = 128;
        p.n_k = 256;  // a multiple of every key tile: no boundary tile
        p.d = p.dv = d;
        RunOptions o;
        o.recipe = recipe;
        o.num_splits = splits;
        AttentionInputs in = make_inputs(p, Distribution::normal, recipe, 21, &o);
        const int bad_row = 3;
        in.q[p.q_index(0, 1, bad_row, d / 2)] = NAN;
        const Float64Attention ref = exact_attention_f64(p, in);
        const CheckedRun run = check_run(cuda, caps, p, in, o, ref);
        const SubjectOutput& out = run.out;
        const BudgetVerdict& v = run.judged.verdict;
        const std::string what = std::string(recipe_spec(recipe).name) + " d=" + std::to_string(d) +
                                 " splits=" + std::to_string(splits);
        EXPECT_EQ(v.violations, 0u) << what << ": worst error/bound " << v.max_ratio;
        int nan_rows = 0;
        for (int h = 0; h < p.heads_q; ++h)
          for (int i = 0; i < p.n_q; ++i) {
            const bool want = h == 1 && i == bad_row;
            const bool got = std::isnan(out.lse[p.lse_index(0, h, i)]);
            if (got) ++nan_rows;
            if (want != got) ADD_FAILURE() << what << ": head " << h << " row " << i << (got ? " is NaN" : " is not NaN");
          }
        EXPECT_EQ(nan_rows, 1) << what;
      }
    }
  }
}

TEST(CudaRegression, NaNQueryRowStaysInItsRow) {
  std::string why;
  auto cuda = cuda_or_skip(why);
  if (!cuda) GTEST_SKIP() << why;
  expect_nan_query_row_in_its_row(*cuda);
}

TEST(CudaRegression, NaNQueryRowStaysInItsRow_V2) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_nan_query_row_in_its_row(*v2);
}

// l on the tensor cores is a chain of block FMAs, l <- MMA(P~ of 16 keys, ones, C = l) (softmax.h; the
// model: reference/tensor_core_model.h), not the fp32 lane sums it replaced. This checks the kernel's l
// against both through the LSE, where l shows with nothing after it but logf: scale = ln 2 makes the
// exponent's constant c = 1 exactly, integer scores make every P~ an exact power of two (2^0 for key 0,
// the row max, then 2^-20 .. 2^-32; fp16 keeps 2^-24 and flushes the rest to 0, as the emulation does),
// so the kernel and the emulation agree on every P~ and differ, if at all, only in how l sums them. l is
// just above 1, where log l ~ l - 1 carries few bits: one ulp of l moves the LSE by thousands of its
// ulps. The GPU must match the chain to 2 ulps (the two logf's), and differ from the lane sums by more
// than 8 ulps in a quarter of the rows, or the test could not tell them apart (a model of the inputs
// predicted 28 rows in 32, 2026-11-30).
void expect_row_sum_is_the_chain(Subject& cuda, bool v2) {
  auto emulation = make_subject("emulation");
  for (Recipe recipe : {Recipe::fp16, Recipe::bf16}) {
    for (int d : {64, 128}) {
      Problem p = one_batch(1, 128, 1024, d);
      RunOptions o;
      o.recipe = recipe;
      AttentionInputs in = make_inputs(p, Distribution::normal, recipe, 5, &o);
      adversarial::power_of_two_weights(p, in, 77 + d);
      const SubjectOutput got = cuda.run(p, in, o);
      const SubjectOutput emu = emulation->run(p, in, v2 ? with_v2_tile(o, d) : o);
      const std::string what = std::string(recipe_spec(recipe).name) + " d=" + std::to_string(d);
      int off_chain = 0, off_lanes = 0;
      for (int i = 0; i < p.n_q; ++i) {
        // The lane sums: lane t of a quad adds keys 8j + 2t, 8j + 2t + 1 in order; then (l0 + l1) + (l2 + l3).
        float lane[4] = {0, 0, 0, 0};
        for (int j = 0; j < p.n_k; ++j) {
          double s = 0;
          for (int c = 0; c < 4; ++c) s += in.q[p.q_index(0, 0, i, c)] * in.k[p.k_index(0, 0, j, c)];
          lane[(j % 8) / 2] += static_cast<float>(round_to(recipe_spec(recipe).p_format, std::exp2(s)));
        }
        const float lse_lanes = std::log((lane[0] + lane[1]) + (lane[2] + lane[3]));
        const float g = static_cast<float>(got.lse[i]), e = static_cast<float>(emu.lse[i]);
        const float ulp = std::nextafter(e, INFINITY) - e;
        if (std::fabs(g - e) > 2 * ulp && ++off_chain <= 3)
          ADD_FAILURE() << what << " row " << i << ": GPU LSE " << g << " vs the chain's " << e << " ("
                        << (g - e) / ulp << " ulps)";
        if (std::fabs(g - lse_lanes) > 8 * ulp) ++off_lanes;
      }
      EXPECT_EQ(off_chain, 0) << what;
      EXPECT_GT(off_lanes, p.n_q / 4) << what << ": the lane sums give the same LSE; the test cannot tell";
    }
  }
}

TEST(CudaRegression, RowSumIsTheTensorCoreChain) {
  std::string why;
  auto cuda = cuda_or_skip(why);
  if (!cuda) GTEST_SKIP() << why;
  expect_row_sum_is_the_chain(*cuda, false);
}

TEST(CudaRegression, RowSumIsTheTensorCoreChain_V2) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_row_sum_is_the_chain(*v2, true);
}

// Kernel v2 runs the rounding points of softmax.h with one step per 128 x Bc tile, and its wgmma adds as
// mma.sync does (docs/error-analysis.md §1), so the CPU emulation with that tile must give the same O bits.
// The one operation the emulation cannot mirror to the bit is the SFU's ex2.approx (a few ulps off exp2 in
// rare cases), so the scores are made integers with c = 1 (scale = ln 2, Q in {0, 1} and K in {-2, -1, 0}
// on 4 columns): every p, alpha and merge weight is then an exact power of two on both sides, and what is
// compared is everything else: which keys each step sees (tiles, masks, ragged lengths, splits), the
// rounding of P~, the tensor-core chains of O and l (random V), both l conventions and the merge. O must
// match bit for bit. The LSE is fl(fl(m se) + logf(l)) on both sides, and logf is the one function that
// differs (CUDA's and the C library's, each within 1 ulp): the two may differ by 2 ulps of log l, and the
// final addition keeps that as an absolute difference, which is more than 2 ulps of the LSE where m se < 0
// and log l > 0 partly cancel (on the H200, with O equal bit for bit, one or two rows of 8 of the 36
// cases, and of 5 of the 36 with three splits, differed so). So the LSE must agree to 2 ulps of log l
// (l <= n_k: every p~ is at most 1) plus 2 ulps of the result.
void expect_v2_matches_emulation(Subject& v2, bool split) {
  auto emulation = make_subject("emulation");
  std::mt19937 rng(split ? 2027 : 2026);
  int cases = 0;
  for (Recipe recipe : {Recipe::fp16, Recipe::bf16}) {
    for (int d : {64, 128, 256}) {
      for (int variant = 0; variant < 6; ++variant) {
        Problem p;
        p.batch = 1 + variant % 2;
        p.heads_kv = 1 + variant % 2;
        p.heads_q = p.heads_kv * (1 + variant % 3 / 2);
        p.n_q = 1 + static_cast<int>(rng() % 200);
        p.n_k = 1 + static_cast<int>(rng() % 300);
        p.d = p.dv = d;
        switch (variant) {
          case 1: p.window = Window::causal(Align::top_left); break;
          case 2: p.window = Window::causal(Align::bottom_right); break;
          case 3: p.window = Window{37, 5, Align::top_left}; break;
          case 4: p.key_lengths.assign(p.batch, static_cast<int64_t>(rng() % (p.n_k + 1))); break;
          default: break;
        }
        RunOptions o;
        o.recipe = recipe;
        o.l_from_fp32_p = variant == 5;
        o.num_splits = split ? 3 : 1;
        AttentionInputs in = make_inputs(p, Distribution::normal, recipe, 100 + variant + d, &o);
        p.scale = std::log(2.0);
        std::fill(in.q.begin(), in.q.end(), 0.0);
        std::fill(in.k.begin(), in.k.end(), 0.0);
        std::uniform_int_distribution<int> q_bit(0, 1), k_val(-2, 0);
        for (int b = 0; b < p.batch; ++b) {
          for (int h = 0; h < p.heads_q; ++h)
            for (int64_t i = 0; i < p.n_q; ++i)
              for (int c = 0; c < 4; ++c) in.q[p.q_index(b, h, i, c)] = q_bit(rng);
          for (int h = 0; h < p.heads_kv; ++h)
            for (int64_t j = 0; j < p.n_k; ++j)
              for (int c = 0; c < 4; ++c) in.k[p.k_index(b, h, j, c)] = k_val(rng);
        }
        const SubjectOutput got = v2.run(p, in, o);
        const SubjectOutput emu = emulation->run(p, in, with_v2_tile(o, d));
        const std::string what = std::string(recipe_spec(recipe).name) + " d=" + std::to_string(d) + " variant " +
                                 std::to_string(variant) + " Nq=" + std::to_string(p.n_q) +
                                 " Nk=" + std::to_string(p.n_k) + (split ? " splits=3" : "");
        size_t o_diff = 0, lse_diff = 0;
        for (size_t i = 0; i < got.o.size(); ++i)
          if (!(got.o[i] == emu.o[i] || (std::isnan(got.o[i]) && std::isnan(emu.o[i])))) ++o_diff;
        auto ulp = [](float x) { return std::nextafter(std::fabs(x), INFINITY) - std::fabs(x); };
        const float log_l_max = std::log(static_cast<float>(p.n_k));
        for (size_t i = 0; i < got.lse.size(); ++i) {
          const float g = static_cast<float>(got.lse[i]), e = static_cast<float>(emu.lse[i]);
          if (g == e || (std::isnan(g) && std::isnan(e))) continue;
          if (!(std::fabs(g - e) <= 2 * ulp(log_l_max) + 2 * ulp(e))) ++lse_diff;
        }
        EXPECT_EQ(o_diff, 0u) << what << ": O elements that differ from the emulation's";
        EXPECT_EQ(lse_diff, 0u) << what << ": LSE rows beyond logf's difference from the emulation's";
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 36);
}

TEST(CudaRegression, V2MatchesTheEmulationBitForBit) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_v2_matches_emulation(*v2, false);
}

TEST(CudaRegression, V2SplitKVMatchesTheEmulationBitForBit) {
  std::string why;
  auto v2 = cuda_or_skip(why, "cuda-v2");
  if (!v2) GTEST_SKIP() << why;
  expect_v2_matches_emulation(*v2, true);
}

}  // namespace
}  // namespace fc
