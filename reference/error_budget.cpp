// The error budget of a fused FA-2 forward pass: docs/error-analysis.md derives every term; the comments
// here name the term and its label ([R] IEEE model, [M] tensor-core hardware model, [H] heuristic).
//
// Notation (one query row; stored units for fp8, i.e. values / descale):
//   z_j     exact score of visible key j, sign-folded so that the kernel's max is max_j z_j
//   sigma   |scale * q_descale * k_descale|: natural-log units per score unit
//   m       max_j z_j;  Delta_j = m - z_j;  E_j = exp(-sigma Delta_j) (exact unnormalised weight, max 1)
//   R_j     sum_c |q_c| |k_jc| (what bounds the score's accumulation error)
//   eta_j   bound on |log(computed weight / (K E_j))|, K a factor common to every key of the row
//   zeta_j  bound on the absolute (underflow) part of the weight error, in units of K
// Weighted-mean lemma (exact): for any weights w_j and the exact mean O = sum_j E_j V_j / sum_j E_j,
//   sum_j w_j V_j / sum_j w_j - O = sum_j (w_j - K E_j)(V_j - O) / sum_j w_j,
// so every error that reaches the numerator and l identically only sees the centred |V_j - O|.
//
// Each term is a function of reference/budget_terms.h, named after its section of docs/error-analysis.md
// (§3.x); this file walks a row's keys, tiles and columns and feeds them.
#include "reference/error_budget.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "reference/abs_scale_bound.h"
#include "reference/budget_knot_walk.h"
#include "reference/budget_sums.h"
#include "reference/budget_terms.h"
#include "reference/element_verdict.h"
#include "reference/tensor_core_model.h"

