// The device permute kernels' index arithmetic, run on the CPU. permute.cu's kernels are thin
// loops over the host+device functions in permute_kernels.hpp; here the same functions run thread
// by thread (the tile kernel's two phases one after the other, as __syncthreads orders them) and
// must reproduce the naive gather for every kernel the planner picks. No device needed: this is
// what proves the indexing on machines without a GPU; GpuPermute.* prove the launches on one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "permute_kernels.hpp"
#include "validate/layout/permute.hpp"

namespace validate::gpu {
namespace {

using namespace kernels;

template <class T, class I>
void emulate(const PermutePlan& p, const void* src, void* dst) {
  switch (p.kernel) {
    case PermuteKernel::copy:
      std::memcpy(dst, static_cast<const T*>(src) + p.offset,
                  static_cast<std::size_t>(plan_numel(p)) * sizeof(T));
      break;
    case PermuteKernel::gather: {
      const auto a = gather_args<T, I>(p, src, dst);
      for (I i = 0; i < a.n; ++i) gather_one(a, i);
      break;
    }
    case PermuteKernel::rows: {
      const auto a = rows_args<T, I>(p, src, dst);
      for (I item = 0; item < a.items; ++item)
        for (int t = 0; t < kRowThreads; ++t) rows_item(a, item, t);
      break;
    }
    case PermuteKernel::tile: {
      const auto a = tile_args<T, I>(p, src, dst);
      T tile[kTile][kTile + 1];
      for (I item = 0; item < a.items; ++item) {
        const auto o = tile_origin(a, item);
        for (int ty = 0; ty < kTileRows; ++ty)
          for (int tx = 0; tx < kTile; ++tx) tile_load(a, o, tile, tx, ty);
        for (int ty = 0; ty < kTileRows; ++ty)
          for (int tx = 0; tx < kTile; ++tx) tile_store(a, o, tile, tx, ty);
      }
      break;
    }
  }
}

template <class T>
void check_random(int trials, unsigned seed) {
  std::mt19937 rng(seed);
  int kernels_seen[4] = {};
  for (int trial = 0; trial < trials; ++trial) {
    const int rank = 1 + trial % 6;
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Shape shape(rank);
    for (auto& s : shape)
      s = 1 + static_cast<std::int64_t>(rng() % (rank <= 2 ? 300 : rank <= 3 ? 60 : 9));
    std::vector<std::int64_t> cs(rank, 1);
    for (int a = rank - 2; a >= 0; --a) cs[a] = cs[a + 1] * shape[a + 1];
    Shape dst_shape;
    std::vector<std::int64_t> strides;
    std::int64_t offset = 0;
    for (int k = 0; k < rank; ++k) {
      const int a = perm[k];
      const bool flip = rng() % 3 == 0;
      dst_shape.push_back(shape[a]);
      strides.push_back(flip ? -cs[a] : cs[a]);
      if (flip) offset += (shape[a] - 1) * cs[a];
    }
    const auto n = static_cast<std::size_t>(shape_numel(shape));
    std::vector<T> src(n), want(n), got(n, T(0xAB));
    for (auto& v : src) v = static_cast<T>(rng());
    layout::permute_copy_naive(reinterpret_cast<const std::byte*>(src.data()),
                               reinterpret_cast<std::byte*>(want.data()), sizeof(T), dst_shape,
                               strides, offset);
    const auto p = plan_permute(dst_shape, strides, offset);
    ++kernels_seen[static_cast<int>(p.kernel)];
    // Both index widths, whichever the launcher would pick.
    if (trial % 2)
      emulate<T, std::int32_t>(p, src.data(), got.data());
    else
      emulate<T, std::int64_t>(p, src.data(), got.data());
    ASSERT_EQ(want, got) << "trial " << trial << ": " << shape_to_string(dst_shape) << " kernel "
                         << kernel_name(p.kernel);
  }
  for (int k = 0; k < 4; ++k)
    EXPECT_GT(kernels_seen[k], 0) << "kernel " << kernel_name(static_cast<PermuteKernel>(k));
}

TEST(GpuKernelsOnCpu, RandomPermutationsWithFlipsEveryKernel) {
  check_random<std::uint8_t>(500, 1);
  check_random<std::uint16_t>(500, 2);
  check_random<std::uint32_t>(1000, 3);
  check_random<std::uint64_t>(500, 4);
}

TEST(GpuKernelsOnCpu, SubsampledBroadcastAndLongRows) {
  std::vector<std::uint32_t> src(70000);
  std::iota(src.begin(), src.end(), 0u);
  struct G {
    Shape shape;
    std::vector<std::int64_t> strides;
    std::int64_t offset;
  };
  const G cases[] = {
      {{64, 32}, {64, 2}, 0},           {{16, 300}, {0, 1}, 7},
      {{40, 50}, {1, 40}, 5},           {{20, 200}, {-200, -1}, 3999},
      {{1, 69000}, {0, -1}, 68999},     {{3, 5000}, {5000, 1}, 100},
      {{7, 33, 65}, {1, 7 * 65, 7}, 0}, {{2, 3, 4, 5, 6, 7}, {1, 2, 6, 24, 120, 720}, 0}};
  for (const auto& c : cases) {
    const auto n = static_cast<std::size_t>(shape_numel(c.shape));
    std::vector<std::uint32_t> want(n), got(n);
    layout::permute_copy_naive(reinterpret_cast<const std::byte*>(src.data()),
                               reinterpret_cast<std::byte*>(want.data()), 4, c.shape, c.strides,
                               c.offset);
    const auto p = plan_permute(c.shape, c.strides, c.offset);
    emulate<std::uint32_t, std::int32_t>(p, src.data(), got.data());
    EXPECT_EQ(want, got) << shape_to_string(c.shape) << " " << kernel_name(p.kernel);
  }
}

TEST(GpuKernelsOnCpu, IndexWidthChoice) {
  EXPECT_TRUE(fits_int32(plan_permute({1000, 1000}, {1, 1000}, 0)));
  EXPECT_FALSE(fits_int32(plan_permute({70000, 70000}, {1, 70000}, 0)));  // 4.9e9 elements
}

}  // namespace
}  // namespace validate::gpu
