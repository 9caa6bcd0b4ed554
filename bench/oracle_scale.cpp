// Our CUDA kernel judged by the GPU oracle at production shapes, everything on the device: random inputs
// (properties/cuda/device_inputs.h: N(0,1), one rounding to the recipe's format, reproducible from the seed), the
// kernel's forward on device buffers, then reference + budget + verdict on the GPU for the plan the kernel
// reports, read as the check pipeline reads it (kernels/plugin/plugin_abi.h, budget_basis: what the plan
// leaves unknown is budgeted on the conservative side). Prints, per shape, the verdict, each stage's device time and the memory; with --markdown, one
// table row per shape.
//
//   oracle_scale --plugin libflashcheck_cuda_plugin.so [--b 1] [--h 16] [--n 16384] [--nk N] [--d 128]
//                [--recipe bf16|fp16|e4m3|e5m2] [--causal] [--seed 1]
//   oracle_scale --plugin ... --shape B:H:N:d:recipe:causal[:NK] [--shape ...]
//   oracle_scale --plugin ... --grid [--recipes fp16,bf16,e4m3,e5m2] [--markdown FILE]
// --grid is the benchmark's grid (bench/sdpa_compare.py, the FA-3 paper's): d 64/128/256, N 512 ... 16k,
// B = 16k / N, H = 2048 / d, causal and not. The exit status is 1 when any shape has a violation or fails.
// The kernel is any plugin that takes device buffers (include/flashcheck/plugin.h), ours by default.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "properties/cuda/device_inputs.h"
#include "flashcheck/plugin.h"
#include "kernels/plugin/plugin_abi.h"
#include "properties/check_pipeline.h"
#include "reference/gpu_oracle.h"

namespace {

struct Shape {
  int b = 1, h = 16, d = 128, recipe = FC_RECIPE_BF16;
  int64_t n = 16384, nk = 0;
  bool causal = false;
};

const char* recipe_name(int r) {
  return r == FC_RECIPE_BF16 ? "bf16" : r == FC_RECIPE_FP16 ? "fp16" : r == FC_RECIPE_FP8_E4M3 ? "e4m3" : "e5m2";
}
int recipe_of(const std::string& r) {
  return r == "bf16" ? FC_RECIPE_BF16 : r == "fp16" ? FC_RECIPE_FP16 : r == "e4m3" ? FC_RECIPE_FP8_E4M3
         : r == "e5m2" ? FC_RECIPE_FP8_E5M2 : -1;
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, sep);) out.push_back(x);
  return out;
}
[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "oracle_scale: %s\n", why.c_str());
  std::exit(2);
}

