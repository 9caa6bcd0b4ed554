// The GPU oracle's host side (reference/gpu_oracle.h): sizes and refuses before allocating, uploads what
// a host caller gives, launches the reference, the budget (once per l convention and accumulation model
// the basis leaves open, merged by the elementwise maximum, as properties/check_pipeline.cpp merges on
// the CPU) and the verdict, and brings back only the verdict.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
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

constexpr unsigned long long kWorstCap = 1 << 16;

Shape shape_of(const Problem& p, const RunOptions& o) {
  const RecipeSpec& rs = recipe_spec(o.recipe);
  const bool fp8 = is_fp8(o.recipe);
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
  b.p_floor = b.mn_p / b.S;
  b.merge_max = merge_max;
  b.tile_div = make_fast_div(uint32_t(b.tile_n));
  b.block_div = make_fast_div(uint32_t(b.tc ? b.block : 1));
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

namespace {

// The rows are judged in passes whose workspace stays under 2 GiB (FLASHCHECK_ORACLE_PASS_BYTES sets
// another limit; the agreement test uses it to judge small problems in many passes): whole (batch,
// head)s when they fit, else chunks of a head (multiples of kMaxRowsPerBlock rows, as the launches need).
// A byte count from the environment variable `name`, or `fallback` where it is not set.
size_t env_bytes(const char* name, size_t fallback) {
  if (const char* e = std::getenv(name)) {
    char* end = nullptr;
    const unsigned long long b = std::strtoull(e, &end, 10);
    if (end != e && *end == '\0') return size_t(b);
    throw std::invalid_argument(std::string("GPU oracle: ") + name + " = '" + e + "' is not a byte count");
  }
  return fallback;
}

size_t pass_bytes() { return env_bytes("FLASHCHECK_ORACLE_PASS_BYTES", size_t(2) << 30); }

size_t workspace_per_row(const Problem& p) { return size_t(p.dv) * 5 * sizeof(double) + 6 * sizeof(double); }

// The score cache (oracle_types.h): kScoreCachePlanes doubles per row and key of a pass, and a summary per
// row and chunk of 32 keys. It is optional, and capped apart from the workspace above
// (FLASHCHECK_ORACLE_CACHE_BYTES, 0 = none; default 32 GiB and at most a quarter of the free device memory,
// so that judgements on several threads still fit): passes shrink to fit it, but not below
// kMinCachedPassRows rows (128 blocks of 8 rows, about one wave of the budget kernel on an H200), where the
// budget recomputes the scores instead.
inline constexpr int64_t kMinCachedPassRows = 1024;
size_t score_cache_per_row(const Problem& p) {
  return size_t(p.n_k) * kScoreCachePlanes * sizeof(double) + size_t(summary_chunks(p.n_k)) * sizeof(ChunkSummary);
}
size_t score_cache_cap(size_t free_bytes) {
  return env_bytes("FLASHCHECK_ORACLE_CACHE_BYTES", std::min(size_t(32) << 30, free_bytes / 4));
}
// The rows per pass the cache allows (0: no cache) under `cap` bytes.
int64_t score_cache_rows(const Problem& p, size_t cap) {
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.n_q;
  const size_t per_row = score_cache_per_row(p);
  if (rows == 0 || per_row == 0) return 0;
  int64_t fit = int64_t(cap / per_row);
  if (fit >= rows) return rows;
  fit -= fit % kMaxRowsPerBlock;
  return fit >= kMinCachedPassRows ? fit : 0;
}

// The two-kernel budget's workspace (oracle_types.h BudgetWeights): optional like the cache, capped
// apart (FLASHCHECK_ORACLE_SPLIT_BYTES, 0 = the single kernel; default 16 GiB and at most a quarter of
// what is free once the cache is allocated): V as fp32, then the weights of as many blocks of rows as
// fit, which is how many a launch takes. Where not even one block fits, or the allocation fails, the
// single kernel runs.
size_t split_cap(size_t free_bytes) {
  return env_bytes("FLASHCHECK_ORACLE_SPLIT_BYTES", std::min(size_t(16) << 30, free_bytes / 4));
}

struct Pass {
  int64_t row0, rows;
};
// cache_rows > 0: passes of at most that many rows as well.
std::vector<Pass> plan_passes(const Problem& p, int64_t cache_rows = 0) {
  const int64_t heads = int64_t(p.batch) * p.heads_q, n_q = p.n_q;
  // Chunks of a head start at multiples of kKnotRows rows (a multiple of kMaxRowsPerBlock), so that a pass holds
  // the knot form's tiles whole.
  constexpr int64_t align = budget::kKnotRows;
  static_assert(budget::kKnotRows % kMaxRowsPerBlock == 0, "a tile is whole blocks of rows");
  int64_t per_pass = std::max<int64_t>(align, int64_t(pass_bytes() / workspace_per_row(p)));
  if (cache_rows > 0) per_pass = std::min(per_pass, std::max<int64_t>(align, cache_rows));
  per_pass -= per_pass % align;
  std::vector<Pass> passes;
  if (n_q == 0) return passes;
  if (n_q <= per_pass) {
    const int64_t heads_per_pass = per_pass / n_q;
    for (int64_t h = 0; h < heads; h += heads_per_pass)
      passes.push_back({h * n_q, std::min(heads_per_pass, heads - h) * n_q});
  } else {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n_q; i += per_pass) passes.push_back({h * n_q + i, std::min(per_pass, n_q - i)});
  }
  return passes;
}
int64_t max_pass_rows(const std::vector<Pass>& passes) {
  int64_t m = 0;
  for (const Pass& x : passes) m = std::max(m, x.rows);
  return m;
}

}  // namespace

