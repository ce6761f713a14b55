// The large-buffer cache (core/huge_pages.hpp): freed buffers kept within the limit and served
// again, a smaller one grown in place of a fresh mapping, and everything given back on demand.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "validate/core/huge_pages.hpp"

namespace validate {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

// Each test starts and ends with no cache (the process-wide default).
class BufferCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kBufferCacheBuilt) GTEST_SKIP() << "an AddressSanitizer build has no buffer cache";
    set_buffer_cache(0);
  }
  void TearDown() override { set_buffer_cache(0); }
};

void fill(void* p, std::size_t n, unsigned char v) { std::memset(p, v, n); }

bool all_equal(const void* p, std::size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; i += 4096)
    if (b[i] != v) return false;
  return b[n - 1] == v;
}

TEST_F(BufferCache, WithoutALimitNothingIsKept) {
  void* p = alloc_buffer(9 * kMiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (2 * kMiB), 0u);
  fill(p, 9 * kMiB, 1);
  free_buffer(p);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 0u);
}

TEST_F(BufferCache, AFreedBufferServesTheNextOfItsSize) {
  set_buffer_cache(64 * kMiB);
  const BufferCacheStats before = buffer_cache_stats();
  void* p = alloc_buffer(9 * kMiB);  // 10 MiB: whole 2 MiB pages
  fill(p, 9 * kMiB, 7);
  free_buffer(p);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 10 * kMiB);
  void* q = alloc_buffer(10 * kMiB - 5);
  EXPECT_EQ(q, p);
  EXPECT_EQ(buffer_cache_stats().hits, before.hits + 1);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 0u);
  fill(q, 10 * kMiB - 5, 3);
  free_buffer(q);
}

TEST_F(BufferCache, AKeptBufferUpToTwiceTheSizeServesWhole) {
  set_buffer_cache(64 * kMiB);
  void* big = alloc_buffer(16 * kMiB);
  free_buffer(big);
  void* q = alloc_buffer(9 * kMiB);  // a sweep's next case, a little smaller
  EXPECT_EQ(q, big);
  fill(q, 16 * kMiB, 2);  // all of it stays the caller's until freed
  free_buffer(q);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 16 * kMiB);
}

TEST_F(BufferCache, AMuchLargerKeptBufferIsNotHandedToASmallRequest) {
  set_buffer_cache(64 * kMiB);
  void* big = alloc_buffer(40 * kMiB);
  free_buffer(big);
  void* small = alloc_buffer(8 * kMiB);  // 40 MiB is over twice 8
  EXPECT_NE(small, big);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 40 * kMiB);
  free_buffer(small);
}

TEST_F(BufferCache, ASmallerKeptBufferIsGrownWithItsPages) {
  set_buffer_cache(64 * kMiB);
  const std::size_t hits = buffer_cache_stats().hits;
  void* p = alloc_buffer(8 * kMiB);
  fill(p, 8 * kMiB, 0x5a);
  free_buffer(p);
  void* q = alloc_buffer(20 * kMiB);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(buffer_cache_stats().hits, hits + 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % (2 * kMiB), 0u);
  // The kept pages moved, not copied or zeroed: the old bytes lead the grown buffer.
  EXPECT_TRUE(all_equal(q, 8 * kMiB, 0x5a));
  fill(q, 20 * kMiB, 1);  // every byte of the grown buffer is writable
  EXPECT_TRUE(all_equal(q, 20 * kMiB, 1));
  free_buffer(q);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 20 * kMiB);
}

TEST_F(BufferCache, TheLimitGivesBackTheLeastRecentlyFreed) {
  set_buffer_cache(24 * kMiB);
  std::vector<void*> p;
  for (std::size_t mib : {10, 10, 10}) p.push_back(alloc_buffer(mib * kMiB));
  for (void* b : p) free_buffer(b);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 20 * kMiB);  // the third pushed out the first
  void* q = alloc_buffer(10 * kMiB);
  EXPECT_EQ(q, p[2]);  // most recently freed first among equals
  free_buffer(q);
  set_buffer_cache(0);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 0u);
  void* over = alloc_buffer(30 * kMiB);  // larger than any limit set here: never kept
  set_buffer_cache(24 * kMiB);
  free_buffer(over);
  EXPECT_EQ(buffer_cache_stats().cached_bytes, 0u);
}

TEST_F(BufferCache, SmallBuffersBypassIt) {
  set_buffer_cache(64 * kMiB);
  const BufferCacheStats before = buffer_cache_stats();
  void* p = alloc_buffer(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  fill(p, 1000, 9);
  free_buffer(p);
  const BufferCacheStats after = buffer_cache_stats();
  EXPECT_EQ(after.hits + after.misses, before.hits + before.misses);
  EXPECT_EQ(after.cached_bytes, 0u);
}

}  // namespace
}  // namespace validate
