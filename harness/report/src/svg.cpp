#include "svg.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "format.hpp"

namespace validate::report::svg {

std::string escape(const std::string& s) { return detail::xml_escape(s); }

const char* palette(std::size_t i) {
  static const char* p[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                            "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  return p[i % 10];
}

SeriesStyle series_style(std::size_t i) {
  // Okabe-Ito's colour-blind-safe set (less its yellow, too pale on white) plus three darker
  // tones, ordered so neighbours differ in lightness too.
  static const char* colours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000",
                                  "#E69F00", "#56B4E9", "#882255", "#117733", "#999933"};
  static const char* markers[] = {"circle", "square",        "triangle", "diamond",       "cross",
                                  "triangle-down", "plus", "star", "triangle-right"};
  // 9 shapes and 5 dashes: coprime, so (i % 9, i % 5) repeats only after 45 series, and the nine
  // series of an error-versus-K plot (conv2d: 5, matmul: 4) each get their own shape.
  static const char* dashes[] = {"", "6 3", "1.5 2.5", "8 3 1.5 3", "3 3"};
  return {colours[i % 10], markers[i % 9], dashes[i % 5]};
}

std::string marker(const SeriesStyle& st, double x, double y, double r, bool hollow,
                   const std::string& tooltip) {
  const std::string paint =
      hollow ? fmt::format(R"~(fill="white" stroke="{}" stroke-width="1.3")~", st.colour)
             : fmt::format(R"~(fill="{}" stroke="{}" stroke-width="0.6")~", st.colour, st.colour);
  const std::string tip = tooltip.empty() ? "" : "<title>" + escape(tooltip) + "</title>";
  const std::string m = st.marker;
  auto poly = [&](std::initializer_list<std::pair<double, double>> pts) {
    std::string p;
    for (auto [dx, dy] : pts) p += fmt::format("{}{:.1f},{:.1f}", p.empty() ? "" : " ", x + dx, y + dy);
    return fmt::format(R"~(<polygon points="{}" {}>{}</polygon>)~", p, paint, tip);
  };
  if (m == "square") {
    const double h = r * 0.88;
    return fmt::format(R"~(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" {}>{}</rect>)~",
                       x - h, y - h, 2 * h, 2 * h, paint, tip);
  }
  if (m == "triangle") return poly({{0, -1.25 * r}, {1.1 * r, 0.75 * r}, {-1.1 * r, 0.75 * r}});
  if (m == "triangle-down") return poly({{0, 1.25 * r}, {1.1 * r, -0.75 * r}, {-1.1 * r, -0.75 * r}});
  if (m == "triangle-right") return poly({{1.25 * r, 0}, {-0.75 * r, 1.1 * r}, {-0.75 * r, -1.1 * r}});
  if (m == "diamond") return poly({{0, -1.3 * r}, {1.0 * r, 0}, {0, 1.3 * r}, {-1.0 * r, 0}});
  if (m == "star") {
    std::string p;
    for (int k = 0; k < 10; ++k) {
      const double a = -M_PI / 2 + k * M_PI / 5, rr = k % 2 ? 0.5 * r : 1.35 * r;
      p += fmt::format("{}{:.1f},{:.1f}", k ? " " : "", x + rr * std::cos(a), y + rr * std::sin(a));
    }
    return fmt::format(R"~(<polygon points="{}" {}>{}</polygon>)~", p, paint, tip);
  }
  if (m == "cross" || m == "plus") {
    // Strokes only, drawn thick; hollow (zero error) adds a white halo ring to tell it apart.
    const double d = m == "cross" ? r * 0.95 : r * 1.25;
    const std::string lines =
        m == "cross"
            ? fmt::format("M{:.1f},{:.1f} L{:.1f},{:.1f} M{:.1f},{:.1f} L{:.1f},{:.1f}", x - d,
                          y - d, x + d, y + d, x - d, y + d, x + d, y - d)
            : fmt::format("M{:.1f},{:.1f} L{:.1f},{:.1f} M{:.1f},{:.1f} L{:.1f},{:.1f}", x - d, y,
                          x + d, y, x, y - d, x, y + d);
    return fmt::format(R"~(<g>{}<path d="{}" stroke="{}" stroke-width="2.2" fill="none"/>{}</g>)~",
                       hollow ? fmt::format(R"~(<circle cx="{:.1f}" cy="{:.1f}" r="{:.1f}" fill="white" stroke="{}" stroke-width="0.8"/>)~",
                                            x, y, r * 1.6, st.colour)
                              : "",
                       lines, st.colour, tip);
  }
  return fmt::format(R"~(<circle cx="{:.1f}" cy="{:.1f}" r="{:.1f}" {}>{}</circle>)~", x, y, r,
                     paint, tip);
}