namespace fc {

namespace {

using namespace budget;
constexpr double inf = std::numeric_limits<double>::infinity();

double ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Columns the budget's innermost loop walks together (error_budget below: walk_group).
constexpr int kColumnGroup = 8;

// The walks over a row's keys are lambdas of error_budget; inlined, they are compiled into each of its
// target clones (below), so that the FMA clone's chains are FMA instructions, not calls into libm.
#if defined(__GNUC__)
#define FC_INLINE __attribute__((always_inline))
#else
#define FC_INLINE
#endif

}  // namespace

double scaled_ulps(double error, double scale_a, Format output) {
  return error / verdict::ulp(output_format(output), std::fabs(scale_a));
}

BudgetConstants budget_constants(const Problem& p, const RunOptions& o, int tile_n, const BudgetTerms& terms) {
  if (tile_n < 0) throw std::invalid_argument("error_budget: tile_n must be the subject's Bc (>= 1), or 0 if unknown");
  BudgetConstants k;
  // Bc unknown: budget for Bc = 1 (every key its own tile: the most tiles, raises and rescale arguments)
  // and count the accumulations as if every key were its own block and lane, which bounds any Bc.
  k.tile_unknown = tile_n == 0;
  k.tile_n = k.tile_unknown ? 1 : tile_n;
  const Recipe r = o.recipe;
  const RecipeSpec& rs = recipe_spec(r);
  k.fp8 = is_fp8(r);
  k.simt = r == Recipe::fp32;
  k.tc = !k.simt && o.accumulation == Accumulation::tensor_core;
  k.fa1 = o.normalisation == Normalisation::fa1;
  k.two_level = k.fp8 && o.two_level_accum;
  k.l_fp32 = o.l_from_fp32_p;
  // num_splits = 0 lets the subject choose: budget for splitting (at most one split per tile).
  k.splits_unknown = o.num_splits <= 0;
  k.splits_opt = k.splits_unknown ? 2 : o.num_splits;
  const BlockFmaModel tcm = tensor_core_model(r);
  k.block = tcm.b;
  k.step = tcm.step_bound();
  const FormatSpec& pf = spec(rs.p_format);
  const FormatSpec& of = spec(rs.output);

  // P rounding [R]: |P~ - x| <= u_P |x| in P's normal range, <= half its subnormal spacing below.
  k.uP = (k.simt || !terms.p_rounding) ? 0.0 : pf.unit_roundoff();
  k.S = k.fp8 ? 256.0 : 1.0;  // the kernel's power-of-two pre-scale of P (exact)
  // Underflow [R]: ex2.approx.ftz flushes results below 2^-126 (also alpha); P below P's normal range
  // rounds with an absolute error. In units of the row's max weight (the max key has weight ~1).
  k.theta_ftz = 0x1p-125;
  k.theta_abs = (k.simt ? 0.0 : 0.5 * pf.min_subnormal() / k.S) + k.theta_ftz;
  k.thresh = std::max(0x1p-124, k.simt ? 0.0 : 2.0 * pf.min_normal() / k.S);
  // tf32 operand rounding [R]: RN fp32 -> tf32 (relative 2^-11) of Q, K (score) and V (P.V).
  // Computed exactly from the inputs: the score of the rounded operands against the exact score, and
  // |V~ - V| per value, so inputs already representable in tf32 are charged nothing.
  k.op_round = r == Recipe::tf32;
  k.op_term = k.op_round && terms.operand_rounding;

  k.qd = k.fp8 ? o.q_descale : 1.0, k.kd = k.fp8 ? o.k_descale : 1.0, k.vd = k.fp8 ? o.v_descale : 1.0;
  const double scale = p.effective_scale() * k.qd * k.kd;
  k.sigma = std::fabs(scale), k.sgn = scale < 0 ? -1.0 : 1.0;
  k.c32 = double(float(k.sigma * 1.4426950408889634074));

  // Score accumulation over d [R] (IEEE: gamma_d, FMA or not) or [M] (block FMA: ceil(d/b) chained
  // steps of (b+1) 2^-F + 2^-23 each), relative to R_j; plus an absolute floor for fp32 subnormals.
  // [M] Subnormal MMA operands align at their format's smallest normal (tensor_core_model.h): the score's
  // truncation is charged against alignment magnitudes, and P.V gets the excess of a subnormal P~ or V
  // over its value (below). In stored units; P~ carries the pre-scale S.
  k.mn_op = spec(rs.operand).min_normal(), k.mn_p = pf.min_normal();
  k.trunc_step = double(tcm.b + 1) * std::ldexp(1.0, -tcm.budget_F);
  const ScoreAccumulation sa = score_accumulation(k.tc, p.d, tcm.b, k.step);  // §3.2
  k.eps_s = sa.eps, k.abs_s = sa.abs;
  k.eps_fin = terms.division ? final_division(k.fp8) : 0.0;  // §3.11
  k.u_out = terms.output_rounding ? of.unit_roundoff() : 0.0;
  k.out_abs = terms.output_rounding ? 0.5 * of.min_subnormal() : 0.0;
  return k;
}

// The per-(key, column) sums are fp32 FMA chains (budget_sums.h). Where the CPU has FMA, a clone of this
// function runs them as instructions rather than as calls into libm's fmaf (the same results: both round
// once); reference/CMakeLists.txt compiles this file with -ffp-contract=off, so that no other multiply-add
// is fused in either clone and the rounding points stay the derivation's.
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
__attribute__((target_clones("fma", "default")))
#endif
#endif
ErrorBudget error_budget(const Problem& p, const AttentionInputs& in, const RunOptions& o, int tile_n,
                         const Float64Attention& ref, const BudgetTerms& terms) {
  const BudgetConstants k = budget_constants(p, o, tile_n, terms);
  validate_inputs(p, in);
  const bool tile_unknown = k.tile_unknown;
  tile_n = k.tile_n;
  const bool fp8 = k.fp8, simt = k.simt, tc = k.tc, fa1 = k.fa1, two_level = k.two_level;
  const bool splits_unknown = k.splits_unknown;
  const int splits_opt = k.splits_opt;
  const BlockFmaModel tcm = tensor_core_model(o.recipe);
  const double step = k.step, uP = k.uP, S = k.S, theta_ftz = k.theta_ftz, theta_abs = k.theta_abs, thresh = k.thresh;
  const bool op_round = k.op_round, op_term = k.op_term;
  auto opr = [&](double x) { return op_round ? round_to(Format::tf32, x) : x; };
  const double qd = k.qd, kd = k.kd, vd = k.vd, sigma = k.sigma, sgn = k.sgn, c32 = k.c32;
  const double mn_op = k.mn_op, mn_p = k.mn_p, trunc_step = k.trunc_step, eps_s = k.eps_s, abs_s = k.abs_s;

  ErrorBudget B;
  B.tile_n = tile_unknown ? 0 : tile_n;
  B.o_bound.assign(p.o_size(), 0.0);
  B.o_bound_probabilistic.assign(p.o_size(), 0.0);
  B.lse_bound.assign(p.lse_size(), 0.0);
  B.lse_bound_probabilistic.assign(p.lse_size(), 0.0);
  if (ref.abs_scale.size() != p.o_size()) throw std::invalid_argument("error_budget: the reference has no A per element");
  if (ref.abs_scale_factor.size() != p.lse_size() || ref.abs_scale_floor.size() != p.lse_size())
    throw std::invalid_argument("error_budget: the reference has no bound of A per row");
  B.scale_a = ref.abs_scale;  // the reference's, computed beside O
  B.scale_d.assign(p.o_size(), 0.0);
  B.from_knots.assign(terms.knot_sums ? p.o_size() : 0, 0);

  std::vector<int64_t> keys;
  std::vector<double> kop, qop, qs, ks, vcol, vs_col, key_vabs, vdiff, z, R, op_err, E, eta, zeta, zeta_l, whi;
  std::vector<SumWeights> sw;
  std::vector<RowWeights> rw;  // the row form's (BudgetTerms::per_key_eta = false)
  std::vector<EtaExp> eta_e;
  std::vector<char> p_sub;  // per key: P~ may be subnormal (or 0)
  std::vector<int> tile_of, cnt;
  std::vector<int64_t> tile_blk;
  std::vector<double> vkey;          // V by key: vkey[j * dv + c]
  std::vector<float> vs_key;         // V / vd by key, as the sums take it (exact in fp32)
  std::vector<char> plain_column;    // per column of the head: no V of 0, none below the operands' normal range
  std::vector<size_t> sub_keys;      // the row's keys whose P~ may be subnormal (tensor cores)
  const double lambda = kProbabilisticLambda;
  // The knot form (terms.knot_sums, §3.18): its state per head, tile of kKnotRows rows and row. Its condition is
  // the row form's (below) and knot_sums: every row of the budget then takes the row form.
  const bool knot_form = !terms.per_key_eta && terms.knot_sums && !o.l_from_fp32_p && !op_term;
  KnotWalk knots;
  std::vector<double> knot_lo, knot_hi, knot_o;

  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = p.kv_head(h);
      // The head's K in stored units, and V by column (the sums below walk one column over the keys) with
      // each key's max |V|: read once per head, not once per row.
      ks.resize(size_t(p.n_k) * p.d);
      for (int64_t j = 0; j < p.n_k; ++j)
        for (int c = 0; c < p.d; ++c) ks[size_t(j) * p.d + c] = in.k[p.k_index(b, hk, j, c)] / kd;
      vcol.resize(size_t(p.n_k) * p.dv);
      vs_col.resize(vcol.size());
      key_vabs.assign(size_t(p.n_k), 0.0);
      for (int64_t j = 0; j < p.n_k; ++j)
        for (int c = 0; c < p.dv; ++c) {
          const double v = in.v[p.v_index(b, hk, j, c)];
          vcol[size_t(c) * p.n_k + j] = v;
          vs_col[size_t(c) * p.n_k + j] = v / vd;  // stored units (exact in fp32 for every storage format)
          key_vabs[size_t(j)] = std::max(key_vabs[size_t(j)], std::fabs(v));
        }
      // V by key too, for the groups of plain columns below: those with no V of 0 and, on the tensor cores,
      // none below the operand format's smallest normal, whose counts and alignment excess are the row's.
      // Not made where no group can run (tf32's operand term, fewer columns than a group).
      const bool groups = !op_term && p.dv >= kColumnGroup;
      vkey.resize(groups ? vcol.size() : 0);
      vs_key.resize(vkey.size());
      plain_column.assign(size_t(p.dv), groups ? 1 : 0);
      for (int64_t j = 0; groups && j < p.n_k; ++j)
        for (int c = 0; c < p.dv; ++c) {
          const size_t kc = size_t(j) * p.dv + c, ck = size_t(c) * p.n_k + j;
          vkey[kc] = vcol[ck];
          vs_key[kc] = static_cast<float>(vs_col[ck]);
          if (vcol[ck] == 0 || (tc && std::fabs(vs_col[ck]) < mn_op)) plain_column[size_t(c)] = 0;
        }
      int64_t knot_tile = -1;
      if (knot_form) knots.head(vs_col, p.n_k, p.dv, tc ? mn_op : 0.0);
      if (op_round) {  // the tf32 operands, rounded once per head
        kop.resize(size_t(p.n_k) * p.d);
        for (size_t x = 0; x < kop.size(); ++x) kop[x] = opr(ks[x]);
        vdiff.resize(size_t(p.n_k) * p.dv);
        for (size_t x = 0; x < vdiff.size(); ++x) vdiff[x] = std::fabs(opr(vcol[x]) - vcol[x]);
      }
      for (int64_t i = 0; i < p.n_q; ++i) {
        const size_t li = p.lse_index(b, h, i), o0 = p.o_index(b, h, i, 0);
        qs.resize(p.d);
        for (int c = 0; c < p.d; ++c) qs[c] = in.q[p.q_index(b, h, i, c)] / qd;
        if (op_round) {
          qop.resize(p.d);
          for (int c = 0; c < p.d; ++c) qop[c] = opr(qs[c]);
        }
        const double ref_lse = ref.out.lse[li];
        if (std::isnan(ref_lse) || ref_lse == -inf) continue;  // NaN rows / rows with no visible key: exact
        if (knot_form && i / kKnotRows != knot_tile) {
          // The tile's knots per column: its rows' smallest and largest o (of those with a bound to make).
          knot_tile = i / kKnotRows;
          knot_lo.assign(size_t(p.dv), inf);
          knot_hi.assign(size_t(p.dv), -inf);
          for (int64_t r = knot_tile * kKnotRows; r < std::min<int64_t>((knot_tile + 1) * kKnotRows, p.n_q); ++r) {
            const double lse_r = ref.out.lse[p.lse_index(b, h, r)];
            if (std::isnan(lse_r) || lse_r == -inf) continue;
            for (int c = 0; c < p.dv; ++c) {
              const double O = ref.out.o[p.o_index(b, h, r, c)];
              if (!std::isfinite(O)) continue;
              const double of = centred_at(O, vd).o;
              knot_lo[size_t(c)] = std::min(knot_lo[size_t(c)], of);
              knot_hi[size_t(c)] = std::max(knot_hi[size_t(c)], of);
            }
          }
          knots.tile(knot_lo, knot_hi);
        }
        keys.clear();
        z.clear();
        R.clear();
        op_err.clear();
        double zmax = -inf, rmax = 0;
        for (int64_t j = 0; j < p.n_k; ++j) {
          if (!p.visible(b, i, j)) continue;
          double dot = 0, rr = 0, dot_op = 0;
          const double* kj = &ks[size_t(j) * p.d];
          for (int c = 0; c < p.d; ++c) {
            const double qc = qs[c], kc = kj[c];
            dot += qc * kc;
            if (op_round) {
              const double qo = qop[c], ko = kop[size_t(j) * p.d + c];
              dot_op += qo * ko;
              rr += std::fabs(qo * ko);
            } else {
              rr += tc ? alignment_magnitude(qc, mn_op) * alignment_magnitude(kc, mn_op) : std::fabs(qc * kc);
            }
          }
          keys.push_back(j);
          z.push_back(sgn * dot);
          // R carries the accumulation error; the operand rounding's score error is added exactly.
          R.push_back(rr);
          op_err.push_back(op_term ? operand_rounding(dot_op, dot) : 0.0);  // §3.1
          zmax = std::max(zmax, sgn * dot);
          rmax = std::max(rmax, rr);
        }
        const size_t n = keys.size();
        double vmax = 0;  // max |V / vd| (rounding is monotone: the largest |V| gives the largest quotient)
        for (size_t x = 0; x < n; ++x) vmax = std::max(vmax, key_vabs[size_t(keys[x])]);
        vmax /= std::fabs(vd);
        // §3.16 Outside the model's domain (fp32 overflow of a score, of m*c or of the accumulator): no bound.
        if (outside_domain(rmax, eps_s, c32, S * double(n) * vmax * 2)) {
          for (int c = 0; c < p.dv; ++c) B.o_bound[o0 + c] = B.o_bound_probabilistic[o0 + c] = inf;
          B.lse_bound[li] = B.lse_bound_probabilistic[li] = inf;
          continue;
        }
        double eps_max = 0;  // max score error bound, stored units
        for (size_t x = 0; x < n; ++x) eps_max = std::max(eps_max, eps_s * R[x] + abs_s + op_err[x]);

        // Tiles in processing order, running max, and which tiles may raise the computed max.
        tile_of.resize(n);
        for (size_t x = 0; x < n; ++x) tile_of[x] = int(keys[x] / tile_n);
        // distinct tiles (keys are ascending, so tiles are too)
        std::vector<int> tiles;
        std::vector<double> tmax;
        for (size_t x = 0; x < n; ++x) {
          if (tiles.empty() || tiles.back() != tile_of[x]) {
            tiles.push_back(tile_of[x]);
            tmax.push_back(-inf);
          }
          tmax.back() = std::max(tmax.back(), z[x]);
        }
        const size_t T = tiles.size();
        std::vector<double> run(T);
        std::vector<int> may_raise(T, 0), suffix(T + 1, 0);
        for (size_t t = 0; t < T; ++t) {
          run[t] = t ? std::max(run[t - 1], tmax[t]) : tmax[t];
          may_raise[t] = t > 0 && budget::may_raise(tmax[t], run[t - 1], eps_max, splits_opt > 1);  // §3.4
        }
        for (size_t t = T; t-- > 0;) suffix[t] = suffix[t + 1] + may_raise[t];
        const int raises = suffix[0];
        std::vector<size_t> tile_idx(n);
        for (size_t x = 0, t = 0; x < n; ++x) {
          while (tiles[t] != tile_of[x]) ++t;
          tile_idx[x] = t;
        }

        // eta_j [R]: score error, the exponent's FFMA/c/mc roundings, the rescale arguments (they
        // telescope: 2u sigma (m - m_t) in all), and the 2-ulp ex2 of p and of each later alpha.
        E.resize(n);
        eta.resize(n);
        eta_e.resize(n);
        zeta.resize(n);
        zeta_l.resize(n);
        const double eK = std::exp(sigma * eps_max);  // bounds the common factor K and 1/K
        const EtaTerms eta_terms{terms.scores, terms.exponent, terms.rescale};
        // The row form (!terms.per_key_eta, under the default convention without tf32's operand term, where
        // its sums apply): every key's interval, its underflow (zeta) and W's eta from a bound of the row's
        // largest eta (docs/error-analysis.md §3.6, budget_terms.h row_eta_bound), which contains each key's
        // own, so that no weight needs its key's eta; the sums with one weight a key (budget_sums.h
        // RowColumnSum). Elsewhere the per-key form. Each key's eta is still made, to check the row's bound.
        const bool row_form = !terms.per_key_eta && !o.l_from_fp32_p && !op_term;
        double sumE = 0;
        for (size_t x = 0; x < n; ++x) {
          const size_t t = tile_idx[x];
          const double delta = zmax - z[x];
          E[x] = std::exp(-sigma * delta);
          sumE += E[x];
          const int C = suffix[t + 1] + (splits_opt > 1 ? 1 : 0);
          const double e = key_eta(sigma, eps_s, abs_s, R[x], op_err[x], delta, zmax, run[t], eps_max, C, eta_terms);
          eta[x] = e * (1 + 1e-6);
          if (row_form) continue;  // its interval and zeta come from the row's eta, below
          eta_e[x] = eta_exp(eta[x]);
          const Underflow uf = underflow(E[x], eta_e[x], eK, thresh, theta_abs, theta_ftz, uP, terms.underflow);  // §3.7
          zeta[x] = uf.zeta;
          zeta_l[x] = uf.zeta_l;
        }

        // Accumulation counts. l: keys per quad lane (tensor-core recipes). a: per column, only keys with
        // V_jk != 0 can round (an FMA or block step whose products are all zero returns c exactly).
        int lane_cnt[4] = {0, 0, 0, 0};
        std::vector<int64_t>& blk_id = tile_blk;  // block of each key within the row's sequence
        blk_id.resize(n);
        int n_blocks_all = 0, max_tile_keys = 1;
        {
          int64_t last_block = -1;
          int keys_in_tile = 0;
          for (size_t x = 0; x < n; ++x) {
            keys_in_tile = (x > 0 && tile_of[x] == tile_of[x - 1]) ? keys_in_tile + 1 : 1;
            max_tile_keys = std::max(max_tile_keys, keys_in_tile);
            const int64_t off = keys[x] - int64_t(tile_of[x]) * tile_n;
            lane_cnt[(off % 8) / 2]++;
            // A block id unique per (tile, block in tile): 64-bit, as tiles may number 2^31 / 1000003.
            const int64_t blk = int64_t(tile_of[x]) * 1000003 + off / (tc ? tcm.b : 1);
            if (blk != last_block) ++n_blocks_all;
            last_block = blk;
            blk_id[x] = blk;
          }
        }
        const int splits = splits_unknown ? int(std::max<size_t>(T, 1)) : splits_opt;
        const int merge = merge_roundings(splits, fa1);  // §3.13
        const double fa1_tiles = fa1 ? double((p.key_length(b) + tile_n - 1) / tile_n) : 0.0;
        // §3.9 / §3.10 / §5: eps_pv relative to W = sum_j w_j |V_jk|, from the column's count of rounding steps.
        const PvMode pv_mode = !tc ? PvMode::sequential
                               : tile_unknown ? PvMode::tensor_core_any_tile
                               : two_level ? PvMode::tensor_core_two_level
                                           : PvMode::tensor_core;
        auto eps_pv_of = [&](int nz_keys, int nz_blocks, int nz_max_tile_blocks, bool prob) {
          if (!terms.pv_accumulation) return 0.0;
          return pv_accumulation(pv_mode, PvCounts{nz_keys, nz_blocks, nz_max_tile_blocks}, step, int(n), int(T),
                                 raises, merge, fa1_tiles, prob, lambda);
        };
        double eps_l = 0, eps_l_prob = 0;
        if (terms.l_accumulation) {
          double nl;
          if (fa1) nl = double(n + T);
          else if (simt) nl = ceil_log2(max_tile_keys) + 2.0 * T;  // adds with a zero partner are exact
          else nl = double((tile_unknown ? int(n) : *std::max_element(lane_cnt, lane_cnt + 4)) + raises + 2);
          nl += merge;
          eps_l = l_sums(nl);  // §3.8
          eps_l_prob = std::min(eps_l, lambda * std::sqrt(nl) * u32);
        }
        const double eps_fin = k.eps_fin, u_out = k.u_out, out_abs = k.out_abs;  // §3.11, §3.12

        // Weight intervals. Default: l sums the rounded P~ that multiplies V, so P rounding and underflow
        // are shared by numerator and l (centred). l_from_fp32_p: l sums the fp32 weights.
        const bool l_fp32 = o.l_from_fp32_p;
        double den = 0;
        whi.resize(n);
        sw.resize(n);
        p_sub.resize(n);
        double lhi = 0, sum_whi = 0;
        // The reference's error r enters the centred sums once per row (§0, §5): sum err_c (|V - O| + r)
        // = sum err_c |V - O| + r sum err_c, and sqrt(sum (ep (|V - O| + r))^2) <= sqrt(sum (ep |V - O|)^2)
        // + r sqrt(sum ep^2) (Minkowski).
        double sum_err_c = 0, sum_err_c_det = 0, sum_ep2 = 0;
        double eta_w = 0, zeta_vmax = 0;  // §3.9's W through the reference's A (budget_terms.h w_bound)
        // The row form's eta (above): its bound, checked against every key's.
        EtaExp row_eta{};
        double eta_hat = 0;
        if (row_form && n > 0) {
          const double zmin = *std::min_element(z.begin(), z.begin() + n);
          const int later_first = suffix[1] + (splits_opt > 1 ? 1 : 0);
          const double bound = row_eta_bound(sigma, eps_max, zmax, zmin, run[0], later_first,
                                             eta_terms);
          // The bound's derivation, checked on every row that takes it (n comparisons; a NaN, far outside the
          // model, goes on to a bound of +inf as in the per-key form).
          if (bound < *std::max_element(eta.begin(), eta.begin() + n))
            throw std::logic_error("error_budget: the row's eta bound is below a key's eta");
          eta_hat = bound;
          row_eta = eta_exp(bound);
          // §3.7 with the row's eta: a flag for every key the per-key eta flags and more, each zeta at least
          // the per-key one, so the interval still contains the key's own.
          for (size_t x = 0; x < n; ++x) {
            const Underflow uf = underflow(E[x], row_eta, eK, thresh, theta_abs, theta_ftz, uP, terms.underflow);
            zeta[x] = uf.zeta;
            zeta_l[x] = uf.zeta_l;
          }
        }
        const RowFactors rf = row_form ? row_factors(row_eta, uP) : RowFactors{};
        rw.resize(row_form ? n : 0);
        for (size_t x = 0; x < n; ++x) {  // §3.6
          const EtaExp& ex = row_form ? row_eta : eta_e[x];
          const WeightInterval wi = weight_interval(E[x], ex, uP, Underflow{zeta[x], zeta_l[x]}, l_fp32);
          const double ep = E[x] * ex.ep;
          whi[x] = wi.whi;
          // §0's per-(key, column) sums' weights (§3.17), in the form the sums take.
          if (row_form) rw[x] = row_weights(E[x], zeta[x]);
          else sw[x] = sum_weights(wi, ep, zeta[x], uP, l_fp32);
          sum_whi += wi.whi;
          den += wi.den;
          lhi += wi.lhi;
          p_sub[x] = E[x] * ex.em * S < mn_p;
          sum_err_c += wi.err_c;
          sum_err_c_det += wi.err_c_det;
          sum_ep2 += ep * ep;
          eta_w = std::max(eta_w, row_form ? eta_hat : eta[x]);
          if (zeta[x] > 0) zeta_vmax += zeta[x] * key_vabs[size_t(keys[x])];
        }
        const double w_mult = w_multiplier(eta_w, uP, sumE);

        // §3.18 The knot form: each column's sums from the tile's knots (used where certified).
        if (knot_form) {
          knot_o.resize(size_t(p.dv));
          for (int c = 0; c < p.dv; ++c) {
            const double O = ref.out.o[o0 + c];
            knot_o[size_t(c)] = std::isfinite(O) ? double(centred_at(O, vd).o) : NAN;
          }
          knots.row(keys, rw, n, knot_o, vd);
        }
        // [M] l on the tensor cores (the 16-bit CUDA kernels): l <- MMA(P~, ones, C = l) per b-key block,
        // one chain like a's with every V = 1, and the same alignment excess for a subnormal P~. The budget
        // takes the larger of this and the lane sums above, so that it covers a kernel summing either way.
        if (terms.l_accumulation && tc && !fa1 && !l_fp32) {
          const int nbl = tile_unknown ? int(n) : n_blocks_all;
          double excess_l = 0;
          for (size_t x = 0; x < n; ++x)
            if (p_sub[x]) excess_l = std::max(excess_l, std::max(whi[x], mn_p / S));
          const double chain = l_chain(nbl, step, raises + merge, trunc_step, excess_l, den);  // §3.8
          eps_l = std::max(eps_l, chain);
          eps_l_prob = std::max(eps_l_prob, chain);  // truncation is one-signed: no sqrt(n) [H]
        }
        const double floor_abs = terms.underflow ? (n_blocks_all + n + 2.0 * T + 8) * 0x1p-149 * eK / (S * den) * vd : 0.0;

        // §0's per-(key, column) sums in fp32 (budget_sums.h, §3.17), from each key's weights rounded up, and
        // the column's element bound from them.
        struct ColumnCounts {
          int nz_keys = 0, nz_blocks = 0, nz_max_tile_blocks = 0;
        };
        // The row's counts (every visible key counts): those of a column without a V of 0, and at or above any
        // column's (pv_accumulation rises with each count).
        ColumnCounts plain_counts;
        // §3.18 With the knots no element needs a walk over its column's keys but for its sums: every element of
        // the row takes the row's counts and an alignment excess bounded from the row (below), so that the
        // elements the knots do not certify need only their three chains.
        double knot_x_sub = 0, knot_x_small = 0;
        // Column c's sums as bounds, in either form.
        auto bounds_of = [&](int c, const auto& sums) FC_INLINE {
          const size_t oi = o0 + c;
          const double O = ref.out.o[oi], oe = ref.o_error_bound[oi], shift = centred_at(O, vd).shift;
          if constexpr (std::is_same_v<std::decay_t<decltype(sums)>, RowColumnSum>) {
            if (knot_form && knots.at(c).certified) {  // the three sums from the knots
              B.from_knots[o0 + c] = 1;
              const KnotBounds& kb = knots.at(c);
              return row_bounds(kb.L, kb.Q, kb.Z, oe, shift, sum_err_c, sum_err_c_det, sum_ep2, rf);
            }
            return row_sum_bounds(sums, double(n), vd, oe, shift, sum_err_c, sum_err_c_det, sum_ep2, rf);
          }
          else
            return column_sum_bounds(sums, double(n), vd, oe, shift, sum_err_c, sum_err_c_det, sum_ep2, l_fp32,
                                     op_term);
        };
        auto finish_column = [&](int c, const ColumnSumBounds& sb, double D, double excess,
                                 ColumnCounts cn) FC_INLINE {
          const size_t oi = o0 + c;
          const double O = ref.out.o[oi];
          const double oe = ref.o_error_bound[oi];
          B.scale_d[oi] = D / sumE;
          if (knot_form) {
            excess = std::max(knot_x_sub, knots.small_column(c) ? knot_x_small : 0.0);
            cn = plain_counts;
          }
          const double a_plus = abs_scale_upper(ref.abs_scale_factor[li], ref.abs_scale[oi], ref.abs_scale_floor[li]);
          const double Tc = sb.num / den, Tp = sb.tp / den, Wn = w_bound(w_mult, a_plus, zeta_vmax) / den,
                       Vop = sb.vop / den;
          // Each block step's truncation grain grows by at most (b+1) 2^-F times that excess.
          const double Xn =
              terms.pv_accumulation ? (tile_unknown ? cn.nz_keys : cn.nz_blocks) * trunc_step * excess / den : 0.0;
          const double Tc_prob = std::min(Tc, (sb.num_det + lambda * uP * sb.root) / den);
          const double Tp_prob = std::min(Tp, (sb.tp_det + lambda * uP * sb.tp_root) / den);
          auto total = [&](double tc_, double tp_, double epv, double el) {  // §0
            return element_bound(ElementParts{std::fabs(O), oe, tc_, tp_, Vop, epv, Wn, Xn, el, eps_fin, u_out, out_abs,
                                              floor_abs, terms.reference});
          };
          B.o_bound[oi] = total(Tc, Tp, eps_pv_of(cn.nz_keys, cn.nz_blocks, cn.nz_max_tile_blocks, false), eps_l);
          B.o_bound_probabilistic[oi] =
              total(Tc_prob, Tp_prob, eps_pv_of(cn.nz_keys, cn.nz_blocks, cn.nz_max_tile_blocks, true), eps_l_prob);
        };
        // The counts of one key of a column with V != 0 (only such keys can round: budget_terms.h pv_accumulation).
        auto count_key = [&](size_t x, ColumnCounts& cn, int& tile_blocks, int& last_tile, int64_t& last_blk) FC_INLINE {
          ++cn.nz_keys;
          if (tile_of[x] != last_tile) {
            tile_blocks = 0;
            last_tile = tile_of[x];
          }
          if (blk_id[x] != last_blk) {
            ++cn.nz_blocks;
            cn.nz_max_tile_blocks = std::max(cn.nz_max_tile_blocks, ++tile_blocks);
            last_blk = blk_id[x];
          }
        };
        // The largest alignment magnitude of a product with a subnormal P~ or V (tensor cores only).
        // The row form takes the upper weight from the key's e and z (budget_sums.h row_whi), as its sums do.
        auto excess_of = [&](size_t x, double vs) FC_INLINE {
          const double w = row_form ? double(row_whi(rw[x], rf)) : double(sw[x].whi);
          return std::max(w, mn_p / S) * alignment_magnitude(vs, mn_op) * vd;
        };

        // Any column, one at a time.
        auto walk_column = [&](int c) FC_INLINE {
          const double* vc = &vcol[size_t(c) * p.n_k];
          const double* vsc = &vs_col[size_t(c) * p.n_k];
          const double* vdc = op_term ? &vdiff[size_t(c) * p.n_k] : nullptr;
          const double O = ref.out.o[o0 + c];
          const float o_f = centred_at(O, vd).o;
          ColumnSum sums;
          RowColumnSum row_sums;
          ColumnCounts cn;
          double D = 0, excess = 0;
          int tile_blocks = 0, last_tile = -1;
          int64_t last_blk = -1, chunk = keys.empty() ? 0 : keys[0] / kSumChunk;
          for (size_t x = 0; x < n; ++x) {
            const double v = vc[keys[x]];
            if (v != 0) count_key(x, cn, tile_blocks, last_tile, last_blk);
            const double vs = vsc[keys[x]];
            if (tc && v != 0 && (p_sub[x] || std::fabs(vs) < mn_op)) excess = std::max(excess, excess_of(x, vs));
            if (keys[x] / kSumChunk != chunk) {
              sums.flush(l_fp32, op_term);
              row_sums.flush();
              chunk = keys[x] / kSumChunk;
            }
            const float vop_diff = op_term ? static_cast<float>(vdc[keys[x]]) : 0.0f;
            if (row_form) row_sums.add(rw[x], static_cast<float>(vs), o_f, zeta[x] > 0);
            else sums.add(sw[x], static_cast<float>(vs), o_f, vop_diff, l_fp32, op_term);
            D += E[x] * std::fabs(v - O);
          }
          sums.flush(l_fp32, op_term);
          row_sums.flush();
          finish_column(c, row_form ? bounds_of(c, row_sums) : bounds_of(c, sums), D, excess, cn);
        };

        // kColumnGroup plain columns of this head (no V of 0, none below the operands' smallest normal) at
        // once, from V by key: the same operations per column in the same key order as walk_column (the same
        // bits), with the group's chains side by side in vector registers. Their counts are the row's (every
        // key counts), and only keys with a subnormal P~ add to the excess.
        {
          int tile_blocks = 0, last_tile = -1;
          int64_t last_blk = -1;
          for (size_t x = 0; x < n; ++x) count_key(x, plain_counts, tile_blocks, last_tile, last_blk);
        }
        sub_keys.clear();
        if (tc)
          for (size_t x = 0; x < n; ++x)
            if (p_sub[x]) sub_keys.push_back(x);
        // The knots' excess bound: a key with a subnormal P~ at its largest |V| (alignment_magnitude rises with
        // |V|), and in a column with a nonzero V below the operands' normal range, any key at that range's bound.
        if (knot_form && tc) {
          for (size_t x : sub_keys)
            knot_x_sub = std::max(knot_x_sub, excess_of(x, key_vabs[size_t(keys[x])] / std::fabs(vd)));
          RowWeights top{0.f, 0.f};  // the row's largest e and z: their upper weight is at least any key's
          for (size_t x = 0; x < n; ++x) top = {std::max(top.e, rw[x].e), std::max(top.z, rw[x].z)};
          knot_x_small = std::max(double(row_whi(top, rf)), mn_p / S) * alignment_magnitude(mn_op, mn_op) * vd;
        }
        auto walk_group = [&](int c0) FC_INLINE {
          constexpr int G = kColumnGroup;
          // The chains' partials as arrays, one lane per column, so that each step is one vector operation.
          double O[G], D[G];
          float o_f[G], f_num[G], f_num_det[G], f_p2[G], f_tp[G], f_tp_det[G], f_vop[G];
          ColumnSum sums[G];
          RowColumnSum row_sums[G];  // the row form's chains: f_num SL, f_p2 SQ, f_tp SZ
          for (int g = 0; g < G; ++g) {
            O[g] = ref.out.o[o0 + c0 + g];
            o_f[g] = centred_at(O[g], vd).o;
            D[g] = 0;
            f_num[g] = f_num_det[g] = f_p2[g] = f_tp[g] = f_tp_det[g] = f_vop[g] = 0;
          }
          auto flush = [&]() FC_INLINE {
            for (int g = 0; g < G; ++g) {
              if (row_form) {
                row_sums[g].f_sl = f_num[g], row_sums[g].f_sq = f_p2[g], row_sums[g].f_sz = f_tp[g];
                row_sums[g].flush();
              } else {
                sums[g].f_num = f_num[g], sums[g].f_num_det = f_num_det[g], sums[g].f_p2 = f_p2[g];
                sums[g].f_tp = f_tp[g], sums[g].f_tp_det = f_tp_det[g];
                sums[g].flush(l_fp32, false);
              }
              f_num[g] = f_num_det[g] = f_p2[g] = f_tp[g] = f_tp_det[g] = 0;
            }
          };
          // The key loop with the convention (or the row form) a constant, so that add_key's branches fold
          // away.
          auto walk = [&](auto l_fp32_c, auto row_form_c) FC_INLINE {
            constexpr bool kLFp32 = decltype(l_fp32_c)::value, kRowForm = decltype(row_form_c)::value;
            int64_t chunk = keys.empty() ? 0 : keys[0] / kSumChunk;
            for (size_t x = 0; x < n; ++x) {
              const int64_t j = keys[x];
              if (j / kSumChunk != chunk) {
                flush();
                chunk = j / kSumChunk;
              }
              const double* vj = &vkey[size_t(j) * p.dv + c0];
              const float* vsj = &vs_key[size_t(j) * p.dv + c0];
              const double e = E[x];
              if constexpr (kRowForm) {
                const RowWeights w = rw[x];
                if (zeta[x] > 0)
                  for (int g = 0; g < G; ++g) add_key_row(w, vsj[g], o_f[g], true, f_num[g], f_p2[g], f_tp[g]);
                else
                  for (int g = 0; g < G; ++g) add_key_row(w, vsj[g], o_f[g], false, f_num[g], f_p2[g], f_tp[g]);
              } else {
                const SumWeights w = sw[x];
                for (int g = 0; g < G; ++g)
                  add_key(w, vsj[g], o_f[g], 0.0f, kLFp32, false,
                          ChainRefs{f_num[g], f_num_det[g], f_p2[g], f_tp[g], f_tp_det[g], f_vop[g]});
              }
              for (int g = 0; g < G; ++g) D[g] += e * std::fabs(vj[g] - O[g]);
            }
          };
          if (row_form) walk(std::false_type{}, std::true_type{});
          else if (l_fp32) walk(std::true_type{}, std::false_type{});
          else walk(std::false_type{}, std::false_type{});
          flush();
          for (int g = 0; g < G; ++g) {
            const int c = c0 + g;
            if (std::isnan(O[g])) continue;
            double excess = 0;
            for (size_t x : sub_keys) excess = std::max(excess, excess_of(x, vs_col[size_t(c) * p.n_k + keys[x]]));
            finish_column(c, row_form ? bounds_of(c, row_sums[g]) : bounds_of(c, sums[g]), D[g], excess, plain_counts);
          }
        };

        for (int c = 0; c < p.dv;) {
          bool group = c + kColumnGroup <= p.dv;  // plain_column is all 0 where no group can run
          for (int g = 0; group && g < kColumnGroup; ++g) group = plain_column[size_t(c + g)] != 0;
          if (group) {
            walk_group(c);
            c += kColumnGroup;
          } else {
            if (!std::isnan(ref.out.o[o0 + c])) walk_column(c);
            ++c;
          }
        }

        // LSE [R]: lse = fl(fl(m^ se) + fl(logf(l) - offset)); the weights' errors reach log l through
        // L = max(log(l_hi / sum E), -log(l_lo / sum E)).
        auto lse_total = [&](double el) {  // §3.15
          return lse_bound(LseParts{den, lhi, sumE, el, S, sigma, zmax, eps_max, ref_lse, ref.lse_error_bound[li], fp8,
                                    terms.reference});
        };
        B.lse_bound[li] = lse_total(eps_l);
        B.lse_bound_probabilistic[li] = lse_total(eps_l_prob);
      }
    }
  // Far outside the model (scores near 2^17 in tf32, say) a term can come out as 0 * inf = NaN. A NaN
  // bound would let every error pass (err > NaN is false), so it means "no claim": +inf, never NaN.
  // Found by the fuzzer (tests/fuzz/regression_test.cpp).
  for (auto* bounds : {&B.o_bound, &B.o_bound_probabilistic, &B.lse_bound, &B.lse_bound_probabilistic})
    for (double& x : *bounds)
      if (std::isnan(x)) x = inf;
  return B;
}

