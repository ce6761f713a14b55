#pragma once
// The op registry: everything a component needs to know about an op, behind one interface. A
// component loops over `registry()` or looks an op up with `find()`; it never writes
// `op == conv2d ? ... : ...`. Each op implements OpDef in harness/ops/<op>/<op>.cpp and is listed
// once in src/registry.cpp. docs/architecture.md has the "how to add an op" checklist.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"
#include "validate/ops/element.hpp"
#include "validate/ops/op.hpp"
#include "validate/ops/reference.hpp"

namespace validate::ops {

class OpDef {
 public:
  virtual ~OpDef() = default;
  virtual Op id() const = 0;
  virtual const char* name() const = 0;  // "conv2d": file names, metadata keys, VALIDATE_OP
  virtual OpParams default_params() const = 0;

  // --- tensors -------------------------------------------------------------------------------
  // Every tensor in file order: inputs first (target is an input), then output, loss, grads.
  virtual std::vector<TensorInfo> tensors(const OpParams& p) const = 0;
  // Reduction length of one output element (the "K" of error-versus-K plots and input scaling).
  virtual std::int64_t reduction_length(const OpParams& p) const = 0;
  // Rejects geometry from files written by others before anything divides or multiplies by it.
  virtual Status check(const OpParams& p, const std::string& where) const = 0;
  // Elements of the largest scratch buffer an implementation without a direct algorithm
  // materializes: a convolution's im2col/col2im columns (LibTorch's CPU slow_conv2d allocates them
  // for the whole batch), 0 for a GEMM. generate budgets its memory with it.
  virtual std::int64_t scratch_elements(const OpParams& p) const = 0;

  // --- case files (cases/*.json) ----------------------------------------------------------------
  // The keys a case entry of this op may have, and applying them over `p` ("name", "op", "dtypes"
  // are the case file's own and never reach the op).
  virtual std::set<std::string> case_keys() const = 0;
  virtual Status apply_case_keys(const Json& j, OpParams& p, const std::string& where) const = 0;
  // The default case name when a case gives none.
  virtual std::string default_case_name(const OpParams& p) const = 0;
  // The case as config.json's "expanded_cases" lists it (geometry keys, as case files spell them).
  virtual Json expanded_case(const OpParams& p) const = 0;

  // --- <case>_metadata.json (validate-reference/1) ---------------------------------------------
  virtual Json metadata_params(const OpParams& p) const = 0;  // ops.<op>.params
  // Rebuilds the parameters from ops.<op> (params + tensor shapes); checked.
  virtual Result<OpParams> from_metadata(const Json& op_json, const std::string& where) const = 0;

  // --- exec protocol (docs/runners.md) ----------------------------------------------------------
  virtual Json exec_params(const OpParams& p) const = 0;  // case.json "params"
  virtual std::vector<std::pair<const char*, std::int64_t>> exec_env(const OpParams& p) const = 0;

  // --- layouts ------------------------------------------------------------------------------------
  // The op's entries of a named preset: (tensor names, spec text). Empty: canonical everywhere.
  virtual std::vector<std::pair<std::vector<const char*>, const char*>> preset(std::string_view preset) const = 0;

  // --- float64 reference (forward, MSE loss, backward) -----------------------------------------
  // Reads the inputs of `v`, writes every produced view present; returns the loss.
  virtual double reference(const OpParams& p, const Views& v, const ReferenceOptions& opt) const = 0;
  // The forward summation orders the reference follows (ReferenceOptions::order), canonical first,
  // each named as reports print it ("c,kh,kw") and in words: what the diagnosis tries when it asks
  // "was this accumulated in a narrow type?".
  struct NamedOrder {
    SumOrder order;
    const char* name;   // "c,kh,kw", "kh,kw,c", "k"
    const char* words;  // "summed channel by channel, the kernel window innermost"
  };
  virtual std::vector<NamedOrder> sum_orders() const = 0;
  // Which operand indexes each output's and gradient's sum, and along which of its axes (outer to
  // inner, as the canonical loop nests them): every term of element e's sum pairs one element of
  // that operand ("dy" for dL/dy) along those axes with fixed indices elsewhere, so zeroing the
  // operand outside a range of them leaves each element the part of its sum over that range.
  // generate measures the partial sums of data the user supplies with it ("Partial sums on the
  // data at hand", docs/compare.md).
  struct Reduction {
    const char* tensor;   // "output", "grad_A"
    const char* carrier;  // a leaf's name, or "dy"
    std::vector<int> axes;
  };
  virtual std::vector<Reduction> reductions() const = 0;

