// matmul, one output element in place (OpDef::output_element): out[m,n] = sum over k, ascending,
// of A[m,k] B[k,n], read through the operands' strides. matmul has one order (k) and no bias.
// Written apart from ref_matmul.cpp on purpose: tests/ops hold the two against each other.
#include "element_sum.hpp"
#include "matmul/reference.hpp"

namespace validate::ops::matmul {

double output_element(const MatmulParams& p, std::int64_t i, const ElementOperands& in, const ElementOptions& opt) {
  using element::i64;
  const ElementOperand &a = in.slot[0], &b = in.slot[1];
  const i64 a0 = a.base + i / p.n * a.stride[0], b0 = b.base + i % p.n * b.stride[1];
  const i64 as = a.stride[1], bs = b.stride[0];
  return element::sum_element(a.plain() && b.plain(), opt, false, 0.0, [&](auto load, auto sum, double s) {
    for (i64 k = 0; k < p.k; ++k) s = sum(s, load(a, a0 + k * as) * load(b, b0 + k * bs));
    return s;
  });
}

}  // namespace validate::ops::matmul
