// The GPU oracle's host side (reference/gpu_oracle.h): sizes and refuses before allocating, uploads what
// a host caller gives, launches the reference, the budget (once per l convention and accumulation model
// the basis leaves open, merged by the elementwise maximum, as properties/check_pipeline.cpp merges on
// the CPU) and the verdict, and brings back only the verdict.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "reference/cuda/oracle_types.h"
#include "reference/formats.h"
#include "reference/gpu_oracle.h"

namespace fc::gpu {

namespace {

using namespace detail;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("GPU oracle: ") + what + ": " + cudaGetErrorString(e));
}

// Device memory released on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { check(cudaMalloc(&ptr, n ? n : 16), "cudaMalloc"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr) cudaFree(ptr);
      ptr = o.ptr, bytes = o.bytes;
      o.ptr = nullptr;
    }
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

Storage storage_of(Format f) {
  switch (f) {
    case Format::fp32:
    case Format::tf32: return Storage::f32;
    case Format::fp16: return Storage::f16;
    case Format::bf16: return Storage::bf16;
    case Format::e4m3: return Storage::e4m3;
    case Format::e5m2: return Storage::e5m2;
    default: throw std::invalid_argument("GPU oracle: no storage for format fp64");
  }
}
size_t storage_bytes(Storage s) { return s == Storage::f32 ? 4 : (s == Storage::f16 || s == Storage::bf16) ? 2 : 1; }

constexpr unsigned long long kWorstCap = 1 << 16;

Shape shape_of(const Problem& p, const RunOptions& o) {
  const RecipeSpec& rs = recipe_spec(o.recipe);
  const bool fp8 = o.recipe == Recipe::fp8_e4m3 || o.recipe == Recipe::fp8_e5m2;
  Shape s{};
  s.batch = p.batch, s.heads_q = p.heads_q, s.heads_kv = p.heads_kv, s.group = p.heads_q / p.heads_kv;
  s.d = p.d, s.dv = p.dv, s.n_q = p.n_q, s.n_k = p.n_k;
  s.window_active = p.window.active();
  s.bottom_right = p.window.align == Align::bottom_right;
  s.left = p.window.left, s.right = p.window.right;
  s.in = storage_of(rs.input == Format::tf32 ? Format::fp32 : rs.input);
  s.out = storage_of(rs.output);
  s.qd = fp8 ? o.q_descale : 1.0, s.kd = fp8 ? o.k_descale : 1.0, s.vd = fp8 ? o.v_descale : 1.0;
  s.scale = p.effective_scale();
  return s;
}

BudgetParams params_of(const BudgetConstants& k, bool merge_max) {
  BudgetParams b{};
  b.tile_n = k.tile_n, b.tile_unknown = k.tile_unknown, b.tc = k.tc, b.simt = k.simt, b.fp8 = k.fp8, b.fa1 = k.fa1;
  b.two_level = k.two_level, b.l_fp32 = k.l_fp32, b.op_round = k.op_term;
  b.split = k.splits_opt > 1, b.splits_opt = k.splits_opt, b.splits_known = k.splits_unknown ? 0 : k.splits_opt;
  b.block = k.block, b.uP = k.uP, b.S = k.S, b.theta_ftz = k.theta_ftz, b.theta_abs = k.theta_abs, b.thresh = k.thresh;
  b.mn_op = k.mn_op, b.mn_p = k.mn_p, b.trunc_step = k.trunc_step, b.step = k.step, b.eps_s = k.eps_s, b.abs_s = k.abs_s;
  b.sigma = k.sigma, b.sgn = k.sgn, b.c32 = k.c32, b.eps_fin = k.eps_fin, b.u_out = k.u_out, b.out_abs = k.out_abs;
  b.lambda = kProbabilisticLambda;
  b.merge_max = merge_max;
  return b;
}

struct Events {
  cudaEvent_t e[4];
  Events() {
    for (auto& x : e) check(cudaEventCreate(&x), "cudaEventCreate");
  }
  ~Events() {
    for (auto& x : e) cudaEventDestroy(x);
  }
  double ms(int a, int b) const {
    float t = 0;
    cudaEventElapsedTime(&t, e[a], e[b]);
    return t;
  }
};

}  // namespace

