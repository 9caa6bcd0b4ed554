// How the GPU's tensor cores accumulate, measured: one MMA per 64 x 8 tile on many directed and random
// inputs, each result compared bit for bit with the block-FMA model (reference/tensor_core_model.h) under
// every candidate parameter set: steps of b products (contiguous, or two interleaved halves), F
// fractional bits kept below the largest term, subnormal operands aligned at the format's smallest normal
// or at their own exponent, and the final rounding (toward zero or to nearest). The parameters whose
// model reproduces every result are the instruction's arithmetic; the error budget and the CPU emulation
// need them before a kernel is built on an instruction (docs/error-analysis.md §1).
//
// Instructions: mma.sync m16n8k16 / m16n8k32 (what kernel v1 runs; its model was measured before and is
// the control here) and wgmma m64n8k16 / m64n8k32 with A from registers and B from shared memory (what a
// Hopper kernel runs). Operands fp16, bf16, e4m3, e5m2; fp32 accumulators.
//
//   tensor_core_probe [--self-test] [--tiles-per-family N] [--seed S]
// Prints, per instruction and operand type, the model parameters that match and their match rate, the
// best rate of each hypothesis family, and the first mismatches of the best one; exit 1 when the
// harness's own calibration (small integers, exact in any model) fails, 2 on a CUDA error. --self-test
// fits results made by known models instead (no GPU needed) and fails unless each is recovered.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/mma.h"
#include "kernels/cuda/wgmma.h"
#include "reference/tensor_core_model.h"

