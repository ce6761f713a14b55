#pragma once
// Quoting a value for /bin/sh, in one place: the exec runner's {dir}/{case} expansion and the
// repro commands compare prints both need it, and two hand-written copies drift.
#include <string>
#include <string_view>

namespace validate {

// Always single-quoted; a ' inside becomes '\'' ("it's" -> 'it'\''s'). Safe for any bytes,
// including $(...), backquotes and newlines: nothing inside single quotes is expanded.
std::string shell_quote(std::string_view s);

// For commands shown to people: the value unchanged when it is non-empty and every character is
// one the shell never interprets (letters, digits, / . _ - = : ,), else shell_quote(s).
std::string shell_arg(std::string_view s);

}  // namespace validate
