#include "validate/core/version.hpp"

#include <ctime>

namespace validate {

namespace detail {
extern const char* const kGitCommit;  // generated/git_commit.cpp, rewritten when HEAD moves
}

std::string harness_version() { return VALIDATE_VERSION; }
std::string harness_git_commit() { return detail::kGitCommit; }

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace validate
