// Throughput bench of the CUDA subjects over the FA-3 paper grid: B*N = 16k tokens, H = 2048/d,
// d in {64, 128, 256}, N in {512 .. 16k}, causal and not, fp16/bf16/fp8. Timing: CUDA events around each
// launch on device-resident random data, 3 warm-up runs, then the median of --reps runs.
// FLOPs = 4*B*H*N^2*d, halved for causal.
//
//   bench_fused_attention [--recipes fp16,bf16,e4m3] [--dims 64,128,256] [--seqs 512,...] [--reps 20]
//                         [--tile M N] [--splits S] [--flags F] [--tile-sweep] [--naive-memory] [--decode]
//                         [--skip-grid] [--csv FILE]
// --flags: fc_problem.flags for the grid (1 = FC_FLAG_L_FROM_FP32_P, 2 = FC_FLAG_TWO_LEVEL_ACCUM).
// --skip-grid: only the --decode / --naive-memory parts (one forward per shape: what ncu should profile,
//   e.g. ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum bench_fused_attention --skip-grid --naive-memory).
// --decode: split-KV check on decode-like shapes (B=1, H=16, d=128, bf16, Nq in {1,16}, long Nk), no split
// vs the automatic split count.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "flashcheck/plugin.h"
#include "fused_attention.h"
#include "kernels/tile_policy.h"

namespace fcc = flashcheck::cuda;

namespace {

#define CHECK_CUDA(x)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::atoi(item.c_str()));
  return v;
}
int recipe_of(const std::string& s) {
  if (s == "fp32") return FC_RECIPE_FP32;
  if (s == "fp16") return FC_RECIPE_FP16;
  if (s == "bf16") return FC_RECIPE_BF16;
  if (s == "e4m3") return FC_RECIPE_FP8_E4M3;
  if (s == "e5m2") return FC_RECIPE_FP8_E5M2;
  std::fprintf(stderr, "unknown recipe %s\n", s.c_str());
  std::exit(2);
}
int bytes_of(int r) { return r == FC_RECIPE_FP32 ? 4 : (r >= FC_RECIPE_FP8_E4M3 ? 1 : 2); }

// Random bit patterns of plausible values: N(0,1) rounded to the format (fp8 scaled x8, descale 1/8).
void fill_random(std::vector<unsigned char>& buf, int recipe, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int b = bytes_of(recipe);
  buf.resize(n * b);
  for (size_t i = 0; i < n; ++i) {
    float x = nd(rng);
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (b == 4) {
      std::memcpy(&buf[i * 4], &x, 4);
    } else if (recipe == FC_RECIPE_BF16) {
      const uint16_t h = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
      std::memcpy(&buf[i * 2], &h, 2);
    } else if (recipe == FC_RECIPE_FP16) {
      // |x| < 8 here: normal fp16 range; round mantissa 23 -> 10 bits (ties away is fine for bench data).
      const uint32_t sign = (u >> 16) & 0x8000;
      const int e = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
      uint16_t h;
      if (e <= 0) h = static_cast<uint16_t>(sign);
      else h = static_cast<uint16_t>(sign | (e << 10) | (((u & 0x7FFFFF) + 0x1000) >> 13));
      std::memcpy(&buf[i * 2], &h, 2);
    } else {
      // fp8 e4m3 (bias 7) / e5m2 (bias 15) of 8x: keep it simple, exponent and top mantissa bits.
      const float y = x * 8.0f;
      std::memcpy(&u, &y, 4);
      const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
      const int mb = recipe == FC_RECIPE_FP8_E4M3 ? 3 : 2, bias = recipe == FC_RECIPE_FP8_E4M3 ? 7 : 15;
      int e = static_cast<int>((u >> 23) & 0xFF) - 127 + bias;
      e = std::min(e, recipe == FC_RECIPE_FP8_E4M3 ? 15 : 30);
      const uint8_t m = static_cast<uint8_t>((u & 0x7FFFFF) >> (23 - mb));
      buf[i] = e <= 0 ? sign : static_cast<uint8_t>(sign | (e << mb) | (recipe == FC_RECIPE_FP8_E4M3 && e == 15 ? std::min<int>(m, 6) : m));
    }
  }
}

