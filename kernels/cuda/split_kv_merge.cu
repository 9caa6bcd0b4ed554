// Kernel layer: split-KV (flash-decoding) merge. Each split s left its unnormalised state for a row:
// m_s (max of raw scores), l_s (sum of P~), a_s (P~.V, fp32). One warp per query row combines them in
// split order, so the result is deterministic (no atomics anywhere).
//
// Rounding points:
//   m    = max_s m_s (exact)
//   w_s  = 0 if m_s = -inf, else ex2.approx.ftz( fl32( fl32(m_s - m) * c ) )
//   l    = 0; for s = 0 .. S-1: l <- fl32(l + fl32(w_s * l_s))
//   a_k  = 0; for s = 0 .. S-1: a_k <- fl32(a_k + fl32(w_s * a_s,k))
//   O_k  = round_out( fl32(a_k * fl32(1/l)) )   (fp8: times v_descale, one more fl32, before round_out)
//   LSE  = fl32( fl32(m * scale_eff) + fl32(logf(l) - lse_offset) ), -inf when l = 0 (O = 0 then).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "fwd_dispatch.h"
#include "mma.h"
#include "normalise.h"

namespace flashcheck::cuda {

namespace {

__global__ void split_kv_merge_kernel(const FwdParams p, int out_kind) {
  const long long rows = static_cast<long long>(p.batch) * p.heads_q * p.n_q;
  const long long row = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int n = static_cast<int>(row % p.n_q);
  const long long bh = row / p.n_q;
  const int h = static_cast<int>(bh % p.heads_q);
  const int b = static_cast<int>(bh / p.heads_q);
  const float c = p.scale_log2;

  float m = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) m = fmaxf(m, p.ws_m[s * rows + row]);
  float l = 0.0f;
  for (int s = 0; s < p.num_splits; ++s) {
    const float ms = p.ws_m[s * rows + row];
    const float w = ms == -INFINITY ? 0.0f : tile::ex2(__fmul_rn(__fsub_rn(ms, m), c));
    l = __fadd_rn(l, __fmul_rn(w, p.ws_l[s * rows + row]));
  }
  const float inv = inverse_l(l);
  const long long o_off = b * p.o_stride[0] + h * p.o_stride[1] + n * p.o_stride[2];
  for (int k = lane; k < p.d; k += 32) {
    float a = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      const float ms = p.ws_m[s * rows + row];
      if (ms == -INFINITY) continue;  // an empty chunk adds nothing, not even 0 * NaN
      const float w = tile::ex2(__fmul_rn(__fsub_rn(ms, m), c));
      a = __fadd_rn(a, __fmul_rn(w, p.ws_acc[(s * rows + row) * p.d + k]));
    }
    float o = normalised(a, l, inv);
    if (p.v_descale != 1.0f) o = __fmul_rn(o, p.v_descale);
    if (out_kind == kOutFp32) {
      static_cast<float*>(p.o)[o_off + k] = o;
    } else if (out_kind == kOutFp16) {
      static_cast<__half*>(p.o)[o_off + k] = __float2half_rn(o);
    } else {
      static_cast<__nv_bfloat16*>(p.o)[o_off + k] = __float2bfloat16_rn(o);
    }
  }
  if (p.lse && lane == 0)
    p.lse[row] = row_lse(m, l, p.scale_eff, p.lse_offset);
}

}  // namespace

cudaError_t run_split_kv_merge(const FwdParams& p, int out_kind, cudaStream_t stream) {
  const long long rows = static_cast<long long>(p.batch) * p.heads_q * p.n_q;
  constexpr int kWarps = 8;
  const long long blocks = (rows + kWarps - 1) / kWarps;
  split_kv_merge_kernel<<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(p, out_kind);
  return cudaGetLastError();
}

}  // namespace flashcheck::cuda
