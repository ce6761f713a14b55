// Winograd and FFT error terms of a convolution (algorithm_bounds.hpp; docs/compare.md,
// "Algorithm-aware bounds").
#include "validate/metrics/algorithm_bounds.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>

namespace validate::compare {

namespace {

constexpr double kU = 0x1p-24;  // float32 unit roundoff: the transforms and sums run in float32

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

// out (r x r) = L (r x k) M (k x k) L^T.
void sandwich(const double* l, int r, int k, const double* m, double* tmp, double* out) {
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

// One channel's transformed tile, signed (L X L^T) and its root-sum-square scale
// sqrt((L.*L) (X.*X) (L.*L)^T): together they bound the partial sums of the transform (|value| +
// scale, as |y| + rho does for the direct sum).
struct Transformed {
  std::vector<double> value, scale;
};

void transform(const std::vector<double>& l, const std::vector<double>& l2, int r, int k, const std::vector<double>& x,
               std::vector<double>& tmp, Transformed& out) {
  std::vector<double> x2(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x2[i] = x[i] * x[i];
  out.value.resize(static_cast<std::size_t>(r * r));
  out.scale.resize(static_cast<std::size_t>(r * r));
  sandwich(l.data(), r, k, x.data(), tmp.data(), out.value.data());
  sandwich(l2.data(), r, k, x2.data(), tmp.data(), out.scale.data());
  for (double& v : out.scale) v = std::sqrt(v);
}

std::vector<double> winograd_core(int m, const WinogradProblem& p) {
  const WinogradMatrices wm = winograd_matrices(m);
  const int n = wm.n;
  const std::vector<double> g2 = squared(wm.g), bt2 = squared(wm.bt);
  const double tu = transform_roundings(wm.g, n, 3), tv = transform_roundings(wm.bt, n, n),
               ta = transform_roundings(wm.at, m, n);
  const std::int64_t cig = p.ci_total / p.groups, cog = p.co_total / p.groups, nn = n * n;
  std::vector<double> tmp(static_cast<std::size_t>(nn)), gg(9);
  // U = G g G^T per (co, ci): the signed value and the bound |U| + Uhat of its partial sums.
  std::vector<Transformed> u(static_cast<std::size_t>(p.co_total * cig));
  for (std::int64_t co = 0; co < p.co_total; ++co)
    for (std::int64_t c = 0; c < cig; ++c) {
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) gg[static_cast<std::size_t>(kh * 3 + kw)] = p.filt(co, c, kh, kw);
      transform(wm.g, g2, n, 3, gg, tmp, u[static_cast<std::size_t>(co * cig + c)]);
    }
  const std::int64_t th = (p.ho + m - 1) / m, tw = (p.wo + m - 1) / m;
  std::vector<double> out(static_cast<std::size_t>(p.batches * p.co_total * p.ho * p.wo), 0.0);
  std::vector<Transformed> v(static_cast<std::size_t>(p.ci_total));
  std::vector<double> d(static_cast<std::size_t>(nn)), mm(static_cast<std::size_t>(nn)), s2(static_cast<std::size_t>(nn));
  for (std::int64_t b = 0; b < p.batches; ++b)
    for (std::int64_t ty = 0; ty < th; ++ty)
      for (std::int64_t tx = 0; tx < tw; ++tx) {
        for (std::int64_t c = 0; c < p.ci_total; ++c) {
          for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) {
              const std::int64_t y = ty * m + i - p.ph, x = tx * m + j - p.pw;
              d[static_cast<std::size_t>(i * n + j)] = y >= 0 && y < p.hs && x >= 0 && x < p.ws ? p.src(b, c, y, x) : 0.0;
            }
          transform(wm.bt, bt2, n, n, d, tmp, v[static_cast<std::size_t>(c)]);
        }
        for (std::int64_t co = 0; co < p.co_total; ++co) {
          const std::int64_t c0 = (co / cog) * cig;
          std::fill(mm.begin(), mm.end(), 0.0);
          std::fill(s2.begin(), s2.end(), 0.0);
          for (std::int64_t c = 0; c < cig; ++c) {
            const Transformed& uc = u[static_cast<std::size_t>(co * cig + c)];
            const Transformed& vc = v[static_cast<std::size_t>(c0 + c)];
            for (std::size_t k = 0; k < static_cast<std::size_t>(nn); ++k) {
              const double pr = (std::fabs(uc.value[k]) + uc.scale[k]) * (std::fabs(vc.value[k]) + vc.scale[k]);
              mm[k] += uc.value[k] * vc.value[k];
              s2[k] += pr * pr;
            }
          }
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < m; ++j) {
              const std::int64_t y = ty * m + i, x = tx * m + j;
              if (y >= p.ho || x >= p.wo) continue;
              double var = 0, val = 0, rss = 0;
              for (int xi = 0; xi < n; ++xi)
                for (int nu = 0; nu < n; ++nu) {
                  const std::size_t k = static_cast<std::size_t>(xi * n + nu);
                  const double a = wm.at[static_cast<std::size_t>(i * n + xi)] * wm.at[static_cast<std::size_t>(j * n + nu)];
                  const double acc = std::fabs(mm[k]) + std::sqrt(s2[k]);  // the channel sum's partial sums
                  var += a * a * ((tu + tv + 1) * s2[k] + static_cast<double>(cig) * acc * acc);
                  val += a * mm[k];
                  rss += a * a * mm[k] * mm[k];
                }
              out[static_cast<std::size_t>(((b * p.co_total + co) * p.ho + y) * p.wo + x)] =
                  kU * (std::sqrt(var) + std::sqrt(ta) * (std::fabs(val) + std::sqrt(rss)));
            }
        }
      }
  return out;
}

double at4(const std::vector<double>& v, std::int64_t d1, std::int64_t d2, std::int64_t d3, std::int64_t i,
           std::int64_t j, std::int64_t k, std::int64_t l);

// Backward filter by Winograd F(3x3, m x m), the transpose of F(m, 3) (same points, so the same
// B^T; A and G those of F(3, m)): per batch element and m x m tile t of dL/dy, U = G dy_t G^T and
// V = B^T d B over the tile's (m + 2)^2 input window, M[o, c] = sum over (b, t) of U .* V, and
// dW[o, c] = A^T M A. The same bound as the forward's with the P = N * tiles pairs for C.
std::vector<double> winograd_filter(int m, const ConvShape& s, const ConvOperands& in) {
  const WinogradMatrices wm = winograd_matrices(3, m);
  const int n = wm.n;
  const std::vector<double> g2 = squared(wm.g), bt2 = squared(wm.bt);
  const double tu = transform_roundings(wm.g, n, m), tv = transform_roundings(wm.bt, n, n),
               ta = transform_roundings(wm.at, 3, n);
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups, nn = n * n;
  const std::int64_t th = (ho + m - 1) / m, tw = (wo + m - 1) / m;
  const double pairs = static_cast<double>(s.n * th * tw);
  std::vector<double> mm(static_cast<std::size_t>(s.o * cg * nn), 0.0), s2(mm.size(), 0.0);
  std::vector<double> tmp(static_cast<std::size_t>(nn)), d(static_cast<std::size_t>(nn)), dt(static_cast<std::size_t>(m * m));
  std::vector<Transformed> v(static_cast<std::size_t>(s.c)), u(static_cast<std::size_t>(s.o));
  for (std::int64_t b = 0; b < s.n; ++b)
    for (std::int64_t ty = 0; ty < th; ++ty)
      for (std::int64_t tx = 0; tx < tw; ++tx) {
        for (std::int64_t c = 0; c < s.c; ++c) {
          for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) {
              const std::int64_t y = ty * m + i - s.ph, x = tx * m + j - s.pw;
              d[static_cast<std::size_t>(i * n + j)] =
                  y >= 0 && y < s.h && x >= 0 && x < s.w ? at4(*in.x, s.c, s.h, s.w, b, c, y, x) : 0.0;
            }
          transform(wm.bt, bt2, n, n, d, tmp, v[static_cast<std::size_t>(c)]);
        }
        for (std::int64_t o = 0; o < s.o; ++o) {
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < m; ++j) {
              const std::int64_t y = ty * m + i, x = tx * m + j;
              dt[static_cast<std::size_t>(i * m + j)] = y < ho && x < wo ? at4(*in.dy, s.o, ho, wo, b, o, y, x) : 0.0;
            }
          transform(wm.g, g2, n, m, dt, tmp, u[static_cast<std::size_t>(o)]);
        }
        for (std::int64_t o = 0; o < s.o; ++o)
          for (std::int64_t cl = 0; cl < cg; ++cl) {
            const Transformed& uo = u[static_cast<std::size_t>(o)];
            const Transformed& vc = v[static_cast<std::size_t>((o / og) * cg + cl)];
            double* mo = &mm[static_cast<std::size_t>((o * cg + cl) * nn)];
            double* so = &s2[static_cast<std::size_t>((o * cg + cl) * nn)];
            for (std::size_t k = 0; k < static_cast<std::size_t>(nn); ++k) {
              const double pr = (std::fabs(uo.value[k]) + uo.scale[k]) * (std::fabs(vc.value[k]) + vc.scale[k]);
              mo[k] += uo.value[k] * vc.value[k];
              so[k] += pr * pr;
            }
          }
      }
  std::vector<double> out(static_cast<std::size_t>(s.o * cg * 9));
  for (std::int64_t oc = 0; oc < s.o * cg; ++oc)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double var = 0, val = 0, rss = 0;
        for (int xi = 0; xi < n; ++xi)
          for (int nu = 0; nu < n; ++nu) {
            const std::size_t k = static_cast<std::size_t>(oc * nn + xi * n + nu);
            const double a = wm.at[static_cast<std::size_t>(i * n + xi)] * wm.at[static_cast<std::size_t>(j * n + nu)];
            const double acc = std::fabs(mm[k]) + std::sqrt(s2[k]);
            var += a * a * ((tu + tv + 1) * s2[k] + pairs * acc * acc);
            val += a * mm[k];
            rss += a * a * mm[k] * mm[k];
          }
        out[static_cast<std::size_t>(oc * 9 + i * 3 + j)] = kU * (std::sqrt(var) + std::sqrt(ta) * (std::fabs(val) + std::sqrt(rss)));
      }
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
  return kU / std::sqrt(spread) * std::sqrt((3 * k * k + pairs + 2) * q2);
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

