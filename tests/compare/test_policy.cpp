// Policy resolution: built-in defaults, layers (built-in < file < --gate), specificity inside a
// layer, null switching a gate off, --gate parsing, and policies/default.json = the built-in
// policy.
#include <gtest/gtest.h>

#include "validate/compare/policy.hpp"
#include "validate/metrics/bounds.hpp"
#include "validate/core/json_io.hpp"
#include "validate/ops/registry.hpp"

using namespace validate;
using namespace validate::compare;

namespace {
TensorKey key(const char* dt, const char* op, const char* role, const char* t) {
  // Names as a policy file writes them; the key holds the enums.
  return TensorKey{dt, validate::ops::find(op)->id(), validate::ops::role_from_name(role), t};
}
}  // namespace

TEST(Policy, BuiltinDefaults) {
  const Policy p = Policy::builtin();
  const Gates loss = p.resolve(key("float32", "conv2d", "loss", "loss"));
  ASSERT_TRUE(loss.loss_abs);
  EXPECT_DOUBLE_EQ(*loss.loss_abs, 1e-6);
  EXPECT_FALSE(loss.rtol);
  // Outputs and gradients: the per-element error bound (lambda 8, docs/compare.md "Error
  // bounds"), no fixed rtol; so do training checkpoints ("Checkpoint bounds"), whose fixed rtol
  // compare applies only to a set without their scales.
  const Gates out = p.resolve(key("float32", "matmul", "output", "output"));
  ASSERT_TRUE(out.bound && out.min_pcc);
  EXPECT_DOUBLE_EQ(*out.bound, 8);
  EXPECT_FALSE(out.rtol);
  EXPECT_FALSE(out.max_ulp);
  EXPECT_DOUBLE_EQ(out.near_zero, 0.01);
  const Gates bf = p.resolve(key("bfloat16", "conv2d", "grad", "grad_weight"));
  EXPECT_DOUBLE_EQ(*bf.bound, 8);
  EXPECT_FALSE(bf.rtol);
  EXPECT_DOUBLE_EQ(bf.near_zero, 0.05);
  EXPECT_FALSE(loss.bound);
  const Gates ck = p.resolve(key("bfloat16", "conv2d", "checkpoint", "step1_weight"));
  ASSERT_TRUE(ck.bound && ck.min_pcc);
  EXPECT_DOUBLE_EQ(*ck.bound, 8);
  EXPECT_DOUBLE_EQ(*ck.min_pcc, 0.999);
  EXPECT_FALSE(ck.rtol);
  EXPECT_DOUBLE_EQ(compare::legacy_rtol("bfloat16", true), 4e-2);  // without scales
  EXPECT_DOUBLE_EQ(bf.mistrust_zeros, 0.9);
}

TEST(Policy, LayersThenSpecificityThenOrder) {
  Policy p = Policy::builtin();
  Status st = p.add_json(Json::parse(R"({"rules": [
      {"dtype": "float32", "op": "conv2d", "tensor": "grad_weight", "rtol": 0.5},
      {"dtype": "float32", "rtol": 0.25},
      {"dtype": "float32", "role": ["output", "grad"], "rtol": 0.125, "max_ulp": 64}]})"),
                         "test");
  ASSERT_TRUE(st) << st.message();
  // The file layer beats the more specific built-in rule; inside the layer the most specific wins.
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "conv2d", "grad", "grad_weight")).rtol, 0.5);
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "conv2d", "grad", "grad_input")).rtol, 0.125);
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "conv2d", "loss", "loss")).rtol, 0.25);
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "matmul", "grad", "grad_A")).max_ulp, 64);
  EXPECT_FALSE(p.resolve(key("bfloat16", "matmul", "grad", "grad_A")).rtol);  // untouched
  EXPECT_DOUBLE_EQ(*p.resolve(key("bfloat16", "matmul", "grad", "grad_A")).bound, 8);
  // --gate beats the file.
  ASSERT_TRUE(p.add_gate("float32.grad_weight.rtol=0.75"));
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "conv2d", "grad", "grad_weight")).rtol, 0.75);
  ASSERT_TRUE(
      p.add_gate("rtol=none"));  // off everywhere, except where a more specific --gate sets it
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "conv2d", "grad", "grad_weight")).rtol, 0.75);
  EXPECT_FALSE(p.resolve(key("float32", "conv2d", "grad", "grad_input")).rtol);
  EXPECT_FALSE(p.resolve(key("float16", "conv2d", "output", "output")).rtol);
}

