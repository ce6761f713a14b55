#pragma once
// Private helpers of the float64 references (ref_<op>.cpp): a deterministic parallel loop and the
// index arithmetic every convolution shares. Each work item owns its outputs, so results do not
// depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "validate/ops/reference.hpp"

namespace validate::ops::ref {

using i64 = std::int64_t;

// Runs f(i) for i in [0, n) on up to `threads` threads, handing items out one at a time.
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

inline i64 floor_div(i64 a, i64 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline i64 ceil_div(i64 a, i64 b) { return -floor_div(-a, b); }

// Output positions o in [0, out) whose input position o*s - pad + k*d lies in [0, in).
struct Range {
  i64 lo, hi;
};
inline Range valid(i64 out, i64 in, i64 s, i64 pad, i64 kd) {
  const i64 lo = std::max<i64>(0, ceil_div(pad - kd, s));
  const i64 hi = std::min<i64>(out, floor_div(in - 1 + pad - kd, s) + 1);
  return {lo, std::max(lo, hi)};
}

// Splits `n` into blocks of at most `cap`, small enough that there are about 2 items per thread.
inline i64 block_size(i64 n, i64 outer, int threads, i64 cap) {
  i64 b = std::min(n, cap);
  while (b > 1 && outer * ((n + b - 1) / b) < 2 * static_cast<i64>(threads)) b = (b + 1) / 2;
  return std::max<i64>(b, 1);
}

// Stages plane (i0, i1, :, :) of a 4-d view into a contiguous [h][w] buffer.
inline void stage_plane(const View& v, i64 i0, i64 i1, i64 h, i64 w, double* out) {
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

// Calls term(c, kh, kw) for every channel and kernel position of one convolution output, in the
// forward order `order` names: canonical (c, kh, kw), or channels_inner (kh, kw, c).
template <class Term>
inline void window_sum(SumOrder order, i64 channels, i64 kh, i64 kw, Term&& term) {
  if (order == SumOrder::channels_inner) {
    for (i64 u = 0; u < kh; ++u)
      for (i64 v = 0; v < kw; ++v)
        for (i64 c = 0; c < channels; ++c) term(c, u, v);
  } else {
    for (i64 c = 0; c < channels; ++c)
      for (i64 u = 0; u < kh; ++u)
        for (i64 v = 0; v < kw; ++v) term(c, u, v);
  }
}

// db[o] = sum over n, then over the output plane, of dy[n, o, :] (dy canonical, contiguous
// [n][o][plane]): every convolution's bias gradient, in one order. The running sum is rounded as
// `acc` says after every add (float64: a plain sum, the oracle's bytes).
inline void grad_bias(i64 batch, i64 channels, i64 plane, const std::vector<double>& dy, const View& gb,
                      Accumulation acc) {
  for (i64 o = 0; o < channels; ++o) {
    double s = 0;
    for (i64 n = 0; n < batch; ++n) {
      const double* d = dy.data() + (n * channels + o) * plane;
      for (i64 i = 0; i < plane; ++i) s = accumulate(s, d[i], acc);
    }
    gb.at(o) = s;
  }
}

}  // namespace validate::ops::ref
