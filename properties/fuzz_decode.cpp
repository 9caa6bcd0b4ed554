#include "properties/fuzz_decode.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>

namespace fc::fuzz {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------------
// Choice sources.

// The front stream at `pos`; past its end it is reused, scrambled per pass so long tensors are not
// periodic; an empty stream reads zeros.
uint8_t stream_byte(std::span<const uint8_t> stream, size_t pos) {
  if (stream.empty()) return 0;
  if (pos < stream.size()) return stream[pos];
  const uint64_t pass = pos / stream.size();
  uint64_t h = (pass + 1) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<uint8_t>(stream[pos % stream.size()] ^ static_cast<uint8_t>(h * 0xBF58476D1CE4E5B9ull >> 56));
}

// Reads choices from the tail (big-endian in consumption order, like FuzzedDataProvider) and values
// from the front.
class ByteChoices : public Choices {
 public:
  explicit ByteChoices(std::span<const uint8_t> b) : data_(b), end_(b.size()) {}
  uint64_t take(uint64_t n, std::string_view) override {
    if (n <= 1) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes_for(n) && end_ > 0; ++i) v = (v << 8) | data_[--end_];
    return v % n;
  }
  uint8_t value_byte(size_t pos) override { return stream_byte(data_.first(end_), pos); }

 private:
  std::span<const uint8_t> data_;
  size_t end_;
};

class RecordingChoices : public Choices {
 public:
  RecordingChoices(const std::vector<WantedField>& w, const std::vector<uint8_t>& values) : values_(values) {
    for (const auto& f : w) wanted_[f.field] = f.value;
  }
  uint64_t take(uint64_t n, std::string_view field) override {
    const auto it = wanted_.find(std::string(field));
    if (it != wanted_.end()) used_.push_back(it->first);
    if (n <= 1) return 0;
    const uint64_t v = it == wanted_.end() ? 0 : it->second % n;
    const int nb = bytes_for(n);
    for (int i = nb - 1; i >= 0; --i) tail_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return v;
  }
  uint8_t value_byte(size_t pos) override { return stream_byte(values_, pos); }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out(values_);
    out.insert(out.end(), tail_.rbegin(), tail_.rend());
    return out;
  }
  std::vector<std::string> unused() const {
    std::vector<std::string> u;
    for (const auto& [k, v] : wanted_)
      if (std::find(used_.begin(), used_.end(), k) == used_.end()) u.push_back(k);
    return u;
  }

 private:
  std::map<std::string, uint64_t> wanted_;
  std::vector<std::string> used_;
  std::vector<uint8_t> tail_;
  const std::vector<uint8_t>& values_;
};

class TracingChoices : public Choices {
 public:
  explicit TracingChoices(std::span<const uint8_t> b) : inner_(b) {}
  uint64_t take(uint64_t n, std::string_view field) override {
    fields.emplace_back(std::string(field), n);
    return inner_.take(n, field);
  }
  uint8_t value_byte(size_t pos) override { return inner_.value_byte(pos); }
  std::vector<std::pair<std::string, uint64_t>> fields;

 private:
  ByteChoices inner_;
};

std::string indexed(std::string_view base, size_t i, std::string_view suffix) {
  std::string s(base);
  s += '[';
  s += std::to_string(i);
  s += ']';
  s += suffix;
  return s;
}

// 0, 1, -1, 2, -2, ...: option 0 (what an exhausted input reads) is the neutral value.
int zigzag(uint64_t v) { return v % 2 ? int((v + 1) / 2) : -int(v / 2); }

template <class T>
const T& pick(Choices& c, const std::vector<T>& options, std::string_view field) {
  return options[c.take(options.size(), field)];
}

