// Runner layer: validation, host<->device staging, tile and split-KV policy, launch. See fused_attention.h.
#include "fused_attention.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdarg>
#include <cstring>
#include <vector>

#include "fwd_dispatch.h"
#include "fwd_params.h"
#include "head_dim_dispatch.h"
#include "tensor_map.h"
#include "kernels/work_tile_order.h"
#include "work_tile_count.h"

namespace flashcheck::cuda {

namespace {

using fc::tiles::default_tile_index;
using fc::tiles::is_supported_head_dim;
using fc::tiles::tile_index_of;
using fc::tiles::tile_options;

Status fail(fc_status code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
Status fail(fc_status code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return Status{code, buf};
}

// A CUDA error as the plugin reports it: running out of device memory is a resource error (not a
// verdict); an error that leaves the context unusable (an illegal address, a kernel fault) is sticky, so
// the host runs no further case in this process.
fc_status status_of(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation: return FC_ERR_OUT_OF_MEMORY;
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorIllegalInstruction:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable: return FC_ERR_STICKY;
    default: return FC_ERR_RUNTIME;
  }
}

#define FC_CUDA_TRY(expr)                                                                        \
  do {                                                                                           \
    const cudaError_t fc_err_ = (expr);                                                          \
    if (fc_err_ != cudaSuccess)                                                                  \
      return fail(status_of(fc_err_), "%s:%d: %s failed: %s", __FILE__, __LINE__, #expr,         \
                  cudaGetErrorString(fc_err_));                                                  \
  } while (0)

#define FC_TRY(expr)                      \
  do {                                    \
    Status fc_st_ = (expr);               \
    if (!fc_st_.ok()) return fc_st_;      \
  } while (0)

bool is_fp8(int recipe) { return recipe == FC_RECIPE_FP8_E4M3 || recipe == FC_RECIPE_FP8_E5M2; }
int in_bytes(int recipe) { return recipe == FC_RECIPE_FP32 ? 4 : (is_fp8(recipe) ? 1 : 2); }
int out_bytes(int recipe) { return recipe == FC_RECIPE_FP32 ? 4 : 2; }

// Stream-ordered device allocation, released on scope exit (also on every error path).
class DeviceAlloc {
 public:
  explicit DeviceAlloc(cudaStream_t s) : stream_(s) {}
  ~DeviceAlloc() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
  }
  DeviceAlloc(const DeviceAlloc&) = delete;
  DeviceAlloc& operator=(const DeviceAlloc&) = delete;
  cudaError_t alloc(size_t bytes) { return cudaMallocAsync(&ptr_, bytes ? bytes : 16, stream_); }
  void* get() const { return ptr_; }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

struct View {
  int64_t shape[4];
  int64_t stride[4];
};

View contiguous(int64_t b, int64_t h, int64_t n, int64_t d) {
  return View{{b, h, n, d}, {h * n * d, n * d, d, 1}};
}

Strided4 to_strided(const View& v) {
  Strided4 s;
  for (int i = 0; i < 4; ++i) {
    s.shape[i] = v.shape[i];
    s.stride[i] = v.stride[i];
  }
  return s;
}

// The fused kernel reads rows with 16-byte cp.async: innermost stride 1 and every row start aligned. It
// steps from row to row in 32-bit byte offsets (registers are its scarcest resource), so the row stride
// must stay below kMaxRowStrideBytes; a view with a larger one is repacked like any other.
constexpr int64_t kMaxRowStrideBytes = int64_t{1} << 24;
// Kernel v2 reads through TMA descriptors (tensor_map.h), which also take no zero or negative stride (a
// broadcast view).
bool kernel_readable(Subject subject, const void* data, const int64_t* stride, int bytes) {
  if (stride[3] != 1) return false;
  if (stride[2] < 0 || stride[2] * bytes >= kMaxRowStrideBytes) return false;
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i) {
    if ((stride[i] * bytes) % 16 != 0) return false;
    if (subject == Subject::kFusedV2 && stride[i] <= 0) return false;
  }
  return true;
}

// Host-side copy between a strided view and a contiguous buffer, element by element in BHND order:
// gather (view -> contiguous) or scatter (contiguous -> view).
enum class Direction { gather, scatter };
void host_copy(Direction dir, unsigned char* view_data, const View& v, int bytes, unsigned char* packed) {
  int64_t i = 0;
  for (int64_t b = 0; b < v.shape[0]; ++b)
    for (int64_t h = 0; h < v.shape[1]; ++h)
      for (int64_t n = 0; n < v.shape[2]; ++n)
        for (int64_t c = 0; c < v.shape[3]; ++c, ++i) {
          unsigned char* elem = view_data + (b * v.stride[0] + h * v.stride[1] + n * v.stride[2] + c * v.stride[3]) * bytes;
          if (dir == Direction::gather) std::memcpy(packed + i * bytes, elem, bytes);
          else std::memcpy(elem, packed + i * bytes, bytes);
        }
}
void host_pack(const void* src, const View& v, int bytes, std::vector<unsigned char>& dst) {
  dst.resize(static_cast<size_t>(v.shape[0] * v.shape[1] * v.shape[2] * v.shape[3] * bytes));
  host_copy(Direction::gather, static_cast<unsigned char*>(const_cast<void*>(src)), v, bytes, dst.data());
}
void host_unpack(std::vector<unsigned char>& src, const View& v, int bytes, void* dst) {
  host_copy(Direction::scatter, static_cast<unsigned char*>(dst), v, bytes, src.data());
}

const char* subject_name(Subject s) {
  return s == Subject::kNaive ? "cuda-naive" : s == Subject::kFusedV2 ? "cuda-v2" : "cuda-fa2";
}

Status validate(Subject subject, const fc_problem& p) {
  const bool naive = subject == Subject::kNaive;
  const bool v2 = subject == Subject::kFusedV2;
  switch (p.recipe) {
    case FC_RECIPE_FP32:
    case FC_RECIPE_FP16:
    case FC_RECIPE_BF16:
      break;
    case FC_RECIPE_FP8_E4M3:
    case FC_RECIPE_FP8_E5M2:
      if (naive) return fail(FC_ERR_UNSUPPORTED, "the naive baseline supports fp32, fp16 and bf16 only");
      break;
    case FC_RECIPE_TF32:
      return fail(FC_ERR_UNSUPPORTED, "recipe tf32 is not implemented by %s", subject_name(subject));
    default:
      return fail(FC_ERR_INVALID, "unknown recipe %d", p.recipe);
  }
  if (v2 && p.recipe != FC_RECIPE_FP16 && p.recipe != FC_RECIPE_BF16)
    return fail(FC_ERR_UNSUPPORTED, "cuda-v2 runs fp16 and bf16 only (cuda-fa2 serves the other recipes)");
  if (p.batch < 1 || p.heads_q < 1 || p.heads_kv < 1)
    return fail(FC_ERR_INVALID, "batch, heads_q and heads_kv must be >= 1 (got %d, %d, %d)", p.batch, p.heads_q,
                p.heads_kv);
  if (p.heads_q % p.heads_kv != 0)
    return fail(FC_ERR_INVALID, "heads_q (%d) must be a multiple of heads_kv (%d)", p.heads_q, p.heads_kv);
  if (p.n_q < 1 || p.n_k < 1) return fail(FC_ERR_INVALID, "n_q and n_k must be >= 1");
  if (p.n_q >= (1LL << 30) || p.n_k >= (1LL << 30)) return fail(FC_ERR_UNSUPPORTED, "sequence lengths of 2^30 or more");
  if (p.dv != p.d) return fail(FC_ERR_UNSUPPORTED, "dv (%d) != d (%d) is not supported", p.dv, p.d);
  auto listed = [](const auto& dims) {
    std::string list;
    for (int d : dims) list += (list.empty() ? "" : ", ") + std::to_string(d);
    return list;
  };
  if (v2 && !fc::tiles::is_v2_head_dim(p.d))
    return fail(FC_ERR_UNSUPPORTED, "head dim %d is not supported by cuda-v2 (supported: %s)", p.d,
                listed(fc::tiles::kV2HeadDims).c_str());
  if (!is_supported_head_dim(p.d))
    return fail(FC_ERR_UNSUPPORTED, "head dim %d is not supported (supported: %s)", p.d,
                listed(fc::tiles::kHeadDims).c_str());
  if (!std::isfinite(p.scale)) return fail(FC_ERR_INVALID, "scale must be finite");
  // The running max is taken over raw scores and scaled afterwards, which is only the max of the scaled
  // scores for a positive scale.
  if (p.scale <= 0.0) return fail(FC_ERR_UNSUPPORTED, "scale %g: only scale > 0 is supported", p.scale);
  if (p.mask < FC_MASK_NONE || p.mask > FC_MASK_WINDOW) return fail(FC_ERR_INVALID, "unknown mask kind %d", p.mask);
  if (p.mask == FC_MASK_WINDOW) {
    if (p.window_left < -1 || p.window_right < -1)
      return fail(FC_ERR_INVALID, "window bounds must be >= 0, or -1 for unbounded");
    if (p.window_align != FC_ALIGN_TOP_LEFT && p.window_align != FC_ALIGN_BOTTOM_RIGHT)
      return fail(FC_ERR_INVALID, "unknown window alignment %d", p.window_align);
  }
  const uint32_t known = FC_FLAG_L_FROM_FP32_P | FC_FLAG_TWO_LEVEL_ACCUM | FC_FLAG_FA1_NORMALISATION;
  if (p.flags & ~known) return fail(FC_ERR_INVALID, "unknown flags 0x%x", p.flags & ~known);
  if (p.flags & FC_FLAG_FA1_NORMALISATION) return fail(FC_ERR_UNSUPPORTED, "FA-1 normalisation is not implemented");
  if (naive && (p.flags & (FC_FLAG_L_FROM_FP32_P | FC_FLAG_TWO_LEVEL_ACCUM)))
    return fail(FC_ERR_UNSUPPORTED, "the naive baseline takes no numerics flags");
  if (is_fp8(p.recipe)) {
    for (float s : {p.q_descale, p.k_descale, p.v_descale})
      if (!std::isfinite(s) || s <= 0.0f) return fail(FC_ERR_INVALID, "fp8 descales must be finite and > 0");
  }
  if (p.num_splits < 0) return fail(FC_ERR_INVALID, "num_splits must be >= 0");
  if (p.num_splits > 256) return fail(FC_ERR_UNSUPPORTED, "num_splits above 256");
  if (v2 && (p.tile_m != 0 || p.tile_n != 0) && !fc::tiles::is_v2_tile(p.d, p.tile_m, p.tile_n)) {
    const TileShape t = fc::tiles::v2_tile(p.d), tall = fc::tiles::v2_tall_tile(p.d);
    const std::string also = tall.m ? " or " + std::to_string(tall.m) + "x" + std::to_string(tall.n) : "";
    return fail(FC_ERR_UNSUPPORTED, "cuda-v2 runs %dx%d%s at head dim %d (tile %dx%d asked)", t.m, t.n, also.c_str(),
                p.d, p.tile_m, p.tile_n);
  }
  if (naive) {
    if (p.num_splits > 1) return fail(FC_ERR_UNSUPPORTED, "the naive baseline has no split-KV");
    if (p.tile_m != 0 || p.tile_n != 0) return fail(FC_ERR_UNSUPPORTED, "the naive baseline has no tile options");
  }
  if (static_cast<long long>(p.heads_q) * (p.num_splits ? p.num_splits : 1) > 65535)
    return fail(FC_ERR_UNSUPPORTED, "heads_q * num_splits above 65535");
  return Status{};
}

int sm_count() {
  int dev = 0, n = 132;
  if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  return n > 0 ? n : 132;
}

}  // namespace

