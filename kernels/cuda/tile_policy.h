// Runner/device layer: which (Br, Bc, warps) tiles are compiled per head dim, and the default policy.
// A warp owns 16 or 32 query rows (one or two 16-row MMA tiles) with their O accumulator in registers; Bc
// is the key tile that cp.async double-buffers in shared memory. (Br, Bc) is unique per head dim, so the
// C ABI's tile_m/tile_n select an instantiation.
#pragma once

namespace flashcheck::cuda {

struct TileShape {
  int m;      // Br: query rows per block
  int n;      // Bc: keys per tile
  int warps;  // Br / warps = 16 or 32 rows per warp (one or two 16-row MMA tiles)
};

inline constexpr int kNumTileOptions = 3;

// Index 0 of each list is the default (fp16/bf16; fp8: default_tile_index below). Reasons, from the tile
// sweeps on the H200 at N = 4096 (docs/cuda-kernel.md has the tables):
//  d=32:     64x64, 4 warps of 16 rows: at this d the MMA work per key is small and twice the blocks
//            (and 3 blocks/SM at ~160 registers) win: 218 vs 196 TFLOP/s for 128x128 (causal 190 vs 163).
//  d=64:     128x128, 4 warps of 32 rows: each K/V fragment read from shared memory feeds two MMAs and
//            the long key tile halves the barriers per key: 285 vs 268 (128x64) and 271 (64x64).
//  d=96:     128x64, 4 warps of 32 rows (softmax in 32-key steps, see kSubN): 238 vs 230 (128x32).
//  d=128:    128x32, 4 warps of 32 rows: O takes 128 registers, so S is kept to 32 keys; Q is re-read
//            from shared memory per k-step. 306 vs 292 (128x64) and 264 (64x64).
//  d=256:    64x32, 4 warps of 16 rows: O alone takes 128 registers per thread, so one m-tile per warp
//            and a short key tile, which also leaves room for Q in registers. 266 vs 201 (64x64); 128x32
//            (8 warps) is 4% faster without a mask but 10% slower causal at N = 1024 (196 vs 178).
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
      constexpr TileShape t[kNumTileOptions] = {{128, 32, 4}, {128, 64, 4}, {64, 64, 4}};
      return t[index];
    }
    case 256: {
      constexpr TileShape t[kNumTileOptions] = {{64, 32, 4}, {64, 64, 4}, {128, 32, 8}};
      return t[index];
    }
    default:
      return {0, 0, 0};
  }
}

// The default tile index for a head dim and input format. fp8 at d = 96/128 takes the one-m-tile 64x64
// tile (index 2 in both lists): with two m-tiles its extra conversion and V^T work pushes the register
// demand past 255 and ptxas spills (see docs/cuda-kernel.md, "Spills").
// Causal masks at d = 64 (16-bit) take 64x64: the triangle leaves the last row blocks with most of the
// work, and twice as many 64-row blocks balance the SMs better (197 vs 175 TFLOP/s at N = 1024, 242 vs
// 231 at N = 4096, fp16).
constexpr int default_tile_index(int d, bool fp8, bool causal) {
  if (fp8) return d == 96 || d == 128 ? 2 : 0;
  return causal && d == 64 ? 2 : 0;
}

constexpr bool is_supported_head_dim(int d) { return d == 32 || d == 64 || d == 96 || d == 128 || d == 256; }

}  // namespace flashcheck::cuda
