// Fuzz cases, decoded: bytes -> (Problem, RunOptions, AttentionInputs). The oracle that checks a case
// is properties/fuzz_check.h, the printers and reproducer files properties/fuzz_reproduce.h. Shared by
// the libFuzzer target (tests/fuzz/attention_fuzzer.cpp), which decodes libFuzzer's bytes, and the
// `flashcheck fuzz` driver (tools/commands/fuzz_command.cpp), which decodes random bytes from
// CaseGenerator. docs/fuzzing.md describes the layout.
//
// Layout (same convention as libFuzzer's FuzzedDataProvider): every structural choice (shape, tiles,
// mask, recipe, value modes, injected NaN, the isolation probe) is an integer read from the END of
// the input, one to four bytes per choice; the tensor values are read from the FRONT. Mutating a tail
// byte changes the structure, a front byte one value. Running out of tail bytes reads 0 (the first
// option of every choice), so the empty input is a valid 1x1 problem; a value stream shorter than the
// tensors is reused cyclically (scrambled after the first pass).
//
// Infinite inputs: the reference rejects +-inf (docs/semantics.md), so the decoder never puts an
// infinity into a case it checks against the reference: a raw infinity bit pattern becomes NaN (when the
// case allows non-finite raw values) or a finite value (its top exponent bit cleared). Infinity is
// still fuzzed, by the isolation probe below, which needs no reference: +-inf (or NaN) written into one
// element must leave every output that does not depend on that element bit-identical.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/subject.h"

namespace fc::fuzz {

// How large decoded problems may get. The decoder biases every length to the tile grid of the tile it
// chose (t * Bc + {0, 1, Bc-1, Bc/2, Bc/2+1, random}) and stays inside these limits.
struct FuzzLimits {
  int max_batch = 2;
  int max_heads_kv = 2;
  int max_group = 2;       // heads_q / heads_kv (GQA), when the subject has gqa
  int64_t max_n_q = 48;
  int64_t max_n_k = 160;
  int max_d = 16;          // when the subject accepts any head dim
  int max_tile = 32;       // when the subject accepts any tile (the emulation)
  double max_work = 2e5;   // B * Hq * Nq * Nk * (d + dv), the cost of one reference evaluation
  double max_elements = 4e4;  // Q + K + V elements, the cost of decoding and moving the inputs
  std::vector<int64_t> special_lengths;  // lengths from real bug reports, tried when within the limits
  bool score_guard = true;      // |scale| d max|Q| max|K| <= 2^20 (fuzz_decode.cpp, docs/fuzzing.md)
  bool output_headroom = true;  // |V| <= max_finite(output) / 2

  static FuzzLimits cpu();  // small problems, thousands of cases per second (libFuzzer)
  static FuzzLimits gpu();  // up to 4224 queries and 65537 keys, ~1e8 work per case
  static std::optional<FuzzLimits> by_name(std::string_view name);  // "cpu" | "gpu"
};

// One element overwritten for the isolation probe (bad input never corrupts neighbours).
struct Poison {
  char tensor = 0;  // 'q', 'k', 'v'; 0 = no probe
  size_t index = 0; // flat index into the tensor
  double value = 0; // NaN, +inf or -inf
};

struct FuzzCase {
  Problem problem;
  RunOptions options;
  AttentionInputs inputs;   // finite or NaN; never inf
  Poison poison;
  std::string values_note;  // how the values were made (value modes), for describe()
};

// The decoder's source of choices. take(n) returns a value in [0, n); n == 0 or 1 returns 0 without
// reading. The byte source reads from the tail of the input; the recording source (for the seed corpus)
// returns wanted values by field name and records the bytes that make the byte source return them.
class Choices {
 public:
  virtual ~Choices() = default;
  virtual uint64_t take(uint64_t n, std::string_view field) = 0;
  virtual uint8_t value_byte(size_t position) = 0;  // the front stream, position = byte number
};

// Bytes per choice of n options: 1 up to 256, 2 up to 65536, 3 up to 2^24, else 4.
int bytes_for(uint64_t n);

// The subject features the decoder may use (from Capabilities; a reproducer stores them in its
// header so it can be explained on a machine that cannot open the subject).
std::string caps_to_line(const Capabilities& caps);
std::optional<Capabilities> caps_from_line(std::string_view line);

FuzzCase decode_case(Choices& c, const Capabilities& caps, const FuzzLimits& lim);
FuzzCase decode_case(std::span<const uint8_t> bytes, const Capabilities& caps, const FuzzLimits& lim);

// Seed encoding: decodes with `wanted` (field name -> value, every other field 0) and returns the bytes
// that decode to the same case. Value bytes go to the front stream verbatim.
struct WantedField {
  std::string field;
  uint64_t value;
};
std::vector<uint8_t> encode_case(const std::vector<WantedField>& wanted, const std::vector<uint8_t>& value_bytes,
                                 const Capabilities& caps, const FuzzLimits& lim);
// The field names the decoder asks for, in order, with the number of options (for documentation and
// for the seed generator).
std::vector<std::pair<std::string, uint64_t>> trace_fields(std::span<const uint8_t> bytes, const Capabilities& caps,
                                                           const FuzzLimits& lim);

// The seed of case `index` of a campaign with seed `seed`: so that any case is reproducible from the two
// alone (flashcheck fuzz, and fuzz --large).
uint64_t case_seed(uint64_t seed, uint64_t index);

// Random bytes for the GPU driver: a tail of structural choices and a front value stream of random
// length. Deterministic in its seed.
class CaseGenerator {
 public:
  explicit CaseGenerator(uint64_t seed) : state_(seed ? seed : 0x9E3779B97F4A7C15ull) {}
  std::vector<uint8_t> next_bytes();
 private:
  uint64_t next();
  uint64_t state_;
};

}  // namespace fc::fuzz