// Device memory released on scope exit.
struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(size_t bytes) {
    const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    if (e != cudaSuccess)
      throw std::runtime_error("cudaMalloc of " + std::to_string(bytes >> 20) + " MiB: " + cudaGetErrorString(e));
  }
  ~DeviceMemory() { cudaFree(p); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Result {
  bool ok = false;
  std::string error;
  fc::gpu::Verdict v;
  float kernel_ms = 0;
  double oracle_wall = 0, tensors_gib = 0;
  fc_run_plan plan{};
};

Result run_shape(const fc_plugin* plugin, const fc::Capabilities& caps, const Shape& s, uint64_t seed) {
  Result r;
  const bool fp8 = s.recipe == FC_RECIPE_FP8_E4M3 || s.recipe == FC_RECIPE_FP8_E5M2;
  const float descale = fp8 ? 0.125f : 1.0f;  // fp8: stored = value * 8, a power of two
  const size_t in_b = fp8 ? 1 : 2, nq = size_t(s.b) * s.h * s.n * s.d, nk = size_t(s.b) * s.h * s.nk * s.d;
  const size_t rows = size_t(s.b) * s.h * s.n;
  r.tensors_gib = double((nq + 2 * nk) * in_b + nq * 2 + rows * 4) / (1 << 30);
  try {
    DeviceMemory q(nq * in_b), k(nk * in_b), v(nk * in_b), o(nq * 2), lse(rows * sizeof(float));
    check(fill_normal_on_device(q.p, nq, s.recipe, seed, 0, descale), "inputs");
    check(fill_normal_on_device(k.p, nk, s.recipe, seed, 1, descale), "inputs");
    check(fill_normal_on_device(v.p, nk, s.recipe, seed, 2, descale), "inputs");
    fc_problem p{};
    p.batch = s.b, p.heads_q = s.h, p.heads_kv = s.h, p.n_q = s.n, p.n_k = s.nk, p.d = s.d, p.dv = s.d;
    p.scale = 1.0 / std::sqrt(double(s.d));
    p.mask = s.causal ? FC_MASK_CAUSAL_BOTTOM_RIGHT : FC_MASK_NONE;
    p.recipe = s.recipe;
    p.q_descale = p.k_descale = p.v_descale = descale;
    fc_buffers b{};
    b.memory = FC_MEMORY_DEVICE;
    b.q = fc_tensor{q.p, {int64_t(s.h) * s.n * s.d, s.n * s.d, s.d, 1}};
    b.k = fc_tensor{k.p, {int64_t(s.h) * s.nk * s.d, s.nk * s.d, s.d, 1}};
    b.v = fc_tensor{v.p, {int64_t(s.h) * s.nk * s.d, s.nk * s.d, s.d, 1}};
    b.o = fc_tensor{o.p, {int64_t(s.h) * s.n * s.d, s.n * s.d, s.d, 1}};
    b.lse = static_cast<float*>(lse.p);
    b.plan = &r.plan;
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "event");
    check(cudaEventCreate(&e1), "event");
    check(cudaEventRecord(e0), "event");
    char message[1024] = {};
    const fc_status st = plugin->forward(&p, &b, message, sizeof message);
    check(cudaEventRecord(e1), "event");
    check(cudaEventSynchronize(e1), "kernel");
    cudaEventElapsedTime(&r.kernel_ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (st != FC_OK) throw std::runtime_error("kernel status " + std::to_string(int(st)) + ": " + message);

    fc::Problem fp;
    fp.batch = s.b, fp.heads_q = s.h, fp.heads_kv = s.h, fp.n_q = s.n, fp.n_k = s.nk, fp.d = s.d, fp.dv = s.d;
    if (s.causal) fp.window = fc::Window::causal(fc::Align::bottom_right);
    fc::RunOptions asked;  // what the forward above asked: the recipe and its descales, the rest the kernel's
    asked.recipe = fc::Recipe(s.recipe);
    asked.q_descale = asked.k_descale = asked.v_descale = descale;
    asked.num_splits = 0;
    const fc::BudgetBasis basis = fc::budget_basis(caps, asked, fc::decode_run_plan(r.plan, asked, fp));
    const fc::gpu::BudgetRequest req{basis.options, basis.tile_n, basis.both_l_conventions, basis.both_accumulations};
    const auto t1 = std::chrono::steady_clock::now();
    r.v = fc::gpu::judge_on_device(fp, req, fc::gpu::DeviceTensors{q.p, k.p, v.p, o.p, b.lse}, 8);
    r.oracle_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

double oracle_s(const Result& r) { return r.v.timing.reference_s + r.v.timing.budget_s + r.v.timing.verdict_s; }

void print_result(const Shape& s, const Result& r) {
  std::printf("shape B=%d H=%d Nq=%lld Nk=%lld d=%d %s%s (Q: %.3g elements)\n", s.b, s.h, (long long)s.n,
              (long long)s.nk, s.d, recipe_name(s.recipe), s.causal ? " causal" : "",
              double(s.b) * s.h * double(s.n) * s.d);
  if (!r.ok) {
    std::printf("  ERROR %s\n", r.error.c_str());
    return;
  }
  const auto& v = r.v;
  std::printf("  plan tile %dx%d step %d splits %d; kernel %.3f ms\n", r.plan.tile_m, r.plan.tile_n, r.plan.step_n,
              r.plan.num_splits, r.kernel_ms);
  std::printf("  oracle reference %.3f s, budget %.3f s, verdict %.3f s, total %.3f s (wall %.3f s)\n",
              v.timing.reference_s, v.timing.budget_s, v.timing.verdict_s, oracle_s(r), r.oracle_wall);
  std::printf("  memory: tensors %.2f GiB, oracle workspace %.2f GiB\n", r.tensors_gib,
              double(v.timing.peak_device_bytes) / (1 << 30));
  std::printf("  verdict %s: %llu elements, %llu violations (%llu NaN/inf), max error/bound %.4g, LSE max %.4g, "
              "rmse %.3g\n",
              v.verdict.violations ? "FAIL" : "PASS", (unsigned long long)v.verdict.elements,
              (unsigned long long)v.verdict.violations, (unsigned long long)v.verdict.nan_mismatches,
              v.verdict.max_ratio, v.verdict.max_lse_ratio, v.verdict.rmse());
  for (const auto& w : v.verdict.worst)
    std::printf("    worst %s[%zu] got %.9g want %.9g err %.3g bound %.3g\n", w.is_lse ? "LSE" : "O", w.index, w.got,
                w.want, w.error, w.bound);
  std::fflush(stdout);
}

// Writes the table so far (whole rows only: a file beside it, then renamed over it).
bool write_table(const std::string& path, const std::string& table) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool written = f && std::fputs(table.c_str(), f) >= 0;
  if (f) written = std::fclose(f) == 0 && written;
  if (written && std::rename(tmp.c_str(), path.c_str()) == 0) return true;
  std::remove(tmp.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Shape one;
  std::vector<Shape> shapes;
  bool grid = false;
  std::vector<std::string> grid_recipes{"fp16", "bf16", "e4m3", "e5m2"};
  uint64_t seed = 1;
  std::string plugin_path, markdown;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto positive = [&](const std::string& x) {
      char* end = nullptr;
      const long long v = std::strtoll(x.c_str(), &end, 10);
      if (end == x.c_str() || *end || v <= 0) usage(a + ": '" + x + "' is not a positive integer");
      return v;
    };
    if (a == "--b") one.b = int(positive(next()));
    else if (a == "--h") one.h = int(positive(next()));
    else if (a == "--n") one.n = positive(next());
    else if (a == "--nk") one.nk = positive(next());
    else if (a == "--d") one.d = int(positive(next()));
    else if (a == "--causal") one.causal = true;
    else if (a == "--seed") seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--plugin") plugin_path = next();
    else if (a == "--markdown") markdown = next();
    else if (a == "--grid") grid = true;
    else if (a == "--recipes") grid_recipes = split(next(), ',');
    else if (a == "--recipe") {
      if ((one.recipe = recipe_of(next())) < 0) usage("--recipe: bf16, fp16, e4m3 or e5m2");
    } else if (a == "--shape") {
      const auto f = split(next(), ':');
      if (f.size() < 6 || f.size() > 7) usage("--shape B:H:N:d:recipe:causal[:NK]");
      Shape s;
      s.b = int(positive(f[0])), s.h = int(positive(f[1])), s.n = positive(f[2]), s.d = int(positive(f[3]));
      if ((s.recipe = recipe_of(f[4])) < 0) usage("--shape: recipe bf16, fp16, e4m3 or e5m2");
      s.causal = f[5] == "1";
      s.nk = f.size() == 7 ? positive(f[6]) : s.n;
      shapes.push_back(s);
    } else usage("unknown argument " + a);
  }
  if (plugin_path.empty()) usage("--plugin PATH is required");
  if (grid) {
    for (const std::string& rn : grid_recipes) {
      const int rc = recipe_of(rn);
      if (rc < 0) usage("--recipes: bf16, fp16, e4m3 or e5m2");
      for (int d : {64, 128, 256})
        for (int causal : {0, 1})
          for (int64_t n = 512; n <= 16384; n *= 2) {
            Shape s;
            s.b = int(16384 / n), s.h = 2048 / d, s.n = s.nk = n, s.d = d, s.recipe = rc, s.causal = causal != 0;
            shapes.push_back(s);
          }
    }
  }
  if (shapes.empty()) {
    if (one.nk <= 0) one.nk = one.n;
    shapes.push_back(one);
  }
  void* handle = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) usage("cannot load " + plugin_path + ": " + dlerror());
  auto entry = reinterpret_cast<fc_plugin_entry_fn>(dlsym(handle, FC_PLUGIN_ENTRY_SYMBOL));
  const fc_plugin* plugin = entry ? entry() : nullptr;
  if (!plugin || plugin->abi_version != FC_ABI_VERSION) usage(plugin_path + ": not an ABI v2 plugin");
  fc_capabilities raw_caps{};
  char caps_message[1024] = {};
  if (plugin->capabilities(&raw_caps, caps_message, sizeof caps_message) != FC_OK)
    usage(plugin_path + ": capabilities() failed: " + caps_message);
  const fc::Capabilities caps = fc::to_capabilities(raw_caps);

  std::string table =
      "| recipe | d | N | B | H | causal | kernel ms | elements | violations | max err/bound | LSE max | oracle s |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  bool all_pass = true;
  double total_oracle = 0;
  for (const Shape& s : shapes) {
    const Result r = run_shape(plugin, caps, s, seed);
    print_result(s, r);
    all_pass = all_pass && r.ok && r.v.verdict.violations == 0;
    char row[512];
    if (r.ok) {
      total_oracle += oracle_s(r);
      std::snprintf(row, sizeof row, "| %s | %d | %lld | %d | %d | %s | %.3f | %llu | %llu | %.4g | %.4g | %.2f |\n",
                    recipe_name(s.recipe), s.d, (long long)s.n, s.b, s.h, s.causal ? "yes" : "no", r.kernel_ms,
                    (unsigned long long)r.v.verdict.elements, (unsigned long long)r.v.verdict.violations,
                    r.v.verdict.max_ratio, r.v.verdict.max_lse_ratio, oracle_s(r));
    } else {
      std::snprintf(row, sizeof row, "| %s | %d | %lld | %d | %d | %s | error: %s |||||| \n", recipe_name(s.recipe), s.d,
                    (long long)s.n, s.b, s.h, s.causal ? "yes" : "no", r.error.substr(0, 200).c_str());
    }
    table += row;
    if (!markdown.empty() && !write_table(markdown, table)) {
      std::fprintf(stderr, "oracle_scale: cannot write %s\n", markdown.c_str());
      return 2;
    }
  }
  std::printf("%zu shapes, %s; oracle device time %.1f s in all\n", shapes.size(),
              all_pass ? "all PASS" : "NOT all PASS", total_oracle);
  return all_pass ? 0 : 1;
}