std::vector<double> winograd_term(int m, ConvPass pass, const ConvShape& s, const ConvOperands& in) {
  if (s.kh != 3 || s.kw != 3) return {};
  if (pass == ConvPass::backward_filter) return winograd_filter(m, s, in);
  return winograd_core(m, problem(pass, s, in));
}

std::vector<double> carried_term(CarriedInto into, const ConvShape& s, const ConvOperands& in,
                                 const std::vector<double>& t_out) {
  const std::int64_t ho = s.hout(), wo = s.wout(), cg = s.c / s.groups, og = s.o / s.groups;
  const double scale = 2.0 / static_cast<double>(std::max<std::int64_t>(s.n * s.o * ho * wo, 1));
  const auto& x = *in.x;
  const auto& w = *in.w;
  std::vector<double> acc;
  auto t2 = [&](std::int64_t b, std::int64_t o, std::int64_t y, std::int64_t xx) {
    const double t = t_out[static_cast<std::size_t>(((b * s.o + o) * ho + y) * wo + xx)];
    return t * t;
  };
  if (into == CarriedInto::grad_bias) {
    acc.assign(static_cast<std::size_t>(s.o), 0.0);
    for (std::int64_t b = 0; b < s.n; ++b)
      for (std::int64_t o = 0; o < s.o; ++o)
        for (std::int64_t y = 0; y < ho; ++y)
          for (std::int64_t xx = 0; xx < wo; ++xx) acc[static_cast<std::size_t>(o)] += t2(b, o, y, xx);
  } else if (into == CarriedInto::grad_input) {
    acc.assign(static_cast<std::size_t>(s.n * s.c * s.h * s.w), 0.0);
    for (std::int64_t b = 0; b < s.n; ++b)
      for (std::int64_t o = 0; o < s.o; ++o)
        for (std::int64_t cl = 0; cl < cg; ++cl)
          for (std::int64_t kh = 0; kh < s.kh; ++kh)
            for (std::int64_t kw = 0; kw < s.kw; ++kw) {
              const double wv = at4(w, cg, s.kh, s.kw, o, cl, kh, kw), w2 = wv * wv;
              const std::int64_t c = (o / og) * cg + cl;
              for (std::int64_t y = 0; y < ho; ++y) {
                const std::int64_t h = y - s.ph + kh;
                if (h < 0 || h >= s.h) continue;
                for (std::int64_t xx = 0; xx < wo; ++xx) {
                  const std::int64_t ww = xx - s.pw + kw;
                  if (ww < 0 || ww >= s.w) continue;
                  acc[static_cast<std::size_t>(((b * s.c + c) * s.h + h) * s.w + ww)] += t2(b, o, y, xx) * w2;
                }
              }
            }
  } else {
    acc.assign(static_cast<std::size_t>(s.o * cg * s.kh * s.kw), 0.0);
    for (std::int64_t b = 0; b < s.n; ++b)
      for (std::int64_t o = 0; o < s.o; ++o)
        for (std::int64_t cl = 0; cl < cg; ++cl)
          for (std::int64_t kh = 0; kh < s.kh; ++kh)
            for (std::int64_t kw = 0; kw < s.kw; ++kw) {
              const std::int64_t c = (o / og) * cg + cl;
              double sum = 0;
              for (std::int64_t y = 0; y < ho; ++y) {
                const std::int64_t h = y - s.ph + kh;
                if (h < 0 || h >= s.h) continue;
                for (std::int64_t xx = 0; xx < wo; ++xx) {
                  const std::int64_t ww = xx - s.pw + kw;
                  if (ww < 0 || ww >= s.w) continue;
                  const double xv = at4(x, s.c, s.h, s.w, b, c, h, ww);
                  sum += t2(b, o, y, xx) * xv * xv;
                }
              }
              acc[static_cast<std::size_t>(((o * cg + cl) * s.kh + kh) * s.kw + kw)] += sum;
            }
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