std::string bars(const Bars& b) {
  // The x tick labels are drawn rotated by -45 degrees, ending at their bin, so they hang down and
  // to the left by their length / sqrt(2). The bottom margin (and, when a long label sits near the
  // left edge, the left one) is sized from the longest label, bounding a character's advance by
  // kCharEm of the font size (digits are 0.55-0.64 em in the common sans-serif fonts), so a
  // "2147483649-4294967296" bin neither leaves the picture nor runs into the axis title below it.
  // Font sizes are those of the `tick` and `axis` classes (html.cpp's style sheet).
  constexpr double kTickFont = 10, kAxisFont = 11, kCharEm = 0.66, kAscentEm = 0.9, kDescentEm = 0.3;
  const double s45 = std::sqrt(0.5);
  const int T = 40, R = 12, ph = std::max(40, b.height - T - 78);
  const std::size_t nb = std::max<std::size_t>(1, b.labels.size()),
                    ns = std::max<std::size_t>(1, b.series.size());
  const auto label_w = [&](std::size_t i) { return kCharEm * kTickFont * static_cast<double>(b.labels[i].size()); };
  double longest = 0;
  for (std::size_t i = 0; i < b.labels.size(); ++i) longest = std::max(longest, label_w(i));
  const double tick_y = T + ph + 12;  // each label's anchor: its end, just under the axis
  const double labels_bottom = tick_y + s45 * (longest + kDescentEm * kTickFont);
  const double axis_y = std::ceil(labels_bottom + 6 + kAscentEm * kAxisFont);  // the title's baseline
  const int H = static_cast<int>(axis_y + std::ceil(kDescentEm * kAxisFont) + 2);
  // Left margin: the y tick labels need 48; a long x label near the left edge may need more. The
  // picture widens by as much, so the plot keeps b.width - 48 - R and its bins their width.
  const int pw = b.width - 48 - R;
  const double bw = static_cast<double>(pw) / static_cast<double>(nb);
  int L = 48;
  for (std::size_t i = 0; i < b.labels.size(); ++i)
    L = std::max(L, static_cast<int>(std::ceil(s45 * (label_w(i) + kAscentEm * kTickFont) -
                                               bw * (static_cast<double>(i) + 0.5) + 2)));
  const int W = pw + L + R;
  double ymax = 1;
  for (const auto& s : b.series)
    for (auto c : s) ymax = std::max(ymax, std::log10(1.0 + static_cast<double>(c)));
  ymax = std::ceil(ymax);
  std::string o = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)~",
      W, H, W, H);
  o += fmt::format(R"~(<title>{}</title><text x="{}" y="16" class="ct">{}</text>)~",
                   escape(b.title), L, escape(b.title));
  for (int d = 0; d <= static_cast<int>(ymax); ++d) {
    const double y = T + ph - ph * d / ymax;
    o += fmt::format(
        R"~(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)~",
        L, L + pw, y, y, L - 4, y + 3, d == 0 ? "0" : fmt::format("1e{}", d));
  }
  for (std::size_t s = 0; s < b.series.size(); ++s) {
    for (std::size_t i = 0; i < b.series[s].size() && i < nb; ++i) {
      const auto c = b.series[s][i];
      if (!c) continue;
      const double h = ph * std::log10(1.0 + static_cast<double>(c)) / ymax;
      const double x = L + bw * static_cast<double>(i) + bw * 0.1 +
                       bw * 0.8 * static_cast<double>(s) / static_cast<double>(ns);
      o += fmt::format(
          R"~(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{} ULP, {}: {}</title></rect>)~",
          x, T + ph - h, bw * 0.8 / static_cast<double>(ns), h, palette(s), escape(b.labels[i]),
          s < b.series_names.size() ? escape(b.series_names[s]) : "", c);
    }
  }
  for (std::size_t i = 0; i < nb && i < b.labels.size(); ++i) {
    const double x = L + bw * (static_cast<double>(i) + 0.5);
    o += fmt::format(
        R"~(<text x="{:.1f}" y="{}" class="tick" text-anchor="end" transform="rotate(-45 {:.1f} {})">{}</text>)~",
        x, tick_y, x, tick_y, escape(b.labels[i]));
  }
  o += fmt::format(R"~(<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>)~",
                   L + pw / 2, axis_y, escape(b.x_label));
  for (std::size_t s = 0; s < b.series_names.size() && b.series_names.size() > 1; ++s)
    o += fmt::format(
        R"~(<rect x="{}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}" class="tick">{}</text>)~",
        L + 8 + 90 * static_cast<int>(s), 24, palette(s), L + 22 + 90 * static_cast<int>(s), 33,
        escape(b.series_names[s]));
  return o + "</svg>";
}

