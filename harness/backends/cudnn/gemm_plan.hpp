#pragma once
// How a matrix layout spec becomes row- or column-major storage, and how a product out = x · z of
// matrices in any storage becomes one column-major BLAS call D(m×n) = op(A)(m×k) · op(B)(k×n).
// Pure arithmetic on specs and shapes, no CUDA, so the mapping is tested on the CPU against a
// plain BLAS-semantics reference (tests/gpu/test_cudnn_gemm_plan.cpp).
#include <cstdint>
#include <string>
#include <string_view>

#include "validate/layout/spec.hpp"

namespace validate::runners::cudnn_detail {

// A flipped axis cannot be a leading dimension (cuBLAS has no negative ones): such a matrix is
// converted on the device to the same order without the flip.
struct MatPlan {
  layout::Spec stack;      // the layout of the buffer cuBLASLt sees
  std::string path;        // native | converted
  bool col_major = false;  // over the canonical (rows, cols)
};

inline MatPlan plan_matrix(const layout::Spec& s, std::string_view axes) {
  MatPlan p{s, "native", false};
  if (!s.flip.empty()) p = {layout::Spec{s.axes, s.fortran, ""}, "converted", false};
  // The axis that is fastest in memory: the last one written for C order, the first for :F.
  // Column-major over canonical (rows, cols) means the rows axis is fastest (MK:F, and NK for B).
  const char fastest = p.stack.fortran ? p.stack.axes.front() : p.stack.axes.back();
  p.col_major = fastest == axes[0];
  return p;
}

// A matrix as stored: rows × cols over a buffer, column- or row-major. Its transpose is the same
// bytes with the other order.
struct Mat {
  const void* p;
  std::int64_t rows, cols;
  bool col_major;
  Mat t() const { return {p, cols, rows, !col_major}; }
};

struct GemmPlan {
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;                       // A operand buffer
  bool trans_a = false;                          // op(A) = Aᵀ
  std::int64_t a_rows = 0, a_cols = 0, lda = 0;  // A as stored (column-major)
  const void* b = nullptr;
  bool trans_b = false;
  std::int64_t b_rows = 0, b_cols = 0, ldb = 0;
  std::int64_t ldc = 0;  // D is m × n, column-major
};

// out = x · z. A row-major `out` is computed as the column-major outᵀ = zᵀ · xᵀ; an operand whose
// storage is row-major is the column-major storage of its transpose, passed with op T.
inline GemmPlan plan_gemm(Mat out, Mat x, Mat z) {
  if (!out.col_major) {
    const Mat ot = out.t(), zt = z.t(), xt = x.t();
    return plan_gemm(ot, zt, xt);
  }
  GemmPlan g;
  g.m = out.rows;
  g.n = out.cols;
  g.k = x.cols;
  g.a = x.p;
  g.trans_a = !x.col_major;
  g.a_rows = x.col_major ? g.m : g.k;
  g.a_cols = x.col_major ? g.k : g.m;
  g.lda = g.a_rows;
  g.b = z.p;
  g.trans_b = !z.col_major;
  g.b_rows = z.col_major ? g.k : g.n;
  g.b_cols = z.col_major ? g.n : g.k;
  g.ldb = g.b_rows;
  g.ldc = g.m;
  return g;
}

}  // namespace validate::runners::cudnn_detail