namespace {

using namespace flashcheck::cuda::tile;

enum class Elem { fp16, bf16, e4m3, e5m2 };
constexpr int kM = 64, kN = 8;
int k_of(Elem e) { return e == Elem::fp16 || e == Elem::bf16 ? 16 : 32; }
int bytes_of(Elem e) { return e == Elem::fp16 || e == Elem::bf16 ? 2 : 1; }
const char* name_of(Elem e) {
  switch (e) {
    case Elem::fp16: return "fp16";
    case Elem::bf16: return "bf16";
    case Elem::e4m3: return "e4m3";
    default: return "e5m2";
  }
}
fc::Recipe recipe_of(Elem e) {
  switch (e) {
    case Elem::fp16: return fc::Recipe::fp16;
    case Elem::bf16: return fc::Recipe::bf16;
    case Elem::e4m3: return fc::Recipe::fp8_e4m3;
    default: return fc::Recipe::fp8_e5m2;
  }
}
double min_normal_of(Elem e) {
  switch (e) {
    case Elem::fp16: return 0x1p-14;
    case Elem::bf16: return 0x1p-126;
    case Elem::e4m3: return 0x1p-6;
    default: return 0x1p-14;
  }
}

#define CUDA_OK(x)                                                                      \
  do {                                                                                  \
    const cudaError_t err_ = (x);                                                       \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "tensor_core_probe: %s: %s\n", #x, cudaGetErrorString(err_)); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

// ---- device side -------------------------------------------------------------------------------------

// 16 bytes of a row, as 4 registers' worth: elements [k0, k0 + 16 / bytes) of a row stored K-contiguous.
__device__ __forceinline__ uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

// A (64 x K, row-major), B (8 x K: row n holds column n of the K x 8 operand), C and D (64 x 8, row-major),
// one tile per block of 128 threads. Every thread builds mma.sync's fragments for its warp's 16 rows.
template <typename Tag, bool kWgmma>
__global__ void probe_kernel(const uint8_t* a_all, const uint8_t* b_all, const float* c_all, float* d_all, int k,
                             int esize) {
  __shared__ __align__(128) uint8_t b_smem[kN * 32];
  const int tile = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint8_t* A = a_all + size_t(tile) * kM * k * esize;
  const uint8_t* B = b_all + size_t(tile) * kN * k * esize;
  const float* C = c_all + size_t(tile) * kM * kN;
  float* D = d_all + size_t(tile) * kM * kN;
  const int r0 = 16 * warp + g, r1 = r0 + 8;
  const int rb = k * esize;            // bytes per row of A and of B
  uint32_t a[4] = {load_u32(A + r0 * rb + t * 4), load_u32(A + r1 * rb + t * 4), load_u32(A + r0 * rb + 16 + t * 4),
                   load_u32(A + r1 * rb + 16 + t * 4)};
  float d[4] = {C[r0 * kN + 2 * t], C[r0 * kN + 2 * t + 1], C[r1 * kN + 2 * t], C[r1 * kN + 2 * t + 1]};
  if constexpr (kWgmma) {
    // B as core matrices of 8 rows (n) x 16 bytes (K): the one along N at 0, the next along K at 128.
    for (int x = threadIdx.x; x < kN * rb; x += blockDim.x) {
      const int n = x / rb, kb = x % rb;
      b_smem[(kb / 16) * 128 + n * 16 + kb % 16] = B[x];
    }
    fence_proxy_async_shared();
    __syncthreads();
    const uint64_t desc = smem_descriptor_no_swizzle(smem_addr(b_smem), 128, 128);
    wgmma_fence();
    wgmma_m64n8(Tag{}, d, a, desc);
    wgmma_commit();
    wgmma_wait<0>();
  } else {
    // mma.sync's B fragment: column g, K bytes [4t, 4t + 4) and [16 + 4t, 16 + 4t + 4).
    const uint32_t b0 = load_u32(B + g * rb + t * 4), b1 = load_u32(B + g * rb + 16 + t * 4);
    mma(Tag{}, d, a, b0, b1);
  }
  D[r0 * kN + 2 * t] = d[0];
  D[r0 * kN + 2 * t + 1] = d[1];
  D[r1 * kN + 2 * t] = d[2];
  D[r1 * kN + 2 * t + 1] = d[3];
}

// ---- host side ---------------------------------------------------------------------------------------

// Rounds x to the element format (RN; saturating for fp8) and returns the stored byte(s).
uint16_t encode(Elem e, double x) {
  switch (e) {
    case Elem::fp16: {
      const __half h = __double2half(x);
      uint16_t u;
      std::memcpy(&u, &h, 2);
      return u;
    }
    case Elem::bf16: {
      const __nv_bfloat16 h = __double2bfloat16(x);
      uint16_t u;
      std::memcpy(&u, &h, 2);
      return u;
    }
    case Elem::e4m3: return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    default: return __nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  }
}
double decode(Elem e, const uint8_t* p) {
  switch (e) {
    case Elem::fp16: {
      __half h;
      std::memcpy(&h, p, 2);
      return double(__half2float(h));
    }
    case Elem::bf16: {
      __nv_bfloat16 h;
      std::memcpy(&h, p, 2);
      return double(__bfloat162float(h));
    }
    case Elem::e4m3: {
      __nv_fp8_e4m3 h;
      std::memcpy(&h, p, 1);
      return double(float(h));
    }
    default: {
      __nv_fp8_e5m2 h;
      std::memcpy(&h, p, 1);
      return double(float(h));
    }
  }
}

// The input families. calibration: small integers (every sum exact in fp32: any model gives the same D),
// which checks the harness's fragment layouts. The others make the parameters visible: spread
// exponents (alignment truncation), cancellation against C (the final normalisation), subnormal
// operands, and C alone (A = B = 0: is the accumulator itself truncated?).
enum class Family { calibration, spread, cancel, subnormal, c_only, count };
const char* family_name(Family f) {
  switch (f) {
    case Family::calibration: return "calibration";
    case Family::spread: return "spread";
    case Family::cancel: return "cancel";
    case Family::subnormal: return "subnormal";
    case Family::c_only: return "c_only";
    default: return "?";
  }
}

struct Tiles {
  Elem elem;
  int k, n_tiles;
  std::vector<uint8_t> a, b;  // stored operands
  std::vector<float> c, d;    // accumulators in, results out
  std::vector<Family> family;
};

double random_value(Elem e, Family f, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(1.0, 2.0);
  std::uniform_int_distribution<int> sign(0, 1);
  const double s = sign(rng) ? -1.0 : 1.0;
  const double max_exp = e == Elem::e4m3 ? 7 : e == Elem::e5m2 ? 14 : e == Elem::fp16 ? 14 : 30;
  switch (f) {
    case Family::calibration: return double(std::uniform_int_distribution<int>(-4, 4)(rng));
    case Family::spread: {
      std::uniform_int_distribution<int> ex(-int(max_exp) / 2, int(max_exp) / 2);
      return s * std::ldexp(u(rng), ex(rng));
    }
    case Family::subnormal:  // B's values: normal, of any positive exponent (A's are subnormal_value's)
      return s * std::ldexp(u(rng), std::uniform_int_distribution<int>(0, int(max_exp))(rng));
    case Family::cancel:
    default: return s * u(rng) * std::ldexp(1.0, std::uniform_int_distribution<int>(-3, 3)(rng));
  }
}

// A's values in the subnormal family: subnormal or zero, so that the largest product's alignment depends
// on how a subnormal operand is counted.
double subnormal_value(Elem e, std::mt19937_64& rng) {
  if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) return 0.0;
  const double s = std::uniform_int_distribution<int>(0, 1)(rng) ? -1.0 : 1.0;
  return s * min_normal_of(e) * std::uniform_real_distribution<double>(0.01, 1.0)(rng);
}

Tiles make_tiles(Elem e, int per_family, uint64_t seed) {
  Tiles T;
  T.elem = e;
  T.k = k_of(e);
  const int eb = bytes_of(e), nf = int(Family::count);
  T.n_tiles = per_family * nf;
  T.a.resize(size_t(T.n_tiles) * kM * T.k * eb);
  T.b.resize(size_t(T.n_tiles) * kN * T.k * eb);
  T.c.resize(size_t(T.n_tiles) * kM * kN);
  T.d.assign(T.c.size(), 0.0f);
  std::mt19937_64 rng(seed * 1000003 + uint64_t(e));
  for (int tile = 0; tile < T.n_tiles; ++tile) {
    const Family f = Family(tile % nf);
    T.family.push_back(f);
    auto put = [&](uint8_t* dst, double x) {
      const uint16_t u = encode(e, f == Family::c_only ? 0.0 : x);
      std::memcpy(dst, &u, size_t(eb));
    };
    for (int x = 0; x < kM * T.k; ++x)
      put(&T.a[(size_t(tile) * kM * T.k + x) * eb], f == Family::subnormal ? subnormal_value(e, rng) : random_value(e, f, rng));
    for (int x = 0; x < kN * T.k; ++x) put(&T.b[(size_t(tile) * kN * T.k + x) * eb], random_value(e, f, rng));
    for (int i = 0; i < kM; ++i)
      for (int j = 0; j < kN; ++j) {
        double c = 0;
        if (f == Family::calibration) c = double(std::uniform_int_distribution<int>(-64, 64)(rng));
        else if (f == Family::subnormal)  // 0, or small against the products
          c = std::uniform_int_distribution<int>(0, 1)(rng) ? 0.0 : random_value(e, Family::subnormal, rng) * min_normal_of(e) * 0x1p-4;
        else if (f == Family::c_only) c = random_value(Elem::bf16, Family::spread, rng) * (1 + std::ldexp(double(rng() & 0x7fffff), -23));
        else if (f == Family::cancel) {
          // C close to minus the exact sum, so that the result is a small difference.
          double s = 0;
          for (int kk = 0; kk < T.k; ++kk)
            s += decode(e, &T.a[(size_t(tile) * kM * T.k + i * T.k + kk) * eb]) *
                 decode(e, &T.b[(size_t(tile) * kN * T.k + j * T.k + kk) * eb]);
          c = -s * (1 + std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), -std::uniform_int_distribution<int>(4, 20)(rng)));
        } else {
          c = random_value(Elem::bf16, Family::spread, rng) * std::ldexp(1.0, std::uniform_int_distribution<int>(-4, 4)(rng));
        }
        T.c[size_t(tile) * kM * kN + i * kN + j] = float(c);
      }
  }
  return T;
}

