// shell_quote / shell_arg (core/shell_quote.hpp): checked against /bin/sh itself — the quoted
// value, given to `printf %s`, must come back byte for byte and run nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "validate/core/shell_quote.hpp"

namespace {

std::string through_sh(const std::string& quoted) {
  std::string cmd = "printf %s " + quoted;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "<popen failed>";
  std::string out;
  char buf[256];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

const char* const kHostile[] = {"it's",
                                "$(touch /tmp/validate_shell_quote_ran)",
                                "a b\tc\nd",
                                "`id`",
                                "\"dq\" \\ back",
                                "*",
                                "~",
                                "'",
                                "''",
                                "-n",
                                "x;y|z&w",
                                "$HOME"};

}  // namespace

TEST(ShellQuote, EveryValueReachesTheProgramUnchanged) {
  for (const std::string s : kHostile) {
    EXPECT_EQ(through_sh(validate::shell_quote(s)), s) << validate::shell_quote(s);
    EXPECT_EQ(through_sh(validate::shell_arg(s)), s) << validate::shell_arg(s);
  }
  EXPECT_EQ(validate::shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(validate::shell_quote(""), "''");
}

TEST(ShellQuote, ShellArgLeavesPlainWordsReadable) {
  EXPECT_EQ(validate::shell_arg("ref/float32/k0072_ic008.npy"), "ref/float32/k0072_ic008.npy");
  EXPECT_EQ(validate::shell_arg("loss_rel=1e-6,max_ulp:4"), "loss_rel=1e-6,max_ulp:4");
  EXPECT_EQ(validate::shell_arg("a b"), "'a b'");
  EXPECT_EQ(validate::shell_arg(""), "''");
  EXPECT_EQ(validate::shell_arg("^float32/k0072$"), "'^float32/k0072$'");
}
