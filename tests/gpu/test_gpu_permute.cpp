// The device permute against the CPU converter, element for element: every preset's specs, random
// specs of ranks 1-6 with flips in 1-, 2-, 4- and 8-byte elements, random strided gathers
// (sub-sampled, broadcast, reversed) against the naive odometer, and big transposes that take the
// tile kernel on every edge. The kernel-choice tests need no device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "gpu_test_util.hpp"
#include "validate/gpu/gpu.hpp"
#include "validate/layout/layout.hpp"

namespace validate::gpu {
namespace {

using layout::Spec;

Spec spec(const char* text, const char* axes) {
  auto s = layout::parse_spec(text, axes);
  EXPECT_TRUE(s) << s.message();
  return *s;
}

// ---- device-free: which kernel runs ----

TEST(GpuPermutePlan, IdentityIsOneCopy) {
  auto p = plan_permute({2, 3, 4, 5}, {60, 20, 5, 1}, 0);
  EXPECT_EQ(p.kernel, PermuteKernel::copy);
  EXPECT_EQ(p.shape, (Shape{120}));
}

TEST(GpuPermutePlan, ChannelsLastIsATileTranspose) {
  // NCHW -> NHWC of [2, 64, 32, 48]: dst [N][HW][C] with C read at stride H*W, HW at stride 1.
  const auto g =
      layout::to_layout_gather(layout::placement(spec("NHWC", "NCHW"), "NCHW", {2, 64, 32, 48}));
  auto p = plan_permute(g.dst_shape, g.src_strides, g.src_offset);
  EXPECT_EQ(p.kernel, PermuteKernel::tile);
  EXPECT_EQ(p.shape, (Shape{2, 32 * 48, 64}));
  EXPECT_EQ(p.tile_axis, 1);
}

TEST(GpuPermutePlan, FlipOfLongRowsIsReversedRows) {
  const auto g = layout::to_layout_gather(
      layout::placement(spec("NCHW+flip=W", "NCHW"), "NCHW", {1, 3, 5, 256}));
  auto p = plan_permute(g.dst_shape, g.src_strides, g.src_offset);
  EXPECT_EQ(p.kernel, PermuteKernel::rows);
  EXPECT_EQ(p.stride.back(), -1);
}

TEST(GpuPermutePlan, SubsampleGathersAndShortFlippedRowsArePlanes) {
  EXPECT_EQ(plan_permute({100, 100}, {200, 2}, 0).kernel, PermuteKernel::gather);
  // 3x3 kernel planes, flipped: 100 dense 9-element blocks, batched through shared memory.
  const auto p = plan_permute({100, 9}, {9, -1}, 8);
  EXPECT_EQ(p.kernel, PermuteKernel::planes);
  EXPECT_EQ(p.plane_m, -1);
  EXPECT_EQ(p.plane_group, 100);
  // Planes whose blocks are not dense (every other element) are not planes.
  EXPECT_EQ(plan_permute({100, 9}, {18, -2}, 16).kernel, PermuteKernel::gather);
}

TEST(GpuPermutePlan, SizeOneAxesAreDropped) {
  auto p = plan_permute({1, 7, 1, 3}, {999, 1, 555, 7}, 0);
  EXPECT_EQ(p.shape, (Shape{7, 3}));
  EXPECT_EQ(p.kernel, PermuteKernel::gather);  // a 7 x 3 transpose: both sides under half a tile
  p = plan_permute({1, 70, 1, 3}, {999, 1, 555, 70}, 0);
  EXPECT_EQ(p.shape, (Shape{70, 3}));
  EXPECT_EQ(p.kernel, PermuteKernel::tile);
}

// A weight's 3x3 planes transposed and flipped (OIHW -> HWIO:F+flip=HW): [O*I, W, H] read at
// strides (9, -1, -3). A tile would hold 9 of its 32 x 32 slots; groups of whole planes go through
// shared memory instead.
TEST(GpuPermutePlan, SmallPlaneTransposesArePlanes) {
  const auto g = layout::to_layout_gather(
      layout::placement(spec("HWIO:F+flip=HW", "OIHW"), "OIHW", {64, 48, 3, 3}));
  auto p = plan_permute(g.dst_shape, g.src_strides, g.src_offset);
  EXPECT_EQ(p.shape, (Shape{64 * 48, 3, 3}));
  EXPECT_EQ(p.kernel, PermuteKernel::planes);
  // (24 KiB - 16) / 36 bytes = 682 float32 planes per block, down to a multiple of 4 so that
  // every group starts on 16 bytes of the destination; bfloat16: 1364, down to a multiple of 8.
  EXPECT_EQ(p.plane_m, -1);
  EXPECT_EQ(p.plane_group, 680);
  EXPECT_EQ(plan_permute(g.dst_shape, g.src_strides, g.src_offset, 2).plane_group, 1360);
  // OIHW -> OHWI: each O's [I][HW] plane, HW read at stride 9; a plane over 24 KiB goes in slabs
  // of I (the destination's innermost axis).
  const auto o =
      layout::to_layout_gather(layout::placement(spec("OHWI", "OIHW"), "OIHW", {64, 48, 3, 3}));
  p = plan_permute(o.dst_shape, o.src_strides, o.src_offset);
  EXPECT_EQ(p.kernel, PermuteKernel::planes);
  EXPECT_EQ(p.plane_m, -1);
  const auto big =
      layout::to_layout_gather(layout::placement(spec("OHWI", "OIHW"), "OIHW", {32, 8192, 3, 3}));
  p = plan_permute(big.dst_shape, big.src_strides, big.src_offset);
  EXPECT_EQ(p.kernel, PermuteKernel::planes);
  EXPECT_EQ(p.plane_m, 2);
  EXPECT_EQ(p.plane_chunk, 680);  // 680 * 9 * 4 bytes <= 24 KiB, a multiple of 4 elements
  // Back (OHWI -> OIHW) the destination's innermost axis is read at stride I (even): planes in
  // runs of I, each run 16 bytes past a 128-byte boundary in shared memory.
  const auto back =
      layout::from_layout_gather(layout::placement(spec("OHWI", "OIHW"), "OIHW", {32, 8192, 3, 3}));
  p = plan_permute(back.dst_shape, back.src_strides, back.src_offset);
  EXPECT_EQ(p.kernel, PermuteKernel::planes);
  EXPECT_TRUE(p.plane_runs);
  // (24 KiB - 16) / (9 runs * 4 bytes) = 682, less one 128-byte line (32) = 650, down to 648;
  // its shared-memory stride 676: 676 * 4 = 2704 = 21 * 128 + 16.
  EXPECT_EQ(p.plane_chunk, 648);
  EXPECT_EQ(p.plane_run_stride, 676);
  // NHWC -> NCHW reads runs of C too, but 16384 of them do not fit in shared memory: the tile.
  const auto act = layout::from_layout_gather(
      layout::placement(spec("NHWC", "NCHW"), "NCHW", {16, 64, 128, 128}));
  EXPECT_EQ(plan_permute(act.dst_shape, act.src_strides, act.src_offset).kernel,
            PermuteKernel::tile);
}

// The layout -> layout gather, checked on the CPU against two CPU conversions: needs no device.
TEST(GpuPermutePlan, LayoutToLayoutGatherMatchesCpuComposition) {
  const Shape shape{3, 4, 5, 6};
  Tensor canonical(DType::float32, shape);
  for (std::int64_t i = 0; i < canonical.numel(); ++i)
    canonical.data<float>()[i] = static_cast<float>(i);
  const char* specs[] = {"OIHW", "OHWI", "WHIO:F+flip=HW", "HWIO:F", "IOHW+flip=O", "WHIO:F"};
  for (const char* a : specs)
    for (const char* b : specs) {
      const Spec from = spec(a, "OIHW"), to = spec(b, "OIHW");
      Tensor src = layout::to_layout(canonical, "OIHW", from);
      Tensor want = layout::to_layout(canonical, "OIHW", to);
      Tensor got(DType::float32, want.shape());
      const auto g = layout_to_layout_gather(from, to, shape, "OIHW");
      layout::permute_copy_naive(src.bytes(), got.bytes(), 4, g.dst_shape, g.src_strides,
                                 g.src_offset);
      EXPECT_EQ(std::memcmp(got.bytes(), want.bytes(), want.nbytes()), 0) << a << " -> " << b;
    }
}

TEST(GpuPermute, BadArgumentsAreErrorsNotCrashes) {
  EXPECT_FALSE(permute_copy(nullptr, nullptr, 3, {4, 4}, {4, 1}, 0));  // element size
  EXPECT_FALSE(permute_copy(nullptr, nullptr, 4, {2, 3, 2, 3, 2, 3, 2},
                            {1000, 1, 300, 3, 77, 11, 5}, 0));        // rank 7
  EXPECT_FALSE(permute_copy(nullptr, nullptr, 4, {4, 4}, {1}, 0));    // stride count
  EXPECT_TRUE(permute_copy(nullptr, nullptr, 4, {4, 0}, {4, 1}, 0));  // nothing to move
}

// ---- device ----

// Bytes 0..n-1 patterned so that every element of every size is distinct.
std::vector<std::byte> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::byte> v(bytes);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// Runs the device conversion of `canonical_bytes` to `s` and back, against the CPU converter.
void check_spec(const Spec& s, const std::string& axes, const Shape& shape, std::size_t elem) {
  const std::size_t n = static_cast<std::size_t>(shape_numel(shape)), bytes = n * elem;
  const auto host = pattern(bytes, static_cast<unsigned>(n * 31 + elem));
  std::vector<std::byte> cpu(bytes), dev(bytes), back(bytes);
  layout::to_layout(host.data(), cpu.data(), elem, shape, axes, s);
  auto a = DeviceBuffer::allocate(bytes), b = DeviceBuffer::allocate(bytes);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->upload(host.data(), bytes));
  Status st = to_layout(a->data(), b->data(), elem, shape, axes, s);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(b->download(dev.data(), bytes));
  ASSERT_EQ(std::memcmp(cpu.data(), dev.data(), bytes), 0)
      << layout::to_string(s) << " of " << axes << " " << shape_to_string(shape) << ", " << elem
      << "-byte elements";
  ASSERT_TRUE(a->fill_zero());
  st = from_layout(b->data(), a->data(), elem, shape, axes, s);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(a->download(back.data(), bytes));
  ASSERT_EQ(std::memcmp(host.data(), back.data(), bytes), 0)
      << "round trip of " << layout::to_string(s);
}

TEST(GpuPermute, EveryPresetMatchesTheCpuConverter) {
  VALIDATE_REQUIRE_GPU();
  for (const auto& name : layout::preset_names()) {
    auto p = layout::preset(name);
    ASSERT_TRUE(p);
    for (const auto& [op, tensors] : p->ops)
      for (const auto& [tensor, s] : tensors) {
        const std::string axes(*layout::canonical_axes(op, tensor));
        Shape shape;  // every axis a different size, so a swapped pair cannot hide
        const std::int64_t sizes[] = {3, 5, 7, 11};
        for (std::size_t k = 0; k < axes.size(); ++k) shape.push_back(sizes[k]);
        for (std::size_t elem : {2, 4, 8}) check_spec(s, axes, shape, elem);
      }
  }
}

TEST(GpuPermute, RandomSpecsOfRanks1To6WithFlips) {
  VALIDATE_REQUIRE_GPU();
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 240; ++trial) {
    const int rank = 1 + trial % 6;
    // A random permutation of a random C-order tensor, each axis flipped with probability 1/3,
    // as the gather the CPU converter would build for it.
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Shape shape(rank);
    for (auto& s : shape) s = 1 + static_cast<std::int64_t>(rng() % (rank <= 3 ? 40 : 9));
    // dst = src permuted (and flipped per axis): built as a gather over a C-order source.
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
    const std::size_t elem = std::size_t{1} << (trial % 4);  // 1, 2, 4, 8
    const std::size_t n = static_cast<std::size_t>(shape_numel(shape)), bytes = n * elem;
    const auto host = pattern(bytes, static_cast<unsigned>(trial));
    std::vector<std::byte> want(bytes), got(bytes);
    layout::permute_copy_naive(host.data(), want.data(), elem, dst_shape, strides, offset);
    auto a = DeviceBuffer::allocate(bytes), b = DeviceBuffer::allocate(bytes);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->upload(host.data(), bytes));
    Status st = permute_copy(a->data(), b->data(), elem, dst_shape, strides, offset);
    ASSERT_TRUE(st) << st.message();
    ASSERT_TRUE(b->download(got.data(), bytes));
    ASSERT_EQ(std::memcmp(want.data(), got.data(), bytes), 0)
        << "trial " << trial << " shape " << shape_to_string(dst_shape) << " kernel "
        << kernel_name(plan_permute(dst_shape, strides, offset).kernel) << " elem " << elem;
  }
}

