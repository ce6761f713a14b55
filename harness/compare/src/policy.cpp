#include "validate/compare/policy.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <tuple>

#include "validate/cases/case.hpp"
#include "validate/core/json_io.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::compare {

namespace {

// Kept identical to policies/default.json (a test checks it). Calibration, docs/evidence.md:
// float32 reorderings of the same sums stayed below 1e-4 guarded relative error up to K = 4608,
// TF32 gave >= 1.7e-3, so rtol 5e-4 separates them; bfloat16/float16 outputs are 1-2 ULPs apart
// between stacks, gradients more (rounded intermediates), hence the wider near-zero floor.
// Training (docs/training.md decision 5): loss_curve's loss_rel is r0 of the growing
// gate r0 * sqrt(1 + step) — relative, since a loss curve's scale changes as it trains; checkpoints
// take the dtype's grad gate, widened by sqrt(1 + k) at step k (trajectory_check.hpp). The
// bfloat16/float16 r0 (1e-3, 2e-4) come from mixed-precision trajectories measured against each
// other (bench/training/drift_mixed.py, docs/training.md): clean drift reached r0/5.9 and r0/8,
// the planted dW-layout mistake r0/2 at step 1 at lr 0.01 (caught there by its checkpoint) and
// 4x r0 at step 2.
constexpr const char* kBuiltin = R"({
  "format": "validate-policy/1",
  "rules": [
    {"near_zero": 0.01, "mistrust_zeros": 0.9},
    {"role": ["output", "grad", "checkpoint"], "bound": 8},
    {"dtype": "float32", "role": ["output", "grad"], "min_pcc": 0.99999},
    {"dtype": "float32", "role": "loss", "loss_abs": 1e-6},
    {"dtype": "float32", "role": "loss_curve", "loss_rel": 1e-6},
    {"dtype": "float32", "role": "checkpoint", "min_pcc": 0.99999},
    {"dtype": "bfloat16", "near_zero": 0.05},
    {"dtype": "bfloat16", "role": ["output", "grad"], "min_pcc": 0.999},
    {"dtype": "bfloat16", "role": "loss", "bound": 8},
    {"dtype": "bfloat16", "role": "loss_curve", "loss_rel": 1e-3},
    {"dtype": "bfloat16", "role": "checkpoint", "min_pcc": 0.999},
    {"dtype": "float16", "near_zero": 0.05},
    {"dtype": "float16", "role": ["output", "grad"], "min_pcc": 0.9999},
    {"dtype": "float16", "role": "loss", "bound": 8},
    {"dtype": "float16", "role": "loss_curve", "loss_rel": 2e-4},
    {"dtype": "float16", "role": "checkpoint", "min_pcc": 0.9999}
  ]
})";

const std::vector<std::string> kDtypes = {"float32", "bfloat16", "float16"};
// The registry's ops (harness/ops): a policy may select any of them.
const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ops::OpDef* d : ops::registry()) out.emplace_back(d->name());
    return out;
  }();
  return names;
}
const std::vector<std::string>& role_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (ops::Role r : ops::all_roles()) out.emplace_back(ops::role_name(r));
    return out;
  }();
  return names;
}
// Policy files and --gate name ops and roles; rules hold the enums (names checked beforehand).
ops::Op op_named(const std::string& s) { return ops::find(s)->id(); }
ops::Role role_named(const std::string& s) { return *ops::role_from_name(s); }
std::vector<std::string> names_of(const std::vector<ops::Op>& v) {
  std::vector<std::string> out;
  for (ops::Op o : v) out.emplace_back(ops::op_name(o));
  return out;
}
std::vector<std::string> names_of(const std::vector<ops::Role>& v) {
  std::vector<std::string> out;
  for (ops::Role r : v) out.emplace_back(ops::role_name(r));
  return out;
}

// Tensor names a rule may select: every op's (cases::all_tensor_names), and a training case's
// train_loss and step<k>_<tensor> checkpoints (train/tensor_names.hpp).
bool known_tensor(const std::string& s) {
  if (s == train::kLossCurve) return true;
  const auto& all = cases::all_tensor_names();
  if (std::find(all.begin(), all.end(), s) != all.end()) return true;
  const auto c = train::parse_checkpoint_tensor(s);
  return c && std::find(all.begin(), all.end(), c->tensor) != all.end();
}
std::string tensor_vocabulary() {
  std::string names;
  for (const auto& n : cases::all_tensor_names()) names += (names.empty() ? "" : ", ") + n;
  return names + ", " + train::kLossCurve + ", step<k>_<tensor>";
}

