// Pattern (core/pattern.hpp): RE2 searched like std::regex_search, linear whatever the pattern, and
// what RE2 cannot take refused with the option and RE2's reason.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "validate/core/pattern.hpp"

namespace {

using validate::Pattern;

TEST(Pattern, SearchesAnywhereLikeRegexSearch) {
  auto p = Pattern::compile("k0072_ic0(08|16)", "--only");
  ASSERT_TRUE(p) << p.message();
  EXPECT_TRUE(p->search("float32/k0072_ic008"));
  EXPECT_TRUE(p->search("bfloat16/k0072_ic016/conv2d/output"));
  EXPECT_FALSE(p->search("float32/k0072_ic032"));
  auto anchored = Pattern::compile("^float32/k[^/]+/conv2d/grad_weight$", "--only");
  ASSERT_TRUE(anchored);
  EXPECT_TRUE(anchored->search("float32/k0144_ic016/conv2d/grad_weight"));
  EXPECT_FALSE(anchored->search("bfloat16/k0144_ic016/conv2d/grad_weight"));
}

TEST(Pattern, NestedStarsTakeLinearTime) {
  // std::regex needs about 2^n steps for '^(a|a)*$' on n a's and a b; n = 10000 here.
  auto p = Pattern::compile("^(a|a)*$", "--only");
  ASSERT_TRUE(p);
  const std::string text = std::string(10000, 'a') + "b";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p->search(text));
  EXPECT_TRUE(p->search(std::string(10000, 'a')));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);  // ~1 ms measured; 2 s leaves room for a loaded sanitizer build
}

TEST(Pattern, WhatRe2CannotTakeIsRefusedNamed) {
  for (const std::string bad : {"(a)\\1", "^(?=float32)", "(", "[z-a]", "caf\xe9"}) {
    auto p = Pattern::compile(bad, "--only");
    ASSERT_FALSE(p) << bad;
    EXPECT_NE(p.message().find("--only '"), std::string::npos) << p.message();
    EXPECT_NE(p.message().find("' is not a regular expression RE2 accepts: "), std::string::npos) << p.message();
  }
  EXPECT_NE(Pattern::compile("caf\xe9", "--only").message().find("'caf\\xe9'"), std::string::npos);
}

}  // namespace
