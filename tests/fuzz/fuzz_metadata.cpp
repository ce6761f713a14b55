// libFuzzer target: `<case>_metadata.json` documents (refset.cpp case_from_metadata) and what
// verify/list then do with the case they describe: tensor shapes, element counts, file names
// joined under the set's directory.
#include "fuzz_util.hpp"
#include "validate/cases/refset.hpp"
#include "validate/core/fs.hpp"

using namespace validate;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_metadata: invariant broken: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j = fuzz::parse_json(data, size);
  if (j.is_discarded()) return 0;
  auto c = cases::case_from_metadata(j, "set/float32/x_metadata.json");
  if (!c) {
    if (c.message().rfind("set/float32/x_metadata.json", 0) != 0) fail("error message does not name the file");
    return 0;
  }
  for (const auto& inst : c->ops) {
    const auto op = inst.op();
    for (const auto& t : c->tensors(op)) {
      std::int64_t n = 1;
      for (auto d : t.shape) {
        if (d < 1) fail("non-positive dimension in accepted metadata");
        if (n > INT64_MAX / d) fail("tensor element count overflows");
        n *= d;
      }
      // The file a tensor is read from must stay inside the set's dtype folder.
      auto p = fs::join_inside("set/float32", c->file_name(op, t.name));
      if (!p) fail("accepted a case name that makes an unsafe file name");
      if (p->rfind("set/float32/", 0) != 0) fail("file name escapes the dtype folder");
    }
    (void)cases::metadata_hash(j, op, "input");
  }
  return 0;
}