size_t ErrorBudget::knot_elements() const { return size_t(std::count(from_knots.begin(), from_knots.end(), 1)); }

verdict::OutputFormat output_format(Format output) {
  const FormatSpec& s = spec(output);
  return {s.precision, s.emin, s.emax, s.has_inf, s.max_finite};
}

bool legitimate_overflow(double got, double want, double bound, Format output) {
  return verdict::legitimate_overflow(got, want, bound, output_format(output));
}

double BudgetVerdict::rmse() const { return elements ? std::sqrt(sum_sq_error / double(elements)) : 0.0; }

void BudgetVerdict::add(const BudgetVerdict& x, size_t keep_worst) {
  elements += x.elements;
  violations += x.violations;
  nan_mismatches += x.nan_mismatches;
  lse_checked += x.lse_checked;
  exceed_probabilistic += x.exceed_probabilistic;
  max_ratio = std::max(max_ratio, x.max_ratio);
  sum_ratio += x.sum_ratio;
  max_ratio_probabilistic = std::max(max_ratio_probabilistic, x.max_ratio_probabilistic);
  max_scaled_ulps = std::max(max_scaled_ulps, x.max_scaled_ulps);
  sum_scaled_ulps += x.sum_scaled_ulps;
  max_abs_error = std::max(max_abs_error, x.max_abs_error);
  sum_sq_error += x.sum_sq_error;
  max_lse_ratio = std::max(max_lse_ratio, x.max_lse_ratio);
  worst.insert(worst.end(), x.worst.begin(), x.worst.end());
  std::sort(worst.begin(), worst.end(), [](const WorstElement& a, const WorstElement& b) {
    return a.error / a.bound > b.error / b.bound;  // bound 0 with error > 0 gives inf: first
  });
  if (worst.size() > keep_worst) worst.resize(keep_worst);
}

