// Winograd and FFT error terms of a convolution (algorithm_bounds.hpp; docs/compare.md,
// "Algorithm-aware bounds").
#include "validate/metrics/algorithm_bounds.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <atomic>
#include <functional>
#include <thread>

namespace validate::compare {

namespace {

constexpr double kU32 = 0x1p-24;  // float32 unit roundoff: the transforms and sums run in float32

// Runs body(begin, end) over slices of [0, count) on up to `threads` threads (0: every core),
// `per_thread` slices a thread, taken in turn (the tiles at a plane's border and the groups differ in
// cost). Every caller writes each result from one slice only, computed in the same order
// as on one thread, so the terms do not depend on the thread count.
void parallel_for(std::int64_t count, int threads, const std::function<void(std::int64_t, std::int64_t)>& body,
                  int per_thread = 4) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::int64_t workers = std::min<std::int64_t>(threads, count);
  if (workers <= 1) {
    if (count > 0) body(0, count);
    return;
  }
  const std::int64_t slices = std::min<std::int64_t>(count, workers * per_thread), size = (count + slices - 1) / slices;
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t i; (i = next.fetch_add(1)) * size < count;) body(i * size, std::min(count, (i + 1) * size));
  };
  std::vector<std::thread> pool;
  for (std::int64_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

using Plane = std::function<double(std::int64_t b, std::int64_t ch, std::int64_t y, std::int64_t x)>;
using Filter = std::function<double(std::int64_t co, std::int64_t cig, std::int64_t kh, std::int64_t kw)>;

// Rows of Vandermonde matrices at the points and infinity: row j = p_j^0 .. p_j^(cols-1), the last
// row picks the leading coefficient.
std::vector<double> vander(const std::vector<double>& p, int cols) {
  const int n = static_cast<int>(p.size()) + 1;
  std::vector<double> v(static_cast<std::size_t>(n * cols), 0.0);
  for (int j = 0; j + 1 < n; ++j)
    for (int k = 0; k < cols; ++k) v[static_cast<std::size_t>(j * cols + k)] = std::pow(p[static_cast<std::size_t>(j)], k);
  v[static_cast<std::size_t>((n - 1) * cols + cols - 1)] = 1;
  return v;
}

std::vector<double> inverse(std::vector<double> a, int n) {
  std::vector<double> inv(static_cast<std::size_t>(n * n), 0.0);
  for (int i = 0; i < n; ++i) inv[static_cast<std::size_t>(i * n + i)] = 1;
  auto at = [n](std::vector<double>& m, int i, int j) -> double& { return m[static_cast<std::size_t>(i * n + j)]; };
  for (int c = 0; c < n; ++c) {
    int piv = c;
    for (int i = c + 1; i < n; ++i)
      if (std::fabs(at(a, i, c)) > std::fabs(at(a, piv, c))) piv = i;
    for (int j = 0; j < n; ++j) std::swap(at(a, c, j), at(a, piv, j)), std::swap(at(inv, c, j), at(inv, piv, j));
    const double d = at(a, c, c);
    for (int j = 0; j < n; ++j) at(a, c, j) /= d, at(inv, c, j) /= d;
    for (int i = 0; i < n; ++i) {
      if (i == c || at(a, i, c) == 0) continue;
      const double f = at(a, i, c);
      for (int j = 0; j < n; ++j) at(a, i, j) -= f * at(a, c, j), at(inv, i, j) -= f * at(inv, c, j);
    }
  }
  return inv;
}

// The roundings of one value of X M X^T (two products by a matrix whose rows have at most `nnz`
// non-zeros): a multiply and an add per non-zero, each stage.
double transform_roundings(const std::vector<double>& mat, int rows, int cols) {
  int nnz = 0;
  for (int i = 0; i < rows; ++i) {
    int k = 0;
    for (int j = 0; j < cols; ++j) k += mat[static_cast<std::size_t>(i * cols + j)] != 0;
    nnz = std::max(nnz, k);
  }
  return 2.0 * (2 * nnz - 1);
}

// out (r x r) = L (r x k) M (k x k) L^T; R, K fixed so the compiler unrolls it (0: r and k at run
// time). The same products and sums, in the same order, either way.
template <int R = 0, int K = 0>
void sandwich(const double* l, int r, int k, const double* m, double* tmp, double* out) {
  if (R) r = R;
  if (K) k = K;
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < k; ++j) {
      double s = 0;
      for (int t = 0; t < k; ++t) s += l[i * k + t] * m[t * k + j];
      tmp[i * k + j] = s;
    }
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < r; ++j) {
      double s = 0;
      for (int t = 0; t < k; ++t) s += tmp[i * k + t] * l[j * k + t];
      out[i * r + j] = s;
    }
}

// The sizes the transforms use: B^T (n x n), G of F(m, 3) (n x 3) and of F(3, m) (n x m).
void sandwich_any(const double* l, int r, int k, const double* m, double* tmp, double* out) {
  switch (r * 16 + k) {
    case 4 * 16 + 4: return sandwich<4, 4>(l, r, k, m, tmp, out);
    case 6 * 16 + 6: return sandwich<6, 6>(l, r, k, m, tmp, out);
    case 8 * 16 + 8: return sandwich<8, 8>(l, r, k, m, tmp, out);
    case 4 * 16 + 3: return sandwich<4, 3>(l, r, k, m, tmp, out);
    case 6 * 16 + 3: return sandwich<6, 3>(l, r, k, m, tmp, out);
    case 8 * 16 + 3: return sandwich<8, 3>(l, r, k, m, tmp, out);
    case 4 * 16 + 2: return sandwich<4, 2>(l, r, k, m, tmp, out);
    case 6 * 16 + 4: return sandwich<6, 4>(l, r, k, m, tmp, out);
    case 8 * 16 + 6: return sandwich<8, 6>(l, r, k, m, tmp, out);
    default: return sandwich<>(l, r, k, m, tmp, out);
  }
}

// One Winograd correlation of `src` (batches x ci_total planes of hs x ws, read with padding
// ph, pw) with 3x3 filters (co_total x ci_total / groups), results batches x co_total x ho x wo.
struct WinogradProblem {
  std::int64_t batches, ci_total, co_total, groups, hs, ws, ph, pw, ho, wo;
  Plane src;
  Filter filt;
};

