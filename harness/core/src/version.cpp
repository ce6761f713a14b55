#include "validate/core/version.hpp"

#include <ctime>

namespace validate {

std::string harness_version() { return VALIDATE_VERSION; }
std::string harness_git_commit() { return VALIDATE_GIT_COMMIT; }

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace validate
