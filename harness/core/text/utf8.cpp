#include "validate/core/utf8.hpp"

namespace validate::utf8 {

std::size_t sequence_length(std::string_view s, std::size_t i, char32_t* cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n;
  char32_t v;
  if (c < 0x80) {
    if (cp) *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, v = c & 0x07;
  } else {
    return 0;  // 0x80-0xC1 (continuation or overlong lead) and 0xF5-0xFF never start a sequence
  }
  if (s.size() - i < n) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  // Overlong three- and four-byte forms, UTF-16 surrogates and code points past Unicode's range.
  if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF) return 0;
  if (cp) *cp = v;
  return n;
}

bool valid(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_invalid(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string o;
  o.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i);
    if (n == 0) {
      const auto c = static_cast<unsigned char>(s[i++]);
      o += "\\x";
      o += hex[c >> 4];
      o += hex[c & 15];
    } else {
      o.append(s, i, n);
      i += n;
    }
  }
  return o;
}

}  // namespace validate::utf8
