// Hostile .npy files: each must be refused with a message naming the file and the problem, before
// anything is allocated from what the header claims; Fortran order must be read, not refused.
// (tests/core/test_npy.cpp already covers: big-endian <f4 from numpy, <i4, a missing file, truncated
// data, trailing bytes, header length past the end, a 2^96-element shape and a negative dimension.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/temp_dir.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"

using namespace validate;

namespace {

// A version 1.0 (or 2.0/3.0) file with the given header dict text and data bytes.
std::string npy_bytes(const std::string& dict, const std::string& data = "", int version = 1) {
  std::string h = dict + "\n";
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(version));
  out.push_back('\0');
  const std::size_t n = h.size();
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  if (version >= 2) {
    out.push_back(static_cast<char>((n >> 16) & 0xff));
    out.push_back(static_cast<char>((n >> 24) & 0xff));
  }
  return out + h + data;
}

std::string f4_dict(const std::string& shape, const std::string& descr = "<f4", const char* fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

class HostileNpy : public ::testing::Test {
 protected:
  validate::testing::TempDir tmp{"hostile_npy"};

  // Writes `bytes` and expects npy::read and MappedArray::open to refuse it with a message that
  // names the file and contains `problem`.
  void expect_refused(const std::string& file, const std::string& bytes, const std::string& problem) {
    const std::string path = tmp / file;
    ASSERT_TRUE(fs::write_atomic(path, bytes));
    auto t = npy::read(path);
    ASSERT_FALSE(t) << file << " was accepted";
    EXPECT_NE(t.message().find(path), std::string::npos) << t.message();
    EXPECT_NE(t.message().find(problem), std::string::npos) << "expected '" << problem << "' in: " << t.message();
    auto m = npy::MappedArray::open(path);
    ASSERT_FALSE(m) << file << " was accepted by MappedArray::open";
    EXPECT_EQ(m.message(), t.message());
  }
};

}  // namespace

TEST_F(HostileNpy, ShorterThanTheFixedPrefix) {
  expect_refused("empty.npy", "", "not a .npy file");
  expect_refused("magic_only.npy", std::string("\x93NUMPY", 6), "not a .npy file");
  expect_refused("v2_short.npy", std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated .npy header");
  expect_refused("not_npy.npy", "PK\x03\x04 this is a zip file", "missing \\x93NUMPY magic");
}

TEST_F(HostileNpy, HeaderLengthPastTheEndInEveryVersion) {
  // Version 2/3 lengths are 32-bit: 0xffffffff must not wrap into a small offset.
  std::string v2 = npy_bytes(f4_dict("(1,)"), std::string(4, '\0'), 2);
  v2[8] = v2[9] = v2[10] = v2[11] = '\xff';
  expect_refused("v2_len.npy", v2, "runs past the end of the file");
  std::string v3 = npy_bytes(f4_dict("(1,)"), std::string(4, '\0'), 3);
  v3[11] = '\x01';
  expect_refused("v3_len.npy", v3, "runs past the end of the file");
}

TEST_F(HostileNpy, UnsupportedVersion) {
  expect_refused("v4.npy", npy_bytes(f4_dict("(1,)"), std::string(4, '\0'), 4), "unsupported .npy format version 4");
}

TEST_F(HostileNpy, HugeShapesAreRefusedWithoutAllocating) {
  // Claims 2^62 float32 elements (16 EiB) in a 100-byte file: refused by size arithmetic, not by
  // a failed allocation.
  expect_refused("claims_16eib.npy", npy_bytes(f4_dict("(4611686018427387904,)")), "more elements than can be addressed");
  // A product that fits uint64 but not int64 elements once multiplied by the element size.
  expect_refused("claims_2p61.npy", npy_bytes(f4_dict("(2305843009213693952, 2)")), "more elements than can be addressed");
  // Fits comfortably in the arithmetic, but the data is not there: truncated, nothing allocated.
  expect_refused("claims_4gb.npy", npy_bytes(f4_dict("(1073741824,)"), std::string(16, '\0')), "truncated data");
  // A dimension with more digits than 64 bits hold.
  expect_refused("digits.npy", npy_bytes(f4_dict("(123456789012345678901234567890,)")), "dimension is too large");
  // Regression (fuzz_npy): a zero-size array whose leading dimensions overflow int64 when multiplied
  // in order, as shape_numel() and the Fortran strides do. Was accepted, then overflowed (UBSan).
  expect_refused("zero_but_huge.npy", npy_bytes(f4_dict("(1099511627776, 8388608, 0)", "<f4", "True")),
                 "more elements than can be addressed");
  // 33 dimensions of size 1.
  std::string shape = "(";
  for (int i = 0; i < 33; ++i) shape += "1, ";
  expect_refused("rank33.npy", npy_bytes(f4_dict(shape + ")"), std::string(4, '\0')), "more than 32 dimensions");
}

TEST_F(HostileNpy, NegativeAndNonIntegerDimensions) {
  expect_refused("neg_second.npy", npy_bytes(f4_dict("(2, -3)")), "non-integer or negative dimension");
  expect_refused("float_dim.npy", npy_bytes(f4_dict("(2.5,)")), "non-integer dimension");
  expect_refused("exp_dim.npy", npy_bytes(f4_dict("(1e3,)")), "non-integer dimension");
  expect_refused("hex_dim.npy", npy_bytes(f4_dict("(0x10,)")), "non-integer dimension");
  expect_refused("name_dim.npy", npy_bytes(f4_dict("(n,)")), "non-integer or negative dimension");
  expect_refused("list_shape.npy", npy_bytes(f4_dict("[2, 3]")), "shape is not a tuple");
  expect_refused("open_shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3"), "not closed");
}