template <typename Tag, bool kWgmma>
void run_on_device(Tiles& T) {
  const int eb = bytes_of(T.elem);
  uint8_t *a, *b;
  float *c, *d;
  CUDA_OK(cudaMalloc(&a, T.a.size()));
  CUDA_OK(cudaMalloc(&b, T.b.size()));
  CUDA_OK(cudaMalloc(&c, T.c.size() * 4));
  CUDA_OK(cudaMalloc(&d, T.d.size() * 4));
  CUDA_OK(cudaMemcpy(a, T.a.data(), T.a.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b, T.b.data(), T.b.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(c, T.c.data(), T.c.size() * 4, cudaMemcpyHostToDevice));
  probe_kernel<Tag, kWgmma><<<T.n_tiles, 128>>>(a, b, c, d, T.k, eb);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(T.d.data(), d, T.d.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(d);
}

// A candidate model: how the K products are grouped into block steps, F, the subnormal rule, the final
// rounding.
// What a product's exponent is for the alignment: that of |a b| itself; that of |a|' |b|' with a
// subnormal operand counted at its format's smallest normal (reference/tensor_core_model.h); or the sum of
// the operands' exponent fields, e(a) + e(b) with e(x) = max(floor(log2 |x|), e_min): the product of two
// significands in [1, 2) can reach [2, 4), one binade above the sum of the exponents.
enum class Align { own, min_normal, exponent_fields };
const char* align_name(Align a) {
  switch (a) {
    case Align::own: return "product's own exponent";
    case Align::min_normal: return "subnormals at min normal";
    default: return "sum of exponent fields";
  }
}

struct Hypothesis {
  int b;             // products per step
  int interleave;    // 0: contiguous steps; g > 0: two steps, keys with (k / g) even first, then odd
  int F;
  Align align;
  bool final_rz;     // else round to nearest
  bool c_last = false;  // the steps start from 0 and C is added at the end by an fp32 add (RN)
  int steps(int k) const { return interleave ? 2 : (k + b - 1) / b; }
  std::string describe() const {
    char buf[200];
    if (interleave)
      std::snprintf(buf, sizeof buf, "2 steps of interleaved groups of %d, F=%d, %s, %s%s", interleave, F,
                    align_name(align), final_rz ? "RZ" : "RN", c_last ? ", then + C (RN)" : "");
    else
      std::snprintf(buf, sizeof buf, "steps of b=%d, F=%d, %s, %s%s", b, F, align_name(align), final_rz ? "RZ" : "RN",
                    c_last ? ", then + C (RN)" : "");
    return buf;
  }
};

// block_fma_step with the final rounding to nearest instead of toward zero (a rival hypothesis only).
float block_fma_step_rn(float c, const double* t, int n, int F, const double* align) {
  double mx = std::fabs(double(c));
  for (int i = 0; i < n; ++i) mx = std::fmax(mx, align[i]);
  if (!(mx < INFINITY) || mx == 0) return fc::block_fma_step(c, t, n, F, align);
  const int e = std::ilogb(mx);
  const double q = std::ldexp(1.0, e - F), iq = std::ldexp(1.0, F - e);
  double s = std::trunc(double(c) * iq);
  for (int i = 0; i < n; ++i) s += std::trunc(t[i] * iq);
  return float(s * q);
}

struct Outputs;
float model_output(const Hypothesis& h, const Outputs& o, int k);

float model_output_with(const Hypothesis& h, float c, const double* t, const double* al, int k) {
  auto step = [&](float acc, const double* tt, const double* aa, int n) {
    return h.final_rz ? fc::block_fma_step(acc, tt, n, h.F, aa) : block_fma_step_rn(acc, tt, n, h.F, aa);
  };
  float acc = h.c_last ? 0.0f : c;
  if (h.interleave) {
    double t0[64], a0[64], t1[64], a1[64];
    int n0 = 0, n1 = 0;
    for (int i = 0; i < k; ++i) {
      if ((i / h.interleave) % 2 == 0) t0[n0] = t[i], a0[n0++] = al[i];
      else t1[n1] = t[i], a1[n1++] = al[i];
    }
    acc = step(acc, t0, a0, n0);
    acc = step(acc, t1, a1, n1);
  } else {
    for (int i0 = 0; i0 < k; i0 += h.b) acc = step(acc, t + i0, al + i0, std::min(h.b, k - i0));
  }
  return h.c_last ? acc + c : acc;
}

bool same_bits(float x, float y) {
  if (std::isnan(x) && std::isnan(y)) return true;
  uint32_t a, b;
  std::memcpy(&a, &x, 4), std::memcpy(&b, &y, 4);
  return a == b;
}

struct Outputs {  // one element's inputs, decoded
  float c, d;
  Family family;
  std::vector<double> t, al_min, al_own, al_fields;
};

float model_output(const Hypothesis& h, const Outputs& o, int k) {
  const std::vector<double>& al = h.align == Align::own ? o.al_own : h.align == Align::min_normal ? o.al_min : o.al_fields;
  return model_output_with(h, o.c, o.t.data(), al.data(), k);
}

std::vector<Outputs> decode_outputs(const Tiles& T) {
  const int eb = bytes_of(T.elem), k = T.k;
  const double mn = min_normal_of(T.elem);
  std::vector<Outputs> out;
  out.reserve(size_t(T.n_tiles) * kM * kN);
  for (int tile = 0; tile < T.n_tiles; ++tile)
    for (int i = 0; i < kM; ++i)
      for (int j = 0; j < kN; ++j) {
        Outputs o;
        o.c = T.c[size_t(tile) * kM * kN + i * kN + j];
        o.d = T.d[size_t(tile) * kM * kN + i * kN + j];
        o.family = T.family[size_t(tile)];
        for (int kk = 0; kk < k; ++kk) {
          const double x = decode(T.elem, &T.a[(size_t(tile) * kM * k + i * k + kk) * eb]);
          const double y = decode(T.elem, &T.b[(size_t(tile) * kN * k + j * k + kk) * eb]);
          o.t.push_back(x * y);  // exact: at most 11 + 11 significant bits
          o.al_min.push_back(x == 0 || y == 0 ? 0.0 : fc::alignment_magnitude(x, mn) * fc::alignment_magnitude(y, mn));
          o.al_own.push_back(std::fabs(x * y));
          auto field = [&](double v) { return std::max(std::ilogb(v), std::ilogb(mn)); };
          o.al_fields.push_back(x == 0 || y == 0 ? 0.0 : std::ldexp(1.0, field(x) + field(y)));
        }
        out.push_back(std::move(o));
      }
  return out;
}

std::vector<Hypothesis> hypotheses(int k) {
  std::vector<Hypothesis> hs;
  for (int F = 10; F <= 28; ++F)
    for (Align al : {Align::own, Align::min_normal, Align::exponent_fields})
      for (bool rz : {true, false})
        for (bool c_last : {false, true}) {
          for (int b : {4, 8, 16, 32})
            if (b <= k) hs.push_back({b, 0, F, al, rz, c_last});
          if (k == 32)
            for (int g : {1, 2, 4, 8}) hs.push_back({16, g, F, al, rz, c_last});
        }
  return hs;
}

// The largest |D - exact| / (eps (|c| + sum |a_i|' |b_i|')) over the results, |x|' the alignment magnitude
// the budget charges (a subnormal operand at its format's smallest normal: docs/error-analysis.md §1):
// above 1, a bound of eps per instruction does not hold for them.
double worst_step_ratio(const std::vector<Outputs>& outs, double eps, const Outputs** at = nullptr) {
  double worst = 0;
  for (const Outputs& o : outs) {
    if (std::isnan(o.d)) continue;
    // c + sum t in double-double (TwoSum): far more exact than the bounds compared against.
    double hi = o.c, lo = 0, scale = std::fabs(double(o.c));
    for (size_t i = 0; i < o.t.size(); ++i) {
      const double x = o.t[i], sum = hi + x, bb = sum - hi, err = (hi - (sum - bb)) + (x - bb);
      hi = sum, lo += err, scale += o.al_min[i];
    }
    if (scale == 0) continue;
    const double r = std::fabs((double(o.d) - hi) - lo) / (eps * scale);
    if (r > worst) {
      worst = r;
      if (at) *at = &o;
    }
  }
  return worst;
}

struct Fit {
  size_t results = 0, calibration = 0, calibration_exact = 0;
  std::vector<Hypothesis> models;  // every candidate, best first
  std::vector<size_t> hits;        // bit-exact results per candidate, same order
};

// Every candidate model against every result (the calibration family first: a mismatch there is the
// harness's fragment layout, and the fit is not attempted).
Fit fit(const Tiles& T, const std::vector<Outputs>& outs) {
  Fit r;
  r.results = outs.size();
  for (const Outputs& o : outs) {
    if (o.family != Family::calibration) continue;
    double s = o.c;
    for (double x : o.t) s += x;
    ++r.calibration;
    if (same_bits(float(s), o.d)) ++r.calibration_exact;
    else if (r.calibration - r.calibration_exact <= 3)
      std::printf("  calibration mismatch: expected %g, got %g\n", s, double(o.d));
  }
  if (r.calibration_exact != r.calibration) return r;
  const std::vector<Hypothesis> hs = hypotheses(T.k);
  std::vector<size_t> hits(hs.size(), 0);
  std::vector<std::thread> pool;
  const unsigned nthreads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  for (unsigned w = 0; w < nthreads; ++w)
    pool.emplace_back([&, w] {
      for (size_t h = w; h < hs.size(); h += nthreads)
        for (const Outputs& o : outs)
          hits[h] += same_bits(model_output(hs[h], o, T.k), o.d);
    });
  for (auto& th : pool) th.join();
  std::vector<size_t> order(hs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return hits[x] > hits[y]; });
  for (size_t i : order) {
    r.models.push_back(hs[i]);
    r.hits.push_back(hits[i]);
  }
  return r;
}

int report(const char* instr, const Tiles& T) {
  const std::vector<Outputs> outs = decode_outputs(T);
  const Fit f = fit(T, outs);
  std::printf("\n## %s %s (K = %d): %zu results; calibration %zu/%zu exact\n", instr, name_of(T.elem), T.k,
              outs.size(), f.calibration_exact, f.calibration);
  if (f.models.empty()) return 1;
  std::printf("| model | bit-exact |\n|---|---|\n");
  for (size_t r = 0; r < std::min<size_t>(8, f.models.size()); ++r)
    std::printf("| %s | %zu / %zu (%.4f%%) |\n", f.models[r].describe().c_str(), f.hits[r], outs.size(),
                100.0 * double(f.hits[r]) / double(outs.size()));
  // Per family, for the best model: where its misses are.
  const Hypothesis& best = f.models[0];
  for (int fam = 0; fam < int(Family::count); ++fam) {
    size_t n = 0, ok = 0;
    for (const Outputs& o : outs)
      if (o.family == Family(fam)) {
        ++n;
        ok += same_bits(model_output(best, o, T.k), o.d);
      }
    std::printf("  best model on %-11s: %zu / %zu\n", family_name(Family(fam)), ok, n);
  }
  int shown = 0;
  for (const Outputs& o : outs) {
    const float m = model_output(best, o, T.k);
    if (same_bits(m, o.d) || shown >= 3) continue;
    ++shown;
    std::printf("  miss (%s): c = %a, device %a, model %a\n", family_name(o.family), double(o.c), double(o.d), double(m));
  }
  // Soundness, which does not depend on a bit-exact fit: the largest |D - exact| / (eps (|c| + sum
  // |a_i|' |b_i|')) over every result, eps for the instruction's K products: the error budget's (its
  // steps of b, each eps_step, what it charges a kernel today), and the best model's ((b + 1) 2^-F + 2^-23
  // per step, one more 2^-24 when C is added last). Above 1, that bound does not hold.
  const fc::BlockFmaModel bm = fc::tensor_core_model(recipe_of(T.elem));
  const double eps_budget = bm.step_bound() * double((T.k + bm.b - 1) / bm.b);
  const double eps_best_step = (double((best.interleave ? 16 : best.b) + 1) * std::ldexp(1.0, -best.F) + 0x1p-23) *
                                   double(best.steps(T.k)) + (best.c_last ? 0x1p-24 : 0.0);
  const double worst_budget = worst_step_ratio(outs, eps_budget), worst_best = worst_step_ratio(outs, eps_best_step);
  std::printf("  largest |D - exact| / (eps (|c| + sum |a|'|b|')): %.4f with the budget's eps %.3g, %.4f with the best "
              "model's %.3g\n", worst_budget, eps_budget, worst_best, eps_best_step);
  // The model the emulation executes for this operand type (reference/tensor_core_model.h, measured for
  // mma.sync), among the candidates.
  const fc::BlockFmaModel m = fc::tensor_core_model(recipe_of(T.elem));
  for (size_t h = 0; h < f.models.size(); ++h) {
    const Hypothesis& x = f.models[h];
    const Align rule = m.exponent_fields ? Align::exponent_fields : Align::min_normal;
    const bool same_steps = m.fp16_halves ? x.interleave == 2 && x.c_last : x.b == m.b && !x.interleave && !x.c_last;
    if (same_steps && x.F == m.F && x.align == rule && x.final_rz)
      std::printf("  the emulation's model (%s): %zu / %zu\n", x.describe().c_str(), f.hits[h], outs.size());
  }
  return 0;
}

// The fitter on results made by a known model instead of a GPU: that model must match every result, and
// the data must tell it from its neighbours (one bit fewer, half the step, the other subnormal rule).
// Runs without a GPU (ctest label cpu).
int self_test(uint64_t seed) {
  struct Case {
    Elem e;
    Hypothesis truth;
  };
  const Case cases[] = {{Elem::bf16, {16, 0, 25, Align::min_normal, true}},
                        {Elem::fp16, {8, 0, 24, Align::own, true}},
                        {Elem::fp16, {16, 0, 25, Align::exponent_fields, true}},
                        {Elem::e4m3, {16, 2, 13, Align::min_normal, true}},
                        {Elem::e5m2, {32, 0, 13, Align::exponent_fields, false}},
                        {Elem::bf16, {8, 0, 25, Align::exponent_fields, true, true}}};
  int failures = 0;
  for (const Case& c : cases) {
    Tiles T = make_tiles(c.e, 8, seed);
    std::vector<Outputs> outs = decode_outputs(T);
    for (size_t x = 0; x < outs.size(); ++x) {
      const Outputs& o = outs[x];
      T.d[x] = o.family == Family::calibration
                   ? float(o.c + [&] { double s = 0; for (double v : o.t) s += v; return s; }())
                   : model_output(c.truth, o, T.k);
    }
    outs = decode_outputs(T);
    const Fit f = fit(T, outs);
    auto hits_of = [&](const Hypothesis& h) -> size_t {
      for (size_t i = 0; i < f.models.size(); ++i)
        if (f.models[i].describe() == h.describe()) return f.hits[i];
      return 0;
    };
    Hypothesis fewer = c.truth, shorter = c.truth, other_rule = c.truth;
    fewer.F -= 1;
    shorter.b /= 2, shorter.interleave = 0;
    other_rule.align = other_rule.align == Align::min_normal ? Align::exponent_fields : Align::min_normal;
    // The model's own bound holds for what it computes (the soundness check's control).
    const double eps_truth = (double((c.truth.interleave ? 16 : c.truth.b) + 1) * std::ldexp(1.0, -c.truth.F) + 0x1p-23) *
                                 double(c.truth.steps(T.k)) + (c.truth.c_last ? 0x1p-24 : 0.0);
    const double within = worst_step_ratio(outs, eps_truth);
    const bool ok = !f.models.empty() && hits_of(c.truth) == f.results && hits_of(fewer) < f.results &&
                    hits_of(shorter) < f.results && hits_of(other_rule) < f.results && within <= 1.0;
    std::printf("self-test %s, truth %s: %s (truth %zu / %zu; F-1 %zu, b/2 %zu, other alignment rule %zu; its bound "
                "used %.3f)\n", name_of(c.e), c.truth.describe().c_str(), ok ? "recovered" : "NOT RECOVERED",
                hits_of(c.truth), f.results, hits_of(fewer), hits_of(shorter), hits_of(other_rule), within);
    failures += !ok;
  }
  return failures ? 1 : 0;
}

template <typename Tag, bool kWgmma>
Tiles probe(const char* instr, Elem e, int per_family, uint64_t seed, int& rc) {
  Tiles T = make_tiles(e, per_family, seed);
  run_on_device<Tag, kWgmma>(T);
  rc |= report(instr, T);
  return T;
}

// wgmma and mma.sync on the same inputs (same seed): how many results are the same bits.
void compare(const Tiles& mma, const Tiles& wg) {
  size_t same = 0;
  for (size_t x = 0; x < mma.d.size(); ++x) same += same_bits(mma.d[x], wg.d[x]);
  std::printf("\nwgmma and mma.sync, %s, same inputs: %zu / %zu results identical\n", name_of(mma.elem), same,
              mma.d.size());
}

}  // namespace

