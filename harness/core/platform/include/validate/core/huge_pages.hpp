#pragma once
// Large buffers on transparent huge pages. generate's tensors are hundreds of megabytes, each
// touched first right after it is allocated; with 4 KiB pages every first touch is a page fault,
// and faulting, zeroing and unmapping pages was a quarter of the default sweep's CPU time on a
// 2-core VM. A buffer of at least kHugeBufferBytes is aligned to 2 MiB and advised MADV_HUGEPAGE
// (the kernel then faults it 2 MiB at a time where it can, and falls back to small pages where it
// cannot); smaller ones are plain 64-byte-aligned blocks.
//
// Even on huge pages, every fresh mapping is zeroed by the kernel at its first touch: with the
// default sweep's tensors freed and allocated again op after op (the reference, its scale pass,
// the same shapes each time), that zeroing was a third of generate's CPU samples. A process that
// calls set_buffer_cache keeps freed large buffers, up to that many bytes, and serves a later
// allocation of nearly the same size from them, already mapped.
#include <cstddef>

namespace validate {

inline constexpr std::size_t kHugeBufferBytes = std::size_t(4) << 20;

// Under AddressSanitizer every buffer comes from the allocator it instruments (redzones around
// each, use after free caught): mappings of our own would hide the largest tensors from it, so
// such a build has no cache and set_buffer_cache changes nothing.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kBufferCacheBuilt = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kBufferCacheBuilt = false;
#else
inline constexpr bool kBufferCacheBuilt = true;
#endif
#else
inline constexpr bool kBufferCacheBuilt = true;
#endif

// A buffer of at least n bytes (n > 0), 64-byte aligned; nullptr when memory is exhausted (after
// the cache, if any, was given back). Released with free_buffer.
void* alloc_buffer(std::size_t n);
void free_buffer(void* p);

// Keep up to `bytes` of freed large buffers for reuse (0, the default: give each back at once).
// Lowering the limit gives back what no longer fits.
void set_buffer_cache(std::size_t bytes);

// What the cache holds now (bytes); since the process began, how many large allocations it served
// (hits) and not (misses), and how many bytes were mapped fresh for them (misses, and growth).
struct BufferCacheStats {
  std::size_t cached_bytes = 0, hits = 0, misses = 0, fresh_bytes = 0;
};
BufferCacheStats buffer_cache_stats();

}  // namespace validate