bool in(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Result<std::vector<std::string>> string_list(const nlohmann::json& v, const std::string& where,
                                             const char* field,
                                             const std::vector<std::string>* vocab) {
  std::vector<std::string> out;
  auto add = [&](const nlohmann::json& e) -> Status {
    if (!e.is_string())
      return Error{where + ": '" + field + "' must be a string or a list of strings"};
    std::string s = e.get<std::string>();
    if (vocab && !in(*vocab, s)) {
      std::string all;
      for (auto& x : *vocab) all += (all.empty() ? "" : ", ") + x;
      return Error{where + ": unknown " + field + " '" + s + "' (expected one of " + all + ")"};
    }
    out.push_back(s);
    return Status::ok();
  };
  if (v.is_array()) {
    for (auto& e : v) VALIDATE_TRY(add(e));
  } else {
    VALIDATE_TRY(add(v));
  }
  return out;
}

// A --gate argument comes from a shell and may hold any bytes; messages show it with every byte
// outside printable ASCII as \xNN, so an error about it is itself printable (and valid UTF-8).
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch >= 0x20 && ch < 0x7f) {
      out += static_cast<char>(ch);
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

// Tensor names are the format's (output, grad_weight, A, ...): letters, digits and '_'. Checking
// the characters keeps every accepted rule writable as JSON: a selector of arbitrary bytes
// (`--gate $'\xff.rtol=1'`) used to be accepted and then made to_json() throw (invalid UTF-8),
// found by tests/fuzz/fuzz_policy.cpp (corpus/policy/regress_gate_invalid_utf8).
bool is_tensor_name(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char ch : s)
    if (!(std::isalnum(ch) || ch == '_')) return false;
  return true;
}

template <class T>
bool any_of_or_empty(const std::vector<T>& sel, const T& v) {
  return sel.empty() || std::find(sel.begin(), sel.end(), v) != sel.end();
}
template <class T>
bool any_of_or_empty(const std::vector<T>& sel, const std::optional<T>& v) {
  return sel.empty() || (v && std::find(sel.begin(), sel.end(), *v) != sel.end());
}

// What is wrong with a non-negative value of gate `key`, if anything (a file's rule and --gate alike).
std::optional<std::string> bad_gate_value(const std::string& key, double v) {
  if (key == "operand_bits" && !(v >= 2 && v <= 24 && v == std::floor(v)))
    return std::string("'operand_bits' must be a whole number of significand bits from 2 to 24 (TF32: 11)");
  // An element test that every element passes checks none (docs/compare.md, "Keys").
  if ((key == "bound" || key == "atol" || key == "rtol") && !std::isfinite(v))
    return "'" + key + "' must be finite: " + key + " inf passes every element, so it checks none ('none' turns the "
           "gate off)";
  if (key == "near_zero" && !(v < 1))
    return std::string("'near_zero' must be below 1: a near-zero floor at or above max|ref| makes every element "
                       "near zero, and no relative or ULP test then checks any");
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& Policy::keys() {
  static const std::vector<std::string> k = {"bound", "max_ulp",  "atol",     "rtol",      "min_pcc",
                                             "loss_abs", "loss_rel", "near_zero", "mistrust_zeros",
                                             "operand_bits"};
  return k;
}

int Policy::Rule::specificity() const {
  return !dtype.empty() + !op.empty() + !role.empty() + !tensor.empty();
}

bool Policy::Rule::matches(const TensorKey& k) const {
  return any_of_or_empty(dtype, k.dtype) && any_of_or_empty(op, k.op) &&
         any_of_or_empty(role, k.role) && any_of_or_empty(tensor, k.tensor);
}

Policy Policy::empty() { return Policy{}; }

Policy Policy::builtin() {
  Policy p;
  Status st = p.add_json(nlohmann::json::parse(kBuiltin), "built-in policy");
  (void)st;
  for (auto& r : p.rules_) {
    r.layer = 0;
    r.origin = "built-in";
  }
  return p;
}

Status Policy::add_rule_json(const nlohmann::json& r, const std::string& where, int layer) {
  if (!r.is_object()) return Error{where + ": a rule must be an object"};
  Rule rule;
  rule.layer = layer;
  rule.order = next_order_++;
  rule.origin = where;
  for (auto it = r.begin(); it != r.end(); ++it) {
    const std::string& k = it.key();
    if (k == "dtype" || k == "op" || k == "role" || k == "tensor") {
      // Tensor names too: a misspelt "grad_wieght" selected nothing and gated nothing.
      const std::vector<std::string>* vocab = k == "dtype"  ? &kDtypes
                                              : k == "op"   ? &op_names()
                                              : k == "role" ? &role_names()
                                                            : nullptr;
      auto list = string_list(it.value(), where, k.c_str(), vocab);
      if (!list) return list.status();
      if (k == "tensor")
        for (const auto& t : *list)
          if (!known_tensor(t))
            return Error{where + ": unknown tensor '" + t + "' (expected one of " + tensor_vocabulary() + ")"};
      if (k == "op")
        for (const auto& o : *list) rule.op.push_back(op_named(o));
      else if (k == "role")
        for (const auto& o : *list) rule.role.push_back(role_named(o));
      else
        (k == "dtype" ? rule.dtype : rule.tensor) = *list;
    } else if (in(keys(), k)) {
      if (it.value().is_null()) {
        rule.values[k] = std::nullopt;
      } else if (it.value().is_number()) {
        const double v = it.value().get<double>();
        if (!(v >= 0)) return Error{where + ": '" + k + "' must be a non-negative number"};
        if (auto bad = bad_gate_value(k, v)) return Error{where + ": " + *bad};
        rule.values[k] = v;
      } else {
        return Error{where + ": '" + k + "' must be a number or null"};
      }
    } else if (k == "comment" || k == "why" || k == "origin") {
      continue;
    } else {
      std::string all;
      for (auto& x : keys()) all += (all.empty() ? "" : ", ") + x;
      return Error{where + ": unknown key '" + k +
                   "' in a rule (selectors: dtype, op, role, tensor; gates: " + all + ")"};
    }
  }
  rules_.push_back(std::move(rule));
  return Status::ok();
}

Status Policy::add_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return Error{where + ": a policy must be a JSON object"};
  if (j.contains("format") && j["format"] != "validate-policy/1")
    return Error{where + ": format is " + json_text(j["format"]) + ", expected \"validate-policy/1\""};
  if (j.contains("inherit") && j["inherit"] == false)
    rules_.erase(
        std::remove_if(rules_.begin(), rules_.end(), [](const Rule& r) { return r.layer == 0; }),
        rules_.end());
  if (!j.contains("rules") || !j["rules"].is_array())
    return Error{where + ": missing 'rules' (a list of rules)"};
  int i = 0;
  for (auto& r : j["rules"])
    VALIDATE_TRY(add_rule_json(r, where + " rule " + std::to_string(i++), 1));
  return Status::ok();
}