std::vector<double> squared(std::vector<double> v) {
  for (double& x : v) x *= x;
  return v;
}

// The matrices of one Winograd transform pair and the roundings of its stages.
struct Winograd {
  WinogradMatrices wm;
  std::vector<double> g2, bt2;
  double tu = 0, tv = 0, ta = 0;
  int n = 0, nn = 0;
};

Winograd winograd_setup(int m, int r, int g_cols) {
  Winograd w;
  w.wm = winograd_matrices(m, r);
  w.n = w.wm.n, w.nn = w.n * w.n;
  w.g2 = squared(w.wm.g), w.bt2 = squared(w.wm.bt);
  w.tu = transform_roundings(w.wm.g, w.n, g_cols), w.tv = transform_roundings(w.wm.bt, w.n, w.n);
  w.ta = transform_roundings(w.wm.at, m, w.n);
  return w;
}

// One channel's transformed tile L X L^T (k x k -> r x r) into value[0..r*r) and, beside it, the
// bound |value| + sqrt((L.*L) (X.*X) (L.*L)^T) of the transform's partial sums (|y| + rho, as for
// the direct sum). x2 and tmp are scratch of k*k and r*k.
void transform(const std::vector<double>& l, const std::vector<double>& l2, int r, int k, const double* x, double* x2,
               double* tmp, double* value, double* bound) {
  for (int i = 0; i < k * k; ++i) x2[i] = x[i] * x[i];
  sandwich_any(l.data(), r, k, x, tmp, value);
  sandwich_any(l2.data(), r, k, x2, tmp, bound);
  for (int i = 0; i < r * r; ++i) bound[i] = std::fabs(value[i]) + std::sqrt(bound[i]);
}

// Many channels' transformed tiles, flat: channel c's at [c * nn, (c + 1) * nn).
struct TileSet {
  std::vector<double> value, bound;
  void resize(std::int64_t channels, int nn) {
    value.resize(static_cast<std::size_t>(channels * nn));
    bound.resize(value.size());
  }
};

// Two points of a tile in the lanes of one vector (GCC and clang vector extension: SSE2, NEON).
typedef double Pair __attribute__((vector_size(16)));

Pair load(const double* p) {
  Pair r;
  std::memcpy(&r, p, sizeof r);
  return r;
}

void store(double* p, Pair v) { std::memcpy(p, &v, sizeof v); }

// Transformed tiles packed for point_sums: row r's points k of `rows` rows (row r at
// src + r * row_step) to dst[((k / 4) * rows + r) * 4 + k % 4], so a sum over the rows reads four
// points of each row one after another.
void pack(const double* src, std::int64_t rows, std::int64_t row_step, int nn, double* dst) {
  for (int kc = 0; kc < nn / 4; ++kc)
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + (kc * rows + r) * 4, src + r * row_step + kc * 4, 4 * sizeof(double));
}

struct Packed {
  const double *value, *bound;
};

// The sums over the transformed points of J operands b_j against one shared operand a, from zero
// and over i < count in order: mm_j[k] = sum_i a_i[k] b_ji[k], s2_j[k] = sum_i (|a| + ahat)_i[k]^2
// (|b| + bhat)_ji[k]^2, a and each b_j packed (pack) over `count` rows. The same roundings in the
// same order as adding one term at a time, but four points of J sums held in registers over the
// whole sum, reading memory in order: the loop the models spend their time in.
template <int J>
void point_sums(int nn, std::int64_t count, Packed a, const Packed* b, double* const* mm, double* const* s2) {
  assert(nn % 4 == 0);
  for (int k = 0; k < nn; k += 4) {
    Pair m[J][2] = {}, q[J][2] = {};
    const std::int64_t chunk = (k / 4) * count * 4;
    for (std::int64_t i = 0; i < count; ++i) {
      const double *pa = a.value + chunk + i * 4, *pb = a.bound + chunk + i * 4;
      const Pair a0 = load(pa), a1 = load(pa + 2), g0 = load(pb), g1 = load(pb + 2);
      for (int j = 0; j < J; ++j) {
        const double *qv = b[j].value + chunk + i * 4, *qb = b[j].bound + chunk + i * 4;
        m[j][0] += load(qv) * a0;
        m[j][1] += load(qv + 2) * a1;
        const Pair p0 = load(qb) * g0, p1 = load(qb + 2) * g1;
        q[j][0] += p0 * p0;
        q[j][1] += p1 * p1;
      }
    }
    for (int j = 0; j < J; ++j) {
      store(mm[j] + k, m[j][0]), store(mm[j] + k + 2, m[j][1]);
      store(s2[j] + k, q[j][0]), store(s2[j] + k + 2, q[j][1]);
    }
  }
}

// (A X A^T) for X n x n and A m x n (row-major), through A X first: the output transform done as
// two matrix products (m n^2 + m^2 n multiply-adds instead of m^2 n^2).
template <int N>
void output_transform(const double* a, int m, const double* x, double* out) {
  double ax[8 * N];  // m <= 8 rows
  for (int i = 0; i < m; ++i)
    for (int nu = 0; nu < N; ++nu) {
      double v = 0;
      for (int xi = 0; xi < N; ++xi) v += a[i * N + xi] * x[xi * N + nu];
      ax[i * N + nu] = v;
    }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      double v = 0;
      for (int nu = 0; nu < N; ++nu) v += ax[i * N + nu] * a[j * N + nu];
      out[i * m + j] = v;
    }
}

