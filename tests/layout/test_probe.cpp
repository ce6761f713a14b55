#include <gtest/gtest.h>

#include "validate/layout/probe.hpp"

namespace validate::layout {
namespace {

std::vector<float> probe_values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

TEST(Probe, CanonicalIsFlatIndexAndLayoutIsConverted) {
  auto p = make_probe("CHWN:F", {2, 3, 4, 5}, "NCHW");
  ASSERT_TRUE(p.is_ok()) << p.message();
  EXPECT_EQ(p->canonical.dtype(), DType::float32);
  EXPECT_EQ(p->canonical.shape(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(p->in_layout.shape(), (Shape{3, 4, 5, 2}));
  for (std::int64_t i = 0; i < 120; ++i) ASSERT_EQ(p->canonical.data<float>()[i], static_cast<float>(i));
  // CHWN:F walks c fastest: memory 0..2 are channels 0..2 of (n=0,h=0,w=0), i.e. 0, 20, 40; then h=1: 5.
  const auto v = probe_values(p->in_layout);
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), (std::vector<float>{0, 20, 40, 5}));
  EXPECT_EQ(v[12], 1.0f);   // (n=0 c=0 h=0 w=1) comes after the C*H = 12 (c,h) pairs of w=0
  EXPECT_EQ(v[60], 60.0f);  // image n=1 starts after C*H*W = 60
}

TEST(Probe, DescribeListsMemoryWithCanonicalCoordinates) {
  auto p = make_probe("CHWN:F", {2, 3, 4, 5});  // axes guessed: NCHW
  ASSERT_TRUE(p.is_ok()) << p.message();
  const std::string text = describe_probe(*p);
  EXPECT_NE(text.find("layout CHWN:F of a NCHW tensor [2, 3, 4, 5]"), std::string::npos) << text;
  EXPECT_NE(text.find("mem[1] = 20  (n=0 c=1 h=0 w=0)"), std::string::npos) << text;
  EXPECT_NE(text.find("mem[3] = 5  (n=0 c=0 h=1 w=0)"), std::string::npos) << text;
  EXPECT_NE(text.find("memory order slowest -> fastest: NWHC"), std::string::npos) << text;
  EXPECT_NE(text.find("(96 more)"), std::string::npos) << text;
}

TEST(Probe, FlippedKernel) {
  auto p = make_probe("WHIO:F+flip=HW", {2, 3, 4, 5});  // OIHW guessed
  ASSERT_TRUE(p.is_ok()) << p.message();
  EXPECT_EQ(p->canonical_axes, "OIHW");
  const std::string text = describe_probe(*p);
  // The first byte of a flipped kernel is canonical (h=3, w=4) of (o=0, i=0): index 19.
  EXPECT_NE(text.find("mem[0] = 19  (o=0 i=0 h=3 w=4)"), std::string::npos) << text;
  EXPECT_NE(text.find("axes HW stored reversed"), std::string::npos) << text;
}

TEST(Probe, Rejections) {
  auto bad_rank = make_probe("NK", {2, 3, 4, 5});
  ASSERT_FALSE(bad_rank.is_ok());
  EXPECT_NE(bad_rank.message().find("has 4 sizes but the canonical axes KN need 2"), std::string::npos)
      << bad_rank.message();
  EXPECT_FALSE(make_probe("NCHX", {2, 3, 4, 5}).is_ok());
  EXPECT_FALSE(make_probe("HW", {4, 5}).is_ok());  // cannot tell the tensor
  EXPECT_FALSE(make_probe("NCHW", {2, 0, 4, 5}).is_ok());
  auto huge = make_probe("NCHW", {64, 64, 64, 65});
  ASSERT_FALSE(huge.is_ok());
  EXPECT_NE(huge.message().find("2^24"), std::string::npos);
  auto scalar = make_probe("scalar", {});
  ASSERT_TRUE(scalar.is_ok()) << scalar.message();
  EXPECT_EQ(scalar->in_layout.numel(), 1);
}

}  // namespace
}  // namespace validate::layout
