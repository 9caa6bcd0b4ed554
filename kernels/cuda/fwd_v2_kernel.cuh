// Kernel layer: the fused attention forward, version 2, for Hopper (sm_90a): TMA, wgmma and warp
// specialisation, in FlashAttention-3's design. Version 1 (fwd_kernel.cuh: mma.sync, cp.async, every warp
// loads and computes) stays beside it as a subject and serves what v2 does not compile (fp32, fp8, head
// dims 32 and 96); v2 exists because Hopper's own instructions are what close v1's gap to cuDNN.
//
// A persistent grid of one block per SM walks the work tiles (128 query rows of one (batch, head, split);
// tile_scheduler.h), 3 warpgroups:
//   producer   (warpgroup 0, three threads): one draws the next work tile for the consumers and TMA-loads
//              each work tile's K tiles of Bc keys into a ring of buffers (4, 3, 2 stages at d = 64, 128,
//              256: tile_policy.h) that runs on across work tiles (the next tile's first keys load while
//              the last ones are computed and stored); one loads the V tiles into the V ring, one each
//              tile's Q. Each buffer has a "full" mbarrier (the copy engine counts its bytes) and an
//              "empty" one that the consumers' warps arrive on when they are done with it. The warpgroup
//              gives its registers away (setmaxnreg) and waits on the barriers.
//   consumers  (warpgroups 1 and 2, 64 rows each; the traits also take a 192-row tile, three of them,
//              with 160 registers each, which take turns to issue their products): per key tile,
//              load -> S = Q K^T (wgmma, Q and K from shared memory) -> mask -> online-softmax step ->
//              O += P~ V (wgmma, P~ from registers in mma.sync's A layout, V from shared memory,
//              transposed) -> release the stage; then the
//              epilogue: O stored from the accumulators, or at d = 256 written into shared memory over
//              the V ring and sent out by TMA stores, whose reads complete beside the next work tile's
//              first scores. A warp's accumulators are mma.sync's m16n8
//              fragments, so the mask, the softmax step, the rounding of P~, the normalisation and the
//              LSE are v1's own helpers (mask.h, softmax.h, normalise.h): one definition each.
//
// Numerics: the rounding points of softmax.h with one step per tile (step = Bc); wgmma's accumulation is
// mma.sync's bit for bit (measured, docs/error-analysis.md §1), and l from P~ runs on the tensor cores as
// in v1 (P~ times a ones column in the same k-steps as O's: at d <= 128 as O's last 8 columns, one wgmma of
// N = d + 8, at d = 256 an m64n8k16 wgmma per 16 keys), so the
// CPU emulation with tile 128 x Bc models v2 (cuda_regression_test compares them bit for bit where the
// SFU's exp2 is exact). NaN in V: as v1 (value_nan_guard.h), a block that may have leaked a NaN through a
// zero P flags itself, and the guarded instantiation of this kernel (kGuard) recomputes it with the same
// tiles and steps, so the result is bit for bit what it would have been, except that each NaN reaches
// exactly the rows that see its key.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "element.h"
#include "fwd_params.h"
#include "kernels/tile_policy.h"
#include "mask.h"
#include "normalise.h"
#include "softmax.h"
#include "tile_scheduler.h"
#include "tma.h"
#include "v2_timeline.h"
#include "value_nan_guard.h"
#include "wgmma.h"
#include "wgmma_ops.h"

