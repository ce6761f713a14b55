// libFuzzer target: layout specs and layout files (harness/layout). The first byte picks what the
// rest is: a spec for one of the canonical axis sets (parse_spec, then the to_string round trip),
// a spec whose tensor must be guessed (guess_canonical_axes, as `validate probe` does), or a
// layout JSON file (load_layout, read from a memfd like a file given to --layout).
#include <string_view>

#include "fuzz_util.hpp"
#include "validate/layout/preset.hpp"
#include "validate/layout/spec.hpp"

using namespace validate;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_layout: invariant broken: %s\n", what);
  std::abort();
}

void check_spec(std::string_view text, std::string_view canonical) {
  auto s = layout::parse_spec(text, canonical);
  if (!s) return;
  if (s->axes.size() != canonical.size()) fail("accepted a spec with the wrong number of axes");
  for (char c : canonical)
    if (s->axes.find(c) == std::string::npos) fail("accepted a spec missing a canonical axis");
  for (char c : s->flip)
    if (canonical.find(c) == std::string_view::npos) fail("flip axis is not an axis of the tensor");
  const std::string printed = layout::to_string(*s);
  auto again = layout::parse_spec(printed, canonical);
  if (!again) fail("to_string output does not parse");
  if (*again != *s) fail("parse(to_string(spec)) != spec");
  if (layout::to_string(*again) != printed) fail("to_string is not canonical");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  if (size == 0) return 0;
  static constexpr std::string_view kCanonical[] = {"NCHW", "OIHW", "O", "MK", "KN", "MN", ""};
  const unsigned mode = data[0] % 9;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode < 7) {
    check_spec(text, kCanonical[mode]);
  } else if (mode == 7) {
    auto axes = layout::guess_canonical_axes(text);
    if (axes) check_spec(text, *axes);
  } else {
    const std::string& path = file.set(data + 1, size - 1);
    auto set = layout::load_layout(path);
    if (!set) return 0;
    for (const auto& [op, tensors] : set->ops)
      for (const auto& [tensor, spec] : tensors) {
        auto axes = layout::canonical_axes(op, tensor);
        if (!axes) fail("loaded an unknown op or tensor");
        check_spec(layout::to_string(spec), *axes);
      }
    (void)layout::to_json(*set).dump();
  }
  return 0;
}
