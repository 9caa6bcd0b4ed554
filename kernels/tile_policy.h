// The tile policy of our fused kernel, in one table: which (Br, Bc, warps, stages) tiles are compiled per
// head dim, which one runs by default, and how many keys each online-softmax step takes. It feeds the
// CUDA kernel's dispatch and traits (kernels/cuda/), its declared capabilities and launch plan
// (fused_attention.cpp), the per-head-dim instantiation files (kernels/cuda/CMakeLists.txt reads
// kHeadDims below), and the CPU emulation's default tile (kernels/cpu/). Plain constexpr C++17, so host
// and device code include the same definitions.
//
// A warp owns 16 or 32 query rows (one or two 16-row MMA tiles) with their O accumulator in registers;
// Bc is the key tile that cp.async brings into shared memory, double-buffered (2 stages) or in FA-2's
// single-buffer order (1 stage). (Br, Bc) is unique per head dim, so the C ABI's tile_m/tile_n select
// an instantiation.
#pragma once

namespace fc::tiles {

struct TileShape {
  int m;           // Br: query rows per block
  int n;           // Bc: keys per tile
  int warps;       // Br / warps = 16 or 32 rows per warp (one or two 16-row MMA tiles)
  int stages = 2;  // K/V buffers: 2 double-buffers K and V, 1 is FA-2's single-buffer order
};

// Head dims with compiled tensor-core instantiations. CMake generates one fwd_hdim<d>.cu per entry.
inline constexpr int kHeadDims[] = {32, 64, 96, 128, 256};
inline constexpr int kNumHeadDims = sizeof(kHeadDims) / sizeof(kHeadDims[0]);
inline constexpr int kNumTileOptions = 3;

constexpr bool is_supported_head_dim(int d) {
  for (int x : kHeadDims)
    if (x == d) return true;
  return false;
}

// Index 0 of each list is the default (fp16/bf16; fp8 and causal d = 64: default_tile_index below).
// Reasons (TFLOP/s at N = 4096 on the H200; docs/cuda-kernel.md, "Tile policy", has each figure's
// command and date):
//  d=32:   64x64, 4 warps of 16 rows: at this d the MMA work per key is small and twice the blocks (and 3
//          blocks/SM at ~160 registers) win: 217.7 vs 196.3 for 128x128 (causal 189.5 vs 163.1).
//  d=64:   128x128, 4 warps of 32 rows: each K/V fragment read from shared memory feeds two MMAs and the
//          long key tile halves the barriers per key: 293.9 vs 272.0 (128x64).
//  d=96:   128x64, 4 warps of 32 rows: 238.2 vs 230.4 (128x32).
//  d=128:  128x64, 4 warps of 32 rows, one stage: S for 64 keys beside the 128-register O, and the single
//          K and V buffers keep two blocks per SM; 332.2 vs 277.9 (128x32, two stages).
//  d=256:  64x64, 4 warps of 16 rows, one stage: double buffers of 64 keys would leave one block per SM;
//          292.7 vs 237.0 (64x32, two stages).
constexpr TileShape tile_options(int d, int index) {
  switch (d) {
    case 32: {
      constexpr TileShape t[kNumTileOptions] = {{64, 64, 4}, {128, 128, 4}, {128, 64, 4}};
      return t[index];
    }
    case 64: {
      constexpr TileShape t[kNumTileOptions] = {{128, 128, 4}, {128, 64, 4}, {64, 64, 4}};
      return t[index];
    }
    case 96: {
      constexpr TileShape t[kNumTileOptions] = {{128, 64, 4}, {128, 32, 4}, {64, 64, 4}};
      return t[index];
    }
    case 128: {
      constexpr TileShape t[kNumTileOptions] = {{128, 64, 4, 1}, {128, 32, 4}, {64, 64, 4}};
      return t[index];
    }
    case 256: {
      constexpr TileShape t[kNumTileOptions] = {{64, 64, 4, 1}, {64, 32, 4}, {128, 32, 8}};
      return t[index];
    }
    default:
      return {0, 0, 0};
  }
}

// fp8 runs one tile per head dim, and only that tile is compiled: at d = 96/128 the one-m-tile 64x64
// (index 2 in both lists), the only spill-free option there; at d = 256 the two-stage 64x32 (index 1)
// instead of the spilling 64x64 (docs/cuda-kernel.md, "Spills"); at d = 32/64 the 16-bit default. The other
// fp8 tiles spill or were never measured faster, and compiling all of them tripled each fp8 unit's build
// (the largest of the library: 96-145 s each on CI's 2 cores), so a request for one is declined.
constexpr int fp8_tile_index(int d) { return d == 96 || d == 128 ? 2 : d == 256 ? 1 : 0; }

// The default tile index for a head dim, input format, mask and length: fp8's one tile (above). Causal
// masks at d = 64 (16-bit) with up to 2048 queries take 64x64: the triangle leaves the last row blocks with
// most of the work, and twice as many 64-row blocks balance the SMs better (192.1 vs 174.4 TFLOP/s at
// N = 1024, equal at 2048); longer ones keep 128x128.
constexpr int default_tile_index(int d, bool fp8, bool causal, long long n_q) {
  if (fp8) return fp8_tile_index(d);
  return causal && d == 64 && n_q <= 2048 ? 2 : 0;
}

// The index of (m, n) among d's options, or -1.
constexpr int tile_index_of(int d, int m, int n) {
  for (int i = 0; i < kNumTileOptions; ++i) {
    const TileShape t = tile_options(d, i);
    if (t.m == m && t.n == n) return i;
  }
  return -1;
}

// The fp32 recipe runs on CUDA cores with one fixed tiling (fwd_fp32.cu): 4 query rows (one warp each)
// by 32 keys, one online-softmax step per tile; tile options do not apply.
inline constexpr TileShape kSimtFp32Tile = {4, 32, 4};

constexpr int m_tiles_per_warp(const TileShape& t) { return t.m / (16 * t.warps); }

// Keys per online-softmax step (the narrowest step of a tile): the whole tile, except 32 for fp8 with two
// m-tiles (its P packing and V^T fragments do not fit in registers beside S for 64+ keys) and 64 for
// 128-key tiles (S for 128 keys beside O, the mask and the boundary-tile state spill). Steps start on
// multiples of it, so a budget for this step width bounds the run (docs/error-analysis.md, §3.4).
constexpr int softmax_step_n(const TileShape& t, bool fp8) {
  return (m_tiles_per_warp(t) == 2 && fp8 && t.n > 32) ? 32 : (t.n > 64 ? 64 : t.n);
}

// Interior (unmasked) tiles of the 16-bit 128-key tiles at d = 64 take the whole tile as one step (bf16
// d = 64: 0.956x -> 0.994x flash against two 64-key steps); with the l-from-fp32 convention that spills,
// so that convention keeps the narrow steps.
constexpr int interior_step_n(const TileShape& t, bool fp8, bool l_from_fp32, int d) {
  return (!fp8 && !l_from_fp32 && d == 64 && t.n == 128) ? 128 : softmax_step_n(t, fp8);
}

// The tile that runs for (d, recipe, mask, n_q) when none is asked for: the table's default for a
// compiled head dim; for the emulation's other head dims, that of the nearest compiled head dim above
// (the largest one past the end).
constexpr TileShape default_tile(int d, bool fp32, bool fp8, bool causal, long long n_q) {
  if (fp32) return kSimtFp32Tile;
  int dd = kHeadDims[kNumHeadDims - 1];
  for (int i = kNumHeadDims - 1; i >= 0; --i)
    if (kHeadDims[i] >= d) dd = kHeadDims[i];
  return tile_options(dd, default_tile_index(dd, fp8, causal, n_q));
}

// Every (Br, Bc) compiled for some head dim, each once, in table order: what the kernel declares as
// selectable (a tile not compiled for the requested d is refused at run time).
struct TileList {
  TileShape tiles[kNumHeadDims * kNumTileOptions];
  int count;
};
constexpr TileList all_tiles() {
  TileList l{};
  l.count = 0;
  for (int h = 0; h < kNumHeadDims; ++h)
    for (int i = 0; i < kNumTileOptions; ++i) {
      const TileShape t = tile_options(kHeadDims[h], i);
      bool seen = false;
      for (int k = 0; k < l.count; ++k) seen = seen || (l.tiles[k].m == t.m && l.tiles[k].n == t.n);
      if (!seen) l.tiles[l.count++] = t;
    }
  return l;
}

// Kernel v2 (kernels/cuda/fwd_v2_kernel.cuh: TMA, wgmma, warp specialisation), fp16 and bf16 at these head
// dims: 128 query rows per block (two consumer warpgroups of 64 rows, and a producer warpgroup: 12 warps;
// at d = 64 also a 192-row tile, v2_tall_tile below),
// Bc keys per tile in a ring of K and V buffers, one online-softmax step per tile. Bc = 128 where S (64
// registers) fits beside O; at d = 256 O takes 128 registers and Bc = 80, FlashAttention-3's tile (S in
// 40 registers; 1.03x the 64-key tile there in geometric mean, bf16 and fp16, H200: docs/cuda-kernel-v2.md).
// The ring is as deep as shared memory allows (Q + stages x (K + V + the ones panel of v2_l_in_v) = 208 /
// 192 / 224 KiB of the 227), so that the producer runs ahead across work tiles. d = 128 has two stages since
// the ones panels came (three no longer fit); without them, two were 1.3-2.4 % faster than three there
// (docs/cuda-kernel-v2.md).
inline constexpr int kV2HeadDims[] = {64, 128, 256};
inline constexpr int kNumV2HeadDims = sizeof(kV2HeadDims) / sizeof(kV2HeadDims[0]);
constexpr TileShape v2_tile(int d) {
  return d == 64    ? TileShape{128, 128, 12, 4}
         : d == 128 ? TileShape{128, 128, 12, 2}
         : d == 256 ? TileShape{128, 80, 12, 2}
                    : TileShape{0, 0, 0};
}
constexpr bool is_v2_head_dim(int d) { return v2_tile(d).m != 0; }
// Where v2 sums l = P~ . ones as O's last 8 columns, one wgmma of N = d + 8 per k-step, reading a panel of
// ones after each stage's V (fwd_v2_kernel.cuh, kLInV), instead of a separate m64n8 wgmma per k-step: where
// d + 8 is a wgmma width (N <= 256) and the ring keeps its stages (d = 128 has two, as FlashAttention 4's).
// With d = 128's two stages: 1.4 % in geometric mean over the FA-3 grid, 2.4-4.3 % at d = 128 (H200,
// docs/cuda-kernel-v2.md); fewer wgmmas to issue in the step's chain, the same tensor work.
constexpr bool v2_l_in_v(int d) { return d <= 128; }
// A taller tile where one is compiled (m = 0: none): at d = 64 FlashAttention-3's 192 rows, three
// consumer warpgroups of 160 registers that take turns to issue their products (fwd_v2_kernel.cuh kTurns).
// Measured beside the 128-row tile (bf16 and fp16, H200, FA-3 grid): faster when each work tile walks many
// key tiles (from 2k keys without a mask; from 4k with a causal one: 1.02-1.03x at 4k, 1.07x at 8k), mixed
// at 1k without a mask, slower below (0.86x at 512 and 1k causal), so it is chosen by the keys a work tile
// sees. The rows of a tile are independent, so its numerics are the 128-row tile's.
constexpr TileShape v2_tall_tile(int d) { return d == 64 ? TileShape{192, 128, 16, 4} : TileShape{0, 0, 0}; }
constexpr bool is_v2_tile(int d, int m, int n) {
  const TileShape a = v2_tile(d), b = v2_tall_tile(d);
  return (a.m != 0 && a.m == m && a.n == n) || (b.m != 0 && b.m == m && b.n == n);
}
// The tile v2 runs for a problem: the taller one from n_k keys on (2k without a mask, 4k under a causal
// one, whose work tiles see half of them on average), else the 128-row one.
constexpr TileShape v2_tile_for(int d, bool causal, long long n_k) {
  const TileShape tall = v2_tall_tile(d);
  return tall.m != 0 && n_k >= (causal ? 4096 : 2048) ? tall : v2_tile(d);
}
// Where v2's epilogue writes O through shared memory and TMA stores instead of storing it from the
// accumulators (fwd_v2_kernel.cuh, kOThroughSmem): at d = 256 over the V ring, 1.07x in geometric mean (bf16
// and fp16, FA-3 grid, H200); at d = 128 in a region of its own beside the two-stage ring, 1.07x (1.14-1.17x
// at N = 512, even from 8k keys); over the ring it had been 0.82-0.98x at d = 64 and 0.98-1.01x at d = 128
// (docs/cuda-kernel-v2.md). The runner makes O's tensor map only there.
// The 128-row tile at d = 64 has room for O's 16 KiB beside its four stages (1.02x on the shapes that run it:
// N < 2k, causal N < 4k); the 192-row one does not.
constexpr bool v2_o_through_smem(int d, int m) { return d == 256 || d == 128 || (d == 64 && m == 128); }

}  // namespace fc::tiles
