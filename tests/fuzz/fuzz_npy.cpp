// libFuzzer target: the .npy reader. The in-memory header parser first (exactly the bytes the
// fuzzer gives, so ASan sees any read past them), then the whole read path (npy::read, including
// the Fortran-order gather, and MappedArray::open) on the same bytes through a memfd.
#include <cstring>
#include <vector>

#include "fuzz_util.hpp"
#include "validate/core/npy.hpp"

using namespace validate;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_npy: invariant broken: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemFile file;
  auto h = npy::parse_header(reinterpret_cast<const std::byte*>(data), size, "fuzz.npy");
  if (h) {
    // An accepted header must describe exactly the bytes that follow it.
    if (h->data_offset > size) fail("data_offset past the end");
    if (h->shape.size() > 32) fail("rank > 32 accepted");
    std::int64_t numel = 1;
    for (auto d : h->shape) {
      if (d < 0) fail("negative dimension accepted");
      if (d != 0 && numel > INT64_MAX / d) fail("element count overflows int64");
      numel *= d;
    }
    if (static_cast<std::uint64_t>(numel) * dtype_size(h->dtype) != size - h->data_offset)
      fail("data size does not match the shape");
    // make_header must round-trip through the parser.
    std::string again = npy::make_header(h->dtype, h->shape, h->fortran_order);
    std::vector<std::byte> buf(again.size() + (size - h->data_offset));
    std::memcpy(buf.data(), again.data(), again.size());
    if (size > h->data_offset) std::memcpy(buf.data() + again.size(), data + h->data_offset, size - h->data_offset);
    auto h2 = npy::parse_header(buf.data(), buf.size(), "again.npy");
    if (!h2) fail("make_header output rejected by parse_header");
    if (h2->shape != h->shape || h2->dtype != h->dtype || h2->fortran_order != h->fortran_order)
      fail("make_header round trip changed the header");
  }
  const std::string& path = file.set(data, size);
  auto t = npy::read(path);
  if (t.is_ok() != h.is_ok()) fail("npy::read and parse_header disagree");
  if (t) {
    if (t->shape() != h->shape || t->dtype() != h->dtype) fail("read returned another shape or dtype");
    if (t->nbytes() != size - h->data_offset) fail("read returned another byte count");
    // C-order data must come back byte for byte.
    if (!h->fortran_order && t->nbytes() && std::memcmp(t->bytes(), data + h->data_offset, t->nbytes()) != 0)
      fail("C-order data changed on read");
  }
  auto m = npy::MappedArray::open(path);
  if (m.is_ok() != h.is_ok()) fail("MappedArray::open and parse_header disagree");
  if (m && m->nbytes() != size - h->data_offset) fail("MappedArray nbytes wrong");
  return 0;
}
