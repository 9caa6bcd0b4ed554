// Our CUDA kernel judged by the GPU oracle at fixed production shapes, everything on the device: each
// shape runs as a large-shape case (properties/large_case_run.h: inputs N(0,1) made on the device from the
// seed, the kernel's forward on device buffers, reference + budget + verdict on the GPU for the plan the
// kernel reports, read as the check pipeline reads it). Prints, per shape, the verdict, each stage's device
// time and the memory; with --markdown, one table row per shape.//
//   oracle_scale --plugin libflashcheck_cuda_plugin.so [--b 1] [--h 16] [--n 16384] [--nk N] [--d 128]
//                [--recipe bf16|fp16|e4m3|e5m2] [--causal] [--seed 1]
//   oracle_scale --plugin ... --shape B:H:N:d:recipe:causal[:NK] [--shape ...]
//   oracle_scale --plugin ... --grid [--recipes fp16,bf16,e4m3,e5m2] [--markdown FILE]
// --grid is the benchmark's grid (bench/sdpa_compare.py, the FA-3 paper's): d 64/128/256, N 512 ... 16k,
// B = 16k / N, H = 2048 / d, causal and not. The exit status is 1 when any shape has a violation or fails.
// The kernel is any plugin that takes device buffers (include/flashcheck/plugin.h), ours by default.
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "flashcheck/plugin.h"
#include "kernels/plugin/plugin_abi.h"
#include "properties/large_case_run.h"

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

struct Result {
  bool ok = false;
  std::string error;
  fc::LargeResult run;  // verdict, budget basis, kernel time, tensor memory
  double wall_s = 0;    // inputs, kernel and oracle
};

// The shape as a large-shape case (properties/large_case_run.h makes its inputs on the device, runs the
// plugin on them and judges there): N(0,1) inputs from the seed, fp8 stored as value * 8 (a power of two).
Result run_shape(const fc_plugin* plugin, const fc::Capabilities& caps, const Shape& s, uint64_t seed) {
  fc::LargeCase c;
  fc::Problem& p = c.problem;
  p.batch = s.b, p.heads_q = p.heads_kv = s.h, p.n_q = s.n, p.n_k = s.nk, p.d = p.dv = s.d;
  if (s.causal) p.window = fc::Window::causal(fc::Align::bottom_right);
  c.options.recipe = fc::Recipe(s.recipe);
  if (fc::is_fp8(c.options.recipe)) c.options.q_descale = c.options.k_descale = c.options.v_descale = 0.125;
  c.options.num_splits = 0;  // the kernel's choice
  c.seed = seed;
  Result r;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.run = fc::run_large_case(*plugin, caps, c);
    r.ok = true;
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double oracle_s(const Result& r) {
  const fc::gpu::Timing& t = r.run.verdict.timing;
  return t.reference_s + t.budget_s + t.verdict_s;
}

void print_result(const Shape& s, const Result& r) {
  std::printf("shape B=%d H=%d Nq=%lld Nk=%lld d=%d %s%s (Q: %.3g elements)\n", s.b, s.h, (long long)s.n,
              (long long)s.nk, s.d, recipe_name(s.recipe), s.causal ? " causal" : "",
              double(s.b) * s.h * double(s.n) * s.d);
  if (!r.ok) {
    std::printf("  ERROR %s\n", r.error.c_str());
    return;
  }
  const auto& v = r.run.verdict;
  std::printf("  budget for %s; kernel %.3f ms\n", r.run.basis.describe().c_str(), r.run.kernel_ms);
  std::printf("  oracle reference %.3f s, budget %.3f s, verdict %.3f s, total %.3f s (wall with inputs and kernel "
              "%.3f s)\n", v.timing.reference_s, v.timing.budget_s, v.timing.verdict_s, oracle_s(r), r.wall_s);
  std::printf("  memory: tensors %.2f GiB, oracle workspace %.2f GiB\n", r.run.device_gib,
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
    all_pass = all_pass && r.ok && r.run.verdict.verdict.violations == 0;
    char row[512];
    if (r.ok) {
      total_oracle += oracle_s(r);
      std::snprintf(row, sizeof row, "| %s | %d | %lld | %d | %d | %s | %.3f | %llu | %llu | %.4g | %.4g | %.2f |\n",
                    recipe_name(s.recipe), s.d, (long long)s.n, s.b, s.h, s.causal ? "yes" : "no", r.run.kernel_ms,
                    (unsigned long long)r.run.verdict.verdict.elements, (unsigned long long)r.run.verdict.verdict.violations,
                    r.run.verdict.verdict.max_ratio, r.run.verdict.verdict.max_lse_ratio, oracle_s(r));
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
