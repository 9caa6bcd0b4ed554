// Kernel layer: which work tiles (one block of query rows of one (batch, head, split)) a block of kernel v2
// computes. Without a causal or window mask the work tiles are numbered with the row block fastest,
// id = (b * heads_q * splits + head x split) * row_blocks + bx, the order of v1's grid: blocks running at
// the same time share a head's K and V in L2; place_block (mask.h) maps bx = 0 to the last row block, the
// longest under a causal mask. The same id numbers the redo flags (value_nan_guard.h).
//   dynamic:       a grid of (at most) one block per SM; block k starts with id k, then takes the next id
//                  of a global counter (p.tile_counter, zeroed before the launch) whenever it finishes one,
//                  as the hardware's block scheduler would: a static round robin left SMs idle under a
//                  causal mask, whose tiles differ in cost (bf16 d = 128, N = 16k causal: 396 TFLOP/s
//                  against 568 with one block per tile, H200).
//   redo list:     the guarded redo's grid of (at most) one block per SM walks the redo list
//                  (FwdParams::redo_list) round robin: block k takes its entries k, k + grid, ...; a block
//                  with no entry leaves at once.
//   order:         kernels/work_tile_order.h: under a causal or window mask, heads in L2-sized sections with
//                  each section's longest tiles first.
// The producer draws the ids and hands them to the consumers through a 2-slot ring in shared memory.
#pragma once

#include "fwd_params.h"
#include "mask.h"
#include "kernels/work_tile_order.h"
#include "work_tile_count.h"

namespace flashcheck::cuda {

struct WorkTiles {
  long long total;
  bool redo;
  int row_blocks, heads_splits;

  __device__ static WorkTiles make(const FwdParams& p, int block_m, bool redo) {
    WorkTiles w{};
    w.row_blocks = (p.n_q + block_m - 1) / block_m;
    w.heads_splits = p.heads_q * p.num_splits;
    w.total = work_tile_count(p, block_m);
    w.redo = redo;
    return w;
  }
  // redo: this block has no entry of the list. (The count is read where it is used, not kept: held from
  // the kernel's start into the producer's few registers, it spilled.)
  __device__ bool idle(const FwdParams& p) const { return redo && blockIdx.x >= p.redo_list[0]; }
  // This block's w-th id (w = 0: its first); >= total when there is none.
  __device__ long long next(const FwdParams& p, int w) const {
    if (redo) {  // 32-bit: the list holds fewer than 2^31 ids (the runner refuses more work tiles)
      const unsigned k = blockIdx.x + static_cast<unsigned>(w) * gridDim.x;
      return k < p.redo_list[0] ? static_cast<long long>(p.redo_list[1 + k]) : total;
    }
    if (w == 0) return blockIdx.x;
    // The grid's size read here, not hoisted out of the producer's loop: held there, it was the register
    // that spilled at d = 256 (24 registers).
    unsigned grid;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(grid));
    return grid + static_cast<long long>(atomicAdd(p.tile_counter, 1u));
  }
  template <int kBlockM, int kBlockN>
  __device__ BlockPlace place(const FwdParams& p, long long id) const {
    // 32-bit: the runner refuses 2^31 work tiles or more (a Q of at least 2^38 elements), and a 64-bit
    // division is a call of dozens of instructions and registers in the producer's few.
    const unsigned hs = static_cast<unsigned>(heads_splits);
    const fc::tiles::WorkTilePlace at = fc::tiles::work_tile_at(
        static_cast<unsigned>(id), static_cast<unsigned>(row_blocks), static_cast<unsigned>(p.work_section));
    return place_block<kBlockM, kBlockN>(p, static_cast<int>(at.row_block), static_cast<int>(at.head % hs),
                                         static_cast<int>(at.head / hs));
  }
};

}  // namespace flashcheck::cuda