bool oracle_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? std::string("no usable CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

DeviceFootprint oracle_footprint(const Problem& p, Recipe r) {
  const RecipeSpec& rs = recipe_spec(r);
  const size_t in_b = storage_bytes(storage_of(rs.input == Format::tf32 ? Format::fp32 : rs.input));
  const size_t out_b = storage_bytes(storage_of(rs.output));
  DeviceFootprint f;
  f.tensors = (p.q_size() + p.k_size() + p.v_size()) * in_b + p.o_size() * out_b + p.lse_size() * sizeof(float) +
              p.key_lengths.size() * sizeof(int64_t) + p.dense_mask.size();
  const size_t threads = size_t(1024) * 256;  // the verdict's grid at most
  f.workspace = p.o_size() * 5 * sizeof(double) + p.lse_size() * 4 * sizeof(double) +
                size_t(p.batch) * p.heads_kv * p.n_k * sizeof(double) + threads * sizeof(double) +
                kWorstCap * sizeof(Candidate) + sizeof(VerdictSums) + p.key_lengths.size() * sizeof(int64_t) +
                p.dense_mask.size();
  return f;
}

namespace {

// The device-side state of one judgement: masks, the reference, the budget.
struct Workspace {
  Shape s;
  DeviceBuffer key_lengths, dense, o_ref, o_err, lse_ref, lse_err, o_bound, o_bound_prob, lse_bound, lse_bound_prob,
      scale_a, key_vmax;
};

// The reference, then the budget once per way the basis leaves open (merged by the maximum).
void reference_and_budget(const Problem& p, const BudgetRequest& basis, const DeviceTensors& t, Workspace& w,
                          const Events& ev) {
  w.s = shape_of(p, basis.options);
  Shape& s = w.s;
  s.q = t.q, s.k = t.k, s.v = t.v;
  if (!p.key_lengths.empty()) {
    w.key_lengths = DeviceBuffer(p.key_lengths.size() * sizeof(int64_t));
    check(cudaMemcpy(w.key_lengths.ptr, p.key_lengths.data(), w.key_lengths.bytes, cudaMemcpyHostToDevice), "key lengths");
    s.key_lengths = w.key_lengths.as<int64_t>();
  }
  if (!p.dense_mask.empty()) {
    w.dense = DeviceBuffer(p.dense_mask.size());
    check(cudaMemcpy(w.dense.ptr, p.dense_mask.data(), w.dense.bytes, cudaMemcpyHostToDevice), "dense mask");
    s.dense = w.dense.as<uint8_t>();
  }
  const size_t no = p.o_size(), nl = p.lse_size();
  w.o_ref = DeviceBuffer(no * 8), w.o_err = DeviceBuffer(no * 8);
  w.lse_ref = DeviceBuffer(nl * 8), w.lse_err = DeviceBuffer(nl * 8);
  w.o_bound = DeviceBuffer(no * 8), w.o_bound_prob = DeviceBuffer(no * 8), w.scale_a = DeviceBuffer(no * 8);
  w.lse_bound = DeviceBuffer(nl * 8), w.lse_bound_prob = DeviceBuffer(nl * 8);
  w.key_vmax = DeviceBuffer(size_t(p.batch) * p.heads_kv * p.n_k * 8);
  check(cudaEventRecord(ev.e[0]), "event");
  check(launch_reference(s, ReferenceOut{w.o_ref.as<double>(), w.o_err.as<double>(), w.lse_ref.as<double>(),
                                         w.lse_err.as<double>()}),
        "reference kernel");
  check(cudaEventRecord(ev.e[1]), "event");

  check(launch_key_vmax(s, w.key_vmax.as<double>()), "key_vmax kernel");
  const BudgetIn in{w.o_ref.as<double>(), w.o_err.as<double>(), w.lse_ref.as<double>(), w.lse_err.as<double>(),
                    w.key_vmax.as<double>()};
  const BudgetOut out{w.o_bound.as<double>(), w.o_bound_prob.as<double>(), w.lse_bound.as<double>(),
                      w.lse_bound_prob.as<double>(), w.scale_a.as<double>()};
  bool first = true;
  for (bool l_fp32 : {false, true})
    for (Accumulation a : {Accumulation::tensor_core, Accumulation::ieee_fp32}) {
      RunOptions o = basis.options;
      if (basis.both_l_conventions) o.l_from_fp32_p = l_fp32;
      else if (l_fp32) continue;
      if (basis.both_accumulations) o.accumulation = a;
      else if (a == Accumulation::ieee_fp32) continue;
      check(launch_budget(s, params_of(budget_constants(p, o, basis.tile_n), !first), in, out), "budget kernel");
      first = false;
    }
  check(cudaEventRecord(ev.e[2]), "event");
}

std::vector<double> download(const DeviceBuffer& d, size_t n) {
  std::vector<double> x(n);
  if (n) check(cudaMemcpy(x.data(), d.ptr, n * sizeof(double), cudaMemcpyDeviceToHost), "download");
  return x;
}

Verdict judge(const Problem& p, const BudgetRequest& basis, const DeviceTensors& t, size_t keep_worst, Arrays* arrays) {
  p.validate();
  if (p.dv > 32 * kCols)
    throw std::invalid_argument("GPU oracle: dv = " + std::to_string(p.dv) + " exceeds " + std::to_string(32 * kCols));
  std::string why;
  if (!oracle_available(&why)) throw std::runtime_error("GPU oracle: " + why);
  // Refuse before allocating anything when the workspace does not fit.
  const DeviceFootprint need = oracle_footprint(p, basis.options.recipe);
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  if (need.workspace > free_b)
    throw std::runtime_error("GPU oracle: the problem needs " + std::to_string(need.workspace >> 20) +
                             " MiB of device workspace beside its tensors; " + std::to_string(free_b >> 20) +
                             " MiB are free");
  Verdict result;
  result.timing.peak_device_bytes = need.workspace;
  Events ev;
  Workspace w;
  reference_and_budget(p, basis, t, w, ev);
  const Shape& s = w.s;
  const size_t no = p.o_size(), nl = p.lse_size();

  // The verdict.
  const FormatSpec& of = spec(recipe_spec(basis.options.recipe).output);
  const VerdictIn vin{t.o, t.lse, w.o_ref.as<double>(), w.lse_ref.as<double>(), w.o_bound.as<double>(),
                      w.o_bound_prob.as<double>(), w.lse_bound.as<double>(), w.scale_a.as<double>(),
                      {of.precision, of.emin, of.emax, of.has_inf, of.max_finite}};
  DeviceBuffer sums(sizeof(VerdictSums));
  check(cudaMemset(sums.ptr, 0, sizeof(VerdictSums)), "memset");
  const int vblocks = int(std::min<int64_t>(1024, (int64_t(no + nl) + 255) / 256));
  DeviceBuffer best(size_t(vblocks) * 256 * sizeof(double));
  check(launch_verdict(s, vin, sums.as<VerdictSums>(), best.as<double>(), vblocks), "verdict kernel");
  std::vector<double> bests(size_t(vblocks) * 256);
  check(cudaMemcpy(bests.data(), best.ptr, best.bytes, cudaMemcpyDeviceToHost), "verdict");
  DeviceBuffer cand(kWorstCap * sizeof(Candidate)), count(sizeof(unsigned long long));
  check(cudaMemset(count.ptr, 0, sizeof(unsigned long long)), "memset");
  if (keep_worst > 0) {
    // The keep_worst-th largest of the threads' largest error/bound: at most the true keep_worst-th largest.
    std::sort(bests.begin(), bests.end(), std::greater<double>());
    const double threshold = std::max(0.0, bests[std::min(bests.size(), keep_worst) - 1]);
    check(launch_worst(s, vin, threshold, cand.as<Candidate>(), count.as<unsigned long long>(), kWorstCap, vblocks),
          "worst kernel");
  }
  check(cudaEventRecord(ev.e[3]), "event");
  check(cudaEventSynchronize(ev.e[3]), "synchronize");
  result.timing.reference_s = ev.ms(0, 1) / 1e3;
  result.timing.budget_s = ev.ms(1, 2) / 1e3;
  result.timing.verdict_s = ev.ms(2, 3) / 1e3;

  VerdictSums h{};
  check(cudaMemcpy(&h, sums.ptr, sizeof h, cudaMemcpyDeviceToHost), "verdict sums");
  auto bits = [](unsigned long long b) {
    double x;
    std::memcpy(&x, &b, sizeof x);
    return x;
  };
  BudgetVerdict& v = result.verdict;
  v.elements = h.elements, v.violations = h.violations, v.nan_mismatches = h.nan_mismatches;
  v.lse_checked = h.lse_checked, v.exceed_probabilistic = h.exceed_probabilistic;
  v.sum_ratio = h.sum_ratio, v.sum_scaled_ulps = h.sum_scaled_ulps, v.sum_sq_error = h.sum_sq_error;
  v.max_ratio = bits(h.max_ratio), v.max_ratio_probabilistic = bits(h.max_ratio_probabilistic);
  v.max_scaled_ulps = bits(h.max_scaled_ulps), v.max_abs_error = bits(h.max_abs_error);
  v.max_lse_ratio = bits(h.max_lse_ratio);
  result.ratio_histogram.assign(h.histogram, h.histogram + verdict::kHistSize);
  if (keep_worst > 0) {
    unsigned long long n_cand = 0;
    check(cudaMemcpy(&n_cand, count.ptr, sizeof n_cand, cudaMemcpyDeviceToHost), "worst count");
    std::vector<Candidate> c(std::min<unsigned long long>(n_cand, kWorstCap));
    if (!c.empty()) check(cudaMemcpy(c.data(), cand.ptr, c.size() * sizeof(Candidate), cudaMemcpyDeviceToHost), "worst");
    std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
      return a.ratio != b.ratio ? a.ratio > b.ratio : a.index < b.index;
    });
    for (size_t x = 0; x < c.size() && x < keep_worst; ++x)
      v.worst.push_back({size_t(c[x].index), c[x].is_lse != 0, c[x].got, c[x].want, c[x].err, c[x].bound,
                         c[x].scaled_ulps});
  }
  if (arrays) {
    arrays->ref.out.o = download(w.o_ref, no);
    arrays->ref.o_error_bound = download(w.o_err, no);
    arrays->ref.out.lse = download(w.lse_ref, nl);
    arrays->ref.lse_error_bound = download(w.lse_err, nl);
    arrays->budget.o_bound = download(w.o_bound, no);
    arrays->budget.o_bound_probabilistic = download(w.o_bound_prob, no);
    arrays->budget.lse_bound = download(w.lse_bound, nl);
    arrays->budget.lse_bound_probabilistic = download(w.lse_bound_prob, nl);
    arrays->budget.scale_a = download(w.scale_a, no);
    arrays->budget.tile_n = basis.tile_n;
  }
  return result;
}

}  // namespace

