#include "validate/core/pattern.hpp"

#include <re2/re2.h>

#include "validate/core/utf8.hpp"

namespace validate {

Result<Pattern> Pattern::compile(const std::string& pattern, const std::string& option) {
  RE2::Options o;
  o.set_log_errors(false);  // the error is returned, named, not printed by RE2
  auto re = std::make_shared<const RE2>(pattern, o);
  if (!re->ok())
    return Error{option + " '" + utf8::escape_invalid(pattern) + "' is not a regular expression RE2 accepts: " +
                 utf8::escape_invalid(re->error()) +
                 " (RE2 syntax: ECMAScript's, without backreferences or lookahead/lookbehind)"};
  Pattern p;
  p.re_ = std::move(re);
  return p;
}

bool Pattern::search(std::string_view text) const { return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re_); }

}  // namespace validate
