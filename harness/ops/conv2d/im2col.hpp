#pragma once
// The pairing the default sweep uses: a conv2d case also carries the matmul that is its im2col
// GEMM, so error-versus-K is measured on both with the same K.
#include "conv2d/params.hpp"
#include "matmul/params.hpp"

namespace validate::ops {

// M = N*Hout*Wout, K = (C/groups)*KH*KW, N = O.
inline MatmulParams im2col_gemm(const ConvParams& c) { return MatmulParams{c.n * c.hout() * c.wout(), c.k(), c.o}; }

}  // namespace validate::ops