Verdict judge_on_device(const Problem& p, const BudgetRequest& basis, const DeviceTensors& t, size_t keep_worst) {
  return judge(p, basis, t, keep_worst, nullptr);
}

namespace {

// Exact values -> storage bits, as the plugin ABI passes them (fp8: value / descale).
DeviceBuffer upload(const std::vector<double>& values, Format f, double descale) {
  const Storage s = storage_of(f);
  const size_t w = storage_bytes(s);
  std::vector<unsigned char> bytes(values.size() * w);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t b = encode(f == Format::tf32 ? Format::fp32 : f, values[i] / descale);
    std::memcpy(bytes.data() + i * w, &b, w);
  }
  DeviceBuffer d(bytes.size());
  check(cudaMemcpy(d.ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "upload");
  return d;
}

}  // namespace

Verdict judge_host_data(const Problem& p, const BudgetRequest& basis, const AttentionInputs& in,
                        const std::vector<double>& o, const std::vector<double>& lse, size_t keep_worst, Arrays* arrays) {
  validate_inputs(p, in);
  if (o.size() != p.o_size()) throw std::invalid_argument("GPU oracle: O has the wrong size");
  if (!lse.empty() && lse.size() != p.lse_size()) throw std::invalid_argument("GPU oracle: LSE has the wrong size");
  const RecipeSpec& rs = recipe_spec(basis.options.recipe);
  const bool fp8 = basis.options.recipe == Recipe::fp8_e4m3 || basis.options.recipe == Recipe::fp8_e5m2;
  DeviceBuffer q = upload(in.q, rs.input, fp8 ? basis.options.q_descale : 1.0);
  DeviceBuffer k = upload(in.k, rs.input, fp8 ? basis.options.k_descale : 1.0);
  DeviceBuffer v = upload(in.v, rs.input, fp8 ? basis.options.v_descale : 1.0);
  DeviceBuffer dout = upload(o, rs.output, 1.0);
  DeviceBuffer dlse;
  if (!lse.empty()) {
    std::vector<float> f(lse.begin(), lse.end());
    dlse = DeviceBuffer(f.size() * sizeof(float));
    check(cudaMemcpy(dlse.ptr, f.data(), dlse.bytes, cudaMemcpyHostToDevice), "upload LSE");
  }
  return judge(p, basis, DeviceTensors{q.ptr, k.ptr, v.ptr, dout.ptr, lse.empty() ? nullptr : dlse.as<float>()},
               keep_worst, arrays);
}

}  // namespace fc::gpu
