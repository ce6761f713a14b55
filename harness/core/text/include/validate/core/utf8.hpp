#pragma once
// UTF-8 checks for text that came from outside (a program's stderr, a path, a command line): JSON,
// XML and Markdown writers need valid UTF-8, and nlohmann_json throws on anything else.
#include <cstddef>
#include <string>
#include <string_view>

namespace validate::utf8 {

// Length (1-4) of the well-formed UTF-8 sequence starting at s[i], storing its code point in *cp;
// 0 when the bytes there are not UTF-8 (a stray continuation byte, an overlong form, a surrogate,
// a code point above U+10FFFF or a sequence cut short).
std::size_t sequence_length(std::string_view s, std::size_t i, char32_t* cp = nullptr);

bool valid(std::string_view s);

// `s` with every byte that is not part of well-formed UTF-8 written as the four characters \xNN
// (lower-case hex, as Python's "backslashreplace"): readable, and the byte's value is kept.
std::string escape_invalid(std::string_view s);

}  // namespace validate::utf8