Status plan(Subject subject, const fc_problem& p, LaunchPlan* out) {
  FC_TRY(validate(subject, p));
  LaunchPlan lp;
  if (subject == Subject::kNaive) {
    *out = lp;
    return Status{};
  }
  const bool causal = p.mask == FC_MASK_CAUSAL_TOP_LEFT || p.mask == FC_MASK_CAUSAL_BOTTOM_RIGHT;
  const bool fp32 = p.recipe == FC_RECIPE_FP32;
  // fp32 runs its own SIMT tiling (fc::tiles::kSimtFp32Tile); a request for another tile is declined
  // rather than ignored, so that what runs is what was asked.
  if (fp32 && (p.tile_m != 0 || p.tile_n != 0))
    return fail(FC_ERR_UNSUPPORTED, "fp32 runs one fixed %dx%d tiling (tile %dx%d asked)", fc::tiles::kSimtFp32Tile.m,
                fc::tiles::kSimtFp32Tile.n, p.tile_m, p.tile_n);
  int tile_index = default_tile_index(p.d, is_fp8(p.recipe), causal, p.n_q);
  if (subject == Subject::kFusedV2) {
    tile_index = -1;  // v2 tiles are outside v1's table (tile_policy.h: v2_tile_for)
  } else if (p.tile_m != 0 || p.tile_n != 0) {
    tile_index = tile_index_of(p.d, p.tile_m, p.tile_n);
    if (tile_index < 0)
      return fail(FC_ERR_UNSUPPORTED, "tile %dx%d is not compiled for head dim %d", p.tile_m, p.tile_n, p.d);
    // fp8 compiles one tile per head dim.
    const int fp8_tile = fc::tiles::fp8_tile_index(p.d);
    if (is_fp8(p.recipe) && tile_index != fp8_tile)
      return fail(FC_ERR_UNSUPPORTED, "fp8 runs one %dx%d tile at head dim %d (tile %dx%d asked)",
                  tile_options(p.d, fp8_tile).m, tile_options(p.d, fp8_tile).n, p.d, p.tile_m, p.tile_n);
  }
  const TileShape v2_asked{p.tile_m, p.tile_n, 0, 0};  // validated above
  const TileShape t = subject == Subject::kFusedV2
                          ? (p.tile_m != 0 ? v2_asked : fc::tiles::v2_tile_for(p.d, causal, p.n_k))
                      : fp32 ? fc::tiles::kSimtFp32Tile
                             : tile_options(p.d, tile_index);
  lp.tile_index = tile_index;
  lp.tile_m = t.m;
  lp.tile_n = t.n;
  // v2 takes one online-softmax step per tile.
  lp.step_n = fp32 || subject == Subject::kFusedV2 ? t.n : fc::tiles::softmax_step_n(t, is_fp8(p.recipe));
  if (p.num_splits > 0) {
    lp.num_splits = p.num_splits;
  } else {
    // Split-KV only when the (row block, head, batch) grid fills less than one wave of SMs: then cut the
    // key range so that about two blocks per SM run, keeping at least 2 key tiles per split (a split
    // with one tile spends more on the workspace round trip than it saves) and at most 64 splits.
    const long long blocks = ((p.n_q + lp.tile_m - 1) / lp.tile_m) * static_cast<long long>(p.heads_q) * p.batch;
    const int sms = sm_count();
    const long long key_tiles = (p.n_k + lp.tile_n - 1) / lp.tile_n;
    long long splits = 1;
    if (blocks < sms) {
      splits = (2LL * sms + blocks - 1) / blocks;
      if (splits > key_tiles / 2) splits = key_tiles / 2;
      if (splits > 64) splits = 64;
      if (splits < 1) splits = 1;
    }
    lp.num_splits = static_cast<int>(splits);
  }
  *out = lp;
  return Status{};
}

