// Collective layer: what each input format means to the kernel: its tensor-core instruction, how P is
// rounded to it before P.V, and the output format. One traits struct per recipe.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "mma.h"

namespace flashcheck::cuda {

// Storage types (bit patterns as the C ABI passes them).
struct Fp16 { uint16_t bits; };
struct Bf16 { uint16_t bits; };
struct E4M3 { uint8_t bits; };
struct E5M2 { uint8_t bits; };

template <typename T> struct ElementTraits;

template <> struct ElementTraits<Fp16> {
  using Mma = tile::MmaF16;
  using Out = Fp16;
  static constexpr int kBytes = 2;
  static constexpr bool kIsFp8 = false;
  static constexpr float kPScale = 1.0f;  // P is rounded as is
  static constexpr uint32_t kNanAbove = 0x7c00u;  // |bits| above this is a NaN
  static constexpr uint32_t kOnePair = 0x3c003c00u;  // (1, 1): the B operand that sums P~'s rows
  // Round two P values to fp16 (RN); return the packed pair and the rounded values as fp32.
  __device__ __forceinline__ static uint32_t round_pair(float a, float b, float& ra, float& rb) {
    const __half2 h = __floats2half2_rn(a, b);
    const float2 f = __half22float2(h);
    ra = f.x;
    rb = f.y;
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ __forceinline__ static uint32_t pack_out(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};

template <> struct ElementTraits<Bf16> {
  using Mma = tile::MmaBF16;
  using Out = Bf16;
  static constexpr int kBytes = 2;
  static constexpr bool kIsFp8 = false;
  static constexpr float kPScale = 1.0f;
  static constexpr uint32_t kNanAbove = 0x7f80u;
  static constexpr uint32_t kOnePair = 0x3f803f80u;
  // cvt.rn.bf16x2.f32 puts its first source in the upper half; widening back is a shift/mask (exact).
  __device__ __forceinline__ static uint32_t round_pair(float a, float b, float& ra, float& rb) {
    uint32_t packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(b), "f"(a));
    ra = __uint_as_float(packed << 16);
    rb = __uint_as_float(packed & 0xFFFF0000u);
    return packed;
  }
  __device__ __forceinline__ static uint32_t pack_out(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
};

// fp8: P in [0, 1] is multiplied by 2^8 (exact) before rounding so that it uses the format's range
// (e4m3 max 448, e5m2 max 57344) instead of flushing everything below 2^-9 to zero. l and a both carry
// the same 2^8, which cancels in a / l; the LSE subtracts 8 ln 2. Output is bf16.
template <bool kE4M3, typename MmaTag>
struct Fp8TraitsBase {
  using Mma = MmaTag;
  using Out = Bf16;
  static constexpr int kBytes = 1;
  static constexpr bool kIsFp8 = true;
  static constexpr float kPScale = 256.0f;
  static constexpr uint32_t kNanAbove = kE4M3 ? 0x7eu : 0x7cu;  // e4m3: only S.1111.111 is NaN
  // Two rounded P values as 2 bytes (low byte = a): cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (first source to
  // the upper byte), widened back exactly through f16x2.
  __device__ __forceinline__ static uint32_t round_pair(float a, float b, float& ra, float& rb) {
    uint16_t packed;
    uint32_t wide;
    if constexpr (kE4M3) {
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(packed) : "f"(b), "f"(a));
      asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(wide) : "h"(packed));
    } else {
      asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;\n" : "=h"(packed) : "f"(b), "f"(a));
      asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(wide) : "h"(packed));
    }
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&wide));
    ra = f.x;
    rb = f.y;
    return packed;
  }
  __device__ __forceinline__ static uint32_t pack_out(float a, float b) {
    uint32_t packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(b), "f"(a));
    return packed;
  }
};
template <> struct ElementTraits<E4M3> : Fp8TraitsBase<true, tile::MmaE4M3> {};
template <> struct ElementTraits<E5M2> : Fp8TraitsBase<false, tile::MmaE5M2> {};

}  // namespace flashcheck::cuda
