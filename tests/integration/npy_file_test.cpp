// The strict NPY reader: what NumPy writes is read (either byte order, C or Fortran order, v1 and v2
// headers), and every malformed file is refused with a message naming the file and the problem.
#include <stdlib.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tools/npy/npy_file.h"

namespace fc::npy {
namespace {

// A folder of this process's own (two runs at once must not share file names), removed at exit.
const std::filesystem::path& private_dir() {
  static const struct Dir {
    std::filesystem::path path;
    Dir() {
      std::string templ = (std::filesystem::temp_directory_path() / "flashcheck_npy_test_XXXXXX").string();
      if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
      path = templ;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path;
}

std::string temp_path(const std::string& name) { return (private_dir() / name).string(); }

void write_f8(const std::string& path, std::vector<int64_t> shape, const std::vector<double>& values) {
  std::ofstream(path, std::ios::binary) << f8_bytes(std::move(shape), values);
}

// A file with a hand-written header (padded like NumPy's v1) and raw data bytes.
std::string raw_npy(const std::string& name, const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const size_t pre = major == 1 ? 10 : 12;
  header.append((64 - (pre + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes.push_back(char(major));
  bytes.push_back(0);
  const size_t len = header.size();
  bytes.push_back(char(len & 0xFF));
  bytes.push_back(char((len >> 8) & 0xFF));
  if (major != 1) bytes.append(2, '\0');
  bytes += header + data;
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string message_of(const std::string& path) {
  try {
    read(path);
  } catch (const NpyError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was accepted";
  return {};
}

TEST(Npy, RoundTripFloat64) {
  const std::string path = temp_path("roundtrip.npy");
  const std::vector<double> values = {1.5, -2.25, 0.0, 1e-310, 3.0, 7.0};
  write_f8(path, {1, 2, 3}, values);
  const Array a = read(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(a.dtype(), "f8");
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(a.as_double(i), values[i]);
}

TEST(Npy, BigEndianFloat32AndVersion2Header) {
  // 1.0f and -2.0f big-endian: 3f800000, c0000000.
  const std::string data("\x3f\x80\x00\x00\xc0\x00\x00\x00", 8);
  const Array a = read(raw_npy("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", data, 2));
  EXPECT_EQ(a.as_double(0), 1.0);
  EXPECT_EQ(a.as_double(1), -2.0);
}

TEST(Npy, FortranOrderIsTransposedIntoCOrder) {
  // The 2x3 matrix [[0,1,2],[3,4,5]] in Fortran order is stored 0,3,1,4,2,5.
  std::string data;
  for (unsigned char x : {0, 3, 1, 4, 2, 5}) data.push_back(char(x));
  const Array a = read(raw_npy("fortran.npy", "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", data));
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(a.as_uint(i), i);
}

TEST(Npy, Float16AndSignedIntegers) {
  const std::string h("\x00\x3c\x00\xc0\x01\x00", 6);  // 1.0, -2.0, the smallest subnormal
  const Array a = read(raw_npy("f2.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", h));
  EXPECT_EQ(a.as_double(0), 1.0);
  EXPECT_EQ(a.as_double(1), -2.0);
  EXPECT_EQ(a.as_double(2), std::ldexp(1.0, -24));
  const std::string i("\xff\xff\xff\xff\x07\x00\x00\x00", 8);
  const Array b = read(raw_npy("i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", i));
  EXPECT_EQ(b.as_int(0), -1);
  EXPECT_EQ(b.as_int(1), 7);
}

TEST(Npy, MalformedFilesAreRefusedWithTheProblemNamed) {
  const std::string eight(8, '\0');
  auto expect = [](const std::string& path, const std::string& what) {
    const std::string msg = message_of(path);
    EXPECT_NE(msg.find(path), std::string::npos) << "names the file: " << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  };
  expect(raw_npy("trunc.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", eight), "truncated");
  expect(raw_npy("trail.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }", eight), "trailing bytes");
  expect(raw_npy("c16.npy", "{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }", eight + eight),
         "unsupported dtype '<c16'");
  expect(raw_npy("obj.npy", "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", eight), "unknown dtype '|O'");
  expect(raw_npy("struct.npy", "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }", eight),
         "structured dtypes");
  expect(raw_npy("nokey.npy", "{'descr': '<f8', 'shape': (1,), }", eight), "lacks fortran_order");
  expect(raw_npy("extra.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", eight),
         "unexpected key 'x'");
  expect(raw_npy("shape.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (a,), }", eight), "bad shape entry");
  const std::string not_npy = temp_path("not.npy");
  std::ofstream(not_npy) << "hello, world";
  expect(not_npy, "not an NPY file");
  expect(temp_path("does_not_exist.npy"), "cannot open");
  // A header whose element count or byte size wraps 64 bits is refused as such, before any size
  // derived from it is used (it once read as a tiny array, then as "d must be >= 1").
  expect(raw_npy("wrap.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 1, 2), }", eight),
         "more elements than 2^64");
  expect(raw_npy("wrapbytes.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 536870912, 4), }", eight),
         "needs more than 2^64 bytes");
  const Header h = read_header(raw_npy("big.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (1000, 1000, 1000), }", eight));
  EXPECT_EQ(h.elements, size_t(1000000000));
  EXPECT_EQ(h.data_bytes, size_t(2000000000));
}

}  // namespace
}  // namespace fc::npy