namespace {

// Kernel v2 on device buffers that it can read (the caller repacked the rest; the split-KV workspace is
// the caller's too): TMA descriptors for Q, K and V, the scheduler's tile counter, and the redo list
// (FwdParams::redo_list) when some key tile can be a boundary tile (fwd_v2_kernel.cuh, NaN in V).
Status run_v2(const fc_problem& p, const LaunchPlan& lp, FwdParams& fp, cudaStream_t stream) {
  V2TensorMaps maps{};
  // A tensor's map, or why the copy engine cannot address it.
  auto make_map = [&](CUtensorMap* map, const void* data, const long long* strides, int heads, long long rows,
                      int box_rows) {
    const int64_t st[3] = {strides[0], strides[1], strides[2]};
    return make_tile_map(map, data, 2, p.d, rows, heads, p.batch, st, box_rows);
  };
  auto map_of = [&](CUtensorMap* map, const void* data, const long long* strides, int heads, long long rows,
                    int box_rows) -> Status {
    const std::string why = make_map(map, data, strides, heads, rows, box_rows);
    if (!why.empty()) return fail(FC_ERR_RUNTIME, "cuda-v2: %s", why.c_str());
    return Status{};
  };
  FC_TRY(map_of(&maps.q, fp.q, fp.q_stride, p.heads_q, p.n_q, lp.tile_m));
  FC_TRY(map_of(&maps.k, fp.k, fp.k_stride, p.heads_kv, p.n_k, lp.tile_n));
  FC_TRY(map_of(&maps.v, fp.v, fp.v_stride, p.heads_kv, p.n_k, lp.tile_n));
  // Where the policy has O leave through shared memory (v2_o_through_smem), TMA stores of 64 rows (one
  // consumer warpgroup's) write it if the copy engine can address it; otherwise, and for split-KV's fp32
  // partial states, ordinary stores do.
  fp.work_section = fc::tiles::work_tile_section(fp.has_window, fp.n_k, fp.d,
                                                 static_cast<long long>(fp.batch) * fp.heads_q * fp.num_splits);
  fp.o_tma = fc::tiles::v2_o_through_smem(p.d, lp.tile_m) && fp.num_splits == 1 &&
             make_map(&maps.o, fp.o, fp.o_stride, p.heads_q, p.n_q, 64).empty();
  // The tile counter, then (guarded) the redo list's count, its ids and the per-tile flags: one allocation
  // (FwdParams::scheduler_bytes).
  long long words = 1;
  const long long tiles = work_tile_count(fp, lp.tile_m);
  // The kernel numbers work tiles in 32 bits (tile_scheduler.h): 2^31 of them would need a Q of 2^38 elements.
  if (tiles >= (1LL << 31)) return fail(FC_ERR_UNSUPPORTED, "cuda-v2: %lld work tiles (at most 2^31 - 1)", tiles);
  if (fp.guard_values) words += 1 + 2 * tiles;
  DeviceAlloc scheduler(stream);
  fp.scheduler_bytes = static_cast<size_t>(words) * sizeof(unsigned);
  FC_CUDA_TRY(scheduler.alloc(fp.scheduler_bytes));
  fp.tile_counter = static_cast<unsigned*>(scheduler.get());
  if (fp.guard_values) {
    fp.redo_list = fp.tile_counter + 1;
    fp.redo_flags = fp.redo_list + 1 + tiles;
  }
  const Recipe recipe = static_cast<Recipe>(p.recipe);
  FC_CUDA_TRY(dispatch_head_dim<fc::tiles::kV2HeadDims>(p.d, [&](auto d) {
    return run_fused_v2_hdim<decltype(d)::value>(recipe, lp.tile_m, fp, maps, stream);
  }));
  return Status{};
}

// Device-side run on device buffers that the kernels can read directly (checked by the caller).
Status run_device(Subject subject, const fc_problem& p, const LaunchPlan& lp, const void* q, const int64_t* qs,
                  const void* k, const int64_t* ks, const void* v, const int64_t* vs, void* o, const int64_t* os,
                  float* lse, const int32_t* key_lengths, const uint8_t* dense, cudaStream_t stream) {
  FwdParams fp{};
  fp.q = q;
  fp.k = k;
  fp.v = v;
  fp.o = o;
  for (int i = 0; i < 3; ++i) {
    fp.q_stride[i] = qs[i];
    fp.k_stride[i] = ks[i];
    fp.v_stride[i] = vs[i];
    fp.o_stride[i] = os[i];
  }
  fp.lse = lse;
  fp.o_vec16 = reinterpret_cast<uintptr_t>(o) % 16 == 0 && (os[0] * out_bytes(p.recipe)) % 16 == 0 &&
               (os[1] * out_bytes(p.recipe)) % 16 == 0 && (os[2] * out_bytes(p.recipe)) % 16 == 0;
  fp.batch = p.batch;
  fp.heads_q = p.heads_q;
  fp.heads_kv = p.heads_kv;
  fp.group = p.heads_q / p.heads_kv;
  fp.n_q = static_cast<int>(p.n_q);
  fp.n_k = static_cast<int>(p.n_k);
  fp.d = p.d;
  fp.key_lengths = key_lengths;
  fp.dense_mask = dense;
  fp.has_window = p.mask != FC_MASK_NONE;
  fp.align_bottom_right = p.mask == FC_MASK_CAUSAL_BOTTOM_RIGHT ||
                          (p.mask == FC_MASK_WINDOW && p.window_align == FC_ALIGN_BOTTOM_RIGHT);
  fp.window_left = kUnboundedWindow;
  fp.window_right = p.mask == FC_MASK_WINDOW ? kUnboundedWindow : 0;
  if (p.mask == FC_MASK_WINDOW) {
    if (p.window_left >= 0 && p.window_left < kUnboundedWindow) fp.window_left = p.window_left;
    if (p.window_right >= 0 && p.window_right < kUnboundedWindow) fp.window_right = p.window_right;
  }
  const bool fp8 = is_fp8(p.recipe);
  const double descale = fp8 ? static_cast<double>(p.q_descale) * p.k_descale : 1.0;
  fp.scale_log2 = static_cast<float>(p.scale * descale * 1.4426950408889634);
  fp.scale_eff = static_cast<float>(p.scale * descale);
  fp.v_descale = fp8 ? p.v_descale : 1.0f;
  fp.lse_offset = fp8 ? static_cast<float>(8.0 * 0.6931471805599453) : 0.0f;
  fp.l_from_fp32_p = (p.flags & FC_FLAG_L_FROM_FP32_P) != 0;
  fp.two_level = fp8 && (p.flags & FC_FLAG_TWO_LEVEL_ACCUM) != 0;
  fp.num_splits = lp.num_splits;

  if (subject == Subject::kNaive) {
    const size_t rows = static_cast<size_t>(p.batch) * p.heads_q * p.n_q;
    DeviceAlloc ws(stream), rs(stream);
    FC_CUDA_TRY(ws.alloc(rows * static_cast<size_t>(p.n_k) * sizeof(float)));
    FC_CUDA_TRY(rs.alloc(rows * sizeof(float)));
    FC_CUDA_TRY(run_naive(static_cast<Recipe>(p.recipe), fp, static_cast<float*>(ws.get()),
                          static_cast<float*>(rs.get()), stream));
    return Status{};
  }

  DeviceAlloc ws_acc(stream), ws_ml(stream);
  if (lp.num_splits > 1) {
    const size_t rows = static_cast<size_t>(lp.num_splits) * p.batch * p.heads_q * p.n_q;
    FC_CUDA_TRY(ws_acc.alloc(rows * p.d * sizeof(float)));
    FC_CUDA_TRY(ws_ml.alloc(2 * rows * sizeof(float)));
    fp.ws_acc = static_cast<float*>(ws_acc.get());
    fp.ws_m = static_cast<float*>(ws_ml.get());
    fp.ws_l = fp.ws_m + rows;
  }
  // The V NaN guard (value_nan_guard.h), in both tensor-core kernels: when some key tile can be a
  // boundary tile.
  fp.guard_values = fp.has_window || fp.key_lengths || fp.dense_mask || p.n_k % lp.tile_n != 0;
  if (subject == Subject::kFusedV2) return run_v2(p, lp, fp, stream);
  const int tile_index = lp.tile_index;
  // Redo flags (fwd_params.h): the guard's, and the 16-bit tiles with two m-tiles per warp, whose l
  // accumulator the two share.
  DeviceAlloc redo(stream);
  const TileShape shape = tile_options(p.d, tile_index);
  const bool shared_l = (p.recipe == FC_RECIPE_FP16 || p.recipe == FC_RECIPE_BF16) && !fp.l_from_fp32_p &&
                        shape.m == 32 * shape.warps;
  if (p.recipe != FC_RECIPE_FP32 && (fp.guard_values || shared_l)) {
    FC_CUDA_TRY(redo.alloc(static_cast<size_t>(work_tile_count(fp, lp.tile_m)) * shape.warps));
    fp.redo = static_cast<uint8_t*>(redo.get());
  }
  const Recipe recipe = static_cast<Recipe>(p.recipe);
  switch (recipe) {
    case Recipe::kFp32: FC_CUDA_TRY(run_fused_fp32(fp, stream)); break;
    case Recipe::kE4M3: FC_CUDA_TRY(run_fused_e4m3(fp, stream)); break;
    case Recipe::kE5M2: FC_CUDA_TRY(run_fused_e5m2(fp, stream)); break;
    default:
      FC_CUDA_TRY(dispatch_head_dim(p.d, [&](auto d) {
        return run_fused_hdim<decltype(d)::value>(recipe, tile_index, fp, stream);
      }));
  }
  if (lp.num_splits > 1) {
    const int kind = p.recipe == FC_RECIPE_FP32 ? kOutFp32 : (p.recipe == FC_RECIPE_FP16 ? kOutFp16 : kOutBf16);
    FC_CUDA_TRY(run_split_kv_merge(fp, kind, stream));
  }
  return Status{};
}

}  // namespace

