#pragma once
// JSON files through nlohmann_json: parse errors become Status messages naming the file and the
// byte, and writes are atomic and pretty-printed with sorted keys (deterministic bytes).
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "validate/core/result.hpp"

namespace validate {

using Json = nlohmann::json;

// The deepest nesting of arrays and objects a JSON input may have. nlohmann_json parses any depth
// but dumps, compares and copies recursively: a 10^5-deep array in a run_info.json overflowed the
// stack (SIGSEGV). validate's own files nest fewer than 10 levels.
inline constexpr int kMaxJsonDepth = 64;

// Parses JSON text read from `where` (named in errors): invalid JSON, and nesting deeper than
// kMaxJsonDepth (checked before nlohmann builds anything), are errors.
Result<Json> parse_json(std::string_view text, const std::string& where);

// Reads and parses a JSON file through parse_json; refuses files over `max_bytes` (a 100 MB "JSON"
// is an attack or a mistake, never a case file or a manifest).
Result<Json> read_json(const std::string& path, std::size_t max_bytes = 64u << 20);
Status write_json(const std::string& path, const Json& j);

// The only way JSON becomes text in validate (files, reports, messages): j.dump(indent), except
// that strings and keys holding bytes that are not UTF-8 (a program's stderr, a Latin-1 path, a
// command line), on which nlohmann_json throws, are written with those bytes as \xNN
// (utf8::escape_invalid) instead of ending the program. The text is for people; nothing reads
// such a string back as a path.
std::string json_text(const Json& j, int indent = -1);

// The value at a key path (find_path(j, {"ops", "conv2d", "K"})), or null when a step is missing
// or is not an object: for reading files written by others without exceptions.
const Json* find_path(const Json& j, std::initializer_list<const char*> keys);

// Typed access with a message naming the file and key: get_field<int>(j, "batch", path).
template <class T>
Result<T> get_field(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return Error{where + ": missing key '" + key + "'"};
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    return Error{where + ": key '" + key + "' has the wrong type (" + j.at(key).type_name() + ")"};
  }
}

}  // namespace validate
