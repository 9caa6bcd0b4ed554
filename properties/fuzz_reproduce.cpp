// Printers and reproducer files (fuzz_reproduce.h).
#include "properties/fuzz_reproduce.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace fc::fuzz {

std::string fmt_double(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// ---------------------------------------------------------------------------------------------------
// Printers.

namespace {

std::string hexf(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

std::string options_line(const RunOptions& o) {
  std::ostringstream s;
  s << "recipe=" << recipe_spec(o.recipe).name << " tile=" << o.tile_m << "x" << o.tile_n << " num_splits=" << o.num_splits
    << " l_from_fp32_p=" << o.l_from_fp32_p << " two_level_accum=" << o.two_level_accum
    << " normalisation=" << (o.normalisation == Normalisation::fa1 ? "fa1" : "fa2")
    << " accumulation=" << (o.accumulation == Accumulation::ieee_fp32 ? "ieee_fp32" : "tensor_core");
  if (o.q_descale != 1 || o.k_descale != 1 || o.v_descale != 1)
    s << " descale q/k/v=" << o.q_descale << "/" << o.k_descale << "/" << o.v_descale;
  return s.str();
}

void print_tensor(std::ostringstream& s, const char* name, const std::vector<double>& t, size_t row_len) {
  s << "  " << name << " (" << t.size() << " values, rows of " << row_len << "):\n";
  for (size_t r = 0; r * row_len < t.size(); ++r) {
    s << "    [" << r << "]";
    for (size_t c = 0; c < row_len; ++c) s << " " << fmt_double(t[r * row_len + c]);
    s << "\n";
  }
}

std::string literal_list(const std::vector<double>& t) {
  std::ostringstream s;
  s << "{";
  for (size_t i = 0; i < t.size(); ++i) s << (i ? (i % 8 ? ", " : ",\n      ") : "") << hexf(t[i]);
  s << "}";
  return s.str();
}

}  // namespace

std::string describe(const FuzzCase& fc, size_t max_elements_printed) {
  const Problem& p = fc.problem;
  std::ostringstream s;
  s << "problem: " << p.describe() << (p.scale ? "" : " (scale unset: 1/sqrt(d))") << "\n";
  if (p.window.active())
    s << "  window: left=" << p.window.left << " right=" << p.window.right
      << " align=" << (p.window.align == Align::top_left ? "top_left" : "bottom_right") << "\n";
  if (!p.dense_mask.empty()) {
    size_t visible = 0;
    for (uint8_t m : p.dense_mask) visible += m != 0;
    s << "  dense mask: " << visible << " of " << p.dense_mask.size() << " (query, key) pairs visible\n";
  }
  s << "  key tiles: n_k = " << p.n_k << " = " << (p.n_k / std::max(1, fc.options.tile_n > 0 ? fc.options.tile_n : 1))
    << " * Bc + " << (p.n_k % std::max(1, fc.options.tile_n > 0 ? fc.options.tile_n : 1)) << " (Bc = " << fc.options.tile_n
    << "); n_q = " << p.n_q << "\n";
  s << "options: " << options_line(fc.options) << "\n";
  s << "values: " << fc.values_note << "\n";
  size_t nan_count = 0;
  for (auto* t : {&fc.inputs.q, &fc.inputs.k, &fc.inputs.v})
    for (double x : *t) nan_count += std::isnan(x);
  s << "  NaN inputs: " << nan_count << "\n";
  if (fc.poison.tensor)
    s << "isolation probe: " << char(std::toupper(fc.poison.tensor)) << "[" << fc.poison.index << "] = "
      << fmt_double(fc.poison.value) << " in a second run\n";
  if (fc.inputs.q.size() + fc.inputs.k.size() + fc.inputs.v.size() <= max_elements_printed) {
    print_tensor(s, "Q", fc.inputs.q, size_t(p.d));
    print_tensor(s, "K", fc.inputs.k, size_t(p.d));
    print_tensor(s, "V", fc.inputs.v, size_t(p.dv));
  } else {
    s << "  (" << fc.inputs.q.size() + fc.inputs.k.size() + fc.inputs.v.size() << " input values: not printed)\n";
  }
  return s.str();
}

std::string to_regression_test(const FuzzCase& fc, std::string_view test_name, std::string_view subject_name) {
  const Problem& p = fc.problem;
  const RunOptions& o = fc.options;
  std::ostringstream s;
  s << "// Regression test from a fuzz reproducer (docs/fuzzing.md). The case:\n";
  std::istringstream d(describe(fc, 0));
  for (std::string line; std::getline(d, line);) s << "//   " << line << "\n";
  s << "TEST(FuzzRegression, " << test_name << ") {\n"
    << "  [[maybe_unused]] const double nan = std::numeric_limits<double>::quiet_NaN();\n"
    << "  [[maybe_unused]] const double inf = std::numeric_limits<double>::infinity();\n"
    << "  fc::fuzz::FuzzCase c;\n"
    << "  c.problem.batch = " << p.batch << ";\n"
    << "  c.problem.heads_q = " << p.heads_q << ";\n"
    << "  c.problem.heads_kv = " << p.heads_kv << ";\n"
    << "  c.problem.n_q = " << p.n_q << ";\n"
    << "  c.problem.n_k = " << p.n_k << ";\n"
    << "  c.problem.d = " << p.d << ";\n"
    << "  c.problem.dv = " << p.dv << ";\n";
  if (p.scale) s << "  c.problem.scale = " << hexf(*p.scale) << ";\n";
  if (p.window.active())
    s << "  c.problem.window = fc::Window{" << p.window.left << ", " << p.window.right << ", fc::Align::"
      << (p.window.align == Align::top_left ? "top_left" : "bottom_right") << "};\n";
  if (!p.key_lengths.empty()) {
    s << "  c.problem.key_lengths = {";
    for (size_t b = 0; b < p.key_lengths.size(); ++b) s << (b ? ", " : "") << p.key_lengths[b];
    s << "};\n";
  }
  if (!p.dense_mask.empty()) {
    s << "  c.problem.dense_mask = {";
    for (size_t i = 0; i < p.dense_mask.size(); ++i) s << (i ? (i % 32 ? "," : ",\n      ") : "") << int(p.dense_mask[i] != 0);
    s << "};\n";
  }
  s << "  c.options.recipe = fc::Recipe::" << recipe_spec(o.recipe).name << ";\n"
    << "  c.options.tile_m = " << o.tile_m << ";\n"
    << "  c.options.tile_n = " << o.tile_n << ";\n"
    << "  c.options.num_splits = " << o.num_splits << ";\n"
    << "  c.options.l_from_fp32_p = " << (o.l_from_fp32_p ? "true" : "false") << ";\n"
    << "  c.options.two_level_accum = " << (o.two_level_accum ? "true" : "false") << ";\n"
    << "  c.options.normalisation = fc::Normalisation::" << (o.normalisation == Normalisation::fa1 ? "fa1" : "fa2") << ";\n"
    << "  c.options.accumulation = fc::Accumulation::"
    << (o.accumulation == Accumulation::ieee_fp32 ? "ieee_fp32" : "tensor_core") << ";\n"
    << "  c.options.q_descale = " << hexf(o.q_descale) << ";\n"
    << "  c.options.k_descale = " << hexf(o.k_descale) << ";\n"
    << "  c.options.v_descale = " << hexf(o.v_descale) << ";\n"
    << "  c.inputs.q = " << literal_list(fc.inputs.q) << ";\n"
    << "  c.inputs.k = " << literal_list(fc.inputs.k) << ";\n"
    << "  c.inputs.v = " << literal_list(fc.inputs.v) << ";\n";
  if (fc.poison.tensor)
    s << "  c.poison = {'" << fc.poison.tensor << "', " << fc.poison.index << ", " << hexf(fc.poison.value) << "};\n";
  s << "  auto subject = fc::make_subject(\"" << subject_name << "\");\n"
    << "  const fc::fuzz::CaseVerdict v = fc::fuzz::check_case(*subject, c);\n"
    << "  std::string findings;\n"
    << "  for (const auto& f : v.findings) findings += f + \"\\n\";\n"
    << "  EXPECT_TRUE(v.clean()) << findings;\n"
    << "}\n";
  return s.str();
}

// ---------------------------------------------------------------------------------------------------
// Reproducer files.

Reproducer read_reproducer(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument("cannot read " + path);
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Reproducer r;
  static const std::string magic = "FCFUZZ1 ";
  if (all.size() >= magic.size() && std::equal(magic.begin(), magic.end(), all.begin())) {
    const auto nl = std::find(all.begin(), all.end(), uint8_t('\n'));
    if (nl == all.end()) throw std::invalid_argument(path + ": reproducer header without a newline");
    const std::string header(all.begin() + long(magic.size()), nl);
    std::istringstream hs(header);
    for (std::string kv; hs >> kv;) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
      if (key == "subject") r.subject = val;
      else if (key == "limits") r.limits = val;
      else if (key == "guards") {
        r.score_guard = val.find("score") != std::string::npos;
        r.output_headroom = val.find("headroom") != std::string::npos;
      }
      else if (key == "caps") {
        r.caps = caps_from_line(val);
        if (!r.caps) throw std::invalid_argument(path + ": unreadable capabilities in the header");
      }
    }
    r.bytes.assign(nl + 1, all.end());
  } else {
    r.bytes = std::move(all);
  }
  return r;
}

std::string reproducer_bytes(const Reproducer& r) {
  std::ostringstream f;
  f << "FCFUZZ1 subject=" << r.subject << " limits=" << r.limits;
  if (!r.score_guard || !r.output_headroom)
    f << " guards=" << (r.score_guard ? "score" : "") << (r.score_guard && r.output_headroom ? "," : "")
      << (r.output_headroom ? "headroom" : "") << (!r.score_guard && !r.output_headroom ? "none" : "");
  if (r.caps) f << " caps=" << caps_to_line(*r.caps);
  f << "\n";
  f.write(reinterpret_cast<const char*>(r.bytes.data()), std::streamsize(r.bytes.size()));
  return f.str();
}

}  // namespace fc::fuzz
