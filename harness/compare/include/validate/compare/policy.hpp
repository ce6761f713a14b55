#pragma once
// The gate: which statistics must hold for a tensor to pass, per dtype, op, tensor role and tensor.
//
// A policy is a list of rules. Each rule selects tensors (dtype, op, role, tensor; any left out
// matches everything; each may be a string or a list) and sets some gate keys. For each key, the
// value comes from the matching rule of the highest layer (built-in < --policy file < --gate),
// within a layer from the most specific rule (most selector fields set), ties to the later rule.
// A key set to null ("none" on the command line) switches that gate off.
//
//   {"format": "validate-policy/1", "inherit": true,
//    "rules": [{"dtype": "float32", "role": "loss", "loss_abs": 1e-6},
//              {"dtype": "bfloat16", "op": "conv2d", "tensor": "grad_weight", "rtol": 0.05}]}
//
// Keys: bound (lambda of the per-element error bound, bounds.hpp), max_ulp, atol, rtol, min_pcc (tensors); loss_abs, loss_rel (0-d losses); near_zero (the
// near-zero floor as a fraction of max|ref|); mistrust_zeros (fraction of exact zeros in the
// reference above which a passing tensor is MISTRUSTED). docs/compare.md has the built-in policy.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/core/result.hpp"
#include "validate/ops/op.hpp"

namespace validate::compare {

// The resolved gate of one tensor.
struct Gates {
  std::optional<double> max_ulp, atol, rtol, min_pcc, loss_abs, loss_rel;
  // lambda of the per-element error bound (bounds.hpp), for outputs and gradients of a set with
  // error-bound scales; a set without them falls back to the old fixed rtol (legacy_rtol).
  std::optional<double> bound;
  // Significand bits (the implicit one included) the products' operands were rounded to before
  // the products, for a stack that is meant to run so: TF32 is 11 (policies/tf32.json). The error
  // bound's product term grows to match (bounds.hpp, BoundOptions::operand_u); none: float32.
  std::optional<double> operand_bits;
  double near_zero = 0.01;
  double mistrust_zeros = 0.9;
};

// What a rule selects on. Op and role are the enums; names are parsed where a policy is read.
struct TensorKey {
  std::string dtype;               // "float32"
  ops::Op op = ops::Op::conv2d;
  std::optional<ops::Role> role;   // none: the reference's metadata names no role (matches only
                                   // rules without a role selector)
  std::string tensor;              // "grad_weight", "train_loss", "step25_weight"
};

class Policy {
 public:
  // The gate keys a rule may set, in report order.
  static const std::vector<std::string>& keys();
  // The built-in default policy (docs/compare.md, policies/default.json).
  static Policy builtin();
  static Policy empty();
  // Adds the rules of a policy file (layer 1). "inherit": false drops the built-in rules first.
  Status add_file(const std::string& path);
  Status add_json(const nlohmann::json& j, const std::string& where);
  // --gate [DTYPE.][OP.][ROLE|TENSOR.]KEY=VALUE (layer 2), e.g. float32.loss.loss_abs=1e-7,
  // bfloat16.conv2d.grad_weight.rtol=0.1, rtol=none. Parts are told apart by vocabulary.
  Status add_gate(const std::string& assignment);

  // Counts, per rule, the keys it matched (see unmatched_rules).
  Gates resolve(const TensorKey& k) const;
  // Error unless every output, gradient and checkpoint of every dtype and op that the rules give
  // a gate has an element test (bound, atol, rtol or max_ulp): min_pcc alone checks no element's
  // value, and no scaling of a run moves it. Called once every layer is added.
  Status check_element_gates() const;
  // Rules from a file or --gate that matched no key resolved so far: "--gate {"tensor":...}".
  // compare warns about each, since a rule that selects nothing gates nothing.
  std::vector<std::string> unmatched_rules() const;
  nlohmann::json to_json() const;  // the effective rules, for reports

 private:
  struct Rule {
    std::vector<std::string> dtype, tensor;  // empty: any
    std::vector<ops::Op> op;
    std::vector<ops::Role> role;
    std::map<std::string, std::optional<double>> values;
    int layer = 0, order = 0;
    std::string origin;  // "built-in", a file name, "--gate"
    mutable std::int64_t matched = 0;  // keys resolve() matched it against
    int specificity() const;
    bool matches(const TensorKey& k) const;
  };
  Status add_rule_json(const nlohmann::json& r, const std::string& where, int layer);
  std::vector<Rule> rules_;
  int next_order_ = 0;
};

}  // namespace validate::compare