// The terms at the m x m (or 3 x 3) output points of a tile from its channel sums mm and s2 over
// `pairs` terms: with a = A^T_{i,xi} A^T_{j,nu}, var = sum a^2 q (q the channel sum's variance
// terms at each point), val = sum a mm, rss = sum a^2 mm^2, each an output transform (by A^T, or
// by A^T squared elementwise) of a per-point array.
template <int N, class Put>
void tile_outputs_n(const Winograd& w, int m, const double* mm, const double* s2, double pairs, Put put) {
  double q[N * N], m2[N * N], at2[8 * N], var[64], val[64], rss[64];
  for (int k = 0; k < N * N; ++k) {
    const double acc = std::fabs(mm[k]) + std::sqrt(s2[k]);  // the channel sum's partial sums
    q[k] = (w.tu + w.tv + 1) * s2[k] + pairs * acc * acc;
    m2[k] = mm[k] * mm[k];
  }
  for (int k = 0; k < m * N; ++k) at2[k] = w.wm.at[static_cast<std::size_t>(k)] * w.wm.at[static_cast<std::size_t>(k)];
  output_transform<N>(at2, m, q, var);
  output_transform<N>(w.wm.at.data(), m, mm, val);
  output_transform<N>(at2, m, m2, rss);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      const int k = i * m + j;
      put(i, j, kU32 * (std::sqrt(var[k]) + std::sqrt(w.ta) * (std::fabs(val[k]) + std::sqrt(rss[k]))));
    }
}

template <class Put>
void tile_outputs(const Winograd& w, int m, const double* mm, const double* s2, double pairs, Put put) {
  switch (w.n) {
    case 4: return tile_outputs_n<4>(w, m, mm, s2, pairs, put);
    case 6: return tile_outputs_n<6>(w, m, mm, s2, pairs, put);
    case 8: return tile_outputs_n<8>(w, m, mm, s2, pairs, put);
    default: assert(false && "Winograd tiles are 4, 6 or 8 points wide");
  }
}

// U = G g G^T of every filter (co, c), transformed once for all tiles.
TileSet filter_tiles(const Winograd& w, const WinogradProblem& p, int threads) {
  const std::int64_t cig = p.ci_total / p.groups;
  TileSet u;
  u.resize(p.co_total * cig, w.nn);
  parallel_for(p.co_total, threads, [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> gg(9), g2(9), tmp(static_cast<std::size_t>(w.nn));
    for (std::int64_t co = begin; co < end; ++co)
      for (std::int64_t c = 0; c < cig; ++c) {
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) gg[static_cast<std::size_t>(kh * 3 + kw)] = p.filt(co, c, kh, kw);
        const std::size_t at = static_cast<std::size_t>((co * cig + c) * w.nn);
        transform(w.wm.g, w.g2, w.n, 3, gg.data(), g2.data(), tmp.data(), &u.value[at], &u.bound[at]);
      }
  });
  return u;
}

// V = B^T d B of the input channels [c_begin, c_end) over one tile's (m + 2)^2 window (zero
// outside the plane).
void input_tiles(const Winograd& w, const WinogradProblem& p, std::int64_t b, std::int64_t y0, std::int64_t x0,
                 std::int64_t c_begin, std::int64_t c_end, std::vector<double>& scratch, TileSet& v) {
  const int n = w.n;
  scratch.resize(static_cast<std::size_t>(3 * w.nn));
  double *d = scratch.data(), *d2 = d + w.nn, *tmp = d2 + w.nn;
  for (std::int64_t c = c_begin; c < c_end; ++c) {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const std::int64_t y = y0 + i - p.ph, x = x0 + j - p.pw;
        d[i * n + j] = y >= 0 && y < p.hs && x >= 0 && x < p.ws ? p.src(b, c, y, x) : 0.0;
      }
    const std::size_t at = static_cast<std::size_t>(c * w.nn);
    transform(w.wm.bt, w.bt2, n, n, d, d2, tmp, &v.value[at], &v.bound[at]);
  }
}

std::vector<double> winograd_core(int m, const WinogradProblem& p, int threads) {
  const Winograd w = winograd_setup(m, 3, 3);
  const int nn = w.nn;
  const std::int64_t cig = p.ci_total / p.groups, cog = p.co_total / p.groups;
  const TileSet uf = filter_tiles(w, p, threads);
  TileSet u;  // filter co's points packed over its cig channels at co * cig * nn
  u.resize(p.co_total * cig, nn);
  for (std::int64_t co = 0; co < p.co_total; ++co) {
    const std::int64_t at = co * cig * nn;
    pack(&uf.value[static_cast<std::size_t>(at)], cig, nn, nn, &u.value[static_cast<std::size_t>(at)]);
    pack(&uf.bound[static_cast<std::size_t>(at)], cig, nn, nn, &u.bound[static_cast<std::size_t>(at)]);
  }
  const std::int64_t th = (p.ho + m - 1) / m, tw = (p.wo + m - 1) / m;
  std::vector<double> out(static_cast<std::size_t>(p.batches * p.co_total * p.ho * p.wo), 0.0);
  // Every tile's outputs are written by one thread, each channel sum in the channels' order.
  parallel_for(p.batches * th * tw, threads, [&](std::int64_t begin, std::int64_t end) {
    TileSet vt, v;  // v: the tile's points of each group's cig channels packed, group g at g * cig * nn
    vt.resize(p.ci_total, nn);
    v.resize(p.ci_total, nn);
    std::vector<double> scratch, mm(static_cast<std::size_t>(2 * nn)), s2(mm.size());
    for (std::int64_t t = begin; t < end; ++t) {
      const std::int64_t b = t / (th * tw), ty = (t / tw) % th, tx = t % tw;
      input_tiles(w, p, b, ty * m, tx * m, 0, p.ci_total, scratch, vt);
      for (std::int64_t at = 0; at < p.ci_total * nn; at += cig * nn) {
        pack(&vt.value[static_cast<std::size_t>(at)], cig, nn, nn, &v.value[static_cast<std::size_t>(at)]);
        pack(&vt.bound[static_cast<std::size_t>(at)], cig, nn, nn, &v.bound[static_cast<std::size_t>(at)]);
      }
      for (std::int64_t co = 0; co < p.co_total;) {
        // Two filters of the same group at once where there are two.
        const std::int64_t c0 = (co / cog) * cig, pair = co + 1 < p.co_total && (co + 1) / cog == co / cog ? 2 : 1;
        const std::size_t ua = static_cast<std::size_t>(co * cig * nn), ub = ua + static_cast<std::size_t>(cig * nn);
        const Packed bs[2] = {{&u.value[ua], &u.bound[ua]},
                              {pair == 2 ? &u.value[ub] : nullptr, pair == 2 ? &u.bound[ub] : nullptr}};
        double* ms[2] = {mm.data(), mm.data() + nn};
        double* ss[2] = {s2.data(), s2.data() + nn};
        const Packed a{&v.value[static_cast<std::size_t>(c0 * nn)], &v.bound[static_cast<std::size_t>(c0 * nn)]};
        if (pair == 2)
          point_sums<2>(nn, cig, a, bs, ms, ss);
        else
          point_sums<1>(nn, cig, a, bs, ms, ss);
        for (std::int64_t j = 0; j < pair; ++j, ++co)
          tile_outputs(w, m, ms[j], ss[j], static_cast<double>(cig), [&](int i, int jj, double term) {
            const std::int64_t y = ty * m + i, x = tx * m + jj;
            if (y < p.ho && x < p.wo) out[static_cast<std::size_t>(((b * p.co_total + co) * p.ho + y) * p.wo + x)] = term;
          });
      }
    }
  });
  return out;
}