namespace flashcheck::cuda {

// kBlockM: the tile's rows, 128 or a head dim's taller tile (tile_policy.h, v2_tall_tile).
template <typename Elem_, int kHeadDim_, int kBlockM_ = 128>
struct FwdV2Traits {
  using Elem = Elem_;
  using ET = ElementTraits<Elem>;
  using Wgmma = std::conditional_t<std::is_same_v<Elem, Fp16>, tile::WgmmaF16, tile::WgmmaBF16>;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr fc::tiles::TileShape kTile =
      kBlockM_ == 128 ? fc::tiles::v2_tile(kHeadDim) : fc::tiles::v2_tall_tile(kHeadDim);
  static_assert(kTile.m == kBlockM_, "a v2 tile of this height is not in tile_policy.h for this head dim");
  static_assert(kTile.m == 128 || kTile.m == 192, "two or three consumer warpgroups of 64 rows");
  static constexpr int kBlockM = kTile.m;
  static constexpr int kBlockN = kTile.n;
  static constexpr int kStages = kTile.stages;
  static constexpr int kConsumers = kBlockM / 64;            // consumer warpgroups
  static constexpr int kNThreads = 128 * (kConsumers + 1);   // + the producer warpgroup
  // Turns (FlashAttention-3's scheduler barrier): in the key loop a consumer warpgroup issues its S and P~ V
  // only in its turn and then passes the turn on, so that the others' softmax runs beside its products. With
  // three consumer warpgroups (the 192-row tile) that is 1.02-1.04x from 2,048 keys; with two it was
  // 0.98-0.99x at d = 128 and at d = 64 under a causal mask (H200, docs/cuda-kernel-v2.md), so two take none.
  static constexpr bool kTurns = kConsumers == 3;
  static constexpr int kPanels = kHeadDim / 64;              // 128-byte swizzle panels of 64 columns
  static constexpr int kPanelQ = kBlockM * 128;              // bytes of one panel of the Q tile
  static constexpr int kPanelKV = kBlockN * 128;
  static constexpr int kTileQ = kPanels * kPanelQ;
  static constexpr int kTileKV = kPanels * kPanelKV;         // one K or one V tile
  static constexpr int kNTilesS = kBlockN / 8;               // m16n8 fragments of S per warp
  static constexpr int kNTilesO = kHeadDim / 8;
  static constexpr int kKStepsS = kHeadDim / 16;             // k-steps of Q K^T
  static constexpr int kKStepsPV = kBlockN / 16;             // k-steps of P~ V
  // l = P~ . ones as O's last 8 columns (tile_policy.h, v2_l_in_v): each stage's V tile is followed by a
  // 64-column panel of ones, and P~ V is one wgmma of N = d + 8 per k-step instead of that and an m64n8.
  static constexpr bool kLInV = fc::tiles::v2_l_in_v(kHeadDim);
  static constexpr int kNTilesPV = kNTilesO + (kLInV ? 1 : 0);  // O's accumulators, with l's n-tile
  // Shared memory, from a 1024-byte aligned base (the swizzle atom): Q | K ring | V ring (with kLInV, each V
  // followed by its ones panel) | the m64n8's ones (without kLInV) | barriers.
  static constexpr int kOffQ = 0;
  static constexpr int kOffK = kOffQ + kTileQ;
  static constexpr int kOffV = kOffK + kStages * kTileKV;
  static constexpr int kStageV = kTileKV + (kLInV ? kPanelKV : 0);  // a V stage: its panels, then the ones
  static constexpr int kOffOnes = kOffV + kStages * kStageV;  // 16 keys x 8 columns of 1: l = P~ . ones
  static constexpr int kOffBars = kOffOnes + (kLInV ? 0 : 256);
  // O's tile (the normalised 16-bit output, in Q's layout) where the policy says so (tile_policy.h,
  // v2_o_through_smem): the epilogue writes it there, TMA stores copy it out (one per warpgroup and 64-column
  // panel), and the warpgroup goes on to its next work tile while they run. At d = 256 it overlays the V
  // ring: it is written once both warpgroups' last P~ V are done, and the V thread loads into the buffers it
  // covers only once those stores have read it (o_done). At d = 128 the two-stage ring leaves room for a
  // region of its own after the work slots (kOOverV false), and a warpgroup rewrites its half once its own
  // last store has read it. Global stores straight from the accumulators (128 a thread per tile at d = 256)
  // stalled the consumers on the memory pipe's queue: 15 % of the warps' samples at N = 512 (Nsight
  // Compute, H200); at d = 128 the separate region was 1.07x in geometric mean, up to 1.17x at N = 512.
  // Which of the two follows from the space the tile leaves (kOOverV, below).
  static constexpr bool kOThroughSmem = fc::tiles::v2_o_through_smem(kHeadDim, kBlockM);
  static constexpr int kOStages = (kTileQ + kTileKV - 1) / kTileKV;  // the V buffers O's tile covers
  // q_full, q_empty, k_full[], v_full[], k_empty[], v_empty[], work_full[2], work_empty[2], scratch_free,
  // and a word (o_done, not an mbarrier); then 2 work slots: a work id and its BlockPlace each.
  static constexpr int kNumBars = 2 + 4 * kStages + 6;
  static constexpr int kOffWork = kOffBars + 8 * kNumBars;
  static constexpr int kWorkSlotBytes = 8 + (sizeof(BlockPlace) + 7) / 8 * 8;
  // O's tile in a region of its own after the work slots where that fits in the block's 227 KiB, else over
  // the V ring.
  static constexpr int kOffOwnO = (kOffWork + 2 * kWorkSlotBytes + 1023) / 1024 * 1024;
  static constexpr bool kOOverV = kOThroughSmem && kOffOwnO + kTileQ + 1024 > 227 * 1024;
  static_assert(!kOOverV || kOStages <= kStages, "O's tile fits in the V ring");
  static_assert(!(kOOverV && kLInV), "O's tile would overlay the ones panels");
  static constexpr int kOffO = kOOverV ? kOffV : kOffOwnO;
  static constexpr int kSmemBytes =
      (kOThroughSmem && !kOOverV ? kOffO + kTileQ : kOffWork + 2 * kWorkSlotBytes) + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "the shared memory of one block");
  // Registers: setmaxnreg moves them within the block's allocation at launch (the 64K over its threads,
  // in steps of 8: 168 each for 384 threads, 128 for 512); 32 for the producer (it computes each work
  // tile's place), the rest to the consumers: 232 each for two consumer warpgroups, 160 for three. At
  // d = 256 the 128 x 80 tile's consumers need 240 (at 232 they spilled 120 bytes), so its producer has 24,
  // the most the block leaves it (a producer of 32 with two consumers of 240 asks for more than the block
  // holds: setmaxnreg.inc then waits for ever, as a first build did on the H200); at 24 it spills nothing
  // only with the place in 32-bit arithmetic and read back from its work slot for the loads.
  static constexpr int kLaunchRegs = (65536 / kNThreads) / 8 * 8;
  static constexpr int kProducerRegs = kHeadDim == 256 ? 24 : 32;
  static constexpr int kConsumerRegs = ((kLaunchRegs * kNThreads - kProducerRegs * 128) / (128 * kConsumers)) / 8 * 8;
  static_assert(kProducerRegs * 128 + kConsumerRegs * 128 * kConsumers <= kLaunchRegs * kNThreads,
                "setmaxnreg cannot hand out more registers than the block was launched with");
  static_assert(kHeadDim % 64 == 0 && kBlockN % 16 == 0);
  // The NaN guard's view of a block (value_nan_guard.h): its threads are the consumer warpgroups.
  struct Guard {
    using ET = FwdV2Traits::ET;
    static constexpr int kBlockM = FwdV2Traits::kBlockM, kBlockN = FwdV2Traits::kBlockN;
    static constexpr int kHeadDim = FwdV2Traits::kHeadDim, kNTilesO = FwdV2Traits::kNTilesO;
    static constexpr int kNThreads = 128 * FwdV2Traits::kConsumers;
  };
  static_assert(kTileKV >= (kBlockN + kBlockM) * kHeadDim / 8, "the NaN maps fit in one K stage");
};