std::string scatter_loglog(const Scatter& s) {
  const int W = s.width, H = s.height, L = 60, R = 182, T = 26, B = 40;
  const int pw = W - L - R, ph = H - T - B;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const auto& se : s.series)
    for (auto [x, y] : se.points) {
      if (x > 0) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
      if (y > 0) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    }
  std::string o = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)~",
      W, H, W, H);
  o += fmt::format(R"~(<title>{}</title><text x="{}" y="16" class="ct">{}</text>)~",
                   escape(s.title), L, escape(s.title));
  if (!(xmin <= xmax))
    return o +
           fmt::format(R"~(<text x="{}" y="{}" class="tick">no data</text></svg>)~", L, T + ph / 2);
  if (!(ymin <= ymax)) ymin = ymax = 1e-7;
  const double lx0 = std::floor(std::log10(xmin)),
               lx1 = std::max(lx0 + 1, std::ceil(std::log10(xmax)));
  const double ly0 = std::floor(std::log10(ymin)) - 1,
               ly1 = std::max(ly0 + 2, std::ceil(std::log10(ymax)));
  auto X = [&](double x) { return L + pw * (std::log10(x) - lx0) / (lx1 - lx0); };
  auto Y = [&](double y) {
    return y > 0 ? T + ph - ph * (std::log10(y) - ly0) / (ly1 - ly0) : static_cast<double>(T + ph);
  };
  o += fmt::format(R"~(<rect x="{}" y="{}" width="{}" height="{}" class="frame"/>)~", L, T, pw, ph);
  for (double d = lx0; d <= lx1; d += 1) {
    const double x = L + pw * (d - lx0) / (lx1 - lx0);
    o += fmt::format(
        R"~(<line x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" class="grid"/><text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{:g}</text>)~",
        x, x, T, T + ph, x, T + ph + 14, std::pow(10.0, d));
  }
  const int ystep = static_cast<int>(std::max(1.0, std::ceil((ly1 - ly0) / 8)));
  for (double d = ly0; d <= ly1; d += ystep) {
    const double y = T + ph - ph * (d - ly0) / (ly1 - ly0);
    o += fmt::format(
        R"~(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{}" y="{:.1f}" class="tick" text-anchor="end">1e{}</text>)~",
        L, L + pw, y, y, L - 4, y + 3, static_cast<int>(d));
  }
  for (std::size_t i = 0; i < s.series.size(); ++i) {
    auto pts = s.series[i].points;
    std::sort(pts.begin(), pts.end());
    const SeriesStyle st = series_style(s.series[i].style >= 0 ? static_cast<std::size_t>(s.series[i].style) : i);
    const std::string dash =
        *st.dash ? fmt::format(R"~( stroke-dasharray="{}")~", st.dash) : std::string();
    // One group per series, its style in data- attributes so a test (or a browser) can read it.
    o += fmt::format(R"~(<g class="series" data-series="{}" data-marker="{}" data-dash="{}">)~",
                     escape(s.series[i].name), st.marker, st.dash);
    std::string path;
    for (auto [x, y] : pts)
      if (x > 0) path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", X(x), Y(y));
    if (pts.size() > 1)
      o += fmt::format(
          R"~(<path d="{}" fill="none" stroke="{}" stroke-width="1.5" opacity="0.8"{}/>)~", path,
          st.colour, dash);
    for (auto [x, y] : pts) {
      if (!(x > 0)) continue;
      o += marker(st, X(x), Y(y), 3.6, !(y > 0), fmt::format("{}: K={:g}, {:.3g}", s.series[i].name, x, y));
    }
    // Legend: a dashed segment with the marker on it, then the name.
    const double ly = T + 8 + 15 * static_cast<double>(i);
    o += fmt::format(
        R"~(<g class="legend"><line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="1.5"{}/>{}<text x="{}" y="{:.1f}" class="tick">{}</text></g></g>)~",
        L + pw + 6, L + pw + 28, ly, ly, st.colour, dash, marker(st, L + pw + 17, ly, 3.6, false),
        L + pw + 33, ly + 4, escape(s.series[i].name));
  }
  o += fmt::format(R"~(<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>)~",
                   L + pw / 2, H - 6, escape(s.x_label));
  o += fmt::format(
      R"~(<text x="14" y="{}" class="axis" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)~",
      T + ph / 2, T + ph / 2, escape(s.y_label));
  return o + "</svg>";
}

