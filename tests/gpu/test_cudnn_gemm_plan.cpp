// The matmul runner's mapping from layout specs to one column-major BLAS call, checked on the CPU
// (no device): every product the runner issues (Y = A·B, dA = dY·Bᵀ, dB = Aᵀ·dY) in every
// combination of row- and column-major storage, evaluated with BLAS semantics on buffers laid out
// by the layout module, against the plain triple loop. If the transposes or leading dimensions were
// wrong, cuBLASLt would be handed exactly these wrong arguments.
#include <gtest/gtest.h>

#include <vector>

#include "gemm_plan.hpp"
#include "validate/layout/layout.hpp"

namespace validate::runners::cudnn_detail {
namespace {

// D = op(A) · op(B), column-major, as cublasLtMatmul defines it.
std::vector<double> blas(const GemmPlan& g) {
  const auto* a = static_cast<const double*>(g.a);
  const auto* b = static_cast<const double*>(g.b);
  std::vector<double> d(static_cast<std::size_t>(g.m * g.n), 0.0);
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < g.n; ++j)
      for (std::int64_t p = 0; p < g.k; ++p) {
        const double av = g.trans_a ? a[p + i * g.lda] : a[i + p * g.lda];
        const double bv = g.trans_b ? b[j + p * g.ldb] : b[p + j * g.ldb];
        d[static_cast<std::size_t>(i + j * g.ldc)] += av * bv;
      }
  return d;
}

// A canonical R×C matrix (row-major) with distinct values, and its bytes in layout `spec`.
struct Stored {
  Tensor canonical, bytes;
  MatPlan plan;
};
Stored store(std::int64_t rows, std::int64_t cols, const char* axes, const char* spec_text,
             double base) {
  auto spec = layout::parse_spec(spec_text, axes);
  EXPECT_TRUE(spec) << spec.message();
  Stored s;
  s.canonical = Tensor(DType::float64, {rows, cols});
  for (std::int64_t i = 0; i < rows * cols; ++i)
    s.canonical.data<double>()[i] = base + 0.5 * static_cast<double>(i % 97) - 3 * (i % 5);
  s.plan = plan_matrix(*spec, axes);
  s.bytes = layout::to_layout(s.canonical, axes, s.plan.stack);
  return s;
}

// Reads the m×n result the plan wrote (column-major D, which is `out` in its own storage) back
// to canonical row-major.
std::vector<double> canonical_result(const std::vector<double>& d, std::int64_t rows,
                                     std::int64_t cols, bool out_col_major) {
  std::vector<double> r(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      r[static_cast<std::size_t>(i * cols + j)] = out_col_major
                                                      ? d[static_cast<std::size_t>(i + j * rows)]
                                                      : d[static_cast<std::size_t>(i * cols + j)];
  return r;
}

std::vector<double> matmul(const Tensor& x, const Tensor& z, bool tx, bool tz) {
  // canonical row-major x (R×K or, transposed, K×R) and z
  const std::int64_t r = tx ? x.shape()[1] : x.shape()[0], k = tx ? x.shape()[0] : x.shape()[1];
  const std::int64_t c = tz ? z.shape()[0] : z.shape()[1];
  std::vector<double> y(static_cast<std::size_t>(r * c), 0.0);
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j)
      for (std::int64_t p = 0; p < k; ++p) {
        const double xv = tx ? x.data<double>()[p * x.shape()[1] + i] : x.data<double>()[i * k + p];
        const double zv = tz ? z.data<double>()[j * z.shape()[1] + p] : z.data<double>()[p * c + j];
        y[static_cast<std::size_t>(i * c + j)] += xv * zv;
      }
  return y;
}

TEST(CudnnGemmPlan, SpecsMapToStorageOrder) {
  auto col = [](const char* spec, const char* axes) {
    return plan_matrix(*layout::parse_spec(spec, axes), axes).col_major;
  };
  EXPECT_FALSE(col("MK", "MK"));
  EXPECT_TRUE(col("MK:F", "MK"));
  EXPECT_TRUE(col("KM", "MK"));
  EXPECT_FALSE(col("KM:F", "MK"));
  EXPECT_TRUE(col("NK", "KN"));  // PyTorch's Linear weight [out, in] is B column-major
  EXPECT_TRUE(col("KN:F", "KN"));
  const auto flipped = plan_matrix(*layout::parse_spec("KN+flip=K", "KN"), "KN");
  EXPECT_EQ(flipped.path, "converted");
  EXPECT_TRUE(flipped.stack.flip.empty());
}

TEST(CudnnGemmPlan, EveryProductInEveryStorageOrder) {
  const std::int64_t M = 7, K = 5, N = 3;  // all different, so a swapped dimension cannot hide
  const char* a_specs[] = {"MK", "MK:F", "KM", "KM+flip=M"};
  const char* b_specs[] = {"KN", "KN:F", "NK", "NK:F"};
  const char* y_specs[] = {"MN", "MN:F", "NM"};
  for (const char* as : a_specs)
    for (const char* bs : b_specs)
      for (const char* ys : y_specs) {
        const std::string what = std::string("A ") + as + ", B " + bs + ", Y/dY " + ys;
        Stored A = store(M, K, "MK", as, 1), B = store(K, N, "KN", bs, -2),
               dY = store(M, N, "MN", ys, 0.25);
        const bool y_col = plan_matrix(*layout::parse_spec(ys, "MN"), "MN").col_major;
        const Mat ma{A.bytes.bytes(), M, K, A.plan.col_major},
            mb{B.bytes.bytes(), K, N, B.plan.col_major};
        const Mat mdy{dY.bytes.bytes(), M, N, dY.plan.col_major};
        // Y = A·B into Y's storage.
        auto g = plan_gemm(Mat{nullptr, M, N, y_col}, ma, mb);
        EXPECT_EQ(canonical_result(blas(g), M, N, y_col),
                  matmul(A.canonical, B.canonical, false, false))
            << what;
        // dA = dY·Bᵀ into a column-major and a row-major grad_A.
        for (bool ga_col : {false, true}) {
          g = plan_gemm(Mat{nullptr, M, K, ga_col}, mdy, mb.t());
          EXPECT_EQ(canonical_result(blas(g), M, K, ga_col),
                    matmul(dY.canonical, B.canonical, false, true))
              << what << ", grad_A " << (ga_col ? "col" : "row");
        }
        // dB = Aᵀ·dY.
        for (bool gb_col : {false, true}) {
          g = plan_gemm(Mat{nullptr, K, N, gb_col}, ma.t(), mdy);
          EXPECT_EQ(canonical_result(blas(g), K, N, gb_col),
                    matmul(A.canonical, dY.canonical, true, false))
              << what << ", grad_B " << (gb_col ? "col" : "row");
        }
      }
}

}  // namespace
}  // namespace validate::runners::cudnn_detail
