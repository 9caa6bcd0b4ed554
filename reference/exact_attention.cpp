#include "reference/exact_attention.h"

#include "reference/abs_scale_bound.h"
#include "reference/exact_attention_mp.h"

#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fc {

namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;

void check_tensor(const char* name, const std::vector<double>& t, size_t expected) {
  if (t.size() != expected)
    throw std::invalid_argument(std::string("invalid inputs: ") + name + " has " + std::to_string(t.size()) +
                                " elements, the problem needs " + std::to_string(expected));
  for (size_t i = 0; i < t.size(); ++i)
    if (std::isinf(t[i]))
      throw std::invalid_argument(std::string("invalid inputs: ") + name + "[" + std::to_string(i) + "] is " +
                                  (t[i] > 0 ? "+inf" : "-inf") +
                                  "; attention is defined on finite and NaN inputs only (docs/semantics.md)");
}

double gamma(double n) {
  const double u = std::ldexp(1.0, -53);
  return n * u / (1.0 - n * u);
}

}  // namespace

void validate_inputs(const Problem& p, const AttentionInputs& in) {
  p.validate();
  check_tensor("Q", in.q, p.q_size());
  check_tensor("K", in.k, p.k_size());
  check_tensor("V", in.v, p.v_size());
}

AttentionOutputs<mp_real> exact_attention_mp(const Problem& p, const AttentionInputs& in) {
  validate_inputs(p, in);
  AttentionOutputs<mp_real> out{std::vector<mp_real>(p.o_size()), std::vector<mp_real>(p.lse_size())};
  const mp_real scale = p.effective_scale();
  std::vector<mp_real> s(p.n_k);
  std::vector<char> vis(p.n_k);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = p.kv_head(h);
      for (int64_t i = 0; i < p.n_q; ++i) {
        mp_real m = minus_infinity<mp_real>();
        bool nan_score = false;
        for (int64_t j = 0; j < p.n_k; ++j) {
          vis[j] = p.visible(b, i, j);
          if (!vis[j]) continue;
          mp_real dot = 0;
          for (int c = 0; c < p.d; ++c) dot += mp_real(in.q[p.q_index(b, h, i, c)]) * in.k[p.k_index(b, hk, j, c)];
          s[j] = scale * dot;
          if (boost::multiprecision::isnan(s[j])) nan_score = true;
          else if (s[j] > m) m = s[j];
        }
        const size_t o0 = p.o_index(b, h, i, 0);
        if (nan_score) {
          for (int c = 0; c < p.dv; ++c) out.o[o0 + c] = std::numeric_limits<mp_real>::quiet_NaN();
          out.lse[p.lse_index(b, h, i)] = std::numeric_limits<mp_real>::quiet_NaN();
          continue;
        }
        if (m == minus_infinity<mp_real>()) {  // no visible key
          out.lse[p.lse_index(b, h, i)] = m;
          continue;
        }
        mp_real l = 0;
        std::vector<mp_real> a(p.dv, mp_real(0));
        for (int64_t j = 0; j < p.n_k; ++j) {
          if (!vis[j]) continue;
          const mp_real w = exp(s[j] - m);
          l += w;
          for (int c = 0; c < p.dv; ++c) a[c] += w * in.v[p.v_index(b, hk, j, c)];
        }
        for (int c = 0; c < p.dv; ++c) out.o[o0 + c] = a[c] / l;
        out.lse[p.lse_index(b, h, i)] = m + log(l);
      }
    }
  return out;
}

