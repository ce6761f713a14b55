// libFuzzer target: manifest.json as verify/list/merge/compare read it. check_manifest (refset.cpp,
// called by read_manifest) must accept only documents every reader can walk without an exception:
// "files" an object of {"size": unsigned, "sha256": string} entries whose names stay inside the
// set directory. The walk below is what verify_set, `validate list` and merge do with it.
#include "fuzz_util.hpp"
#include "validate/cases/refset.hpp"
#include "validate/core/fs.hpp"

using namespace validate;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_manifest: invariant broken: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j = fuzz::parse_json(data, size);
  if (j.is_discarded()) return 0;
  auto st = cases::check_manifest(j, "set/manifest.json");
  if (!st) {
    if (st.message().rfind("set/manifest.json", 0) != 0) fail("error message does not name the file");
    return 0;
  }
  try {
    std::string format = j.value("format", "");  // merge
    (void)format;
    std::uint64_t bytes = 0;
    for (auto& [rel, e] : j["files"].items()) {
      auto p = fs::join_inside("set", rel);  // verify, merge
      if (!p) fail("accepted an entry name that leaves the set");
      if (*p != "set" && p->rfind("set/", 0) != 0) fail("joined path escapes the set");
      bytes += e.value("size", std::uint64_t{0});                // list
      (void)e["sha256"].get<std::string>();                        // verify, merge
    }
    (void)bytes;
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fail("a reader threw on an accepted manifest");
  }
  return 0;
}
