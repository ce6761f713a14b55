#pragma once
// matmul's float64 reference (forward, backward) on strided views: Y[M,N] = A[M,K] B[K,N].
#include <vector>

#include "matmul/params.hpp"
#include "validate/ops/element.hpp"
#include "validate/ops/reference.hpp"

namespace validate::ops::matmul {

void matmul_forward(const MatmulParams& p, const View& a, const View& b, const View& y, int threads);
// From dY (canonical MN, contiguous): gA = dY B^T, gB = A^T dY.
void matmul_backward(const MatmulParams& p, const View& a, const View& b, const std::vector<double>& dy,
                     const View& ga, const View& gb, int threads);

// The same sums element by element (Y over k, dA over n, dB over m), the running sum rounded as
// `acc` says after every add (the diagnosis's narrow-accumulation recompute). matmul has one
// summation order (k ascending) and no bias: ReferenceOptions::order and bias_first do not apply.
void matmul_forward_acc(const MatmulParams& p, const View& a, const View& b, const View& y, Accumulation acc);
void matmul_backward_acc(const MatmulParams& p, const View& a, const View& b, const std::vector<double>& dy,
                         const View& ga, const View& gb, Accumulation acc);

// Forward, MSE loss against "target", backward, on the views named by matmul's tensor table.
double reference(const MatmulParams& p, const Views& v, const ReferenceOptions& opt);

// One output element at flat canonical index i, read in place through `in` (element_matmul.cpp;
// OpDef::output_element).
double output_element(const MatmulParams& p, std::int64_t i, const ElementOperands& in, const ElementOptions& opt);

}  // namespace validate::ops::matmul