Status Policy::add_file(const std::string& path) {
  auto j = read_json(path);
  if (!j) return j.status();
  return add_json(*j, path);
}

Status Policy::add_gate(const std::string& a) {
  const std::string where = "--gate " + printable(a);
  const auto eq = a.find('=');
  if (eq == std::string::npos)
    return Error{where + ": expected [DTYPE.][OP.][ROLE|TENSOR.]KEY=VALUE"};
  const std::string lhs = a.substr(0, eq), value = a.substr(eq + 1);
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto dot = lhs.find('.', start);
    parts.push_back(lhs.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const std::string key = parts.back();
  parts.pop_back();
  if (!in(keys(), key)) {
    std::string all;
    for (auto& x : keys()) all += (all.empty() ? "" : ", ") + x;
    return Error{where + ": unknown gate key '" + printable(key) + "' (one of " + all + ")"};
  }
  Rule rule;
  rule.layer = 2;
  rule.order = next_order_++;
  rule.origin = "--gate";
  for (const auto& p : parts) {
    if (p.empty()) return Error{where + ": empty selector part"};
    if (p == "*") continue;
    // Parts are told apart by vocabulary: a dtype, an op, a role, else a tensor name.
    enum class Part { dtype, op, role, tensor };
    const Part kind = in(kDtypes, p)         ? Part::dtype
                      : in(op_names(), p)    ? Part::op
                      : in(role_names(), p)  ? Part::role
                                             : Part::tensor;
    if (kind == Part::tensor && (!is_tensor_name(p) || !known_tensor(p))) {
      // A misspelt tensor (grad_wieght) used to be accepted and gate nothing (exit 0).
      return Error{where + ": '" + printable(p) + "' is neither a dtype, op or role nor a tensor name (" +
                   tensor_vocabulary() + ")"};
    }
    const std::vector<std::string> taken = kind == Part::dtype ? rule.dtype
                                           : kind == Part::op  ? names_of(rule.op)
                                           : kind == Part::role ? names_of(rule.role)
                                                                : rule.tensor;
    if (!taken.empty())
      return Error{where + ": '" + p + "' and '" + taken.front() + "' select the same thing twice"};
    switch (kind) {
      case Part::dtype: rule.dtype.push_back(p); break;
      case Part::op: rule.op.push_back(op_named(p)); break;
      case Part::role: rule.role.push_back(role_named(p)); break;
      case Part::tensor: rule.tensor.push_back(p); break;
    }
  }
  if (value == "none" || value == "off" || value == "null") {
    rule.values[key] = std::nullopt;
  } else {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || errno != 0 || !(v >= 0))
      return Error{where + ": '" + printable(value) + "' is not a non-negative number (or none)"};
    if (auto bad = bad_gate_value(key, v)) return Error{where + ": " + *bad};
    rule.values[key] = v;
  }
  rules_.push_back(std::move(rule));
  return Status::ok();
}