double at4(const std::vector<double>& v, std::int64_t d1, std::int64_t d2, std::int64_t d3, std::int64_t i,
           std::int64_t j, std::int64_t k, std::int64_t l);

// The transformed dL/dy tiles U = G dy_t G^T (m x m -> n x n) of every output channel o.
void gradient_tiles(const Winograd& w, int m, const ConvShape& s, const std::vector<double>& dy, std::int64_t b,
                    std::int64_t y0, std::int64_t x0, std::vector<double>& scratch, TileSet& u) {
  const std::int64_t ho = s.hout(), wo = s.wout();
  scratch.resize(static_cast<std::size_t>(2 * m * m + w.n * m));
  double *dt = scratch.data(), *dt2 = dt + m * m, *tmp = dt2 + m * m;
  for (std::int64_t o = 0; o < s.o; ++o) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) {
        const std::int64_t y = y0 + i, x = x0 + j;
        dt[i * m + j] = y < ho && x < wo ? at4(dy, s.o, ho, wo, b, o, y, x) : 0.0;
      }
    const std::size_t at = static_cast<std::size_t>(o * w.nn);
    transform(w.wm.g, w.g2, w.n, m, dt, dt2, tmp, &u.value[at], &u.bound[at]);
  }
}

// Backward filter by Winograd F(3x3, m x m), the transpose of F(m, 3) (same points, so the same
// B^T; A and G those of F(3, m)): per batch element and m x m tile t of dL/dy, U = G dy_t G^T and
// V = B^T d B over the tile's (m + 2)^2 input window, M[o, c] = sum over (b, t) of U .* V, and
// dW[o, c] = A^T M A. The same bound as the forward's with the P = N * tiles pairs for C.
// Every tile's U is transformed once; the input channels are split among the threads in slices
// whose V of every tile stay within about 8 MiB, each M[o, c] summed over the tiles in order.
std::vector<double> winograd_filter(int m, const ConvShape& s, const ConvOperands& in, int threads) {
  const Winograd w = winograd_setup(3, m, m);
  const int nn = w.nn;
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups;
  const std::int64_t th = (ho + m - 1) / m, tw = (wo + m - 1) / m, tiles = s.n * th * tw;
  const double pairs = static_cast<double>(tiles);
  std::vector<double> mm(static_cast<std::size_t>(s.o * cg * nn), 0.0), s2(mm.size(), 0.0);
  const WinogradProblem xp{s.n, s.c, s.o, s.groups, s.h, s.w, s.ph, s.pw, ho, wo,
                           [&](std::int64_t b, std::int64_t c, std::int64_t y, std::int64_t x) {
                             return at4(*in.x, s.c, s.h, s.w, b, c, y, x);
                           },
                           nullptr};
  TileSet uf, u;  // uf: tile t's U of output channel o at (t * O + o) * nn; u: o's packed over the tiles
  uf.resize(tiles * s.o, nn);
  u.resize(tiles * s.o, nn);
  parallel_for(tiles, threads, [&](std::int64_t begin, std::int64_t end) {
    TileSet ut;
    ut.resize(s.o, nn);
    std::vector<double> scratch;
    for (std::int64_t t = begin; t < end; ++t) {
      gradient_tiles(w, m, s, *in.dy, t / (th * tw), (t / tw) % th * m, t % tw * m, scratch, ut);
      std::copy(ut.value.begin(), ut.value.end(), uf.value.begin() + t * s.o * nn);
      std::copy(ut.bound.begin(), ut.bound.end(), uf.bound.begin() + t * s.o * nn);
    }
  });
  for (std::int64_t o = 0; o < s.o; ++o) {
    pack(&uf.value[static_cast<std::size_t>(o * nn)], tiles, s.o * nn, nn, &u.value[static_cast<std::size_t>(o * tiles * nn)]);
    pack(&uf.bound[static_cast<std::size_t>(o * nn)], tiles, s.o * nn, nn, &u.bound[static_cast<std::size_t>(o * tiles * nn)]);
  }
  const std::int64_t slice = std::clamp<std::int64_t>((std::int64_t{8} << 20) / std::max<std::int64_t>(tiles * nn * 16, 1), 1, 64);
  parallel_for((s.c + slice - 1) / slice, threads, [&](std::int64_t begin, std::int64_t end) {
    TileSet vf, v, vt;  // vf: tile t's V of the slice's channel cl at (t * slice + cl) * nn; v: cl's packed
    vf.resize(tiles * slice, nn);
    v.resize(tiles * slice, nn);
    vt.resize(s.c, nn);
    std::vector<double> scratch;
    for (std::int64_t sl = begin; sl < end; ++sl) {
      const std::int64_t c_begin = sl * slice, c_end = std::min(s.c, c_begin + slice);
      for (std::int64_t t = 0; t < tiles; ++t) {
        input_tiles(w, xp, t / (th * tw), (t / tw) % th * m, t % tw * m, c_begin, c_end, scratch, vt);
        std::copy(vt.value.begin() + c_begin * nn, vt.value.begin() + c_end * nn, vf.value.begin() + t * slice * nn);
        std::copy(vt.bound.begin() + c_begin * nn, vt.bound.begin() + c_end * nn, vf.bound.begin() + t * slice * nn);
      }
      for (std::int64_t cl = 0; cl < c_end - c_begin; ++cl) {
        const std::size_t from = static_cast<std::size_t>(cl * nn), to = static_cast<std::size_t>(cl * tiles * nn);
        pack(&vf.value[from], tiles, slice * nn, nn, &v.value[to]);
        pack(&vf.bound[from], tiles, slice * nn, nn, &v.bound[to]);
      }
      for (std::int64_t c = c_begin; c < c_end;) {
        // Two input channels of the same group at once where there are two.
        const std::int64_t gi = c / cg, pair = c + 1 < c_end && (c + 1) / cg == gi ? 2 : 1;
        Packed b[2];
        for (std::int64_t j = 0; j < pair; ++j) {
          const std::size_t vc = static_cast<std::size_t>((c + j - c_begin) * tiles * nn);
          b[j] = Packed{&v.value[vc], &v.bound[vc]};
        }
        for (std::int64_t o = gi * og; o < (gi + 1) * og; ++o) {
          const std::size_t at = static_cast<std::size_t>((o * cg + c - gi * cg) * nn), uo = static_cast<std::size_t>(o * tiles * nn);
          double* ms[2] = {&mm[at], &mm[at] + nn};
          double* ss[2] = {&s2[at], &s2[at] + nn};
          if (pair == 2)
            point_sums<2>(nn, tiles, Packed{&u.value[uo], &u.bound[uo]}, b, ms, ss);
          else
            point_sums<1>(nn, tiles, Packed{&u.value[uo], &u.bound[uo]}, b, ms, ss);
        }
        c += pair;
      }
    }
  });
  std::vector<double> out(static_cast<std::size_t>(s.o * cg * 9));
  for (std::int64_t oc = 0; oc < s.o * cg; ++oc)
    tile_outputs(w, 3, &mm[static_cast<std::size_t>(oc * nn)], &s2[static_cast<std::size_t>(oc * nn)], pairs,
                 [&](int i, int j, double term) { out[static_cast<std::size_t>(oc * 9 + i * 3 + j)] = term; });
  return out;
}

