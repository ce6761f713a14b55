#pragma once
// Harness version and the git commit it was built from, for manifests and run_info.json.
#include <string>

namespace validate {

std::string harness_version();
std::string harness_git_commit();
std::string utc_timestamp();  // ISO 8601, e.g. 2026-11-22T19:30:00Z

}  // namespace validate
