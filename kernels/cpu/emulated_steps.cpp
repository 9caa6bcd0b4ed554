// The emulated kernel's steps (emulated_steps.h). This file is compiled with -ffp-contract=off (top-level
// CMakeLists), so the only fused multiply-adds are the std::fma calls written below; every other float
// expression rounds once per operation, in float.
#include "kernels/cpu/emulated_steps.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/visibility.h"

namespace fc::emulation {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float round_p(const Setup& st, float x) {
  if (!st.round_p) return x;
  return static_cast<float>(round_to(st.rs.p_format, x, st.fp8 ? Overflow::saturate : Overflow::ieee));
}

// Problem::visible, with the alignment as the kernel applies it (window_alignment_ignored drops it).
bool visible(const Setup& st, const Problem& p, int b, int64_t i, int64_t j) {
  return key_visible(i, j, p.n_q, p.key_length(b), p.window.active(), p.window.left, p.window.right,
                     st.bugs.bottom_right(p.window.align == Align::bottom_right),
                     p.dense_mask.empty() || p.dense_mask[size_t(i) * p.n_k + j]);
}

// One score q.k: block-FMA chains over d (tensor cores) or sequential fmaf (SIMT).
float dot_score(const Setup& st, const float* q, const float* k, int d, TileWork& w) {
  float acc = 0.0f;
  if (st.tensor_core) {
    const int blk = st.tcm.b;
    for (int c0 = 0; c0 < d; c0 += blk) {
      const int n = std::min(blk, d - c0);
      for (int t = 0; t < n; ++t) {
        w.terms[t] = double(q[c0 + t]) * double(k[c0 + t]);
        w.align[t] = product_alignment(st.tcm, q[c0 + t], k[c0 + t], st.mn_op, st.mn_op);
      }
      acc = mma_step(st.tcm, acc, w.terms.data(), w.align.data(), n);
    }
  } else {
    for (int c = 0; c < d; ++c) acc = std::fma(q[c], k[c], acc);
  }
  return acc;
}

}  // namespace

Setup make_setup(const Problem& p, const RunOptions& o, TileSize tile, int splits, BugHooks bugs) {
  Setup st;
  st.rs = recipe_spec(o.recipe);
  st.simt = o.recipe == Recipe::fp32;
  st.tensor_core = !st.simt && o.accumulation == Accumulation::tensor_core;
  st.tcm = tensor_core_model(o.recipe);
  st.fp8 = is_fp8(o.recipe);
  st.round_p = !st.simt;
  st.qd = st.fp8 ? o.q_descale : 1.0, st.kd = st.fp8 ? o.k_descale : 1.0, st.vd = st.fp8 ? o.v_descale : 1.0;
  const double scale = p.effective_scale() * st.qd * st.kd;
  st.negate = scale < 0;
  st.c = static_cast<float>(std::fabs(scale) * 1.4426950408889634074);  // one rounding from double
  st.se = static_cast<float>(std::fabs(scale));
  st.lse_offset = st.fp8 ? static_cast<float>(8.0 * 0.69314718055994530942) : 0.0f;
  st.p_scale = st.fp8 ? 256.0f : 1.0f;
  st.v_descale = static_cast<float>(st.vd);
  st.br = tile.m;
  st.bc = tile.n;
  st.splits = splits;
  st.l_from_fp32 = bugs.l_from_fp32(o.l_from_fp32_p) || bugs.l_from_unclamped_p(st.fp8);
  st.fa1 = o.normalisation == Normalisation::fa1;
  st.two_level = st.fp8 && o.two_level_accum;
  st.l_tensor_core =
      st.tensor_core && (o.recipe == Recipe::fp16 || o.recipe == Recipe::bf16) && !st.l_from_fp32 && !st.fa1;
  st.mn_op = spec(st.rs.operand).min_normal();
  st.mn_p = spec(st.rs.p_format).min_normal();
  st.shortest_key_length = p.n_k;
  for (int b = 0; b < p.batch; ++b) st.shortest_key_length = std::min(st.shortest_key_length, p.key_length(b));
  st.bugs = bugs;
  return st;
}

