// Runner/device layer: which (Br, Bc, warps, stages) tiles are compiled per head dim, and the default
// policy. A warp owns 16 or 32 query rows (one or two 16-row MMA tiles) with their O accumulator in
// registers; Bc is the key tile that cp.async brings into shared memory, double-buffered (2 stages) or in
// FA-2's single-buffer order (1 stage). (Br, Bc) is unique per head dim, so the C ABI's tile_m/tile_n
// select an instantiation.
#pragma once

namespace flashcheck::cuda {

struct TileShape {
  int m;      // Br: query rows per block
  int n;      // Bc: keys per tile
  int warps;  // Br / warps = 16 or 32 rows per warp (one or two 16-row MMA tiles)
  int stages = 2;  // K/V buffers: 2 double-buffers K and V, 1 is FA-2's single-buffer order (fwd_kernel.cuh)
};

inline constexpr int kNumTileOptions = 3;

// Index 0 of each list is the default (fp16/bf16; fp8 and causal d = 64: default_tile_index below).
// Reasons, from the tile sweeps on the H200 (docs/cuda-kernel.md has the tables; TFLOP/s, bf16):
//  d=32:     64x64, 4 warps of 16 rows: at this d the MMA work per key is small and twice the blocks
//            (and 3 blocks/SM at ~160 registers) win: 218 vs 196 TFLOP/s for 128x128 (causal 190 vs 163).
//  d=64:     128x128, 4 warps of 32 rows: each K/V fragment read from shared memory feeds two MMAs and
//            the long key tile halves the barriers per key: 300 vs 287 (128x64) at N = 4096. Its interior
//            tiles are one 128-key softmax step (fwd_kernel.cuh kLongSteps; bf16 +4% over 64-key steps).
//  d=96:     128x64, 4 warps of 32 rows: 238 vs 230 (128x32) when it still stepped in 32 keys; not
//            re-measured since its softmax takes the whole tile.
//  d=128:    128x64, 4 warps of 32 rows, one stage: S for 64 keys beside the 128-register O, and the
//            single K and V buffers keep two blocks per SM; 332 vs 278 (128x32, two stages, the previous
//            default) at N = 4096, 305 vs 260 at N = 1024.
//  d=256:    64x64, 4 warps of 16 rows, one stage: double buffers of 64 keys would leave one block per
//            SM; 290 vs 237 (64x32, two stages, the previous default) at N = 4096, 274 vs 228 at 1024.
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

// The default tile index for a head dim, input format, mask and length. fp8 at d = 96/128 takes the
// one-m-tile 64x64 tile (index 2 in both lists) and at d = 256 the two-stage 64x32 (index 1): the others
// spill (docs/cuda-kernel.md, "Spills").
// Causal masks at d = 64 (16-bit) with up to 2048 queries take 64x64: the triangle leaves the last row
// blocks with most of the work, and twice as many 64-row blocks balance the SMs better (192 vs 174 TFLOP/s
// at N = 1024, equal at 2048); longer ones keep 128x128 (252 vs 235 at 4096, 287 vs 254 at 16384).
constexpr int default_tile_index(int d, bool fp8, bool causal, long long n_q) {
  if (fp8) return d == 96 || d == 128 ? 2 : d == 256 ? 1 : 0;
  return causal && d == 64 && n_q <= 2048 ? 2 : 0;
}

constexpr bool is_supported_head_dim(int d) { return d == 32 || d == 64 || d == 96 || d == 128 || d == 256; }

}  // namespace flashcheck::cuda
