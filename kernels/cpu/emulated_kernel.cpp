// The CPU emulation of the fused kernel. Rounding points: see emulated_kernel.h and, point by point,
// kernels/cuda/softmax.h (tensor-core recipes), kernels/cuda/fwd_fp32.cu (fp32 SIMT) and
// kernels/cuda/split_kv_merge.cu (split-KV). This file is compiled with -ffp-contract=off (top-level
// CMakeLists), so the only fused multiply-adds are the std::fma calls written below; every other float
// expression rounds once per operation, in float.
#include "kernels/cpu/emulated_kernel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/tile_policy.h"
#include "reference/tensor_core_model.h"

namespace fc {

namespace {

constexpr std::array<std::pair<DeliberateBug, std::string_view>, 9> kBugNames = {{
    {DeliberateBug::none, "none"},
    {DeliberateBug::a_not_rescaled, "a_not_rescaled"},
    {DeliberateBug::l_not_rescaled, "l_not_rescaled"},
    {DeliberateBug::rescale_inverted, "rescale_inverted"},
    {DeliberateBug::tail_not_masked, "tail_not_masked"},
    {DeliberateBug::causal_off_by_one, "causal_off_by_one"},
    {DeliberateBug::tile_local_max, "tile_local_max"},
    {DeliberateBug::division_skipped_after_last_tile_max_change, "division_skipped_after_last_tile_max_change"},
    {DeliberateBug::l_from_fp32_p_without_budget, "l_from_fp32_p_without_budget"},
}};

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The per-run constants, as the CUDA host code computes them (fwd_params.h).
struct Setup {
  Recipe recipe;
  RecipeSpec rs;
  bool simt;          // fp32 recipe: the SIMT kernel's rounding points (fwd_fp32.cu)
  bool tensor_core;   // block-FMA model for S and P.V (else IEEE sequential fmaf)
  BlockFmaModel tcm;
  bool fp8;
  bool round_p;       // P is rounded to rs.p_format (all recipes but fp32)
  float c;            // |fl32(scale * q_descale * k_descale * log2 e)|
  float se;           // |fl32(scale * q_descale * k_descale)|
  bool negate;        // the scale is negative: scores are negated (exactly) so the max is the max of c*s
  float lse_offset;   // fl32(8 ln 2) for fp8 (P carries 2^8), else 0
  float p_scale;      // 256 for fp8, else 1
  float v_descale;    // fp8: fl32(v_descale), else 1
  int br, bc, splits;
  bool l_from_fp32;
  bool l_tensor_core;  // l = P~ times ones on the tensor cores, as the 16-bit CUDA kernels sum it
  bool fa1;
  bool two_level;
};

float round_p(const Setup& st, float x) {
  if (!st.round_p) return x;
  return static_cast<float>(round_to(st.rs.p_format, x, st.fp8 ? Overflow::saturate : Overflow::ieee));
}

// Per split (or whole row) unnormalised state, as the CUDA kernel keeps it.
struct RowState {
  float m = -kInf;
  std::array<float, 4> lane_l{0, 0, 0, 0};  // quad partial sums (tensor-core recipes)
  float l = 0;                               // SIMT / FA-1 running sum, and the finalised sum
  std::vector<float> a;                      // FA-2: unnormalised accumulator; FA-1: normalised O
  bool last_tile_raised_max = false;
  bool any_tile = false;
};

}  // namespace

std::string_view bug_name(DeliberateBug bug) {
  for (const auto& [b, n] : kBugNames)
    if (b == bug) return n;
  return "unknown";
}

std::optional<DeliberateBug> parse_bug(std::string_view name) {
  for (const auto& [b, n] : kBugNames)
    if (n == name) return b;
  return std::nullopt;
}

EmulatedKernel::EmulatedKernel(DeliberateBug bug) : bug_(bug) {}

Capabilities EmulatedKernel::capabilities() const {
  Capabilities c;
  c.name = bug_ == DeliberateBug::none ? "cpu-emulation" : "cpu-emulation[bug=" + std::string(bug_name(bug_)) + "]";
  c.recipes.assign(all_recipes.begin(), all_recipes.end());
  c.dv_may_differ = true;
  c.any_tile = true;
  c.causal = c.window = c.dense_mask = c.key_lengths = c.gqa = c.lse = c.split_kv = true;
  c.fa1 = c.l_from_fp32_p = c.two_level_accum = true;
  c.deliberate_bugs = bug_ != DeliberateBug::none;
  return c;
}

TileSize EmulatedKernel::effective_tile(const Problem& p, const RunOptions& o) const {
  const bool fp8 = o.recipe == Recipe::fp8_e4m3 || o.recipe == Recipe::fp8_e5m2;
  const bool causal = p.window.active() && p.window.left < 0 && p.window.right == 0;
  const tiles::TileShape t = tiles::default_tile(p.d, o.recipe == Recipe::fp32, fp8, causal, p.n_q);
  return {o.tile_m > 0 ? o.tile_m : t.m, o.tile_n > 0 ? o.tile_n : t.n};
}

SubjectOutput EmulatedKernel::run(const Problem& p, const AttentionInputs& in, const RunOptions& o) {
  try {
    validate_inputs(p, in);
  } catch (const std::invalid_argument& e) {
    throw SubjectError(std::string("cpu-emulation: ") + e.what());
  }
  if (auto why = unsupported(capabilities(), p, o)) throw SubjectRefused(*why);

  Setup st;
  st.recipe = o.recipe;
  st.rs = recipe_spec(o.recipe);
  st.simt = o.recipe == Recipe::fp32;
  st.tensor_core = !st.simt && o.accumulation == Accumulation::tensor_core;
  st.tcm = tensor_core_model(o.recipe);
  st.fp8 = o.recipe == Recipe::fp8_e4m3 || o.recipe == Recipe::fp8_e5m2;
  st.round_p = !st.simt;
  const double qd = st.fp8 ? o.q_descale : 1.0, kd = st.fp8 ? o.k_descale : 1.0, vd = st.fp8 ? o.v_descale : 1.0;
  const double scale = p.effective_scale() * qd * kd;
  st.negate = scale < 0;
  st.c = static_cast<float>(std::fabs(scale) * 1.4426950408889634074);  // one rounding from double
  st.se = static_cast<float>(std::fabs(scale));
  st.lse_offset = st.fp8 ? static_cast<float>(8.0 * 0.69314718055994530942) : 0.0f;
  st.p_scale = st.fp8 ? 256.0f : 1.0f;
  st.v_descale = static_cast<float>(vd);
  const TileSize tile = effective_tile(p, o);
  st.br = tile.m;
  st.bc = tile.n;
  st.splits = effective_splits(o);
  st.l_from_fp32 = o.l_from_fp32_p || bug_ == DeliberateBug::l_from_fp32_p_without_budget;
  st.fa1 = o.normalisation == Normalisation::fa1;
  st.two_level = st.fp8 && o.two_level_accum;
  st.l_tensor_core = st.tensor_core && (o.recipe == Recipe::fp16 || o.recipe == Recipe::bf16) && !st.l_from_fp32 && !st.fa1;
  const Format operand = st.rs.operand;
  const Format out_fmt = st.rs.output;

  SubjectOutput res;
  // The plan as run. The l_from_fp32_p_without_budget bug sums l from the fp32 P but reports the
  // convention that was asked for: that is the bug.
  res.plan.tile = tile;
  res.plan.step_n = tile.n;
  res.plan.num_splits = st.splits;
  res.plan.l_from_fp32_p = o.l_from_fp32_p;
  res.plan.accumulation = st.tensor_core ? Accumulation::tensor_core : Accumulation::ieee_fp32;
  res.plan.two_level_accum = st.two_level;
  res.o.assign(p.o_size(), 0.0);
  res.lse.assign(p.lse_size(), -std::numeric_limits<double>::infinity());
  res.o_unrounded.assign(p.o_size(), 0.0);

  const int d = p.d, dv = p.dv, bc = st.bc;
  std::vector<float> qf(size_t(p.n_q) * d), kf(size_t(p.n_k) * d), vf(size_t(p.n_k) * dv);
  // Stored operand values: fp8 stores value / descale (exact by construction); tf32 rounds the fp32
  // inputs to tf32 operands (RN, ties to even); a negative scale is folded into Q (exact negation).
  auto load = [&](std::vector<float>& dst, const double* src, size_t n, double descale, bool neg) {
    for (size_t x = 0; x < n; ++x) {
      double v = src[x] / descale;
      if (operand == Format::tf32) v = round_to(Format::tf32, v);
      dst[x] = static_cast<float>(neg ? -v : v);
    }
  };

  std::vector<float> s(bc), pr(bc), px(bc);
  std::vector<char> vis(bc);
  std::vector<double> terms(64), align(64);
  // Smallest normals of the MMA operands: subnormal operands align at them (tensor_core_model.h).
  const double mn_op = spec(st.rs.operand).min_normal(), mn_p = spec(st.rs.p_format).min_normal();
  std::vector<float> tile_acc(dv), merged(dv), tree;
  std::vector<RowState> states(st.splits);
  const int blk = st.tcm.b;

  for (int b = 0; b < p.batch; ++b) {
    const int64_t len = p.key_length(b);
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = p.kv_head(h);
      load(qf, &in.q[p.q_index(b, h, 0, 0)], qf.size(), qd, st.negate);
      load(kf, &in.k[p.k_index(b, hk, 0, 0)], kf.size(), kd, false);
      load(vf, &in.v[p.v_index(b, hk, 0, 0)], vf.size(), vd, false);

      for (int64_t i = 0; i < p.n_q; ++i) {
        // Key range of the row block (window and key length; the dense mask is per element), cut into
        // splits exactly as split_block_range does.
        const int64_t m0 = (i / st.br) * st.br, row_last = std::min<int64_t>(m0 + st.br, p.n_q) - 1;
        int64_t lo = 0, hi = len;
        if (p.window.active()) {
          const int64_t off = p.window.align == Align::bottom_right ? len - p.n_q : 0;
          if (p.window.left >= 0) lo = std::max<int64_t>(lo, m0 + off - p.window.left);
          if (p.window.right >= 0) hi = std::min<int64_t>(hi, row_last + off + p.window.right + 1);
        }
        if (bug_ == DeliberateBug::causal_off_by_one && p.window.right >= 0) hi = std::min<int64_t>(len, hi + 1);
        if (hi < lo) hi = lo;
        const int64_t first = lo / bc, last = hi > lo ? (hi + bc - 1) / bc : first;
        const int64_t total = last - first, per = (total + st.splits - 1) / st.splits;
        const int64_t diag = i + (p.window.align == Align::bottom_right ? len - p.n_q : 0);
        auto visible = [&](int64_t j) -> bool {
          if (j < p.n_k && p.visible(b, i, j)) return true;
          if (bug_ == DeliberateBug::causal_off_by_one && p.window.right >= 0 && j < len && j == diag + p.window.right + 1 &&
              (p.window.left < 0 || j >= diag - p.window.left) && (p.dense_mask.empty() || p.dense_mask[size_t(i) * p.n_k + j]))
            return true;
          return false;
        };
        const float* q = &qf[size_t(i) * d];

        for (int sp = 0; sp < st.splits; ++sp) {
          RowState& rs = states[sp];
          rs = RowState{};
          rs.a.assign(dv, 0.0f);
          int64_t nb0 = first + sp * per, nb1 = std::min(nb0 + per, last);
          if (nb0 > nb1) nb0 = nb1;
          for (int64_t nb = nb0; nb < nb1; ++nb) {
            const int64_t n0 = nb * bc;
            const bool tail_bug = bug_ == DeliberateBug::tail_not_masked && nb == last - 1;
            // ---- S ----
            for (int x = 0; x < bc; ++x) {
              const int64_t j = n0 + x;
              vis[x] = visible(j) || (tail_bug && j >= len);
              if (!vis[x]) { s[x] = -kInf; continue; }
              if (j >= p.n_k) { s[x] = 0.0f; continue; }  // tail bug: padding row, score 0
              const float* k = &kf[size_t(j) * d];
              float acc = 0.0f;
              if (st.tensor_core) {
                for (int c0 = 0; c0 < d; c0 += blk) {
                  const int n = std::min(blk, d - c0);
                  for (int t = 0; t < n; ++t) {
                    terms[t] = double(q[c0 + t]) * double(k[c0 + t]);
                    align[t] = alignment_magnitude(q[c0 + t], mn_op) * alignment_magnitude(k[c0 + t], mn_op);
                  }
                  acc = block_fma_step(acc, terms.data(), n, st.tcm.F, align.data());
                }
              } else {
                for (int c = 0; c < d; ++c) acc = std::fma(q[c], k[c], acc);
              }
              s[x] = acc;
            }
            // ---- running max, alpha, p ----
            float tmax = -kInf;
            for (int x = 0; x < bc; ++x) tmax = std::fmax(tmax, s[x]);  // fmaxf: NaN ignored, as on the GPU
            const float m_old = rs.m;
            const float mx = bug_ == DeliberateBug::tile_local_max ? tmax : std::fmax(m_old, tmax);
            const bool empty = mx == -kInf;
            float alpha;
            if (empty) alpha = 1.0f;
            else if (bug_ == DeliberateBug::rescale_inverted && m_old != -kInf) alpha = std::exp2((mx - m_old) * st.c);
            else alpha = std::exp2((m_old - mx) * st.c);
            const float mc = empty ? 0.0f : mx * st.c;
            rs.last_tile_raised_max = m_old != -kInf && mx > m_old;
            rs.any_tile = true;
            rs.m = mx;
            for (int x = 0; x < bc; ++x) {
              const float pv = std::exp2(std::fma(s[x], st.c, -mc));
              px[x] = pv * st.p_scale;      // exact (power of two)
              pr[x] = round_p(st, px[x]);   // P~, the A operand of P.V
            }
            const std::vector<float>& l_src = st.l_from_fp32 ? px : pr;
            // ---- l ----
            const bool rescale_l = bug_ != DeliberateBug::l_not_rescaled;
            const bool rescale_a = bug_ != DeliberateBug::a_not_rescaled;
            float kept = 0;  // FA-1: alpha * l_old
            const float l_old = rs.l;
            if (st.fa1) {
              kept = rescale_l ? rs.l * alpha : rs.l;
              float l = kept;
              for (int x = 0; x < bc; ++x) l = l + l_src[x];
              rs.l = l;
            } else if (st.simt) {
              // xor butterfly over the (power-of-two padded) tile: offsets W/2, ..., 1.
              int w = 1;
              while (w < bc) w *= 2;
              tree.resize(w);
              for (int x = 0; x < w; ++x) tree[x] = x < bc ? l_src[x] : 0.0f;
              for (int off = w / 2; off > 0; off /= 2)
                for (int x = 0; x < off; ++x) tree[x] = tree[x] + tree[x + off];
              rs.l = (rescale_l ? rs.l * alpha : rs.l) + tree[0];
            } else if (st.l_tensor_core) {
              // One block FMA per b keys: P~ times 1 (exact products, alignment as for P.V), chained
              // through l, as in the CUDA kernel's P.V loop.
              if (rescale_l) rs.l = rs.l * alpha;
              for (int x0 = 0; x0 < bc; x0 += blk) {
                const int n = std::min(blk, bc - x0);
                for (int t = 0; t < n; ++t) {
                  terms[t] = pr[x0 + t];
                  align[t] = alignment_magnitude(pr[x0 + t], mn_p);
                }
                rs.l = block_fma_step(rs.l, terms.data(), n, st.tcm.F, align.data());
              }
            } else {
              if (rescale_l)
                for (float& ll : rs.lane_l) ll = ll * alpha;
              for (int x = 0; x < bc; ++x) {
                float& ll = rs.lane_l[(x % 8) / 2];
                ll = ll + l_src[x];
              }
            }
            // ---- a ----
            if (st.fa1) {
              const float k_a = rescale_a ? l_old * alpha : l_old;
              for (int c = 0; c < dv; ++c) rs.a[c] = k_a * rs.a[c];  // a = fl(alpha l_old) * O_old
            } else if (rescale_a) {
              for (int c = 0; c < dv; ++c) rs.a[c] = rs.a[c] * alpha;
            }
            for (int c = 0; c < dv; ++c) {
              auto vval = [&](int x) -> float {
                const int64_t j = n0 + x;
                return (vis[x] && j < p.n_k) ? vf[size_t(j) * dv + c] : 0.0f;  // masked keys are never read
              };
              if (st.tensor_core) {
                float acc = st.two_level ? 0.0f : rs.a[c];
                for (int x0 = 0; x0 < bc; x0 += blk) {
                  const int n = std::min(blk, bc - x0);
                  for (int t = 0; t < n; ++t) {
                    const double pv = pr[x0 + t], vv = vval(x0 + t);
                    terms[t] = pv * vv;
                    align[t] = alignment_magnitude(pv, mn_p) * alignment_magnitude(vv, mn_op);
                  }
                  acc = block_fma_step(acc, terms.data(), n, st.tcm.F, align.data());
                }
                rs.a[c] = st.two_level ? rs.a[c] + acc : acc;
              } else {
                float acc = rs.a[c];
                for (int x = 0; x < bc; ++x)
                  if (vis[x]) acc = std::fma(pr[x], vval(x), acc);
                rs.a[c] = acc;
              }
            }
            if (st.fa1) {
              const float inv = rs.l > 0.0f ? 1.0f / rs.l : 0.0f;
              for (int c = 0; c < dv; ++c) rs.a[c] = rs.a[c] * inv;
            }
          }
          if (!st.fa1 && !st.simt && !st.l_tensor_core)
            rs.l = (rs.lane_l[0] + rs.lane_l[1]) + (rs.lane_l[2] + rs.lane_l[3]);
          if (st.fa1 && st.splits > 1)
            for (int c = 0; c < dv; ++c) rs.a[c] = rs.a[c] * rs.l;  // back to unnormalised for the merge
        }

        // ---- epilogue (and split-KV merge) ----
        float m, l;
        std::vector<float>& a = states[0].a;
        bool normalised = st.fa1 && st.splits == 1;
        bool skip_division = false;
        if (st.splits == 1) {
          m = states[0].m;
          l = states[0].l;
          skip_division = bug_ == DeliberateBug::division_skipped_after_last_tile_max_change && states[0].last_tile_raised_max;
        } else {
          m = -kInf;
          for (const RowState& r : states) m = std::fmax(m, r.m);
          l = 0.0f;
          std::vector<float> w(st.splits);
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
          float x = (normalised || skip_division) ? a[c] : a[c] * inv;
          if (normalised && std::isnan(l)) x = kNaN;
          if (st.fp8) x = x * st.v_descale;
          res.o_unrounded[o0 + c] = x;
          res.o[o0 + c] = round_to(out_fmt, x);
        }
        double lse;
        if (std::isnan(l)) lse = std::numeric_limits<double>::quiet_NaN();
        else if (!(l > 0.0f)) lse = -std::numeric_limits<double>::infinity();
        else lse = (m * st.se) + (std::log(l) - st.lse_offset);
        res.lse[p.lse_index(b, h, i)] = lse;
      }
    }
  }
  return res;
}

}  // namespace fc