// A length biased to the tile grid: t * tile + residue, with residues at the edges of a tile.
int64_t biased_length(Choices& c, std::string_view name, int64_t tile, int64_t max_n, int64_t min_n,
                      const std::vector<int64_t>& specials) {
  const std::string n(name);
  tile = std::max<int64_t>(tile, 1);
  int64_t len = min_n;
  // Sizes are log-uniform: ".size" k picks the range [0, 2^k) the count is drawn from, so short
  // problems stay as common as long ones (and cheap: most GPU cases would otherwise sit at the limit).
  auto log_uniform = [&](int64_t count, const std::string& field) -> int64_t {  // in [0, count)
    int bits = 0;
    while ((int64_t(1) << bits) < count) ++bits;
    const int k = int(c.take(uint64_t(bits + 1), n + ".size"));
    return int64_t(c.take(uint64_t(std::min<int64_t>(int64_t(1) << k, count)), field));
  };
  switch (c.take(3, n + ".mode")) {
    case 0: {  // tile boundary
      const int64_t tiles = log_uniform(max_n / tile + 1, n + ".tiles");
      int64_t r = 0;
      switch (c.take(6, n + ".residue")) {
        case 0: r = 1; break;
        case 1: r = 0; break;
        case 2: r = tile - 1; break;
        case 3: r = tile / 2; break;
        case 4: r = tile / 2 + 1; break;
        default: r = int64_t(c.take(uint64_t(tile), n + ".r")); break;
      }
      len = tiles * tile + r;
      break;
    }
    case 1:  // anything
      len = min_n + log_uniform(max_n - min_n + 1, n + ".literal");
      break;
    default: {  // lengths from real bug reports
      std::vector<int64_t> s;
      for (int64_t x : specials)
        if (x >= min_n && x <= max_n) s.push_back(x);
      if (!s.empty()) len = pick(c, s, n + ".special");
      break;
    }
  }
  return std::clamp(len, min_n, max_n);
}

enum class ValueMode { small_int, exp_window, raw };
struct ValueSpec {
  ValueMode mode = ValueMode::small_int;
  int shift = 0;             // small_int: value = int8 * 2^shift
  int e_lo = 0, span = 1;    // exp_window: (1 + m/256) * 2^(e_lo + [0, span))
  bool nonfinite = false;    // raw: NaN / inf patterns kept (as NaN) instead of made finite
  int descale_exp = 0;       // fp8: per-tensor descale 2^descale_exp
};

ValueSpec decode_value_spec(Choices& c, char t, bool fp8) {
  const std::string n(1, t);
  ValueSpec s;
  s.mode = static_cast<ValueMode>(c.take(3, n + ".mode"));
  switch (s.mode) {
    case ValueMode::small_int: s.shift = zigzag(c.take(17, n + ".shift")); break;
    case ValueMode::exp_window:
      s.e_lo = int(c.take(56, n + ".e_lo")) - 40;
      s.span = 1 + int(c.take(16, n + ".span"));
      break;
    case ValueMode::raw: s.nonfinite = c.take(4, n + ".nonfinite") == 1; break;
  }
  if (fp8) s.descale_exp = zigzag(c.take(17, n + ".descale"));
  return s;
}

std::string value_spec_note(char t, const ValueSpec& s) {
  std::ostringstream o;
  o << char(std::toupper(t)) << ": ";
  switch (s.mode) {
    case ValueMode::small_int: o << "small_int(int8 * 2^" << s.shift << ")"; break;
    case ValueMode::exp_window: o << "exp_window(2^" << s.e_lo << " .. 2^" << (s.e_lo + s.span) << ")"; break;
    case ValueMode::raw: o << "raw bits" << (s.nonfinite ? " (non-finite patterns -> NaN)" : " (made finite)"); break;
  }
  if (s.descale_exp) o << " descale 2^" << s.descale_exp;
  return o.str();
}

// Raw patterns of formats with fp32's exponent range are capped, so that d products of two inputs
// stay far below fp32's overflow: a kernel overflowing on 1e38 inputs is outside the budget's model.
double raw_cap(Format f) { return (f == Format::fp32 || f == Format::tf32 || f == Format::bf16) ? std::ldexp(1.0, 24) : kInf; }

