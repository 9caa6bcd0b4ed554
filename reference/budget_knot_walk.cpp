#include "reference/budget_knot_walk.h"

#include <algorithm>
#include <cmath>

namespace fc::budget {

void KnotWalk::head(const std::vector<double>& vs_col, int64_t n_k, int dv, double small_below) {
  n_k_ = n_k, dv_ = dv;
  rc_.assign(size_t(dv), 1.0);
  ok_.assign(size_t(dv), 0);
  small_.assign(size_t(dv), 0);
  x_.resize(vs_col.size());
  x2_.resize(vs_col.size());
  for (int c = 0; c < dv; ++c) {
    const double* v = &vs_col[size_t(c) * size_t(n_k)];
    double vmax = 0;
    bool ok = true;
    for (int64_t j = 0; j < n_k; ++j) {
      ok = ok && std::isfinite(v[j]);
      vmax = std::max(vmax, std::fabs(v[j]));
      if (v[j] != 0 && std::fabs(v[j]) < small_below) small_[size_t(c)] = 1;
    }
    const double rc = fp16_scale(2 * vmax), rs = rc * kKnotSquareScale;
    rc_[size_t(c)] = rc;
    for (int64_t j = 0; ok && j < n_k; ++j) {
      const size_t ck = size_t(c) * size_t(n_k) + size_t(j);
      ok = knot_value_exact(v[j], rc) && knot_value_exact(v[j], rs);
      x_[ck] = knot_value(v[j], rc);
      x2_[ck] = knot_value(v[j], rs);
    }
    ok_[size_t(c)] = ok;
  }
}

void KnotWalk::tile(const std::vector<double>& lo, const std::vector<double>& hi) {
  const size_t nk = size_t(n_k_);
  k_.assign(size_t(dv_), KnotPair{0, 0, false});
  k2_ = k_;
  d0_.assign(size_t(dv_) * nk, 0.0f);
  d1_ = q0_ = q1_ = d0_;
  bracket_.assign(d0_.size(), 0);
  for (int c = 0; c < dv_; ++c) {
    if (!ok_[size_t(c)]) continue;
    const double rc = rc_[size_t(c)], rs = rc * kKnotSquareScale;
    const KnotPair kp = knot_pair(lo[size_t(c)], hi[size_t(c)], rc), kp2 = knot_pair(lo[size_t(c)], hi[size_t(c)], rs);
    if (!kp.ok || !kp2.ok) continue;
    k_[size_t(c)] = kp;
    k2_[size_t(c)] = kp2;
    for (size_t j = 0; j < nk; ++j) {
      const size_t ck = size_t(c) * nk + j;
      d0_[ck] = float(knot_distance(x_[ck], kp.t0));
      d1_[ck] = float(knot_distance(x_[ck], kp.t1));
      bracket_[ck] = in_bracket(x_[ck], kp);
      q0_[ck] = float(knot_square(x2_[ck], kp2.t0));
      q1_[ck] = float(knot_square(x2_[ck], kp2.t1));
    }
  }
}

void KnotWalk::row(const std::vector<int64_t>& keys, const std::vector<RowWeights>& rw, size_t n,
                   const std::vector<double>& o, double vd) {
  bounds_.assign(size_t(dv_), KnotBounds{0, 0, 0, false});
  if (n == 0) return;
  // The fp16 weights: e and e^2 (exact in double) scaled by kKnotRowScale (the row's largest e is 1), rounded
  // up; the underflowed keys' z (0 for the others) scaled so that the row's largest lies in [2^14, 2^15).
  double zmax = 0;
  for (size_t x = 0; x < n; ++x) zmax = std::max(zmax, double(rw[x].z));
  const double sc = kKnotRowScale, sc3 = kKnotRowScale, scz = fp16_scale(zmax), nd = double(n);
  w_.resize(n), w3_.resize(n), wz_.resize(n);
  double w_sum = 0, w3_sum = 0, wz_sum = 0;
  for (size_t x = 0; x < n; ++x) {
    const double e = rw[x].e;
    w_sum += w_[x] = knot_weight(e, sc);
    w3_sum += w3_[x] = knot_weight(e * e, sc3);
    wz_sum += wz_[x] = knot_weight(rw[x].z, scz);
  }
  const KnotRow kr{sc, sc3, scz, double_sum_up(w_sum, nd), double_sum_up(w3_sum, nd), double_sum_up(wz_sum, nd),
                   double_sum_low(w3_sum, nd)};
  for (int c = 0; c < dv_; ++c) {
    if (!k_[size_t(c)].ok || std::isnan(o[size_t(c)])) continue;
    // The products' chains as the tensor cores make them (KnotChain); the z products only in a row that has an
    // underflowed key.
    const size_t base = size_t(c) * size_t(n_k_);
    KnotChain F0, F1, M, G0, G1, Z0, Z1;
    for (size_t x = 0; x < n; ++x) {
      const int64_t j = keys[x];
      const size_t ck = base + size_t(j);
      F0.add(j, w_[x], d0_[ck]);
      F1.add(j, w_[x], d1_[ck]);
      M.add(j, w_[x], bracket_[ck] ? 1.0 : 0.0);
      G0.add(j, w3_[x], q0_[ck]);
      G1.add(j, w3_[x], q1_[ck]);
      if (zmax > 0) {
        Z0.add(j, wz_[x], d0_[ck]);
        Z1.add(j, wz_[x], d1_[ck]);
      }
    }
    const KnotSums s{F0.total(), F1.total(), G0.total(), G1.total(), Z0.total(), Z1.total(), M.total()};
    bounds_[size_t(c)] = knot_bounds(s, kr, o[size_t(c)], k_[size_t(c)], k2_[size_t(c)], rc_[size_t(c)], vd);
  }
}

}  // namespace fc::budget
