#include "validate/core/shell_quote.hpp"

#include <cctype>

namespace validate {

std::string shell_quote(std::string_view s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

std::string shell_arg(std::string_view s) {
  bool plain = !s.empty();
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' ||
          c == '-' || c == '=' || c == ':' || c == ','))
      plain = false;
  return plain ? std::string(s) : shell_quote(s);
}

}  // namespace validate
