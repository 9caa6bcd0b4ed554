#include "properties/algebra_properties.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <span>
#include <sstream>

#include "reference/multiprecision.h"
#include "reference/online_softmax.h"

namespace fc {

namespace gen = rc::gen;
using State = SoftmaxState<mp_real>;

std::string ScoreRow::describe() const {
  std::ostringstream s;
  s << "n=" << scores.size() << " dv=" << dv << " tile=" << tile << " cuts=[";
  for (size_t i = 0; i < cuts.size(); ++i) s << (i ? "," : "") << cuts[i];
  s << "] scores=[";
  for (size_t i = 0; i < scores.size(); ++i) s << (i ? "," : "") << scores[i];
  s << "]";
  return s.str();
}

std::ostream& operator<<(std::ostream& os, const ScoreRow& r) { return os << r.describe(); }

rc::Gen<ScoreRow> gen_score_row() {
  return gen::exec([] {
    ScoreRow r;
    const int n = *gen::inRange(1, 41);
    r.dv = *gen::inRange(1, 5);
    // Scores in eighths (exact), occasionally huge (exp underflows in double), or masked.
    const auto score = gen::weightedOneOf<double>(
        {{6, gen::map(gen::inRange(-400, 401), [](int k) { return k / 8.0; })},
         {1, gen::map(gen::inRange(-64, 65), [](int k) { return k * 16.0; })},
         {1, gen::just(-std::numeric_limits<double>::infinity())}});
    const auto value = gen::map(gen::inRange(-1000, 1001), [](int k) { return k / 16.0; });
    for (int j = 0; j < n; ++j) r.scores.push_back(*score);
    for (int j = 0; j < n * r.dv; ++j) r.values.push_back(*value);
    r.tile = *gen::inRange(1, n + 1);
    const int ncuts = n > 1 ? *gen::inRange(0, std::min(n - 1, 6) + 1) : 0;
    for (int i = 0; i < ncuts; ++i) r.cuts.push_back(*gen::inRange(1, n));
    std::sort(r.cuts.begin(), r.cuts.end());
    r.cuts.erase(std::unique(r.cuts.begin(), r.cuts.end()), r.cuts.end());
    return r;
  });
}

namespace {

struct Row {
  std::vector<mp_real> s, v;
  int dv;
};

Row to_mp(const ScoreRow& r) {
  Row m;
  m.dv = r.dv;
  for (double x : r.scores) m.s.push_back(std::isinf(x) ? minus_infinity<mp_real>() : mp_real(x));
  for (double x : r.values) m.v.push_back(mp_real(x));
  return m;
}

State absorb_range(const Row& r, int from, int to) {
  State st = State::identity(size_t(r.dv));
  if (to > from)
    absorb<mp_real>(st, std::span<const mp_real>(r.s).subspan(size_t(from), size_t(to - from)),
                    std::span<const mp_real>(r.v).subspan(size_t(from) * r.dv, size_t(to - from) * r.dv));
  return st;
}

// Same state to 1e-30 relative: m exactly, l and a relative to l (a is a sum of l-weighted values).
std::optional<std::string> differs(const State& x, const State& y) {
  if (!(x.m == y.m)) return "m differs: " + x.m.str() + " vs " + y.m.str();
  if (y.l == 0) return x.l == 0 ? std::nullopt : std::optional<std::string>("l should be 0, is " + x.l.str());
  const mp_real tol = mp_real(1e-30);
  if (abs(x.l - y.l) > tol * y.l) return "l differs: " + x.l.str() + " vs " + y.l.str();
  mp_real vmax = 1;
  for (size_t c = 0; c < x.a.size(); ++c) vmax = std::max(vmax, abs(y.a[c]) / y.l);
  for (size_t c = 0; c < x.a.size(); ++c)
    if (abs(x.a[c] - y.a[c]) > tol * y.l * vmax * 64) return "a[" + std::to_string(c) + "] differs: " + x.a[c].str() + " vs " + y.a[c].str();
  return std::nullopt;
}

std::vector<int> bounds_of(const ScoreRow& r) {
  std::vector<int> b = {0};
  b.insert(b.end(), r.cuts.begin(), r.cuts.end());
  b.push_back(int(r.scores.size()));
  return b;
}

}  // namespace

PropertyResult tiling_invariance_mp(const ScoreRow& r) {
  const Row m = to_mp(r);
  const int n = int(r.scores.size());
  const State whole = absorb_range(m, 0, n);
  State tiled = State::identity(size_t(r.dv));
  for (int j = 0; j < n; j += r.tile) {
    const int e = std::min(n, j + r.tile);
    absorb<mp_real>(tiled, std::span<const mp_real>(m.s).subspan(size_t(j), size_t(e - j)),
                    std::span<const mp_real>(m.v).subspan(size_t(j) * r.dv, size_t(e - j) * r.dv));
  }
  if (auto why = differs(tiled, whole)) return PropertyResult::fail("tile " + std::to_string(r.tile) + ": " + *why);
  return PropertyResult::pass();
}

PropertyResult chunk_merge_mp(const ScoreRow& r) {
  const Row m = to_mp(r);
  const State whole = absorb_range(m, 0, int(r.scores.size()));
  const std::vector<int> b = bounds_of(r);
  std::vector<State> parts;
  for (size_t i = 0; i + 1 < b.size(); ++i) parts.push_back(absorb_range(m, b[i], b[i + 1]));
  State left = State::identity(size_t(r.dv));
  for (const State& s : parts) left = merge(left, s);
  if (auto why = differs(left, whole)) return PropertyResult::fail("chunks merged left to right: " + *why);
  // Pairwise tree, as a split-KV combine kernel reduces.
  std::vector<State> level = parts;
  while (level.size() > 1) {
    std::vector<State> next;
    for (size_t i = 0; i < level.size(); i += 2) next.push_back(i + 1 < level.size() ? merge(level[i], level[i + 1]) : level[i]);
    level = next;
  }
  if (auto why = differs(level.front(), whole)) return PropertyResult::fail("chunks merged as a tree: " + *why);
  // Reverse order (commutativity across the whole fold).
  State right = State::identity(size_t(r.dv));
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) right = merge(*it, right);
  if (auto why = differs(right, whole)) return PropertyResult::fail("chunks merged right to left: " + *why);
  return PropertyResult::pass();
}

