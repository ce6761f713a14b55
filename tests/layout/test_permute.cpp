#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>

#include "layout_test_util.hpp"
#include "validate/layout/convert.hpp"
#include "validate/layout/permute.hpp"

namespace validate::layout {
namespace {

// Runs the engine and the naive odometer on the same gather and demands identical bytes. The
// engine's destination is 64-byte aligned (as a Tensor's is), or `misalign` bytes past that, so
// both the streaming-store path (aligned lines only) and the plain one are reachable.
void expect_same_as_naive(const std::vector<std::byte>& src, std::size_t es, const Shape& shape,
                          const std::vector<std::int64_t>& strides, std::int64_t offset,
                          const PermuteOptions& opt, const std::string& what, std::size_t misalign = 0) {
  const auto n = static_cast<std::size_t>(shape_numel(shape));
  std::vector<std::byte> storage(n * es + 64 + misalign, std::byte{0xAB}), slow(n * es, std::byte{0xCD});
  auto base = reinterpret_cast<std::uintptr_t>(storage.data());
  std::byte* fast = storage.data() + ((64 - base % 64) % 64) + misalign;
  permute_copy(src.data(), fast, es, shape, strides, offset, opt);
  permute_copy_naive(src.data(), slow.data(), es, shape, strides, offset);
  // memcmp, not std::equal: the test is built at -O0 under the sanitizers, where a byte loop was
  // a sixth of the largest permute tests' time.
  ASSERT_TRUE(std::memcmp(slow.data(), fast, slow.size()) == 0)
      << what << " shape " << shape_to_string(shape) << " es=" << es << " threads=" << opt.threads
      << " streaming from " << opt.min_streaming_bytes << " misalign " << misalign;
}

TEST(PermuteNaive, IsTheDefinition) {
  // dst[i][j] = src[5 + 3*i - j]: checked by hand.
  const std::vector<std::int32_t> src{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<std::int32_t> dst(6);
  permute_copy_naive(reinterpret_cast<const std::byte*>(src.data()), reinterpret_cast<std::byte*>(dst.data()), 4,
                     {2, 3}, {3, -1}, 5);
  EXPECT_EQ(dst, (std::vector<std::int32_t>{5, 4, 3, 8, 7, 6}));
  EXPECT_EQ(c_strides({2, 3, 4}), (std::vector<std::int64_t>{12, 4, 1}));
}

// Random gathers: permuted, reversed, sub-sampled (stride x2) and broadcast (stride 0) views of a
// dense source, of every element size including ones the engine copies as several words.
TEST(PermuteRandom, MatchesNaiveOnRandomStridedViews) {
  std::mt19937 rng(7);
  int cases = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const std::size_t rank = 1 + rng() % 5;
    Shape shape(rank);
    for (auto& d : shape) d = 1 + static_cast<std::int64_t>(rng() % (trial % 5 == 0 ? 40 : 9));
    std::vector<std::size_t> order(rank);
    for (std::size_t a = 0; a < rank; ++a) order[a] = a;
    std::shuffle(order.begin(), order.end(), rng);
    // The source is dense over `shape` permuted by `order`, possibly with a gap per axis.
    std::vector<std::int64_t> strides(rank);
    std::int64_t span = 1, offset = 0;
    for (std::size_t t = rank; t-- > 0;) {
      const std::size_t a = order[t];
      const std::int64_t step = (rng() % 6 == 0) ? 2 : 1;
      strides[a] = span * step;
      span *= shape[a] * step;
    }
    for (std::size_t a = 0; a < rank; ++a) {
      if (rng() % 4 == 0) {  // flip
        offset += strides[a] * (shape[a] - 1);
        strides[a] = -strides[a];
      } else if (rng() % 15 == 0) {  // broadcast
        strides[a] = 0;
      }
    }
    static const std::size_t sizes[] = {1, 2, 4, 8, 2, 4, 8, 3, 6, 12, 16};
    const std::size_t es = sizes[trial % 11];
    const auto src = test::pattern(span + 1, es, static_cast<std::uint64_t>(trial));
    PermuteOptions opt;
    opt.threads = 1 + trial % 3;
    expect_same_as_naive(src, es, shape, strides, offset, opt, "trial " + std::to_string(trial));
    if (HasFatalFailure()) return;
    ++cases;
  }
  EXPECT_EQ(cases, 600);
}

// The blocked transpose with edges in both directions (sizes not multiples of the 8x8 / 4x4
// register tiles or the 256-byte stripes), threaded, for each element size, both directions, and
// with the fast source axis reversed (a flip combined with a transpose).
TEST(PermuteBlocked, OddSizedTransposesMatchNaive) {
  for (std::size_t es : {2, 4, 8}) {
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1001, 777}, {77, 1003}, {9, 131}, {131, 9}}) {
      const auto src = test::pattern(rows * cols, es, static_cast<std::uint64_t>(rows));
      for (int threads : {1, 2, 3}) {
        PermuteOptions opt;
        opt.threads = threads;
        expect_same_as_naive(src, es, {cols, rows}, {1, cols}, 0, opt, "transpose");
        expect_same_as_naive(src, es, {cols, rows}, {-1, cols}, cols - 1, opt, "transpose, columns reversed");
        expect_same_as_naive(src, es, {cols, rows}, {1, -cols}, cols * (rows - 1), opt, "transpose, rows reversed");
        expect_same_as_naive(src, es, {rows, cols}, {cols, -1}, cols - 1, opt, "rows reversed (pure flip)");
        if (HasFatalFailure()) return;
      }
    }
  }
}