// What ran, for the budget (plugin.h, fc_run_plan): the tile, the narrowest softmax step, the splits,
// how l is summed and how products are accumulated. The naive baseline materialises S and P and sums
// with fp32 fma one product at a time; its l is a tree sum of the rounded P (naive_attention.cu).
void report_plan(Subject subject, const fc_problem& p, const LaunchPlan& lp, fc_run_plan* out) {
  if (!out) return;
  *out = fc_run_plan{};
  const bool fp32 = p.recipe == FC_RECIPE_FP32;
  out->num_splits = lp.num_splits;
  out->l_convention = (p.flags & FC_FLAG_L_FROM_FP32_P) ? FC_L_FP32_P : FC_L_ROUNDED_P;
  out->two_level_accum = (is_fp8(p.recipe) && (p.flags & FC_FLAG_TWO_LEVEL_ACCUM)) ? FC_YES : FC_NO;
  if (subject == Subject::kNaive) {
    out->accumulation = FC_ACCUM_SEQUENTIAL_FP32;
    return;
  }
  out->tile_m = lp.tile_m;
  out->tile_n = lp.tile_n;
  out->step_n = lp.step_n;
  out->accumulation = fp32 ? FC_ACCUM_SEQUENTIAL_FP32 : FC_ACCUM_TENSOR_CORE;
}

