#include "validate/core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <list>
#include <mutex>
#include <unordered_map>

namespace validate {

namespace {

constexpr std::size_t kHuge = std::size_t(2) << 20;

// A fresh mapping of `size` bytes (a multiple of 2 MiB) at a 2 MiB boundary, advised onto huge
// pages; nullptr when memory is exhausted. `from`, when given, is a kept mapping of `from_size`
// bytes whose pages move to the start of the new one (mremap: no copy, no zeroing; only the
// pages beyond from_size are new).
void* map_aligned(std::size_t size, void* from = nullptr, std::size_t from_size = 0) {
  void* r = ::mmap(nullptr, size + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return nullptr;
  auto* base = static_cast<char*>(r);
  char* p = base + (kHuge - reinterpret_cast<std::uintptr_t>(base) % kHuge) % kHuge;
  if (p > base) ::munmap(base, static_cast<std::size_t>(p - base));
  if (std::size_t tail = static_cast<std::size_t>(base + size + kHuge - (p + size)); tail) ::munmap(p + size, tail);
  void* q = from ? ::mremap(from, from_size, size, MREMAP_MAYMOVE | MREMAP_FIXED, p)
                 : ::mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (q == MAP_FAILED) {
    ::munmap(p, size);
    return nullptr;
  }
#ifdef MADV_HUGEPAGE
  // Advice only: where the kernel has no huge page free (or THP is off) the range keeps 4 KiB pages.
  (void)::madvise(q, size, MADV_HUGEPAGE);
#endif
  return q;
}

// The large buffers: those handed out (address -> size) and the freed ones kept, most recently
// freed first. One lock: allocations of this size are few (hundreds per sweep) and each is worth
// milliseconds of zeroing.
struct Cache {
  std::mutex m;
  std::unordered_map<void*, std::size_t> live;
  std::list<std::pair<void*, std::size_t>> kept;
  std::size_t kept_bytes = 0, limit = 0, hits = 0, misses = 0, fresh_bytes = 0;

  // Gives back kept buffers, least recently freed first, until at most `room` bytes stay kept.
  void trim(std::size_t room) {
    while (kept_bytes > room && !kept.empty()) {
      kept_bytes -= kept.back().second;
      ::munmap(kept.back().first, kept.back().second);
      kept.pop_back();
    }
  }
  // A buffer of `size` bytes from what is kept, or nullptr: the smallest kept one of at least
  // `size` and at most twice it (a larger one is left for a larger request: mapping a small
  // buffer fresh costs little, a large one much); else the largest smaller one, grown (its pages
  // moved to a larger mapping). A sweep's tensors grow or shrink case by case by less than twice.
  void* take(std::size_t size) {
    auto fit = kept.end(), grow = kept.end();
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->second >= size && it->second <= 2 * size) {
        if (fit == kept.end() || it->second < fit->second) fit = it;
      } else if (it->second < size && (grow == kept.end() || it->second > grow->second)) {
        grow = it;
      }
    }
    auto pick = fit != kept.end() ? fit : grow;
    if (pick == kept.end()) return nullptr;
    void* p = pick->first;
    std::size_t got = pick->second;
    if (pick == grow) {
      p = map_aligned(size, pick->first, pick->second);
      if (!p) return nullptr;
      fresh_bytes += size - got;
      got = size;
    }
    kept_bytes -= pick->second;
    live.insert_or_assign(p, got);
    kept.erase(pick);
    return p;
  }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: buffers may be freed during static destruction
  return *c;
}

}  // namespace

void* alloc_buffer(std::size_t n) {
  if (n < kHugeBufferBytes || !kBufferCacheBuilt) return std::aligned_alloc(64, (n + 63) / 64 * 64);
  const std::size_t size = (n + kHuge - 1) / kHuge * kHuge;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  if (void* p = c.take(size)) {
    ++c.hits;
    return p;
  }
  ++c.misses;
  void* p = map_aligned(size);
  if (!p && c.kept_bytes) {  // out of memory: what the cache holds is the first to give back
    c.trim(0);
    p = map_aligned(size);
  }
  if (p) c.live.insert_or_assign(p, size), c.fresh_bytes += size;
  return p;
}

void free_buffer(void* p) {
  // A large buffer is 2 MiB aligned: anything else is a small block, never in the cache's books.
  if (!p || !kBufferCacheBuilt || reinterpret_cast<std::uintptr_t>(p) % kHuge != 0) return std::free(p);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.m);
    auto it = c.live.find(p);
    if (it != c.live.end()) {
      const std::size_t size = it->second;
      c.live.erase(it);
      if (size <= c.limit) {
        c.trim(c.limit - size);
        c.kept.emplace_front(p, size);
        c.kept_bytes += size;
      } else {
        ::munmap(p, size);
      }
      return;
    }
  }
  std::free(p);  // a small block that happens to lie on a 2 MiB boundary
}

void set_buffer_cache(std::size_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  c.limit = bytes;
  c.trim(bytes);
}

BufferCacheStats buffer_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  return {c.kept_bytes, c.hits, c.misses, c.fresh_bytes};
}

}  // namespace validate