DeviceFootprint oracle_footprint(const Problem& p, Recipe r) {
  const RecipeSpec& rs = recipe_spec(r);
  const size_t in_b = storage_bytes(storage_of(rs.input == Format::tf32 ? Format::fp32 : rs.input));
  const size_t out_b = storage_bytes(storage_of(rs.output));
  DeviceFootprint f;
  f.tensors = (p.q_size() + p.k_size() + p.v_size()) * in_b + p.o_size() * out_b + p.lse_size() * sizeof(float) +
              p.key_lengths.size() * sizeof(int64_t) + p.dense_mask.size();
  const size_t threads = size_t(1024) * 256;  // the verdict's grid at most
  f.workspace = size_t(max_pass_rows(plan_passes(p))) * workspace_per_row(p) +
                size_t(p.batch) * p.heads_kv * p.n_k * 2 * sizeof(double) + (threads + 2) * sizeof(double) +
                kWorstCap * sizeof(Candidate) + sizeof(VerdictSums) + p.key_lengths.size() * sizeof(int64_t) +
                p.dense_mask.size();
  return f;
}

namespace {

// The device-side state of one judgement: masks, the reference and budget of one pass, the verdict's
// accumulators.
struct Workspace {
  Shape s;
  DeviceBuffer key_lengths, dense, o_ref, o_err, lse_ref, lse_err, a_factor, a_floor, o_bound, o_bound_prob, lse_bound, lse_bound_prob,
      scale_a, key_vmax, key_vmin, sums, best, selected, cand, count, scores, split, detect, knots;
  BudgetWeights weights{};  // over `split`, when it is allocated
  int vblocks = 0;
  // The budgets read the reference's fill of the score cache (reference_and_budget); decided in the first
  // pass, for all.
  bool share_checked = false, share_scores = false;
};

// FLASHCHECK_ORACLE_POISON=1 fills the score cache and the two-kernel workspace with 0x7f bytes when they are
// allocated (finite doubles near 1.4e306, positive counts), so that a kernel that reads what no kernel wrote
// gets a wrong answer instead of whatever an earlier judgement left there (the agreement test sets it).
void poison_if_asked(void* ptr, size_t bytes) {
  const char* e = std::getenv("FLASHCHECK_ORACLE_POISON");
  if (ptr && e && std::strcmp(e, "1") == 0) check(cudaMemset(ptr, 0x7f, bytes), "poison");
}

// The two-kernel budget's workspace for passes of at most pass_rows rows, where the cap allows one block
// of rows at least; its bytes (0: the single kernel runs).
size_t allocate_split(const Problem& p, int64_t pass_rows, Workspace& w) {
  const int rows = budget_split_rows_per_block(p.d, p.dv);
  if (rows == 0 || p.n_k == 0) return 0;
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  // V as fp32 (16-byte aligned), then per row of a launch its weights, terms and masks.
  const size_t v32 = (size_t(p.batch) * p.heads_kv * size_t(p.n_k) * p.dv * sizeof(float) + 15) / 16 * 16;
  const size_t cap = split_cap(free_b), per_row = budget_split_bytes_per_row(p.n_k);
  if (cap <= v32) return 0;
  // A pass's blocks: its rows in blocks of `rows`, plus a partial block where each of its heads ends.
  const int64_t most = (pass_rows / rows + 2 + pass_rows / std::max<int64_t>(p.n_q, 1)) * rows;
  int64_t slots = std::min<int64_t>(most, int64_t((cap - v32) / per_row));
  slots -= slots % rows;
  if (slots < rows) return 0;
  const int64_t words = budget_split_words(p.n_k);
  const size_t w4 = size_t(slots) * size_t(p.n_k) * sizeof(float4);
  const size_t zeta = (size_t(slots) * size_t(p.n_k) * sizeof(float) + 15) / 16 * 16;
  const size_t masks = size_t(slots) * size_t(words) * sizeof(unsigned);
  const size_t rows_b = size_t(slots) * sizeof(RowTerms);
  const size_t tiles = size_t(slots) * size_t(words) * sizeof(double);
  const size_t bytes = v32 + w4 + zeta + rows_b + tiles + 3 * masks;
  if (cudaMalloc(&w.split.ptr, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    w.split.ptr = nullptr;
    return 0;
  }
  w.split.bytes = bytes;
  poison_if_asked(w.split.ptr, bytes);
  // V first (the allocation's alignment: the sums kernel copies V and the weights 16 bytes at a time),
  // then the weights, the row terms and the tile maxima (8-byte fields), the masks.
  unsigned char* base = static_cast<unsigned char*>(w.split.ptr);
  w.weights.v32 = reinterpret_cast<const float*>(base);
  w.weights.w = reinterpret_cast<float4*>(base + v32);
  w.weights.zeta = reinterpret_cast<float*>(base + v32 + w4);
  w.weights.rows = reinterpret_cast<RowTerms*>(base + v32 + w4 + zeta);
  w.weights.tile_max = reinterpret_cast<double*>(base + v32 + w4 + zeta + rows_b);
  w.weights.visible = reinterpret_cast<unsigned*>(base + v32 + w4 + zeta + rows_b + tiles);
  w.weights.p_sub = reinterpret_cast<unsigned*>(base + v32 + w4 + zeta + rows_b + tiles + masks);
  w.weights.zeta_keys = reinterpret_cast<unsigned*>(base + v32 + w4 + zeta + rows_b + tiles + 2 * masks);
  w.weights.e = reinterpret_cast<float*>(w.weights.w);  // the row form's e, over the float4 weights
  w.weights.slots = slots;
  w.weights.words = words;
  return bytes;
}

// The knot form's workspace (oracle_types.h KnotWork) for the two-kernel form's slots: per slot the rows' fp16
// weights, terms, the products' chains and the elements' marks, and V's fp16 values per column. Refused with
// its size where it cannot be had.
size_t allocate_knots(const Problem& p, Workspace& w) {
  const int64_t slots = w.weights.slots, pad = knot_keys_pad(p.n_k), cols = int64_t(p.batch) * p.heads_kv * p.dv;
  const size_t planes = 3 * size_t(slots) * size_t(pad) * sizeof(uint16_t);  // a multiple of 128 bytes
  const size_t rows_b = size_t(slots) * sizeof(KnotRowTerms);
  const size_t partial = size_t(knot_splits(p.n_k)) * kKnotSums * size_t(slots) * p.dv * sizeof(float);
  const size_t values = 2 * size_t(cols) * size_t(pad) * sizeof(uint16_t), rc = size_t(cols) * sizeof(double);
  const size_t vt = size_t(cols) * size_t(pad) * sizeof(float);
  const size_t done = size_t(slots) * p.dv, col = size_t(cols);
  const size_t knots = size_t(slots) * p.dv * sizeof(float4);
  const size_t bytes = planes + rows_b + partial + values + vt + rc + knots + done + col;
  if (cudaMalloc(&w.knots.ptr, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    w.knots.ptr = nullptr;
    throw std::runtime_error("GPU oracle: the knot form's workspace (" + std::to_string(bytes) +
                             " bytes) could not be had on the device");
  }
  w.knots.bytes = bytes;
  poison_if_asked(w.knots.ptr, bytes);
  // The 16-byte copies' operands and the knots first (planes, V's values, knots), then the 8-byte fields, then
  // the bytes.
  unsigned char* at = static_cast<unsigned char*>(w.knots.ptr);
  KnotWork& k = w.weights.knot;
  k.keys_pad = pad, k.splits = knot_splits(p.n_k);
  k.w = reinterpret_cast<uint16_t*>(at);
  k.w3 = k.w + size_t(slots) * size_t(pad);
  k.wz = k.w3 + size_t(slots) * size_t(pad);
  at += planes;
  k.x = reinterpret_cast<uint16_t*>(at);
  k.x2 = k.x + size_t(cols) * size_t(pad);
  at += values;
  k.vt = reinterpret_cast<float*>(at);
  at += vt;
  k.knots = reinterpret_cast<float4*>(at);  // 16-byte aligned: the planes and values are multiples of 128 bytes
  at += knots;
  k.rc = reinterpret_cast<double*>(at);
  at += rc;
  k.rows = reinterpret_cast<KnotRowTerms*>(at);
  at += rows_b;
  k.partial = reinterpret_cast<float*>(at);
  at += partial;
  k.done = at;
  k.col = at + done;
  return bytes;
}

void allocate(const Problem& p, const BudgetRequest& basis, const DeviceTensors& t, int64_t pass_rows, Workspace& w) {
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
  const size_t no = size_t(pass_rows) * p.dv, nl = size_t(pass_rows);
  w.o_ref = DeviceBuffer(no * 8), w.o_err = DeviceBuffer(no * 8);
  w.lse_ref = DeviceBuffer(nl * 8), w.lse_err = DeviceBuffer(nl * 8);
  w.a_factor = DeviceBuffer(nl * 8), w.a_floor = DeviceBuffer(nl * 8);
  w.o_bound = DeviceBuffer(no * 8), w.o_bound_prob = DeviceBuffer(no * 8), w.scale_a = DeviceBuffer(no * 8);
  w.lse_bound = DeviceBuffer(nl * 8), w.lse_bound_prob = DeviceBuffer(nl * 8);
  w.key_vmax = DeviceBuffer(size_t(p.batch) * p.heads_kv * p.n_k * 8);
  w.key_vmin = DeviceBuffer(size_t(p.batch) * p.heads_kv * p.n_k * 8);
  w.sums = DeviceBuffer(sizeof(VerdictSums));
  check(cudaMemset(w.sums.ptr, 0, sizeof(VerdictSums)), "memset");
  w.vblocks = int(std::min<int64_t>(1024, (int64_t(no + nl) + 255) / 256));
  w.best = DeviceBuffer(size_t(std::max(w.vblocks, 1)) * 256 * sizeof(double));
  w.selected = DeviceBuffer(2 * sizeof(double));
  w.cand = DeviceBuffer(kWorstCap * sizeof(Candidate));
  w.count = DeviceBuffer(sizeof(unsigned long long));
  w.detect = DeviceBuffer(sizeof(unsigned));
}

// FLASHCHECK_ORACLE_SCORE_KERNEL=0 leaves the score cache to the kernels' first sweeps (the same bits,
// slower: for measuring the score kernel against them).
bool score_kernel_enabled() {
  const char* e = std::getenv("FLASHCHECK_ORACLE_SCORE_KERNEL");
  return !(e && std::strcmp(e, "0") == 0);
}

// BudgetRequest::knot_sums, or FLASHCHECK_ORACLE_KNOTS=1 for every request (with the row form).
bool knots_asked(const BudgetRequest& basis) {
  const char* e = std::getenv("FLASHCHECK_ORACLE_KNOTS");
  return basis.knot_sums || (e && std::strcmp(e, "1") == 0);
}

// The budgets a basis runs, one per way it leaves open (merged by the maximum), in launch order.
std::vector<BudgetParams> basis_budgets(const Problem& p, const BudgetRequest& basis) {
  std::vector<BudgetParams> out;
  // FLASHCHECK_ORACLE_ROW_FORM=1: the row form for every request (its timing at the benchmark's shapes).
  const char* row_env = std::getenv("FLASHCHECK_ORACLE_ROW_FORM");
  const bool per_key_eta = basis.per_key_eta && !(row_env && std::strcmp(row_env, "1") == 0);
  for (bool l_fp32 : {false, true})
    for (Accumulation a : {Accumulation::tensor_core, Accumulation::ieee_fp32}) {
      RunOptions o = basis.options;
      if (basis.both_l_conventions) o.l_from_fp32_p = l_fp32;
      else if (l_fp32) continue;
      if (basis.both_accumulations) o.accumulation = a;
      else if (a == Accumulation::ieee_fp32) continue;
      out.push_back(params_of(budget_constants(p, o, basis.tile_n), !out.empty()));
      out.back().row_form = !per_key_eta && !out.back().l_fp32 && !out.back().op_round;
      out.back().knots = out.back().row_form && knots_asked(basis);
    }
  return out;
}

// The reference kernel's outputs in the workspace.
ReferenceOut reference_out(Workspace& w) {
  return ReferenceOut{w.o_ref.as<double>(),   w.o_err.as<double>(),    w.lse_ref.as<double>(), w.lse_err.as<double>(),
                      w.scale_a.as<double>(), w.a_factor.as<double>(), w.a_floor.as<double>()};
}

// One pass's reference, then its budgets. With the score cache, the score kernel fills it first for each.
// The budget's fill (stored units, the sign folded in, magnitudes aligned to mn) is the reference's (q * qd,
// k * kd, |x|) up to the sign where both descales are 1 and align_mag changes no value of Q and K (one
// scan of them, in the first pass): then the budgets read the reference's planes (times their sign)
// instead of filling them again, the same bits.
void reference_and_budget(const Problem& p, const BudgetRequest& basis, Workspace& w, const Events& ev) {
  const Shape& s = w.s;
  double* scores = w.scores.as<double>();
  const bool fill = scores && score_kernel_enabled() && score_kernel_fits(s);
  const std::vector<BudgetParams> budgets = basis_budgets(p, basis);
  check(cudaEventRecord(ev.e[0]), "event");
  if (!w.share_checked) {
    w.share_checked = true;
    if (fill && s.qd == 1.0 && s.kd == 1.0) {
      double mn = 0;  // unchanged when aligned to the largest mn, a value is unchanged for every smaller one
      for (const BudgetParams& bp : budgets) mn = std::max(mn, bp.mn_op);
      check(cudaMemset(w.detect.ptr, 0, sizeof(unsigned)), "memset");
      check(launch_aligned_change(s, mn, w.detect.as<unsigned>()), "aligned change kernel");
      unsigned changed = 1;
      check(cudaMemcpy(&changed, w.detect.ptr, sizeof changed, cudaMemcpyDeviceToHost), "aligned change");
      w.share_scores = changed == 0;
    }
  }
  if (fill) check(launch_scores(s, ScoreOperands{s.qd, s.kd, 1.0, 0.0, false, false}, scores), "score kernel");
  check(launch_reference(s, w.key_vmax.as<double>(), reference_out(w), scores, fill), "reference kernel");
  check(cudaEventRecord(ev.e[1]), "event");
  // The cache holds the reference's fill, valid for every budget that the score kernel would fill.
  bool reference_fill = fill && w.share_scores;
  BudgetIn in{w.o_ref.as<double>(),     w.o_err.as<double>(),    w.lse_ref.as<double>(),
              w.lse_err.as<double>(),   w.scale_a.as<double>(),  w.a_factor.as<double>(),
              w.a_floor.as<double>(),   w.key_vmax.as<double>(), w.key_vmin.as<double>(),
              scores,                   false,                   1.0};
  const BudgetOut out{w.o_bound.as<double>(), w.o_bound_prob.as<double>(), w.lse_bound.as<double>(),
                      w.lse_bound_prob.as<double>()};
  bool budget_fill = false;  // the cache holds the budget's fill for filled_with
  ScoreOperands filled_with{};
  for (const BudgetParams& bp : budgets) {
    // The score kernel fills the budget's planes unless the tf32 operand term needs its third sum (that
    // budget's first sweep writes them); a second launch with the same operands reads what the first
    // one's fill left.
    const ScoreOperands op{1.0, 1.0, bp.sgn, bp.mn_op, bp.tc, true};
    in.scores_filled = fill && !bp.op_round;
    in.z_sign = 1.0;
    if (!in.scores_filled) {
      reference_fill = budget_fill = false;  // the budget's first sweep overwrites the cache (if any)
    } else if (reference_fill) {
      in.z_sign = bp.sgn;
    } else {
      const bool same = budget_fill && op.sign == filled_with.sign && op.mn == filled_with.mn &&
                        op.align == filled_with.align;
      if (!same) check(launch_scores(s, op, scores), "score kernel");
      budget_fill = true;
      filled_with = op;
    }
    if (bp.row_form && !w.split.ptr)
      throw std::runtime_error("GPU oracle: the row form of the budget (per_key_eta = false) runs in the two-kernel "
                               "budget, whose workspace could not be had here");
    if (bp.knots && !w.knots.ptr) throw std::logic_error("GPU oracle: the knot form runs without its workspace");
    check(launch_budget(s, bp, in, out, w.split.ptr ? &w.weights : nullptr), "budget kernel");
  }
  check(cudaEventRecord(ev.e[2]), "event");
}

// One pass's verdict into the accumulators, and its candidates for the worst list (the keep_worst-th
// largest of the threads' largest error/bound is at most the pass's true keep_worst-th largest, so every
// element of the pass's worst keep_worst is collected).
void verdict_pass(const Problem& p, const BudgetRequest& basis, const DeviceTensors& t, Workspace& w,
                  size_t keep_worst, std::vector<Candidate>& worst) {
  const Shape& s = w.s;
  const FormatSpec& of = spec(recipe_spec(basis.options.recipe).output);
  const VerdictIn vin{t.o, t.lse, w.o_ref.as<double>(), w.lse_ref.as<double>(), w.o_bound.as<double>(),
                      w.o_bound_prob.as<double>(), w.lse_bound.as<double>(), w.scale_a.as<double>(),
                      {of.precision, of.emin, of.emax, of.has_inf, of.max_finite}};
  const int vblocks = int(std::min<int64_t>(w.vblocks, (s.pass_rows * (p.dv + 1) + 255) / 256));
  check(launch_verdict(s, vin, w.sums.as<VerdictSums>(), w.best.as<double>(), vblocks), "verdict kernel");
  if (keep_worst == 0) return;
  // The pass's largest thread maximum and the keep_worst-th largest, selected on the device (a pass has up
  // to 262,144 of them).
  const int64_t n_best = int64_t(vblocks) * 256;
  check(launch_kth_largest(w.best.as<double>(), n_best, std::min<int64_t>(n_best, int64_t(keep_worst)),
                           w.selected.as<double>()),
        "select kernel");
  double selected[2];
  check(cudaMemcpy(selected, w.selected.ptr, sizeof selected, cudaMemcpyDeviceToHost), "verdict");
  // A pass whose largest error/bound is below the k-th of a full list adds nothing to it (many passes of a
  // large problem, each of which would otherwise collect its candidates).
  const double pass_max = selected[0];
  if (worst.size() >= keep_worst && pass_max < worst[keep_worst - 1].ratio) return;
  const double threshold = selected[1];
  // Every element of the pass at or above `thr` (at most kWorstCap of them, in no particular order).
  auto collect = [&](double thr, std::vector<Candidate>& into) {
    check(cudaMemset(w.count.ptr, 0, sizeof(unsigned long long)), "memset");
    check(launch_worst(s, vin, thr, w.cand.as<Candidate>(), w.count.as<unsigned long long>(), kWorstCap, vblocks),
          "worst kernel");
    unsigned long long n_cand = 0;
    check(cudaMemcpy(&n_cand, w.count.ptr, sizeof n_cand, cudaMemcpyDeviceToHost), "worst count");
    into.resize(size_t(std::min<unsigned long long>(n_cand, kWorstCap)));
    if (!into.empty())
      check(cudaMemcpy(into.data(), w.cand.ptr, into.size() * sizeof(Candidate), cudaMemcpyDeviceToHost), "worst");
    return n_cand;
  };
  std::vector<Candidate> found;
  if (collect(threshold, found) > kWorstCap) {
    // More elements reach the threshold than the list holds: ties at the threshold (typically 0, where
    // many elements are exact), kept in arrival order, so an element above it could be missing. Those
    // strictly above it lie in fewer than keep_worst threads' ranges: collect them alone, then fill up
    // with the ties.
    std::vector<Candidate> above;
    collect(std::nextafter(threshold, HUGE_VAL), above);
    for (const Candidate& c : found)
      if (c.ratio == threshold) above.push_back(c);
    found = std::move(above);
  }
  worst.insert(worst.end(), found.begin(), found.end());
  const auto by_ratio = [](const Candidate& a, const Candidate& b) {
    return a.ratio != b.ratio ? a.ratio > b.ratio : a.index < b.index;
  };
  const size_t keep = std::min(worst.size(), keep_worst);
  std::partial_sort(worst.begin(), worst.begin() + ptrdiff_t(keep), worst.end(), by_ratio);
  worst.resize(keep);
}

void download(const DeviceBuffer& d, size_t n, std::vector<double>& into, size_t at) {
  if (n) check(cudaMemcpy(into.data() + at, d.ptr, n * sizeof(double), cudaMemcpyDeviceToHost), "download");
}

// The host copy of the reference (Float64Attention's arrays): sized for the problem, then each pass's rows
// downloaded into it.
void size_reference(const Problem& p, Float64Attention& ref) {
  ref.out.o.assign(p.o_size(), 0.0);
  ref.o_error_bound.assign(p.o_size(), 0.0);
  ref.out.lse.assign(p.lse_size(), 0.0);
  ref.lse_error_bound.assign(p.lse_size(), 0.0);
  ref.abs_scale.assign(p.o_size(), 0.0);
  ref.abs_scale_factor.assign(p.lse_size(), 1.0);
  ref.abs_scale_floor.assign(p.lse_size(), 0.0);
}
void download_reference(const Problem& p, const Pass& pass, const Workspace& w, Float64Attention& ref) {
  const size_t no = size_t(pass.rows) * p.dv, o_at = size_t(pass.row0) * p.dv, at = size_t(pass.row0);
  download(w.o_ref, no, ref.out.o, o_at);
  download(w.o_err, no, ref.o_error_bound, o_at);
  download(w.lse_ref, size_t(pass.rows), ref.out.lse, at);
  download(w.lse_err, size_t(pass.rows), ref.lse_error_bound, at);
  download(w.scale_a, no, ref.abs_scale, o_at);
  download(w.a_factor, size_t(pass.rows), ref.abs_scale_factor, at);
  download(w.a_floor, size_t(pass.rows), ref.abs_scale_floor, at);
}

// Scope, device and size checks shared by every entry point; refuses before anything is allocated. With
// host data the tensors are uploaded too, so they must fit beside the workspace.
DeviceFootprint admit(const Problem& p, const BudgetRequest& basis, bool tensors_from_host = false,
                      size_t* free_after = nullptr) {
  p.validate();
  // Scope: the staged chunks and per-row buffers are sized for these (docs/gpu-oracle.md); wider problems
  // go to the CPU oracle.
  if (p.d > kMaxHeadDim || p.dv > kMaxHeadDim)
    throw std::invalid_argument("GPU oracle: d = " + std::to_string(p.d) + ", dv = " + std::to_string(p.dv) +
                                ": head dims up to " + std::to_string(kMaxHeadDim) + " only");
  // Key offsets are 31-bit in the budget's kernels (fast_div.h).
  if (p.n_k >= (int64_t(1) << 31))
    throw std::invalid_argument("GPU oracle: N_k = " + std::to_string(p.n_k) + " keys: fewer than 2^31 only");
  if (basis.tile_n > kMaxStep)
    throw std::invalid_argument("GPU oracle: a softmax step of " + std::to_string(basis.tile_n) + " keys: up to " +
                                std::to_string(kMaxStep) + " only");
  std::string why;
  if (!oracle_available(&why)) throw std::runtime_error("GPU oracle: " + why);
  // Refuse before allocating anything when the workspace does not fit.
  const DeviceFootprint need = oracle_footprint(p, basis.options.recipe);
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  if (tensors_from_host && need.total() > free_b)
    throw std::runtime_error("GPU oracle: the problem needs " + std::to_string(need.total() >> 20) +
                             " MiB of device memory (tensors and workspace); " + std::to_string(free_b >> 20) +
                             " MiB are free");
  if (need.workspace > free_b)
    throw std::runtime_error("GPU oracle: the problem needs " + std::to_string(need.workspace >> 20) +
                             " MiB of device workspace beside its tensors; " + std::to_string(free_b >> 20) +
                             " MiB are free");
  // What is left once the workspace (and, from the host, the tensors) is allocated; tensors already on
  // the device are outside free_b.
  if (free_after) *free_after = free_b - std::min(free_b, tensors_from_host ? need.total() : need.workspace);
  return need;
}

Verdict judge(const Problem& p, const BudgetRequest& basis, const DeviceTensors& t, size_t keep_worst, Arrays* arrays) {
  size_t free_after = 0;
  const DeviceFootprint need = admit(p, basis, false, &free_after);
  Verdict result;
  result.timing.peak_device_bytes = need.workspace;
  int64_t cache_rows = score_cache_rows(p, score_cache_cap(free_after));
  std::vector<Pass> passes = plan_passes(p, cache_rows);
  Workspace w;
  allocate(p, basis, t, max_pass_rows(passes), w);
  if (cache_rows > 0) {
    // Optional: where it cannot be had (another judgement took the memory meanwhile), the budget
    // recomputes the scores in passes of the plain size.
    const size_t bytes = size_t(max_pass_rows(passes)) * score_cache_per_row(p) + 32;  // chunk_summaries' alignment
    if (cudaMalloc(&w.scores.ptr, bytes) == cudaSuccess) {
      w.scores.bytes = bytes;
      poison_if_asked(w.scores.ptr, bytes);
      result.timing.peak_device_bytes += bytes;
    } else {
      (void)cudaGetLastError();
      w.scores.ptr = nullptr;
      passes = plan_passes(p);
      w = Workspace{};
      allocate(p, basis, t, max_pass_rows(passes), w);
    }
  }
  result.timing.peak_device_bytes += allocate_split(p, max_pass_rows(passes), w);
  for (const BudgetParams& bp : basis_budgets(p, basis))
    if (bp.knots && w.split.ptr) {
      result.timing.peak_device_bytes += allocate_knots(p, w);
      break;
    }
  Events ev;
  check(cudaEventRecord(ev.e[0]), "event");
  check(launch_key_v_range(w.s, w.key_vmax.as<double>(), w.key_vmin.as<double>()), "key V range kernel");
  if (w.split.ptr) check(launch_stored_v(w.s, const_cast<float*>(w.weights.v32)), "stored V kernel");
  check(cudaEventRecord(ev.e[1]), "event");
  check(cudaEventSynchronize(ev.e[1]), "synchronize");
  result.timing.budget_s += ev.ms(0, 1) / 1e3;
  if (arrays) {
    size_reference(p, arrays->ref);
    arrays->budget.o_bound.assign(p.o_size(), 0.0);
    arrays->budget.o_bound_probabilistic.assign(p.o_size(), 0.0);
    arrays->budget.lse_bound.assign(p.lse_size(), 0.0);
    arrays->budget.lse_bound_probabilistic.assign(p.lse_size(), 0.0);
    arrays->budget.scale_a.assign(p.o_size(), 0.0);
    arrays->budget.tile_n = basis.tile_n;
  }
  std::vector<Candidate> worst;
  for (const Pass& pass : passes) {
    w.s.row0 = pass.row0, w.s.pass_rows = pass.rows;
    reference_and_budget(p, basis, w, ev);
    verdict_pass(p, basis, t, w, keep_worst, worst);
    check(cudaEventRecord(ev.e[3]), "event");
    check(cudaEventSynchronize(ev.e[3]), "synchronize");
    result.timing.reference_s += ev.ms(0, 1) / 1e3;
    result.timing.budget_s += ev.ms(1, 2) / 1e3;
    result.timing.verdict_s += ev.ms(2, 3) / 1e3;
    if (arrays) {
      const size_t no = size_t(pass.rows) * p.dv, o_at = size_t(pass.row0) * p.dv, at = size_t(pass.row0);
      download_reference(p, pass, w, arrays->ref);
      download(w.o_bound, no, arrays->budget.o_bound, o_at);
      download(w.o_bound_prob, no, arrays->budget.o_bound_probabilistic, o_at);
      download(w.lse_bound, size_t(pass.rows), arrays->budget.lse_bound, at);
      download(w.lse_bound_prob, size_t(pass.rows), arrays->budget.lse_bound_probabilistic, at);
      download(w.scale_a, no, arrays->budget.scale_a, o_at);
    }
  }

  VerdictSums h{};
  check(cudaMemcpy(&h, w.sums.ptr, sizeof h, cudaMemcpyDeviceToHost), "verdict sums");
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
  for (const Candidate& c : worst)
    v.worst.push_back({size_t(c.index), c.is_lse != 0, c.got, c.want, c.err, c.bound, c.scaled_ulps});
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

Float64Attention reference_host_data(const Problem& p, const RunOptions& options, const AttentionInputs& in) {
  validate_inputs(p, in);
  BudgetRequest basis;
  basis.options = options;
  admit(p, basis, true);
  const RecipeSpec& rs = recipe_spec(options.recipe);
  const bool fp8 = is_fp8(options.recipe);
  DeviceBuffer q = upload(in.q, rs.input, fp8 ? options.q_descale : 1.0);
  DeviceBuffer k = upload(in.k, rs.input, fp8 ? options.k_descale : 1.0);
  DeviceBuffer v = upload(in.v, rs.input, fp8 ? options.v_descale : 1.0);
  const std::vector<Pass> passes = plan_passes(p);
  Workspace w;
  allocate(p, basis, DeviceTensors{q.ptr, k.ptr, v.ptr, nullptr, nullptr}, max_pass_rows(passes), w);
  check(launch_key_v_range(w.s, w.key_vmax.as<double>(), w.key_vmin.as<double>()), "key V range kernel");
  Float64Attention ref;
  size_reference(p, ref);
  for (const Pass& pass : passes) {
    w.s.row0 = pass.row0, w.s.pass_rows = pass.rows;
    check(launch_reference(w.s, w.key_vmax.as<double>(), reference_out(w), nullptr, false), "reference kernel");
    download_reference(p, pass, w, ref);
  }
  return ref;
}

Verdict judge_host_data(const Problem& p, const BudgetRequest& basis, const AttentionInputs& in,
                        const std::vector<double>& o, const std::vector<double>& lse, size_t keep_worst, Arrays* arrays) {
  validate_inputs(p, in);
  if (o.size() != p.o_size()) throw std::invalid_argument("GPU oracle: O has the wrong size");
  if (!lse.empty() && lse.size() != p.lse_size()) throw std::invalid_argument("GPU oracle: LSE has the wrong size");
  admit(p, basis, true);
  const RecipeSpec& rs = recipe_spec(basis.options.recipe);
  const bool fp8 = is_fp8(basis.options.recipe);
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