TEST(Policy, NullSwitchesAGateOffAndInheritFalseDropsTheBuiltin) {
  Policy p = Policy::builtin();
  ASSERT_TRUE(p.add_json(Json::parse(R"({"rules": [{"role": "loss", "loss_abs": null}]})"), "t"));
  EXPECT_FALSE(p.resolve(key("float32", "conv2d", "loss", "loss")).loss_abs);
  Policy q = Policy::builtin();
  ASSERT_TRUE(q.add_json(
      Json::parse(R"({"inherit": false, "rules": [{"dtype": "float16", "max_ulp": 2}]})"), "t"));
  EXPECT_FALSE(q.resolve(key("float32", "conv2d", "loss", "loss")).loss_abs);
  EXPECT_FALSE(q.resolve(key("float32", "conv2d", "output", "output")).rtol);
  EXPECT_DOUBLE_EQ(*q.resolve(key("float16", "conv2d", "output", "output")).max_ulp, 2);
}

TEST(Policy, GateSyntax) {
  Policy p = Policy::builtin();
  EXPECT_TRUE(p.add_gate("float32.loss.loss_abs=1e-7"));
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "matmul", "loss", "loss")).loss_abs, 1e-7);
  // A float32 gate leaves the bfloat16 loss alone: its derived bound (lambda 8), no fixed loss_abs.
  EXPECT_FALSE(p.resolve(key("bfloat16", "matmul", "loss", "loss")).loss_abs);
  EXPECT_DOUBLE_EQ(*p.resolve(key("bfloat16", "matmul", "loss", "loss")).bound, 8);
  EXPECT_TRUE(p.add_gate("float32.operand_bits=11"));
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "matmul", "output", "output")).operand_bits, 11);
  EXPECT_FALSE(p.add_gate("float32.operand_bits=11.5"));  // significand bits are whole
  EXPECT_FALSE(p.add_gate("float32.operand_bits=30"));    // more than float32's own
  EXPECT_TRUE(p.add_gate("bfloat16.conv2d.grad_weight.max_ulp=8"));
  EXPECT_DOUBLE_EQ(*p.resolve(key("bfloat16", "conv2d", "grad", "grad_weight")).max_ulp, 8);
  EXPECT_FALSE(p.resolve(key("bfloat16", "matmul", "grad", "grad_B")).max_ulp);
  EXPECT_TRUE(p.add_gate("*.*.near_zero=0.02"));
  EXPECT_FALSE(p.add_gate("rtol"));                      // no value
  EXPECT_FALSE(p.add_gate("float32.rtolx=1"));           // unknown key
  EXPECT_FALSE(p.add_gate("float32.float16.rtol=1"));    // two dtypes
  EXPECT_FALSE(p.add_gate("float32.rtol=abc"));          // not a number
  EXPECT_FALSE(p.add_gate("float32.rtol=-1"));           // negative
  Status st = p.add_gate("float32.output.grad.rtol=1");  // two roles
  EXPECT_FALSE(st);
  EXPECT_NE(st.message().find("twice"), std::string::npos);
}

// Found by tests/fuzz/fuzz_policy.cpp (corpus/policy/regress_gate_invalid_utf8): a tensor selector
// of arbitrary bytes was accepted and the policy could then not be written as JSON (to_json threw
// type_error 316). A selector that is no dtype, op or role must be a tensor name, and the message
// shows the bytes escaped.
TEST(Policy, GateRejectsNonNameBytes) {
  Policy p = Policy::builtin();
  Status st = p.add_gate("\xff.rtol=1");
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find(
                "--gate \\xff.rtol=1: '\\xff' is neither a dtype, op or role nor a tensor name"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find('\xff'), std::string::npos);  // the raw byte never reaches stderr
  EXPECT_FALSE(p.add_gate("float32.out put.rtol=1"));
  EXPECT_FALSE(p.add_gate("grad/weight.rtol=1"));
  st = p.add_gate("float32.rtol=\x80");
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("'\\x80' is not a non-negative number"), std::string::npos)
      << st.message();
  // Nothing of the rejected gates was kept: the policy still writes and resolves as the builtin.
  EXPECT_NO_THROW((void)p.to_json().dump());
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "conv2d", "output", "output")).bound, 8);
  EXPECT_FALSE(p.resolve(key("float32", "conv2d", "output", "output")).rtol);
  // Real tensor names still select.
  ASSERT_TRUE(p.add_gate("grad_A.rtol=0.25"));
  EXPECT_DOUBLE_EQ(*p.resolve(key("float32", "matmul", "grad", "grad_A")).rtol, 0.25);
  EXPECT_FALSE(p.resolve(key("float32", "matmul", "grad", "grad_B")).rtol);
  EXPECT_NO_THROW((void)p.to_json().dump());
}

