// The device permute kernels' index arithmetic, run on the CPU. permute.cu's kernels are thin
// loops over the host+device functions in permute_kernels.hpp; here the same functions run thread
// by thread (the tile kernel's two phases one after the other, as __syncthreads orders them) and
// must reproduce the naive gather for every kernel the planner picks. No device needed: this is
// what proves the indexing on machines without a GPU; GpuPermute.* prove the launches on one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "permute_kernels.hpp"
#include "permute_wide.hpp"
#include "validate/layout/layout.hpp"
#include "validate/layout/permute.hpp"

namespace validate::gpu {
namespace {

using namespace kernels;

// Which code path each emulated launch took: the 16-byte kernels and their one-element fallbacks.
struct Paths {
  int wide_rows = 0, rows = 0, wide_tile = 0, tile = 0, planes_whole = 0, planes_slab = 0,
      planes_runs = 0, planes_vec_store = 0, planes_scalar_store = 0;
};
Paths g_paths;

template <class T, class I>
void emulate(const PermutePlan& p, const void* src, void* dst) {
  if (p.kernel == PermuteKernel::rows && wide_rows_ok<T>(p, src, dst)) {
    ++g_paths.wide_rows;
    const auto a = wide_rows_args<T, I>(p, src, dst);
    for (I item = 0; item < a.items; ++item)
      for (int t = 0; t < kRowThreads; ++t) wide_rows_item(a, item, t);
    return;
  }
  if (sizeof(T) > 1 && p.kernel == PermuteKernel::tile && wide_tile_ok<T>(p, src, dst)) {
    ++g_paths.wide_tile;
    const auto a = wide_tile_args<T, I>(p, src, dst);
    std::vector<Pack<T>> smem(static_cast<std::size_t>(a.kEdge) * kWideTilePacks);
    for (I item = 0; item < a.items; ++item) {
      const auto o = wide_tile_origin(a, item);
      for (int tid = 0; tid < kWideTileThreads; ++tid) wide_tile_load(a, o, smem.data(), tid);
      for (int tid = 0; tid < kWideTileThreads; ++tid) wide_tile_store(a, o, smem.data(), tid);
    }
    return;
  }
  if (p.kernel == PermuteKernel::planes) {
    const auto a = planes_args<T, I>(p, src, dst);
    ++(a.runs ? g_paths.planes_runs : a.m < 0 ? g_paths.planes_whole : g_paths.planes_slab);
    ++(a.vec_store ? g_paths.planes_vec_store : g_paths.planes_scalar_store);
    // Shared memory as the kernel sees it: 16-byte aligned, never larger than the launch gives.
    std::vector<Pack<T>> smem(planes_smem_bytes(p) / 16);
    T* sm = reinterpret_cast<T*>(smem.data());
    for (I unit = 0; unit < a.units; ++unit) {
      const auto u = plane_unit(a, unit);
      EXPECT_LE(static_cast<std::size_t>(u.shift + u.len) * sizeof(T), planes_smem_bytes(p));
      for (int tid = 0; tid < kPlaneThreads; ++tid) {
        if (a.runs)
          planes_load_runs(a, u, sm, tid, kPlaneThreads);
        else
          planes_load(a, u, sm, tid, kPlaneThreads);
      }
      for (int tid = 0; tid < kPlaneThreads; ++tid) planes_store(a, u, sm, tid, kPlaneThreads);
    }
    return;
  }
  ++(p.kernel == PermuteKernel::rows ? g_paths.rows : g_paths.tile);
  switch (p.kernel) {
    case PermuteKernel::planes:
      break;
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

// `multiple` > 1: ranks 2-4 with every extent a multiple of it, so that the 16-byte paths apply.
template <class T>
void check_random(int trials, unsigned seed, int multiple = 1) {
  std::mt19937 rng(seed);
  int kernels_seen[5] = {};
  for (int trial = 0; trial < trials; ++trial) {
    const int rank = multiple > 1 ? 2 + trial % 3 : 1 + trial % 6;
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Shape shape(rank);
    for (auto& s : shape)
      s = multiple > 1 ? multiple * (1 + static_cast<std::int64_t>(rng() % (rank == 2   ? 24
                                                                            : rank == 3 ? 4
                                                                                        : 2)))
                       : 1 + static_cast<std::int64_t>(rng() % (rank <= 2   ? 300
                                                                : rank <= 3 ? 60
                                                                            : 9));
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
    std::vector<T> src(n), want(n), got(n, T(0xAB));  // operator new: 16-byte aligned
    for (auto& v : src) v = static_cast<T>(rng());
    layout::permute_copy_naive(reinterpret_cast<const std::byte*>(src.data()),
                               reinterpret_cast<std::byte*>(want.data()), sizeof(T), dst_shape,
                               strides, offset);
    const auto p = plan_permute(dst_shape, strides, offset, sizeof(T));
    ++kernels_seen[static_cast<int>(p.kernel)];
    // Both index widths, whichever the launcher would pick.
    if (trial % 2)
      emulate<T, std::int32_t>(p, src.data(), got.data());
    else
      emulate<T, std::int64_t>(p, src.data(), got.data());
    ASSERT_EQ(want, got) << "trial " << trial << ": " << shape_to_string(dst_shape) << " kernel "
                         << kernel_name(p.kernel);
  }
  if (multiple > 1) return;  // every kernel but the gather; the paths are counted by the caller
  for (int k = 0; k < 5; ++k)
    EXPECT_GT(kernels_seen[k], 0) << "kernel " << kernel_name(static_cast<PermuteKernel>(k));
}

TEST(GpuKernelsOnCpu, RandomPermutationsWithFlipsEveryKernel) {
  check_random<std::uint8_t>(500, 1);
  check_random<std::uint16_t>(500, 2);
  check_random<std::uint32_t>(1000, 3);
  check_random<std::uint64_t>(500, 4);
}

TEST(GpuKernelsOnCpu, SixteenByteKernelsOnAlignedShapes) {
  g_paths = {};
  check_random<std::uint8_t>(150, 5, 16);
  check_random<std::uint16_t>(300, 6, 8);
  check_random<std::uint32_t>(300, 7, 8);
  check_random<std::uint64_t>(300, 8, 4);
  EXPECT_GT(g_paths.wide_rows, 0);
  EXPECT_GT(g_paths.wide_tile, 0);
  EXPECT_GT(g_paths.planes_whole, 0);
  EXPECT_GT(g_paths.planes_vec_store, 0);
}

// Layout conversions of the presets (and the large transposes of bench_gpu_permute, scaled down)
// through the kernels a device runs, each on its 16-byte path, against the CPU converter's gather.
template <class T>
void check_conversion(const char* axes, const char* text, const Shape& shape, bool back,
                      PermuteKernel kernel, int Paths::*path, std::ptrdiff_t misalign = 0) {
  auto spec = layout::parse_spec(text, axes);
  ASSERT_TRUE(spec) << spec.message();
  const auto place = layout::placement(*spec, axes, shape);
  const auto g = back ? layout::from_layout_gather(place) : layout::to_layout_gather(place);
  const auto n = static_cast<std::size_t>(shape_numel(shape));
  std::vector<T> src(n + 16), want(n), got(n + 16, T(0xAB));
  std::mt19937 rng(11);
  for (auto& v : src) v = static_cast<T>(rng());
  const T* s = src.data() + misalign;
  T* d = got.data() + misalign;
  layout::permute_copy_naive(reinterpret_cast<const std::byte*>(s),
                             reinterpret_cast<std::byte*>(want.data()), sizeof(T), g.dst_shape,
                             g.src_strides, g.src_offset);
  const auto p = plan_permute(g.dst_shape, g.src_strides, g.src_offset, sizeof(T));
  EXPECT_EQ(p.kernel, kernel) << axes << (back ? " <- " : " -> ") << text << " "
                              << shape_to_string(shape) << " elem " << sizeof(T) << ": "
                              << kernel_name(p.kernel);
  const int before = g_paths.*path;
  emulate<T, std::int32_t>(p, s, d);
  EXPECT_EQ(g_paths.*path, before + 1)
      << axes << (back ? " <- " : " -> ") << text << " " << shape_to_string(shape) << " elem "
      << sizeof(T) << ": not on the expected path";
  EXPECT_TRUE(std::equal(want.begin(), want.end(), d)) << axes << " -> " << text;
}

TEST(GpuKernelsOnCpu, PresetConversionsTakeTheSixteenBytePaths) {
  using P = Paths;
  const Shape act{2, 64, 24, 40}, wgt{8, 96, 3, 3};
  for (bool back : {false, true}) {
    check_conversion<std::uint32_t>("NCHW", "NHWC", act, back, PermuteKernel::tile, &P::wide_tile);
    check_conversion<std::uint16_t>("NCHW", "NHWC", act, back, PermuteKernel::tile, &P::wide_tile);
    check_conversion<std::uint64_t>("NCHW", "NHWC", act, back, PermuteKernel::tile, &P::wide_tile);
    check_conversion<std::uint32_t>("NCHW", "CHWN:F", act, back, PermuteKernel::tile,
                                    &P::wide_tile);
    check_conversion<std::uint16_t>("NCHW", "CHWN:F", act, back, PermuteKernel::tile,
                                    &P::wide_tile);
    check_conversion<std::uint32_t>("NCHW", "NCHW+flip=HW", act, back, PermuteKernel::rows,
                                    &P::wide_rows);
    check_conversion<std::uint16_t>("NCHW", "NCHW+flip=HW", act, back, PermuteKernel::rows,
                                    &P::wide_rows);
    for (const char* w : {"WHIO:F+flip=HW", "HWIO:F+flip=HW"}) {
      check_conversion<std::uint32_t>("OIHW", w, wgt, back, PermuteKernel::planes,
                                      &P::planes_vec_store);
      check_conversion<std::uint16_t>("OIHW", w, wgt, back, PermuteKernel::planes,
                                      &P::planes_vec_store);
    }
    // OIHW -> OHWI reads its [I][HW] planes' HW at stride 9: planes. Back, the destination's
    // innermost axis (HW, 9 long) is read at stride I: planes in runs of I.
    check_conversion<std::uint32_t>("OIHW", "OHWI", wgt, back, PermuteKernel::planes,
                                    back ? &P::planes_runs : &P::planes_vec_store);
    check_conversion<std::uint16_t>("OIHW", "OHWI", wgt, back, PermuteKernel::planes,
                                    back ? &P::planes_runs : &P::planes_vec_store);
    check_conversion<std::uint32_t>("MK", "KM", {1000, 96}, back, PermuteKernel::tile,
                                    &P::wide_tile);
    check_conversion<std::uint16_t>("MK", "KM", {1000, 96}, back, PermuteKernel::tile,
                                    &P::wide_tile);
  }
  // A plane over 24 KiB (OIHW -> OHWI with I = 1024: 36 KiB in float32) goes in slabs of I.
  check_conversion<std::uint32_t>("OIHW", "OHWI", {3, 1024, 3, 3}, false, PermuteKernel::planes,
                                  &P::planes_slab);
  check_conversion<std::uint32_t>("OIHW", "OHWI", {3, 1000, 3, 3}, false, PermuteKernel::planes,
                                  &P::planes_slab);
  check_conversion<std::uint16_t>("OIHW", "OHWI", {2, 4096, 3, 3}, false, PermuteKernel::planes,
                                  &P::planes_slab);
  // Back from OHWI with I = 8192 and 1000: slabs of I in runs, the last one short.
  check_conversion<std::uint32_t>("OIHW", "OHWI", {3, 8192, 3, 3}, true, PermuteKernel::planes,
                                  &P::planes_runs);
  check_conversion<std::uint32_t>("OIHW", "OHWI", {2, 1000, 3, 3}, true, PermuteKernel::planes,
                                  &P::planes_vec_store);
  check_conversion<std::uint16_t>("OIHW", "OHWI", {2, 8192, 3, 3}, true, PermuteKernel::planes,
                                  &P::planes_runs);
  check_conversion<std::uint64_t>("OIHW", "OHWI", {2, 4096, 3, 3}, true, PermuteKernel::planes,
                                  &P::planes_runs);
}

// Pointers that are not 16-byte aligned take the one-element paths, and still convert right.
TEST(GpuKernelsOnCpu, UnalignedPointersFallBack) {
  using P = Paths;
  check_conversion<std::uint32_t>("NCHW", "NHWC", {2, 64, 24, 40}, false, PermuteKernel::tile,
                                  &P::tile, 1);
  check_conversion<std::uint32_t>("NCHW", "NCHW+flip=HW", {2, 8, 24, 40}, false,
                                  PermuteKernel::rows, &P::rows, 1);
  check_conversion<std::uint32_t>("OIHW", "WHIO:F+flip=HW", {8, 96, 3, 3}, false,
                                  PermuteKernel::planes, &P::planes_scalar_store, 1);
  // Odd sizes: a short last group of planes, a slab width that does not divide I.
  check_conversion<std::uint32_t>("OIHW", "HWIO:F+flip=HW", {7, 13, 3, 3}, false,
                                  PermuteKernel::planes, &P::planes_whole);
  check_conversion<std::uint32_t>("OIHW", "OHWI", {2, 1001, 3, 3}, false, PermuteKernel::planes,
                                  &P::planes_scalar_store);
  check_conversion<std::uint32_t>("OIHW", "OHWI", {2, 1001, 3, 3}, true, PermuteKernel::planes,
                                  &P::planes_runs);
  check_conversion<std::uint32_t>("OIHW", "OHWI", {2, 1024, 3, 3}, true, PermuteKernel::planes,
                                  &P::planes_scalar_store, 1);
}

// Shared memory serves a 16-byte access per lane in quarter-warp phases of 8 lanes; a phase is
// conflict-free when its 8 packs sit in 8 different 16-byte columns of the 128-byte bank row. The
// wide tile's swizzle must give that in both phases, for every pack the 256 threads touch.
template <class T>
void expect_tile_conflict_free() {
  constexpr int V = kVec<T>;
  for (int phase = 0; phase < kWideTileThreads / 8; ++phase) {
    for (int j = 0; j < V; ++j) {  // load: lane (lb, c) writes row c V + j, column lb
      std::set<int> cols;
      for (int lane = 0; lane < 8; ++lane) {
        const int tid = phase * 8 + lane, c = tid % kWideTilePacks, lb = tid / kWideTilePacks;
        const int row = c * V + j;
        cols.insert((row * kWideTilePacks + swizzle<T>(row, lb)) % 8);
      }
      EXPECT_EQ(cols.size(), 8u) << "load, element size " << sizeof(T) << ", phase " << phase;
    }
    for (int k = 0; k < V; ++k) {  // store: lane (qq, lb) reads row qq + 16 k, column lb
      std::set<int> cols;
      for (int lane = 0; lane < 8; ++lane) {
        const int tid = phase * 8 + lane, lb = tid % kWideTilePacks, qq = tid / kWideTilePacks;
        const int row = qq + k * kWideTilePacks;
        cols.insert((row * kWideTilePacks + swizzle<T>(row, lb)) % 8);
      }
      EXPECT_EQ(cols.size(), 8u) << "store, element size " << sizeof(T) << ", phase " << phase;
    }
  }
}

TEST(GpuKernelsOnCpu, WideTileSharedMemoryIsConflictFree) {
  expect_tile_conflict_free<std::uint16_t>();
  expect_tile_conflict_free<std::uint32_t>();
  expect_tile_conflict_free<std::uint64_t>();
}

// The planes kernel's store phase reads shared memory one element per lane (lane j's pack: unit
// elements V j .. V j + V - 1). Counted here for the first warp of the first unit of each preset's
// weight conversion: the most distinct 4-byte words any bank serves in one read (k of them: the
// read takes k passes, 32 / k elements per clock and SM). 80% of an H200's memcpy (~1600 GB/s) is
// ~1.5 float32 elements per clock and SM (132 SMs, 1.98 GHz), ~3 for bfloat16: at most 8 keeps
// twice that in hand. The worst today is 5 (HWIO:F+flip=HW, float32); the tile's is 1.
template <class T>
int planes_bank_conflict(const char* axes, const char* text, const Shape& shape, bool back) {
  auto spec = layout::parse_spec(text, axes);
  EXPECT_TRUE(spec) << spec.message();
  const auto place = layout::placement(*spec, axes, shape);
  const auto g = back ? layout::from_layout_gather(place) : layout::to_layout_gather(place);
  const auto p = plan_permute(g.dst_shape, g.src_strides, g.src_offset, sizeof(T));
  EXPECT_EQ(p.kernel, PermuteKernel::planes) << text;
  alignas(16) static T none[kVec<T>];
  const auto a = planes_args<T, std::int32_t>(p, none, none);
  const auto u = plane_unit(a, 0);
  const std::int32_t base = u.src_base - u.lo + u.shift;
  int worst = 0;
  for (int i = 0; i < kVec<T>; ++i) {
    std::map<int, std::set<std::int64_t>> words;  // bank -> words
    for (int lane = 0; lane < 32; ++lane) {
      std::int32_t c[kMaxRank] = {}, sp = 0, dp = 0;
      plane_coords(a, static_cast<std::int32_t>(lane * kVec<T>), c, sp, dp);
      for (int k = 0; k < i; ++k) plane_advance(a, c, sp, dp);
      const std::int64_t word = static_cast<std::int64_t>(base + sp) * sizeof(T) / 4;
      words[static_cast<int>(word % 32)].insert(word);
    }
    for (const auto& [bank, w] : words) worst = std::max(worst, static_cast<int>(w.size()));
  }
  return worst;
}

TEST(GpuKernelsOnCpu, PlanesSharedMemoryConflictsStaySmall) {
  const Shape w{64, 1024, 3, 3};
  for (const char* text : {"WHIO:F+flip=HW", "HWIO:F+flip=HW", "OHWI"})
    for (bool back : {false, true}) {
      EXPECT_LE(planes_bank_conflict<std::uint32_t>("OIHW", text, w, back), 8) << text << back;
      EXPECT_LE(planes_bank_conflict<std::uint16_t>("OIHW", text, w, back), 8) << text << back;
    }
  // Runs of I (OHWI -> OIHW) with I = 8192: slabs, the run stride keeps the lanes spread.
  EXPECT_LE(planes_bank_conflict<std::uint32_t>("OIHW", "OHWI", {32, 8192, 3, 3}, true), 8);
  EXPECT_LE(planes_bank_conflict<std::uint16_t>("OIHW", "OHWI", {32, 8192, 3, 3}, true), 8);
}

TEST(GpuKernelsOnCpu, DividerMatchesDivision) {
  std::mt19937 rng(3);
  for (std::int32_t d : {1, 2, 3, 7, 9, 10, 64, 1000, 9216, 65535, 151936, (1 << 30) - 1}) {
    const Divider<std::int32_t> div(d);
    for (int i = 0; i < 2000; ++i) {
      const auto n = static_cast<std::int32_t>(rng() % (1u << 30));
      ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
    }
    ASSERT_EQ(div.div((1 << 30) - 1), ((1 << 30) - 1) / d);
    ASSERT_EQ(div.div(0), 0);
  }
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
