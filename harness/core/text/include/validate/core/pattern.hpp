#pragma once
// A user's regular expression (--only, --variant) through RE2, which matches in time linear in the
// text whatever the pattern: std::regex backtracks, and `--only '^(.*)*x$'` ran without end.
// RE2's syntax is ECMAScript's less backreferences (\1) and lookaround ((?=…), (?!…)); such a
// pattern is refused with RE2's own message rather than silently matching something else.
#include <memory>
#include <string>
#include <string_view>

#include "validate/core/result.hpp"

namespace re2 {
class RE2;
}

namespace validate {

class Pattern {
 public:
  // `option` names where the pattern came from in errors ("--only"). A pattern that is not valid
  // UTF-8, not valid RE2 syntax, or too large to compile is an error naming it and RE2's reason.
  static Result<Pattern> compile(const std::string& pattern, const std::string& option);

  // True when the pattern matches anywhere in `text` (as std::regex_search did).
  bool search(std::string_view text) const;

 private:
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace validate
