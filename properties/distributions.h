// Value distributions for Q, K, V: the shapes of data that break attention kernels (outliers, huge
// score ranges, sinks, V with a large mean, a running max that grows at every tile, subnormals, scores
// below the finite "minus infinity" sentinels kernels use, a running max that grows late in one row).
// Plain seeded generators, shared by the property suite, the report and the fuzz driver, so a
// distribution means the same thing everywhere it is named.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "reference/exact_attention.h"
#include "reference/recipe.h"

namespace fc {

enum class Distribution {
  normal,             // N(0, 1) everywhere
  fa3_outliers,       // N(0, 1) + N(0, 100) * Bernoulli(0.001): the FlashAttention-3 paper's Table 3
  large_range,        // Q, K with sigma 6: scores span hundreds, most of P underflows
  equal_scores,       // every key the same: all scores of a row equal, P uniform
  sinks,              // a few keys aligned with every query: attention sinks dominate P
  v_mean,             // V ~ N(10, 1): a large channel mean, where summing l matters
  increasing_scores,  // scores grow with the key index: the running max changes at every tile
  subnormal,          // values down in the input format's subnormal range
  below_sentinel,     // every raw score q.k near -1e4..-6.5e4 (the finite "-inf" of FlashInfer, HF, fp16's
                      // lowest), most rows entirely below the sentinel, a few above it
  late_peak,          // scores N(0, 0.5^2), but every other row's score with the last key of the key range
                      // is 2 to 4: the running max grows late in one row, not in its neighbours
};

inline constexpr std::array<Distribution, 10> all_distributions = {
    Distribution::normal,    Distribution::fa3_outliers,   Distribution::large_range, Distribution::equal_scores,
    Distribution::sinks,     Distribution::v_mean,         Distribution::increasing_scores,
    Distribution::subnormal, Distribution::below_sentinel, Distribution::late_peak};

std::string_view distribution_name(Distribution d);
std::optional<Distribution> parse_distribution(std::string_view name);

// Inputs rounded (once) to the recipe's input format. For fp8 recipes each tensor gets a power-of-two
// per-tensor descale so that its largest magnitude fits the format; the returned values are the true
// values (stored * descale, exact), and the descales are written into *descales when given.
AttentionInputs make_inputs(const Problem& p, Distribution d, Recipe r, uint64_t seed, RunOptions* descales = nullptr);

// Writes NaN into `count` random elements of the chosen tensor ('q', 'k' or 'v'); returns the flat
// indices, so a test can say which outputs must change.
std::vector<size_t> inject_nan(AttentionInputs& in, char tensor, size_t count, uint64_t seed);

}  // namespace fc