void fill_tensor(std::vector<double>& t, const ValueSpec& s, Format f, Choices& c, size_t& pos) {
  const double descale = std::ldexp(1.0, s.descale_exp);
  const FormatSpec& fs = spec(f);
  const int storage_bytes = (f == Format::tf32 ? 32 : fs.bits) / 8;
  const Format bits_format = f == Format::tf32 ? Format::fp32 : f;
  const uint32_t top_exp_bit = 1u << ((f == Format::tf32 ? 32 : fs.bits) - 2);
  for (double& x : t) {
    switch (s.mode) {
      case ValueMode::small_int: {
        const double v = std::ldexp(double(int8_t(c.value_byte(pos++))), s.shift);
        x = round_to(f, v / descale, Overflow::saturate) * descale;
        break;
      }
      case ValueMode::exp_window: {
        const uint8_t m = c.value_byte(pos++), e = c.value_byte(pos++);
        double v = 0;
        if (e != 0xFF) v = (e & 1 ? -1.0 : 1.0) * std::ldexp(1.0 + m / 256.0, s.e_lo + (e >> 1) % s.span);
        x = round_to(f, v / descale, Overflow::saturate) * descale;
        break;
      }
      case ValueMode::raw: {
        uint32_t bits = 0;
        for (int i = 0; i < storage_bytes; ++i) bits |= uint32_t(c.value_byte(pos++)) << (8 * i);
        if (f == Format::tf32) bits &= ~0x1FFFu;
        double v = decode(bits_format, bits);
        if (!std::isfinite(v)) v = s.nonfinite ? kNaN : decode(bits_format, bits & ~top_exp_bit);
        if (std::isfinite(v) && std::fabs(v) > raw_cap(f)) v = std::ldexp(v, std::ilogb(raw_cap(f)) - std::ilogb(v));
        x = v * descale;
        break;
      }
    }
  }
}

// The score guard: |scale| * d * max|Q| * max|K| <= 2^20. A fused kernel computes exp2(s c - m c) in fp32
// with the scale folded in (FFMA), so the exponent argument carries an absolute error of about
// u_fp32 |m c|: at |s| = 2^20 that is 2^-4 * log2(e), at 2^31 it exceeds 128 and P overflows to inf or
// vanishes. That is a limit of the algorithm, not a bug of one kernel, and outside the error budget's
// model; so Q and K are scaled down together by a power of two (then rounded to the input format again)
// until the scores fit. The guard still allows the hostile score ranges of the bug reports (flashinfer's
// logits of -2.45e5).
void guard_scores(FuzzCase& fc, Format f) {
  const Problem& p = fc.problem;
  auto amax = [](const std::vector<double>& t) {
    double m = 0;
    for (double x : t)
      if (std::isfinite(x)) m = std::max(m, std::fabs(x));
    return m;
  };
  const double bound = std::fabs(p.effective_scale()) * p.d * amax(fc.inputs.q) * amax(fc.inputs.k);
  const double limit = std::ldexp(1.0, 20);
  if (!(bound > limit)) return;
  const int half = (std::ilogb(bound / limit) + 2) / 2;  // 2^(2 half) >= bound / limit
  auto shrink = [&](std::vector<double>& t, double descale) {
    for (double& x : t)
      if (std::isfinite(x)) x = round_to(f, std::ldexp(x, -half) / descale, Overflow::saturate) * descale;
  };
  shrink(fc.inputs.q, fc.options.q_descale);
  shrink(fc.inputs.k, fc.options.k_descale);
  fc.values_note += "; Q and K scaled by 2^-" + std::to_string(half) + " (score guard)";
}

// Output headroom: |V| <= max_finite(output format) / 2. O is a convex combination of V rows, so its
// exact value stays below max|V|; but a kernel that rounds O to the output format with IEEE overflow
// (as the emulation and the CUDA kernel do) turns an exact O at the format's max_finite, computed a few
// ulps high, into inf. Whether O should saturate there is an open question of the semantics
// (docs/fuzzing.md); until it is settled V keeps one binade of headroom.
void output_headroom(FuzzCase& fc, const RecipeSpec& rs) {
  const double half_max = spec(rs.output).max_finite / 2;
  for (double& x : fc.inputs.v)
    if (std::isfinite(x) && std::fabs(x) > half_max) x = round_to(rs.input, x / 2 / fc.options.v_descale, Overflow::saturate) * fc.options.v_descale;
}

}  // namespace

int bytes_for(uint64_t n) {
  if (n <= 256) return 1;
  if (n <= 65536) return 2;
  if (n <= (uint64_t(1) << 24)) return 3;
  return 4;
}

// ---------------------------------------------------------------------------------------------------
// Limits.

FuzzLimits FuzzLimits::cpu() {
  FuzzLimits l;
  l.special_lengths = {1, 2, 3, 31, 32, 33, 63, 64, 65, 127, 128, 129};
  return l;
}

