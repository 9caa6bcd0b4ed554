// Exact attention in float64 on the GPU, the reference kernel's arithmetic (reference_kernel.cuh) laid out
// for the float64 tensor cores once the score kernel has filled the score cache: a block owns 32 rows of
// one (batch, head), and its weighted sums over V, Σ w·v and Σ w·|v|, are matrix products of the chunk's
// weights (32 rows by 32 keys) and its V (32 keys by up to 128 columns) on `mma` m16n8k4 in float64
// (dmma.cuh), each warp 16 rows by every fourth 8-column tile. In the row kernel a warp owns a row and a
// lane a column: each staged V value served one row, for two multiply-adds per shared-memory load.
//
// The same bits as the row kernel: the tensor cores' float64 product is, per element, the fma chain over
// its four keys in ascending order (measured, dmma.cuh), and a block feeds the keys in ascending order, so
// every (row, column) sum is the row kernel's chain. A key a row does not see has weight 0 there, and
// fma(0, v, a) = a for a finite v (a is never -0: it starts at +0, and a sum that comes out zero is +0),
// so the chunk needs no row's test; a chunk with an infinity or a NaN in V (rare) takes the row kernel's
// walk over the keys each row sees instead, on the same registers. Per row, the weights are summed per
// lane (key mod 32) over the chunks and then by the same warp reduction, because warp w computes the
// weights of rows w, w + 8, w + 16 and w + 24 with lane t on key t of each chunk, as the row kernel's warp
// does for its row. Maxima and counts are order-free.
#pragma once

#include "reference/cuda/dmma.cuh"
#include "reference/cuda/reference_kernel.cuh"

namespace fc::gpu::detail {

inline constexpr int kTiledRows = 32;      // rows per block
inline constexpr int kTiledMaxDv = 128;    // value columns at most (16 tiles of 8, four a warp)
inline constexpr int kTiledThreads = 256;  // 8 warps: warp w owns rows 16 (w / 4) .. + 15 of the sums
inline constexpr int kRowsPerWarp = kTiledRows / 8;  // of the weights
inline constexpr int kWPitch = kChunk + 4;  // a fragment's 8 rows of 4 weights fall in distinct banks

// The staged V's row pitch: the least at or above dv that is 8 mod 16 doubles, so that a B fragment (four
// keys by eight columns) falls in distinct banks; at least dv rounded up to 8, the tiles' width.
__host__ __device__ constexpr int tiled_v_pitch(int dv) { return dv + ((8 - dv % 16) + 16) % 16; }

// Shared memory: the staged V chunk (true values), then the chunk's weights and visibility per row, the
// rows' scalars, and the cached dot products of two chunks (this one's, and the next one's in flight).
struct TiledRows {
  double w[kTiledRows][kWPitch];
  unsigned seen[kTiledRows];  // bit t: the row sees key t of the chunk
  double m[kTiledRows], l[kTiledRows], e[kTiledRows], g[kTiledRows], underflow[kTiledRows];
  int64_t lo[kTiledRows], hi[kTiledRows], n[kTiledRows];
  int active[kTiledRows];  // takes part in the sums (a row of the pass with visible keys and no NaN score)
  double dt[2][kTiledRows][kChunk], ad[2][kTiledRows][kChunk];  // by cp.async: each lane reads its own
};
// Then two buffers of a chunk's V as stored (bytes): the next chunk's, copied by cp.async while this one
// is summed.
__host__ __device__ constexpr size_t tiled_raw_bytes(int dv, Storage in) {
  return smem_align(size_t(kChunk) * dv * storage_bytes(in));
}

__host__ __device__ constexpr size_t tiled_v_bytes(int dv) {
  return smem_align(sizeof(double) * size_t(kChunk) * tiled_v_pitch(dv));
}
__host__ __device__ constexpr size_t reference_tiled_smem(int dv, Storage in) {
  return tiled_v_bytes(dv) + smem_align(sizeof(TiledRows)) + 2 * tiled_raw_bytes(dv, in);
}

// A chunk's V from the bytes cp.async left in shared memory (n keys of dv stored values, dv a multiple of
// the values in a 4-byte word) into vS as true values (stored * vd), keys n..kChunk-1 as 0 * vd; false where
// some staged value is not finite. A thread takes whole 4-byte words, consecutive across the warp, and
// stores their values side by side: the loads and stores fall in distinct banks. (The element-wise staging
// through stage_rows had been a fifth of this kernel's stall samples: its index stepping, generic loads and
// the float64 finiteness test per value; Nsight Compute source counters, H200.)
template <Storage S>
__device__ __forceinline__ bool stage_raw_v(const unsigned char* raw, int n, int dv, double vd, double* vS, int ldv) {
  constexpr int kPer = 4 / storage_bytes(S);  // values a word
  const int words = kChunk * dv / kPer, step = int(blockDim.x) * kPer;
  const int step_t = step / dv, step_c = step % dv;
  int t = int(threadIdx.x) * kPer / dv, c = int(threadIdx.x) * kPer % dv;
  const uint32_t* src = reinterpret_cast<const uint32_t*>(raw);
  uint32_t bad = 0;  // the high words' exponent fields that are all ones (inf or NaN)
  for (int x = threadIdx.x; x < words; x += blockDim.x) {
    const uint32_t w = t < n ? src[x] : 0u;
    double y[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const uint32_t bits = kPer == 1 ? w : (w >> (32 / kPer * e)) & (0xffffffffu >> (32 - 32 / kPer));
      y[e] = stored_value<S>(bits) * vd;
      bad |= ~__double2hiint(y[e]) & 0x7ff00000u ? 0u : 1u;
    }
    double* d = vS + t * ldv + c;
    if constexpr (kPer == 1) {
      d[0] = y[0];
    } else {
#pragma unroll
      for (int e = 0; e < kPer; e += 2) *reinterpret_cast<double2*>(d + e) = make_double2(y[e], y[e + 1]);
    }
    t += step_t, c += step_c;
    if (c >= dv) c -= dv, ++t;
  }
  return bad == 0;
}

__global__ void __launch_bounds__(kTiledThreads, 2)
    reference_tiled_kernel(Shape s, const double* key_vmax, ReferenceOut out, const double* scores) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockRows br = block_rows(s);
  unsigned char* base = reinterpret_cast<unsigned char*>(smem);
  double* vS = reinterpret_cast<double*>(base);
  TiledRows& tr = *reinterpret_cast<TiledRows*>(base + tiled_v_bytes(s.dv));
  unsigned char* const raw0 = base + tiled_v_bytes(s.dv) + smem_align(sizeof(TiledRows));
  auto raw = [&](int b) { return raw0 + b * tiled_raw_bytes(s.dv, s.in); };
  const int ldv = tiled_v_pitch(s.dv);
  const double vd = s.vd;
  bool chunk_finite = true;  // this thread's staged values of the chunk
  auto v_value = [vd, &chunk_finite](double x) {
    const double y = x * vd;
    chunk_finite = chunk_finite && y - y == 0;
    return y;
  };
  const double u = 0x1p-53, inf = HUGE_VAL;
  const int64_t plane = s.pass_rows * s.n_k, kv0 = (int64_t(br.b) * s.heads_kv + br.hk) * s.n_k;
  const double g_d = gamma53(double(s.d) + 1) * fabs(s.scale);
  const int64_t lr0 = br.r0 - s.row0;  // block row x is the pass's row lr0 + x
  auto i_of = [&br](int x) { return br.i0 + x; };  // block row x's query index

