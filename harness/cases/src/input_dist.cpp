#include "validate/cases/input_dist.hpp"

#include <cmath>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "validate/core/suggest.hpp"

namespace validate::cases {

namespace {

struct DistName {
  Dist dist;
  const char* name;
};
constexpr DistName kDists[] = {{Dist::normal, "normal"},           {Dist::relu_normal, "relu_normal"},
                               {Dist::log_uniform, "log_uniform"}, {Dist::student_t, "student_t"},
                               {Dist::sparse, "sparse"},           {Dist::npy, "npy"}};

const char* dist_name(Dist d) {
  for (const auto& n : kDists)
    if (n.dist == d) return n.name;
  return "?";
}

std::vector<std::string> dist_names() {
  std::vector<std::string> v;
  for (const auto& n : kDists) v.emplace_back(n.name);
  return v;
}

// The keys each distribution takes besides "dist", "scale", "zeros" and "sign".
std::set<std::string> own_keys(Dist d) {
  switch (d) {
    case Dist::log_uniform: return {"decades"};
    case Dist::student_t: return {"dof"};
    case Dist::npy: return {"file", "sha256"};
    default: return {};
  }
}

Result<double> read_number(const Json& j, const char* key, double lo, double hi, bool lo_open, const std::string& at) {
  const Json& v = j.at(key);
  const double x = v.is_number() ? v.get<double>() : NAN;
  if (!v.is_number() || !std::isfinite(x) || x > hi || (lo_open ? x <= lo : x < lo))
    return Error{fmt::format("{}: '{}' must be a number in {}{:g}, {:g}]", at, key, lo_open ? "(" : "[", lo, hi)};
  return x;
}

// read_number into `out` when the object has `key`; nothing when it has not.
template <class T>
Status read_optional(const Json& j, const char* key, double lo, double hi, bool lo_open, const std::string& at,
                     T& out) {
  if (!j.contains(key)) return Status::ok();
  auto v = read_number(j, key, lo, hi, lo_open, at);
  if (!v) return v.status();
  out = *v;
  return Status::ok();
}

Result<InputDist> parse_one(const Json& j, const std::string& at, bool metadata) {
  if (!j.is_object()) return Error{at + ": expected an object such as {\"dist\": \"relu_normal\"}"};
  InputDist d;
  if (j.contains("dist")) {
    const Json& n = j.at("dist");
    const std::string name = n.is_string() ? n.get<std::string>() : json_text(n);
    bool found = false;
    for (const auto& k : kDists)
      if (name == k.name) d.dist = k.dist, found = true;
    if (!found)
      return Error{fmt::format("{}: unknown distribution '{}' (one of {}){}", at, name, fmt::join(dist_names(), ", "),
                               did_you_mean(name, dist_names()))};
  }
  std::set<std::string> allowed = own_keys(d.dist);
  for (const char* k : {"dist", "scale", "zeros", "sign"}) allowed.insert(k);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!allowed.count(it.key())) {
      std::vector<std::string> cand(allowed.begin(), allowed.end());
      return Error{fmt::format("{}: unknown key '{}' for \"dist\": \"{}\" (it takes {}){}", at, it.key(),
                               dist_name(d.dist), fmt::join(cand, ", "), did_you_mean(it.key(), cand))};
    }
  // scale at most 1e15: a Cauchy draw (up to about 2^63) times it stays finite in float32.
  VALIDATE_TRY(read_optional(j, "scale", 0, 1e15, true, at, d.scale));
  VALIDATE_TRY(read_optional(j, "zeros", 0, 1, false, at, d.zeros));
  if (d.dist == Dist::sparse && !j.contains("zeros"))
    return Error{at + ": \"dist\": \"sparse\" needs 'zeros', the fraction of exact zeros (e.g. 0.9)"};
  if (j.contains("sign")) {
    const Json& s = j.at("sign");
    if (s == "positive") d.sign = 1;
    else if (s == "negative") d.sign = -1;
    else if (s == "random") d.sign = 0;
    else return Error{at + ": 'sign' must be \"positive\", \"negative\" or \"random\""};
  }
  VALIDATE_TRY(read_optional(j, "decades", 0, 30, true, at, d.decades));
  VALIDATE_TRY(read_optional(j, "dof", 1, 1e6, false, at, d.dof));
  if (d.dist == Dist::npy) {
    if (!j.contains("file") || !j.at("file").is_string() || j.at("file").get<std::string>().empty())
      return Error{at + ": \"dist\": \"npy\" needs 'file', a .npy path relative to the case file"};
    d.file = j.at("file").get<std::string>();
    if (j.contains("sha256")) {
      const Json& h = j.at("sha256");
      if (!h.is_string() || h.get<std::string>().size() != 64 ||
          h.get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos)
        return Error{at + ": 'sha256' must be 64 lower-case hex digits"};
      d.sha256 = h.get<std::string>();
    } else if (metadata) {
      return Error{at + ": an npy input's record needs its file's 'sha256'"};
    }
    if (d.scale || d.zeros > 0 || d.sign != 0)
      return Error{at + ": an npy input is used as the file holds it: 'scale', 'zeros' and 'sign' do not apply"};
  }
  return d;
}

}  // namespace

bool InputDist::is_default() const { return dist == Dist::normal && !scale && zeros == 0 && sign == 0; }

Result<InputDists> parse_input_dists(const Json& j, const std::string& where, bool metadata) {
  if (!j.is_object())
    return Error{where + ": 'inputs' must be an object mapping a tensor name to its distribution, e.g. "
                         "{\"input\": {\"dist\": \"relu_normal\"}}"};
  InputDists out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    auto d = parse_one(it.value(), where + " inputs." + it.key(), metadata);
    if (!d) return d.status();
    out[it.key()] = std::move(*d);
  }
  return out;
}

Json input_dists_json(const InputDists& ds) {
  Json out = Json::object();
  for (const auto& [name, d] : ds) {
    Json j = {{"dist", dist_name(d.dist)}};
    if (d.scale) j["scale"] = *d.scale;
    if (d.zeros > 0) j["zeros"] = d.zeros;
    if (d.sign) j["sign"] = d.sign > 0 ? "positive" : "negative";
    if (d.dist == Dist::log_uniform) j["decades"] = d.decades;
    if (d.dist == Dist::student_t) j["dof"] = d.dof;
    if (d.dist == Dist::npy) {
      j["file"] = d.file;
      if (!d.sha256.empty()) j["sha256"] = d.sha256;
    }
    out[name] = j;
  }
  return out;
}

std::string describe(const InputDist& d) {
  std::string s = dist_name(d.dist);
  if (d.dist == Dist::log_uniform) s += fmt::format(" decades={:g}", d.decades);
  if (d.dist == Dist::student_t) s += fmt::format(" dof={:g}", d.dof);
  if (d.dist == Dist::npy) s += " file=" + d.file + " sha256=" + d.sha256.substr(0, 12);
  if (d.scale) s += fmt::format(" scale={:g}", *d.scale);
  if (d.zeros > 0) s += fmt::format(" zeros={:g}", d.zeros);
  if (d.sign) s += d.sign > 0 ? " sign=positive" : " sign=negative";
  return s;
}

std::string describe(const InputDists& ds) {
  std::string s;
  for (const auto& [name, d] : ds) s += (s.empty() ? "" : "; ") + name + " " + describe(d);
  return s;
}

}  // namespace validate::cases