FuzzLimits FuzzLimits::gpu() {
  FuzzLimits l;
  l.max_batch = 3;
  l.max_heads_kv = 4;
  l.max_group = 4;
  l.max_n_q = 4224;
  l.max_n_k = 65537;
  l.max_d = 256;
  l.max_tile = 128;
  l.max_work = 1.5e8;
  l.max_elements = 8e6;  // 65537 keys at d = 32, 16384 at d = 256
  // seqlens of FlashAttention's test matrix and the bug reports (cuDNN % 128 == 64, xformers % 32 == 1
  // and > 32768 keys, FA2 seqlen 1).
  l.special_lengths = {1,   2,   3,   31,  32,   33,   63,   64,   65,   97,   113,  127,   128,   129,   192,
                       193, 200, 239, 255, 256,  257,  384,  799,  1023, 1024, 1025, 4096,  4224,  8191,  8192,
                       8193, 32767, 32768, 32769, 65536, 65537};
  return l;
}

std::optional<FuzzLimits> FuzzLimits::by_name(std::string_view name) {
  if (name == "cpu") return cpu();
  if (name == "gpu") return gpu();
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------
// Capabilities line.

std::string caps_to_line(const Capabilities& caps) {
  std::ostringstream o;
  o << "recipes=";
  for (size_t i = 0; i < caps.recipes.size(); ++i) o << (i ? "," : "") << recipe_spec(caps.recipes[i]).name;
  o << ";head_dims=";
  for (size_t i = 0; i < caps.head_dims.size(); ++i) o << (i ? "," : "") << caps.head_dims[i];
  o << ";tiles=";
  for (size_t i = 0; i < caps.tiles.size(); ++i) o << (i ? "," : "") << caps.tiles[i].m << "x" << caps.tiles[i].n;
  if (!caps.tile_recipes.empty()) {
    o << ";tile_recipes=";
    for (size_t i = 0; i < caps.tile_recipes.size(); ++i) o << (i ? "," : "") << recipe_spec(caps.tile_recipes[i]).name;
  }
  o << ";flags=";
  const std::pair<const char*, bool> flags[] = {
      {"dv_may_differ", caps.dv_may_differ}, {"any_tile", caps.any_tile},     {"causal", caps.causal},
      {"window", caps.window},               {"dense_mask", caps.dense_mask}, {"key_lengths", caps.key_lengths},
      {"gqa", caps.gqa},                     {"lse", caps.lse},               {"split_kv", caps.split_kv},
      {"fa1", caps.fa1},                     {"l_from_fp32_p", caps.l_from_fp32_p},
      {"two_level_accum", caps.two_level_accum}, {"subtile_steps", caps.subtile_steps}};
  bool first = true;
  for (const auto& [name, on] : flags)
    if (on) {
      o << (first ? "" : ",") << name;
      first = false;
    }
  return o.str();
}

std::optional<Capabilities> caps_from_line(std::string_view line) {
  Capabilities caps;
  auto split = [](std::string_view s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t e = s.find(sep, start);
      const std::string_view part = s.substr(start, e == std::string_view::npos ? std::string_view::npos : e - start);
      if (!part.empty()) out.emplace_back(part);
      if (e == std::string_view::npos) break;
      start = e + 1;
    }
    return out;
  };
  try {
    for (const std::string& kv : split(line, ';')) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) return std::nullopt;
      const std::string key = kv.substr(0, eq);
      const std::vector<std::string> items = split(std::string_view(kv).substr(eq + 1), ',');
      if (key == "recipes") {
        for (const auto& r : items) {
          auto rec = parse_recipe(r);
          if (!rec) return std::nullopt;
          caps.recipes.push_back(*rec);
        }
      } else if (key == "tile_recipes") {
        for (const auto& r : items) {
          auto rec = parse_recipe(r);
          if (!rec) return std::nullopt;
          caps.tile_recipes.push_back(*rec);
        }
      } else if (key == "head_dims") {
        for (const auto& d : items) caps.head_dims.push_back(std::stoi(d));
      } else if (key == "tiles") {
        for (const auto& t : items) {
          const size_t x = t.find('x');
          if (x == std::string::npos) return std::nullopt;
          caps.tiles.push_back({std::stoi(t.substr(0, x)), std::stoi(t.substr(x + 1))});
        }
      } else if (key == "flags") {
        for (const auto& f : items) {
          if (f == "dv_may_differ") caps.dv_may_differ = true;
          else if (f == "any_tile") caps.any_tile = true;
          else if (f == "causal") caps.causal = true;
          else if (f == "window") caps.window = true;
          else if (f == "dense_mask") caps.dense_mask = true;
          else if (f == "key_lengths") caps.key_lengths = true;
          else if (f == "gqa") caps.gqa = true;
          else if (f == "lse") caps.lse = true;
          else if (f == "split_kv") caps.split_kv = true;
          else if (f == "fa1") caps.fa1 = true;
          else if (f == "l_from_fp32_p") caps.l_from_fp32_p = true;
          else if (f == "two_level_accum") caps.two_level_accum = true;
          else if (f == "subtile_steps") caps.subtile_steps = true;
          else return std::nullopt;
        }
      }
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return caps;
}