void load_head(const Setup& st, const Problem& p, const AttentionInputs& in, int b, int h, HeadOperands& ops) {
  const int hk = st.bugs.kv_head(h, p.heads_q / p.heads_kv);
  auto load = [&](std::vector<float>& dst, const double* src, size_t n, double descale, bool neg) {
    dst.resize(n);
    for (size_t x = 0; x < n; ++x) {
      double v = src[x] / descale;
      if (st.rs.operand == Format::tf32) v = round_to(Format::tf32, v);
      dst[x] = static_cast<float>(neg ? -v : v);
    }
  };
  load(ops.q, &in.q[p.q_index(b, h, 0, 0)], size_t(p.n_q) * p.d, st.qd, st.negate);
  load(ops.k, &in.k[p.k_index(b, hk, 0, 0)], size_t(p.n_k) * p.d, st.kd, false);
  load(ops.v, &in.v[p.v_index(b, hk, 0, 0)], size_t(p.n_k) * p.dv, st.vd, false);
  // Rows and keys whose index wraps (index_int16_overflow) load from before the tensor: NaN here.
  for (int64_t x = 32768; st.bugs.index_wraps(x) && x < std::max(p.n_q, p.n_k); ++x) {
    if (x < p.n_q) std::fill_n(&ops.q[size_t(x) * p.d], p.d, kNaN);
    if (x < p.n_k) std::fill_n(&ops.k[size_t(x) * p.d], p.d, kNaN);
    if (x < p.n_k) std::fill_n(&ops.v[size_t(x) * p.dv], p.dv, kNaN);
  }
}

RowSchedule schedule_row(const Setup& st, const Problem& p, int b, int64_t i) {
  RowSchedule r;
  r.len = p.key_length(b);
  // The row block's key range (a window cuts it; the dense mask is per element), cut into splits
  // exactly as split_block_range does.
  const int64_t m0 = (i / st.br) * st.br, row_last = std::min<int64_t>(m0 + st.br, p.n_q) - 1;
  const int64_t off = st.bugs.bottom_right(p.window.align == Align::bottom_right) ? r.len - p.n_q : 0;
  int64_t lo = 0, hi = r.len;
  if (p.window.active()) {
    if (p.window.left >= 0) lo = std::max<int64_t>(lo, m0 + off - p.window.left);
    if (p.window.right >= 0) hi = std::min<int64_t>(hi, row_last + off + p.window.right + 1);
  }
  hi = st.bugs.window_end(hi, r.len, p.window.right >= 0);
  if (hi < lo) hi = lo;
  r.first = lo / st.bc;
  r.last = hi > lo ? (hi + st.bc - 1) / st.bc : r.first;
  r.per = st.bugs.split_tiles(r.first, r.last, st.splits, st.bc, st.shortest_key_length);
  r.diag = i + off;
  return r;
}

void reset(const Setup& st, RowState& rs, int dv) {
  rs.m = st.bugs.initial_max();
  for (float& x : rs.lane_l) x = 0.0f;
  rs.l = 0.0f;
  rs.a.assign(size_t(dv), 0.0f);
  rs.last_tile_raised_max = false;
}

TileWork::TileWork(int bc)
    : s(size_t(bc)), vis(size_t(bc)), hidden(size_t(bc), BugHooks::Hidden::skipped), stale_s(size_t(bc)),
      px(size_t(bc)), pr(size_t(bc)), terms(64), align(64) {}

void tile_scores(const Setup& st, const Problem& p, int b, int64_t i, const RowSchedule& rsch, int64_t tile,
                 const HeadOperands& ops, TileWork& w) {
  const int d = p.d;
  w.n0 = tile * st.bc;
  const bool last_tile = tile == rsch.last - 1;
  const float* q = &ops.q[size_t(i) * d];
  if (w.smem_k && w.smem_k->size() < size_t(st.bc) * d) w.smem_k->resize(size_t(st.bc) * d, 0.0f);
  for (int x = 0; x < st.bc; ++x) {
    const int64_t j = w.n0 + x;
    bool vis = j < p.n_k && visible(st, p, b, i, j);
    if (!vis && st.bugs.extra_window_key(j, rsch.diag, p.window.right, p.window.left, rsch.len))
      vis = p.dense_mask.empty() || p.dense_mask[size_t(i) * p.n_k + j];
    w.vis[x] = vis || st.bugs.tail_visible(last_tile, j, rsch.len);
    w.hidden[x] = w.vis[x] ? BugHooks::Hidden::skipped : st.bugs.hidden_key(j, rsch.len, p.n_k);
    if (w.smem_k) {
      // The shared K tile: rows inside the sequence are loaded, the others keep what was there.
      float* row = &(*w.smem_k)[size_t(x) * d];
      if (j < rsch.len) std::copy_n(&ops.k[size_t(j) * d], d, row);
      if (w.hidden[x] == BugHooks::Hidden::stale_k) w.stale_s[x] = dot_score(st, q, row, d, w);
    }
    if (!w.vis[x]) {
      w.s[x] = st.bugs.masked_score();
      continue;
    }
    if (j >= p.n_k) {  // only under tail_not_masked: a padding row, score 0
      w.s[x] = 0.0f;
      continue;
    }
    w.s[x] = dot_score(st, q, &ops.k[size_t(j) * d], d, w);
  }
}

