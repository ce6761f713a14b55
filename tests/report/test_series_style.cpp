// Error-versus-K plots draw nine series (conv2d: output, loss and three gradients; matmul: output,
// loss, two gradients). Told apart by colour alone they blur together, and in greyscale or for a
// colour-blind reader they are one series: each must have its own marker shape and line dash too,
// the same in every plot of a report.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "../../harness/report/src/svg.hpp"
#include "../common/temp_dir.hpp"
#include "../compare/fixture.hpp"
#include "validate/compare/compare.hpp"
#include "validate/report/reporter.hpp"

using namespace validate;
using namespace validate::testing;
namespace svg = validate::report::svg;

namespace {

struct Drawn {
  std::string name, marker, dash;
};
std::vector<Drawn> series_groups(const std::string& s) {
  std::vector<Drawn> out;
  static const std::regex re(
      R"~(<g class="series" data-series="([^"]*)" data-marker="([^"]*)" data-dash="([^"]*)">)~");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back({(*it)[1], (*it)[2], (*it)[3]});
  return out;
}

TEST(SeriesStyle, NineSeriesHaveNineShapesAndFortyFiveStylesAreDistinct) {
  std::set<std::string> shapes;
  std::set<std::pair<std::string, std::string>> styles;
  for (std::size_t i = 0; i < 45; ++i) {
    const auto st = svg::series_style(i);
    if (i < 9) shapes.insert(st.marker);
    styles.insert({st.marker, st.dash});
  }
  EXPECT_EQ(shapes.size(), 9u);
  EXPECT_EQ(styles.size(), 45u);
  // Neighbours differ in marker and in dash, not only in colour.
  for (std::size_t i = 0; i + 1 < 45; ++i) {
    EXPECT_STRNE(svg::series_style(i).marker, svg::series_style(i + 1).marker) << i;
    EXPECT_STRNE(svg::series_style(i).dash, svg::series_style(i + 1).dash) << i;
  }
}

TEST(SeriesStyle, ScatterDrawsEachSeriesWithItsMarkerDashAndLegend) {
  svg::Scatter s;
  s.title = "t";
  for (int i = 0; i < 9; ++i)
    s.series.push_back({"s" + std::to_string(i), {{18, 1e-6 * (i + 1)}, {72, 0.0}, {144, 2e-6}}});
  const std::string out = svg::scatter_loglog(s);
  const auto groups = series_groups(out);
  ASSERT_EQ(groups.size(), 9u);
  std::set<std::string> shapes;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto st = svg::series_style(i);
    EXPECT_EQ(groups[i].marker, st.marker);
    EXPECT_EQ(groups[i].dash, st.dash);
    shapes.insert(groups[i].marker);
  }
  EXPECT_EQ(shapes.size(), 9u);
  // Dashed lines are drawn (four of the five dashes are not solid) and the legend has a line
  // segment per series.
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(<path d="M[^"]*"[^>]*stroke-dasharray="6 3")")));
  std::size_t legends = 0;
  for (auto p = out.find("class=\"legend\""); p != std::string::npos; p = out.find("class=\"legend\"", p + 1))
    ++legends;
  EXPECT_EQ(legends, 9u);
  // A zero (y = 0) is drawn hollow: white fill.
  EXPECT_NE(out.find("fill=\"white\""), std::string::npos);
  // An explicit style wins over the position.
  svg::Scatter one;
  one.series.push_back({"only", {{18, 1.0}}, 4});
  EXPECT_EQ(series_groups(svg::scatter_loglog(one)).at(0).marker, svg::series_style(4).marker);
}

TEST(SeriesStyle, TheSameSeriesLooksTheSameInEveryPlotOfAReport) {
  TempDir tmp{"series_style"};
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_reference(ref, {small_case(DType::float32), small_case(DType::bfloat16)});
  RunSpec spec;
  spec.edit = [](Json& doc) {  // bfloat16 matmul not run: its plots hold fewer series
    if (doc["dtype"] == "bfloat16") doc["ops"]["matmul"]["produced"] = Json::array({"output"});
  };
  write_run(ref, run, spec);
  compare::CompareOptions opt;
  opt.ref_dir = ref;
  opt.run_dir = run;
  auto r = compare::compare_sets(opt);
  ASSERT_TRUE(r) << r.message();
  const auto groups = series_groups(report::render_html(*r));
  ASSERT_GE(groups.size(), 9u);
  std::map<std::string, std::pair<std::string, std::string>> look;
  for (const auto& g : groups) {
    auto [it, fresh] = look.emplace(g.name, std::make_pair(g.marker, g.dash));
    EXPECT_EQ(it->second, std::make_pair(g.marker, g.dash)) << g.name;
  }
  std::set<std::pair<std::string, std::string>> distinct;
  for (const auto& [name, st] : look) distinct.insert(st);
  EXPECT_EQ(distinct.size(), look.size());
}

}  // namespace
