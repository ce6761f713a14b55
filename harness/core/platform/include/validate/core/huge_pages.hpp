#pragma once
// Large buffers on transparent huge pages. generate's tensors are hundreds of megabytes, each
// touched first right after it is allocated; with 4 KiB pages every first touch is a page fault,
// and faulting, zeroing and unmapping pages was a quarter of the default sweep's CPU time on a
// 2-core VM. A buffer of at least kHugeBufferBytes is aligned to 2 MiB and advised MADV_HUGEPAGE
// (the kernel then faults it 2 MiB at a time where it can, and falls back to small pages where it
// cannot); smaller ones are plain 64-byte-aligned blocks. Both are released with std::free.
#include <cstddef>

namespace validate {

inline constexpr std::size_t kHugeBufferBytes = std::size_t(4) << 20;

// A buffer of at least n bytes (n > 0), 64-byte aligned; nullptr when memory is exhausted.
void* alloc_buffer(std::size_t n);

}  // namespace validate
