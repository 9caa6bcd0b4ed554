// The generators' large-shape mode: problems at the sizes kernels run in production (N up to 64k, B·Hq up
// to 64). Their inputs are made on the device and their outputs judged there by the GPU oracle
// (properties/large_case_run.h), since the small-shape path's host arrays of doubles (AttentionInputs)
// would be 4 GiB a tensor. This file draws the cases; it needs no GPU.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "kernels/subject.h"

namespace fc {

struct LargeCase {
  Problem problem;      // masks: none, causal either way, windows, key lengths; GQA groups
  RunOptions options;   // the recipe and its fp8 descales; tile, splits and conventions are the subject's
  uint64_t seed = 1;    // the inputs: element x of tensor t is a function of (seed, t, x) alone
  std::string describe() const;
};

struct LargeLimits {
  int64_t max_n = 65536;      // queries and keys per sequence
  int max_bh = 64;            // batch x query heads
  // B * Hq * Nq * Nk at most: the oracle's time grows with it (the H200 judges 4.3e9 in about 6 s at
  // d = 128), so a case's size is spent on one long sequence or on many heads, not both.
  double max_scores = 4.3e9;
};

// One case: the recipe from those the subject declares (fp16, bf16, e4m3, e5m2), a head dim it declares
// (at most 256, the oracle's), GQA groups of 1, 2, 4 or 8, then N log-uniform up to max_n (from 1024 up
// three times in four; Nq = Nk half the time) and B·Hq up to max_bh (from max_bh / 4 up half the time),
// shrunk together until the case fits max_scores; masks drawn evenly.
// Throws std::invalid_argument when the subject declares no recipe or head dim the mode can make.
LargeCase draw_large_case(std::mt19937_64& rng, const Capabilities& caps, const LargeLimits& limits = {});

}  // namespace fc