void softmax_step(const Setup& st, RowState& rs, TileWork& w) {
  float tmax = -kInf;
  for (int x = 0; x < st.bc; ++x) tmax = std::fmax(tmax, w.s[x]);  // fmaxf: NaN ignored, as on the GPU
  const float m_old = rs.m;
  const float mx = st.bugs.used_max(m_old, st.bugs.running_max(m_old, tmax), st.c, st.fp8);
  w.alpha = st.bugs.alpha(m_old, mx, st.c);
  const float mc = mx == -kInf ? 0.0f : mx * st.c;
  rs.last_tile_raised_max = m_old != -kInf && mx > m_old;
  rs.m = mx;
  for (int x = 0; x < st.bc; ++x) {
    float pv = std::exp2(std::fma(w.s[x], st.c, -mc));
    // A stale K row's weight, masked by a multiplication: 0 * NaN and 0 * inf are NaN.
    if (w.hidden[x] == BugHooks::Hidden::stale_k) pv = std::exp2(std::fma(w.stale_s[x], st.c, -mc)) * 0.0f;
    w.px[x] = pv * st.p_scale;     // exact (power of two)
    w.pr[x] = round_p(st, w.px[x]);  // P~, the A operand of P.V
  }
}

void sum_l(const Setup& st, RowState& rs, TileWork& w) {
  const std::vector<float>& l_src = st.l_from_fp32 ? w.px : w.pr;
  const bool rescale = st.bugs.rescale_l();
  w.l_old = rs.l;
  if (st.fa1) {
    float l = rescale ? rs.l * w.alpha : rs.l;
    for (int x = 0; x < st.bc; ++x) l = l + l_src[x];
    rs.l = l;
  } else if (st.simt) {
    // xor butterfly over the (power-of-two padded) tile: offsets W/2, ..., 1.
    int width = 1;
    while (width < st.bc) width *= 2;
    w.tree.resize(size_t(width));
    for (int x = 0; x < width; ++x) w.tree[x] = x < st.bc ? l_src[x] : 0.0f;
    for (int off = width / 2; off > 0; off /= 2)
      for (int x = 0; x < off; ++x) w.tree[x] = w.tree[x] + w.tree[x + off];
    rs.l = (rescale ? rs.l * w.alpha : rs.l) + w.tree[0];
  } else if (st.l_tensor_core) {
    // One block FMA per b keys: P~ times 1 (exact products, aligned as P.V's), chained through l,
    // as in the CUDA kernel's P.V loop.
    if (rescale) rs.l = rs.l * w.alpha;
    const int blk = st.tcm.b;
    for (int x0 = 0; x0 < st.bc; x0 += blk) {
      const int n = std::min(blk, st.bc - x0);
      for (int t = 0; t < n; ++t) {
        w.terms[t] = w.pr[x0 + t];
        w.align[t] = product_alignment(st.tcm, w.pr[x0 + t], 1.0, st.mn_p, st.mn_op);
      }
      rs.l = mma_step(st.tcm, rs.l, w.terms.data(), w.align.data(), n);
    }
  } else {
    if (rescale)
      for (float& ll : rs.lane_l) ll = ll * w.alpha;
    for (int x = 0; x < st.bc; ++x) {
      float& ll = rs.lane_l[(x % 8) / 2];
      ll = ll + l_src[x];
    }
  }
}

