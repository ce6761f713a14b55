#pragma once
// Every output format of `validate compare` behind one interface (google/benchmark's reporters,
// ggml's printers): the terminal table, JSON (schema_version 1), Markdown for a PR comment, JUnit
// XML for CI test tabs, and a self-contained HTML page with inline SVG plots. File reporters write
// atomically (fs::write_atomic), so a CI step never picks up half a report.
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "validate/compare/comparison.hpp"
#include "validate/core/result.hpp"

namespace validate::report {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual std::string name() const = 0;
  virtual Status report(const compare::Report& r) = 0;
};

struct TerminalOptions {
  bool color = false;    // ANSI colours (see wants_color)
  bool verbose = false;  // details for passing tensors too
};

std::unique_ptr<Reporter> make_terminal_reporter(std::ostream& out, TerminalOptions opt);
std::unique_ptr<Reporter> make_json_reporter(std::string path);
std::unique_ptr<Reporter> make_markdown_reporter(std::string path);
// JUnit testsuites are named `<suite_prefix>.<variant>.<dtype>` (classnames add case and op):
// a CI page holding several compares' files tells them apart by it (scripts/nightly.sh passes the
// stage, `compare/<run>`).
inline constexpr std::string_view kDefaultJunitSuite = "validate";
std::unique_ptr<Reporter> make_junit_reporter(std::string path, std::string suite_prefix = std::string(kDefaultJunitSuite));
std::unique_ptr<Reporter> make_html_reporter(std::string path);

// The renderings themselves, for tests and for callers that want the text.
void render_terminal(std::ostream& out, const compare::Report& r, TerminalOptions opt);
nlohmann::json render_json(const compare::Report& r);  // "schema_version": 1
std::string render_markdown(const compare::Report& r);
std::string render_junit(const compare::Report& r, std::string_view suite_prefix = kDefaultJunitSuite);
std::string render_html(const compare::Report& r);

// Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org).
bool wants_color(int fd);

inline constexpr int kJsonSchemaVersion = 1;

}  // namespace validate::report
