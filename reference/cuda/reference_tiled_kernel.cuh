// Exact attention in float64 on the GPU, the reference kernel's arithmetic (reference_kernel.cuh) laid out
// for the float64 units once the score kernel has filled the score cache: a block owns 32 rows of one
// (batch, head), and its weighted sums over V are a tile of 32 rows by up to 128 columns, each thread
// accumulating a 4 x 4 block of (row, column) pairs, so that every staged value of V serves four rows and
// every weight four columns. In the row kernel a warp owns a row and a lane a column: each staged V value
// served one row, for two multiply-adds per shared-memory load.
//
// The same bits as the row kernel: every sum is the row kernel's, in its order. Per (row, column) the
// products are added key after key, skipping the keys the row does not see (a NaN value there must not
// reach the row); per row, the weights are summed per lane (key mod 32) over the chunks and then by the
// same warp reduction, because warp w computes the weights of rows w, w + 8, w + 16 and w + 24 with lane t
// on key t of each chunk, as the row kernel's warp does for its row. Maxima and counts are order-free.
#pragma once

#include "reference/cuda/reference_kernel.cuh"

namespace fc::gpu::detail {

inline constexpr int kTiledRows = 32;      // rows per block
inline constexpr int kTiledMaxDv = 128;    // value columns at most (32 threads x 4 columns)
inline constexpr int kTiledThreads = 256;  // 8 warps: warp w owns rows 4w .. 4w + 3 of the sums
inline constexpr int kRowsPerWarp = kTiledRows / 8;

// Shared memory: the staged V chunk (true values), then the chunk's weights and visibility per row, the
// rows' scalars, and the cached dot products of two chunks (this one's, and the next one's in flight).
struct TiledRows {
  double w[kTiledRows][kChunk];
  unsigned seen[kTiledRows];  // bit t: the row sees key t of the chunk
  double m[kTiledRows], l[kTiledRows], e[kTiledRows], g[kTiledRows], underflow[kTiledRows];
  int64_t lo[kTiledRows], hi[kTiledRows], n[kTiledRows];
  int active[kTiledRows];  // takes part in the sums (a row of the pass with visible keys and no NaN score)
  double dt[2][kTiledRows][kChunk], ad[2][kTiledRows][kChunk];  // by cp.async: each lane reads its own
};

// Whether none of four doubles is an infinity or a NaN (exponent field all ones), from their high words.
__device__ __forceinline__ bool all_finite(const double (&v)[4]) {
  int e = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) e = max(e, __double2hiint(v[c]) & 0x7ff00000);
  return e != 0x7ff00000;
}
__host__ __device__ constexpr size_t reference_tiled_smem(int dv) {
  return staged_v_bytes(dv) + smem_align(sizeof(TiledRows));
}