double at4(const std::vector<double>& v, std::int64_t d1, std::int64_t d2, std::int64_t d3, std::int64_t i,
           std::int64_t j, std::int64_t k, std::int64_t l) {
  return v[static_cast<std::size_t>(((i * d1 + j) * d2 + k) * d3 + l)];
}

// Squared norms of the windows of one plane: window (wy, wx) covers padded rows [wy*step,
// wy*step + size) (the source shifted by the padding), clipped to the source.
struct Windows {
  std::int64_t ny = 1, nx = 1, step_y = 0, step_x = 0, size_y = 0, size_x = 0;
};

double window_sq(const Plane& src, std::int64_t b, std::int64_t c, std::int64_t hs, std::int64_t ws, std::int64_t ph,
                 std::int64_t pw, std::int64_t y0, std::int64_t x0, std::int64_t sy, std::int64_t sx) {
  double s = 0;
  for (std::int64_t y = std::max<std::int64_t>(y0 - ph, 0); y < std::min(y0 - ph + sy, hs); ++y)
    for (std::int64_t x = std::max<std::int64_t>(x0 - pw, 0); x < std::min(x0 - pw + sx, ws); ++x) {
      const double v = src(b, c, y, x);
      s += v * v;
    }
  return s;
}

double kappa(double points) { return (1 + 4 * std::sqrt(2.0)) * std::log2(std::max(points, 2.0)); }

double next_pow2(std::int64_t v) {
  double p = 1;
  while (p < static_cast<double>(v)) p *= 2;
  return p;
}

// Two forward transforms and the inverse one, each kappa u of its operand's 2-norm; the products
// and the sum over the pairs in complex float32 (pairs + 2 roundings); all spread over `spread`
// outputs. The pairs' terms are independent, so the inverse transform's operand is Q2 in
// root-sum-square as well.
double fft_value(double q2, double pairs, double points, double spread) {
  const double k = kappa(points);
  return kU32 / std::sqrt(spread) * std::sqrt((3 * k * k + pairs + 2) * q2);
}

// Forward or backward-data through FFTs: a correlation of `src` planes with filters whose
// per-(co, ci) 2-norms are `fnorm`, results batches x co_total x ho x wo.
std::vector<double> fft_correlation(int tile, const WinogradProblem& p, std::int64_t kh, std::int64_t kw,
                                    const std::vector<double>& fnorm) {
  const std::int64_t cig = p.ci_total / p.groups, cog = p.co_total / p.groups;
  const std::int64_t hp = p.ho + kh - 1, wp = p.wo + kw - 1;
  const std::int64_t sy = tile ? tile : hp, sx = tile ? tile : wp;           // input window
  const std::int64_t oy = tile ? std::max<std::int64_t>(tile - kh + 1, 1) : p.ho,
                     ox = tile ? std::max<std::int64_t>(tile - kw + 1, 1) : p.wo;  // output tile
  const double points = tile ? double(tile) * tile : next_pow2(hp) * next_pow2(wp);
  const double spread = tile ? double(tile) * tile : double(hp) * double(wp);
  std::vector<double> out(static_cast<std::size_t>(p.batches * p.co_total * p.ho * p.wo), 0.0);
  std::vector<double> xn(static_cast<std::size_t>(p.ci_total));
  for (std::int64_t b = 0; b < p.batches; ++b)
    for (std::int64_t y0 = 0; y0 < p.ho; y0 += oy)
      for (std::int64_t x0 = 0; x0 < p.wo; x0 += ox) {
        for (std::int64_t c = 0; c < p.ci_total; ++c)
          xn[static_cast<std::size_t>(c)] = std::sqrt(window_sq(p.src, b, c, p.hs, p.ws, p.ph, p.pw, y0, x0, sy, sx));
        for (std::int64_t co = 0; co < p.co_total; ++co) {
          const std::int64_t c0 = (co / cog) * cig;
          double q2 = 0;
          for (std::int64_t c = 0; c < cig; ++c) {
            const double t = xn[static_cast<std::size_t>(c0 + c)] * fnorm[static_cast<std::size_t>(co * cig + c)];
            q2 += t * t;
          }
          const double v = fft_value(q2, double(cig), points, spread);
          for (std::int64_t y = y0; y < std::min(y0 + oy, p.ho); ++y)
            for (std::int64_t x = x0; x < std::min(x0 + ox, p.wo); ++x)
              out[static_cast<std::size_t>(((b * p.co_total + co) * p.ho + y) * p.wo + x)] = v;
        }
      }
  return out;
}