// ---------------------------------------------------------------------------------------------------
// The decoder.

FuzzCase decode_case(Choices& c, const Capabilities& caps, const FuzzLimits& lim) {
  FuzzCase fc;
  Problem& p = fc.problem;
  RunOptions& o = fc.options;

  // Recipe and tile first: the shapes are biased to the tile's grid.
  const std::vector<Recipe> recipes = caps.recipes.empty() ? std::vector<Recipe>{Recipe::fp16} : caps.recipes;
  o.recipe = pick(c, recipes, "recipe");
  const RecipeSpec& rs = recipe_spec(o.recipe);
  const bool fp8 = rs.input == Format::e4m3 || rs.input == Format::e5m2;
  int bm = 64, bn = 64;  // the grid lengths are biased to (a nominal one when the subject picks)
  if (caps.any_tile) {
    static const std::vector<int> kTiles = {4, 1, 2, 3, 8, 16, 5, 32, 7, 64, 128};
    std::vector<int> tiles;
    for (int t : kTiles)
      if (t <= lim.max_tile) tiles.push_back(t);
    o.tile_m = bm = pick(c, tiles, "tile_m");
    o.tile_n = bn = pick(c, tiles, "tile_n");
  } else if (!caps.tiles.empty() && takes_tiles(caps, o.recipe)) {
    const TileSize t = pick(c, caps.tiles, "tile");
    o.tile_m = bm = t.m;
    o.tile_n = bn = t.n;
  }

  p.batch = 1 + int(c.take(uint64_t(lim.max_batch), "batch"));
  p.heads_kv = 1 + int(c.take(uint64_t(lim.max_heads_kv), "heads_kv"));
  const int group = caps.gqa ? 1 + int(c.take(uint64_t(lim.max_group), "group")) : 1;
  p.heads_q = p.heads_kv * group;

  std::vector<int> dims = caps.head_dims;
  if (dims.empty())
    for (int d : {2, 1, 3, 4, 8, 16, 5, 7, 32, 64, 128, 256})
      if (d <= lim.max_d) dims.push_back(d);
  p.d = pick(c, dims, "d");
  p.dv = (caps.dv_may_differ && c.take(2, "dv.differs")) ? pick(c, dims, "dv") : p.d;

  p.n_k = biased_length(c, "n_k", bn, lim.max_n_k, 1, lim.special_lengths);
  p.n_q = biased_length(c, "n_q", bm, lim.max_n_q, 1, lim.special_lengths);

  // Stay within the work limit: fewer batches and heads first, then fewer queries, then fewer keys.
  auto work = [&] { return double(p.batch) * p.heads_q * double(p.n_q) * double(p.n_k) * (p.d + p.dv); };
  if (work() > lim.max_work) {
    p.batch = 1;
    p.heads_kv = 1;
    p.heads_q = 1;
  }
  if (work() > lim.max_work) p.n_q = std::max<int64_t>(1, int64_t(lim.max_work / (double(p.n_k) * (p.d + p.dv))));
  if (work() > lim.max_work) p.n_k = std::max<int64_t>(1, int64_t(lim.max_work / double(p.d + p.dv)));
  // And within the input-size limit (decoding and transfers cost per element): keys first, as the
  // queries were cut above.
  auto elements = [&] {
    return double(p.batch) * (double(p.heads_q) * double(p.n_q) * p.d + double(p.heads_kv) * double(p.n_k) * (p.d + p.dv));
  };
  if (elements() > lim.max_elements) {
    const double q_part = double(p.batch) * p.heads_q * double(p.n_q) * p.d;
    const double per_key = double(p.batch) * p.heads_kv * (p.d + p.dv);
    p.n_k = std::max<int64_t>(1, int64_t(std::max(lim.max_elements - q_part, per_key) / per_key));
  }
  if (elements() > lim.max_elements)
    p.n_q = std::max<int64_t>(1, int64_t((lim.max_elements - double(p.batch) * p.heads_kv * double(p.n_k) * (p.d + p.dv)) /
                                         (double(p.batch) * p.heads_q * p.d)));

  // (every take() is its own statement: argument evaluation order is unspecified, the byte layout must not be)
  switch (c.take(5, "scale.mode")) {
    case 0: break;  // 1/sqrt(d)
    case 1: p.scale = 1.0; break;
    case 2: p.scale = std::ldexp(1.0, int(c.take(25, "scale.exp")) - 12); break;
    default: {
      const double mant = 1.0 + double(c.take(65536, "scale.mant")) / 65536.0;
      const int e = int(c.take(17, "scale.exp")) - 8;
      p.scale = std::ldexp(mant, e);
      break;
    }
  }
  if (p.scale && c.take(8, "scale.negative") == 1) p.scale = -*p.scale;  // valid per Problem::validate

  // Mask: a window kind, optional key lengths, optional dense mask.
  {
    std::vector<int> kinds = {0};
    if (caps.causal) kinds.insert(kinds.end(), {1, 2});
    if (caps.window) kinds.insert(kinds.end(), {3, 4});
    const int kind = pick(c, kinds, "mask.window");
    if (kind == 1) p.window = Window::causal(Align::bottom_right);
    if (kind == 2) p.window = Window::causal(Align::top_left);
    if (kind >= 3) {
      p.window.align = kind == 3 ? Align::bottom_right : Align::top_left;
      p.window.left = int64_t(c.take(uint64_t(2 * bn + 3), "window.left")) - 1;
      p.window.right = int64_t(c.take(uint64_t(2 * bn + 3), "window.right")) - 1;
    }
  }
  if (caps.key_lengths && c.take(2, "mask.key_lengths")) {
    p.key_lengths.resize(p.batch);
    for (int b = 0; b < p.batch; ++b) {
      int64_t& len = p.key_lengths[b];
      switch (c.take(4, indexed("key_len", b, ".kind"))) {
        case 0: len = biased_length(c, indexed("key_len", b, ""), bn, p.n_k, 0, lim.special_lengths); break;
        case 1: len = 0; break;  // every row of this batch fully masked
        case 2: len = p.n_k; break;
        default: len = int64_t(c.take(uint64_t(p.n_k + 1), indexed("key_len", b, ".literal"))); break;
      }
    }
  }
  if (caps.dense_mask && double(p.n_q) * double(p.n_k) <= 1e7 && c.take(3, "mask.dense") == 1) {
    p.dense_mask.assign(size_t(p.n_q) * size_t(p.n_k), 1);
    const uint64_t kind = c.take(4, "dense.kind");
    const uint64_t seed = c.take(65536, "dense.seed");
    const uint64_t density = c.take(5, "dense.density");  // in quarters
    std::mt19937_64 rng(seed);
    for (int64_t i = 0; i < p.n_q; ++i) {
      const bool row_masked = kind == 2 && rng() % 4 < density;
      for (int64_t j = 0; j < p.n_k; ++j) {
        uint8_t& m = p.dense_mask[size_t(i) * size_t(p.n_k) + size_t(j)];
        switch (kind) {
          case 0: m = rng() % 4 < density; break;                         // random
          case 1: m = ((j / bn) + (i / bm)) % 2 == 0; break;              // checkerboard of tiles
          case 2: m = !row_masked; break;                                 // whole rows masked
          default: m = j >= (p.n_k / bn) * bn || (density == 4 && j == 0); break;  // the tail tile only
        }
      }
    }
  }

  // Run options the subject can vary.
  if (caps.split_kv) {
    static const std::vector<int> kSplits = {1, 2, 3, 0, 4, 7};
    o.num_splits = pick(c, kSplits, "num_splits");
  }
  if (caps.l_from_fp32_p) o.l_from_fp32_p = c.take(2, "l_from_fp32_p");
  if (caps.two_level_accum && fp8) o.two_level_accum = c.take(2, "two_level_accum");
  if (caps.fa1 && c.take(2, "fa1")) o.normalisation = Normalisation::fa1;
  if (caps.any_tile && c.take(2, "ieee_fp32")) o.accumulation = Accumulation::ieee_fp32;

  // Values: a mode per tensor.
  const ValueSpec qs = decode_value_spec(c, 'q', fp8), ks = decode_value_spec(c, 'k', fp8),
                  vs = decode_value_spec(c, 'v', fp8);
  if (fp8) {
    o.q_descale = std::ldexp(1.0, qs.descale_exp);
    o.k_descale = std::ldexp(1.0, ks.descale_exp);
    o.v_descale = std::ldexp(1.0, vs.descale_exp);
  }
  fc.values_note = value_spec_note('q', qs) + "; " + value_spec_note('k', ks) + "; " + value_spec_note('v', vs);

  // NaN written into chosen elements, and the isolation probe; both index the tensors, so they are
  // decoded once the shapes are final but before the values (every tail byte comes before the front).
  struct Nan { char t; uint64_t i; };
  std::vector<Nan> nans;
  const uint64_t n_nan = c.take(4, "nan.count");
  auto tensor_size = [&](char t) { return t == 'q' ? p.q_size() : t == 'k' ? p.k_size() : p.v_size(); };
  for (uint64_t n = 0; n < n_nan; ++n) {
    const char t = "qkv"[c.take(3, indexed("nan", n, ".tensor"))];
    nans.push_back({t, c.take(tensor_size(t), indexed("nan", n, ".index"))});
  }
  if (c.take(4, "poison") == 1) {
    fc.poison.tensor = "qkv"[c.take(3, "poison.tensor")];
    fc.poison.index = c.take(tensor_size(fc.poison.tensor), "poison.index");
    static const double kPoison[3] = {kNaN, kInf, -kInf};
    fc.poison.value = kPoison[c.take(3, "poison.value")];
  }

  AttentionInputs& in = fc.inputs;
  in.q.resize(p.q_size());
  in.k.resize(p.k_size());
  in.v.resize(p.v_size());
  size_t pos = 0;
  fill_tensor(in.q, qs, rs.input, c, pos);
  fill_tensor(in.k, ks, rs.input, c, pos);
  fill_tensor(in.v, vs, rs.input, c, pos);
  if (lim.score_guard) guard_scores(fc, rs.input);
  if (lim.output_headroom) output_headroom(fc, rs);
  for (const Nan& n : nans) (n.t == 'q' ? in.q : n.t == 'k' ? in.k : in.v)[n.i] = kNaN;
  if (!nans.empty()) fc.values_note += "; NaN written into " + std::to_string(nans.size()) + " element(s)";
  return fc;
}

