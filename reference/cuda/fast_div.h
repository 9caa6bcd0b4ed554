// x / d for a divisor d that is fixed for a launch (the budget's softmax step and its block width), as a
// multiply-high, an add and a shift: an integer division by a run-time value is about 20 instructions on
// the GPU, and 64-bit operands call a subroutine. In the budget's kernels each key chunk divided twice
// (its tile and its lanes' blocks): Nsight Compute's source counters had those divisions at about a
// quarter of the weights kernel's instructions and a tenth of the sums kernel's ((1, 4, 4096, 128) bf16,
// H200). The multiplier is made once on the host (Granlund and Montgomery, "Division by invariant
// integers using multiplication", PLDI 1994): with s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1,
// x / d = (mulhi(x, m) + x) >> s for every 0 <= x < 2^31 (the sum then stays below 2^32).
// tests/gpu/fast_div_test.cpp checks it against the division on the host.
#pragma once

#include <cstdint>

#include "reference/host_device.h"

namespace fc::gpu::detail {

struct FastDiv {
  uint32_t d, m, s;
};

// d >= 1.
inline FastDiv make_fast_div(uint32_t d) {
  uint32_t s = 0;
  while ((uint64_t(1) << s) < d) ++s;
  const uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << s) - d)) / d + 1;
  return FastDiv{d, uint32_t(m), s};
}

// x / f.d for 0 <= x < 2^31.
FC_HOST_DEVICE inline uint32_t fast_div(const FastDiv& f, uint32_t x) {
#if defined(__CUDA_ARCH__)
  const uint32_t hi = __umulhi(x, f.m);
#else
  const uint32_t hi = uint32_t((uint64_t(x) * f.m) >> 32);
#endif
  return (hi + x) >> f.s;
}

}  // namespace fc::gpu::detail