int main(int argc, char** argv) {
  int per_family = 64;
  uint64_t seed = 1;
  bool self = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--self-test") self = true;
    else if (a == "--tiles-per-family" && i + 1 < argc) per_family = std::atoi(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "tensor_core_probe: unknown argument '%s'\nusage: tensor_core_probe [--self-test] [--tiles-per-family N] [--seed S]\n", a.c_str());
      return 2;
    }
  }
  if (per_family < 1) {
    std::fprintf(stderr, "tensor_core_probe: --tiles-per-family must be >= 1\n");
    return 2;
  }
  if (self) return self_test(seed);
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "tensor_core_probe: no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# Tensor-core accumulation on %s (sm_%d%d), %d tiles of 64 x 8 per input family, seed %llu\n",
              prop.name, prop.major, prop.minor, per_family, static_cast<unsigned long long>(seed));
  int rc = 0;
  const Tiles m16 = probe<MmaF16, false>("mma.sync m16n8k16", Elem::fp16, per_family, seed, rc);
  const Tiles mb16 = probe<MmaBF16, false>("mma.sync m16n8k16", Elem::bf16, per_family, seed, rc);
  const Tiles m43 = probe<MmaE4M3, false>("mma.sync m16n8k32", Elem::e4m3, per_family, seed, rc);
  const Tiles m52 = probe<MmaE5M2, false>("mma.sync m16n8k32", Elem::e5m2, per_family, seed, rc);
  compare(m16, probe<WgmmaF16, true>("wgmma m64n8k16", Elem::fp16, per_family, seed, rc));
  compare(mb16, probe<WgmmaBF16, true>("wgmma m64n8k16", Elem::bf16, per_family, seed, rc));
  compare(m43, probe<WgmmaE4M3, true>("wgmma m64n8k32", Elem::e4m3, per_family, seed, rc));
  compare(m52, probe<WgmmaE5M2, true>("wgmma m64n8k32", Elem::e5m2, per_family, seed, rc));
  return rc;
}
