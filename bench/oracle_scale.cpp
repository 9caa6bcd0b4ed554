// Our CUDA kernel judged by the GPU oracle at production shapes, everything on the device: random inputs
// (N(0,1), one rounding to the recipe's format, a counter-based generator so any shape is reproducible
// from its seed), the kernel's forward on device buffers, then reference + budget + verdict on the GPU
// for the plan the kernel reports. Prints the verdict, each stage's device time and the peak memory.
//
//   oracle_scale --plugin libflashcheck_cuda_plugin.so [--b 1] [--h 16] [--n 16384] [--nk N] [--d 128]
//                [--recipe bf16|fp16|e4m3|e5m2] [--causal] [--seed 1]
// The kernel is any plugin that takes device buffers (include/flashcheck/plugin.h), ours by default.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "flashcheck/plugin.h"
#include "reference/gpu_oracle.h"

namespace {

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    const cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Element x of tensor t: a standard normal (Box-Muller on two hashed uniforms), in float.
float normal(uint64_t seed, int t, uint64_t x) {
  const uint64_t h = mix(seed * 0x100000001B3ull ^ (uint64_t(t) << 56) ^ x);
  const double u1 = (double(h >> 11) + 0.5) * 0x1p-53, u2 = (double(mix(h) >> 11) + 0.5) * 0x1p-53;
  return float(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// Fills n elements of tensor t in the recipe's storage, on all cores.
std::vector<unsigned char> make_tensor(int recipe, uint64_t seed, int t, size_t n, float descale) {
  const size_t w = recipe == FC_RECIPE_FP16 || recipe == FC_RECIPE_BF16 ? 2 : 1;
  std::vector<unsigned char> out(n * w);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned k = 0; k < threads; ++k)
    pool.emplace_back([&, k] {
      for (size_t x = n * k / threads; x < n * (k + 1) / threads; ++x) {
        const float v = normal(seed, t, x) / descale;
        if (recipe == FC_RECIPE_BF16) {
          const __nv_bfloat16 b = __float2bfloat16_rn(v);
          std::memcpy(&out[x * 2], &b, 2);
        } else if (recipe == FC_RECIPE_FP16) {
          const __half b = __float2half_rn(v);
          std::memcpy(&out[x * 2], &b, 2);
        } else if (recipe == FC_RECIPE_FP8_E4M3) {
          out[x] = __nv_fp8_e4m3(v).__x;
        } else {
          out[x] = __nv_fp8_e5m2(v).__x;
        }
      }
    });
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int B = 1, H = 16, d = 128, recipe = FC_RECIPE_BF16;
  int64_t N = 16384, NK = 0;
  bool causal = false;
  uint64_t seed = 1;
  std::string plugin_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--b") B = std::atoi(next().c_str());
    else if (a == "--h") H = std::atoi(next().c_str());
    else if (a == "--n") N = std::atoll(next().c_str());
    else if (a == "--nk") NK = std::atoll(next().c_str());
    else if (a == "--d") d = std::atoi(next().c_str());
    else if (a == "--causal") causal = true;
    else if (a == "--seed") seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--plugin") plugin_path = next();
    else if (a == "--recipe") {
      const std::string r = next();
      recipe = r == "bf16" ? FC_RECIPE_BF16 : r == "fp16" ? FC_RECIPE_FP16 : r == "e4m3" ? FC_RECIPE_FP8_E4M3
             : r == "e5m2" ? FC_RECIPE_FP8_E5M2 : -1;
      if (recipe < 0) { std::fprintf(stderr, "--recipe: bf16, fp16, e4m3 or e5m2\n"); return 2; }
    } else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  if (NK <= 0) NK = N;
  if (plugin_path.empty()) { std::fprintf(stderr, "--plugin PATH is required\n"); return 2; }
  void* handle = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) { std::fprintf(stderr, "cannot load %s: %s\n", plugin_path.c_str(), dlerror()); return 2; }
  auto entry = reinterpret_cast<fc_plugin_entry_fn>(dlsym(handle, FC_PLUGIN_ENTRY_SYMBOL));
  const fc_plugin* plugin = entry ? entry() : nullptr;
  if (!plugin || plugin->abi_version != FC_ABI_VERSION) { std::fprintf(stderr, "%s: not an ABI v2 plugin\n", plugin_path.c_str()); return 2; }
  const bool fp8 = recipe == FC_RECIPE_FP8_E4M3 || recipe == FC_RECIPE_FP8_E5M2;
  const float descale = fp8 ? 0.125f : 1.0f;  // fp8: stored = value * 8, a power of two
  const size_t nq = size_t(B) * H * N * d, nk = size_t(B) * H * NK * d;
  const auto t0 = std::chrono::steady_clock::now();
  const auto hq = make_tensor(recipe, seed, 0, nq, descale), hk = make_tensor(recipe, seed, 1, nk, descale),
             hv = make_tensor(recipe, seed, 2, nk, descale);
  const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  void *dq, *dk, *dv, *dout;
  float* dlse;
  CHECK_CUDA(cudaMalloc(&dq, hq.size()));
  CHECK_CUDA(cudaMalloc(&dk, hk.size()));
  CHECK_CUDA(cudaMalloc(&dv, hv.size()));
  CHECK_CUDA(cudaMalloc(&dout, nq * 2));
  CHECK_CUDA(cudaMalloc(&dlse, size_t(B) * H * N * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dq, hq.data(), hq.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, hk.data(), hk.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, hv.data(), hv.size(), cudaMemcpyHostToDevice));

  fc_problem p{};
  p.batch = B, p.heads_q = H, p.heads_kv = H, p.n_q = N, p.n_k = NK, p.d = d, p.dv = d;
  p.scale = 1.0 / std::sqrt(double(d));
  p.mask = causal ? FC_MASK_CAUSAL_BOTTOM_RIGHT : FC_MASK_NONE;
  p.recipe = recipe;
  p.q_descale = p.k_descale = p.v_descale = descale;
  fc_buffers b{};
  b.memory = FC_MEMORY_DEVICE;
  b.q = fc_tensor{dq, {int64_t(H) * N * d, int64_t(N) * d, d, 1}};
  b.k = fc_tensor{dk, {int64_t(H) * NK * d, int64_t(NK) * d, d, 1}};
  b.v = fc_tensor{dv, {int64_t(H) * NK * d, int64_t(NK) * d, d, 1}};
  b.o = fc_tensor{dout, {int64_t(H) * N * d, int64_t(N) * d, d, 1}};
  b.lse = dlse;
  fc_run_plan plan{};
  b.plan = &plan;
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  CHECK_CUDA(cudaEventRecord(e0));
  char message[1024] = {};
  const fc_status st = plugin->forward(&p, &b, message, sizeof message);
  CHECK_CUDA(cudaEventRecord(e1));
  CHECK_CUDA(cudaEventSynchronize(e1));
  if (st != FC_OK) { std::fprintf(stderr, "kernel: status %d: %s\n", int(st), message); return 1; }
  float kernel_ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&kernel_ms, e0, e1));

  fc::Problem fp;
  fp.batch = B, fp.heads_q = H, fp.heads_kv = H, fp.n_q = N, fp.n_k = NK, fp.d = d, fp.dv = d;
  if (causal) fp.window = fc::Window::causal(fc::Align::bottom_right);
  fc::gpu::BudgetRequest req;
  req.options.recipe = fc::Recipe(recipe);
  req.options.q_descale = req.options.k_descale = req.options.v_descale = descale;
  req.options.num_splits = plan.num_splits;
  req.options.l_from_fp32_p = plan.l_convention == FC_L_FP32_P;
  req.options.two_level_accum = plan.two_level_accum == FC_YES;
  req.options.accumulation = fc::Accumulation::tensor_core;
  req.tile_n = plan.step_n;
  const auto t1 = std::chrono::steady_clock::now();
  const fc::gpu::Verdict v = fc::gpu::judge_on_device(fp, req, fc::gpu::DeviceTensors{dq, dk, dv, dout, dlse}, 8);
  const double oracle_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  std::printf("shape B=%d H=%d Nq=%lld Nk=%lld d=%d %s%s; inputs %.1f s; plan tile %dx%d step %d splits %d\n", B, H,
              (long long)N, (long long)NK, d, recipe == FC_RECIPE_BF16 ? "bf16" : recipe == FC_RECIPE_FP16 ? "fp16" : fp8 && recipe == FC_RECIPE_FP8_E4M3 ? "e4m3" : "e5m2",
              causal ? " causal" : "", gen_s, plan.tile_m, plan.tile_n, plan.step_n, plan.num_splits);
  std::printf("kernel %.3f ms; oracle reference %.3f s, budget %.3f s, verdict %.3f s, total %.3f s (wall %.3f s)\n",
              kernel_ms, v.timing.reference_s, v.timing.budget_s, v.timing.verdict_s,
              v.timing.reference_s + v.timing.budget_s + v.timing.verdict_s, oracle_wall);
  std::printf("memory: tensors %.2f GiB, oracle workspace %.2f GiB\n",
              double(hq.size() + hk.size() + hv.size() + nq * 2 + size_t(B) * H * N * 4) / (1 << 30),
              double(v.timing.peak_device_bytes) / (1 << 30));
  std::printf("verdict %s: %llu elements, %llu violations (%llu NaN/inf), max error/bound %.4g, LSE max %.4g, rmse %.3g\n",
              v.verdict.violations ? "FAIL" : "PASS", (unsigned long long)v.verdict.elements,
              (unsigned long long)v.verdict.violations, (unsigned long long)v.verdict.nan_mismatches, v.verdict.max_ratio,
              v.verdict.max_lse_ratio, v.verdict.rmse());
  for (const auto& w : v.verdict.worst)
    std::printf("  worst %s[%zu] got %.9g want %.9g err %.3g bound %.3g\n", w.is_lse ? "LSE" : "O", w.index, w.got,
                w.want, w.error, w.bound);
  return v.verdict.violations ? 1 : 0;
}
