// Attention problems from NPY files, shared by `flashcheck reference` and `flashcheck compare`:
// Q (B, Hq, Nq, d), K (B, Hkv, Nk, d), V (B, Hkv, Nk, dv), optional key lengths (B,). Header-only (see
// npy_file.h for why).
//
// Values: float16/32/64 arrays hold the values directly; bf16 and fp8 arrive as uint16 / uint8 bit
// patterns named by --format. Every value must be one of the format's values (a float64 array of bf16
// values is fine; a float64 array of arbitrary doubles under --format bf16 is refused, naming the first
// offending element). fp8 values are the stored values; the true value is stored * descale.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "reference/exact_attention.h"
#include "reference/formats.h"
#include "reference/problem.h"
#include "tools/npy/npy_file.h"

namespace fc::npy {

struct InputOptions {
  std::string q, k, v;
  std::string format;  // empty: from the dtype (f2 fp16, f4 fp32, f8 fp64) or the recipe
  std::optional<double> scale;
  std::string mask = "none";
  std::string key_lengths;
  double q_descale = 1, k_descale = 1, v_descale = 1;
};

inline void add_input_options(CLI::App* cmd, InputOptions& o) {
  cmd->add_option("--q", o.q, "Q as NPY, shape (B, Hq, Nq, d)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--k", o.k, "K as NPY, shape (B, Hkv, Nk, d)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--v", o.v, "V as NPY, shape (B, Hkv, Nk, dv)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--format", o.format,
                  "input format: fp16|bf16|e4m3|e5m2|fp32|fp64 (bf16 and fp8 as uint16/uint8 bit patterns, or "
                  "as floats holding exact values)");
  cmd->add_option("--scale", o.scale, "softmax scale (default 1/sqrt(d))");
  cmd->add_option("--mask", o.mask,
                  "none | causal (bottom-right) | causal-top-left (PyTorch is_causal) | window:L,R | "
                  "window-top-left:L,R");
  cmd->add_option("--key-lengths", o.key_lengths, "integer NPY of shape (B,): keys >= length are masked")
      ->check(CLI::ExistingFile);
  cmd->add_option("--q-descale", o.q_descale, "fp8: true Q = stored * descale");
  cmd->add_option("--k-descale", o.k_descale, "fp8: true K = stored * descale");
  cmd->add_option("--v-descale", o.v_descale, "fp8: true V = stored * descale");
}

// What the arrays were read as.
struct LoadedProblem {
  Problem problem;
  AttentionInputs inputs;
  Format format = Format::fp64;
};

// Bad input of any kind (unreadable file, wrong shape, value not in the format) is std::invalid_argument
// or NpyError; both start with the file's name.
inline std::vector<double> tensor_values(const std::string& path, const Array& a, Format f, double descale) {
  std::vector<double> out(a.size());
  const bool fp8 = f == Format::e4m3 || f == Format::e5m2;
  if (a.kind == 'u' && (a.itemsize == 2 || a.itemsize == 1)) {
    const bool ok16 = a.itemsize == 2 && (f == Format::fp16 || f == Format::bf16);
    const bool ok8 = a.itemsize == 1 && fp8;
    if (!ok16 && !ok8)
      throw NpyError(path + ": " + a.dtype() + " bit patterns need --format " +
                     (a.itemsize == 2 ? "fp16 or bf16" : "e4m3 or e5m2") + ", got " + std::string(spec(f).name));
    for (size_t i = 0; i < out.size(); ++i) out[i] = decode(f, uint32_t(a.as_uint(i))) * (fp8 ? descale : 1.0);
    return out;
  }
  if (a.kind != 'f')
    throw NpyError(path + ": dtype " + a.dtype() + " is not an attention input (float16/32/64, or uint16/uint8 bit "
                   "patterns with --format)");
  for (size_t i = 0; i < out.size(); ++i) {
    const double x = a.as_double(i);
    if (!std::isnan(x) && !std::isinf(x) && f != Format::fp64 && !is_representable(f, x))
      throw NpyError(path + ": element " + std::to_string(i) + " = " + std::to_string(x) + " is not a " +
                     std::string(spec(f).name) + " value (round the inputs to the format before saving, or pass "
                     "the right --format)");
    out[i] = x * (fp8 ? descale : 1.0);
  }
  return out;
}

// `fallback` is the recipe's input format (compare), used when --format is absent. The problem is
// read from the headers first; `before_reading` (a memory guard) sees it before any data is read.
inline LoadedProblem load_problem(const InputOptions& o, std::optional<Format> fallback = std::nullopt,
                                  const std::function<void(const Problem&)>& before_reading = {}) {
  const Header q = read_header(o.q), k = read_header(o.k), v = read_header(o.v);
  auto rank4 = [](const std::string& path, const Header& a, const char* want) {
    if (a.shape.size() != 4)
      throw NpyError(path + ": expected a rank-4 array " + want + ", got shape " + Array::shape_text(a.shape));
  };
  rank4(o.q, q, "(B, Hq, Nq, d)");
  rank4(o.k, k, "(B, Hkv, Nk, d)");
  rank4(o.v, v, "(B, Hkv, Nk, dv)");
  auto mismatch = [&](const std::string& what) {
    throw NpyError(o.q + ", " + o.k + ", " + o.v + ": " + what + " (Q " + Array::shape_text(q.shape) + ", K " +
                   Array::shape_text(k.shape) + ", V " + Array::shape_text(v.shape) + ")");
  };
  if (k.shape[0] != q.shape[0] || v.shape[0] != q.shape[0]) mismatch("batch sizes differ");
  if (k.shape[1] != v.shape[1]) mismatch("K and V have different head counts");
  if (k.shape[2] != v.shape[2]) mismatch("K and V have different key counts");
  if (k.shape[3] != q.shape[3]) mismatch("Q and K have different head dims");
  if (k.shape[1] == 0 || q.shape[1] % k.shape[1] != 0) mismatch("Hq must be a multiple of Hkv");

  // Batch, heads and head dims are ints in a Problem: a larger one is refused, never truncated.
  auto as_int = [](const std::string& path, const Header& a, int axis, const char* what) {
    if (a.shape[size_t(axis)] > std::numeric_limits<int>::max())
      throw NpyError(path + ": " + what + " = " + std::to_string(a.shape[size_t(axis)]) + " (axis " +
                     std::to_string(axis) + " of shape " + Array::shape_text(a.shape) + ") is larger than 2^31 - 1");
    return int(a.shape[size_t(axis)]);
  };
  LoadedProblem lp;
  Problem& p = lp.problem;
  p.batch = as_int(o.q, q, 0, "the batch size");
  p.heads_q = as_int(o.q, q, 1, "the number of query heads");
  p.heads_kv = as_int(o.k, k, 1, "the number of key/value heads");
  p.n_q = q.shape[2];
  p.n_k = k.shape[2];
  p.d = as_int(o.q, q, 3, "the head dim d");
  p.dv = as_int(o.v, v, 3, "the value head dim dv");
  p.scale = o.scale;
  const auto w = parse_window(o.mask);
  if (!w) throw std::invalid_argument("--mask " + o.mask + ": expected none, causal, causal-top-left, window:L,R or "
                                      "window-top-left:L,R");
  p.window = *w;
  if (!o.key_lengths.empty()) {
    const Header lh = read_header(o.key_lengths);
    if (lh.shape.size() != 1 || lh.shape[0] != q.shape[0])
      throw NpyError(o.key_lengths + ": expected shape (" + std::to_string(q.shape[0]) + ",) (one length per batch), got " +
                     Array::shape_text(lh.shape));
    const Array l = read(o.key_lengths);
    if (l.kind != 'i' && l.kind != 'u') throw NpyError(o.key_lengths + ": key lengths must be integers, got " + l.dtype());
    for (size_t b = 0; b < l.size(); ++b) p.key_lengths.push_back(l.kind == 'i' ? l.as_int(b) : int64_t(l.as_uint(b)));
  }
  p.validate();

  if (!o.format.empty()) {
    const auto f = parse_format(o.format);
    if (!f || *f == Format::tf32) throw std::invalid_argument("--format " + o.format + ": expected fp16, bf16, e4m3, e5m2, fp32 or fp64");
    lp.format = *f;
  } else if (fallback) {
    lp.format = *fallback == Format::tf32 ? Format::fp32 : *fallback;
  } else {
    lp.format = q.kind == 'f' && q.itemsize == 2 ? Format::fp16 : q.kind == 'f' && q.itemsize == 4 ? Format::fp32 : Format::fp64;
    if (q.kind == 'u') throw NpyError(o.q + ": u" + std::to_string(q.itemsize) + " bit patterns need --format");
  }
  if (before_reading) before_reading(p);
  lp.inputs.q = tensor_values(o.q, read(o.q), lp.format, o.q_descale);
  lp.inputs.k = tensor_values(o.k, read(o.k), lp.format, o.k_descale);
  lp.inputs.v = tensor_values(o.v, read(o.v), lp.format, o.v_descale);
  validate_inputs(p, lp.inputs);
  return lp;
}

// The multi-index of a flat O (or LSE) index, as "[b,h,i,c]".
inline std::string o_position(const Problem& p, size_t index, bool is_lse) {
  const size_t c = is_lse ? 0 : index % size_t(p.dv);
  const size_t row = is_lse ? index : index / size_t(p.dv);
  const size_t i = row % size_t(p.n_q), bh = row / size_t(p.n_q);
  const size_t h = bh % size_t(p.heads_q), b = bh / size_t(p.heads_q);
  std::string s = "[" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i);
  if (!is_lse) s += "," + std::to_string(c);
  return s + "]";
}

}  // namespace fc::npy
