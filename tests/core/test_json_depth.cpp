// parse_json's depth bound (core/json_io.hpp): kMaxJsonDepth levels are read, one more is refused
// with the file named, and brackets inside strings (escaped quotes included) do not count.
#include <gtest/gtest.h>

#include <string>

#include "validate/core/json_io.hpp"

namespace {

using validate::kMaxJsonDepth;
using validate::parse_json;

std::string nested(int n, const std::string& inner = "1") {
  return std::string(n, '[') + inner + std::string(n, ']');
}

TEST(JsonDepth, TheLimitIsReadOneMoreIsRefused) {
  auto ok = parse_json(nested(kMaxJsonDepth), "a.json");
  ASSERT_TRUE(ok) << ok.message();
  const validate::Json* p = &*ok;
  for (int i = 0; i < kMaxJsonDepth; ++i) p = &(*p)[0];
  EXPECT_EQ(*p, 1);
  auto bad = parse_json(nested(kMaxJsonDepth + 1), "b.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("b.json: JSON nested more than 64 levels deep (at byte 64)"), std::string::npos)
      << bad.message();
  // objects count like arrays
  std::string obj;
  for (int i = 0; i <= kMaxJsonDepth; ++i) obj += "{\"k\":";
  obj += "0" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_FALSE(parse_json(obj, "c.json"));
  EXPECT_FALSE(parse_json(nested(100000), "d.json"));
}

TEST(JsonDepth, BracketsInStringsDoNotCount) {
  const std::string brackets(1000, '[');
  auto j = parse_json("{\"s\": \"" + brackets + "\\\"" + brackets + "\", \"t\": " + nested(3) + "}", "e.json");
  ASSERT_TRUE(j) << j.message();
  EXPECT_EQ((*j)["s"].get<std::string>().size(), 2001u);
  // a backslash before the closing quote is escaped itself: the string ends there
  EXPECT_TRUE(parse_json("[\"\\\\\", " + nested(kMaxJsonDepth - 1) + "]", "f.json"));
  EXPECT_FALSE(parse_json("[\"\\\\\", " + nested(kMaxJsonDepth) + "]", "g.json"));
}

TEST(JsonDepth, InvalidJsonIsStillNamed) {
  auto j = parse_json("[1, 2", "h.json");
  ASSERT_FALSE(j);
  EXPECT_NE(j.message().find("h.json: invalid JSON"), std::string::npos) << j.message();
}

}  // namespace