namespace v2 {

// Named barriers (0 is __syncthreads): every consumer thread (the guarded redo's V cleaning and NaN maps);
// O's tile written (kOThroughSmem); one per consumer warpgroup before its O stores; one per consumer
// warpgroup for its turn (kTurns).
enum NamedBarrier : int { kBarConsumers = 1, kBarOTile = 2, kBarOStore = 3, kBarTurn = 6 };

// The shared-memory addresses of a block's tiles and barriers.
template <typename Tr>
struct Smem {
  uint32_t base;
  __device__ __forceinline__ uint32_t q() const { return base + Tr::kOffQ; }
  __device__ __forceinline__ uint32_t k(int stage) const { return base + Tr::kOffK + stage * Tr::kTileKV; }
  __device__ __forceinline__ uint32_t v(int stage) const { return base + Tr::kOffV + stage * Tr::kStageV; }
  __device__ __forceinline__ uint32_t ones() const { return base + Tr::kOffOnes; }
  __device__ __forceinline__ uint32_t bar(int i) const { return base + Tr::kOffBars + 8 * i; }
  __device__ __forceinline__ uint32_t q_full() const { return bar(0); }
  __device__ __forceinline__ uint32_t q_empty() const { return bar(1); }
  __device__ __forceinline__ uint32_t k_full(int s) const { return bar(2 + s); }
  __device__ __forceinline__ uint32_t v_full(int s) const { return bar(2 + Tr::kStages + s); }
  __device__ __forceinline__ uint32_t k_empty(int s) const { return bar(2 + 2 * Tr::kStages + s); }
  __device__ __forceinline__ uint32_t v_empty(int s) const { return bar(2 + 3 * Tr::kStages + s); }
  __device__ __forceinline__ uint32_t work_full(int s) const { return bar(2 + 4 * Tr::kStages + s); }
  __device__ __forceinline__ uint32_t work_empty(int s) const { return bar(4 + 4 * Tr::kStages + s); }
  // The guarded redo: the consumers are done with the K ring as the NaN maps' scratch (value_nan_guard.h).
  __device__ __forceinline__ uint32_t scratch_free() const { return bar(6 + 4 * Tr::kStages); }
  // The count of work tiles whose O stores have read O's tile, per consumer warpgroup: a V may land in the
  // buffers O's tile covers once every earlier tile's have. A count, not an mbarrier's phase: the V thread
  // may run several tiles ahead of the consumers and wait only in some tiles (parities would alias).
  __device__ __forceinline__ uint32_t o_done() const { return bar(7 + 4 * Tr::kStages); }
  // O's tile: panel pn (64 columns) of consumer warpgroup wg's 64 rows, as one TMA store box.
  __device__ __forceinline__ uint32_t o_box(int pn, int wg) const {
    return base + Tr::kOffO + pn * Tr::kPanelQ + wg * 64 * 128;
  }
  __device__ __forceinline__ uint32_t work_id(int s) const { return base + Tr::kOffWork + Tr::kWorkSlotBytes * s; }
  __device__ __forceinline__ uint32_t work_place(int s) const { return work_id(s) + 8; }
};

// One tile of Q, K or V from row row0 of head h, batch b: its 64-column panels, each one TMA box (the
// descriptor's box rows), completing on `full`, which expects the tile's bytes.
template <typename Tr>
__device__ __forceinline__ void load_tile(uint32_t dst, const CUtensorMap* map, uint32_t full, int bytes,
                                          int panel_bytes, int row0, int h, int b) {
  tile::mbar_arrive_expect_tx(full, bytes);
#pragma unroll
  for (int pn = 0; pn < Tr::kPanels; ++pn) tile::tma_load_4d(dst + pn * panel_bytes, map, full, pn * 64, row0, h, b);
}

// The K (kV = false) or V tiles of one work tile, from ring position i on (advanced past them): each load
// behind the consumers' release of its buffer's previous use.
// kWaitO (V, with O's tile over the V ring: consume): a V of work slot w's tile that lands in a buffer O's
// tile covers first waits until the earlier tiles' O stores have read it (o_done).
template <typename Tr, bool kV, bool kWaitO = false>
__device__ __forceinline__ void produce_ring(const FwdParams& p, const Smem<Tr>& sm, const CUtensorMap* tm,
                                             int nb_begin, int nb_end, int h_kv, int b, int& i, int w = 0) {
#pragma unroll 1
  for (int nb = nb_begin; nb < nb_end; ++nb, ++i) {
    const int stage = i % Tr::kStages;
    // Use j = i / kStages of a stage waits for the consumers' release of use j - 1.
    if (i >= Tr::kStages) tile::mbar_wait(kV ? sm.v_empty(stage) : sm.k_empty(stage), ((i / Tr::kStages) - 1) & 1);
    if (kWaitO && p.o_tma && w > 0 && stage < Tr::kOStages) tile::wait_count(sm.o_done(), Tr::kConsumers * w);
    load_tile<Tr>(kV ? sm.v(stage) : sm.k(stage), tm, kV ? sm.v_full(stage) : sm.k_full(stage), Tr::kTileKV,
                  Tr::kPanelKV, nb * Tr::kBlockN, h_kv, b);
  }
}

// The producer: draws each work tile and loads its K tiles (K is released as soon as the tile's scores are
// in registers). Q and V have a thread each (produce_q, produce_v), which read the work slots as the
// consumers do: behind one thread's waits for the buffers, the next tile's first K and V loads waited
// until the current tile's last scores were in (Q on a thread of its own: 4 % faster at d = 64, the same at
// 128 and 256; docs/cuda-kernel-v2.md), and V's wait for O's tile (produce_v) held up the next K.
template <typename Tr>
__device__ __forceinline__ void produce(const FwdParams& p, const Smem<Tr>& sm, unsigned char* smem,
                                        const CUtensorMap* tm_k, const WorkTiles& work) {
  int i = 0;
#pragma unroll 1
  for (unsigned w = 0;; ++w) {
    // Hand the next work id and its place to the consumers and the Q and V threads (slot w % 2, free once
    // they have read its use w - 2). The place (head, rows, key tiles, mask summary) takes run-time divisions,
    // a few hundred instructions of dependent integer work: here once per tile, ahead of the
    // consumers, instead of in each of their 256 threads between one tile's epilogue and the next tile's
    // first scores.
    const long long id = work.next(p, w);
    const bool last = id >= work.total;
    if (w >= 2) tile::mbar_wait(sm.work_empty(w % 2), ((w / 2) - 1) & 1);
    asm volatile("st.shared.u64 [%0], %1;\n" ::"r"(sm.work_id(w % 2)), "l"(id) : "memory");
    auto* slot = reinterpret_cast<BlockPlace*>(smem + (sm.work_place(w % 2) - sm.base));
    if (!last) *slot = work.place<Tr::kBlockM, Tr::kBlockN>(p, id);
    tile::mbar_arrive(sm.work_full(w % 2));  // release: the readers' wait sees the id and the place
    if (last) break;
    // The guarded redo's consumers use the K ring as scratch after a tile's products: its next K waits
    // until they are done.
    if (work.redo && w > 0) tile::mbar_wait(sm.scratch_free(), (w - 1) & 1);
    produce_ring<Tr, false>(p, sm, tm_k, slot->nb_begin, slot->nb_end, slot->h_kv, slot->b, i);
  }
}


// Takes work slot w: the tile's id and place; false when the block has no more work. Each reader releases
// the slot once it has read it: a consumer warp with one arrival (kWarp), the Q and V threads their own.
template <typename Tr, bool kWarp>
__device__ __forceinline__ bool take_work(const Smem<Tr>& sm, const unsigned char* smem, const WorkTiles& work, int w,
                                          long long& id, BlockPlace& bp) {
  tile::mbar_wait(sm.work_full(w % 2), (w / 2) & 1);
  asm volatile("ld.shared.u64 %0, [%1];\n" : "=l"(id) : "r"(sm.work_id(w % 2)) : "memory");
  // The consumers' copy starts from an empty place: without it, the guarded d = 256 kernel's consumers
  // spilled 4 bytes (ptxas, CUDA 13.0).
  if constexpr (kWarp) bp = BlockPlace{};
  if (id < work.total) bp = *reinterpret_cast<const BlockPlace*>(smem + (sm.work_place(w % 2) - sm.base));
  if constexpr (kWarp) {
    __syncwarp();  // the slot is read before it is released
    if (threadIdx.x % 32 == 0) tile::mbar_arrive(sm.work_empty(w % 2));
  } else {
    tile::mbar_arrive(sm.work_empty(w % 2));
  }
  return id < work.total;
}

// The Q thread: per work tile, Q into its buffer once the consumers are done with the previous tile's. The
// tile is drawn a few key tiles before the consumers finish the previous one, so Q is first fetched into
// L2 at once; the load into shared memory, which has to wait for the buffer, then reads L2.
template <typename Tr>
__device__ __forceinline__ void produce_q(const Smem<Tr>& sm, const unsigned char* smem, const CUtensorMap* tm_q,
                                          const WorkTiles& work) {
  long long id;
  BlockPlace bp;
#pragma unroll 1
  for (int w = 0; take_work<Tr, false>(sm, smem, work, w, id, bp); ++w) {
#pragma unroll
    for (int pn = 0; pn < Tr::kPanels; ++pn) tile::tma_prefetch_l2_4d(tm_q, pn * 64, bp.m0, bp.h, bp.b);
    if (w > 0) tile::mbar_wait(sm.q_empty(), (w - 1) & 1);
    load_tile<Tr>(sm.q(), tm_q, sm.q_full(), Tr::kTileQ, Tr::kPanelQ, bp.m0, bp.h, bp.b);
  }
}

// The V thread: per work tile, its V tiles. kWaitO (O's tile over the V ring, with p.o_tma): those that land
// in the buffers O's tile covers wait for the earlier tiles' O stores (produce_ring).
template <typename Tr, bool kWaitO>
__device__ __forceinline__ void produce_v(const FwdParams& p, const Smem<Tr>& sm, const unsigned char* smem,
                                          const CUtensorMap* tm_v, const WorkTiles& work) {
  long long id;
  BlockPlace bp;
  int i = 0;
#pragma unroll 1
  for (int w = 0; take_work<Tr, false>(sm, smem, work, w, id, bp); ++w) {
    produce_ring<Tr, true, kWaitO>(p, sm, tm_v, bp.nb_begin, bp.nb_end, bp.h_kv, bp.b, i, w);
  }
}

// Issues S = Q K^T for this warpgroup's 64 rows and the stage's Bc keys as one wgmma group; the caller
// waits for it. The first k-step does not read S (scale-d = 0) instead of adding a zeroed S as v1 does,
// which saves 64 register moves per tile: in the tensor-core model (docs/error-analysis.md §1) a zero
// addend changes nothing, and SubnormalOperandsAlignAtTheSmallestNormal_V2 (cuda_regression_test) checks
// the scores' bits against the model where it could (bf16 products below 2^-126).
template <typename Tr>
__device__ __forceinline__ void issue_qk(float (&s)[Tr::kNTilesS][4], const Smem<Tr>& sm, int stage, int wg) {
  tile::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < Tr::kKStepsS; ++ks) {
    // k-step ks: panel ks / 4, 32 bytes per k-step inside the 128-byte swizzled row.
    const uint32_t off = (ks % 4) * 32;
    const uint64_t da = tile::smem_descriptor_sw128(sm.q() + (ks / 4) * Tr::kPanelQ + wg * 64 * 128 + off, 16, 1024);
    const uint64_t db = tile::smem_descriptor_sw128(sm.k(stage) + (ks / 4) * Tr::kPanelKV + off, 16, 1024);
    tile::wgmma_ss(typename Tr::Wgmma{}, s, da, db, ks > 0);
  }
  tile::wgmma_commit();
}

