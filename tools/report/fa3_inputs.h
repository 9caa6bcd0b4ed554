// The FA-3 paper measures RMSE against an FP64 reference on the *unrounded* inputs, so its error
// includes the rounding of Q, K, V to FP16/FP8. make_inputs() hands out inputs already rounded to the
// recipe's format; this file recovers the float64 draws behind them for the fa3_outliers distribution.
//
// It replays the generator of properties/distributions.cpp and checks the replay against it: the
// replay rounded to fp32 must equal make_inputs(..., Recipe::fp32, ...) bit for bit. If the generator
// changes and the replay no longer matches, the fp32-rounded inputs stand in (2^-24 relative, far
// below fp16's 2^-11), and the report says which source was used.
#pragma once

#include <string>

#include "properties/distributions.h"

namespace fc::report {

struct UnroundedInputs {
  AttentionInputs inputs;
  std::string source;  // "float64 generator replay" or "fp32-rounded inputs (replay mismatch)"
};

UnroundedInputs unrounded_fa3_inputs(const Problem& p, uint64_t seed);

}  // namespace fc::report
