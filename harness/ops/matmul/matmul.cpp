// matmul: out[M,N] = A[M,K] B[K,N], MSE loss, grad_A and grad_B. In the default sweep it is the
// im2col GEMM of a conv2d case (conv2d/im2col.hpp); case files do not declare it on its own.
#include <fmt/format.h>

#include "matmul/reference.hpp"
#include "validate/ops/params_json.hpp"
#include "validate/ops/registry.hpp"

namespace validate::ops {

namespace {

class Matmul final : public OpDefFor<MatmulParams> {
 public:
  const char* name() const override { return "matmul"; }

  std::vector<std::pair<std::vector<const char*>, const char*>> preset(std::string_view preset) const override {
    if (preset == "fortran")
      // Column-major matrices A(M,K), B(K,N), Y(M,N), as cuBLAS and BLAS take them.
      return {{{"A", "grad_A"}, "MK:F"}, {{"B", "grad_B"}, "KN:F"}, {{"target", "output"}, "MN:F"}};
    if (preset == "linear_in_out") return {{{"B", "grad_B"}, "KN"}};  // a Linear weight stored [in, out]
    if (preset == "linear_out_in") return {{{"B", "grad_B"}, "NK"}};  // nn.Linear's weight: [out, in]
    return {};
  }

  std::set<std::string> case_keys() const override {
    return {"M", "K", "N"};
  }

  std::vector<NamedOrder> sum_orders() const override { return {{SumOrder::canonical, "k", "summed over k in order"}}; }

  // y[m,n] = sum_k A[m,k] B[k,n]; grad_A = dy B^T (over n), grad_B = A^T dy (over m).
  std::vector<Reduction> reductions() const override {
    return {{"output", "A", {1}}, {"grad_A", "dy", {1}}, {"grad_B", "dy", {0}}};
  }

  ElementOperands element_operands() const override {
    ElementOperands e;
    e.name = {"A", "B", nullptr, nullptr};
    return e;
  }

 protected:
  std::vector<TensorInfo> tensors_of(const MatmulParams& p) const override {
    return {{"A", Role::input, "MK", {p.m, p.k}},      {"B", Role::input, "KN", {p.k, p.n}, true},
            {"target", Role::input, "MN", {p.m, p.n}}, {"output", Role::output, "MN", {p.m, p.n}},
            {"loss", Role::loss, "", {}},              {"grad_A", Role::grad, "MK", {p.m, p.k}},
            {"grad_B", Role::grad, "KN", {p.k, p.n}}};
  }

  std::int64_t reduction_length_of(const MatmulParams& p) const override { return p.k; }
  std::int64_t scratch_elements_of(const MatmulParams&) const override { return 0; }  // BLAS needs none

  Status check_of(const MatmulParams& m, const std::string& where) const override {
    if (m.m < 1 || m.k < 1 || m.n < 1 || m.m > kMaxElements || m.k > kMaxExtent || m.n > kMaxExtent)
      return Error{fmt::format("{}: matmul M={} K={} N={} must be >= 1 (and K, N < 2^31)", where, m.m, m.k, m.n)};
    if (bounded_product({m.m, m.k}) < 0 || bounded_product({m.k, m.n}) < 0 || bounded_product({m.m, m.n}) < 0)
      return Error{fmt::format("{}: matmul M={} K={} N={} has a tensor of more than 2^36 elements", where, m.m, m.k, m.n)};
    return Status::ok();
  }

  Status apply_case_keys_of(const Json& j, MatmulParams& p, const std::string& where) const override {
    VALIDATE_TRY(read_int(j, "M", p.m, where));
    VALIDATE_TRY(read_int(j, "K", p.k, where));
    return read_int(j, "N", p.n, where);
  }

  std::string default_case_name_of(const MatmulParams& p) const override {
    return fmt::format("mm_m{}_k{}_n{}", p.m, p.k, p.n);
  }

  Json expanded_case_of(const MatmulParams& p) const override { return metadata_params_of(p); }

  Json metadata_params_of(const MatmulParams& p) const override { return {{"M", p.m}, {"K", p.k}, {"N", p.n}}; }

  Result<MatmulParams> from_metadata_of(const Json& o, const std::string& where) const override {
    const Json& p = o.at("params");
    MatmulParams m{int_value(p.at("M"), "M"), int_value(p.at("K"), "K"), int_value(p.at("N"), "N")};
    VALIDATE_TRY(check_of(m, where));
    return m;
  }

  Json exec_params_of(const MatmulParams& p) const override { return metadata_params_of(p); }

  std::vector<std::pair<const char*, std::int64_t>> exec_env_of(const MatmulParams& p) const override {
    return {{"VALIDATE_M", p.m}, {"VALIDATE_K", p.k}, {"VALIDATE_NCOLS", p.n}};
  }

  double reference_of(const MatmulParams& p, const Views& v, const ReferenceOptions& opt) const override {
    return matmul::reference(p, v, opt);
  }
  double output_element_of(const MatmulParams& p, std::int64_t i, const ElementOperands& in,
                           const ElementOptions& opt) const override {
    return matmul::output_element(p, i, in, opt);
  }
};

}  // namespace

const OpDef& matmul_def() {
  static const Matmul def;
  return def;
}

}  // namespace validate::ops
