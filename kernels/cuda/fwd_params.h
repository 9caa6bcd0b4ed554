// Device layer: the plain parameter block every forward kernel (fused, fp32, naive, merge) receives.
// Built once by the runner (fused_attention.cpp) from fc_problem/fc_buffers after validation, so the
// kernels never see an unchecked value.
#pragma once

#include <cstdint>

namespace flashcheck::cuda {

// Window bounds at or beyond this are "unbounded"; int64 so that i + offset + bound cannot overflow.
inline constexpr long long kUnboundedWindow = 1LL << 40;

struct FwdParams {
  // Tensors: element (b, h, n, c) at ptr + b*s[0] + h*s[1] + n*s[2] + c (innermost stride is 1 and rows
  // are 16-byte aligned: the runner repacks anything else into a contiguous temporary first).
  const void* q;
  const void* k;
  const void* v;
  void* o;
  long long q_stride[3], k_stride[3], v_stride[3], o_stride[3];
  float* lse;  // [batch, heads_q, n_q] or nullptr
  bool o_vec16;  // o and its row strides are 16-byte aligned: the epilogue stores whole 16-byte chunks
  bool o_tma;    // kernel v2: O leaves through shared memory and a TMA store (the runner made O's tensor map)

  int batch, heads_q, heads_kv, group;  // group = heads_q / heads_kv (GQA/MQA)
  int n_q, n_k, d;

  // Run-time mask: keys j of query row i are allowed when
  //   j < kv_len(b)  &&  (!has_window || i + off - left <= j <= i + off + right)  &&  dense[i*n_k + j]
  // with off = 0 (top-left) or kv_len(b) - n_q (bottom-right). Causal = window(unbounded, 0).
  const int32_t* key_lengths;  // device, [batch] or nullptr (clamped to [0, n_k] in the kernel)
  const uint8_t* dense_mask;   // device, [n_q * n_k] or nullptr
  bool has_window;
  bool align_bottom_right;
  long long window_left, window_right;

  float scale_log2;   // c = fl32(scale * q_descale * k_descale * log2(e)), folded into one fma per score
  float scale_eff;    // fl32(scale * q_descale * k_descale): natural-log scale for the LSE
  float v_descale;    // fp8 only (1 otherwise)
  float lse_offset;   // ln of the power-of-two pre-scale of P (fp8: 8*ln2, else 0)
  bool l_from_fp32_p; // FC_FLAG_L_FROM_FP32_P
  bool two_level;     // FC_FLAG_TWO_LEVEL_ACCUM (fp8 only)

  // Split-KV: num_splits > 1 makes every block write its unnormalised state (a, m, l) to the workspace,
  // [split][b][h][row] (a: times d), and split_kv_merge combines them.
  int num_splits;
  float* ws_acc;
  float* ws_m;
  float* ws_l;

  // One byte per warp of each block of the tensor-core grid, or nullptr when no warp can need a redo:
  // fwd_kernel flags the warps whose rows the guarded fwd_redo_kernel recomputes. Two causes: a NaN in V
  // that a zero P may carry to rows that do not see its key, possible only when some key tile is a
  // boundary tile (mask, key lengths, n_k not a multiple of the tile; guard_values, value_nan_guard.h);
  // and a NaN in P~ that the 16-bit kernels with two m-tiles per warp carry into the other m-tile's l
  // (fwd_kernel.cuh, pv_mma_16bit). Written before read; never cleared.
  uint8_t* redo;
  bool guard_values;
  // Kernel v2's redo list (fwd_v2_kernel.cuh), or nullptr: [0] the number of flagged work tiles, then
  // their ids in the order they were flagged; redo_flags: one word per work tile, so that a tile enters
  // the list once. Both cleared before each launch (with the tile counter: scheduler_bytes). The guarded
  // redo runs on one block per SM and walks the list: a grid of one block per work tile, nearly all
  // leaving at once, cost 15 us per call at 4,096 work tiles (bf16, d = 64, N = 512 causal: 8 % of the
  // forward; Nsight Compute, H200).
  unsigned* redo_list;
  unsigned* redo_flags;

  // Kernel v2's dynamic tile scheduler (tile_scheduler.h): the count of work tiles handed out beyond each
  // block's first. It and the redo list with its flags are one allocation of scheduler_bytes from
  // tile_counter (counter, list, flags), cleared by one memset before each launch: three memsets, three
  // stream operations in front of each guarded forward, cost 1.1 % at d = 64 causal (bf16, H200).
  unsigned* tile_counter;
  size_t scheduler_bytes;
  // Kernel v2's order of work tiles (kernels/work_tile_order.h): (batch, head x split)s per L2 section, 1
  // without a causal or window mask. Read from the parameters where used: held in one of the producer's few
  // registers, it spilled.
  int work_section;
};

}  // namespace flashcheck::cuda