BudgetVerdict check_against_budget(const Problem& p, const std::vector<double>& o, const std::vector<double>& lse,
                                   const Float64Attention& ref, const ErrorBudget& budget, Format output,
                                   size_t keep_worst) {
  if (o.size() != p.o_size()) throw std::invalid_argument("check_against_budget: O has the wrong size");
  if (!lse.empty() && lse.size() != p.lse_size()) throw std::invalid_argument("check_against_budget: LSE has the wrong size");
  const verdict::OutputFormat of = output_format(output);
  BudgetVerdict v;
  double cut = -1;  // ratios at or below this cannot enter the kept worst list
  auto note = [&](size_t index, bool is_lse, double got, double want, double err, double bound, double su) {
    if (keep_worst == 0 || verdict::ratio(err, bound) <= cut) return;
    v.worst.push_back({index, is_lse, got, want, err, bound, su});
    if (v.worst.size() > 4 * keep_worst + 16) {
      std::sort(v.worst.begin(), v.worst.end(), [&](const WorstElement& a, const WorstElement& b) {
        return verdict::ratio(a.error, a.bound) > verdict::ratio(b.error, b.bound);
      });
      v.worst.resize(keep_worst);
      cut = verdict::ratio(v.worst.back().error, v.worst.back().bound);
    }
  };
  for (size_t r = 0; r < p.lse_size(); ++r) {
    const double want_lse = ref.out.lse[r];
    const size_t o0 = r * size_t(p.dv);
    const bool empty_row = want_lse == -inf;
    for (int c = 0; c < p.dv; ++c) {
      const size_t oi = o0 + c;
      const double want = ref.out.o[oi], got = o[oi], bound = budget.o_bound[oi];
      const verdict::Element e =
          verdict::judge_o(got, want, bound, budget.o_bound_probabilistic[oi], budget.scale_a[oi], empty_row, of);
      if (e.kind == verdict::Kind::skip) continue;
      if (e.kind == verdict::Kind::violation) {
        ++v.violations;
        v.nan_mismatches += e.nan_mismatch;
        note(oi, false, got, want, e.err, e.nan_mismatch ? bound : 0.0, HUGE_VAL);
        continue;
      }
      ++v.elements;
      v.sum_ratio += std::isfinite(e.ratio) ? e.ratio : 0.0;
      v.max_ratio = std::max(v.max_ratio, e.ratio);
      v.max_ratio_probabilistic = std::max(v.max_ratio_probabilistic, e.ratio_probabilistic);
      if (e.ratio_probabilistic > 1) ++v.exceed_probabilistic;
      v.max_scaled_ulps = std::max(v.max_scaled_ulps, e.scaled_ulps);
      v.sum_scaled_ulps += e.scaled_ulps;
      v.max_abs_error = std::max(v.max_abs_error, e.err);
      v.sum_sq_error += e.err * e.err;
      if (e.err > bound) ++v.violations;
      note(oi, false, got, want, e.err, bound, e.scaled_ulps);
    }
    if (lse.empty()) continue;
    const double got = lse[r], bound = budget.lse_bound[r];
    const verdict::Element e = verdict::judge_lse(got, want_lse, bound, empty_row);
    if (e.kind == verdict::Kind::skip) continue;
    if (e.kind == verdict::Kind::violation) {
      ++v.violations;
      v.nan_mismatches += e.nan_mismatch;
      note(r, true, got, want_lse, HUGE_VAL, empty_row ? 0.0 : bound, HUGE_VAL);
      continue;
    }
    ++v.lse_checked;
    v.max_lse_ratio = std::max(v.max_lse_ratio, e.ratio);
    if (e.err > bound) {
      ++v.violations;
      note(r, true, got, want_lse, e.err, bound, 0.0);
    }
  }
  std::sort(v.worst.begin(), v.worst.end(), [&](const WorstElement& a, const WorstElement& b) {
    return verdict::ratio(a.error, a.bound) > verdict::ratio(b.error, b.bound);
  });
  if (v.worst.size() > keep_worst) v.worst.resize(keep_worst);
  return v;
}

}  // namespace fc
