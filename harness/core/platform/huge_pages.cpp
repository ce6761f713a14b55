#include "validate/core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace validate {

void* alloc_buffer(std::size_t n) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  if (n < kHugeBufferBytes) return std::aligned_alloc(64, (n + 63) / 64 * 64);
  const std::size_t size = (n + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, size);
#ifdef MADV_HUGEPAGE
  // Advice only: where the kernel has no huge page free (or THP is off) the range keeps 4 KiB pages.
  if (p) (void)::madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace validate
