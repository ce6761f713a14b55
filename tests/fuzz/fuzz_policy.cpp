// libFuzzer target: compare policies (harness/compare policy.hpp). The first byte picks a policy
// JSON document (Policy::add_json over the built-in rules, as --policy FILE) or a --gate assignment
// (Policy::add_gate); an accepted policy is resolved for every dtype/op/role and written back with
// to_json, as the reports do.
#include "fuzz_util.hpp"
#include "validate/compare/policy.hpp"

using namespace validate;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_policy: invariant broken: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const compare::Policy kBuiltin = compare::Policy::builtin();
  compare::Policy p = kBuiltin;
  Status st;
  if (data[0] & 1) {
    nlohmann::json j = fuzz::parse_json(data + 1, size - 1);
    if (j.is_discarded()) return 0;
    st = p.add_json(j, "fuzz.json");
  } else {
    // Several assignments separated by newlines, as several --gate options.
    std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    std::size_t start = 0;
    while (st && start <= text.size()) {
      auto nl = text.find('\n', start);
      st = p.add_gate(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  if (!st) return 0;
  for (const char* dtype : {"float32", "bfloat16", "float16"})
    for (ops::Op op : {ops::Op::conv2d, ops::Op::matmul, ops::Op::conv_transpose2d})
      for (ops::Role role : ops::all_roles())
        for (const char* tensor : {"output", "loss", "grad_weight", "grad_A"}) {
          compare::Gates g = p.resolve({dtype, op, role, tensor});
          for (auto v : {g.max_ulp, g.atol, g.rtol, g.min_pcc, g.loss_abs, g.loss_rel})
            if (v && !(*v >= 0)) fail("resolved a negative or NaN gate");
        }
  try {
    (void)p.to_json().dump();
  } catch (const nlohmann::json::exception& e) {
    // Every accepted policy must be writable: the reports embed it. (A --gate tensor selector of
    // arbitrary bytes was accepted and made this throw, type_error 316; add_gate now takes letters,
    // digits and '_' only: corpus/policy/regress_gate_invalid_utf8,
    // Policy.GateRejectsNonNameBytes.)
    std::fprintf(stderr, "%s\n", e.what());
    fail("to_json() of an accepted policy cannot be written");
  }
  return 0;
}
