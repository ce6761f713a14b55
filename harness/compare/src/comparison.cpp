#include "validate/compare/comparison.hpp"

#include <cctype>

#include <fmt/format.h>

namespace validate::compare {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::passed:
      return "passed";
    case Verdict::failed:
      return "failed";
    case Verdict::mistrusted:
      return "mistrusted";
    case Verdict::not_run:
      return "not run";
    case Verdict::not_requested:
      return "not requested";
    case Verdict::skipped:
      return "skipped";
    case Verdict::unsupported:
      return "unsupported";
    case Verdict::error:
      return "error";
    case Verdict::invalid:
      return "invalid";
  }
  return "?";
}

bool is_failure(Verdict v) { return v == Verdict::failed || v == Verdict::error; }

std::string Entry::id() const {
  std::string s = dtype + "/" + case_name;
  if (op) s += "/" + op_name();
  if (!tensor.empty()) s += "/" + tensor;
  return s;
}

std::string Entry::op_name() const { return op ? ops::op_name(*op) : ""; }
std::string Entry::role_name() const { return role ? ops::role_name(*role) : ""; }

void Counts::add(Verdict v) {
  switch (v) {
    case Verdict::passed:
      ++passed;
      break;
    case Verdict::failed:
      ++failed;
      break;
    case Verdict::mistrusted:
      ++mistrusted;
      break;
    case Verdict::not_run:
      ++not_run;
      break;
    case Verdict::not_requested:
      ++not_requested;
      break;
    case Verdict::skipped:
      ++skipped;
      break;
    case Verdict::unsupported:
      ++unsupported;
      break;
    case Verdict::error:
      ++error;
      break;
    case Verdict::invalid:
      ++invalid;
      break;
  }
}

Counts Report::counts() const {
  Counts c;
  for (const auto& e : entries) c.add(e.verdict);
  return c;
}

int Report::exit_code() const {
  const Counts c = counts();
  if (c.invalid > 0 || !input_errors.empty()) return 2;
  if (c.failed + c.error > 0) return 1;
  if (c.passed + c.mistrusted == 0) return 1;  // nothing was compared: never a silent pass
  if (require_all && c.not_run + c.not_requested + c.skipped + c.unsupported > 0) return 1;
  if (require_all && !partial.empty()) return 1;
  return 0;
}

std::string Report::summary_line() const {
  const Counts c = counts();
  // Errors are failures (the runner broke on the op); they are counted in "failed".
  std::string s = fmt::format("validate: {} passed, {} failed, {} not run", c.passed,
                              c.failed + c.error, c.not_run);
  if (c.error) s += fmt::format(" ({} runner error{})", c.error, c.error == 1 ? "" : "s");
  if (c.not_requested) s += fmt::format(", {} not requested", c.not_requested);
  if (c.mistrusted) s += fmt::format(", {} mistrusted", c.mistrusted);
  if (c.skipped) s += fmt::format(", {} skipped", c.skipped);
  if (c.unsupported) s += fmt::format(", {} unsupported", c.unsupported);
  if (c.invalid) s += fmt::format(", {} invalid input{}", c.invalid, c.invalid == 1 ? "" : "s");
  if (c.passed + c.mistrusted + c.failed + c.error + c.invalid == 0) s += " (nothing was compared)";
  if (const auto unchecked = c.not_run + c.not_requested + c.skipped + c.unsupported; require_all && unchecked > 0)
    s += fmt::format("; --require-all: {} not checked, so this fails", unchecked);
  if (require_all && !partial.empty())
    s += "; --require-all: " + partial.front() + ", so this fails";
  if (!self_check.empty()) s += " - self-check: the references' own stack";
  return s;
}

std::string format_coords(std::int64_t index, const Shape& shape, const std::string& axes) {
  if (index < 0) return "";
  if (shape.empty()) return "(scalar)";
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    idx[a] = shape[a] ? index % shape[a] : 0;
    index = shape[a] ? index / shape[a] : 0;
  }
  std::string s;
  const bool named = axes.size() == shape.size();
  for (std::size_t a = 0; a < shape.size(); ++a) {
    if (a) s += ' ';
    if (named)
      s += fmt::format(
          "{}={}", static_cast<char>(std::tolower(static_cast<unsigned char>(axes[a]))), idx[a]);
    else
      s += fmt::format("[{}]={}", a, idx[a]);
  }
  return s;
}

}  // namespace validate::compare