void accumulate_pv(const Setup& st, const Problem& p, const HeadOperands& ops, RowState& rs, TileWork& w) {
  const int dv = p.dv, blk = st.tcm.b;
  if (st.fa1) {
    const float k_a = st.bugs.rescale_a() ? w.l_old * w.alpha : w.l_old;
    for (int c = 0; c < dv; ++c) rs.a[c] = k_a * rs.a[c];  // a = fl(alpha l_old) * O_old
  } else if (st.bugs.rescale_a()) {
    for (int c = 0; c < dv; ++c) rs.a[c] = rs.a[c] * w.alpha;
  }
  for (int c = 0; c < dv; ++c) {
    auto vval = [&](int x) -> float {
      const int64_t j = w.n0 + x;
      const bool read = w.vis[x] || w.hidden[x] == BugHooks::Hidden::v_read;  // masked keys are never read
      return (read && j < p.n_k) ? ops.v[size_t(j) * dv + c] : 0.0f;
    };
    if (st.tensor_core) {
      float acc = st.two_level ? 0.0f : rs.a[c];
      for (int x0 = 0; x0 < st.bc; x0 += blk) {
        const int n = std::min(blk, st.bc - x0);
        for (int t = 0; t < n; ++t) {
          const double pv = w.pr[x0 + t], vv = vval(x0 + t);
          w.terms[t] = pv * vv;
          w.align[t] = product_alignment(st.tcm, pv, vv, st.mn_p, st.mn_op);
        }
        acc = mma_step(st.tcm, acc, w.terms.data(), w.align.data(), n);
      }
      rs.a[c] = st.two_level ? rs.a[c] + acc : acc;
    } else {
      float acc = rs.a[c];
      for (int x = 0; x < st.bc; ++x)
        if (w.vis[x] || w.hidden[x] != BugHooks::Hidden::skipped) acc = std::fma(w.pr[x], vval(x), acc);
      rs.a[c] = acc;
    }
  }
  if (st.fa1) {
    const float inv = rs.l > 0.0f ? 1.0f / rs.l : 0.0f;
    for (int c = 0; c < dv; ++c) rs.a[c] = rs.a[c] * inv;
  }
}

void finish_split(const Setup& st, RowState& rs) {
  if (!st.fa1 && !st.simt && !st.l_tensor_core) rs.l = (rs.lane_l[0] + rs.lane_l[1]) + (rs.lane_l[2] + rs.lane_l[3]);
  if (st.fa1 && st.splits > 1)
    for (float& x : rs.a) x = x * rs.l;  // back to unnormalised for the merge
}

void epilogue(const Setup& st, const Problem& p, int b, int h, int64_t i, std::vector<RowState>& states,
              SubjectOutput& out) {
  const int dv = p.dv;
  float m, l;
  std::vector<float>& a = states[0].a;
  const bool normalised = st.fa1 && st.splits == 1;
  bool skip_division = false;
  if (st.splits == 1) {
    m = states[0].m;
    l = states[0].l;
    skip_division = st.bugs.skip_division(states[0].last_tile_raised_max);
  } else {
    // split_kv_merge.cu: weights 2^((m_s - m) c) of each split's (m, l, a).
    m = -kInf;
    for (const RowState& r : states) m = std::fmax(m, r.m);
    l = 0.0f;
    std::vector<float> w(static_cast<size_t>(st.splits)), merged(static_cast<size_t>(dv));
    for (int sp = 0; sp < st.splits; ++sp) {
      w[sp] = states[sp].m == -kInf ? 0.0f : std::exp2((states[sp].m - m) * st.c);
      l = l + w[sp] * states[sp].l;
    }
    for (int c = 0; c < dv; ++c) {
      float acc = 0.0f;
      for (int sp = 0; sp < st.splits; ++sp) acc = acc + w[sp] * states[sp].a[c];
      merged[c] = acc;
    }
    for (int c = 0; c < dv; ++c) a[c] = merged[c];
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  const size_t o0 = p.o_index(b, h, i, 0);
  for (int c = 0; c < dv; ++c) {
    const bool undivided = skip_division || st.bugs.wide_head_dim_skip(st.fp8, p.d, dv, c, i, st.br, p.n_q);
    float x = (normalised || undivided) ? a[c] : a[c] * inv;
    if (normalised && std::isnan(l)) x = kNaN;
    if (st.fp8) x = x * st.v_descale;
    out.o_unrounded[o0 + c] = x;
    out.o[o0 + c] = round_to(st.rs.output, x);
  }
  double lse;
  if (std::isnan(l)) lse = std::numeric_limits<double>::quiet_NaN();
  else if (!(l > 0.0f)) lse = -std::numeric_limits<double>::infinity();
  else lse = (m * st.se) + (std::log(l) - st.lse_offset);
  out.lse[p.lse_index(b, h, i)] = lse;
}

}  // namespace fc::emulation
