// The ULP histogram's x tick labels are rotated by -45 degrees and hang below the axis; the
// longest coarse bin label ("2147483649-4294967296", 21 characters) used to run past the bottom of
// the picture and through the axis title. Each label's box is bounded here from the emitted SVG
// alone: its anchor and rotation, the character count at 0.64 em per character (the widest digit
// advance among DejaVu Sans, Liberation Sans and Arial; '-' is narrower), 0.8 em ascent and 0.25 em
// descent, and the font sizes of the `tick` (10 px) and `axis` (11 px) classes in html.cpp's style
// sheet. (scripts/check-html.sh measures the same in Chromium, with the fonts it has.)
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "../../harness/report/src/svg.hpp"
#include "validate/metrics/ulp_histogram.hpp"

namespace svg = validate::report::svg;

namespace {

constexpr double kTick = 10, kAxis = 11, kCharEm = 0.64, kAscentEm = 0.8, kDescentEm = 0.25;

struct Geometry {
  double width = 0, height = 0;
  double title_top = 0, title_bottom = 0;   // the axis title's line box
  double labels_bottom = 0, labels_left = 1e9;
  std::size_t labels = 0;
};

Geometry measure(const std::string& s) {
  Geometry g;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(s, m, std::regex(R"~(viewBox="0 0 ([0-9.]+) ([0-9.]+)")~"))) << s;
  if (m.empty()) return g;
  g.width = std::stod(m[1]);
  g.height = std::stod(m[2]);
  EXPECT_TRUE(std::regex_search(s, m, std::regex(R"~(<text x="[0-9.]+" y="([0-9.]+)" class="axis")~"))) << s;
  if (!m.empty()) {
    g.title_top = std::stod(m[1]) - kAscentEm * kAxis;
    g.title_bottom = std::stod(m[1]) + kDescentEm * kAxis;
  }
  static const std::regex tick(
      R"~(<text x="([0-9.]+)" y="([0-9.]+)" class="tick" text-anchor="end" transform="rotate\(-45 ([0-9.]+) ([0-9.]+)\)">([^<]*)</text>)~");
  const double s45 = std::sqrt(0.5);
  for (auto it = std::sregex_iterator(s.begin(), s.end(), tick); it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    EXPECT_EQ((*it)[3], (*it)[1]);  // rotated about its own anchor
    EXPECT_EQ((*it)[4], (*it)[2]);
    const double len = kCharEm * kTick * static_cast<double>((*it)[5].length());
    // The text runs from (x - len, y) to (x, y) before the rotation: rotated by -45 degrees its
    // start lies at (x - len/sqrt2, y + len/sqrt2); the ascent points up-left, the descent down-right.
    g.labels_bottom = std::max(g.labels_bottom, y + s45 * (len + kDescentEm * kTick));
    g.labels_left = std::min(g.labels_left, x - s45 * (len + kAscentEm * kTick));
    ++g.labels;
  }
  return g;
}

svg::Bars ulp_bars(int bins, int width) {
  svg::Bars b;
  b.title = "ULP distance histogram: float32/k0072_ic008/conv2d/output";
  b.x_label = "ULP distance (float32)";
  for (int i = 0; i < bins; ++i) b.labels.push_back(validate::compare::UlpHistogram::coarse_label(i));
  b.series_names = {"regular", "near-zero"};
  b.series = {std::vector<std::uint64_t>(bins, 7), std::vector<std::uint64_t>(bins, 3)};
  b.width = width;
  return b;
}

}  // namespace

// Every width html.cpp gives a histogram (max(560, 80 + 24 bins)) and every bin count from one bin
// to all 34: each tick label inside the picture and clear of the axis title.
TEST(HistogramGeometry, TickLabelsStayInsideThePictureAndAboveTheAxisTitle) {
  for (int bins = 1; bins <= validate::compare::UlpHistogram::kCoarseBins; ++bins) {
    SCOPED_TRACE("bins " + std::to_string(bins));
    const Geometry g = measure(svg::bars(ulp_bars(bins, std::max(560, 80 + 24 * bins))));
    ASSERT_EQ(g.labels, static_cast<std::size_t>(bins));
    EXPECT_GE(g.labels_left, 0.0);
    EXPECT_LE(g.labels_bottom, g.title_top) << "tick labels run into the axis title";
    EXPECT_LE(g.title_bottom, g.height) << "the axis title is clipped";
  }
}

// The case of the report: all 34 bins. Before the margins followed the labels, the longest label
// reached about y = 281 in a 250-high picture, through the title at y = 246.
TEST(HistogramGeometry, TheLongestBinLabelFits) {
  const Geometry g = measure(svg::bars(ulp_bars(34, 80 + 24 * 34)));
  EXPECT_GT(g.labels_bottom, 250.0);  // taller than the old fixed picture: the margin grew
  EXPECT_LE(g.labels_bottom, g.title_top);
  EXPECT_LE(g.title_bottom, g.height);
  EXPECT_LT(g.height, 330.0);  // and not by more than the label needs
}
