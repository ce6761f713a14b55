// LibTorch's CPU buffers on transparent huge pages (core/huge_pages.hpp says why): an allocator
// that serves every CPU allocation from validate::alloc_buffer and is installed in place of
// LibTorch's default before the reference is computed. Only c10's allocator headers are needed.
#include "validate/generate/huge_page_allocator.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "validate/core/huge_pages.hpp"

namespace validate::generate {

namespace {

void release(void* p) { free_buffer(p); }

c10::DataPtr allocate_buffer(std::size_t n) {
  if (n == 0) return {nullptr, nullptr, &release, c10::Device(c10::DeviceType::CPU)};
  void* p = alloc_buffer(n);
  if (!p) throw std::bad_alloc();
  return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
}

// c10::Allocator::allocate is const in LibTorch 1.x and non-const in 2.x; the one matching the
// headers at hand is overridden (a partial specialization is only compiled when chosen).
using ConstAllocate = c10::DataPtr (c10::Allocator::*)(std::size_t) const;
constexpr bool kConstAllocate = std::is_same_v<decltype(&c10::Allocator::allocate), ConstAllocate>;

template <bool Const, class Base = c10::Allocator>
struct AllocateShim;
template <class Base>
struct AllocateShim<true, Base> : Base {
  c10::DataPtr allocate(std::size_t n) const override { return allocate_buffer(n); }
};
template <class Base>
struct AllocateShim<false, Base> : Base {
  c10::DataPtr allocate(std::size_t n) override { return allocate_buffer(n); }
};

struct HugePageAllocator final : AllocateShim<kConstAllocate> {
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  // Pure virtual in LibTorch 2.x, absent in 1.x (hence no `override`).
  void copy_data(void* dest, const void* src, std::size_t count) const {  // NOLINT(modernize-use-override)
    std::memcpy(dest, src, count);
  }
};

// The freed buffers kept for reuse: enough for the default sweep's largest op (the float32 sweep
// maps 8.4 GB fresh without a cache and 1.9 GB, its working set, keeping 2 GiB), and no more than
// an eighth of the machine's memory.
std::size_t kept_buffer_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t ram = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
  return std::min(std::size_t(2) << 30, ram / 8);
}

}  // namespace

void install_huge_page_allocator() {
  static HugePageAllocator allocator;
  static const bool installed = [] {
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    set_buffer_cache(kept_buffer_bytes());
    return true;
  }();
  (void)installed;
}

}  // namespace validate::generate
