// The single definition of visibility, in plain numbers, so that host code (Problem::visible) and the GPU
// oracle (reference/cuda/) share it: key j of a batch whose key length is len, from query i of n_q, under a
// window [left, right] around the aligned diagonal (negative = unbounded; window_active false = no
// window) and the dense mask's bit. C++17, so that device code includes it.
#pragma once

#include <cstdint>

#include "reference/host_device.h"

namespace fc {

FC_HOST_DEVICE inline bool key_visible(int64_t i, int64_t j, int64_t n_q, int64_t len, bool window_active,
                                       int64_t left, int64_t right, bool bottom_right, bool dense_bit) {
  if (j >= len || !dense_bit) return false;
  if (window_active) {
    const int64_t diag = i + (bottom_right ? len - n_q : 0);
    if (left >= 0 && j < diag - left) return false;
    if (right >= 0 && j > diag + right) return false;
  }
  return true;
}

}  // namespace fc