// Issues O += P~ V over the tile's k-steps of 16 keys as one wgmma group; with l from P~ (the default),
// also l += P~ . ones in the same k-steps, as v1 does with mma.sync (softmax.h, "l"). The caller waits.
// (kLOnTensorCores is a compile-time branch: a run-time one between wgmmas makes ptxas fence each of them.)
// With Tr::kLInV, l's products are the wgmma's last 8 columns, which read the ones panel after the stage's V
// (kLOnTensorCores changes nothing there: under FlashAttention's convention those columns go unread).
template <typename Tr, bool kLOnTensorCores>
__device__ __forceinline__ void issue_pv(float (&acc)[Tr::kNTilesPV][4], float (&l4)[4],
                                        const uint32_t (&pk)[Tr::kNTilesS][2], const Smem<Tr>& sm, int stage) {
  const uint64_t d_ones = Tr::kLInV ? 0 : tile::smem_descriptor_no_swizzle(sm.ones(), 128, 128);
  tile::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Tr::kKStepsPV; ++kk) {
    const uint32_t a[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
    if constexpr (kLOnTensorCores && !Tr::kLInV) tile::wgmma_m64n8(typename Tr::Wgmma{}, l4, a, d_ones);
    // Keys 16 kk .. 16 kk + 15 = two 8-key groups of 1024 bytes; panels of 64 columns Bc * 128 bytes apart.
    const uint64_t dv = tile::smem_descriptor_sw128(sm.v(stage) + kk * 16 * 128, Tr::kPanelKV, 1024);
    tile::wgmma_rs_trans_b(typename Tr::Wgmma{}, acc, a, dv);
  }
  tile::wgmma_commit();
}