std::string line_plot(const LinePlot& p) {
  const int W = p.width, H = p.height, L = 64, R = 150, T = 26, B = 40;
  const int pw = W - L - R, ph = H - T - B;
  std::string o = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img" class="lineplot">)~",
      W, H, W, H);
  o += fmt::format(R"~(<title>{}</title><text x="{}" y="16" class="ct">{}</text>)~", escape(p.title), L,
                   escape(p.title));
  // Thin each series: the point of largest y per bucket, in x order.
  std::vector<std::vector<std::pair<double, double>>> pts;
  for (const auto& se : p.series) {
    auto v = se.points;
    std::sort(v.begin(), v.end());
    if (v.size() > p.max_points && p.max_points > 1) {
      std::vector<std::pair<double, double>> thin;
      const double per = static_cast<double>(v.size()) / static_cast<double>(p.max_points);
      for (std::size_t b = 0; b < p.max_points; ++b) {
        const std::size_t a = static_cast<std::size_t>(per * static_cast<double>(b)),
                          z = std::min(v.size(), static_cast<std::size_t>(per * static_cast<double>(b + 1)));
        std::size_t best = a;
        for (std::size_t i = a; i < z; ++i)
          if (!(v[i].second <= v[best].second)) best = i;  // NaN counts as largest
        if (a < z) thin.push_back(v[best]);
      }
      v = std::move(thin);
    }
    pts.push_back(std::move(v));
  }
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const auto& v : pts)
    for (auto [x, y] : v) {
      if (!std::isfinite(x)) continue;
      xmin = std::min(xmin, x), xmax = std::max(xmax, x);
      if (std::isfinite(y) && (!p.log_y || y > 0)) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    }
  if (!(xmin <= xmax))
    return o + fmt::format(R"~(<text x="{}" y="{}" class="tick">no data</text></svg>)~", L, T + ph / 2);
  if (xmax == xmin) xmax = xmin + 1;
  if (!(ymin <= ymax)) ymin = ymax = p.log_y ? 1e-7 : 0;
  double y0, y1;
  if (p.log_y) {
    y0 = std::floor(std::log10(ymin));
    y1 = std::max(y0 + 1, std::ceil(std::log10(ymax)));
  } else {
    const double pad = ymax > ymin ? 0.05 * (ymax - ymin) : std::max(1e-12, std::fabs(ymax) * 0.05 + 1e-12);
    y0 = ymin - pad;
    y1 = ymax + pad;
  }
  auto X = [&](double x) { return L + pw * (x - xmin) / (xmax - xmin); };
  auto Y = [&](double y) {
    if (!std::isfinite(y)) return static_cast<double>(T);  // NaN / Inf: on the top edge
    if (p.log_y) return y > 0 ? T + ph - ph * (std::log10(y) - y0) / (y1 - y0) : static_cast<double>(T + ph);
    return T + ph - ph * (y - y0) / (y1 - y0);
  };
  o += fmt::format(R"~(<rect x="{}" y="{}" width="{}" height="{}" class="frame"/>)~", L, T, pw, ph);
  // x ticks: about 6, at round steps.
  const double span = xmax - xmin, raw = span / 6, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? mag : raw / mag < 5 ? 2 * mag : 5 * mag;
  for (double x = std::ceil(xmin / step) * step; x <= xmax + 1e-9; x += step)
    o += fmt::format(
        R"~(<line x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" class="grid"/><text x="{:.1f}" y="{}" class="tick" text-anchor="middle">{:g}</text>)~",
        X(x), X(x), T, T + ph, X(x), T + ph + 14, x);
  if (p.log_y) {
    const int ystep = static_cast<int>(std::max(1.0, std::ceil((y1 - y0) / 8)));
    for (double d = y0; d <= y1; d += ystep) {
      const double y = T + ph - ph * (d - y0) / (y1 - y0);
      o += fmt::format(
          R"~(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{}" y="{:.1f}" class="tick" text-anchor="end">1e{}</text>)~",
          L, L + pw, y, y, L - 4, y + 3, static_cast<int>(d));
    }
  } else {
    for (int k = 0; k <= 5; ++k) {
      const double v = y0 + (y1 - y0) * k / 5, y = Y(v);
      o += fmt::format(
          R"~(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{}" y="{:.1f}" class="tick" text-anchor="end">{:.3g}</text>)~",
          L, L + pw, y, y, L - 4, y + 3, v);
    }
  }
  if (p.marker_x >= xmin && p.marker_x <= xmax)
    o += fmt::format(
        R"~(<g class="marker-x"><line x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" stroke="#cf222e" stroke-width="1.2" stroke-dasharray="4 3"/><text x="{:.1f}" y="{}" class="tick" fill="#cf222e">{}</text></g>)~",
        X(p.marker_x), X(p.marker_x), T, T + ph, X(p.marker_x) + 3, T + 11, escape(p.marker_label));
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    const SeriesStyle st = series_style(p.series[i].style >= 0 ? static_cast<std::size_t>(p.series[i].style) : i);
    const std::string dash = *st.dash ? fmt::format(R"~( stroke-dasharray="{}")~", st.dash) : std::string();
    o += fmt::format(R"~(<g class="series" data-series="{}" data-points="{}" data-dash="{}">)~",
                     escape(p.series[i].name), pts[i].size(), st.dash);
    std::string path;
    for (auto [x, y] : pts[i]) path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", X(x), Y(y));
    if (pts[i].size() > 1)
      o += fmt::format(R"~(<path d="{}" fill="none" stroke="{}" stroke-width="1.5" opacity="0.85"{}/>)~", path,
                       st.colour, dash);
    // Markers where they can be told apart, and always for a point off the scale (zero, NaN).
    for (auto [x, y] : pts[i]) {
      const bool off = !std::isfinite(y) || (p.log_y && !(y > 0));
      if (pts[i].size() <= 60 || off)
        o += marker(st, X(x), Y(y), 3.0, off, fmt::format("{}: step {:g}, {:.4g}", p.series[i].name, x, y));
    }
    const double ly = T + 8 + 15 * static_cast<double>(i);
    o += fmt::format(
        R"~(<g class="legend"><line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="1.5"{}/>{}<text x="{}" y="{:.1f}" class="tick">{}</text></g></g>)~",
        L + pw + 6, L + pw + 28, ly, ly, st.colour, dash, marker(st, L + pw + 17, ly, 3.0, false), L + pw + 33,
        ly + 4, escape(p.series[i].name));
  }
  o += fmt::format(R"~(<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>)~", L + pw / 2, H - 6,
                   escape(p.x_label));
  o += fmt::format(
      R"~(<text x="14" y="{}" class="axis" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)~",
      T + ph / 2, T + ph / 2, escape(p.y_label));
  return o + "</svg>";
}

std::string sparkline(const std::vector<std::uint64_t>& counts, int width, int height) {
  std::string o = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" class="spark">)~", width,
      height);
  if (counts.empty()) return o + "</svg>";
  double m = 0;
  for (auto c : counts) m = std::max(m, std::log10(1.0 + static_cast<double>(c)));
  const double bw =
      static_cast<double>(width) / static_cast<double>(std::max<std::size_t>(counts.size(), 8));
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (!counts[i] || m <= 0) continue;
    const double h = (height - 2) * std::log10(1.0 + static_cast<double>(counts[i])) / m;
    o += fmt::format(R"~(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"/>)~",
                     bw * static_cast<double>(i), height - h, bw * 0.85, h,
                     i < 2   ? "#2ca02c"
                     : i < 5 ? "#ff7f0e"
                             : "#d62728");
  }
  return o + "</svg>";
}

}  // namespace validate::report::svg