TEST(GpuPermute, SubsampledAndBroadcastGathers) {
  VALIDATE_REQUIRE_GPU();
  const std::size_t src_n = 4096;
  std::vector<std::byte> host = pattern(src_n * 4, 99);
  struct G {
    Shape shape;
    std::vector<std::int64_t> strides;
    std::int64_t offset;
  };
  const G cases[] = {{{64, 32}, {64, 2}, 0},          // every other column
                     {{16, 300}, {0, 1}, 7},          // broadcast rows
                     {{40, 50}, {1, 40}, 5},          // transpose with an offset
                     {{20, 200}, {-200, -1}, 4095}};  // both axes reversed
  for (const auto& c : cases) {
    const std::size_t n = static_cast<std::size_t>(shape_numel(c.shape));
    std::vector<std::byte> want(n * 4), got(n * 4);
    layout::permute_copy_naive(host.data(), want.data(), 4, c.shape, c.strides, c.offset);
    auto a = DeviceBuffer::allocate(host.size()), b = DeviceBuffer::allocate(n * 4);
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->upload(host.data(), host.size()));
    ASSERT_TRUE(permute_copy(a->data(), b->data(), 4, c.shape, c.strides, c.offset));
    ASSERT_TRUE(b->download(got.data(), got.size()));
    EXPECT_EQ(std::memcmp(want.data(), got.data(), got.size()), 0) << shape_to_string(c.shape);
  }
}

