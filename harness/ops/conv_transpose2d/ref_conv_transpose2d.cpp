// conv_transpose2d's float64 reference: direct sums per output element (a gather, so each work
// item owns its outputs and the order is fixed).
#include "conv_transpose2d/reference.hpp"

#include "ref_util.hpp"

namespace validate::ops::conv_transpose2d {

using namespace ref;

namespace {

// The input position i with i*s - pad + k*d == o, or -1.
inline i64 source_index(i64 o, i64 s, i64 pad, i64 kd, i64 in) {
  const i64 t = o + pad - kd;
  if (t < 0 || t % s) return -1;
  return t / s < in ? t / s : -1;
}

}  // namespace

void forward(const ConvTransposeParams& p, const View& x, const View& w, const View& b, const View& y,
             const ReferenceOptions& opt) {
  const i64 Cg = p.c / p.groups, Og = p.o / p.groups, Ho = p.hout(), Wo = p.wout();
  const Accumulation acc = opt.accumulation;
  parallel_for(p.n * p.o, opt.threads, [&](i64 item) {
    const i64 n = item / p.o, o = item % p.o, g = o / Og, oc = o - g * Og;
    std::vector<i64> ih(static_cast<std::size_t>(p.kh)), iw(static_cast<std::size_t>(p.kw));
    for (i64 oh = 0; oh < Ho; ++oh)
      for (i64 ow = 0; ow < Wo; ++ow) {
        // The input row and column each kernel position reads for this output (-1: none).
        for (i64 kh = 0; kh < p.kh; ++kh)
          ih[static_cast<std::size_t>(kh)] = source_index(oh, p.stride[0], p.padding[0], kh * p.dilation[0], p.h);
        for (i64 kw = 0; kw < p.kw; ++kw)
          iw[static_cast<std::size_t>(kw)] = source_index(ow, p.stride[1], p.padding[1], kw * p.dilation[1], p.w);
        double s = b && opt.bias_first ? accumulate(0, b.at(o), acc) : 0;
        auto term = [&](i64 ci, i64 kh, i64 kw) {
          const i64 r = ih[static_cast<std::size_t>(kh)], c = iw[static_cast<std::size_t>(kw)];
          if (r < 0 || c < 0) return;
          s = accumulate(s, x.at(n, g * Cg + ci, r, c) * w.at(g * Cg + ci, oc, kh, kw), acc);
        };
        window_sum(opt.order, Cg, p.kh, p.kw, term);
        y.at(n, o, oh, ow) = b && !opt.bias_first ? accumulate(s, b.at(o), acc) : s;
      }
  });
}

void backward(const ConvTransposeParams& p, const View& x, const View& w, const std::vector<double>& dy,
              const View& gx, const View& gw, const View& gb, Accumulation acc, int threads) {
  const i64 Cg = p.c / p.groups, Og = p.o / p.groups, Ho = p.hout(), Wo = p.wout();
  auto d = [&](i64 n, i64 o, i64 oh, i64 ow) {
    return dy[static_cast<std::size_t>(((n * p.o + o) * Ho + oh) * Wo + ow)];
  };
  // dx[n,c,ih,iw] = sum over o of c's group, kh, kw of w[c,oc,kh,kw] dy[n,o,ih*s-p+kh*d,iw*s-p+kw*d].
  if (gx)
    parallel_for(p.n * p.c, threads, [&](i64 item) {
      const i64 n = item / p.c, c = item % p.c, g = c / Cg;
      for (i64 ih = 0; ih < p.h; ++ih)
        for (i64 iw = 0; iw < p.w; ++iw) {
          double s = 0;
          for (i64 oc = 0; oc < Og; ++oc)
            for (i64 kh = 0; kh < p.kh; ++kh) {
              const i64 oh = ih * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (oh < 0 || oh >= Ho) continue;
              for (i64 kw = 0; kw < p.kw; ++kw) {
                const i64 ow = iw * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (ow < 0 || ow >= Wo) continue;
                s = accumulate(s, w.at(c, oc, kh, kw) * d(n, g * Og + oc, oh, ow), acc);
              }
            }
          gx.at(n, c, ih, iw) = s;
        }
    });
  // dW[c,oc,kh,kw] = sum over n, ih, iw of x[n,c,ih,iw] dy[n,o,oh,ow].
  if (gw)
    parallel_for(p.c, threads, [&](i64 c) {
      const i64 g = c / Cg;
      for (i64 oc = 0; oc < Og; ++oc)
        for (i64 kh = 0; kh < p.kh; ++kh)
          for (i64 kw = 0; kw < p.kw; ++kw) {
            double s = 0;
            for (i64 n = 0; n < p.n; ++n)
              for (i64 ih = 0; ih < p.h; ++ih) {
                const i64 oh = ih * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                if (oh < 0 || oh >= Ho) continue;
                for (i64 iw = 0; iw < p.w; ++iw) {
                  const i64 ow = iw * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                  if (ow < 0 || ow >= Wo) continue;
                  s = accumulate(s, x.at(n, c, ih, iw) * d(n, g * Og + oc, oh, ow), acc);
                }
              }
            gw.at(c, oc, kh, kw) = s;
          }
    });
  if (gb) grad_bias(p.n, p.o, Ho * Wo, dy, gb, acc);
}

double reference(const ConvTransposeParams& p, const Views& v, const ReferenceOptions& opt) {
  const View x = view_of(v, "input"), w = view_of(v, "weight"), y = view_of(v, "output");
  forward(p, x, w, view_of(v, "bias"), y, opt);
  std::vector<double> dy;
  const double loss = mse({p.n, p.o, p.hout(), p.wout()}, y, view_of(v, "target"), opt.loss_on, dy);
  backward(p, x, w, dy, view_of(v, "grad_input"), view_of(v, "grad_weight"), view_of(v, "grad_bias"),
           opt.accumulation, opt.threads);
  return loss;
}

}  // namespace validate::ops::conv_transpose2d