// A batch of transposes whose destination rows are pages apart takes the TLB super-tiles
// (tlb_tile in permute.cpp): here several k-blocks and several l-blocks for every element size,
// none a multiple of the 16 x 16 tile, each batch a different matrix; threads split super-tiles
// unevenly (3), streaming stores forced on and off, either axis reversed. Checked against the
// naive odometer and, for the plain transpose, against d[b][c][r] = s[b][r][c] written out here.
TEST(PermuteBlocked, PageApartRowsTakeTlbSuperTilesAndMatchNaive) {
  const std::int64_t batch = 2, rows = 2600, cols = 1100;  // destination [batch][cols][rows]
  for (std::size_t es : {2, 4, 8}) {
    const auto src = test::pattern(batch * rows * cols, es, 7);
    for (int threads : {1, 3}) {
      for (std::size_t stream_from : {std::size_t{0}, std::size_t{1} << 40}) {
        PermuteOptions opt;
        opt.threads = threads;
        opt.min_streaming_bytes = stream_from;
        const Shape shape{batch, cols, rows};
        expect_same_as_naive(src, es, shape, {rows * cols, 1, cols}, 0, opt, "batched transpose");
        expect_same_as_naive(src, es, shape, {rows * cols, -1, cols}, cols - 1, opt, "batched, columns reversed");
        expect_same_as_naive(src, es, shape, {rows * cols, 1, -cols}, cols * (rows - 1), opt,
                             "batched, rows reversed");
        if (HasFatalFailure()) return;
        if (threads != 3 || stream_from != 0) continue;
        std::vector<std::byte> got(src.size());
        permute_copy(src.data(), got.data(), es, shape, {rows * cols, 1, cols}, 0, opt);
        std::int64_t wrong = 0;
        for (std::int64_t b = 0; b < batch; ++b)
          for (std::int64_t c = 0; c < cols; ++c)
            for (std::int64_t r = 0; r < rows; ++r)
              wrong += std::memcmp(&got[static_cast<std::size_t>(((b * cols + c) * rows + r)) * es],
                                   &src[static_cast<std::size_t>(((b * rows + r) * cols + c)) * es], es) != 0;
        EXPECT_EQ(wrong, 0) << "es=" << es;
      }
    }
  }
}