Status forward(Subject subject, const fc_problem& p, const fc_buffers& buf) {
  LaunchPlan lp;
  FC_TRY(plan(subject, p, &lp));
  report_plan(subject, p, lp, buf.plan);
  if (buf.memory != FC_MEMORY_HOST && buf.memory != FC_MEMORY_DEVICE)
    return fail(FC_ERR_INVALID, "unknown buffer memory kind %d", buf.memory);
  if (!buf.q.data || !buf.k.data || !buf.v.data || !buf.o.data)
    return fail(FC_ERR_INVALID, "q, k, v and o must be non-null");
  cudaStream_t stream = static_cast<cudaStream_t>(buf.stream);
  const int ib = in_bytes(p.recipe), ob = out_bytes(p.recipe);
  auto view_of = [](const fc_tensor& t, int64_t b, int64_t h, int64_t n, int64_t d) {
    return View{{b, h, n, d}, {t.stride[0], t.stride[1], t.stride[2], t.stride[3]}};
  };
  const View qv = view_of(buf.q, p.batch, p.heads_q, p.n_q, p.d);
  const View kv = view_of(buf.k, p.batch, p.heads_kv, p.n_k, p.d);
  const View vv = view_of(buf.v, p.batch, p.heads_kv, p.n_k, p.d);
  const View ov = view_of(buf.o, p.batch, p.heads_q, p.n_q, p.d);
  const View qc = contiguous(p.batch, p.heads_q, p.n_q, p.d);
  const View kc = contiguous(p.batch, p.heads_kv, p.n_k, p.d);
  const View oc = qc;
  const size_t q_elems = static_cast<size_t>(p.batch) * p.heads_q * p.n_q * p.d;
  const size_t k_elems = static_cast<size_t>(p.batch) * p.heads_kv * p.n_k * p.d;
  const size_t lse_elems = static_cast<size_t>(p.batch) * p.heads_q * p.n_q;

  if (buf.memory == FC_MEMORY_HOST) {
    if (p.key_lengths)
      for (int b = 0; b < p.batch; ++b)
        if (p.key_lengths[b] < 0 || p.key_lengths[b] > p.n_k)
          return fail(FC_ERR_INVALID, "key_lengths[%d] = %d is outside [0, n_k]", b, p.key_lengths[b]);
    std::vector<unsigned char> hq, hk, hv, ho(q_elems * ob);
    host_pack(buf.q.data, qv, ib, hq);
    host_pack(buf.k.data, kv, ib, hk);
    host_pack(buf.v.data, vv, ib, hv);
    DeviceAlloc dq(stream), dk(stream), dv(stream), d_o(stream), dl(stream), dkl(stream), dm(stream);
    FC_CUDA_TRY(dq.alloc(hq.size()));
    FC_CUDA_TRY(dk.alloc(hk.size()));
    FC_CUDA_TRY(dv.alloc(hv.size()));
    FC_CUDA_TRY(d_o.alloc(ho.size()));
    FC_CUDA_TRY(cudaMemcpyAsync(dq.get(), hq.data(), hq.size(), cudaMemcpyHostToDevice, stream));
    FC_CUDA_TRY(cudaMemcpyAsync(dk.get(), hk.data(), hk.size(), cudaMemcpyHostToDevice, stream));
    FC_CUDA_TRY(cudaMemcpyAsync(dv.get(), hv.data(), hv.size(), cudaMemcpyHostToDevice, stream));
    float* d_lse = nullptr;
    if (buf.lse) {
      FC_CUDA_TRY(dl.alloc(lse_elems * sizeof(float)));
      d_lse = static_cast<float*>(dl.get());
    }
    const int32_t* d_kl = nullptr;
    if (p.key_lengths) {
      FC_CUDA_TRY(dkl.alloc(p.batch * sizeof(int32_t)));
      FC_CUDA_TRY(cudaMemcpyAsync(dkl.get(), p.key_lengths, p.batch * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
      d_kl = static_cast<const int32_t*>(dkl.get());
    }
    const uint8_t* d_mask = nullptr;
    if (p.dense_mask) {
      const size_t bytes = static_cast<size_t>(p.n_q) * p.n_k;
      FC_CUDA_TRY(dm.alloc(bytes));
      FC_CUDA_TRY(cudaMemcpyAsync(dm.get(), p.dense_mask, bytes, cudaMemcpyHostToDevice, stream));
      d_mask = static_cast<const uint8_t*>(dm.get());
    }
    FC_TRY(run_device(subject, p, lp, dq.get(), qc.stride, dk.get(), kc.stride, dv.get(), kc.stride, d_o.get(),
                      oc.stride, d_lse, d_kl, d_mask, stream));
    FC_CUDA_TRY(cudaMemcpyAsync(ho.data(), d_o.get(), ho.size(), cudaMemcpyDeviceToHost, stream));
    if (buf.lse)
      FC_CUDA_TRY(cudaMemcpyAsync(buf.lse, d_lse, lse_elems * sizeof(float), cudaMemcpyDeviceToHost, stream));
    FC_CUDA_TRY(cudaStreamSynchronize(stream));
    host_unpack(ho, ov, ob, buf.o.data);
    return Status{};
  }

  // Device buffers: use them in place when the kernel can, else repack through a contiguous temporary.
  DeviceAlloc tq(stream), tk(stream), tv(stream), to(stream);
  const void* q = buf.q.data;
  const void* k = buf.k.data;
  const void* v = buf.v.data;
  void* o = buf.o.data;
  const int64_t* qs = buf.q.stride;
  const int64_t* ks = buf.k.stride;
  const int64_t* vs = buf.v.stride;
  const int64_t* os = buf.o.stride;
  auto stage_in = [&](DeviceAlloc& tmp, const void*& ptr, const int64_t*& strides, const View& src,
                      const View& dst, size_t elems) -> Status {
    if (kernel_readable(subject, ptr, strides, ib)) return Status{};
    FC_CUDA_TRY(tmp.alloc(elems * ib));
    FC_CUDA_TRY(copy_strided(tmp.get(), to_strided(dst), ptr, to_strided(src), ib, stream));
    ptr = tmp.get();
    strides = dst.stride;
    return Status{};
  };
  FC_TRY(stage_in(tq, q, qs, qv, qc, q_elems));
  FC_TRY(stage_in(tk, k, ks, kv, kc, k_elems));
  FC_TRY(stage_in(tv, v, vs, vv, kc, k_elems));
  // The output is written as 2-element (4-byte) pairs (fp32: single elements): innermost stride 1 and
  // 4-byte aligned rows suffice.
  const bool o_direct = os[3] == 1 && reinterpret_cast<uintptr_t>(o) % 4 == 0 && (os[0] * ob) % 4 == 0 &&
                        (os[1] * ob) % 4 == 0 && (os[2] * ob) % 4 == 0;
  if (!o_direct) {
    FC_CUDA_TRY(to.alloc(q_elems * ob));
    o = to.get();
    os = oc.stride;
  }
  FC_TRY(run_device(subject, p, lp, q, qs, k, ks, v, vs, o, os, buf.lse, p.key_lengths, p.dense_mask, stream));
  if (!o_direct) FC_CUDA_TRY(copy_strided(buf.o.data, to_strided(ov), o, to_strided(oc), ob, stream));
  return Status{};
}

void capabilities(Subject subject, fc_capabilities* out) {
  std::memset(out, 0, sizeof *out);
  out->abi_version = FC_ABI_VERSION;
  out->masks = (1u << FC_MASK_NONE) | (1u << FC_MASK_CAUSAL_TOP_LEFT) | (1u << FC_MASK_CAUSAL_BOTTOM_RIGHT) |
               (1u << FC_MASK_WINDOW);
  out->memory = FC_MEMORY_HOST | FC_MEMORY_DEVICE;
  static_assert(fc::tiles::kNumHeadDims <= FC_MAX_HEAD_DIMS);
  out->n_head_dims = fc::tiles::kNumHeadDims;
  for (int i = 0; i < fc::tiles::kNumHeadDims; ++i) out->head_dims[i] = fc::tiles::kHeadDims[i];
  if (subject == Subject::kNaive) {
    out->name = subject_name(subject);
    out->recipes = (1u << FC_RECIPE_FP32) | (1u << FC_RECIPE_FP16) | (1u << FC_RECIPE_BF16);
    out->features = FC_CAP_GQA | FC_CAP_KEY_LENGTHS | FC_CAP_DENSE_MASK | FC_CAP_LSE;
    out->n_tiles = 0;
    return;
  }
  if (subject == Subject::kFusedV2) {
    out->name = subject_name(subject);
    out->recipes = (1u << FC_RECIPE_FP16) | (1u << FC_RECIPE_BF16);
    out->features = FC_CAP_GQA | FC_CAP_KEY_LENGTHS | FC_CAP_DENSE_MASK | FC_CAP_LSE | FC_CAP_SPLIT_KV |
                    FC_CAP_L_FROM_FP32_P;
    out->n_head_dims = fc::tiles::kNumV2HeadDims;
    for (int i = 0; i < fc::tiles::kNumV2HeadDims; ++i) out->head_dims[i] = fc::tiles::kV2HeadDims[i];
    out->n_tiles = 0;
    return;
  }
  out->name = subject_name(subject);
  out->recipes = (1u << FC_RECIPE_FP32) | (1u << FC_RECIPE_FP16) | (1u << FC_RECIPE_BF16) |
                 (1u << FC_RECIPE_FP8_E4M3) | (1u << FC_RECIPE_FP8_E5M2);
  out->features = FC_CAP_GQA | FC_CAP_KEY_LENGTHS | FC_CAP_DENSE_MASK | FC_CAP_LSE | FC_CAP_SPLIT_KV |
                  FC_CAP_TILE_SIZES | FC_CAP_L_FROM_FP32_P | FC_CAP_TWO_LEVEL_ACCUM | FC_CAP_SUBTILE_STEPS;
  // The tile options apply to the 16-bit tensor-core recipes; fp32 runs its one SIMT tiling and fp8 one
  // tile per head dim (tile_policy.h fp8_tile_index).
  out->tile_recipes = (1u << FC_RECIPE_FP16) | (1u << FC_RECIPE_BF16);
  // Union over head dims; a tile not compiled for the requested d is refused with FC_ERR_UNSUPPORTED.
  constexpr fc::tiles::TileList tiles = fc::tiles::all_tiles();
  static_assert(tiles.count <= FC_MAX_TILES);
  out->n_tiles = tiles.count;
  for (int i = 0; i < tiles.count; ++i) {
    out->tile_m[i] = tiles.tiles[i].m;
    out->tile_n[i] = tiles.tiles[i].n;
  }
}

}  // namespace flashcheck::cuda