struct Opts {
  std::vector<int> recipes{FC_RECIPE_FP16, FC_RECIPE_BF16, FC_RECIPE_FP8_E4M3};
  std::vector<int> dims{64, 128, 256};
  std::vector<int> seqs{512, 1024, 2048, 4096, 8192, 16384};
  int reps = 20, tile_m = 0, tile_n = 0, splits = 0;
  bool tile_sweep = false, naive_memory = false, decode = false, skip_grid = false;
  uint32_t flags = 0;
  std::string csv;
};

double time_forward(const fc_problem& p, const fc_buffers& b, int reps) {
  cudaStream_t s = static_cast<cudaStream_t>(b.stream);
  for (int i = 0; i < 3; ++i) {
    const fcc::Status st = fcc::forward(fcc::Subject::kFused, p, b);
    if (!st.ok()) {
      std::fprintf(stderr, "forward failed: %s\n", st.message.c_str());
      std::exit(1);
    }
  }
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(e0, s));
    fcc::forward(fcc::Subject::kFused, p, b);
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

const char* rname(int r) {
  static const char* n[] = {"fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2"};
  return n[r];
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--recipes") {
      o.recipes.clear();
      std::stringstream ss(next());
      std::string it;
      while (std::getline(ss, it, ',')) o.recipes.push_back(recipe_of(it));
    } else if (a == "--dims") o.dims = parse_list(next());
    else if (a == "--seqs") o.seqs = parse_list(next());
    else if (a == "--reps") o.reps = std::atoi(next().c_str());
    else if (a == "--tile") { o.tile_m = std::atoi(next().c_str()); o.tile_n = std::atoi(next().c_str()); }
    else if (a == "--splits") o.splits = std::atoi(next().c_str());
    else if (a == "--tile-sweep") o.tile_sweep = true;
    else if (a == "--naive-memory") o.naive_memory = true;
    else if (a == "--skip-grid") o.skip_grid = true;
    else if (a == "--flags") o.flags = static_cast<uint32_t>(std::strtoul(next().c_str(), nullptr, 0));
    else if (a == "--decode") o.decode = true;
    else if (a == "--csv") o.csv = next();
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  int dev = 0;
  CHECK_CUDA(cudaSetDevice(dev));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (csv) std::fprintf(csv, "recipe,d,N,B,H,causal,tile_m,tile_n,splits,ms,tflops\n");
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  std::printf("%-5s %4s %6s %3s %3s %6s %9s %8s %9s\n", "recipe", "d", "N", "B", "H", "causal", "tile", "ms", "TFLOP/s");
  for (int recipe : o.skip_grid ? std::vector<int>{} : o.recipes)
    for (int d : o.dims) {
      const int H = 2048 / d;
      const size_t elems = size_t(16384) * H * d;  // B*N = 16k tokens
      std::vector<unsigned char> hq, hk, hv;
      fill_random(hq, recipe, elems, 1);
      fill_random(hk, recipe, elems, 2);
      fill_random(hv, recipe, elems, 3);
      void *dq, *dk, *dv, *dout;
      const int ib = bytes_of(recipe), ob = recipe == FC_RECIPE_FP32 ? 4 : 2;
      CHECK_CUDA(cudaMalloc(&dq, elems * ib));
      CHECK_CUDA(cudaMalloc(&dk, elems * ib));
      CHECK_CUDA(cudaMalloc(&dv, elems * ib));
      CHECK_CUDA(cudaMalloc(&dout, elems * ob));
      CHECK_CUDA(cudaMemcpy(dq, hq.data(), elems * ib, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(dk, hk.data(), elems * ib, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaMemcpy(dv, hv.data(), elems * ib, cudaMemcpyHostToDevice));
      for (int N : o.seqs)
        for (int causal : {0, 1}) {
          const int B = 16384 / N;
          fc_problem p{};
          p.batch = B; p.heads_q = H; p.heads_kv = H; p.n_q = N; p.n_k = N; p.d = d; p.dv = d;
          p.scale = 1.0 / std::sqrt(double(d));
          p.mask = causal ? FC_MASK_CAUSAL_TOP_LEFT : FC_MASK_NONE;
          p.recipe = recipe;
          p.q_descale = p.k_descale = p.v_descale = recipe >= FC_RECIPE_FP8_E4M3 ? 0.125f : 1.0f;
          p.num_splits = o.splits;
          p.flags = o.flags;
          fc_buffers b{};
          b.memory = FC_MEMORY_DEVICE;
          const int64_t st[4] = {int64_t(H) * N * d, int64_t(N) * d, d, 1};
          b.q = fc_tensor{dq, {st[0], st[1], st[2], st[3]}};
          b.k = fc_tensor{dk, {st[0], st[1], st[2], st[3]}};
          b.v = fc_tensor{dv, {st[0], st[1], st[2], st[3]}};
          b.o = fc_tensor{dout, {st[0], st[1], st[2], st[3]}};
          b.stream = stream;
          std::vector<std::pair<int, int>> tiles;
          if (o.tile_sweep) {
            for (int t = 0; t < fc::tiles::kNumTileOptions; ++t) {
              const auto ts = fc::tiles::tile_options(d, t);
              tiles.push_back({ts.m, ts.n});
            }
          } else {
            tiles.push_back({o.tile_m, o.tile_n});
          }
          for (auto [tm, tn] : tiles) {
            p.tile_m = tm; p.tile_n = tn;
            fcc::LaunchPlan lp;
            fcc::plan(fcc::Subject::kFused, p, &lp);
            const double ms = time_forward(p, b, o.reps);
            const double flops = 4.0 * B * H * double(N) * N * d / (causal ? 2.0 : 1.0);
            const double tf = flops / ms / 1e9;
            std::printf("%-6s %4d %6d %3d %3d %6s %4dx%-4d %8.3f %9.1f\n", rname(recipe), d, N, B, H, causal ? "yes" : "no",
                        lp.tile_m, lp.tile_n, ms, tf);
            if (csv)
              std::fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%.4f,%.2f\n", rname(recipe), d, N, B, H, causal, lp.tile_m,
                           lp.tile_n, lp.num_splits, ms, tf);
          }
        }
      CHECK_CUDA(cudaFree(dq));
      CHECK_CUDA(cudaFree(dk));
      CHECK_CUDA(cudaFree(dv));
      CHECK_CUDA(cudaFree(dout));
    }
  if (o.decode) {
    std::printf("\nsplit-KV, B=1 H=16 d=128 bf16 (time in ms, median)\n%5s %7s %10s %10s %8s\n", "Nq", "Nk",
                "splits=1", "auto", "splits");
    for (int nq : {1, 16})
      for (int nk : {16384, 131072}) {
        const int H = 16, d = 128;
        std::vector<unsigned char> hq, hk;
        fill_random(hq, FC_RECIPE_BF16, size_t(H) * nq * d, 4);
        fill_random(hk, FC_RECIPE_BF16, size_t(H) * nk * d, 5);
        void *dq, *dk, *dout;
        CHECK_CUDA(cudaMalloc(&dq, hq.size()));
        CHECK_CUDA(cudaMalloc(&dk, hk.size()));
        CHECK_CUDA(cudaMalloc(&dout, hq.size()));
        CHECK_CUDA(cudaMemcpy(dq, hq.data(), hq.size(), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(dk, hk.data(), hk.size(), cudaMemcpyHostToDevice));
        fc_problem p{};
        p.batch = 1; p.heads_q = H; p.heads_kv = H; p.n_q = nq; p.n_k = nk; p.d = d; p.dv = d;
        p.scale = 1.0 / std::sqrt(double(d)); p.recipe = FC_RECIPE_BF16;
        fc_buffers b{};
        b.memory = FC_MEMORY_DEVICE;
        b.q = fc_tensor{dq, {int64_t(H) * nq * d, int64_t(nq) * d, d, 1}};
        b.k = fc_tensor{dk, {int64_t(H) * nk * d, int64_t(nk) * d, d, 1}};
        b.v = b.k;
        b.o = fc_tensor{dout, {int64_t(H) * nq * d, int64_t(nq) * d, d, 1}};
        b.stream = stream;
        p.num_splits = 1;
        const double t1 = time_forward(p, b, o.reps);
        p.num_splits = 0;
        fcc::LaunchPlan lp;
        fcc::plan(fcc::Subject::kFused, p, &lp);
        const double ta = time_forward(p, b, o.reps);
        std::printf("%5d %7d %10.3f %10.3f %8d\n", nq, nk, t1, ta, lp.num_splits);
        CHECK_CUDA(cudaFree(dq)); CHECK_CUDA(cudaFree(dk)); CHECK_CUDA(cudaFree(dout));
      }
  }
  if (o.naive_memory) {
    // Peak device memory of one forward (B=1, H=16, d=128, bf16): fused vs naive (S and P materialised).
    std::printf("\npeak extra device memory, B=1 H=16 d=128 bf16\n%6s %14s %14s\n", "N", "fused MiB", "naive MiB");
    for (int N : {512, 1024, 2048, 4096, 8192}) {
      double peak[2] = {0, 0};
      for (int which = 0; which < 2; ++which) {
        const size_t elems = size_t(16) * N * 128;
        void *dq, *dk, *dv, *dout;
        CHECK_CUDA(cudaMalloc(&dq, elems * 2)); CHECK_CUDA(cudaMalloc(&dk, elems * 2));
        CHECK_CUDA(cudaMalloc(&dv, elems * 2)); CHECK_CUDA(cudaMalloc(&dout, elems * 2));
        CHECK_CUDA(cudaMemset(dq, 0x3c, elems * 2)); CHECK_CUDA(cudaMemset(dk, 0x3c, elems * 2));
        CHECK_CUDA(cudaMemset(dv, 0x3c, elems * 2));
        CHECK_CUDA(cudaDeviceSynchronize());
        // Stream-ordered allocations come from the default pool: its high-water mark is the peak.
        cudaMemPool_t pool;
        CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, dev));
        uint64_t zero = 0;
        CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
        fc_problem p{};
        p.batch = 1; p.heads_q = 16; p.heads_kv = 16; p.n_q = N; p.n_k = N; p.d = 128; p.dv = 128;
        p.scale = 1.0 / std::sqrt(128.0); p.recipe = FC_RECIPE_BF16; p.num_splits = 1;
        fc_buffers b{};
        b.memory = FC_MEMORY_DEVICE;
        const int64_t st[4] = {int64_t(16) * N * 128, int64_t(N) * 128, 128, 1};
        b.q = fc_tensor{dq, {st[0], st[1], st[2], st[3]}}; b.k = fc_tensor{dk, {st[0], st[1], st[2], st[3]}};
        b.v = fc_tensor{dv, {st[0], st[1], st[2], st[3]}}; b.o = fc_tensor{dout, {st[0], st[1], st[2], st[3]}};
        const fcc::Status s = fcc::forward(which ? fcc::Subject::kNaive : fcc::Subject::kFused, p, b);
        CHECK_CUDA(cudaDeviceSynchronize());
        uint64_t high = 0;
        CHECK_CUDA(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
        peak[which] = s.ok() ? double(high) / (1 << 20) : -1;
        CHECK_CUDA(cudaFree(dq)); CHECK_CUDA(cudaFree(dk)); CHECK_CUDA(cudaFree(dv)); CHECK_CUDA(cudaFree(dout));
      }
      std::printf("%6d %14.1f %14.1f\n", N, peak[0], peak[1]);
    }
  }
  if (csv) std::fclose(csv);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