// The epilogue of one consumer thread's two rows: O and the LSE, or the split's partial state.
template <typename Tr>
__device__ __forceinline__ void store_rows(const FwdParams& p, const BlockPlace& bp,
                                           const float (&acc)[Tr::kNTilesO][4], const OnlineSoftmax& sm,
                                           int row_g, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row_g + 8 * r;
    if (row >= p.n_q) continue;
    if (p.num_splits == 1) {
      auto* o_head = static_cast<uint16_t*>(p.o) + static_cast<long long>(bp.b) * p.o_stride[0] +
                     static_cast<long long>(bp.h) * p.o_stride[1];
      store_o_row<typename Tr::ET>(p, o_head, acc, sm, r, t, bp.b, bp.h, row);
    } else {
      store_split_row(p, split_state_index(p, bp.split, bp.b, bp.h, row), acc, r, t, sm.row_max[r], sm.row_sum[r]);
    }
  }
}

// The same rows into O's tile (Smem::o_box) instead of global memory, and the LSE. Each 4-byte pair goes to
// its 16-byte chunk's swizzled place (chunk ^ row % 8, the layout TMA reads with CU_TENSOR_MAP_SWIZZLE_128B);
// a quad's eight rows then fall in distinct banks.
template <typename Tr>
__device__ __forceinline__ void stage_rows(const FwdParams& p, const Smem<Tr>& sm, const BlockPlace& bp,
                                           const float (&acc)[Tr::kNTilesO][4], const OnlineSoftmax& st, int row_g,
                                           int wg, int warp, int g, int t) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint32_t row = sm.o_box(0, wg) + (16 * warp + g + 8 * r) * 128 + 4 * t;
    normalised_o_row<typename Tr::ET>(p, acc, st.row_sum[r], r, [&](int i, uint32_t pair) {
      const uint32_t addr = row + (i / 8) * Tr::kPanelQ + (((i % 8) ^ g) << 4);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(pair) : "memory");
    });
    if (row_g + 8 * r < p.n_q) store_row_lse(p, st, r, t, bp.b, bp.h, row_g + 8 * r);
  }
}

// kGuard: NaN -> 0 in the stage's V tile in shared memory, split over the consumers' 256 threads, so that
// the tile's MMA stays finite for every row (value_nan_guard.h, step 2a). Ordinary stores that the tensor
// cores read next: each writer fences the async proxy, then the consumers meet at a named barrier.
template <typename Tr>
__device__ __forceinline__ void zero_v_nans(unsigned char* v_tile, int ctid) {
  using ET = typename Tr::ET;
  for (int i = ctid; i < Tr::kTileKV / 4; i += Tr::Guard::kNThreads) {
    auto* w = reinterpret_cast<uint32_t*>(v_tile) + i;
    *w = nan_guard::zero_lanes<ET>(*w, nan_guard::nan_lanes<ET>(*w));
  }
  tile::fence_proxy_async_shared();
  tile::named_barrier_sync(kBarConsumers, Tr::Guard::kNThreads);
}

// Puts work tile id on the redo list (FwdParams::redo_list) once, whichever of its warps flags it first.
__device__ __forceinline__ void flag_for_redo(const FwdParams& p, long long id) {
  if (atomicCAS(p.redo_flags + id, 0u, 1u) == 0u) p.redo_list[1 + atomicAdd(p.redo_list, 1u)] = static_cast<unsigned>(id);
}