  // Sweep 1 from the cache's chunk summaries, warp w for rows w + 8k: the maximum score, NaN, the number of
  // visible keys (the row kernel's).
  const ChunkSummary* const summaries = chunk_summaries(scores, s.pass_rows, s.n_k);
  const int64_t chunks = summary_chunks(s.n_k);
  bool any = false;
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int x = warp + 8 * k;
    const int64_t i = br.i0 + x, g = br.r0 + x, lr = lr0 + x;
    const bool in_pass = i < s.n_q && g >= s.row0 && g < s.row0 + s.pass_rows;
    int64_t lo = 0, hi = 0;
    if (in_pass) row_key_range(s, i, br.len, lo, hi);
    double m = -inf;
    bool nan_score = false;
    int64_t n = 0;
    if (in_pass && lo < hi) {
      // The row's chunk summaries (oracle_types.h ChunkSummary), a lane per chunk, four loads before their
      // uses: the sweep over the row's cached scores had been a tenth of this kernel's stall samples. Only
      // chunks that hold a key of [lo, hi) were summarised for the row: a row that sees no key has lo = hi,
      // possibly past the last chunk, and reads none.
      const ChunkSummary* cs = summaries + lr * chunks;
      for (int64_t c0 = lo / kChunk + lane; c0 * kChunk < hi; c0 += 4 * 32) {
        ChunkSummary q[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int64_t c = c0 + 32 * k;
          q[k] = c * kChunk < hi ? cs[c] : ChunkSummary{0, 0, 0, 0, 0};
        }
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (q[k].count > 0) {
            n += q[k].count;
            nan_score = nan_score || q[k].nan;
            m = fmax(m, s.scale * (s.scale > 0 ? q[k].z_max : q[k].z_min));
          }
      }
    }
    m = warp_max(m);
    n = warp_sum_i(n);
    nan_score = __any_sync(0xffffffffu, nan_score);
    const bool done = !in_pass || nan_score || n == 0;
    if (in_pass && done) write_idle_row(s, out, lr, lr * s.dv, nan_score, lane);
    if (lane == 0) {
      tr.m[x] = m, tr.lo[x] = lo, tr.hi[x] = hi, tr.n[x] = n;
      tr.active[x] = !done;
    }
    any = any || !done;
  }
  if (__syncthreads_or(any) == 0) return;

  // This warp's sums: rows 16 (warp / 4) + g and + g + 8, the column tiles 8 nt with nt = warp % 4 + 4 i
  // (columns 8 nt + 2 t and + 1), g = lane / 4, t = lane % 4: the m16n8k4 fragments (dmma.cuh).
  const int g = lane / 4, tq = lane % 4, r0 = 16 * (warp / 4), nt0 = warp % 4, tiles = (s.dv + 7) / 8;
  double a[4][4], abs_a[4][4];
  for (int x = 0; x < 4; ++x)
    for (int c = 0; c < 4; ++c) a[x][c] = abs_a[x][c] = 0;
  // The pitch's columns past dv are never staged: zero, so that the last tile's products there are finite.
  for (int x = threadIdx.x; x < kChunk * (ldv - s.dv); x += blockDim.x)
    vS[(x / (ldv - s.dv)) * ldv + s.dv + x % (ldv - s.dv)] = 0;
  // Lane partials of the rows whose weights this warp computes (v_max in stored units).
  double l[kRowsPerWarp], eta_max[kRowsPerWarp], v_max[kRowsPerWarp];
  for (int k = 0; k < kRowsPerWarp; ++k) l[k] = eta_max[k] = v_max[k] = 0;

  // The cached dot products of chunk j0's visible (row, key) pairs for this warp's rows (lane t: key t)
  // into buffer b, by cp.async; bit k of the result: row warp + 8k sees the lane's key. Issued for the
  // next chunk before this chunk's sums, so that the cache's latency hides behind them.
  // The lane's key's largest |V| (key_vmax) comes with them, one load for the warp's four rows.
  auto load_scores = [&](int64_t j0, int b, double& vm) {
    unsigned vis = 0;
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    const int64_t j = j0 + lane;
    for (int k = 0; k < kRowsPerWarp; ++k) {
      const int x = warp + 8 * k;
      if (tr.active[x] && lane < nc && sees_key(s, i_of(x), j, tr.lo[x], tr.hi[x], br.len)) {
        const double* cache = scores + (lr0 + x) * s.n_k;
        cp_async_8(&tr.dt[b][x][lane], cache + j);
        cp_async_8(&tr.ad[b][x][lane], cache + plane + j);
        vis |= 1u << k;
      }
    }
    cp_async_commit();
    vm = vis ? key_vmax[kv0 + j] : 0.0;
    return vis;
  };

  // V's chunks by cp.async as stored bytes, converted in shared memory once they are there: every chunk
  // whole 16-byte pieces (dv elements a key a multiple of 16 bytes, V's base 16-byte aligned; chunks
  // start at multiples of 32 keys). Otherwise the chunk is staged from device memory when it is summed.
  const int elt = storage_bytes(s.in);
  const bool v_async = (s.dv * elt) % 16 == 0 && reinterpret_cast<uintptr_t>(s.v) % 16 == 0;
  auto fetch_v = [&](int64_t j0, int b) {
    if (!v_async) return;
    const int pieces = int(min(int64_t(kChunk), br.hi - j0)) * s.dv * elt / 16;
    const unsigned char* src = static_cast<const unsigned char*>(s.v) + v_base(s, br.b, br.hk, j0) * elt;
    for (int x = threadIdx.x; x < pieces; x += blockDim.x) cp_async_16(raw(b) + 16 * x, src + 16 * x);
  };

  // Sweep 2: per chunk, the weights of every (row, key) of the block (warp w: rows w + 8k, lane t: key t),
  // then the tile's sums.
  int buf = 0;
  fetch_v(chunk_floor(br.lo), buf);
  double chunk_vm = 0;  // the lane's key's key_vmax where one of the warp's rows sees it
  unsigned chunk_vis = load_scores(chunk_floor(br.lo), buf, chunk_vm);
  for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi; j0 += kChunk, buf ^= 1) {
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    cp_async_wait_all();  // this chunk's dot products and V bytes, copied by this thread
    __syncthreads();      // the previous chunk's V and weights are read, and everyone's copies are in
    chunk_finite = true;
    if (v_async) {
      chunk_finite = with_storage(s.in, [&](auto tag) {
        return stage_raw_v<decltype(tag)::value>(raw(buf), nc, s.dv, vd, vS, ldv);
      });
    } else {
      stage_rows_any(s.in, s.v, v_base(s, br.b, br.hk, j0), s.dv, nc, vS, ldv, 1, v_value);
    }
    for (int k = 0; k < kRowsPerWarp; ++k) {
      const int x = warp + 8 * k;
      const bool vis = chunk_vis >> k & 1u;
      double w = 0;
      if (vis) {
        const double dt = tr.dt[buf][x][lane], ad = tr.ad[buf][x][lane];
        const double xs = s.scale * dt - tr.m[x];
        eta_max[k] = fmax(eta_max[k], g_d * ad + u * fabs(xs) + 2.01 * u);
        w = exp(xs);
        l[k] += w;
        v_max[k] = fmax(v_max[k], chunk_vm);
      }
      const unsigned seen = __ballot_sync(0xffffffffu, vis);
      tr.w[x][lane] = w;
      if (lane == 0) tr.seen[x] = seen;
    }
    if (j0 + kChunk < br.hi) {
      fetch_v(j0 + kChunk, buf ^ 1);  // raw(buf ^ 1) was converted a chunk ago, before that chunk's barrier
      chunk_vis = load_scores(j0 + kChunk, buf ^ 1, chunk_vm);
    }
    if (__syncthreads_or(!chunk_finite) == 0) {
      // Four keys a step, ascending: a's chains are the row kernel's (the header).
      for (int k0 = 0; k0 < nc; k0 += 4) {
        const double w0 = tr.w[r0 + g][k0 + tq], w1 = tr.w[r0 + g + 8][k0 + tq];
        const double* vk = vS + (k0 + tq) * ldv + g;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int nt = nt0 + 4 * i;
          if (nt >= tiles) break;  // warp-uniform
          const double v = vk[8 * nt];
          dmma_16x8x4(a[i], w0, w1, v);
          dmma_16x8x4(abs_a[i], w0, w1, fabs(v));
        }
      }
      continue;
    }
    // An infinity or a NaN in V reaches only the rows that see its key: the row kernel's walk.
    for (int h = 0; h < 2; ++h) {
      const int row = r0 + g + 8 * h;
      const unsigned seen = tr.seen[row];
      for (int t = 0; t < nc; ++t) {
        if (!(seen >> t & 1u)) continue;
        const double wt = tr.w[row][t];
        for (int i = 0; i < 4; ++i) {
          const int nt = nt0 + 4 * i;
          if (nt >= tiles) break;
          for (int e = 0; e < 2; ++e) {
            const double v = vS[t * ldv + 8 * nt + 2 * tq + e];
            a[i][2 * h + e] = fma(wt, v, a[i][2 * h + e]);
            abs_a[i][2 * h + e] = fma(wt, fabs(v), abs_a[i][2 * h + e]);
          }
        }
      }
    }
  }

  // Each row's l and the scalars of its certificate (the row kernel's, from the same lane partials).
  for (int k = 0; k < kRowsPerWarp; ++k) {
    const int x = warp + 8 * k;
    const double lsum = warp_sum(l[k]);
    const double em = warp_max(eta_max[k]);
    const double vm = warp_max(v_max[k]) * fabs(s.vd);
    if (!tr.active[x] || lane != 0) continue;
    const double n = double(tr.n[x]);
    tr.l[x] = lsum;
    tr.underflow[x] = 2 * n * 0x1p-1074 * vm / lsum;
    tr.e[x] = exp(em);
    tr.g[x] = gamma53(n + 2);
    const double lse = tr.m[x] + log(lsum);
    out.lse[lr0 + x] = lse;
    out.lse_err[lr0 + x] = 1.001 * (em + tr.g[x] + 2 * u * fabs(log(lsum)) + u * fabs(lse));
    const AbsScaleBound ab = abs_scale_bound(tr.e[x], tr.g[x], tr.underflow[x]);
    out.a_factor[lr0 + x] = ab.factor;
    out.a_floor[lr0 + x] = ab.floor;
  }
  __syncthreads();
  for (int h = 0; h < 2; ++h) {
    const int row = r0 + g + 8 * h;
    if (!tr.active[row]) continue;
    const int64_t lr = lr0 + row;
    const double lsum = tr.l[row], e = tr.e[row], gm = tr.g[row], underflow = tr.underflow[row];
    for (int i = 0; i < 4; ++i) {
      const int nt = nt0 + 4 * i;
      for (int c = 0; c < 2; ++c) {
        const int col = 8 * nt + 2 * tq + c;
        if (col >= s.dv) break;
        const double sum = a[i][2 * h + c], abs_sum = abs_a[i][2 * h + c];
        const double o = sum / lsum;
        const double abs_scale = abs_sum / lsum * (1 + gm);
        out.o[lr * s.dv + col] = o;
        out.abs_scale[lr * s.dv + col] = o != o ? 0.0 : abs_sum / lsum;
        out.o_err[lr * s.dv + col] =
            1.001 * (2 * e * e * e * (e - 1) * abs_scale + gm * (abs_scale + fabs(o)) + 2 * u * fabs(o) + underflow);
      }
    }
  }
}

}  // namespace fc::gpu::detail
