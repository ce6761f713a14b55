// matmul's float64 reference: the oracle's arithmetic (the oracle backend calls it for every op).
//
// Determinism: every output element is accumulated in one fixed order — Y over k, dA over n,
// dB over m — independent of the layout and of the thread count.
#include "matmul/reference.hpp"

#include "ref_util.hpp"

namespace validate::ops::matmul {

using namespace ref;

namespace {

constexpr i64 kRowBlock = 64, kKBlock = 256;

// Stages B[k0:k1, :] as a contiguous [k][n] block.
void stage_b_rows(const View& b, i64 k0, i64 k1, i64 n, double* out) {
  for (i64 k = k0; k < k1; ++k)
    for (i64 j = 0; j < n; ++j) out[(k - k0) * n + j] = b.at(k, j);
}

}  // namespace

void matmul_forward(const MatmulParams& p, const View& a, const View& b, const View& y,
                    int threads) {
  const i64 M = p.m, K = p.k, N = p.n;
  const i64 mb = block_size(M, 1, threads, kRowBlock), nmb = (M + mb - 1) / mb;
  parallel_for(nmb, threads, [&](i64 item) {
    const i64 m0 = item * mb, m1 = std::min(m0 + mb, M);
    std::vector<double> acc(static_cast<std::size_t>((m1 - m0) * N), 0.0),
        bs(static_cast<std::size_t>(kKBlock * N));
    for (i64 k0 = 0; k0 < K; k0 += kKBlock) {
      const i64 k1 = std::min(k0 + kKBlock, K);
      stage_b_rows(b, k0, k1, N, bs.data());
      for (i64 m = m0; m < m1; ++m) {
        double* row = acc.data() + (m - m0) * N;
        for (i64 k = k0; k < k1; ++k) axpy(N, a.at(m, k), bs.data() + (k - k0) * N, 1, row, 1);
      }
    }
    for (i64 m = m0; m < m1; ++m)
      for (i64 j = 0; j < N; ++j) y.at(m, j) = acc[static_cast<std::size_t>((m - m0) * N + j)];
  });
}

void matmul_backward(const MatmulParams& p, const View& a, const View& b,
                     const std::vector<double>& dy, const View& ga, const View& gb, int threads) {
  const i64 M = p.m, K = p.k, N = p.n;
  // dA[m,k] = sum over n of dY[m,n] B[k,n]: B staged transposed, [n][k], per k block.
  if (ga) {
    const i64 mb = block_size(M, 1, threads, kRowBlock), nmb = (M + mb - 1) / mb;
    parallel_for(nmb, threads, [&](i64 item) {
      const i64 m0 = item * mb, m1 = std::min(m0 + mb, M);
      std::vector<double> bt(static_cast<std::size_t>(N * kKBlock)),
          acc(static_cast<std::size_t>(kKBlock));
      for (i64 k0 = 0; k0 < K; k0 += kKBlock) {
        const i64 k1 = std::min(k0 + kKBlock, K), kn = k1 - k0;
        for (i64 k = k0; k < k1; ++k)
          for (i64 j = 0; j < N; ++j) bt[static_cast<std::size_t>(j * kn + (k - k0))] = b.at(k, j);
        for (i64 m = m0; m < m1; ++m) {
          std::fill(acc.begin(), acc.begin() + kn, 0.0);
          const double* d = dy.data() + m * N;
          for (i64 j = 0; j < N; ++j) axpy(kn, d[j], bt.data() + j * kn, 1, acc.data(), 1);
          for (i64 k = k0; k < k1; ++k) ga.at(m, k) = acc[static_cast<std::size_t>(k - k0)];
        }
      }
    });
  }
  // dB[k,n] = sum over m of A[m,k] dY[m,n]: items are k blocks.
  if (gb) {
    const i64 kb = block_size(K, 1, threads, 64), nkb = (K + kb - 1) / kb;
    parallel_for(nkb, threads, [&](i64 item) {
      const i64 k0 = item * kb, k1 = std::min(k0 + kb, K);
      std::vector<double> acc(static_cast<std::size_t>((k1 - k0) * N), 0.0);
      for (i64 m = 0; m < M; ++m) {
        const double* d = dy.data() + m * N;
        for (i64 k = k0; k < k1; ++k) axpy(N, a.at(m, k), d, 1, acc.data() + (k - k0) * N, 1);
      }
      for (i64 k = k0; k < k1; ++k)
        for (i64 j = 0; j < N; ++j) gb.at(k, j) = acc[static_cast<std::size_t>((k - k0) * N + j)];
    });
  }
}

void matmul_forward_acc(const MatmulParams& p, const View& a, const View& b, const View& y, Accumulation acc) {
  for (i64 m = 0; m < p.m; ++m)
    for (i64 j = 0; j < p.n; ++j) {
      double s = 0;
      for (i64 k = 0; k < p.k; ++k) s = accumulate(s, a.at(m, k) * b.at(k, j), acc);
      y.at(m, j) = s;
    }
}

void matmul_backward_acc(const MatmulParams& p, const View& a, const View& b, const std::vector<double>& dy,
                         const View& ga, const View& gb, Accumulation acc) {
  auto d = [&](i64 m, i64 j) { return dy[static_cast<std::size_t>(m * p.n + j)]; };
  if (ga)
    for (i64 m = 0; m < p.m; ++m)
      for (i64 k = 0; k < p.k; ++k) {
        double s = 0;
        for (i64 j = 0; j < p.n; ++j) s = accumulate(s, d(m, j) * b.at(k, j), acc);
        ga.at(m, k) = s;
      }
  if (gb)
    for (i64 k = 0; k < p.k; ++k)
      for (i64 j = 0; j < p.n; ++j) {
        double s = 0;
        for (i64 m = 0; m < p.m; ++m) s = accumulate(s, a.at(m, k) * d(m, j), acc);
        gb.at(k, j) = s;
      }
}

double reference(const MatmulParams& p, const Views& v, const ReferenceOptions& opt) {
  const View a = view_of(v, "A"), b = view_of(v, "B"), y = view_of(v, "output");
  std::vector<double> dy;
  if (opt.accumulation == Accumulation::float64)
    matmul_forward(p, a, b, y, opt.threads);
  else
    matmul_forward_acc(p, a, b, y, opt.accumulation);
  const double loss = mse({p.m, p.n}, y, view_of(v, "target"), opt.loss_on, dy);
  const View ga = view_of(v, "grad_A"), gb = view_of(v, "grad_B");
  if (opt.accumulation == Accumulation::float64)
    matmul_backward(p, a, b, dy, ga, gb, opt.threads);
  else
    matmul_backward_acc(p, a, b, dy, ga, gb, opt.accumulation);
  return loss;
}

}  // namespace validate::ops::matmul