// Backward filter through FFTs: dW[o, c] pairs every batch (and tile) of x's window with dy's tile.
std::vector<double> fft_filter(int tile, const ConvShape& s, const ConvOperands& in) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups;
  const std::int64_t hp = s.h + 2 * s.ph, wp = s.w + 2 * s.pw;
  const std::int64_t oy = tile ? std::max<std::int64_t>(tile - s.kh + 1, 1) : ho,
                     ox = tile ? std::max<std::int64_t>(tile - s.kw + 1, 1) : wo;
  const std::int64_t sy = tile ? tile : hp, sx = tile ? tile : wp;
  const double points = tile ? double(tile) * tile : next_pow2(hp) * next_pow2(wp);
  const double spread = tile ? double(tile) * tile : double(hp) * double(wp);
  const auto& x = *in.x;
  const auto& dy = *in.dy;
  Plane xs = [&](std::int64_t b, std::int64_t c, std::int64_t y, std::int64_t xx) { return at4(x, s.c, s.h, s.w, b, c, y, xx); };
  Plane ds = [&](std::int64_t b, std::int64_t c, std::int64_t y, std::int64_t xx) { return at4(dy, s.o, ho, wo, b, c, y, xx); };
  std::vector<double> q2(static_cast<std::size_t>(s.o * cg), 0.0);
  double pairs = 0;
  std::vector<double> xn(static_cast<std::size_t>(s.c)), dn(static_cast<std::size_t>(s.o));
  for (std::int64_t b = 0; b < s.n; ++b)
    for (std::int64_t y0 = 0; y0 < ho; y0 += oy)
      for (std::int64_t x0 = 0; x0 < wo; x0 += ox) {
        ++pairs;
        for (std::int64_t c = 0; c < s.c; ++c)
          xn[static_cast<std::size_t>(c)] = std::sqrt(window_sq(xs, b, c, s.h, s.w, s.ph, s.pw, y0, x0, sy, sx));
        for (std::int64_t o = 0; o < s.o; ++o)
          dn[static_cast<std::size_t>(o)] = std::sqrt(window_sq(ds, b, o, ho, wo, 0, 0, y0, x0, oy, ox));
        for (std::int64_t o = 0; o < s.o; ++o)
          for (std::int64_t c = 0; c < cg; ++c) {
            const double t = dn[static_cast<std::size_t>(o)] * xn[static_cast<std::size_t>((o / og) * cg + c)];
            q2[static_cast<std::size_t>(o * cg + c)] += t * t;
          }
      }
  std::vector<double> out(static_cast<std::size_t>(s.o * cg * s.kh * s.kw));
  for (std::int64_t oc = 0; oc < s.o * cg; ++oc)
    for (std::int64_t k = 0; k < s.kh * s.kw; ++k)
      out[static_cast<std::size_t>(oc * s.kh * s.kw + k)] =
          fft_value(q2[static_cast<std::size_t>(oc)], pairs, points, spread);
  return out;
}

// The correlation each pass is: forward x (*) w; backward data dy padded by k - 1 - p (*) w
// flipped, its channel axes swapped within each group.
WinogradProblem problem(ConvPass pass, const ConvShape& s, const ConvOperands& in) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups;
  const auto* x = in.x;
  const auto* w = in.w;
  const auto* dy = in.dy;
  if (pass == ConvPass::forward)
    return {s.n, s.c, s.o, s.groups, s.h, s.w, s.ph, s.pw, ho, wo,
            [x, s](std::int64_t b, std::int64_t c, std::int64_t y, std::int64_t xx) { return at4(*x, s.c, s.h, s.w, b, c, y, xx); },
            [w, s, cg](std::int64_t co, std::int64_t c, std::int64_t kh, std::int64_t kw) {
              return at4(*w, cg, s.kh, s.kw, co, c, kh, kw);
            }};
  return {s.n, s.o, s.c, s.groups, ho, wo, s.kh - 1 - s.ph, s.kw - 1 - s.pw, s.h, s.w,
          [dy, s, ho, wo](std::int64_t b, std::int64_t o, std::int64_t y, std::int64_t xx) { return at4(*dy, s.o, ho, wo, b, o, y, xx); },
          [w, s, cg, og](std::int64_t c, std::int64_t ol, std::int64_t kh, std::int64_t kw) {
            const std::int64_t gi = c / cg;
            return at4(*w, cg, s.kh, s.kw, gi * og + ol, c - gi * cg, s.kh - 1 - kh, s.kw - 1 - kw);
          }};
}

}  // namespace

WinogradMatrices winograd_matrices(int m, int r) {
  static const double pts[] = {0, 1, -1, 2, -2, 0.5, -0.5};
  WinogradMatrices wm;
  wm.m = m, wm.r = r, wm.n = m + r - 1;
  const int n = wm.n;
  assert(n - 1 <= 7);
  const std::vector<double> p(pts, pts + (n - 1));
  const auto vm = vander(p, m), vr = vander(p, r), vn = vander(p, n);
  const auto vinv = inverse(vn, n);
  wm.at.assign(static_cast<std::size_t>(m * n), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) wm.at[static_cast<std::size_t>(i * n + j)] = vm[static_cast<std::size_t>(j * m + i)];
  wm.g = vr;
  wm.bt.assign(static_cast<std::size_t>(n * n), 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) wm.bt[static_cast<std::size_t>(i * n + j)] = vinv[static_cast<std::size_t>(j * n + i)];
  // Lavin and Gray's scaling: row j of G divided by f_j = prod_{l != j} (p_j - p_l), row j of B^T
  // multiplied by it.
  for (int j = 0; j + 1 < n; ++j) {
    double f = 1;
    for (int l = 0; l + 1 < n; ++l)
      if (l != j) f *= p[static_cast<std::size_t>(j)] - p[static_cast<std::size_t>(l)];
    for (int k = 0; k < r; ++k) wm.g[static_cast<std::size_t>(j * r + k)] /= f;
    for (int k = 0; k < n; ++k) wm.bt[static_cast<std::size_t>(j * n + k)] *= f;
  }
  return wm;
}

