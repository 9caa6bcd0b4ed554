// A small strict reader and encoder of NumPy's .npy format (version 1.0, 2.0 and 3.0 headers), for the
// `reference` and `compare` commands and the Python route (python/flashcheck). Header-only, so each
// command file can include it without a library of its own.
//
// Strict: the header dict must name descr, fortran_order and shape and nothing else; dtypes are the
// plain numeric ones ('f2', 'f4', 'f8', 'u1', 'u2', 'u4', 'u8', 'i1', 'i2', 'i4', 'i8', 'b1') in any byte
// order ('<', '>', '|', '='); fortran_order True is read by transposing into C order; a truncated file,
// trailing bytes, an unknown dtype, a structured dtype or a malformed header is an NpyError whose
// message starts with the file name and says what is wrong. Debian ships no maintained C++ NPY library,
// hence this one.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fc::npy {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Array {
  char kind = 'f';   // 'f' float, 'u' unsigned, 'i' signed, 'b' bool
  int itemsize = 8;  // bytes
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;  // C order, native (little-endian) byte order

  size_t size() const {
    size_t n = 1;
    for (int64_t s : shape) n *= size_t(s);
    return n;
  }
  std::string dtype() const { return std::string(1, kind) + std::to_string(itemsize); }
  std::string shape_string() const { return shape_text(shape); }
  // A shape as NumPy prints it: "(2, 3)", "(5,)".
  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
  }
  // Element i as a double (floats exactly, integers exactly up to 2^53).
  double as_double(size_t i) const {
    const unsigned char* p = data.data() + i * size_t(itemsize);
    switch (kind) {
      case 'f':
        if (itemsize == 8) { double x; std::memcpy(&x, p, 8); return x; }
        if (itemsize == 4) { float x; std::memcpy(&x, p, 4); return double(x); }
        return half_to_double(uint16_t(p[0] | (p[1] << 8)));
      case 'u':
      case 'b': return double(as_uint(i));
      case 'i': return double(as_int(i));
    }
    return NAN;
  }
  uint64_t as_uint(size_t i) const {
    uint64_t x = 0;
    std::memcpy(&x, data.data() + i * size_t(itemsize), size_t(itemsize));  // little-endian host
    return x;
  }
  int64_t as_int(size_t i) const {
    const uint64_t u = as_uint(i);
    const int bits = itemsize * 8;
    if (bits == 64) return int64_t(u);
    const uint64_t sign = uint64_t(1) << (bits - 1);
    return (u & sign) ? int64_t(u) - int64_t(uint64_t(1) << bits) : int64_t(u);
  }

  static double half_to_double(uint16_t h) {
    const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const double v = e == 0 ? std::ldexp(double(m), -24)
                     : e == 31 ? (m ? NAN : INFINITY)
                               : std::ldexp(double(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
  }
};

namespace detail {

static_assert(std::endian::native == std::endian::little, "the NPY reader assumes a little-endian host");

[[noreturn]] inline void fail(const std::string& path, const std::string& what) {
  throw NpyError(path + ": " + what);
}

// A tiny parser for the header's Python dict literal.
struct HeaderParser {
  const std::string& text;
  const std::string& path;
  size_t pos = 0;

  void skip() { while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n')) ++pos; }
  bool eat(char c) {
    skip();
    if (pos < text.size() && text[pos] == c) { ++pos; return true; }
    return false;
  }
  void expect(char c, const char* where) {
    if (!eat(c)) fail(path, std::string("malformed NPY header: expected '") + c + "' " + where + " in " + text);
  }
  std::string string_literal() {
    skip();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      fail(path, "malformed NPY header: expected a quoted string at offset " + std::to_string(pos) + " in " + text);
    const char q = text[pos++];
    const size_t end = text.find(q, pos);
    if (end == std::string::npos) fail(path, "malformed NPY header: unterminated string in " + text);
    std::string s = text.substr(pos, end - pos);
    pos = end + 1;
    return s;
  }
  bool boolean() {
    skip();
    if (text.compare(pos, 4, "True") == 0) { pos += 4; return true; }
    if (text.compare(pos, 5, "False") == 0) { pos += 5; return false; }
    fail(path, "malformed NPY header: fortran_order must be True or False in " + text);
  }
  std::vector<int64_t> shape() {
    expect('(', "to open the shape");
    std::vector<int64_t> dims;
    while (!eat(')')) {
      skip();
      const size_t start = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
      if (pos == start || pos - start > 15) fail(path, "malformed NPY header: bad shape entry in " + text);
      dims.push_back(std::stoll(text.substr(start, pos - start)));
      if (!eat(',')) {
        expect(')', "to close the shape");
        break;
      }
    }
    return dims;
  }
};

}  // namespace detail

// What an NPY header says: enough to size a problem (and refuse it) before reading any data.
struct Header {
  char kind = 'f';
  int itemsize = 8;
  char order = '<';
  bool fortran = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // bytes before the data
  size_t elements = 0;     // the product of the shape, checked against overflow
  size_t data_bytes = 0;   // elements * itemsize, checked against overflow
};

// Reads and checks the header of an .npy file; throws NpyError naming the file and the problem.
inline Header read_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) detail::fail(path, "cannot open for reading");
  unsigned char pre[12] = {};
  f.read(reinterpret_cast<char*>(pre), 12);
  const size_t got = size_t(f.gcount());
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (got < 10 || std::memcmp(pre, magic, 6) != 0) detail::fail(path, "not an NPY file (no \\x93NUMPY magic)");
  const int major = pre[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = size_t(pre[8]) | (size_t(pre[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (got < 12) detail::fail(path, "truncated NPY header");
    header_len = size_t(pre[8]) | (size_t(pre[9]) << 8) | (size_t(pre[10]) << 16) | (size_t(pre[11]) << 24);
    header_start = 12;
  } else {
    detail::fail(path, "unsupported NPY format version " + std::to_string(major) + "." + std::to_string(pre[7]));
  }
  if (header_len > (size_t(1) << 20)) detail::fail(path, "NPY header of " + std::to_string(header_len) + " bytes (at most 1 MiB)");
  std::string header(header_len, '\0');
  f.clear();
  f.seekg(std::streamoff(header_start));
  f.read(header.data(), std::streamsize(header_len));
  if (size_t(f.gcount()) != header_len) detail::fail(path, "truncated NPY header");

  detail::HeaderParser hp{header, path};
  std::string descr;
  bool have_descr = false, have_fortran = false, have_shape = false;
  Header h;
  h.data_offset = header_start + header_len;
  hp.expect('{', "at the start of the header");
  while (!hp.eat('}')) {
    const std::string key = hp.string_literal();
    hp.expect(':', "after a key");
    if (key == "descr") {
      hp.skip();
      if (hp.pos < header.size() && header[hp.pos] == '[')
        detail::fail(path, "structured dtypes are not supported (descr is a list)");
      descr = hp.string_literal();
      have_descr = true;
    } else if (key == "fortran_order") {
      h.fortran = hp.boolean();
      have_fortran = true;
    } else if (key == "shape") {
      h.shape = hp.shape();
      have_shape = true;
    } else {
      detail::fail(path, "unexpected key '" + key + "' in the NPY header");
    }
    if (!hp.eat(',')) {
      hp.expect('}', "to close the header");
      break;
    }
  }
  if (!have_descr || !have_fortran || !have_shape)
    detail::fail(path, "NPY header lacks " + std::string(!have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape"));

  // dtype: byte order, kind, size.
  if (descr.size() < 3) detail::fail(path, "unknown dtype '" + descr + "'");
  h.order = descr[0];
  h.kind = descr[1];
  const std::string size_text = descr.substr(2);
  if (size_text.find_first_not_of("0123456789") != std::string::npos || size_text.size() > 2)
    detail::fail(path, "unknown dtype '" + descr + "'");
  h.itemsize = std::stoi(size_text);
  const bool known = (h.kind == 'f' && (h.itemsize == 2 || h.itemsize == 4 || h.itemsize == 8)) ||
                     ((h.kind == 'u' || h.kind == 'i') &&
                      (h.itemsize == 1 || h.itemsize == 2 || h.itemsize == 4 || h.itemsize == 8)) ||
                     (h.kind == 'b' && h.itemsize == 1);
  if (!known || (h.order != '<' && h.order != '>' && h.order != '|' && h.order != '='))
    detail::fail(path, "unsupported dtype '" + descr + "' (expected float16/32/64, (u)int8..64 or bool)");
  if (h.order == '|' && h.itemsize != 1) detail::fail(path, "dtype '" + descr + "' has no byte order but is multi-byte");

  // The element count and byte size, without wrapping: a header may claim any shape.
  const std::string shape_only = Array::shape_text(h.shape);
  h.elements = 1;
  for (int64_t s : h.shape)
    if (__builtin_mul_overflow(h.elements, size_t(s), &h.elements))
      detail::fail(path, "shape " + shape_only + " has more elements than 2^64: not a file that exists");
  if (__builtin_mul_overflow(h.elements, size_t(h.itemsize), &h.data_bytes))
    detail::fail(path, "shape " + shape_only + " of " + std::string(1, h.kind) + std::to_string(h.itemsize) +
                           " needs more than 2^64 bytes: not a file that exists");
  return h;
}

// Reads a whole .npy file; throws NpyError naming the file and the problem.
inline Array read(const std::string& path) {
  const Header h = read_header(path);
  Array a;
  a.kind = h.kind;
  a.itemsize = h.itemsize;
  a.shape = h.shape;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) detail::fail(path, "cannot open for reading");
  const size_t file_size = size_t(f.tellg());
  const size_t have = file_size >= h.data_offset ? file_size - h.data_offset : 0;
  const size_t n = h.elements;
  const size_t need = h.data_bytes;
  if (have < need)
    detail::fail(path, "truncated: shape " + a.shape_string() + " of " + a.dtype() + " needs " + std::to_string(need) +
                           " data bytes, the file has " + std::to_string(have));
  if (have > need)
    detail::fail(path, std::to_string(have - need) + " trailing bytes after the data of shape " + a.shape_string());
  a.data.resize(need);
  f.seekg(std::streamoff(h.data_offset));
  f.read(reinterpret_cast<char*>(a.data.data()), std::streamsize(need));
  if (size_t(f.gcount()) != need) detail::fail(path, "read error in the data");
  if (h.order == '>' && a.itemsize > 1)
    for (size_t i = 0; i < n; ++i) {
      unsigned char* p = a.data.data() + i * size_t(a.itemsize);
      for (int lo = 0, hi = a.itemsize - 1; lo < hi; ++lo, --hi) std::swap(p[lo], p[hi]);
    }
  if (h.fortran && a.shape.size() > 1) {
    // Fortran order: the first index varies fastest. Copy element by element into C order.
    const size_t r = a.shape.size(), w = size_t(a.itemsize);
    std::vector<unsigned char> c(a.data.size());
    std::vector<int64_t> idx(r, 0);
    for (size_t f_off = 0; f_off < n; ++f_off) {
      size_t c_off = 0;
      for (size_t k = 0; k < r; ++k) c_off = c_off * size_t(a.shape[k]) + size_t(idx[k]);
      std::memcpy(c.data() + c_off * w, a.data.data() + f_off * w, w);
      for (size_t k = 0; k < r; ++k) {  // advance the Fortran-order multi-index
        if (++idx[k] < a.shape[k]) break;
        idx[k] = 0;
      }
    }
    a.data.swap(c);
  }
  return a;
}

// The bytes of an .npy file holding a C-order little-endian array (version 1.0 header, padded to 64
// bytes as NumPy does). Commands write them with tools/report/atomic_file.h, whole or not at all.
inline std::string to_bytes(const Array& a) {
  if (a.data.size() != a.size() * size_t(a.itemsize)) throw NpyError("data size does not match shape " + a.shape_string());
  std::string descr = std::string(a.itemsize == 1 ? "|" : "<") + a.kind + std::to_string(a.itemsize);
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + a.shape_string() + ", }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = {char(0x93), 'N', 'U', 'M', 'P', 'Y', char(1), char(0), char(header.size() & 0xFF),
                     char(header.size() >> 8)};
  out += header;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return out;
}

// A float64 array of the given shape, as .npy bytes.
inline std::string f8_bytes(std::vector<int64_t> shape, const std::vector<double>& values) {
  Array a;
  a.kind = 'f';
  a.itemsize = 8;
  a.shape = std::move(shape);
  a.data.resize(values.size() * 8);
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return to_bytes(a);
}

}  // namespace fc::npy
