// RapidCheck generators for attention cases: a case is a Problem, RunOptions, a value distribution,
// a seed and a few hostile-value edits. Generators are shaped by a subject's Capabilities (only
// cases the subject claims to run are generated) and by a CaseSpace (what a property needs: a mask
// with fully masked rows, no mask at all, NaN inputs, ...).
//
// Shapes are biased toward tile boundaries (k*Bc-1, k*Bc, k*Bc+1, 1, below one tile, Nq != Nk),
// odd head dims and the kernels' wide ones (128..512), GQA group ratios up to 16, varlen batches with
// NaN in the padding past each key length, and long rows (one dimension past 2^15 or 2^16 with the
// other tiny). Every choice is one RapidCheck pick that shrinks toward the simplest value (first element
// of a list, the low end of a range), so a counterexample shrinks to a small readable problem such as
// "Nq=1 Nk=5 d=4 Bc=4 mask=none".
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "kernels/subject.h"
#include "properties/distributions.h"
#include "reference/exact_attention.h"
#include "reference/problem.h"
#include "reference/recipe.h"

namespace fc {

// Values built from bit patterns, which arbitrary<double> never yields: NaN (with a payload), -0,
// the input format's smallest subnormal and other subnormals, its smallest normal, and a large value.
// +-inf is not generated: the reference rejects it (docs/semantics.md).
enum class Hostile : uint8_t { nan, negative_zero, min_subnormal, subnormal, min_normal, large };
std::string_view hostile_name(Hostile h);

struct HostileEdit {
  char tensor = 'q';      // 'q', 'k' or 'v'
  uint64_t position = 0;  // reduced modulo the tensor's size
  Hostile kind = Hostile::nan;
  uint32_t bits = 0;      // payload: NaN mantissa bits / subnormal multiple / sign
};

enum class MaskKind : uint8_t {
  none,
  causal_bottom_right,
  causal_top_left,
  window,
  key_lengths,  // varlen: per-batch key lengths, zero allowed
  dense,        // random dense mask, with fully masked rows and tiles
  causal_and_key_lengths,
};
std::string_view mask_kind_name(MaskKind m);

// What a property asks of the generated cases.
struct CaseSpace {
  int64_t max_len = 300;        // Nq, Nk <= max_len (the CPU emulation is slow on huge shapes)
  int64_t long_len = 65537;     // long rows: one of Nq, Nk up to this (2^15 - 1 .. 2^16 + 1) with the other
                                // at most 8 and d <= 2 (index widths: xformers #719); 0 = never
  int max_d = 64;               // d, dv <= max_d where the subject takes any head dim, ...
  int max_wide_d = 512;         // ... or one of the kernels' wide head dims up to this, with short rows
  int max_batch = 3;
  int max_heads_kv = 2;
  size_t max_work = 3'000'000;  // B * Hq * Nq * Nk * (d + dv) cap; batch and heads shrink first
  bool masks = true;            // false: no mask of any kind (key permutation)
  bool need_masked_key = false; // every case has a row with at least one masked key
  bool need_empty_row = false;  // every case has a row with no visible key
  int nan_weight = 0;           // relative weight of NaN among hostile edits (0 = never)
  bool need_nan = false;        // every case has at least one NaN edit
  bool hostile = true;          // hostile edits at all
  bool vary_options = true;     // splits, FA-1, l from fp32 P, two-level accumulation
};

struct GeneratedCase {
  Problem problem;
  RunOptions options;  // descales are filled in by materialize()
  Distribution distribution = Distribution::normal;
  uint64_t seed = 0;
  std::vector<HostileEdit> edits;
  MaskKind mask = MaskKind::none;
  bool nan_padding = false;  // K and V past each batch's key length are NaN (an uninitialised KV cache)
  uint64_t aux = 0;  // a property's own choices (the other tile size, the permutation, ...); shrinks to 0

  // The inputs, rounded to the recipe's input format; writes the fp8 descales into *options.
  AttentionInputs materialize(RunOptions* options_out) const;
  // One line, e.g. "fp16 B=1 Hq=1 Hkv=1 Nq=1 Nk=5 d=4 dv=4 ... Br=16 Bc=4 splits=1 fa2 dist=normal seed=0".
  std::string describe() const;
  // The number of attention scores, B * Hq * Nq * Nk: the "size" of a shrunk counterexample.
  size_t scores() const;
};

std::ostream& operator<<(std::ostream& os, const GeneratedCase& c);

// Tile sizes a subject accepts: any (Br, Bc) for the emulation, its instantiated list otherwise.
rc::Gen<TileSize> gen_tile(const Capabilities& caps, Recipe r);
// A length biased to the tile boundaries of bc: k*bc-1, k*bc, k*bc+1, 1, below one tile, free.
rc::Gen<int64_t> gen_length(int bc, int64_t max_len);
rc::Gen<HostileEdit> gen_hostile_edit(int nan_weight);

// The whole case, restricted to what caps claims to support.
rc::Gen<GeneratedCase> gen_case(const Capabilities& caps, const CaseSpace& space = {});

}  // namespace fc