std::vector<double> winograd_term(int m, ConvPass pass, const ConvShape& s, const ConvOperands& in, int threads) {
  if (s.kh != 3 || s.kw != 3) return {};
  if (pass == ConvPass::backward_filter) return winograd_filter(m, s, in, threads);
  return winograd_core(m, problem(pass, s, in), threads);
}

namespace {

// The valid range [lo, hi) of output positions whose input position (pos - pad + k) is inside
// [0, size).
std::pair<std::int64_t, std::int64_t> valid(std::int64_t outs, std::int64_t pad, std::int64_t k, std::int64_t size) {
  return {std::max<std::int64_t>(pad - k, 0), std::min(outs, size + pad - k)};
}

// sum_j a[j] b[j] in four interleaved partial sums (vectorisable; within a few units of 1e-16 of
// the sum in order, all terms being >= 0).
double dot(const double* __restrict a, const double* __restrict b, std::int64_t len) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::int64_t j = 0;
  for (; j + 4 <= len; j += 4) s0 += a[j] * b[j], s1 += a[j + 1] * b[j + 1], s2 += a[j + 2] * b[j + 2], s3 += a[j + 3] * b[j + 3];
  for (; j < len; ++j) s0 += a[j] * b[j];
  return (s0 + s1) + (s2 + s3);
}

// Planes [planes, rows, cols] surrounded by zeros: `top` rows above, `left` columns left, so
// the sums below run over whole rows without range checks (a zero term adds nothing).
struct PaddedPlanes {
  std::vector<double> v;
  std::int64_t rows = 0, cols = 0;  // padded
  const double* at(std::int64_t plane, std::int64_t y, std::int64_t x) const {
    return &v[static_cast<std::size_t>((plane * rows + y) * cols + x)];
  }
};

PaddedPlanes padded(const std::vector<double>& src, std::int64_t planes, std::int64_t h, std::int64_t w,
                    std::int64_t top, std::int64_t bottom, std::int64_t left, std::int64_t right) {
  PaddedPlanes p;
  p.rows = h + top + bottom, p.cols = w + left + right;
  p.v.assign(static_cast<std::size_t>(planes * p.rows * p.cols), 0.0);
  for (std::int64_t q = 0; q < planes; ++q)
    for (std::int64_t y = 0; y < h; ++y)
      std::copy_n(&src[static_cast<std::size_t>((q * h + y) * w)], w,
                  &p.v[static_cast<std::size_t>((q * p.rows + y + top) * p.cols + left)]);
  return p;
}

// a[x] += sum_kw t[x - kw] taps[kw] over one row (KW fixed so it unrolls and vectorises; 0: kw).
template <int KW>
void row_taps(const double* t, const double* taps, std::int64_t kw, std::int64_t w, double* __restrict a) {
  if (KW) kw = KW;
  for (std::int64_t x = 0; x < w; ++x) {
    double sum = 0;
    for (std::int64_t k = 0; k < kw; ++k) sum += t[x - k] * taps[k];
    a[x] += sum;
  }
}

// grad_input: sum over o, kh, kw of t_out^2 w^2 at every input element, one (b, c) plane per
// slice: t_out^2 zero-padded by the kernel's reach, so each input row gathers one kernel row's
// taps in one pass.
void carried_input(const ConvShape& s, const std::vector<double>& w2, const std::vector<double>& t2,
                   std::vector<double>& acc, int threads) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups;
  // input row h reads output row y = h + ph - kh: padded row h + ph - kh + (kh_max - 1)
  const PaddedPlanes tp = padded(t2, s.n * s.o, ho, wo, s.kh - 1, s.kh - 1 + s.ph, s.kw - 1, s.kw - 1 + s.pw);
  parallel_for(s.n * s.c, threads, [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> taps(static_cast<std::size_t>(s.kw));
    for (std::int64_t bc = begin; bc < end; ++bc) {
      const std::int64_t b = bc / s.c, c = bc % s.c, gi = c / cg, cl = c - gi * cg;
      double* plane = &acc[static_cast<std::size_t>(bc * s.h * s.w)];
      for (std::int64_t o = gi * og; o < (gi + 1) * og; ++o)
        for (std::int64_t kh = 0; kh < s.kh; ++kh) {
          for (std::int64_t kw = 0; kw < s.kw; ++kw)
            taps[static_cast<std::size_t>(kw)] = w2[static_cast<std::size_t>(((o * cg + cl) * s.kh + kh) * s.kw + kw)];
          for (std::int64_t h = 0; h < s.h; ++h) {
            // input column x reads output column x + pw - kw: padded x + pw - kw + (kw_max - 1)
            const double* t = tp.at(b * s.o + o, h + s.ph - kh + s.kh - 1, s.pw + s.kw - 1);
            if (s.kw == 3)
              row_taps<3>(t, taps.data(), s.kw, s.w, plane + h * s.w);
            else
              row_taps<0>(t, taps.data(), s.kw, s.w, plane + h * s.w);
          }
        }
    }
  });
}