PropertyResult merge_laws_mp(const ScoreRow& r) {
  const Row m = to_mp(r);
  const std::vector<int> b = bounds_of(r);
  const int n = int(r.scores.size());
  // Three states from the first cut points (some may be empty).
  const int c1 = b.size() > 2 ? b[1] : n / 3, c2 = b.size() > 3 ? b[2] : std::max(c1, 2 * n / 3);
  const State x = absorb_range(m, 0, c1), y = absorb_range(m, c1, c2), z = absorb_range(m, c2, n);
  const State e = State::identity(size_t(r.dv));
  if (auto why = differs(merge(merge(x, y), z), merge(x, merge(y, z)))) return PropertyResult::fail("associativity: " + *why);
  if (auto why = differs(merge(x, y), merge(y, x))) return PropertyResult::fail("commutativity: " + *why);
  if (auto why = differs(merge(x, e), x)) return PropertyResult::fail("right identity: " + *why);
  if (auto why = differs(merge(e, x), x)) return PropertyResult::fail("left identity: " + *why);
  return PropertyResult::pass();
}

PropertyResult fa1_equals_fa2_mp(const ScoreRow& r) {
  const Row m = to_mp(r);
  const int n = int(r.scores.size());
  State fa2 = State::identity(size_t(r.dv));
  Fa1State<mp_real> fa1 = Fa1State<mp_real>::identity(size_t(r.dv));
  for (int j = 0; j < n; j += r.tile) {
    const int e = std::min(n, j + r.tile);
    const auto s = std::span<const mp_real>(m.s).subspan(size_t(j), size_t(e - j));
    const auto v = std::span<const mp_real>(m.v).subspan(size_t(j) * r.dv, size_t(e - j) * r.dv);
    absorb<mp_real>(fa2, s, v);
    absorb<mp_real>(fa1, s, v);
  }
  const Finalized<mp_real> f2 = finalize(fa2), f1 = finalize(fa1);
  if (!(f1.lse == f2.lse) && abs(f1.lse - f2.lse) > mp_real(1e-30) * (1 + abs(f2.lse)))
    return PropertyResult::fail("LSE differs: " + f1.lse.str() + " vs " + f2.lse.str());
  for (size_t c = 0; c < f2.o.size(); ++c)
    if (abs(f1.o[c] - f2.o[c]) > mp_real(1e-30) * (1 + abs(f2.o[c])))
      return PropertyResult::fail("O[" + std::to_string(c) + "] differs: " + f1.o[c].str() + " vs " + f2.o[c].str());
  return PropertyResult::pass();
}

}  // namespace fc