TEST(GpuPermute, LargeOddTransposesEveryEdgeTile) {
  VALIDATE_REQUIRE_GPU();
  for (std::size_t elem : {2, 4, 8})
    for (const Shape& s : {Shape{1000, 777}, Shape{33, 4099}, Shape{3, 65, 31, 129}}) {
      const char* text = s.size() == 2 ? "KM" : "NHWC";
      const char* axes = s.size() == 2 ? "MK" : "NCHW";
      check_spec(spec(text, axes), axes, s, elem);
    }
}

TEST(GpuCast, NarrowingMatchesTheCpuRounding) {
  VALIDATE_REQUIRE_GPU();
  std::vector<float> v{0.f,
                       -0.f,
                       1.f,
                       1.00390625f,
                       1.01171875f,
                       3.14159265f,
                       65504.f,
                       65520.f,
                       1e-8f,
                       -1e-40f,
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(),
                       3.4e38f};
  for (int i = 0; i < 1000; ++i)
    v.push_back(std::ldexp(static_cast<float>(i * 2654435761u % 100003) / 100003.f, i % 60 - 30));
  const auto n = static_cast<std::int64_t>(v.size());
  auto src = DeviceBuffer::allocate(v.size() * 4), dst = DeviceBuffer::allocate(v.size() * 2),
       wide = DeviceBuffer::allocate(v.size() * 4);
  ASSERT_TRUE(src && dst && wide);
  ASSERT_TRUE(src->upload(v.data(), v.size() * 4));
  for (DType d : {DType::bfloat16, DType::float16}) {
    ASSERT_TRUE(cast(src->data(), DType::float32, dst->data(), d, n));
    std::vector<std::uint16_t> bits(v.size());
    ASSERT_TRUE(dst->download(bits.data(), bits.size() * 2));
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint16_t want =
          d == DType::bfloat16 ? float_to_bfloat16_bits(v[i]) : float_to_float16_bits(v[i]);
      if (std::isnan(v[i])) {
        EXPECT_TRUE((bits[i] & 0x7fff) > (d == DType::bfloat16 ? 0x7f80 : 0x7c00));
      } else {
        EXPECT_EQ(bits[i], want) << dtype_name(d) << " of " << v[i];
      }
    }
    // Widening back is exact.
    std::vector<float> back(v.size());
    ASSERT_TRUE(cast(dst->data(), d, wide->data(), DType::float32, n));
    ASSERT_TRUE(wide->download(back.data(), back.size() * 4));
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isnan(v[i])) {
        EXPECT_EQ(back[i], round_to_dtype(v[i], d)) << v[i];
      }
  }
}

}  // namespace
}  // namespace validate::gpu
