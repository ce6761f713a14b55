// utf8::escape_invalid / valid (core/utf8.hpp) against Python's own UTF-8 decoder: for any bytes,
// bytes.decode("utf-8", "backslashreplace") must equal escape_invalid byte for byte (both keep
// well-formed sequences and write every other byte as \xNN), and json_text must never throw.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "validate/core/json_io.hpp"
#include "validate/core/utf8.hpp"

namespace {

using validate::utf8::escape_invalid;
using validate::utf8::valid;

std::string hex(const std::string& s) {
  static const char d[] = "0123456789abcdef";
  std::string o;
  for (unsigned char c : s) o += {d[c >> 4], d[c & 15]};
  return o;
}

TEST(Utf8, HandPickedSequences) {
  EXPECT_EQ(escape_invalid("caf\xe9"), "caf\\xe9");
  EXPECT_EQ(escape_invalid("caf\xc3\xa9"), "caf\xc3\xa9");               // é, well-formed
  EXPECT_EQ(escape_invalid("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");     // U+1F600
  EXPECT_EQ(escape_invalid("\xef\xbf\xbe"), "\xef\xbf\xbe");             // U+FFFE is UTF-8 (not XML)
  EXPECT_EQ(escape_invalid("\xc0\x80"), "\\xc0\\x80");                   // overlong NUL
  EXPECT_EQ(escape_invalid("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");          // overlong '/'
  EXPECT_EQ(escape_invalid("\xed\xa0\x80"), "\\xed\\xa0\\x80");          // surrogate D800
  EXPECT_EQ(escape_invalid("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // U+110000
  EXPECT_EQ(escape_invalid("\xe2\x82"), "\\xe2\\x82");                   // cut short
  EXPECT_EQ(escape_invalid("a\x80z"), "a\\x80z");                        // stray continuation
  EXPECT_TRUE(valid("plain ascii\n\t"));
  EXPECT_FALSE(valid("\xff"));
}

TEST(Utf8, AgreesWithPythonsDecoder) {
  // 3000 strings of 0-12 bytes, mostly high bytes so that every kind of malformed sequence occurs.
  std::mt19937 rng(20261125);
  std::vector<std::string> in;
  const unsigned char pool[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf,
                                0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff, 0xbe, 0xbd};
  for (int k = 0; k < 3000; ++k) {
    std::string s(rng() % 13, '\0');
    for (auto& c : s) c = static_cast<char>(rng() % 4 ? pool[rng() % sizeof pool] : rng() % 256);
    in.push_back(s);
  }
  const std::string path = ::testing::TempDir() + "utf8_cases.txt";
  {
    std::ofstream f(path);
    for (const auto& s : in) f << hex(s) << "\n";
  }
  const std::string cmd = "/usr/bin/python3 -c 'import sys\nfor l in open(sys.argv[1]):\n"
                          "    print(bytes.fromhex(l.strip()).decode(\"utf-8\", \"backslashreplace\")"
                          ".encode(\"utf-8\").hex())' " + path;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << "python3 failed";
  std::size_t pos = 0, checked = 0;
  for (const auto& s : in) {
    const std::size_t nl = out.find('\n', pos);
    ASSERT_NE(nl, std::string::npos);
    EXPECT_EQ(hex(escape_invalid(s)), out.substr(pos, nl - pos)) << "input " << hex(s);
    EXPECT_EQ(valid(s), escape_invalid(s) == s) << "input " << hex(s);
    pos = nl + 1;
    ++checked;
  }
  EXPECT_EQ(checked, in.size());
}

TEST(Utf8, JsonTextNeverThrows) {
  validate::Json j = {{"stderr", "caf\xe9"}, {"k\xff", {"ok", "\xed\xa0\x80"}}, {"n", 1}};
  std::string t;
  ASSERT_NO_THROW(t = validate::json_text(j));
  EXPECT_EQ(t, R"({"k\\xff":["ok","\\xed\\xa0\\x80"],"n":1,"stderr":"caf\\xe9"})");
  EXPECT_TRUE(valid(t));
  // valid text is dumped exactly as nlohmann does
  validate::Json plain = {{"a", "caf\xc3\xa9"}, {"b", {1, 2}}};
  EXPECT_EQ(validate::json_text(plain, 2), plain.dump(2));
}

}  // namespace
