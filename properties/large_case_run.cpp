#include "properties/large_case_run.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "kernels/plugin/plugin_abi.h"
#include "properties/cuda/device_inputs.h"

namespace fc {

namespace {

// A device allocation that refuses with its size.
struct DeviceMemory {
  void* p = nullptr;
  explicit DeviceMemory(size_t bytes) {
    const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error("large case: cudaMalloc of " + std::to_string(bytes >> 20) +
                               " MiB failed: " + cudaGetErrorString(e));
    }
  }
  ~DeviceMemory() { cudaFree(p); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("large case: ") + what + ": " + cudaGetErrorString(e));
}

struct Event {
  cudaEvent_t e = nullptr;
  Event() { check(cudaEventCreate(&e), "event"); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

}  // namespace

LargeResult run_large_case(const fc_plugin& plugin, const Capabilities& caps, const LargeCase& c) {
  const Problem& p = c.problem;
  p.validate();
  if (auto why = unsupported(caps, p, c.options)) throw SubjectRefused(*why);
  const RecipeSpec& rs = recipe_spec(c.options.recipe);
  const size_t in_b = storage_bytes(rs.input), out_b = storage_bytes(rs.output);
  const size_t nq = size_t(p.batch) * p.heads_q * p.n_q * p.d, nk = size_t(p.batch) * p.heads_kv * p.n_k * p.d;
  const size_t no = size_t(p.batch) * p.heads_q * p.n_q * p.dv, rows = size_t(p.batch) * p.heads_q * p.n_q;
  LargeResult r;
  r.device_gib = double((nq + 2 * nk) * in_b + no * out_b + rows * sizeof(float)) / double(1 << 30);
  DeviceMemory q(nq * in_b), k(nk * in_b), v(nk * in_b), o(no * out_b), lse(rows * sizeof(float)),
      lengths(p.key_lengths.size() * sizeof(int32_t));
  const int recipe = int(c.options.recipe);
  const float descale = float(c.options.q_descale);
  check(fill_normal_on_device(q.p, nq, recipe, c.seed, 0, descale), "inputs");
  check(fill_normal_on_device(k.p, nk, recipe, c.seed, 1, descale), "inputs");
  check(fill_normal_on_device(v.p, nk, recipe, c.seed, 2, descale), "inputs");
  std::vector<int32_t> kl(p.key_lengths.begin(), p.key_lengths.end());
  if (!kl.empty()) check(cudaMemcpy(lengths.p, kl.data(), kl.size() * sizeof(int32_t), cudaMemcpyHostToDevice), "key lengths");
  const fc_problem fp = to_fc_problem(p, c.options, kl.empty() ? nullptr : static_cast<const int32_t*>(lengths.p));
  fc_run_plan plan{};
  fc_buffers b{};
  b.memory = FC_MEMORY_DEVICE;
  b.q = contiguous_tensor(q.p, p.heads_q, p.n_q, p.d);
  b.k = contiguous_tensor(k.p, p.heads_kv, p.n_k, p.d);
  b.v = contiguous_tensor(v.p, p.heads_kv, p.n_k, p.dv);
  b.o = contiguous_tensor(o.p, p.heads_q, p.n_q, p.dv);
  b.lse = caps.lse ? static_cast<float*>(lse.p) : nullptr;  // a subject without an LSE is judged on O alone
  b.plan = &plan;
  Event e0, e1;
  check(cudaEventRecord(e0.e), "event");
  char message[2048] = {};
  const fc_status st = plugin.forward(&fp, &b, message, sizeof message);
  check(cudaEventRecord(e1.e), "event");
  const cudaError_t done = cudaEventSynchronize(e1.e);
  cudaEventElapsedTime(&r.kernel_ms, e0.e, e1.e);
  if (st == FC_ERR_UNSUPPORTED) throw SubjectRefused(message);
  if (st == FC_ERR_OUT_OF_MEMORY) throw SubjectOutOfMemory(std::string("forward() ran out of memory: ") + message);
  if (st == FC_ERR_STICKY) throw SubjectSticky(std::string("forward() left the process unusable: ") + message);
  if (st != FC_OK) throw SubjectError(std::string("forward() failed with ") + status_name(st) + ": " + message);
  check(done, "the subject's kernel");
  r.basis = budget_basis(caps, c.options, decode_run_plan(plan, c.options, p));
  const gpu::BudgetRequest req{r.basis.options, r.basis.tile_n, r.basis.both_l_conventions, r.basis.both_accumulations};
  r.verdict = gpu::judge_on_device(p, req, gpu::DeviceTensors{q.p, k.p, v.p, o.p, b.lse}, 8);
  return r;
}

}  // namespace fc
