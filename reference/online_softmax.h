// The online-softmax algebra over any real scalar (double, mp_real): the state (m, l, a), absorbing a
// tile, merging two states, and finalizing. Exact over the reals (proofs/ proves it in Coq), so in
// multiprecision it is the yardstick for the rescaling invariant, and in double it is the seed's
// worked examples.
//
// The FA-2 form keeps a unnormalised and divides once at the end; the FA-1 form keeps O = a / l after
// every tile. Both are here because kernels use both and the suite checks that they agree.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

namespace fc {

template <class T>
T minus_infinity() {
  return -std::numeric_limits<T>::infinity();
}

// max that propagates NaN: a NaN score must poison its row, not be skipped by a comparison.
template <class T>
T nan_max(const T& x, const T& y) {
  using std::isnan;
  if (isnan(x)) return x;
  if (isnan(y)) return y;
  return x < y ? y : x;
}

// exp(m_old - m_new), the factor that moves a state onto a new running max. An empty state has
// m_old = -inf; with m_new also -inf the difference -inf - -inf is NaN, and with m_new finite it is
// exp(-inf) = 0 anyway. The guard returns 0 for both: an empty state has l = 0 and a = 0, so any
// finite factor is right and 0 keeps NaN out of a fully masked tile.
template <class T>
T rescale_factor(const T& m_old, const T& m_new) {
  using std::exp;
  if (m_old == minus_infinity<T>()) return T(0);
  return exp(m_old - m_new);
}

template <class T>
struct SoftmaxState {
  T m = minus_infinity<T>();
  T l = T(0);
  std::vector<T> a;  // unnormalised sum of exp(s_j - m) v_j, one entry per V column

  static SoftmaxState identity(size_t dv) { return SoftmaxState{minus_infinity<T>(), T(0), std::vector<T>(dv, T(0))}; }
};

template <class T>
struct Finalized {
  std::vector<T> o;
  T lse;
};

// Absorbs one tile: scores[j] (-inf = masked) with value rows values[j*dv .. j*dv+dv).
template <class T>
void absorb(SoftmaxState<T>& st, std::span<const T> scores, std::span<const T> values) {
  using std::exp;
  const size_t dv = st.a.size();
  T m_new = st.m;
  for (const T& s : scores) m_new = nan_max(m_new, s);
  if (m_new == minus_infinity<T>()) return;  // the tile is fully masked and the state empty: no change
  const T alpha = rescale_factor(st.m, m_new);
  st.l *= alpha;
  for (T& x : st.a) x *= alpha;
  for (size_t j = 0; j < scores.size(); ++j) {
    if (scores[j] == minus_infinity<T>()) continue;  // masked: contributes nothing, not even 0 * NaN
    const T p = exp(scores[j] - m_new);
    st.l += p;
    for (size_t c = 0; c < dv; ++c) st.a[c] += p * values[j * dv + c];
  }
  st.m = m_new;
}

template <class T>
SoftmaxState<T> merge(const SoftmaxState<T>& x, const SoftmaxState<T>& y) {
  SoftmaxState<T> r;
  r.m = nan_max(x.m, y.m);
  r.a.assign(x.a.size(), T(0));
  if (r.m == minus_infinity<T>()) return r;
  const T ax = rescale_factor(x.m, r.m), ay = rescale_factor(y.m, r.m);
  r.l = x.l * ax + y.l * ay;
  for (size_t c = 0; c < r.a.size(); ++c) r.a[c] = x.a[c] * ax + y.a[c] * ay;
  return r;
}

// O = a / l and lse = m + log l; a state that saw no visible key gives O = 0 and lse = -inf.
template <class T>
Finalized<T> finalize(const SoftmaxState<T>& st) {
  using std::log;
  Finalized<T> f{std::vector<T>(st.a.size(), T(0)), minus_infinity<T>()};
  if (st.m == minus_infinity<T>()) return f;
  for (size_t c = 0; c < st.a.size(); ++c) f.o[c] = st.a[c] / st.l;
  f.lse = st.m + log(st.l);
  return f;
}

// FA-1 form: the normalised output is kept after every tile, O <- (alpha l O + sum p v) / l_new.
template <class T>
struct Fa1State {
  T m = minus_infinity<T>();
  T l = T(0);
  std::vector<T> o;

  static Fa1State identity(size_t dv) { return Fa1State{minus_infinity<T>(), T(0), std::vector<T>(dv, T(0))}; }
};

template <class T>
void absorb(Fa1State<T>& st, std::span<const T> scores, std::span<const T> values) {
  using std::exp;
  const size_t dv = st.o.size();
  T m_new = st.m;
  for (const T& s : scores) m_new = nan_max(m_new, s);
  if (m_new == minus_infinity<T>()) return;
  const T kept = rescale_factor(st.m, m_new) * st.l;  // alpha * l_old: weight of the old output
  T l_new = kept;
  std::vector<T> acc(dv);
  for (size_t c = 0; c < dv; ++c) acc[c] = kept * st.o[c];
  for (size_t j = 0; j < scores.size(); ++j) {
    if (scores[j] == minus_infinity<T>()) continue;
    const T p = exp(scores[j] - m_new);
    l_new += p;
    for (size_t c = 0; c < dv; ++c) acc[c] += p * values[j * dv + c];
  }
  for (size_t c = 0; c < dv; ++c) st.o[c] = acc[c] / l_new;
  st.l = l_new;
  st.m = m_new;
}

template <class T>
Finalized<T> finalize(const Fa1State<T>& st) {
  using std::log;
  if (st.m == minus_infinity<T>()) return {std::vector<T>(st.o.size(), T(0)), minus_infinity<T>()};
  return {st.o, st.m + log(st.l)};
}

}  // namespace fc