// Consumer warpgroup wg (0 .. kConsumers - 1): rows m0 + 64 wg .. + 63 of each of the block's work tiles.
// kGuard: the redo of flagged tiles.
//
// Within a work tile the loop is pipelined as FlashAttention-3's Algorithm 2: while O += P~ V of key tile
// i - 1 runs on the tensor cores, the scores of tile i are masked and exponentiated; tile i's P~ is
// rounded once those products are in (before the scores of tile i + 1 take the registers of s), and O
// and l are rescaled by tile i's alpha after the scores of tile i + 1 are issued, so that the rescale
// runs beside them on the tensor cores instead of between the two GEMMs. The order of every rounding is
// the plain loop's: O = (O + P~(i-1) V(i-1)) alpha(i) + P~(i) V(i) (softmax_update computes
// p = exp2(s c - m c) as round_p would).
//
// The epilogue (Tr::kOThroughSmem, p.o_tma, unguarded): O into O's tile over the V ring, then one TMA
// store per warpgroup and 64-column panel; the thread that issued them waits for their reads only after
// the next tile's first scores are issued, then frees the ring's V buffers for the V thread (o_done).
template <typename Tr, bool kGuard>
__device__ __forceinline__ void consume(const FwdParams& p, const Smem<Tr>& sm, unsigned char* smem,
                                        const WorkTiles& work, int wg, const CUtensorMap* tm_o) {
  using ET = typename Tr::ET;
  const int warp = (threadIdx.x / 32) % 4;  // within the warpgroup
  // The lane's quad and place in it. (No lane index is held: the releases elect their lane, and at d = 256's
  // 240 registers the guarded kernel spilled a held one.)
  const int g = (threadIdx.x / 4) % 8, t = threadIdx.x % 4;
  const bool l_on_tensor_cores = !p.l_from_fp32_p;
  // Read from the parameters where used: held in a register across the loop, it spilled at d = 256.
  auto o_smem = [&]() { return !kGuard && Tr::kOThroughSmem && p.o_tma; };
  const float c = p.scale_log2;
  auto row_of = [&](const BlockPlace& bp) { return bp.m0 + 64 * wg + 16 * warp + g; };

  timeline::Recorder tl(wg);  // empty unless built for bench/v2_timeline.py
  OnlineSoftmax sm_state[1];
  float acc[1][Tr::kNTilesPV][4];  // one 16-row m-tile per warp, as v1's kMT = 1; l last with Tr::kLInV
  // O's own columns, for the epilogue and the NaN guard.
  auto& acc_o = reinterpret_cast<float(&)[1][Tr::kNTilesO][4]>(acc);
  float s[1][Tr::kNTilesS][4];
  uint32_t pk[Tr::kNTilesS][2];
  float l4[4];  // l from P~ on the tensor cores: {l(g), pad, l(g + 8), pad}
  float alpha[1][2];
  auto clear_accumulators = [&]() {
#pragma unroll
    for (int i = 0; i < Tr::kNTilesPV; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[0][i][e] = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; ++e) l4[e] = 0.0f;
  };
  // The bounds of this thread's two rows for the masked key tiles (mask.h): once per work tile where the
  // consumers have the registers (two warpgroups, d <= 128); the 192-row tile's three of 160 and d = 256's
  // accumulators at 232 spilled holding them, and derive them per masked tile.
  constexpr bool kRowsOnce = Tr::kConsumers == 2 && Tr::kHeadDim <= 128;
  auto rows_of = [&](const BlockPlace& bp) {
    return kRowsOnce ? FragmentRows::make(RowMask::make(p, bp.b), row_of(bp)) : FragmentRows{};
  };
  // Scores of key tile nb of work tile bp in s -> exps in s, new max, alpha.
  auto softmax_step = [&](const BlockPlace& bp, const FragmentRows& rows, int nb) {
    if (bp.mask.needs_mask(nb)) {
      const int n0 = nb * Tr::kBlockN;
      if constexpr (kRowsOnce) mask_fragment(s[0], rows, p, row_of(bp), n0, t);
      else mask_fragment(s[0], RowMask::make(p, bp.b), p, row_of(bp), n0, t);
    }
    softmax_update(sm_state, s, c, alpha);
  };
  // P~ from the exps in s, once the previous tile's products are in (`products_in` waits for them). The wait
  // is inside each arm of the branch, because ptxas moves it otherwise (`cuobjdump -sass`): in the block that
  // holds the softmax step, ptxas placed the wait (WARPGROUP.DEPBAR) at the top of that block, so that the
  // max and the exponentials waited for the products instead of running beside them; behind a branch, it
  // moved the exponentials, which only the rounding reads, past the branch (d = 256). Both arms read them,
  // and ptxas copies them into neither: every exponential precedes the wait (tests/gpu/check_sass_overlap.py).
  auto round_step = [&](auto products_in) {
    if (l_on_tensor_cores) {
      products_in();
      round_p<ET, Tr::kNTilesS, false, false, 0, Tr::kNTilesS, false>(s[0], pk, sm_state[0]);
    } else {
      products_in();
      round_p<ET, Tr::kNTilesS, true>(s[0], pk, sm_state[0]);
    }
  };
  auto rescale_step = [&]() {  // O and l by the last softmax step's alpha, before the next P~ V
    rescale_accumulators(acc, alpha);  // with Tr::kLInV, l too
    if (!Tr::kLInV && l_on_tensor_cores) {
      l4[0] = __fmul_rn(l4[0], alpha[0][0]);
      l4[2] = __fmul_rn(l4[2], alpha[0][1]);
    }
  };
  // Ring position r: buffer r % kStages, in its use r / kStages (the parity its "full" barrier waits for).
  auto stage_of = [](int r) { return r % Tr::kStages; };
  auto parity_of = [](int r) { return static_cast<uint32_t>((r / Tr::kStages) & 1); };
  auto issue_qk_at = [&](int r, int step) {
    tile::mbar_wait(sm.k_full(stage_of(r)), parity_of(r));
    tl.mark(step, timeline::kKReady);
    issue_qk<Tr>(s[0], sm, stage_of(r), wg);
  };
  // A turn (Tr::kTurns) spans one key step's two issues; warpgroup 0 has the first. Not in the guarded redo,
  // whose V cleaning meets every consumer at a barrier inside the turn. The turn waits for the step's K, so
  // that a warpgroup whose data is late does not hold the others up. The last turn passed on is never
  // taken: a block's named barriers end with it.
  constexpr bool kTurns = Tr::kTurns && !kGuard;
  auto turn_begin = [&](int r) {
    if constexpr (kTurns) {
      tile::mbar_wait(sm.k_full(stage_of(r)), parity_of(r));
      tile::named_barrier_sync(kBarTurn + wg, 256);
    }
  };
  auto turn_end = [&]() {
    if constexpr (kTurns) tile::named_barrier_arrive(kBarTurn + (wg + 1) % Tr::kConsumers, 256);
  };
  if constexpr (kTurns) {
    if (wg == 0) tile::named_barrier_arrive(kBarTurn, 256);
  }
  // P~ V of key tile nb at ring position r; the guarded redo first cleans a boundary tile's V of NaNs.
  auto issue_pv_at = [&](int r, const BlockPlace& bp, int nb) {
    const int stage = stage_of(r);
    tile::mbar_wait(sm.v_full(stage), parity_of(r));
    if constexpr (kGuard) {
      if (bp.mask.needs_mask(nb)) zero_v_nans<Tr>(smem + (sm.v(stage) - sm.base), threadIdx.x - 128);
    }
    if (l_on_tensor_cores) {
      issue_pv<Tr, true>(acc[0], l4, pk, sm, stage);
    } else {
      issue_pv<Tr, false>(acc[0], l4, pk, sm, stage);
    }
  };
  auto release = [&](uint32_t bar) {  // one arrival per consumer warp
    __syncwarp();
    if (tile::elect_one()) tile::mbar_arrive(bar);
  };
  // The epilogue of work tile (id, bp), whose products are all in acc and l4.
  auto finish = [&](const BlockPlace& bp, long long id) {
    OnlineSoftmax& st = sm_state[0];
    const int row_g = row_of(bp);
    if (l_on_tensor_cores) {  // the whole row's sum in every lane of the quad
      if constexpr (Tr::kLInV) {
        st.row_sum[0] = acc[0][Tr::kNTilesPV - 1][0];
        st.row_sum[1] = acc[0][Tr::kNTilesPV - 1][2];
      } else {
        st.row_sum[0] = l4[0];
        st.row_sum[1] = l4[2];
      }
    } else {
      st.finalize();  // lane sums, combined here
    }
    if constexpr (!kGuard) {
      // A NaN can reach a row that does not see its key only through a boundary tile (0 * NaN in the MMA),
      // and then some accumulator of the block is NaN: flag the block (the runner cleared the flags) for the
      // guarded instantiation, which rewrites all of its rows.
      if (p.redo_list && p.guard_values) {
        bool nan = false;
#pragma unroll
        for (int i = 0; i < Tr::kNTilesO; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) nan = nan || acc_o[0][i][e] != acc_o[0][i][e];
        if (__any_sync(0xffffffffu, nan) && tile::elect_one()) flag_for_redo(p, id);
      }
    } else {
      // Steps 2b-2d of value_nan_guard.h: the NaN bit maps of the boundary V tiles, read again from global
      // memory into the (now idle) K ring, ORed per row over the keys the row sees, then a = NaN there.
      using G = typename Tr::Guard;
      const int ctid = threadIdx.x - 128;
      auto* tile_map = reinterpret_cast<uint32_t*>(smem + Tr::kOffK);
      auto* row_map = tile_map + Tr::kBlockN * nan_guard::kWords<G>;
      const auto* v_g = static_cast<const unsigned char*>(p.v) +
                        (static_cast<long long>(bp.b) * p.v_stride[0] + static_cast<long long>(bp.h_kv) * p.v_stride[1]) * 2;
      const int v_row = static_cast<int>(p.v_stride[2] * 2);
      tile::named_barrier_sync(kBarConsumers, G::kNThreads);  // every consumer is done with the ring
      nan_guard::clear_rows<G>(row_map, ctid);
      for (int nb = bp.nb_begin; nb < bp.nb_end; ++nb) {
        if (!bp.mask.needs_mask(nb)) continue;
        tile::named_barrier_sync(kBarConsumers, G::kNThreads);
        nan_guard::map_tile<G>(v_g, v_row, nb * Tr::kBlockN, bp.mask.kv_len, tile_map, ctid);
        tile::named_barrier_sync(kBarConsumers, G::kNThreads);
        nan_guard::add_rows<G>(tile_map, row_map, p, bp.b, bp.m0, nb * Tr::kBlockN, ctid);
      }
      tile::named_barrier_sync(kBarConsumers, G::kNThreads);
      nan_guard::poison<G, 1>(acc_o, row_map, row_g - bp.m0, t);
      // The maps were ordinary stores; the next tile's K arrives by TMA (the async proxy) once every
      // consumer warp has arrived here.
      tile::fence_proxy_async_shared();
      release(sm.scratch_free());
    }
    if (!o_smem()) {
      store_rows<Tr>(p, bp, acc_o[0], st, row_g, t);
      return;
    }
    // O's tile overlays the V ring: every consumer warpgroup's last P~ V has to be done with it. In a region
    // of its own, the warpgroup's half is free once its thread 0 has seen the last store read it
    // (complete_o_store, at this tile's start).
    if constexpr (Tr::kOOverV) tile::named_barrier_sync(kBarOTile, 128 * Tr::kConsumers);
    else tile::named_barrier_sync(kBarOStore + wg, 128);
    stage_rows<Tr>(p, sm, bp, acc_o[0], st, row_g, wg, warp, g, t);
    tile::fence_proxy_async_shared();  // ordinary stores that the copy engine reads next
    tile::named_barrier_sync(kBarOStore + wg, 128);
    if (threadIdx.x % 128 == 0) {
#pragma unroll
      for (int pn = 0; pn < Tr::kPanels; ++pn)
        tile::tma_store_4d(tm_o, sm.o_box(pn, wg), pn * 64, bp.m0 + 64 * wg, bp.h, bp.b);
      tile::bulk_commit_group();
    }
  };
  // Before work slot w's tile: the last tile's O stores (there are some from w = 1 on) have read O's tile,
  // so the producer may load V there again.
  auto complete_o_store = [&](int w) {
    if (o_smem() && w > 0 && threadIdx.x % 128 == 0) {
      tile::bulk_wait_group_read<0>();
      tile::count_release(sm.o_done());
    }
  };

  int w = 0, ring = 0;  // the work slot and ring position of the current tile's first key tile
  long long id;
  BlockPlace bp;
  if (!take_work<Tr, true>(sm, smem, work, w, id, bp)) return;
#pragma unroll 1
  for (;;) {
    const int n_tiles = bp.nb_end - bp.nb_begin;
    const FragmentRows mask_rows = rows_of(bp);
    tl.start(w);
    sm_state[0].init();
    clear_accumulators();
    tile::mbar_wait(sm.q_full(), w & 1);
    if (n_tiles == 0) {
      release(sm.q_empty());
      complete_o_store(w);
    }
    if (n_tiles > 0) {
      tl.mark(0, timeline::kStepBegin);
      issue_qk_at(ring, 0);
      complete_o_store(w);  // beside the first scores
      tile::wgmma_wait<0>();
      release(sm.k_empty(stage_of(ring)));
      if (n_tiles == 1) release(sm.q_empty());
      softmax_step(bp, mask_rows, bp.nb_begin);
      round_step([] {});
#pragma unroll 1
      for (int i = 1; i < n_tiles; ++i) {
        const int cur = ring + i, prev = cur - 1;
        tl.mark(i, timeline::kStepBegin);
        turn_begin(cur);
        issue_qk_at(cur, i);
        tl.mark(i, timeline::kSIssued);
        rescale_step();  // by alpha(i - 1), while the scores of tile i are on the tensor cores
        issue_pv_at(prev, bp, bp.nb_begin + i - 1);
        tl.mark(i, timeline::kPvIssued);
        turn_end();
        tile::wgmma_wait<1>();  // the scores of tile i (groups complete in order)
        tl.mark(i, timeline::kSReady);
        release(sm.k_empty(stage_of(cur)));
        softmax_step(bp, mask_rows, bp.nb_begin + i);  // beside P~ V of tile i - 1 (round_step says how)
        tl.mark(i, timeline::kSoftmaxDone);
#ifdef FC_BUG_HOISTED_WAIT
        // Test-only (tests/gpu/check_sass_overlap.py's control): the wait in the softmax step's block.
        tile::wgmma_wait<0>();
        release(sm.v_empty(stage_of(prev)));
        if (i == n_tiles - 1) release(sm.q_empty());
        round_step([] {});
#else
        if (i == n_tiles - 1) release(sm.q_empty());  // the Q thread may load the next work tile's Q
        round_step([&]() {
          tile::wgmma_wait<0>();  // P~ V of tile i - 1
          tl.mark(i, timeline::kPvDone);
          release(sm.v_empty(stage_of(prev)));
        });
        tl.mark(i, timeline::kRounded);
#endif
      }
    }
    // The next work tile's slot is read before this tile's last P~ V: its wait and loads run beside the
    // products instead of after the epilogue, behind its O stores (2.7 % in geometric mean, 6 % at d = 64:
    // docs/cuda-kernel-v2.md).
    long long id_next;
    BlockPlace bp_next;
    const bool more = take_work<Tr, true>(sm, smem, work, w + 1, id_next, bp_next);
    if (n_tiles > 0) {
      rescale_step();
      const int last = ring + n_tiles - 1;
      issue_pv_at(last, bp, bp.nb_end - 1);
      tile::wgmma_wait<0>();
      release(sm.v_empty(stage_of(last)));
    }
    ring += n_tiles;
    tl.mark(0, timeline::kProductsDone);
    finish(bp, id);
    tl.mark(0, timeline::kStored);
    tl.done(n_tiles);
    if (!more) break;
    ++w;
    id = id_next;
    bp = bp_next;
  }
  // The block's shared memory has to outlive the last O stores.
  if (o_smem() && threadIdx.x % 128 == 0) tile::bulk_wait_group<0>();
}

}  // namespace v2

