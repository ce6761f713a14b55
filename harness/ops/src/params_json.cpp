#include "validate/ops/params_json.hpp"

namespace validate::ops {

std::int64_t bounded_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t p = 1;
  for (auto f : factors)
    if (__builtin_mul_overflow(p, f, &p) || p > kMaxElements) return -1;
  return p;
}

Status read_pair(const Json& j, const char* key, std::array<std::int64_t, 2>& out, const std::string& where) {
  if (!j.contains(key)) return Status::ok();
  const Json& v = j.at(key);
  if (v.is_number_integer()) {
    out = {v.get<std::int64_t>(), v.get<std::int64_t>()};
    return Status::ok();
  }
  if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer()) {
    out = {v[0].get<std::int64_t>(), v[1].get<std::int64_t>()};
    return Status::ok();
  }
  return Error{where + ": '" + key + "' must be an integer or a pair of integers"};
}

Status read_int(const Json& j, const char* key, std::int64_t& out, const std::string& where) {
  if (!j.contains(key)) return Status::ok();
  if (!j.at(key).is_number_integer()) return Error{where + ": '" + key + "' must be an integer"};
  out = j.at(key).get<std::int64_t>();
  return Status::ok();
}

Status read_bool(const Json& j, const char* key, bool& out, const std::string& where) {
  if (!j.contains(key)) return Status::ok();
  if (!j.at(key).is_boolean()) return Error{where + ": '" + key + "' must be true or false"};
  out = j.at(key).get<bool>();
  return Status::ok();
}

Status check_keys(const Json& j, const std::set<std::string>& allowed, const std::string& where) {
  if (!j.is_object()) return Error{where + ": expected an object"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!allowed.count(it.key())) return Error{where + ": unknown key '" + it.key() + "'"};
  return Status::ok();
}

std::vector<std::int64_t> int_list(const Json& j, std::size_t n, const char* what) {
  if (!j.is_array() || (n && j.size() != n))
    throw Json::other_error::create(501, std::string(what) + " must be a list of " + std::to_string(n) + " integers", &j);
  std::vector<std::int64_t> out;
  for (const auto& v : j) {
    if (!v.is_number_integer()) throw Json::other_error::create(501, std::string(what) + " must hold integers", &j);
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

std::int64_t int_value(const Json& j, const char* what) {
  if (!j.is_number_integer()) throw Json::other_error::create(501, std::string(what) + " must be an integer", &j);
  return j.get<std::int64_t>();
}

std::array<std::int64_t, 2> int_pair(const Json& j, const char* what) {
  auto v = int_list(j, 2, what);
  return {v[0], v[1]};
}

}  // namespace validate::ops
