// libFuzzer target: case files (cases/*.json). The bytes are parsed as JSON without exceptions,
// as read_json does; a document that parses goes through parse_case_file and, when accepted,
// through expand() and every tensor shape, as `validate generate` would use them.
#include "fuzz_util.hpp"
#include "validate/cases/case_file.hpp"

using namespace validate;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_case_file: invariant broken: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j = fuzz::parse_json(data, size);
  if (j.is_discarded()) return 0;
  auto f = cases::parse_case_file(j, "fuzz.json");
  if (!f) {
    if (f.message().rfind("fuzz.json", 0) != 0) fail("error message does not name the file");
    return 0;
  }
  if (f->cases.empty() || f->cases.size() != f->case_dtypes.size()) fail("accepted an empty or inconsistent file");
  cases::Selection sel;
  sel.shard.count = 3;
  sel.shard.index = static_cast<int>(size % 3);
  auto list = cases::expand(*f, sel);
  if (!list) return 0;
  for (const auto& c : *list) {
    // A case that parsed must be usable: positive shapes whose element counts fit in int64.
    if (c.name.empty() || c.name.find('/') != std::string::npos || c.name.find("..") == 0) fail("unsafe case name");
    for (auto op : {cases::Op::conv2d, cases::Op::matmul}) {
      for (const auto& t : c.tensors(op)) {
        std::int64_t n = 1;
        for (auto d : t.shape) {
          if (d < 1) fail("non-positive dimension in an accepted case");
          if (n > INT64_MAX / d) fail("tensor element count overflows");
          n *= d;
        }
        (void)c.file_name(op, t.name);
      }
    }
  }
  return 0;
}