std::vector<std::string> Policy::unmatched_rules() const {
  std::vector<std::string> out;
  for (const auto& r : rules_) {
    if (r.layer == 0 || r.matched) continue;
    nlohmann::json j;
    const std::vector<std::string> op = names_of(r.op), role = names_of(r.role);
    for (const auto& [name, sel] : {std::pair<const char*, const std::vector<std::string>*>{"dtype", &r.dtype},
                                    {"op", &op}, {"role", &role}, {"tensor", &r.tensor}})
      if (!sel->empty()) j[name] = *sel;
    for (const auto& kv : r.values) j[kv.first] = kv.second ? nlohmann::json(*kv.second) : nlohmann::json(nullptr);
    out.push_back(r.origin + " " + json_text(j));
  }
  return out;
}

Status Policy::check_element_gates() const {
  const Policy probe = *this;  // resolve() counts matches for unmatched_rules(): probe a copy
  std::vector<TensorKey> keys;
  for (const ops::OpDef* d : ops::registry())
    for (const auto& t : d->tensors(d->default_params()))
      for (const auto& dt : kDtypes) {
        if (t.role == ops::Role::output || t.role == ops::Role::grad) keys.push_back({dt, d->id(), t.role, t.name});
        if (!t.parameter) continue;
        for (const std::string& n : {"step1_" + t.name, "step1_grad_" + t.name})
          keys.push_back({dt, d->id(), ops::Role::checkpoint, n});
      }
  for (const auto& r : rules_)  // a checkpoint of another step a rule names
    for (const auto& n : r.tensor)
      if (train::parse_checkpoint_tensor(n))
        for (const ops::OpDef* d : ops::registry())
          for (const auto& dt : kDtypes) keys.push_back({dt, d->id(), ops::Role::checkpoint, n});
  for (const auto& k : keys) {
    const Gates g = probe.resolve(k);
    // max_ulp at or above 2^32 is "any distance" (docs/compare.md): it checks no element either
    const bool ulp = g.max_ulp && *g.max_ulp < 4294967296.0;
    if (!g.min_pcc || g.bound || g.atol || g.rtol || ulp) continue;
    const std::string sel = k.dtype + "." + ops::op_name(k.op) + "." + k.tensor;
    return Error{"the policy leaves " + sel + " (" + std::string(ops::role_name(*k.role)) +
                 ") with min_pcc alone: with bound, atol, rtol and max_ulp all off (or max_ulp at 2^32 or more: any "
                 "distance) no element of it is checked by value, and a run scaled by any factor keeps its correlation (set one, e.g. --gate " +
                 k.dtype + "." + ops::role_name(*k.role) + ".rtol=5e-4)"};
  }
  return Status::ok();
}

Gates Policy::resolve(const TensorKey& k) const {
  // Per key: the best (layer, specificity, order) matching rule that sets it.
  std::map<std::string, const Rule*> best;
  for (const auto& r : rules_) {
    if (!r.matches(k)) continue;
    ++r.matched;
    for (const auto& kv : r.values) {
      const Rule*& b = best[kv.first];
      if (!b || std::make_tuple(r.layer, r.specificity(), r.order) >
                    std::make_tuple(b->layer, b->specificity(), b->order))
        b = &r;
    }
  }
  Gates g;
  auto get = [&](const char* key) -> std::optional<double> {
    auto it = best.find(key);
    return it == best.end() ? std::nullopt : it->second->values.at(key);
  };
  g.max_ulp = get("max_ulp");
  g.atol = get("atol");
  g.rtol = get("rtol");
  g.bound = get("bound");
  g.operand_bits = get("operand_bits");
  g.min_pcc = get("min_pcc");
  g.loss_abs = get("loss_abs");
  g.loss_rel = get("loss_rel");
  if (auto v = get("near_zero")) g.near_zero = *v;
  if (auto v = get("mistrust_zeros")) g.mistrust_zeros = *v;
  return g;
}

nlohmann::json Policy::to_json() const {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : rules_) {
    nlohmann::json j;
    auto sel = [&](const char* name, const std::vector<std::string>& v) {
      if (v.size() == 1)
        j[name] = v[0];
      else if (!v.empty())
        j[name] = v;
    };
    sel("dtype", r.dtype);
    sel("op", names_of(r.op));
    sel("role", names_of(r.role));
    sel("tensor", r.tensor);
    for (const auto& kv : r.values)
      j[kv.first] = kv.second ? nlohmann::json(*kv.second) : nlohmann::json(nullptr);
    j["origin"] = r.origin;
    rules.push_back(j);
  }
  return nlohmann::json{{"format", "validate-policy/1"}, {"rules", rules}};
}

}  // namespace validate::compare
