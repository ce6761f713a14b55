#include <gtest/gtest.h>

#include "validate/layout/spec.hpp"

namespace validate::layout {
namespace {

struct Good {
  const char* text;
  const char* axes;
  Spec expected;
  const char* printed;
};

class SpecParse : public ::testing::TestWithParam<Good> {};

TEST_P(SpecParse, ParsesAndPrintsCanonically) {
  const Good& g = GetParam();
  auto s = parse_spec(g.text, g.axes);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->axes, g.expected.axes);
  EXPECT_EQ(s->fortran, g.expected.fortran);
  EXPECT_EQ(s->flip, g.expected.flip);
  EXPECT_EQ(to_string(*s), g.printed);
  // The printed form parses back to the same spec.
  auto again = parse_spec(to_string(*s), g.axes);
  ASSERT_TRUE(again.is_ok()) << again.message();
  EXPECT_EQ(*again, *s);
}

INSTANTIATE_TEST_SUITE_P(
    Specs, SpecParse,
    ::testing::Values(Good{"NCHW", "NCHW", {"NCHW", false, ""}, "NCHW"},
                      Good{"NHWC", "NCHW", {"NHWC", false, ""}, "NHWC"},
                      Good{"NHWC:C", "NCHW", {"NHWC", false, ""}, "NHWC"},
                      Good{"CHWN:F", "NCHW", {"CHWN", true, ""}, "CHWN:F"},
                      Good{"WHIO:F+flip=HW", "OIHW", {"WHIO", true, "HW"}, "WHIO:F+flip=HW"},
                      Good{"WHIO:F+flip=WH", "OIHW", {"WHIO", true, "HW"}, "WHIO:F+flip=HW"},
                      Good{"OIHW+flip=W", "OIHW", {"OIHW", false, "W"}, "OIHW+flip=W"},
                      Good{"HWIO:C+flip=IH", "OIHW", {"HWIO", false, "IH"}, "HWIO+flip=IH"},
                      Good{"  OHWI  ", "OIHW", {"OHWI", false, ""}, "OHWI"},
                      Good{"O", "O", {"O", false, ""}, "O"},
                      Good{"O:F", "O", {"O", true, ""}, "O:F"},
                      Good{"NK", "KN", {"NK", false, ""}, "NK"},
                      Good{"MK:F", "MK", {"MK", true, ""}, "MK:F"},
                      Good{"NM+flip=M", "MN", {"NM", false, "M"}, "NM+flip=M"},
                      Good{"scalar", "", {"", false, ""}, "scalar"},
                      Good{"", "", {"", false, ""}, "scalar"}));

struct Bad {
  const char* text;
  const char* axes;
  const char* message_part;  // what the message must say
};

class SpecReject : public ::testing::TestWithParam<Bad> {};

TEST_P(SpecReject, SaysWhatWasExpected) {
  const Bad& b = GetParam();
  auto s = parse_spec(b.text, b.axes);
  ASSERT_FALSE(s.is_ok()) << "accepted '" << b.text << "' as " << to_string(*s);
  EXPECT_NE(s.message().find(b.message_part), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::string("'") + b.text), std::string::npos) << "names the spec: " << s.message();
}

INSTANTIATE_TEST_SUITE_P(
    Specs, SpecReject,
    ::testing::Values(Bad{"NCHX", "NCHW", "unknown axis letter 'X'"},
                      Bad{"nchw", "NCHW", "upper case only"},
                      Bad{"NHHW", "NCHW", "axis 'H' appears twice"},
                      Bad{"NCH", "NCHW", "every axis must appear exactly once"},
                      Bad{"NCHW", "OIHW", "axis 'N' in the axes is not one of this tensor's axes (OIHW)"},
                      Bad{"OIHW", "NCHW", "not one of this tensor's axes (NCHW)"},
                      Bad{"MK", "KN", "axis 'M'"},
                      Bad{"KM", "KN", "not one of this tensor's axes (KN)"},
                      Bad{"NCHW:X", "NCHW", "bad suffix ':X': expected :C"},
                      Bad{"NCHW:", "NCHW", "bad suffix"},
                      Bad{"NCHW:FF", "NCHW", "bad suffix"},
                      Bad{":F", "NCHW", "no axes"},
                      Bad{"NCHW+flop=HW", "NCHW", "expected +flip=<axes>"},
                      Bad{"NCHW+flip=", "NCHW", "names no axes"},
                      Bad{"NCHW+flip=Q", "NCHW", "unknown axis letter 'Q' in the flip"},
                      Bad{"NCHW+flip=HH", "NCHW", "axis 'H' appears twice in the flip"},
                      Bad{"OIHW+flip=N", "OIHW", "axis 'N' in the flip is not one of this tensor's axes"},
                      Bad{"NCHW+flip=HW:F", "NCHW", "the :C/:F suffix goes before +flip="},
                      Bad{"NCHW+flip=H+flip=W", "NCHW", "only one +flip="},
                      Bad{"scalar", "NCHW", "expected a permutation of NCHW"},
                      Bad{"O", "", "expected 'scalar'"},
                      Bad{"OO", "O", "appears twice"}));

TEST(SpecGuess, CanonicalAxesFromLetters) {
  EXPECT_EQ(*guess_canonical_axes("CHWN:F"), "NCHW");
  EXPECT_EQ(*guess_canonical_axes("NHWC"), "NCHW");
  EXPECT_EQ(*guess_canonical_axes("WHIO:F+flip=HW"), "OIHW");
  EXPECT_EQ(*guess_canonical_axes("OHWI"), "OIHW");
  EXPECT_EQ(*guess_canonical_axes("O"), "O");
  EXPECT_EQ(*guess_canonical_axes("NK"), "KN");
  EXPECT_EQ(*guess_canonical_axes("KM:F"), "MK");
  EXPECT_EQ(*guess_canonical_axes("NM"), "MN");
  EXPECT_EQ(*guess_canonical_axes("scalar"), "");
  EXPECT_FALSE(guess_canonical_axes("N").is_ok());
  EXPECT_FALSE(guess_canonical_axes("XY").is_ok());
}

}  // namespace
}  // namespace validate::layout