TEST(Policy, FileErrorsNameTheProblem) {
  Policy p = Policy::builtin();
  Status st =
      p.add_json(Json::parse(R"({"rules": [{"dtype": "float64", "rtol": 1}]})"), "pol.json");
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("pol.json rule 0: unknown dtype 'float64'"), std::string::npos)
      << st.message();
  st = p.add_json(Json::parse(R"({"format": "validate-policy/2", "rules": []})"), "pol.json");
  EXPECT_FALSE(st);
  st = p.add_json(Json::parse(R"({"rules": [{"rtol": "big"}]})"), "pol.json");
  EXPECT_FALSE(st);
  EXPECT_FALSE(p.add_file("/nonexistent/policy.json"));
}

// policies/default.json documents the built-in policy; it must say exactly the same thing.
TEST(Policy, DefaultPolicyFileEqualsBuiltin) {
  Policy file = Policy::empty();
  ASSERT_TRUE(file.add_file(std::string(VALIDATE_SOURCE_DIR) + "/policies/default.json"));
  const Policy builtin = Policy::builtin();
  for (const char* dt : {"float32", "bfloat16", "float16"})
    for (const char* op : {"conv2d", "matmul"})
      for (const char* role : {"input", "output", "loss", "grad"})
        for (const char* t : {"output", "loss", "grad_input", "grad_weight", "grad_bias", "grad_A",
                              "grad_B", "weight"}) {
          const Gates a = file.resolve(key(dt, op, role, t)),
                      b = builtin.resolve(key(dt, op, role, t));
          EXPECT_EQ(a.rtol, b.rtol) << dt << op << role << t;
          EXPECT_EQ(a.atol, b.atol);
          EXPECT_EQ(a.max_ulp, b.max_ulp);
          EXPECT_EQ(a.min_pcc, b.min_pcc);
          EXPECT_EQ(a.loss_abs, b.loss_abs);
          EXPECT_EQ(a.loss_rel, b.loss_rel);
          EXPECT_EQ(a.near_zero, b.near_zero);
          EXPECT_EQ(a.mistrust_zeros, b.mistrust_zeros);
        }
}

TEST(Policy, ToJsonRoundTrips) {
  Policy p = Policy::builtin();
  ASSERT_TRUE(p.add_gate("float32.conv2d.max_ulp=16"));
  Policy q = Policy::empty();
  ASSERT_TRUE(q.add_json(p.to_json(), "roundtrip"));
  EXPECT_EQ(q.resolve(key("float32", "conv2d", "grad", "grad_input")).max_ulp, 16.0);
  EXPECT_EQ(q.resolve(key("float32", "conv2d", "loss", "loss")).loss_abs, 1e-6);
}

// Op and role travel as enums through compare; names are parsed only where a policy is read
// (and written back by to_json). Every role must be reachable from its name, or a rule naming it
// would be refused (or, worse, select nothing).
TEST(Policy, RoleAndOpNamesAreParsedAtTheBoundary) {
  const auto& roles = ops::all_roles();
  EXPECT_EQ(roles.size(), 6u);  // input, output, loss, grad, loss_curve, checkpoint
  for (ops::Role r : roles) EXPECT_EQ(ops::role_from_name(ops::role_name(r)), r) << ops::role_name(r);
  EXPECT_EQ(ops::role_from_name("loss_curve"), ops::Role::loss_curve);
  EXPECT_FALSE(ops::role_from_name(""));
  EXPECT_FALSE(ops::role_from_name("ouput"));

  Policy p = Policy::empty();
  ASSERT_TRUE(p.add_json(nlohmann::json::parse(R"({"rules": [
      {"op": ["conv_transpose2d", "matmul"], "role": "checkpoint", "rtol": 0.5},
      {"rtol": 0.25}]})"),
                         "p.json"));
  const auto gate = [&](ops::Op op, std::optional<ops::Role> role) {
    return *p.resolve(TensorKey{"float32", op, role, "step3_weight"}).rtol;
  };
  EXPECT_DOUBLE_EQ(gate(ops::Op::conv_transpose2d, ops::Role::checkpoint), 0.5);
  EXPECT_DOUBLE_EQ(gate(ops::Op::matmul, ops::Role::checkpoint), 0.5);
  EXPECT_DOUBLE_EQ(gate(ops::Op::conv2d, ops::Role::checkpoint), 0.25);
  EXPECT_DOUBLE_EQ(gate(ops::Op::matmul, ops::Role::grad), 0.25);
  // A key whose metadata named no role matches only rules without a role selector.
  EXPECT_DOUBLE_EQ(gate(ops::Op::matmul, std::nullopt), 0.25);
  const auto j = p.to_json()["rules"][0];
  EXPECT_EQ(j["op"], nlohmann::json::parse(R"(["conv_transpose2d", "matmul"])"));
  EXPECT_EQ(j["role"], "checkpoint");
}