TEST_F(HostileNpy, UnknownBigEndianAndObjectDtypes) {
  expect_refused("object.npy", npy_bytes(f4_dict("(1,)", "|O"), std::string(8, '\0')), "unsupported dtype '|O'");
  expect_refused("big_f8.npy", npy_bytes(f4_dict("(1,)", ">f8"), std::string(8, '\0')), "big-endian dtype '>f8'");
  expect_refused("big_f2.npy", npy_bytes(f4_dict("(1,)", ">f2"), std::string(2, '\0')), "big-endian");
  expect_refused("complex.npy", npy_bytes(f4_dict("(1,)", "<c8"), std::string(8, '\0')), "unsupported dtype '<c8'");
  expect_refused("unicode.npy", npy_bytes(f4_dict("(1,)", "<U4"), std::string(16, '\0')), "unsupported dtype '<U4'");
  expect_refused("empty_descr.npy", npy_bytes(f4_dict("(1,)", ""), std::string(4, '\0')), "unsupported dtype ''");
  expect_refused("structured.npy",
                 npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')),
                 "not a simple string");
  expect_refused("unterminated.npy", npy_bytes("{'descr': '<f4"), "not terminated");
}

TEST_F(HostileNpy, MissingOrMalformedKeys) {
  expect_refused("no_descr.npy", npy_bytes("{'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')),
                 "no 'descr' key");
  expect_refused("no_shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", std::string(4, '\0')),
                 "no 'shape' key");
  expect_refused("no_order.npy", npy_bytes("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0')),
                 "no 'fortran_order' key");
  expect_refused("order_1.npy", npy_bytes(f4_dict("(1,)", "<f4", "1"), std::string(4, '\0')),
                 "neither True nor False");
  expect_refused("no_colon.npy", npy_bytes("{'descr'"), "no ':' after 'descr'");
}

TEST_F(HostileNpy, TruncatedAndTrailingForEveryDtype) {
  expect_refused("f2_trunc.npy", npy_bytes(f4_dict("(3,)", "<f2"), std::string(5, '\0')), "truncated data");
  expect_refused("f8_trail.npy", npy_bytes(f4_dict("(1,)", "<f8"), std::string(9, '\0')), "1 trailing bytes");
  expect_refused("scalar_trail.npy", npy_bytes(f4_dict("()"), std::string(8, '\0')), "4 trailing bytes");
  expect_refused("empty_trail.npy", npy_bytes(f4_dict("(0, 3)"), std::string(1, '\0')), "1 trailing bytes");
}

// Fortran order must be read, and read correctly: every dtype, ranks 1 to 4, axes of distinct sizes
// so a swapped pair of axes cannot pass, and value = canonical flat index (file position differs).
TEST_F(HostileNpy, FortranOrderIsReadCorrectlyForEveryDtypeAndRank) {
  const std::vector<Shape> shapes = {{5}, {3, 4}, {2, 3, 4}, {2, 3, 4, 5}, {1, 3, 1, 2}, {0, 3}};
  for (DType dt : {DType::float32, DType::float16, DType::float64}) {
    for (const auto& shape : shapes) {
      Tensor c_order(dt, shape);
      for (std::int64_t i = 0; i < c_order.numel(); ++i) c_order.set(i, static_cast<double>(i));
      // Lay the same logical array out column-major (first axis fastest).
      const std::size_t es = dtype_size(dt);
      std::string data(c_order.nbytes(), '\0');
      std::vector<std::int64_t> idx(shape.size(), 0);
      for (std::int64_t i = 0; i < c_order.numel(); ++i) {
        std::int64_t off = 0, stride = 1;
        for (std::size_t d = 0; d < shape.size(); ++d) {
          off += idx[d] * stride;
          stride *= shape[d];
        }
        std::memcpy(&data[static_cast<std::size_t>(off) * es], c_order.bytes() + static_cast<std::size_t>(i) * es, es);
        for (std::size_t d = shape.size(); d-- > 0;) {
          if (++idx[d] < shape[d]) break;
          idx[d] = 0;
        }
      }
      const std::string name = std::string(dtype_name(dt)) + shape_to_string(shape) + ".npy";
      const std::string path = tmp / name;
      ASSERT_TRUE(fs::write_atomic(path, npy::make_header(dt, shape, /*fortran_order=*/true) + data));
      auto t = npy::read(path);
      ASSERT_TRUE(t) << t.message();
      EXPECT_EQ(t->dtype(), dt) << name;
      ASSERT_EQ(t->shape(), shape) << name;
      for (std::int64_t i = 0; i < t->numel(); ++i) ASSERT_EQ(t->get(i), static_cast<double>(i)) << name << " at " << i;
      auto m = npy::MappedArray::open(path);
      ASSERT_TRUE(m) << m.message();
      EXPECT_TRUE(m->header().fortran_order || shape.size() < 2) << name;
    }
  }
}

TEST_F(HostileNpy, NotARegularFile) {
  auto d = npy::read(tmp.path());
  ASSERT_FALSE(d);
  EXPECT_NE(d.message().find("not a regular file"), std::string::npos) << d.message();
  auto z = npy::read("/dev/zero");
  ASSERT_FALSE(z);
  EXPECT_NE(z.message().find("/dev/zero"), std::string::npos) << z.message();
}