// The float64 path and its certificate. For a row with n visible keys, computed scores
// s^_j = fl(scale * fl(q.k_j)) differ from the exact s_j by at most e_j = gamma_{d+1} scale sum|q||k_j|
// (any summation order, FMA or not). The weights w^_j = fl(exp(fl(s^_j - m^))) then equal
// exp(s_j - m^ + eta_j) with |eta_j| <= e_j + u|s^_j - m^| + 2.01u (glibc exp is within 1 ulp). The
// weighted-mean lemma (docs/error-analysis.md) turns the shared factor exp(eta_j) into
// |O'_k - O_k| <= exp(eta) (exp(eta) - 1) sum_j P_j (|V_jk| + |O_k|) <= 2 exp(3 eta)(exp(eta) - 1) A'_k,
// with A'_k = sum_j P'_j |V_jk| in the computed weights. The sums l and a add gamma_n relative
// errors, the division one more u. The bound is first order plus an explicit 1.001 factor, which
// covers the neglected products of (1 + gamma) terms for any n below 10^12.
Float64Attention exact_attention_f64(const Problem& p, const AttentionInputs& in) {
  validate_inputs(p, in);
  const double u = std::ldexp(1.0, -53);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double scale = p.effective_scale();
  Float64Attention r;
  r.out.o.assign(p.o_size(), 0.0);
  r.out.lse.assign(p.lse_size(), -inf);
  r.o_error_bound.assign(p.o_size(), 0.0);
  r.lse_error_bound.assign(p.lse_size(), 0.0);
  r.abs_scale.assign(p.o_size(), 0.0);
  r.abs_scale_factor.assign(p.lse_size(), 1.0);
  r.abs_scale_floor.assign(p.lse_size(), 0.0);

  std::vector<double> w(p.n_k), eta(p.n_k);
  Eigen::VectorXd a(p.dv), abs_a(p.dv);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = p.kv_head(h);
      ConstMap q(&in.q[p.q_index(b, h, 0, 0)], p.n_q, p.d);
      ConstMap k(&in.k[p.k_index(b, hk, 0, 0)], p.n_k, p.d);
      ConstMap v(&in.v[p.v_index(b, hk, 0, 0)], p.n_k, p.dv);
      const RowMatrix dots = q * k.transpose();
      const RowMatrix abs_dots = q.cwiseAbs() * k.cwiseAbs().transpose();
      for (int64_t i = 0; i < p.n_q; ++i) {
        const size_t o0 = p.o_index(b, h, i, 0), li = p.lse_index(b, h, i);
        double m = -inf;
        bool nan_score = false;
        int64_t n = 0;
        for (int64_t j = 0; j < p.n_k; ++j) {
          if (!p.visible(b, i, j)) { w[j] = -inf; continue; }
          w[j] = scale * dots(i, j);  // the score, until it becomes a weight below
          ++n;
          if (std::isnan(w[j])) nan_score = true;
          else m = std::max(m, w[j]);
        }
        if (nan_score) {
          for (int c = 0; c < p.dv; ++c) r.out.o[o0 + c] = nan;
          r.out.lse[li] = nan;
          continue;
        }
        if (n == 0) continue;  // O = 0, LSE = -inf, exactly
        double l = 0, eta_max = 0, v_max = 0;
        a.setZero();
        abs_a.setZero();
        for (int64_t j = 0; j < p.n_k; ++j) {
          if (w[j] == -inf) continue;
          const double x = w[j] - m;
          eta[j] = gamma(p.d + 1) * std::fabs(scale) * abs_dots(i, j) + u * std::fabs(x) + 2.01 * u;
          eta_max = std::max(eta_max, eta[j]);
          w[j] = std::exp(x);
          l += w[j];
          a.noalias() += w[j] * v.row(j).transpose();
          abs_a.noalias() += w[j] * v.row(j).transpose().cwiseAbs();
          v_max = std::max(v_max, v.row(j).cwiseAbs().maxCoeff());
        }
        // exp results in double's subnormal range carry an absolute, not relative, error.
        const double underflow = 2 * double(n) * std::numeric_limits<double>::denorm_min() * v_max / l;
        const double lse = m + std::log(l);
        r.out.lse[li] = lse;
        const double e = std::exp(eta_max);
        const double g = gamma(double(n) + 2);
        r.lse_error_bound[li] = 1.001 * (eta_max + g + 2 * u * std::fabs(std::log(l)) + u * std::fabs(lse));
        const AbsScaleBound ab = abs_scale_bound(e, g, underflow);
        r.abs_scale_factor[li] = ab.factor;
        r.abs_scale_floor[li] = ab.floor;
        for (int c = 0; c < p.dv; ++c) {
          const double o = a[c] / l;
          const double abs_scale = abs_a[c] / l * (1 + g);  // A'_k, inflated for its own rounding
          r.out.o[o0 + c] = o;
          r.abs_scale[o0 + c] = std::isnan(o) ? 0.0 : abs_a[c] / l;
          r.o_error_bound[o0 + c] =
              1.001 * (2 * e * e * e * (e - 1) * abs_scale + g * (abs_scale + std::fabs(o)) + 2 * u * std::fabs(o) + underflow);
        }
      }
    }
  return r;
}

}  // namespace fc
