// The order in which kernel v2's persistent blocks draw their work tiles (one block of query rows of one
// (batch, head x split)): which tile the id-th draw is. Plain C++ for the device's scheduler
// (kernels/cuda/tile_scheduler.h) and the host's test of the order (tests/work_tile_order_test.cpp).
//
// Without a mask that shortens rows, every row block of a head costs the same, and the row block is the
// fastest index: blocks running at the same time share a head's K and V in L2. Under a causal or window
// mask the row blocks of a head differ in length (place_block maps row block 0 to the longest), and a
// head's longest tile drawn among the last left the other SMs idle while it ran. There, as in
// FlashAttention-3's DynamicPersistentTileScheduler, the heads are grouped into sections whose K and V fit
// in kSectionL2Bytes of L2, and within a section the row block is the slower index: every head of the
// section has its longest tile drawn before any head's shorter one, and the last tiles drawn are the
// shortest of the last section.
#pragma once

#include "reference/host_device.h"

namespace fc::tiles {

// The L2 that one section's K and V may take (of the H200's 50 MB), FlashAttention-3's figure.
inline constexpr long long kSectionL2Bytes = 32ll << 20;

// Heads (batch, head x split pairs) per section, for the host to pass to the kernel (FwdParams): 1 without a
// shortening mask (sections of one head: the row block fastest), else the largest divisor of `heads` whose
// K and V of n_k keys at head dim d in 16-bit elements fit in kSectionL2Bytes (at least 1), so that every
// section is whole and the device's formula needs no bound.
constexpr int work_tile_section(bool shortening_mask, long long n_k, int d, long long heads) {
  if (!shortening_mask || heads < 1) return 1;
  const long long kv_bytes = 2 * n_k * d * 2;
  long long s = kv_bytes > 0 ? kSectionL2Bytes / kv_bytes : heads;
  s = s < 1 ? 1 : (s > heads ? heads : s);
  while (heads % s != 0) --s;
  return static_cast<int>(s);
}

struct WorkTilePlace {
  unsigned row_block;  // 0 = the head's first row block in place_block's order
  unsigned head;       // batch * (heads x splits) + head x split
};
// The id-th work tile (ids below rows x heads < 2^32), with `section` from work_tile_section. One formula
// for both orders, without a branch: the producer that runs it has few registers (24 at d = 256).
FC_HOST_DEVICE constexpr WorkTilePlace work_tile_at(unsigned id, unsigned rows, unsigned section) {
  const unsigned per_section = section * rows, sec = id / per_section, r = id - sec * per_section;
  const unsigned rb = r / section;
  return {rb, sec * section + (r - rb * section)};
}

}  // namespace fc::tiles
