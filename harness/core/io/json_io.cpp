#include "validate/core/json_io.hpp"

#include <sys/stat.h>

#include "validate/core/fs.hpp"
#include "validate/core/utf8.hpp"

namespace validate {

Result<Json> read_json(const std::string& path, std::size_t max_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Error{"cannot open " + path + ": no such file"};
  // A FIFO or a character device (a manifest.json symlinked to /dev/zero) reports size 0 and would
  // be read without end; only regular files have a size we can check against the limit.
  if (!S_ISREG(st.st_mode)) return Error{path + ": not a regular file"};
  if (static_cast<std::size_t>(st.st_size) > max_bytes)
    return Error{path + ": " + std::to_string(st.st_size) + " bytes is larger than the " +
                 std::to_string(max_bytes) + "-byte limit for a JSON file"};
  // Between the stat and the read the file may have become a FIFO: read_text opens without
  // blocking and re-checks on the descriptor.
  auto text = fs::read_text(path);
  if (!text) return text.status();
  return parse_json(*text, path);
}

namespace {

// The first byte at which arrays/objects nest deeper than kMaxJsonDepth, or npos. Brackets inside
// strings do not count; the text need not be valid JSON (the parser judges that afterwards).
std::size_t too_deep_at(std::string_view t) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

Result<Json> parse_json(std::string_view text, const std::string& where) {
  if (const std::size_t at = too_deep_at(text); at != std::string_view::npos)
    return Error{where + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep (at byte " +
                 std::to_string(at) + "); validate reads no deeper"};
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Re-parse with exceptions only to get the position of the error for the message.
    try {
      Json ignored = Json::parse(text);
      (void)ignored;
    } catch (const nlohmann::json::exception& e) {
      // Not only parse_error: a number too large for a double ("1e400") is an out_of_range
      // exception, which used to escape here and terminate the program (found by fuzz_layout).
      return Error{where + ": invalid JSON (" + std::string(e.what()) + ")"};
    }
    return Error{where + ": invalid JSON"};
  }
  return j;
}

Status write_json(const std::string& path, const Json& j) {
  // nlohmann's default object type is std::map: keys come out sorted, so bytes are deterministic.
  return fs::write_atomic(path, json_text(j, 2) + "\n");
}

namespace {

// A copy of `j` whose strings and keys are valid UTF-8. Recursive: the values written are built
// by validate or read through read_json, which bounds their depth (kMaxJsonDepth).
Json escaped_copy(const Json& j) {
  if (j.is_string()) return utf8::escape_invalid(j.get_ref<const std::string&>());
  if (j.is_array()) {
    Json out = Json::array();
    for (const auto& v : j) out.push_back(escaped_copy(v));
    return out;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (const auto& [k, v] : j.items()) out[utf8::escape_invalid(k)] = escaped_copy(v);
    return out;
  }
  return j;
}

}  // namespace

std::string json_text(const Json& j, int indent) {
  try {
    return j.dump(indent);
  } catch (const Json::type_error&) {
    // type_error.316: a string that is not UTF-8. Should the two checks ever disagree on a byte,
    // nlohmann's own replacement (U+FFFD) is the last resort rather than an exception.
    return escaped_copy(j).dump(indent, ' ', false, Json::error_handler_t::replace);
  }
}

const Json* find_path(const Json& j, std::initializer_list<const char*> keys) {
  const Json* p = &j;
  for (const char* k : keys) {
    if (!p->is_object()) return nullptr;
    auto it = p->find(k);
    if (it == p->end()) return nullptr;
    p = &*it;
  }
  return p;
}

}  // namespace validate
