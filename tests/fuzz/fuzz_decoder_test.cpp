// The fuzz case decoder and oracle (properties/fuzz_decode.h, fuzz_check.h): every byte string decodes to a
// valid case within the limits, the seed corpus is what it says, the oracle has teeth (a planted bug,
// a corrupting neighbour and a swallowed NaN are each found), and reproducers round-trip.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "kernels/cpu/emulated_kernel.h"
#include "properties/fuzz_check.h"
#include "properties/fuzz_decode.h"
#include "properties/fuzz_reproduce.h"
#include "seed_cases.h"

namespace fc::fuzz {
namespace {

const Capabilities& emulation_caps() {
  static const Capabilities c = EmulatedKernel().capabilities();
  return c;
}

// What `flashcheck fuzz --subject cuda` decodes with (the CUDA kernel's capabilities as its subject
// declares them may differ; this is a stand-in with a tile list and fixed head dims).
Capabilities gpu_like_caps() {
  Capabilities c;
  c.name = "gpu-like";
  c.recipes = {Recipe::fp16, Recipe::bf16, Recipe::fp32, Recipe::fp8_e4m3};
  c.head_dims = {32, 64, 96, 128, 256};
  c.tiles = {{128, 64}, {128, 128}, {64, 64}, {128, 32}, {64, 32}};
  c.causal = c.window = c.key_lengths = c.gqa = c.lse = c.split_kv = c.subtile_steps = true;
  return c;
}

void expect_valid(const FuzzCase& c, const Capabilities& caps, const FuzzLimits& lim) {
  const Problem& p = c.problem;
  ASSERT_NO_THROW(validate_inputs(p, c.inputs)) << describe(c);
  EXPECT_EQ(unsupported(caps, p, c.options), std::nullopt) << describe(c);
  EXPECT_LE(p.batch, lim.max_batch);
  EXPECT_LE(p.n_q, lim.max_n_q);
  EXPECT_LE(p.n_k, lim.max_n_k);
  EXPECT_LE(double(p.batch) * p.heads_q * double(p.n_q) * double(p.n_k) * (p.d + p.dv), lim.max_work * 1.0001);
  const Format f = recipe_spec(c.options.recipe).input;
  const double descales[3] = {c.options.q_descale, c.options.k_descale, c.options.v_descale};
  int t = 0;
  for (const auto* v : {&c.inputs.q, &c.inputs.k, &c.inputs.v}) {
    for (double x : *v) {
      ASSERT_FALSE(std::isinf(x));
      if (!std::isnan(x)) {
        ASSERT_TRUE(is_representable(f, x / descales[t])) << x << " in " << spec(f).name;
      }
    }
    ++t;
  }
  if (c.poison.tensor) {
    const size_t n = c.poison.tensor == 'q' ? p.q_size() : c.poison.tensor == 'k' ? p.k_size() : p.v_size();
    EXPECT_LT(c.poison.index, n);
  }
}

TEST(FuzzDecoder, EmptyInputIsAOneByOneProblem) {
  const FuzzCase c = decode_case(std::span<const uint8_t>(), emulation_caps(), FuzzLimits::cpu());
  expect_valid(c, emulation_caps(), FuzzLimits::cpu());
  EXPECT_EQ(c.problem.n_q, 1);
  EXPECT_EQ(c.problem.n_k, 1);
  EXPECT_EQ(c.poison.tensor, 0);
}

TEST(FuzzDecoder, RandomBytesAlwaysDecodeToValidCasesCpu) {
  CaseGenerator g(1);
  for (int i = 0; i < 3000; ++i) {
    const auto b = g.next_bytes();
    expect_valid(decode_case(b, emulation_caps(), FuzzLimits::cpu()), emulation_caps(), FuzzLimits::cpu());
    if (HasFatalFailure()) return;
  }
}

TEST(FuzzDecoder, RandomBytesAlwaysDecodeToValidCasesGpuLimits) {
  CaseGenerator g(2);
  const Capabilities caps = gpu_like_caps();
  for (int i = 0; i < 30; ++i) {  // large problems: ~0.5 s each to decode and check
    const auto b = g.next_bytes();
    expect_valid(decode_case(b, caps, FuzzLimits::gpu()), caps, FuzzLimits::gpu());
    if (HasFatalFailure()) return;
  }
}

TEST(FuzzDecoder, ShortRandomInputsAreValidToo) {
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> b(rng() % 40);
    for (auto& x : b) x = uint8_t(rng());
    expect_valid(decode_case(b, emulation_caps(), FuzzLimits::cpu()), emulation_caps(), FuzzLimits::cpu());
    if (HasFatalFailure()) return;
  }
}

TEST(FuzzDecoder, LengthsClusterAtTileBoundaries) {
  // Over random inputs, a good share of n_k sit at r in {0, 1, Bc-1, Bc/2, Bc/2+1} of their tile.
  CaseGenerator g(4);
  int edge = 0, total = 0;
  for (int i = 0; i < 2000; ++i) {
    const FuzzCase c = decode_case(g.next_bytes(), emulation_caps(), FuzzLimits::cpu());
    const int64_t bc = c.options.tile_n, r = c.problem.n_k % bc;
    if (bc < 4) continue;
    ++total;
    edge += r == 0 || r == 1 || r == bc - 1 || r == bc / 2 || r == bc / 2 + 1;
  }
  EXPECT_GT(edge, total / 3) << edge << " of " << total;
}

TEST(FuzzDecoder, RawBitsReachNaNSubnormalsAndNeverInf) {
  CaseGenerator g(5);
  size_t nan = 0, subnormal = 0;
  for (int i = 0; i < 2000; ++i) {
    const FuzzCase c = decode_case(g.next_bytes(), emulation_caps(), FuzzLimits::cpu());
    const FormatSpec& s = spec(recipe_spec(c.options.recipe).input);
    for (const auto* v : {&c.inputs.q, &c.inputs.k, &c.inputs.v})
      for (double x : *v) {
        EXPECT_FALSE(std::isinf(x));
        nan += std::isnan(x);
        subnormal += x != 0 && std::fabs(x) < s.min_normal() && c.options.q_descale == 1;
      }
  }
  EXPECT_GT(nan, 0u);
  EXPECT_GT(subnormal, 0u);
}

TEST(FuzzDecoder, EncodeDecodeRoundTrip) {
  const std::vector<WantedField> w = {{"recipe", 2}, {"tile_n", 4}, {"n_k.mode", 0}, {"n_k.size", 2}, {"n_k.tiles", 3},
                                      {"n_k.residue", 2}, {"mask.window", 2}, {"poison", 1}, {"poison.value", 2}};
  const auto bytes = encode_case(w, {1, 2, 3}, emulation_caps(), FuzzLimits::cpu());
  const FuzzCase c = decode_case(bytes, emulation_caps(), FuzzLimits::cpu());
  EXPECT_EQ(c.options.recipe, Recipe::fp16);
  EXPECT_EQ(c.options.tile_n, 8);
  EXPECT_EQ(c.problem.n_k, 3 * 8 + 7);
  EXPECT_EQ(c.problem.window, Window::causal(Align::top_left));
  EXPECT_EQ(c.poison.value, -std::numeric_limits<double>::infinity());
  EXPECT_THROW(encode_case({{"no.such.field", 1}}, {}, emulation_caps(), FuzzLimits::cpu()), std::invalid_argument);
  // Every field the decoder asked for is named in the trace.
  const auto trace = trace_fields(bytes, emulation_caps(), FuzzLimits::cpu());
  EXPECT_FALSE(trace.empty());
  EXPECT_EQ(trace.front().first, "recipe");
}

TEST(FuzzCorpus, Figure3DecodesToTheSeedExample) {
  const auto seeds = seeds::all();
  const auto it = std::find_if(seeds.begin(), seeds.end(), [](const auto& s) { return s.name == "seed-figure3-fp32"; });
  ASSERT_NE(it, seeds.end());
  const FuzzCase c = decode_case(encode_case(it->fields, it->values, emulation_caps(), FuzzLimits::cpu()),
                                 emulation_caps(), FuzzLimits::cpu());
  EXPECT_EQ(c.problem.n_q, 2);
  EXPECT_EQ(c.problem.n_k, 4);
  EXPECT_EQ(c.problem.d, 2);
  EXPECT_EQ(c.problem.dv, 2);
  EXPECT_EQ(c.problem.scale, 1.0);
  EXPECT_FALSE(c.problem.window.active());
  EXPECT_EQ(c.options.recipe, Recipe::fp32);
  EXPECT_EQ(c.options.tile_n, 2);
  EXPECT_EQ(c.inputs.q, (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(c.inputs.k, (std::vector<double>{1, 2, 2, 1, 3, 0, 2, 1}));
  EXPECT_EQ(c.inputs.v, (std::vector<double>{2, 0, 0, 2, 0, 2, 1, 1}));
  // And the emulation reproduces the figure's outputs.
  EmulatedKernel k;
  const auto out = k.run(c.problem, c.inputs, c.options);
  EXPECT_NEAR(out.o[0], 0.341, 5e-4);
  EXPECT_NEAR(out.o[1], 1.659, 5e-4);
  EXPECT_NEAR(out.o[2], 1.266, 5e-4);
  EXPECT_NEAR(out.o[3], 0.734, 5e-4);
}

TEST(FuzzCorpus, CommittedSeedsAreCurrent) {
  // If this fails after a decoder change: `build/tests/fuzz/fuzz_seed_corpus tests/corpus`.
  const std::filesystem::path dir = std::filesystem::path(FLASHCHECK_SOURCE_DIR) / "tests" / "corpus";
  for (const auto& s : seeds::all()) {
    std::ifstream f(dir / s.name, std::ios::binary);
    ASSERT_TRUE(f) << "missing " << (dir / s.name);
    const std::vector<uint8_t> committed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(committed, encode_case(s.fields, s.values, emulation_caps(), FuzzLimits::cpu())) << s.name;
  }
}

TEST(FuzzCorpus, EverySeedIsCleanOnTheEmulation) {
  EmulatedKernel k;
  for (const auto& s : seeds::all()) {
    const FuzzCase c = decode_case(encode_case(s.fields, s.values, emulation_caps(), FuzzLimits::cpu()),
                                   emulation_caps(), FuzzLimits::cpu());
    const CaseVerdict v = check_case(k, c);
    EXPECT_FALSE(v.skipped) << s.name << ": " << v.skip_reason;
    std::string f;
    for (const auto& x : v.findings) f += x + "\n";
    EXPECT_TRUE(v.clean()) << s.name << "\n" << describe(c) << f;
  }
}

TEST(FuzzOracle, FindsThePlantedTailBugOnTheCudnnSeed) {
  EmulatedKernel buggy(DeliberateBug::tail_not_masked);
  const auto seeds = seeds::all();
  const auto it = std::find_if(seeds.begin(), seeds.end(), [](const auto& s) { return s.name == "bug-cudnn-half-tile-padding"; });
  ASSERT_NE(it, seeds.end());
  const FuzzCase c = decode_case(encode_case(it->fields, it->values, emulation_caps(), FuzzLimits::cpu()),
                                 emulation_caps(), FuzzLimits::cpu());
  EXPECT_NE(c.problem.n_k % c.options.tile_n, 0);
  EXPECT_FALSE(check_case(buggy, c).clean()) << describe(c);
}

// A subject that leaks a NaN from one (batch, head) into every other: the isolation probe must see it.
class LeakyNeighbour : public Subject {
 public:
  Capabilities capabilities() const override { return inner.capabilities(); }
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override {
    SubjectOutput out = inner.run(p, in, o);
    bool any_nan = false;
    for (double x : in.k) any_nan |= std::isnan(x);
    if (any_nan) out.o.back() = std::numeric_limits<double>::quiet_NaN();
    return out;
  }
  EmulatedKernel inner;
};

TEST(FuzzOracle, IsolationProbeCatchesACorruptedNeighbour) {
  FuzzCase c = decode_case(encode_case({{"batch", 1}, {"n_k.mode", 1}, {"n_k.size", 3}, {"n_k.literal", 5}}, {1, 2, 3, 4, 5, 6, 7},
                                       emulation_caps(), FuzzLimits::cpu()),
                           emulation_caps(), FuzzLimits::cpu());
  c.poison = {'k', 0, std::numeric_limits<double>::quiet_NaN()};  // batch 0's key 0: batch 1 does not depend on it
  LeakyNeighbour leaky;
  const CaseVerdict v = check_case(leaky, c);
  EXPECT_GT(v.isolation_violations, 0u);
  EmulatedKernel k;
  EXPECT_TRUE(check_case(k, c).clean());
  c.poison.value = std::numeric_limits<double>::infinity();  // the emulation rejects inf: accepted
  EXPECT_TRUE(check_case(k, c).clean());
}

// A subject that turns NaN into 0 (a "safe" kernel that swallows NaN): a semantic violation.
class NanSwallower : public Subject {
 public:
  Capabilities capabilities() const override { return inner.capabilities(); }
  SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) override {
    SubjectOutput out = inner.run(p, in, o);
    for (double& x : out.o)
      if (std::isnan(x)) x = 0;
    return out;
  }
  EmulatedKernel inner;
};

TEST(FuzzOracle, SwallowedNaNIsAViolation) {
  const FuzzCase c = decode_case(encode_case({{"nan.count", 1}, {"nan[0].tensor", 2}}, {1, 2, 3, 4},
                                             emulation_caps(), FuzzLimits::cpu()),
                                 emulation_caps(), FuzzLimits::cpu());
  NanSwallower s;
  EXPECT_FALSE(check_case(s, c).clean()) << describe(c);
}

TEST(FuzzReproducer, CapsLineAndFileRoundTrip) {
  const Capabilities caps = gpu_like_caps();
  const auto back = caps_from_line(caps_to_line(caps));
  ASSERT_TRUE(back);
  EXPECT_EQ(caps_to_line(*back), caps_to_line(caps));
  EXPECT_TRUE(back->subtile_steps);  // budgets for its explicit tiles assume the narrowest listed Bc
  Reproducer r;
  r.subject = "cuda";
  r.limits = "gpu";
  r.output_headroom = false;
  r.caps = caps;
  r.bytes = {0, 10, 13, 255, '\n', 7};
  // A name of this process's own: two test runs on one machine must not share the file.
  const auto path = std::filesystem::temp_directory_path() / ("fc_fuzz_reproducer_test." + std::to_string(::getpid()) + ".bin");
  std::ofstream(path, std::ios::binary) << reproducer_bytes(r);
  const Reproducer r2 = read_reproducer(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(r2.subject, "cuda");
  EXPECT_EQ(r2.limits, "gpu");
  ASSERT_TRUE(r2.caps);
  EXPECT_EQ(caps_to_line(*r2.caps), caps_to_line(caps));
  EXPECT_EQ(r2.bytes, r.bytes);
  EXPECT_TRUE(r2.score_guard);
  EXPECT_FALSE(r2.output_headroom);
  std::filesystem::remove(path);
}

TEST(FuzzReproducer, RegressionTestNamesEveryField) {
  CaseGenerator g(6);
  const FuzzCase c = decode_case(g.next_bytes(), emulation_caps(), FuzzLimits::cpu());
  const std::string t = to_regression_test(c, "Example", "emulation");
  EXPECT_NE(t.find("TEST(FuzzRegression, Example)"), std::string::npos);
  EXPECT_NE(t.find("c.inputs.v = {"), std::string::npos);
  EXPECT_NE(t.find("make_subject(\"emulation\")"), std::string::npos);
}

}  // namespace
}  // namespace fc::fuzz
