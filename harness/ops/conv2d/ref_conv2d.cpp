// conv2d's float64 reference: the oracle's arithmetic (the oracle backend calls it for every op).
//
// Determinism: every output element is accumulated in one fixed canonical order — forward over
// (ci, kh, kw), dx over (o, kh, kw), dW per image over (oh, ow) and then over images, db over
// (n, oh, ow) — independent of the layout and of the thread count. The arithmetic runs on
// contiguous staging copies read through the layout's strides, so the code path is the same for
// every layout and a correct layout gives bit-identical results.
#include "conv2d/reference.hpp"

#include "ref_util.hpp"

namespace validate::ops::conv2d {

using namespace ref;

void conv_forward(const ConvParams& p, const View& x, const View& w, const View& b,
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

void conv_backward(const ConvParams& p, const View& x, const View& w,
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
  if (gb) grad_bias(p.n, p.o, P, dy, gb, Accumulation::float64);
}

void conv_forward_acc(const ConvParams& p, const View& x, const View& w, const View& b, const View& y,
                      const ReferenceOptions& opt) {
  const i64 Cg = p.c / p.groups, Og = p.o / p.groups, Ho = p.hout(), Wo = p.wout();
  const Accumulation acc = opt.accumulation;
  for (i64 n = 0; n < p.n; ++n)
    for (i64 o = 0; o < p.o; ++o) {
      const i64 g = o / Og;
      for (i64 oh = 0; oh < Ho; ++oh)
        for (i64 ow = 0; ow < Wo; ++ow) {
          double s = b && opt.bias_first ? accumulate(0, b.at(o), acc) : 0;
          auto term = [&](i64 ci, i64 kh, i64 kw) {
            const i64 ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0],
                      iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
            if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) return;
            s = accumulate(s, x.at(n, g * Cg + ci, ih, iw) * w.at(o, ci, kh, kw), acc);
          };
          window_sum(opt.order, Cg, p.kh, p.kw, term);
          y.at(n, o, oh, ow) = b && !opt.bias_first ? accumulate(s, b.at(o), acc) : s;
        }
    }
}

void conv_backward_acc(const ConvParams& p, const View& x, const View& w, const std::vector<double>& dy,
                       const View& gx, const View& gw, const View& gb, Accumulation acc) {
  const i64 Cg = p.c / p.groups, Og = p.o / p.groups, Ho = p.hout(), Wo = p.wout();
  auto d = [&](i64 n, i64 o, i64 oh, i64 ow) { return dy[static_cast<std::size_t>(((n * p.o + o) * Ho + oh) * Wo + ow)]; };
  if (gx)
    for (i64 n = 0; n < p.n; ++n)
      for (i64 c = 0; c < p.c; ++c) {
        const i64 g = c / Cg;
        for (i64 ih = 0; ih < p.h; ++ih)
          for (i64 iw = 0; iw < p.w; ++iw) {
            double s = 0;
            for (i64 o = g * Og; o < (g + 1) * Og; ++o)
              for (i64 kh = 0; kh < p.kh; ++kh) {
                const i64 th = ih + p.padding[0] - kh * p.dilation[0];
                if (th < 0 || th % p.stride[0] || th / p.stride[0] >= Ho) continue;
                for (i64 kw = 0; kw < p.kw; ++kw) {
                  const i64 tw = iw + p.padding[1] - kw * p.dilation[1];
                  if (tw < 0 || tw % p.stride[1] || tw / p.stride[1] >= Wo) continue;
                  s = accumulate(s, w.at(o, c - g * Cg, kh, kw) * d(n, o, th / p.stride[0], tw / p.stride[1]), acc);
                }
              }
            gx.at(n, c, ih, iw) = s;
          }
      }
  if (gw)
    for (i64 o = 0; o < p.o; ++o) {
      const i64 g = o / Og;
      for (i64 ci = 0; ci < Cg; ++ci)
        for (i64 kh = 0; kh < p.kh; ++kh)
          for (i64 kw = 0; kw < p.kw; ++kw) {
            double s = 0;
            for (i64 n = 0; n < p.n; ++n)
              for (i64 oh = 0; oh < Ho; ++oh) {
                const i64 ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                if (ih < 0 || ih >= p.h) continue;
                for (i64 ow = 0; ow < Wo; ++ow) {
                  const i64 iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                  if (iw < 0 || iw >= p.w) continue;
                  s = accumulate(s, d(n, o, oh, ow) * x.at(n, g * Cg + ci, ih, iw), acc);
                }
              }
            gw.at(o, ci, kh, kw) = s;
          }
    }
  if (gb) grad_bias(p.n, p.o, Ho * Wo, dy, gb, acc);
}

double reference(const ConvParams& p, const Views& v, const ReferenceOptions& opt) {
  const View x = view_of(v, "input"), w = view_of(v, "weight"), b = view_of(v, "bias"), y = view_of(v, "output");
  std::vector<double> dy;
  if (opt.is_oracle_order())
    conv_forward(p, x, w, b, y, opt.threads);
  else
    conv_forward_acc(p, x, w, b, y, opt);
  const double loss = mse({p.n, p.o, p.hout(), p.wout()}, y, view_of(v, "target"), opt.loss_on, dy);
  const View gx = view_of(v, "grad_input"), gw = view_of(v, "grad_weight"), gb = view_of(v, "grad_bias");
  if (opt.accumulation == Accumulation::float64)
    conv_backward(p, x, w, dy, gx, gw, gb, opt.threads);
  else
    conv_backward_acc(p, x, w, dy, gx, gw, gb, opt.accumulation);
  return loss;
}

}  // namespace validate::ops::conv2d
