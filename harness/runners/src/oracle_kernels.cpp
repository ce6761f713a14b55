#include "oracle_kernels.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

namespace validate::runners::oracle {

namespace {

using i64 = std::int64_t;

// Runs f(i) for i in [0, n) on up to `threads` threads, handing items out one at a time (items
// are coarse: an output-channel block, a row block). Each item owns its outputs, so the result
// does not depend on which thread ran what.
template <class F>
void parallel_for(i64 n, int threads, F&& f) {
  const int t = static_cast<int>(std::min<i64>(std::max(threads, 1), n));
  if (t <= 1) {
    for (i64 i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<i64> next{0};
  auto work = [&] {
    for (i64 i = next++; i < n; i = next++) f(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(t - 1));
  for (int k = 1; k < t; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

i64 floor_div(i64 a, i64 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
i64 ceil_div(i64 a, i64 b) { return -floor_div(-a, b); }

// Output positions o in [0, out) whose input position o*s - pad + k*d lies in [0, in).
struct Range {
  i64 lo, hi;
};
Range valid(i64 out, i64 in, i64 s, i64 pad, i64 kd) {
  const i64 lo = std::max<i64>(0, ceil_div(pad - kd, s));
  const i64 hi = std::min<i64>(out, floor_div(in - 1 + pad - kd, s) + 1);
  return {lo, std::max(lo, hi)};
}

// Splits `n` into blocks of at most `cap`, small enough that there are about 2 items per thread.
i64 block_size(i64 n, i64 outer, int threads, i64 cap) {
  i64 b = std::min(n, cap);
  while (b > 1 && outer * ((n + b - 1) / b) < 2 * static_cast<i64>(threads)) b = (b + 1) / 2;
  return std::max<i64>(b, 1);
}

// Stages plane (i0, i1, :, :) of a 4-d view into a contiguous [h][w] buffer.
void stage_plane(const View& v, i64 i0, i64 i1, i64 h, i64 w, double* out) {
  for (i64 y = 0; y < h; ++y) {
    const double* src = &v.at(i0, i1, y, 0);
    const i64 s = v.stride[3];
    for (i64 x = 0; x < w; ++x) out[y * w + x] = src[x * s];
  }
}

// a[j*as] += v * x[j*xs], j < n; the unit-stride case is kept separate so it vectorises.
inline void axpy(i64 n, double v, const double* x, i64 xs, double* a, i64 as) {
  if (xs == 1 && as == 1) {
    for (i64 j = 0; j < n; ++j) a[j] += v * x[j];
  } else {
    for (i64 j = 0; j < n; ++j) a[j * as] += v * x[j * xs];
  }
}

}  // namespace

void conv_forward(const cases::ConvParams& p, const View& x, const View& w, const View& b,
                  const View& y, int threads) {
  const i64 G = p.groups, Cg = p.c / G, Og = p.o / G, Ho = p.hout(), Wo = p.wout(), P = Ho * Wo;
  const i64 ob = block_size(Og, p.n * G, threads, 8), nb = (Og + ob - 1) / ob;
  parallel_for(p.n * G * nb, threads, [&](i64 item) {
    const i64 n = item / (G * nb), g = item / nb % G, o0 = g * Og + item % nb * ob,
              o1 = std::min(o0 + ob, (g + 1) * Og);
    std::vector<double> acc(static_cast<std::size_t>((o1 - o0) * P), 0.0),
        xs(static_cast<std::size_t>(p.h * p.w));
    for (i64 ci = 0; ci < Cg; ++ci) {
      stage_plane(x, n, g * Cg + ci, p.h, p.w, xs.data());
      for (i64 kh = 0; kh < p.kh; ++kh) {
        const Range rh = valid(Ho, p.h, p.stride[0], p.padding[0], kh * p.dilation[0]);
        for (i64 kw = 0; kw < p.kw; ++kw) {
          const Range rw = valid(Wo, p.w, p.stride[1], p.padding[1], kw * p.dilation[1]);
          if (rw.hi <= rw.lo) continue;
          const i64 iw0 = rw.lo * p.stride[1] - p.padding[1] + kw * p.dilation[1];
          for (i64 o = o0; o < o1; ++o) {
            const double wv = w.at(o, ci, kh, kw);
            double* a = acc.data() + (o - o0) * P;
            for (i64 oh = rh.lo; oh < rh.hi; ++oh) {
              const i64 ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              axpy(rw.hi - rw.lo, wv, xs.data() + ih * p.w + iw0, p.stride[1], a + oh * Wo + rw.lo,
                   1);
            }
          }
        }
      }
    }
    for (i64 o = o0; o < o1; ++o) {
      const double bias = b ? b.at(o) : 0.0;
      const double* a = acc.data() + (o - o0) * P;
      for (i64 oh = 0; oh < Ho; ++oh)
        for (i64 ow = 0; ow < Wo; ++ow) y.at(n, o, oh, ow) = a[oh * Wo + ow] + bias;
    }
  });
}

void conv_backward(const cases::ConvParams& p, const View& x, const View& w,
                   const std::vector<double>& dy, const View& gx, const View& gw, const View& gb,
                   int threads) {
  const i64 G = p.groups, Cg = p.c / G, Og = p.o / G, Ho = p.hout(), Wo = p.wout(), P = Ho * Wo,
            HW = p.h * p.w;
  const auto dy_plane = [&](i64 n, i64 o) { return dy.data() + (n * p.o + o) * P; };

  // dx[n,c,ih,iw] = sum over o of c's group, kh, kw of w[o,ci,kh,kw] dy[n,o,oh,ow].
  if (gx) {
    const i64 cb = block_size(Cg, p.n * G, threads, 16), nb = (Cg + cb - 1) / cb;
    parallel_for(p.n * G * nb, threads, [&](i64 item) {
      const i64 n = item / (G * nb), g = item / nb % G, c0 = g * Cg + item % nb * cb,
                c1 = std::min(c0 + cb, (g + 1) * Cg);
      std::vector<double> acc(static_cast<std::size_t>((c1 - c0) * HW), 0.0);
      for (i64 o = g * Og; o < (g + 1) * Og; ++o) {
        const double* d = dy_plane(n, o);
        for (i64 c = c0; c < c1; ++c) {
          double* a = acc.data() + (c - c0) * HW;
          for (i64 kh = 0; kh < p.kh; ++kh) {
            const Range rh = valid(Ho, p.h, p.stride[0], p.padding[0], kh * p.dilation[0]);
            for (i64 kw = 0; kw < p.kw; ++kw) {
              const Range rw = valid(Wo, p.w, p.stride[1], p.padding[1], kw * p.dilation[1]);
              if (rw.hi <= rw.lo) continue;
              const i64 iw0 = rw.lo * p.stride[1] - p.padding[1] + kw * p.dilation[1];
              const double wv = w.at(o, c - g * Cg, kh, kw);
              for (i64 oh = rh.lo; oh < rh.hi; ++oh) {
                const i64 ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                axpy(rw.hi - rw.lo, wv, d + oh * Wo + rw.lo, 1, a + ih * p.w + iw0, p.stride[1]);
              }
            }
          }
        }
      }
      for (i64 c = c0; c < c1; ++c) {
        const double* a = acc.data() + (c - c0) * HW;
        for (i64 ih = 0; ih < p.h; ++ih)
          for (i64 iw = 0; iw < p.w; ++iw) gx.at(n, c, ih, iw) = a[ih * p.w + iw];
      }
    });
  }

  // dW[o,ci,kh,kw] = sum over n of (sum over oh, ow of dy[n,o,oh,ow] x[n,c,ih,iw]). Items are
  // (output-channel block, input-channel block); four output channels share each x value, which
  // also gives four independent accumulation chains.
  if (gw) {
    const i64 ob = std::min<i64>(Og, 8), nob = (Og + ob - 1) / ob;
    const i64 cb = block_size(Cg, G * nob, threads, 64), ncb = (Cg + cb - 1) / cb;
    const i64 KK = p.kh * p.kw;
    parallel_for(G * nob * ncb, threads, [&](i64 item) {
      const i64 g = item / (nob * ncb), o0 = g * Og + item / ncb % nob * ob,
                o1 = std::min(o0 + ob, (g + 1) * Og);
      const i64 ci0 = item % ncb * cb, ci1 = std::min(ci0 + cb, Cg);
      const i64 no = o1 - o0;
      std::vector<double> acc(static_cast<std::size_t>(no * (ci1 - ci0) * KK), 0.0),
          xs(static_cast<std::size_t>(HW));
      for (i64 n = 0; n < p.n; ++n) {
        for (i64 ci = ci0; ci < ci1; ++ci) {
          stage_plane(x, n, g * Cg + ci, p.h, p.w, xs.data());
          for (i64 kh = 0; kh < p.kh; ++kh) {
            const Range rh = valid(Ho, p.h, p.stride[0], p.padding[0], kh * p.dilation[0]);
            for (i64 kw = 0; kw < p.kw; ++kw) {
              const Range rw = valid(Wo, p.w, p.stride[1], p.padding[1], kw * p.dilation[1]);
              const i64 iw0 = rw.lo * p.stride[1] - p.padding[1] + kw * p.dilation[1],
                        len = rw.hi - rw.lo;
              const i64 sw = p.stride[1];
              auto slot = [&](i64 o) -> double& {
                return acc[static_cast<std::size_t>(((o - o0) * (ci1 - ci0) + (ci - ci0)) * KK +
                                                    kh * p.kw + kw)];
              };
              i64 o = o0;
              for (; o + 4 <= o1; o += 4) {
                double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                const double *d0 = dy_plane(n, o), *d1 = dy_plane(n, o + 1),
                             *d2 = dy_plane(n, o + 2), *d3 = dy_plane(n, o + 3);
                for (i64 oh = rh.lo; oh < rh.hi; ++oh) {
                  const double* xr = xs.data() +
                                     (oh * p.stride[0] - p.padding[0] + kh * p.dilation[0]) * p.w +
                                     iw0;
                  const i64 r = oh * Wo + rw.lo;
                  for (i64 j = 0; j < len; ++j) {
                    const double xv = xr[j * sw];
                    s0 += d0[r + j] * xv;
                    s1 += d1[r + j] * xv;
                    s2 += d2[r + j] * xv;
                    s3 += d3[r + j] * xv;
                  }
                }
                slot(o) += s0;
                slot(o + 1) += s1;
                slot(o + 2) += s2;
                slot(o + 3) += s3;
              }
              for (; o < o1; ++o) {
                double s = 0;
                const double* d = dy_plane(n, o);
                for (i64 oh = rh.lo; oh < rh.hi; ++oh) {
                  const double* xr = xs.data() +
                                     (oh * p.stride[0] - p.padding[0] + kh * p.dilation[0]) * p.w +
                                     iw0;
                  const i64 r = oh * Wo + rw.lo;
                  for (i64 j = 0; j < len; ++j) s += d[r + j] * xr[j * sw];
                }
                slot(o) += s;
              }
            }
          }
        }
      }
      for (i64 o = o0; o < o1; ++o)
        for (i64 ci = ci0; ci < ci1; ++ci)
          for (i64 kh = 0; kh < p.kh; ++kh)
            for (i64 kw = 0; kw < p.kw; ++kw)
              gw.at(o, ci, kh, kw) = acc[static_cast<std::size_t>(
                  ((o - o0) * (ci1 - ci0) + (ci - ci0)) * KK + kh * p.kw + kw)];
    });
  }

  // db[o] = sum over n, oh, ow of dy.
  if (gb) {
    for (i64 o = 0; o < p.o; ++o) {
      double s = 0;
      for (i64 n = 0; n < p.n; ++n) {
        const double* d = dy_plane(n, o);
        for (i64 i = 0; i < P; ++i) s += d[i];
      }
      gb.at(o) = s;
    }
  }
}

namespace {

constexpr i64 kRowBlock = 64, kKBlock = 256;

// Stages B[k0:k1, :] as a contiguous [k][n] block.
void stage_b_rows(const View& b, i64 k0, i64 k1, i64 n, double* out) {
  for (i64 k = k0; k < k1; ++k)
    for (i64 j = 0; j < n; ++j) out[(k - k0) * n + j] = b.at(k, j);
}

}  // namespace

void matmul_forward(const cases::MatmulParams& p, const View& a, const View& b, const View& y,
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

void matmul_backward(const cases::MatmulParams& p, const View& a, const View& b,
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

namespace {

// Neumaier-compensated running sum.
struct Sum {
  double s = 0, c = 0;
  void add(double v) {
    const double t = s + v;
    c += std::abs(s) >= std::abs(v) ? (s - t) + v : (v - t) + s;
    s = t;
  }
  double value() const { return s + c; }
};

}  // namespace

double mse_conv(const cases::ConvParams& p, const View& y, const View& t, DType output_dtype,
                std::vector<double>& dy) {
  const i64 Ho = p.hout(), Wo = p.wout(), numel = p.n * p.o * Ho * Wo;
  dy.assign(static_cast<std::size_t>(numel), 0.0);
  Sum sum;
  i64 i = 0;
  for (i64 n = 0; n < p.n; ++n)
    for (i64 o = 0; o < p.o; ++o)
      for (i64 oh = 0; oh < Ho; ++oh)
        for (i64 ow = 0; ow < Wo; ++ow, ++i) {
          const double d = round_to_dtype(y.at(n, o, oh, ow), output_dtype) - t.at(n, o, oh, ow);
          sum.add(d * d);
          dy[static_cast<std::size_t>(i)] = 2.0 * d / static_cast<double>(numel);
        }
  return sum.value() / static_cast<double>(numel);
}

double mse_matmul(const cases::MatmulParams& p, const View& y, const View& t, DType output_dtype,
                  std::vector<double>& dy) {
  const i64 numel = p.m * p.n;
  dy.assign(static_cast<std::size_t>(numel), 0.0);
  Sum sum;
  for (i64 m = 0; m < p.m; ++m)
    for (i64 j = 0; j < p.n; ++j) {
      const double d = round_to_dtype(y.at(m, j), output_dtype) - t.at(m, j);
      sum.add(d * d);
      dy[static_cast<std::size_t>(m * p.n + j)] = 2.0 * d / static_cast<double>(numel);
    }
  return sum.value() / static_cast<double>(numel);
}

}  // namespace validate::runners::oracle
