#pragma once
// One reference case: a conv2d geometry and the matmul that is its im2col GEMM, with the names,
// canonical axes and shapes of every tensor each op reads or writes.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::cases {

struct ConvParams {
  std::int64_t n = 1, c = 8, h = 32, w = 32;  // input NCHW
  std::int64_t o = 32, kh = 3, kw = 3;        // weight OIHW (I = c / groups)
  std::array<std::int64_t, 2> stride{1, 1}, padding{1, 1}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;

  std::int64_t hout() const { return (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) / stride[0] + 1; }
  std::int64_t wout() const { return (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) / stride[1] + 1; }
  std::int64_t k() const { return (c / groups) * kh * kw; }  // reduction length per output
};

struct MatmulParams {
  std::int64_t m = 0, k = 0, n = 0;  // A[M,K] B[K,N] -> out[M,N]
};

enum class Op { conv2d, matmul };
const char* op_name(Op op);
std::optional<Op> op_from_name(const std::string& name);  // nullopt: not an op of this harness
inline constexpr Op kAllOps[] = {Op::conv2d, Op::matmul};

enum class Role { input, output, loss, grad };
const char* role_name(Role r);
// Every tensor name any op has (input, weight, ..., A, B, grad_B): what a policy may select.
const std::vector<std::string>& all_tensor_names();

struct TensorInfo {
  std::string name;            // "input", "weight", "grad_A", ...
  Role role;
  std::string canonical_axes;  // "NCHW", "OIHW", "O", "MK", "KN", "MN", "" (scalar)
  Shape shape;                 // canonical shape
};

struct Case {
  std::string name;  // k0072_ic008
  DType dtype = DType::float32;  // logical dtype
  ConvParams conv;
  MatmulParams matmul;  // the conv's im2col GEMM: M = N*Hout*Wout, K = C/groups*KH*KW, N = O
  bool has_conv = true, has_matmul = true;

  // Every tensor of the op in file order: inputs first (target is an input), then output, loss, grads.
  std::vector<TensorInfo> tensors(Op op) const;
  std::vector<TensorInfo> inputs(Op op) const;    // role input
  std::vector<TensorInfo> produced(Op op) const;  // output, loss, grads
  // "<case>_<op>_<tensor>.npy"
  std::string file_name(Op op, const std::string& tensor) const;
};

// Builds the matmul of a conv case: M = N*Hout*Wout, K = (C/groups)*KH*KW, N = O.
MatmulParams im2col_gemm(const ConvParams& c);

// The default sweep's naming: k{K:04d}_ic{ic:03d}.
std::string default_case_name(const ConvParams& c);

// Checks on geometry read from files written by others (case files and `<case>_metadata.json`),
// before anything divides by a stride or multiplies sizes: sizes, channels and kernel >= 1, stride
// and dilation >= 1, padding >= 0, groups dividing both channel counts, a non-empty output, every
// value below 2^31 (cuDNN and cuBLAS take int) and every tensor below kMaxElements elements, so no
// shape product overflows int64. `where` starts the message.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 36;
Status check_conv(const ConvParams& c, const std::string& where);
Status check_matmul(const MatmulParams& m, const std::string& where);
// Case names become file names: letters, digits, '_', '-', '.', at most 100, no path.
Status check_case_name(const std::string& name, const std::string& where);

}  // namespace validate::cases
