#include "properties/distributions.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace fc {

namespace {
constexpr std::array<std::string_view, 10> names = {
    "normal", "fa3_outliers", "large_range", "equal_scores",   "sinks",
    "v_mean", "increasing_scores", "subnormal", "below_sentinel", "late_peak"};

// Rounds a tensor to the recipe's input format; fp8 first picks a power-of-two descale that maps the
// largest magnitude into range, so that the stored values are format values and the true values are
// exact products.
double round_tensor(std::vector<double>& t, Recipe r) {
  const Format f = recipe_spec(r).input;
  double descale = 1.0;
  if (f == Format::e4m3 || f == Format::e5m2) {
    double amax = 0;
    for (double x : t)
      if (std::isfinite(x)) amax = std::max(amax, std::fabs(x));
    if (amax > 0) descale = std::ldexp(1.0, int(std::ceil(std::log2(amax / spec(f).max_finite))));
  }
  for (double& x : t) x = round_to(f, x / descale, Overflow::saturate) * descale;
  return descale;
}
}  // namespace

std::string_view distribution_name(Distribution d) { return names[static_cast<size_t>(d)]; }

std::optional<Distribution> parse_distribution(std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Distribution>(i);
  return std::nullopt;
}

AttentionInputs make_inputs(const Problem& p, Distribution d, Recipe r, uint64_t seed, RunOptions* descales) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(d));
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  AttentionInputs in;
  in.q.resize(p.q_size());
  in.k.resize(p.k_size());
  in.v.resize(p.v_size());
  auto fill = [&](std::vector<double>& t, double mean, double sigma) {
    for (double& x : t) x = mean + sigma * g(rng);
  };
  switch (d) {
    case Distribution::normal:
    case Distribution::v_mean:
      fill(in.q, 0, 1);
      fill(in.k, 0, 1);
      fill(in.v, d == Distribution::v_mean ? 10.0 : 0.0, 1);
      break;
    case Distribution::fa3_outliers:
      for (auto* t : {&in.q, &in.k, &in.v})
        for (double& x : *t) x = g(rng) + (unif(rng) < 0.001 ? 10.0 * g(rng) : 0.0);
      break;
    case Distribution::large_range:
      fill(in.q, 0, 6);
      fill(in.k, 0, 6);
      fill(in.v, 0, 1);
      break;
    case Distribution::equal_scores: {
      fill(in.q, 0, 1);
      fill(in.v, 0, 1);
      std::vector<double> key(p.d);
      for (double& x : key) x = g(rng);
      for (size_t i = 0; i < in.k.size(); ++i) in.k[i] = key[i % p.d];
      break;
    }
    case Distribution::sinks: {
      // Queries share a positive direction; the first key (and every 97th) points along it.
      fill(in.q, 0.5, 1);
      fill(in.k, 0, 1);
      fill(in.v, 0, 1);
      const double boost = 2.0 * std::sqrt(double(p.d));
      for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_kv; ++h)
          for (int64_t j = 0; j < p.n_k; j += 97)
            for (int c = 0; c < p.d; ++c) in.k[p.k_index(b, h, j, c)] = boost;
      break;
    }
    case Distribution::increasing_scores: {
      // q along (1, ..., 1) / sqrt(d); key j along it with a length growing in j, so every tile
      // brings a new running max.
      fill(in.v, 0, 1);
      for (double& x : in.q) x = 1.0 + 0.05 * g(rng);
      for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_kv; ++h)
          for (int64_t j = 0; j < p.n_k; ++j)
            for (int c = 0; c < p.d; ++c)
              in.k[p.k_index(b, h, j, c)] = (0.25 * double(j) / std::sqrt(double(p.d))) + 0.05 * g(rng);
      break;
    }
    case Distribution::subnormal: {
      // Magnitudes spread over the last few binades above and inside the subnormal range.
      const FormatSpec& s = spec(recipe_spec(r).input);
      std::uniform_int_distribution<int> shift(-s.precision - 1, 3);
      for (auto* t : {&in.q, &in.k, &in.v})
        for (double& x : *t) x = std::ldexp(g(rng), s.emin + shift(rng));
      // Keep V ordinary in half the tensor so outputs are not all subnormal themselves.
      for (size_t i = 0; i < in.v.size(); i += 2) in.v[i] = g(rng);
      break;
    }
    case Distribution::below_sentinel: {
      // q_i = a_i (1, ..., 1), k_j = -beta (1, ..., 1) + noise: raw scores -a_i beta d + O(a_i sqrt(d) sigma),
      // with beta^2 d = 1.1 times a sentinel and a_i / beta in [0.8, 1.3]: most rows lie wholly below it.
      // The noise gives each row a spread of about 2 in scaled units (more once rounded to the format).
      constexpr double sentinels[] = {5e4, 1e4, 3e4, 65504.0};
      const double target = 1.1 * sentinels[rng() % 4];
      const double beta = std::sqrt(target / p.d), sigma = 2.0 / beta;
      fill(in.v, 0, 1);
      for (double& x : in.k) x = -beta + sigma * g(rng);
      for (int b = 0; b < p.batch; ++b)
        for (int h = 0; h < p.heads_q; ++h)
          for (int64_t i = 0; i < p.n_q; ++i) {
            const double a = beta * (0.8 + 0.5 * unif(rng));
            for (int c = 0; c < p.d; ++c) in.q[p.q_index(b, h, i, c)] = a * (1.0 + 1e-3 * g(rng));
          }
      break;
    }
    case Distribution::late_peak: {
      // Scores N(0, 0.5^2) in scaled units; channel 0 carries the peak: K[., 0] is 0 except at the last
      // key of each batch's key range, and the even rows' Q[., 0] puts 2, 3 or 4 (scaled units) on that
      // key's score, 1 to 4 log2 units over the row's earlier maximum; odd rows get 0 there.
      const double scale = std::fabs(p.effective_scale()), kappa = 2.0;
      const double sigma = std::sqrt(0.5 / (scale * std::sqrt(double(p.d))));
      fill(in.q, 0, sigma);
      fill(in.k, 0, sigma);
      fill(in.v, 0, 1);
      for (int b = 0; b < p.batch; ++b) {
        const int64_t last = p.key_length(b) - 1;
        for (int h = 0; h < p.heads_kv; ++h)
          for (int64_t j = 0; j < p.n_k; ++j) in.k[p.k_index(b, h, j, 0)] = j == last ? kappa : 0.0;
        for (int h = 0; h < p.heads_q; ++h)
          for (int64_t i = 0; i < p.n_q; ++i)
            in.q[p.q_index(b, h, i, 0)] = i % 2 ? 0.0 : (2.0 + double((i / 2) % 3)) / (scale * kappa);
      }
      break;
    }
  }
  const double dq = round_tensor(in.q, r), dk = round_tensor(in.k, r), dvs = round_tensor(in.v, r);
  if (descales) {
    descales->q_descale = dq;
    descales->k_descale = dk;
    descales->v_descale = dvs;
  }
  return in;
}

std::vector<size_t> inject_nan(AttentionInputs& in, char tensor, size_t count, uint64_t seed) {
  std::vector<double>& t = tensor == 'q' ? in.q : tensor == 'k' ? in.k : tensor == 'v' ? in.v
      : throw std::invalid_argument("inject_nan: tensor must be q, k or v");
  std::mt19937_64 rng(seed);
  std::vector<size_t> where;
  for (size_t n = 0; n < count && !t.empty(); ++n) {
    const size_t i = rng() % t.size();
    t[i] = std::numeric_limits<double>::quiet_NaN();
    where.push_back(i);
  }
  return where;
}

}  // namespace fc