__global__ void __launch_bounds__(kTiledThreads, 2)
    reference_tiled_kernel(Shape s, const double* key_vmax, ReferenceOut out, const double* scores) {
  extern __shared__ double smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockRows br = block_rows(s);
  unsigned char* base = reinterpret_cast<unsigned char*>(smem);
  double* vS = reinterpret_cast<double*>(base);
  TiledRows& tr = *reinterpret_cast<TiledRows*>(base + staged_v_bytes(s.dv));
  const double vd = s.vd;
  auto v_value = [vd](double x) { return x * vd; };
  const double u = 0x1p-53, inf = HUGE_VAL;
  const int64_t plane = s.pass_rows * s.n_k, kv0 = (int64_t(br.b) * s.heads_kv + br.hk) * s.n_k;
  const double g_d = gamma53(double(s.d) + 1) * fabs(s.scale);
  const int64_t lr0 = br.r0 - s.row0;  // block row x is the pass's row lr0 + x
  auto i_of = [&br](int x) { return br.i0 + x; };  // block row x's query index

  // Sweep 1 from the cache, warp w for rows w + 8k: the maximum score, NaN, the number of visible keys
  // (the row kernel's).
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
    if (in_pass)
      for (int64_t j = chunk_floor(br.lo) + lane; j < br.hi; j += kChunk)
        if (j >= lo && j < hi && visible(s, i, j, br.len)) {
          const double sc = s.scale * scores[lr * s.n_k + j];
          ++n;
          if (sc != sc) nan_score = true;
          else m = fmax(m, sc);
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

  // This thread's 4 x 4 block of sums: rows 4 warp .. 4 warp + 3 (warp-uniform), columns 4 lane .. + 3.
  const int r0 = kRowsPerWarp * warp, c0 = 4 * lane;
  // The two 16-byte loads of a staged V row need an even row stride (the chunk is dv values a key).
  const bool has_cols = c0 < s.dv, whole = c0 + 4 <= s.dv && s.dv % 2 == 0;
  double a[kRowsPerWarp][4], abs_a[kRowsPerWarp][4];
  for (int x = 0; x < kRowsPerWarp; ++x)
    for (int c = 0; c < 4; ++c) a[x][c] = abs_a[x][c] = 0;
  // Lane partials of the rows whose weights this warp computes (v_max in stored units).
  double l[kRowsPerWarp], eta_max[kRowsPerWarp], v_max[kRowsPerWarp];
  for (int k = 0; k < kRowsPerWarp; ++k) l[k] = eta_max[k] = v_max[k] = 0;

  // The cached dot products of chunk j0's visible (row, key) pairs for this warp's rows (lane t: key t)
  // into buffer b, by cp.async; bit k of the result: row warp + 8k sees the lane's key. Issued for the
  // next chunk before this chunk's sums, so that the cache's latency hides behind them.
  auto load_scores = [&](int64_t j0, int b) {
    unsigned vis = 0;
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    const int64_t j = j0 + lane;
    for (int k = 0; k < kRowsPerWarp; ++k) {
      const int x = warp + 8 * k;
      if (tr.active[x] && lane < nc && j >= tr.lo[x] && j < tr.hi[x] && visible(s, i_of(x), j, br.len)) {
        const double* cache = scores + (lr0 + x) * s.n_k;
        cp_async_8(&tr.dt[b][x][lane], cache + j);
        cp_async_8(&tr.ad[b][x][lane], cache + plane + j);
        vis |= 1u << k;
      }
    }
    cp_async_commit();
    return vis;
  };

  // Sweep 2: per chunk, the weights of every (row, key) of the block (warp w: rows w + 8k, lane t: key t),
  // then the tile's sums.
  int buf = 0;
  unsigned chunk_vis = load_scores(chunk_floor(br.lo), buf);
  for (int64_t j0 = chunk_floor(br.lo); j0 < br.hi; j0 += kChunk, buf ^= 1) {
    const int nc = int(min(int64_t(kChunk), br.hi - j0));
    __syncthreads();  // the previous chunk's V and weights are read
    stage_v(s, br, j0, nc, vS, v_value);
    const int64_t j = j0 + lane;
    cp_async_wait_all();  // this chunk's dot products, copied by this thread
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
        v_max[k] = fmax(v_max[k], key_vmax[kv0 + j]);
      }
      const unsigned seen = __ballot_sync(0xffffffffu, vis);
      tr.w[x][lane] = w;
      if (lane == 0) tr.seen[x] = seen;
    }
    if (j0 + kChunk < br.hi) chunk_vis = load_scores(j0 + kChunk, buf ^ 1);
    __syncthreads();
    if (!has_cols) continue;
    unsigned seen[kRowsPerWarp];
    for (int x = 0; x < kRowsPerWarp; ++x) seen[x] = tr.seen[r0 + x];
    for (int t = 0; t < nc; ++t) {
      double v[4];
      if (whole) {
        const double2 v01 = *reinterpret_cast<const double2*>(vS + t * s.dv + c0);
        const double2 v23 = *reinterpret_cast<const double2*>(vS + t * s.dv + c0 + 2);
        v[0] = v01.x, v[1] = v01.y, v[2] = v23.x, v[3] = v23.y;
      } else {
        for (int c = 0; c < 4; ++c) v[c] = c0 + c < s.dv ? vS[t * s.dv + c0 + c] : 0.0;
      }
      if (all_finite(v)) {
        // A key a row does not see has weight 0 there, and fma(0, v, a) = a for a finite v (a is never -0:
        // it starts at +0, and a sum that comes out zero is +0), so the sixteen pairs need no row's test
        // and their chains interleave: the same bits as skipping the key.
#pragma unroll
        for (int x = 0; x < kRowsPerWarp; ++x) {
          const double wt = tr.w[r0 + x][t];
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            a[x][c] = fma(wt, v[c], a[x][c]);
            abs_a[x][c] = fma(wt, fabs(v[c]), abs_a[x][c]);
          }
        }
        continue;
      }
      // An infinity or a NaN in V reaches only the rows that see its key.
#pragma unroll
      for (int x = 0; x < kRowsPerWarp; ++x) {
        if (!(seen[x] >> t & 1u)) continue;  // warp-uniform: the row is the warp's
        const double wt = tr.w[r0 + x][t];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          a[x][c] = fma(wt, v[c], a[x][c]);
          abs_a[x][c] = fma(wt, fabs(v[c]), abs_a[x][c]);
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
  }
  __syncthreads();
  if (!has_cols) return;
  for (int x = 0; x < kRowsPerWarp; ++x) {
    const int row = r0 + x;
    if (!tr.active[row]) continue;
    const int64_t lr = lr0 + row;
    const double lsum = tr.l[row], e = tr.e[row], g = tr.g[row], underflow = tr.underflow[row];
    for (int c = 0; c < 4; ++c) {
      const int col = c0 + c;
      if (col >= s.dv) break;
      const double o = a[x][c] / lsum;
      const double abs_scale = abs_a[x][c] / lsum * (1 + g);
      out.o[lr * s.dv + col] = o;
      out.abs_scale[lr * s.dv + col] = o != o ? 0.0 : abs_a[x][c] / lsum;
      out.o_err[lr * s.dv + col] =
          1.001 * (2 * e * e * e * (e - 1) * abs_scale + g * (abs_scale + fabs(o)) + 2 * u * fabs(o) + underflow);
    }
  }
}

}  // namespace fc::gpu::detail
