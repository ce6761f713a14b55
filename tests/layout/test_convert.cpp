#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "layout_test_util.hpp"
#include "validate/layout/convert.hpp"
#include "validate/layout/preset.hpp"

namespace validate::layout {
namespace {

// Canonical float32 tensor whose values are their flat index.
Tensor iota(const Shape& shape) {
  Tensor t(DType::float32, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

std::vector<float> values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

Spec spec(const char* text, const char* axes) {
  auto s = parse_spec(text, axes);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return *s;
}

// ---- known small cases, expected memory written out by hand from the definition.

struct Known {
  const char* spec;
  const char* axes;
  Shape shape;  // canonical
  Shape layout_shape;
  std::vector<float> memory;  // canonical flat indices in layout memory order
};

class ConvertKnown : public ::testing::TestWithParam<Known> {};

TEST_P(ConvertKnown, MatchesHandWrittenMemory) {
  const Known& k = GetParam();
  const Spec s = spec(k.spec, k.axes);
  EXPECT_EQ(shape_in_layout(s, k.axes, k.shape), k.layout_shape);
  const Tensor canonical = iota(k.shape);
  const Tensor out = to_layout(canonical, k.axes, s);
  EXPECT_EQ(out.shape(), k.layout_shape);
  EXPECT_EQ(values(out), k.memory);
  const Tensor back = from_layout(out, k.axes, k.shape, s);
  EXPECT_EQ(back.shape(), k.shape);
  EXPECT_EQ(values(back), values(canonical));
}

INSTANTIATE_TEST_SUITE_P(
    HandWritten, ConvertKnown,
    ::testing::Values(
        // Every axis of every 4-D case below has its own size, so any swap changes the answer.
        // The expected memory is numpy's transpose/flip/ravel of arange (tests/layout/probe_cli.py
        // does the same through the CLI). NCHW [1,2,3,4] -> NHWC: per (h,w) the two channels;
        // writing NWHC instead gives the next line's order.
        Known{"NHWC", "NCHW", {1, 2, 3, 4}, {1, 3, 4, 2},
              {0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17, 6, 18, 7, 19, 8, 20, 9, 21,
               10, 22, 11, 23}},
        Known{"NWHC", "NCHW", {1, 2, 3, 4}, {1, 4, 3, 2},
              {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15,
               7, 19, 11, 23}},
        // NCHW [2,3,4,5] -> CHWN:F, the Fortran array x(C,H,W,N): C fastest, then H, W, N slowest;
        // value = n*60 + c*20 + h*5 + w.
        Known{"CHWN:F", "NCHW", {2, 3, 4, 5}, {3, 4, 5, 2},
              {0, 20, 40, 5, 25, 45, 10, 30, 50, 15, 35, 55, 1, 21, 41, 6, 26, 46, 11, 31,
               51, 16, 36, 56, 2, 22, 42, 7, 27, 47, 12, 32, 52, 17, 37, 57, 3, 23, 43, 8,
               28, 48, 13, 33, 53, 18, 38, 58, 4, 24, 44, 9, 29, 49, 14, 34, 54, 19, 39, 59,
               60, 80, 100, 65, 85, 105, 70, 90, 110, 75, 95, 115, 61, 81, 101, 66, 86, 106, 71, 91,
               111, 76, 96, 116, 62, 82, 102, 67, 87, 107, 72, 92, 112, 77, 97, 117, 63, 83, 103, 68,
               88, 108, 73, 93, 113, 78, 98, 118, 64, 84, 104, 69, 89, 109, 74, 94, 114, 79, 99, 119}},
        // OIHW [2,3,4,5] -> WHIO:F+flip=HW: memory is C-order OIHW of each kernel rotated by 180
        // degrees: (h',w') holds canonical (3-h', 4-w').
        Known{"WHIO:F+flip=HW", "OIHW", {2, 3, 4, 5}, {5, 4, 3, 2},
              {19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
               39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
               59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40,
               79, 78, 77, 76, 75, 74, 73, 72, 71, 70, 69, 68, 67, 66, 65, 64, 63, 62, 61, 60,
               99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89, 88, 87, 86, 85, 84, 83, 82, 81, 80,
               119, 118, 117, 116, 115, 114, 113, 112, 111, 110, 109, 108, 107, 106, 105, 104, 103, 102, 101, 100}},
        // HWIO:F+flip=HW: memory walks o { i { w' { h' } } }, (h',w') holding (3-h', 4-w').
        Known{"HWIO:F+flip=HW", "OIHW", {2, 3, 4, 5}, {4, 5, 3, 2},
              {19, 14, 9, 4, 18, 13, 8, 3, 17, 12, 7, 2, 16, 11, 6, 1, 15, 10, 5, 0,
               39, 34, 29, 24, 38, 33, 28, 23, 37, 32, 27, 22, 36, 31, 26, 21, 35, 30, 25, 20,
               59, 54, 49, 44, 58, 53, 48, 43, 57, 52, 47, 42, 56, 51, 46, 41, 55, 50, 45, 40,
               79, 74, 69, 64, 78, 73, 68, 63, 77, 72, 67, 62, 76, 71, 66, 61, 75, 70, 65, 60,
               99, 94, 89, 84, 98, 93, 88, 83, 97, 92, 87, 82, 96, 91, 86, 81, 95, 90, 85, 80,
               119, 114, 109, 104, 118, 113, 108, 103, 117, 112, 107, 102, 116, 111, 106, 101, 115, 110, 105, 100}},
        // WHIO:F without the flip is byte-identical to OIHW.
        Known{"WHIO:F", "OIHW", {2, 3, 4, 5}, {5, 4, 3, 2},
              {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
               20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39,
               40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
               60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
               80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99,
               100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119}},
        // OHWI [2,3,4,5]: per (o,h,w) the three input channels; value = o*60 + i*20 + h*5 + w.
        Known{"OHWI", "OIHW", {2, 3, 4, 5}, {2, 4, 5, 3},
              {0, 20, 40, 1, 21, 41, 2, 22, 42, 3, 23, 43, 4, 24, 44, 5, 25, 45, 6, 26,
               46, 7, 27, 47, 8, 28, 48, 9, 29, 49, 10, 30, 50, 11, 31, 51, 12, 32, 52, 13,
               33, 53, 14, 34, 54, 15, 35, 55, 16, 36, 56, 17, 37, 57, 18, 38, 58, 19, 39, 59,
               60, 80, 100, 61, 81, 101, 62, 82, 102, 63, 83, 103, 64, 84, 104, 65, 85, 105, 66, 86,
               106, 67, 87, 107, 68, 88, 108, 69, 89, 109, 70, 90, 110, 71, 91, 111, 72, 92, 112, 73,
               93, 113, 74, 94, 114, 75, 95, 115, 76, 96, 116, 77, 97, 117, 78, 98, 118, 79, 99, 119}},
        // A [2,3] column-major: m fastest.
        Known{"MK:F", "MK", {2, 3}, {2, 3}, {0, 3, 1, 4, 2, 5}},
        // B [K=2,N=3] stored [N,K] (PyTorch Linear's [out,in]).
        Known{"NK", "KN", {2, 3}, {3, 2}, {0, 3, 1, 4, 2, 5}},
        Known{"MN+flip=N", "MN", {2, 3}, {2, 3}, {2, 1, 0, 5, 4, 3}},
        Known{"O+flip=O", "O", {4}, {4}, {3, 2, 1, 0}},
        Known{"scalar", "", {}, {}, {0}}));

// ---- every preset entry round-trips, and agrees with the definition, on shapes with every axis
// a different size.

Shape role_shape(std::string_view axes) {
  const std::string all = "NCHWOIMK";
  // N=2 C=3 H=5 W=7 O=4 I=3 M=6 K=5; N as a matrix axis (KN, MN) is 4 columns.
  const bool matrix = axes.find('M') != std::string_view::npos || axes.find('K') != std::string_view::npos;
  Shape s;
  for (char c : axes) {
    switch (c) {
      case 'N': s.push_back(matrix ? 4 : 2); break;
      case 'C': s.push_back(3); break;
      case 'H': s.push_back(5); break;
      case 'W': s.push_back(7); break;
      case 'O': s.push_back(4); break;
      case 'I': s.push_back(3); break;
      case 'M': s.push_back(6); break;
      case 'K': s.push_back(5); break;
      default: ADD_FAILURE() << "letter " << c;
    }
  }
  return s;
}

TEST(ConvertPresets, EveryEntryRoundTripsAndMatchesTheDefinition) {
  int checked = 0;
  for (const auto& name : preset_names()) {
    auto p = preset(name);
    ASSERT_TRUE(p.is_ok()) << p.message();
    for (const auto& op : op_names()) {
      ASSERT_EQ(p->ops.at(op).size(), tensor_names(op).size()) << name << " " << op;
      for (const auto& tensor : tensor_names(op)) {
        const std::string axes(*canonical_axes(op, tensor));
        const Spec& s = p->ops.at(op).at(tensor);
        const Shape shape = role_shape(axes);
        for (std::size_t es : {2, 4, 8}) {
          const auto src = test::pattern(shape_numel(shape), es);
          std::vector<std::byte> out(src.size()), back(src.size());
          to_layout(src.data(), out.data(), es, shape, axes, s);
          EXPECT_EQ(out, test::definition_to_layout(src.data(), es, s, axes, shape))
              << name << " " << op << "." << tensor << " " << to_string(s) << " es=" << es;
          from_layout(out.data(), back.data(), es, shape, axes, s);
          EXPECT_EQ(back, src) << name << " " << op << "." << tensor;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 5 * (9 + 7 + 9) * 3);  // presets x (conv2d + matmul + conv_transpose2d tensors) x sizes
}

// ---- random specs: every permutation order, C/F, any flips, ranks 1..6, element sizes 2/4/8.

TEST(RandomSpecs, RoundTripAndDefinitionRanks1To6) {
  std::mt19937 rng(20261122);
  const std::string letters = "NCHWOI";
  int cases = 0;
  for (std::size_t rank = 1; rank <= 6; ++rank) {
    const std::string axes = letters.substr(0, rank);
    // Distinct sizes so a swap of any two axes changes the answer.
    std::vector<std::int64_t> sizes{2, 3, 5, 4, 7, 6};
    for (int trial = 0; trial < 40; ++trial) {
      std::shuffle(sizes.begin(), sizes.end(), rng);
      Shape shape(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(rank));
      std::string order = axes;
      std::shuffle(order.begin(), order.end(), rng);
      std::string text = order;
      if (rng() % 2) text += ":F";
      std::string flip;
      for (char c : axes)
        if (rng() % 3 == 0) flip += c;
      if (!flip.empty()) text += "+flip=" + flip;
      auto s = parse_spec(text, axes);
      ASSERT_TRUE(s.is_ok()) << s.message();
      const std::size_t es = std::size_t{2} << (trial % 3);
      const auto src = test::pattern(shape_numel(shape), es, static_cast<std::uint64_t>(trial));
      std::vector<std::byte> out(src.size()), back(src.size());
      to_layout(src.data(), out.data(), es, shape, axes, *s);
      ASSERT_EQ(out, test::definition_to_layout(src.data(), es, *s, axes, shape))
          << text << " over " << axes << " " << shape_to_string(shape) << " es=" << es;
      from_layout(out.data(), back.data(), es, shape, axes, *s);
      ASSERT_EQ(back, src) << text;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 240);
}

// A spec that differs from the truth by one axis swap or one flip must produce different bytes:
// the conversions cannot be trivially equal to each other (guards the test itself).
TEST(ConvertKnownSanity, NeighbouringSpecsDiffer) {
  const Shape shape{2, 3, 4, 5};
  const auto src = test::pattern(shape_numel(shape), 4);
  auto bytes = [&](const char* text) {
    std::vector<std::byte> out(src.size());
    to_layout(src.data(), out.data(), 4, shape, "NCHW", spec(text, "NCHW"));
    return out;
  };
  EXPECT_NE(bytes("NHWC"), bytes("NWHC"));
  EXPECT_NE(bytes("CHWN:F"), bytes("CHWN"));
  EXPECT_NE(bytes("NCHW+flip=H"), bytes("NCHW"));
  EXPECT_NE(bytes("NCHW+flip=HW"), bytes("NCHW+flip=H"));
}

TEST(ConvertPlacement, OffsetOfAgreesWithTheDefinition) {
  const Shape shape{4, 3, 2, 5};
  const Spec s = spec("HWIO:F+flip=HW", "OIHW");
  const Placement p = placement(s, "OIHW", shape);
  EXPECT_EQ(p.layout_shape, (Shape{2, 5, 3, 4}));
  EXPECT_EQ(p.memory_shape, (Shape{4, 3, 5, 2}));
  for (std::int64_t o = 0; o < 4; ++o)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t w = 0; w < 5; ++w) {
          const std::vector<std::int64_t> c{o, i, h, w};
          EXPECT_EQ(p.offset_of(c.data()), test::definition_offset(s, "OIHW", shape, c));
        }
}

// The memory-order form (what the diagnosis enumerates) is the spec form with layout_shape spelled
// in memory order: same strides, flips and offsets. Column-major WHIO is memory order O, I, H, W
// (slowest first); column-major OHWI is I, W, H, O.
TEST(ConvertPlacement, MemoryOrderFormIsTheSpecFormInCOrder) {
  const Shape shape{4, 3, 2, 5};
  struct Row {
    const char* spec;
    std::vector<int> memory_axes;
    std::vector<bool> flipped;
  };
  for (const Row& r : {Row{"WHIO:F+flip=H", {0, 1, 2, 3}, {false, false, true, false}},
                       Row{"HWIO", {2, 3, 1, 0}, {false, false, false, false}},
                       Row{"OHWI:F+flip=HW", {1, 3, 2, 0}, {false, false, true, true}}}) {
    const Spec s = spec(r.spec, "OIHW");
    const Placement a = placement(s, "OIHW", shape), b = placement(shape, r.memory_axes, r.flipped);
    EXPECT_EQ(a.memory_axes, b.memory_axes) << r.spec;
    EXPECT_EQ(a.memory_shape, b.memory_shape) << r.spec;
    EXPECT_EQ(b.layout_shape, b.memory_shape) << r.spec;
    EXPECT_EQ(a.stride, b.stride) << r.spec;
    EXPECT_EQ(a.flipped, b.flipped) << r.spec;
    EXPECT_TRUE(same_offsets(a, b)) << r.spec;
    for (std::int64_t f = 0; f < shape_numel(shape); f += 7) {
      const std::vector<std::int64_t> c{f / 30, f / 10 % 3, f / 5 % 2, f % 5};
      EXPECT_EQ(b.offset_of(c.data()), test::definition_offset(s, "OIHW", shape, c)) << r.spec;
    }
  }
}

// same_offsets ignores size-1 axes and nothing else: NCHW:F is memory order W, H, C, N, which with
// batch 1 puts every element where NWHC does; with batch 2 it does not. A flip of a
// size-1 axis is no flip; a flip of any longer axis is.
TEST(ConvertPlacement, SameOffsetsAndIsCanonical) {
  auto pl = [](const Shape& shape, const char* text) { return placement(spec(text, "NCHW"), "NCHW", shape); };
  const Shape one{1, 3, 4, 5}, two{2, 3, 4, 5};
  EXPECT_TRUE(same_offsets(pl(one, "NCHW:F"), pl(one, "NWHC")));
  EXPECT_FALSE(same_offsets(pl(two, "NCHW:F"), pl(two, "NWHC")));
  EXPECT_TRUE(same_offsets(pl(one, "NCHW+flip=N"), pl(one, "NCHW")));
  EXPECT_FALSE(same_offsets(pl(two, "NCHW+flip=H"), pl(two, "NCHW")));
  EXPECT_FALSE(same_offsets(pl(two, "NCHW"), pl(Shape{2, 3, 5, 4}, "NCHW")));  // other shape
  EXPECT_TRUE(is_canonical(pl(two, "NCHW")));
  EXPECT_TRUE(is_canonical(pl(Shape{2, 1, 4, 5}, "NHWC")));  // C of size 1: NHWC is NCHW
  EXPECT_FALSE(is_canonical(pl(two, "NHWC")));
  EXPECT_FALSE(is_canonical(pl(two, "NCHW+flip=W")));
  EXPECT_TRUE(is_canonical(placement(two, {0, 1, 2, 3}, {false, false, false, false})));
}

}  // namespace
}  // namespace validate::layout