  // --- one output element, in place (element.hpp) ----------------------------------------------
  // The op's operand slots, named (inputs in tensor-table order, target excluded), data unset.
  virtual ElementOperands element_operands() const = 0;
  // The float64 output at flat canonical index `i`, read through `in` (bytes + strides, any layout,
  // per-load rounding), summed as `opt` says: with the same options, what reference() writes at i.
  // The diagnosis's sampled recomputes call it a few hundred times per hypothesis.
  virtual double output_element(const OpParams& p, std::int64_t i, const ElementOperands& in,
                                const ElementOptions& opt) const = 0;
};

// The op's default parameters with every optional tensor present (a bias): its full tensor table,
// for what lists names (layout files, policies).
OpParams with_all_tensors(const OpDef& def);

// Every op, in Op order.
const std::vector<const OpDef*>& registry();
const OpDef& find(Op op);
const OpDef* find(std::string_view name);  // nullptr for an unknown name

// Typed access for an op's own code: the OpDef of P's op. OpDefFor<P> implements the variant
// unwrapping once.
template <class P>
class OpDefFor : public OpDef {
 public:
  Op id() const final { return op_of<P>(); }
  OpParams default_params() const final { return P{}; }
  std::vector<TensorInfo> tensors(const OpParams& p) const final { return tensors_of(std::get<P>(p)); }
  std::int64_t reduction_length(const OpParams& p) const final { return reduction_length_of(std::get<P>(p)); }
  std::int64_t scratch_elements(const OpParams& p) const final { return scratch_elements_of(std::get<P>(p)); }
  Status check(const OpParams& p, const std::string& where) const final { return check_of(std::get<P>(p), where); }
  Status apply_case_keys(const Json& j, OpParams& p, const std::string& where) const final {
    return apply_case_keys_of(j, std::get<P>(p), where);
  }
  std::string default_case_name(const OpParams& p) const final { return default_case_name_of(std::get<P>(p)); }
  Json expanded_case(const OpParams& p) const final { return expanded_case_of(std::get<P>(p)); }
  Json metadata_params(const OpParams& p) const final { return metadata_params_of(std::get<P>(p)); }
  Result<OpParams> from_metadata(const Json& j, const std::string& where) const final {
    auto r = from_metadata_of(j, where);
    if (!r) return r.status();
    return OpParams{*r};
  }
  Json exec_params(const OpParams& p) const final { return exec_params_of(std::get<P>(p)); }
  std::vector<std::pair<const char*, std::int64_t>> exec_env(const OpParams& p) const final {
    return exec_env_of(std::get<P>(p));
  }
  double reference(const OpParams& p, const Views& v, const ReferenceOptions& opt) const final {
    return reference_of(std::get<P>(p), v, opt);
  }
  double output_element(const OpParams& p, std::int64_t i, const ElementOperands& in,
                        const ElementOptions& opt) const final {
    return output_element_of(*std::get_if<P>(&p), i, in, opt);
  }

 protected:
  virtual std::vector<TensorInfo> tensors_of(const P& p) const = 0;
  virtual std::int64_t reduction_length_of(const P& p) const = 0;
  virtual std::int64_t scratch_elements_of(const P& p) const = 0;
  virtual Status check_of(const P& p, const std::string& where) const = 0;
  virtual Status apply_case_keys_of(const Json& j, P& p, const std::string& where) const = 0;
  virtual std::string default_case_name_of(const P& p) const = 0;
  virtual Json expanded_case_of(const P& p) const = 0;
  virtual Json metadata_params_of(const P& p) const = 0;
  virtual Result<P> from_metadata_of(const Json& j, const std::string& where) const = 0;
  virtual Json exec_params_of(const P& p) const = 0;
  virtual std::vector<std::pair<const char*, std::int64_t>> exec_env_of(const P& p) const = 0;
  virtual double reference_of(const P& p, const Views& v, const ReferenceOptions& opt) const = 0;
  virtual double output_element_of(const P& p, std::int64_t i, const ElementOperands& in,
                                   const ElementOptions& opt) const = 0;
};

}  // namespace validate::ops
