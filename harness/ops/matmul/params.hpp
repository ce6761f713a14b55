#pragma once
// matmul's problem descriptor: out[M,N] = A[M,K] B[K,N].
#include <cstdint>

namespace validate::ops {

struct MatmulParams {
  std::int64_t m = 0, k = 0, n = 0;  // A[M,K] B[K,N] -> out[M,N]
};

}  // namespace validate::ops