// kGuard = false: the kernel, on a persistent grid with dynamic scheduling (tile_scheduler.h). kGuard = true: its guarded redo,
// launched after it on the same grid, whose blocks walk the redo list; a block with no entry leaves at once.
template <typename Tr, bool kGuard>
__global__ void __launch_bounds__(Tr::kNThreads, 1)
    fwd_v2_kernel(const __grid_constant__ FwdParams p, const __grid_constant__ CUtensorMap tm_q,
                  const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
                  const __grid_constant__ CUtensorMap tm_o) {
  const WorkTiles work = WorkTiles::make(p, Tr::kBlockM, kGuard);
  if (work.idle(p)) return;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw = tile::smem_addr(smem_raw);
  const v2::Smem<Tr> sm{(raw + 1023u) & ~1023u};
  unsigned char* smem = smem_raw + (sm.base - raw);

  if (threadIdx.x == 0) {
    tile::mbar_init(sm.q_full(), 1);
    tile::mbar_init(sm.q_empty(), 4 * Tr::kConsumers);  // one arrival per consumer warp
    for (int s = 0; s < Tr::kStages; ++s) {
      tile::mbar_init(sm.k_full(s), 1);
      tile::mbar_init(sm.v_full(s), 1);
      tile::mbar_init(sm.k_empty(s), 4 * Tr::kConsumers);
      tile::mbar_init(sm.v_empty(s), 4 * Tr::kConsumers);
    }
    for (int s = 0; s < 2; ++s) {
      tile::mbar_init(sm.work_full(s), 1);
      tile::mbar_init(sm.work_empty(s), 4 * Tr::kConsumers + 2);  // the consumer warps, the Q and V threads
    }
    tile::mbar_init(sm.scratch_free(), 4 * Tr::kConsumers);
    asm volatile("st.shared.u32 [%0], 0;\n" ::"r"(sm.o_done()) : "memory");
    tile::fence_barrier_init();
  }
  if (!Tr::kLInV && threadIdx.x < 64) {
    // The ones B operand of l = P~ . ones, written by ordinary stores that the tensor cores read.
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sm.ones() + 4 * threadIdx.x), "r"(Tr::ET::kOnePair) : "memory");
  }
  if constexpr (Tr::kLInV) {
    // Every stage's ones panel, 16 bytes a store. The wgmma reads 8 of its 64 columns, whose 16-byte chunk
    // the 128-byte swizzle moves from row to row, so the whole panel is ones.
    constexpr int kChunks = Tr::kPanelKV / 16;
    for (int i = threadIdx.x; i < Tr::kStages * kChunks; i += Tr::kNThreads) {
      const uint32_t at = sm.v(i / kChunks) + Tr::kTileKV + 16 * (i % kChunks), one = Tr::ET::kOnePair;
      asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(at), "r"(one) : "memory");
    }
  }
  tile::fence_proxy_async_shared();  // ordinary stores that the tensor cores read
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    tile::setmaxnreg_dec<Tr::kProducerRegs>();
    if (threadIdx.x == 0) v2::produce<Tr>(p, sm, smem, &tm_k, work);
    if (threadIdx.x == 32) v2::produce_q<Tr>(sm, smem, &tm_q, work);
    if (threadIdx.x == 64) v2::produce_v<Tr, !kGuard && Tr::kOOverV>(p, sm, smem, &tm_v, work);
  } else {
    tile::setmaxnreg_inc<Tr::kConsumerRegs>();
    v2::consume<Tr, kGuard>(p, sm, smem, work, wg - 1, &tm_o);
  }
}

}  // namespace flashcheck::cuda
