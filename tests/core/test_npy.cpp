#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "common/temp_dir.hpp"

using namespace validate;

namespace {
const std::string kData = std::string(VALIDATE_SOURCE_DIR) + "/tests/data/";

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}


// The values numpy wrote: flat index + 0.5, shape (2, 3, 4).
void expect_index_values(const Tensor& t) {
  ASSERT_EQ(t.shape(), (Shape{2, 3, 4}));
  for (std::int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.get(i), static_cast<double>(i) + 0.5) << i;
}
}  // namespace

TEST(Npy, ReadsNumpyFloat32Float16Float64) {
  for (const char* name : {"f4_c_2x3x4.npy", "f2_c_2x3x4.npy", "f8_c_2x3x4.npy"}) {
    auto t = npy::read(kData + name);
    ASSERT_TRUE(t) << t.message();
    expect_index_values(*t);
  }
  EXPECT_EQ(npy::read(kData + "f2_c_2x3x4.npy")->dtype(), DType::float16);
  EXPECT_EQ(npy::read(kData + "f8_c_2x3x4.npy")->dtype(), DType::float64);
}

TEST(Npy, FortranOrderIsReturnedInCOrder) {
  auto t = npy::read(kData + "f4_fortran_2x3x4.npy");
  ASSERT_TRUE(t) << t.message();
  expect_index_values(*t);
}

TEST(Npy, ScalarOneDimEmptyAndVersion2) {
  auto s = npy::read(kData + "f4_scalar.npy");
  ASSERT_TRUE(s) << s.message();
  EXPECT_TRUE(s->shape().empty());
  EXPECT_EQ(s->numel(), 1);
  EXPECT_EQ(s->get(0), 0.333251953125);
  auto v = npy::read(kData + "f4_1d_5.npy");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->shape(), (Shape{5}));
  EXPECT_EQ(v->get(0), -2.0);
  auto e = npy::read(kData + "f4_empty_0x3.npy");
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ(e->numel(), 0);
  auto v2 = npy::read(kData + "f4_v2_3x2.npy");
  ASSERT_TRUE(v2) << v2.message();
  EXPECT_EQ(v2->shape(), (Shape{3, 2}));
  EXPECT_EQ(v2->get(5), 1.25);
}

TEST(Npy, OurBytesEqualNumpysBytes) {
  // Same values, same dtype: our writer must produce numpy's file byte for byte.
  validate::testing::TempDir tmp("npy");
  const std::string dir = tmp.path();
  for (const char* name : {"f4_c_2x3x4.npy", "f2_c_2x3x4.npy", "f8_c_2x3x4.npy", "f4_scalar.npy", "f4_1d_5.npy",
                           "f4_empty_0x3.npy"}) {
    auto t = npy::read(kData + name);
    ASSERT_TRUE(t);
    std::string out = dir + "/" + name;
    ASSERT_TRUE(npy::write(out, *t));
    EXPECT_EQ(slurp(out), slurp(kData + name)) << name;
  }
}

TEST(Npy, FortranHeaderMatchesNumpy) {
  // numpy's header for a Fortran-ordered (2,3,4) <f4 array, read back from its file.
  std::string numpy_file = slurp(kData + "f4_fortran_2x3x4.npy");
  std::string ours = npy::make_header(DType::float32, {2, 3, 4}, true);
  EXPECT_EQ(numpy_file.substr(0, ours.size()), ours);
}

TEST(Npy, RejectsBadFilesNamingThem) {
  auto be = npy::read(kData + "f4_bigendian_2.npy");
  ASSERT_FALSE(be);
  EXPECT_NE(be.message().find("f4_bigendian_2.npy"), std::string::npos);
  EXPECT_NE(be.message().find("big-endian"), std::string::npos);
  auto i4 = npy::read(kData + "i4_2.npy");
  ASSERT_FALSE(i4);
  EXPECT_NE(i4.message().find("'<i4'"), std::string::npos);
  auto missing = npy::read(kData + "no_such_file.npy");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("no_such_file.npy"), std::string::npos);

  validate::testing::TempDir tmp("npy");
  const std::string dir = tmp.path();
  std::string good = slurp(kData + "f4_c_2x3x4.npy");
  std::string trunc = dir + "/trunc.npy";
  ASSERT_TRUE(fs::write_atomic(trunc, good.substr(0, good.size() - 4)));
  auto t = npy::read(trunc);
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find("truncated"), std::string::npos) << t.message();
  std::string trail = dir + "/trail.npy";
  ASSERT_TRUE(fs::write_atomic(trail, good + "xx"));
  auto tr = npy::read(trail);
  ASSERT_FALSE(tr);
  EXPECT_NE(tr.message().find("trailing"), std::string::npos) << tr.message();
  // Header length pointing past the end of the file.
  std::string bad_len = good.substr(0, 16);
  bad_len[8] = '\xff';
  bad_len[9] = '\x7f';
  std::string p = dir + "/badlen.npy";
  ASSERT_TRUE(fs::write_atomic(p, bad_len));
  auto bl = npy::read(p);
  ASSERT_FALSE(bl);
  EXPECT_NE(bl.message().find("past the end"), std::string::npos) << bl.message();
  // A shape whose element count overflows 64 bits.
  std::string huge = npy::make_header(DType::float32, {1, 1});
  auto pos = huge.find("(1, 1)");
  huge.replace(pos, 6, "(4294967296, 4294967296, 4294967296)");
  std::string hp = dir + "/huge.npy";
  ASSERT_TRUE(fs::write_atomic(hp, huge));
  auto hu = npy::read(hp);
  ASSERT_FALSE(hu);
  EXPECT_NE(hu.message().find("more elements"), std::string::npos) << hu.message();
  // Negative dimension.
  std::string neg = npy::make_header(DType::float32, {1, 1});
  neg.replace(neg.find("(1, 1)"), 6, "(-1, 1)");
  std::string np = dir + "/neg.npy";
  ASSERT_TRUE(fs::write_atomic(np, neg));
  EXPECT_FALSE(npy::read(np));
}

TEST(Npy, NumpyReadsOurFilesAndResavesIdentically) {
#ifdef VALIDATE_NUMPY_PYTHON
  validate::testing::TempDir tmp("npy");
  const std::string dir = tmp.path();
  Tensor t(DType::float32, {3, 5, 2});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(i) * 0.125 - 1.0);
  std::string ours = dir + "/ours.npy", back = dir + "/back.npy";
  ASSERT_TRUE(npy::write(ours, t));
  std::string cmd = std::string(VALIDATE_NUMPY_PYTHON) + " -c \"import numpy as np; a=np.load('" + ours +
                    "'); assert a.shape==(3,5,2) and a[2,4,1]==29*0.125-1.0; np.save('" + back + "', a)\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(slurp(ours), slurp(back));
#else
  GTEST_SKIP() << "python3 with numpy not found";
#endif
}