// grad_weight: sum over b and the output positions of t_out^2 x^2, one filter (o, c) per slice;
// x^2 zero-padded by the padding, so every tap's sum runs over whole output rows.
void carried_weight(const ConvShape& s, const std::vector<double>& x2, const std::vector<double>& t2,
                    std::vector<double>& acc, int threads) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups;
  const PaddedPlanes xp = padded(x2, s.n * s.c, s.h, s.w, s.ph, std::max<std::int64_t>(ho + s.kh - 1 - s.h - s.ph, 0),
                                 s.pw, std::max<std::int64_t>(wo + s.kw - 1 - s.w - s.pw, 0));
  parallel_for(s.o * cg, threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t oc = begin; oc < end; ++oc) {
      const std::int64_t o = oc / cg, c = (o / og) * cg + oc % cg;
      for (std::int64_t kh = 0; kh < s.kh; ++kh)
        for (std::int64_t kw = 0; kw < s.kw; ++kw) {
          double sum = 0;
          for (std::int64_t b = 0; b < s.n; ++b)
            for (std::int64_t y = 0; y < ho; ++y)
              sum += dot(&t2[static_cast<std::size_t>(((b * s.o + o) * ho + y) * wo)], xp.at(b * s.c + c, y + kh, kw), wo);
          acc[static_cast<std::size_t>((oc * s.kh + kh) * s.kw + kw)] = sum;
        }
    }
  });
}

// The transposed op's grad_input: the conv's forward correlation of t^2 (input space) with w^2,
// one (b, o) plane per slice, each element's terms added in the order c, kh, kw.
void carried_forward(const ConvShape& s, const std::vector<double>& w2, const std::vector<double>& t2,
                     std::vector<double>& acc, int threads) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups;
  parallel_for(s.n * s.o, threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bo = begin; bo < end; ++bo) {
      const std::int64_t b = bo / s.o, o = bo % s.o, c0 = (o / og) * cg;
      double* plane = &acc[static_cast<std::size_t>(bo * ho * wo)];
      for (std::int64_t cl = 0; cl < cg; ++cl)
        for (std::int64_t kh = 0; kh < s.kh; ++kh)
          for (std::int64_t kw = 0; kw < s.kw; ++kw) {
            const double wk = w2[static_cast<std::size_t>(((o * cg + cl) * s.kh + kh) * s.kw + kw)];
            const auto [y0, y1] = valid(ho, s.ph, kh, s.h);
            const auto [x0, x1] = valid(wo, s.pw, kw, s.w);
            for (std::int64_t y = y0; y < y1; ++y) {
              double* __restrict a = plane + y * wo + x0;
              const double* __restrict t =
                  &t2[static_cast<std::size_t>(((b * s.c + c0 + cl) * s.h + y - s.ph + kh) * s.w + x0 - s.pw + kw)];
              for (std::int64_t j = 0; j < x1 - x0; ++j) a[j] += t[j] * wk;
            }
          }
    }
  });
}

}  // namespace

std::vector<double> carried_term(CarriedInto into, const ConvShape& s, const ConvOperands& in,
                                 const std::vector<double>& t_out, int threads) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups;
  const double scale = 2.0 / static_cast<double>(std::max<std::int64_t>(s.n * s.o * ho * wo, 1));
  const std::vector<double> t2 = squared(t_out);
  std::vector<double> acc;
  if (into == CarriedInto::grad_bias) {
    acc.assign(static_cast<std::size_t>(s.o), 0.0);
    for (std::int64_t b = 0; b < s.n; ++b)
      for (std::int64_t o = 0; o < s.o; ++o)
        for (std::int64_t i = 0; i < ho * wo; ++i) acc[static_cast<std::size_t>(o)] += t2[static_cast<std::size_t>((b * s.o + o) * ho * wo + i)];
  } else if (into == CarriedInto::grad_input) {
    acc.assign(static_cast<std::size_t>(s.n * s.c * s.h * s.w), 0.0);
    carried_input(s, squared(*in.w), t2, acc, threads);
  } else {
    acc.assign(static_cast<std::size_t>(s.o * cg * s.kh * s.kw), 0.0);
    carried_weight(s, squared(*in.x), t2, acc, threads);
  }
  for (double& v : acc) v = scale * std::sqrt(v);
  return acc;
}

std::vector<double> carried_term_transposed(CarriedInto into, const ConvShape& s, const ConvOperands& in,
                                            const std::vector<double>& t_in, int threads) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups;
  const double scale = 2.0 / static_cast<double>(std::max<std::int64_t>(s.n * s.c * s.h * s.w, 1));
  const std::vector<double> t2 = squared(t_in);
  std::vector<double> acc;
  if (into == CarriedInto::grad_bias) {
    acc.assign(static_cast<std::size_t>(s.c), 0.0);
    for (std::int64_t b = 0; b < s.n; ++b)
      for (std::int64_t c = 0; c < s.c; ++c)
        for (std::int64_t i = 0; i < s.h * s.w; ++i) acc[static_cast<std::size_t>(c)] += t2[static_cast<std::size_t>((b * s.c + c) * s.h * s.w + i)];
  } else if (into == CarriedInto::grad_input) {
    acc.assign(static_cast<std::size_t>(s.n * s.o * ho * wo), 0.0);
    carried_forward(s, squared(*in.w), t2, acc, threads);
  } else {
    acc.assign(static_cast<std::size_t>(s.o * cg * s.kh * s.kw), 0.0);
    carried_weight(s, t2, squared(*in.dy), acc, threads);  // dW = sum x_t (output space) dY (input space)
  }
  for (double& v : acc) v = scale * std::sqrt(v);
  return acc;
}

std::vector<double> fft_term(int tile, ConvPass pass, const ConvShape& s, const ConvOperands& in) {
  if (pass == ConvPass::backward_filter) return fft_filter(tile, s, in);
  const WinogradProblem p = problem(pass, s, in);
  // ||w[o, c]||_2 per filter of the correlation (the flip leaves it unchanged).
  const std::int64_t cig = p.ci_total / p.groups;
  std::vector<double> fnorm(static_cast<std::size_t>(p.co_total * cig));
  for (std::int64_t co = 0; co < p.co_total; ++co)
    for (std::int64_t c = 0; c < cig; ++c) {
      double q = 0;
      for (std::int64_t kh = 0; kh < s.kh; ++kh)
        for (std::int64_t kw = 0; kw < s.kw; ++kw) {
          const double v = p.filt(co, c, kh, kw);
          q += v * v;
        }
      fnorm[static_cast<std::size_t>(co * cig + c)] = std::sqrt(q);
    }
  return fft_correlation(tile, p, s.kh, s.kw, fnorm);
}

}  // namespace validate::compare