FuzzCase decode_case(std::span<const uint8_t> bytes, const Capabilities& caps, const FuzzLimits& lim) {
  ByteChoices c(bytes);
  return decode_case(c, caps, lim);
}

std::vector<uint8_t> encode_case(const std::vector<WantedField>& wanted, const std::vector<uint8_t>& value_bytes,
                                 const Capabilities& caps, const FuzzLimits& lim) {
  RecordingChoices c(wanted, value_bytes);
  decode_case(c, caps, lim);
  const auto unused = c.unused();
  if (!unused.empty()) throw std::invalid_argument("encode_case: the decoder never asked for field '" + unused.front() + "'");
  return c.bytes();
}

std::vector<std::pair<std::string, uint64_t>> trace_fields(std::span<const uint8_t> bytes, const Capabilities& caps,
                                                           const FuzzLimits& lim) {
  TracingChoices c(bytes);
  decode_case(c, caps, lim);
  return c.fields;
}

// ---------------------------------------------------------------------------------------------------
// Random bytes for the driver.

uint64_t CaseGenerator::next() {  // splitmix64
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t case_seed(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<uint8_t> CaseGenerator::next_bytes() {
  // Front: a value stream of 1 .. 16384 bytes. Tail: 128 bytes of choices, a third of them zero so
  // that option 0 of every choice (no NaN, no probe, no mask) stays common.
  const size_t stream = size_t(1) << (next() % 15);
  std::vector<uint8_t> b(stream + 128);
  for (size_t i = 0; i < stream; ++i) b[i] = uint8_t(next());
  for (size_t i = stream; i < b.size(); ++i) {
    const uint64_t r = next();
    b[i] = r % 3 == 0 ? 0 : uint8_t(r >> 8);
  }
  return b;
}

}  // namespace fc::fuzz
