#pragma once
// Internal to the HTML reporter: small inline-SVG charts (no scripts, no external resources).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace validate::report::svg {

std::string escape(const std::string& s);  // for SVG/HTML text and attributes

struct Bars {
  std::string title, x_label;
  std::vector<std::string> labels;                 // one per bin
  std::vector<std::string> series_names;           // e.g. "regular", "near-zero"
  std::vector<std::vector<std::uint64_t>> series;  // series[s][bin]
  int width = 560, height = 250;
};
// Grouped bars on a log(1 + count) axis, exact counts in tooltips.
std::string bars(const Bars& b);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>>
      points;  // (x, y); y <= 0 is drawn hollow on the bottom edge
  int style = -1;  // index into series_style(); -1: the series' position in the plot
};
// How series i is told apart: a colour, a marker shape and a line dash. Nine or more series in
// colour alone blur together (and vanish in greyscale or for colour-blind readers), so the shape
// and the dash change with the colour: the first 45 styles differ pairwise in shape or dash, and
// the first 9 in shape.
struct SeriesStyle {
  const char* colour;
  const char* marker;  // circle, square, triangle, diamond, cross, triangle-down, plus, star,
                       // triangle-right
  const char* dash;    // stroke-dasharray ("" = solid)
};
SeriesStyle series_style(std::size_t i);
// A marker of the given shape centred on (x, y); hollow: white fill, coloured outline.
std::string marker(const SeriesStyle& st, double x, double y, double r, bool hollow,
                   const std::string& tooltip = "");
struct Scatter {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  int width = 560, height = 300;
};
// Log-log scatter with lines joining each series' points in x order, and a legend.
std::string scatter_loglog(const Scatter& s);

// Curves against a linear x axis (a training step), the y axis logarithmic (every y > 0 of the
// plot; y <= 0 is drawn hollow on the bottom edge) or linear. Series of more than `max_points`
// points are thinned to the largest y of each of `max_points` buckets (an error spike survives).
// `marker_x` >= 0 draws a vertical line there, labelled `marker_label` (the first bad step).
struct LinePlot {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_y = true;
  double marker_x = -1;
  std::string marker_label;
  int width = 560, height = 300;
  std::size_t max_points = 1000;
};
std::string line_plot(const LinePlot& p);

// A tiny histogram for table cells.
std::string sparkline(const std::vector<std::uint64_t>& counts, int width = 110, int height = 22);

const char* palette(std::size_t i);

}  // namespace validate::report::svg
