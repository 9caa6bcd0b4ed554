// Exact attention in MPFR multiprecision (reference/multiprecision.h), the yardstick that the float64
// reference's certificate is tested against. Apart from exact_attention.h so that only the translation
// units that use it parse Boost.Multiprecision (a few seconds of compile time each).
#pragma once

#include "reference/exact_attention.h"
#include "reference/multiprecision.h"

namespace fc {

// The same semantics and input checks as exact_attention_f64 (exact_attention.h).
AttentionOutputs<mp_real> exact_attention_mp(const Problem& p, const AttentionInputs& in);

}  // namespace fc