// Conversions of a large odd-sized activation/weight through the library entry points, against the
// naive gather of the same spec: single-threaded, two threads forced, and automatic.
TEST(PermuteConvertLarge, OddSizedSpecsMatchNaiveThreadedAndNot) {
  const Shape act{3, 37, 29, 67};
  const Shape wgt{37, 29, 3, 5};
  struct Case {
    const char* spec;
    const char* axes;
    const Shape* shape;
  };
  const Case cases[] = {{"NHWC", "NCHW", &act},           {"CHWN:F", "NCHW", &act},
                        {"NWHC+flip=W", "NCHW", &act},    {"NCHW+flip=HW", "NCHW", &act},
                        {"WHNC:F+flip=C", "NCHW", &act},  {"WHIO:F+flip=HW", "OIHW", &wgt},
                        {"HWIO:F+flip=HW", "OIHW", &wgt}, {"OHWI", "OIHW", &wgt},
                        {"IOWH+flip=W", "OIHW", &wgt}};
  for (const auto& c : cases) {
    const Spec s = *parse_spec(c.spec, c.axes);
    const Placement p = placement(s, c.axes, *c.shape);
    for (std::size_t es : {2, 4, 8}) {
      const auto src = test::pattern(shape_numel(*c.shape), es);
      for (int threads : {1, 2, 0}) {
        PermuteOptions opt;
        opt.threads = threads;
        opt.min_parallel_bytes = 0;
        opt.min_streaming_bytes = threads == 2 ? 0 : opt.min_streaming_bytes;
        const Gather to = to_layout_gather(p), from = from_layout_gather(p);
        expect_same_as_naive(src, es, to.dst_shape, to.src_strides, to.src_offset, opt, std::string("to ") + c.spec);
        expect_same_as_naive(src, es, from.dst_shape, from.src_strides, from.src_offset, opt,
                             std::string("from ") + c.spec);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Line-aligned rows (64 channels, power-of-two planes) take the staged 64-byte tiles, the 3-D walk
// (CHWN:F), software prefetch and, when forced, streaming stores; an odd destination offset must
// fall back to ordinary stores. Every element size, both directions, flips on the fast axis.
TEST(PermuteStreaming, AlignedTilesWithAndWithoutStreamingStores) {
  const Shape act{2, 64, 16, 32};
  for (const char* text : {"NHWC", "CHWN:F", "NWHC+flip=W", "HWCN:F+flip=C", "NCHW+flip=HW"}) {
    const Spec s = *parse_spec(text, "NCHW");
    const Placement p = placement(s, "NCHW", act);
    for (std::size_t es : {2, 4, 8}) {
      const auto src = test::pattern(shape_numel(act), es);
      for (std::size_t misalign : {std::size_t{0}, es}) {
        for (std::size_t stream_from : {std::size_t{0}, std::size_t{1} << 40}) {
          PermuteOptions opt;
          opt.threads = 2;
          opt.min_streaming_bytes = stream_from;
          const Gather to = to_layout_gather(p), from = from_layout_gather(p);
          expect_same_as_naive(src, es, to.dst_shape, to.src_strides, to.src_offset, opt, std::string("to ") + text,
                               misalign);
          expect_same_as_naive(src, es, from.dst_shape, from.src_strides, from.src_offset, opt,
                               std::string("from ") + text, misalign);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Above the default threading threshold (4 MiB) with default options: the path a real conversion
// takes on a large tensor.
TEST(PermuteConvertLarge, AboveThreadingThresholdWithDefaults) {
  const Shape shape{2, 33, 131, 127};  // 1,098,042 float32 = 4.4 MB
  ASSERT_GT(static_cast<std::size_t>(shape_numel(shape)) * 4, PermuteOptions{}.min_parallel_bytes);
  const auto src = test::pattern(shape_numel(shape), 4);
  for (const char* text : {"NHWC", "CHWN:F", "NCHW", "NCHW+flip=HW", "HWCN+flip=H"}) {
    const Spec s = *parse_spec(text, "NCHW");
    const Gather g = to_layout_gather(placement(s, "NCHW", shape));
    expect_same_as_naive(src, 4, g.dst_shape, g.src_strides, g.src_offset, {}, text);
    std::vector<std::byte> out(src.size()), back(src.size());
    to_layout(src.data(), out.data(), 4, shape, "NCHW", s);
    from_layout(out.data(), back.data(), 4, shape, "NCHW", s);
    EXPECT_EQ(back, src) << text;
  }
}

TEST(PermuteEdge, EmptyAndSingleElement) {
  std::vector<std::byte> src = test::pattern(4, 4), dst(16, std::byte{0});
  permute_copy(src.data(), dst.data(), 4, {0, 3}, {3, 1}, 0);  // nothing to do, nothing touched
  EXPECT_EQ(dst, std::vector<std::byte>(16, std::byte{0}));
  permute_copy(src.data(), dst.data(), 4, {}, {}, 2);  // rank 0: element 2
  EXPECT_TRUE(std::equal(dst.begin(), dst.begin() + 4, src.begin() + 8));
  permute_copy(src.data(), dst.data(), 4, {1, 1, 1}, {5, 7, 9}, 3);
  EXPECT_TRUE(std::equal(dst.begin(), dst.begin() + 4, src.begin() + 12));
}

// The simplification both engines plan from (CPU here, validate::gpu's plan_permute), on a
// tensor whose every axis has a different size; expected plans worked out by hand from the rule.
TEST(PermuteSimplify, DropsOnesAndMergesRunsOnly) {
  struct Row {
    Shape shape;
    std::vector<std::int64_t> strides;
    std::int64_t offset;
    Shape want_shape;
    std::vector<std::int64_t> want_strides;
  };
  const Row rows[] = {
      // identity NCHW [2,3,4,5]: one run of 120
      {{2, 3, 4, 5}, {60, 20, 5, 1}, 0, {120}, {1}},
      // NCHW -> NHWC: dst [2][4][5][3] reads src strides [60, 5, 1, 20]: H and W merge into 20
      {{2, 4, 5, 3}, {60, 5, 1, 20}, 0, {2, 20, 3}, {60, 1, 20}},
      // W flipped: a reversed run of 5 does not merge with H (5 != -1 * 5) ...
      {{2, 3, 4, 5}, {60, 20, 5, -1}, 4, {24, 5}, {5, -1}},
      // ... but H and W both flipped are one reversed run of 20, which merges with nothing above
      {{2, 3, 4, 5}, {60, 20, -5, -1}, 19, {6, 20}, {20, -1}},
      // size-1 axes dropped, their neighbours merged across them
      {{2, 1, 4, 1, 5}, {20, 7, 5, 3, 1}, 0, {40}, {1}},
      // all ones: one element
      {{1, 1, 1}, {9, 3, 1}, 2, {}, {}},
  };
  for (const Row& r : rows) {
    const SimpleGather g = simplify_gather(r.shape, r.strides, r.offset);
    EXPECT_EQ(g.shape, r.want_shape);
    EXPECT_EQ(g.strides, r.want_strides);
    EXPECT_EQ(g.offset, r.offset);
    // And it is the same gather: permute_copy_naive over either puts the same bytes out.
    const auto src = test::pattern(200, 4);
    std::vector<std::byte> a(static_cast<std::size_t>(shape_numel(r.shape)) * 4), b(a.size());
    permute_copy_naive(src.data(), a.data(), 4, r.shape, r.strides, r.offset);
    permute_copy_naive(src.data(), b.data(), 4, g.shape, g.strides, g.offset);
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace validate::layout
