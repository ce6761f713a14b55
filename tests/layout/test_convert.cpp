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
        // NCHW [1,2,2,3] -> NHWC: per (h,w) the two channels, c*6 + h*3 + w. H=2 != W=3, so writing
        // NWHC instead would give 0,6,3,9,... and fail.
        Known{"NHWC", "NCHW", {1, 2, 2, 3}, {1, 2, 3, 2}, {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}},
        Known{"NWHC", "NCHW", {1, 2, 2, 3}, {1, 3, 2, 2}, {0, 6, 3, 9, 1, 7, 4, 10, 2, 8, 5, 11}},
        // NCHW [2,2,2,3] -> CHWN:F, the Fortran array x(C,H,W,N): C fastest, then H, W, N slowest.
        // value = n*12 + c*6 + h*3 + w; memory walks n { w { h { c } } }.
        Known{"CHWN:F", "NCHW", {2, 2, 2, 3}, {2, 2, 3, 2},
              {0, 6, 3, 9, 1, 7, 4, 10, 2, 8, 5, 11, 12, 18, 15, 21, 13, 19, 16, 22, 14, 20, 17, 23}},
        // OIHW [2,1,2,3] -> WHIO:F+flip=HW: memory is C-order OIHW of the kernel rotated by 180
        // degrees: (h',w') holds canonical (1-h', 2-w').
        Known{"WHIO:F+flip=HW", "OIHW", {2, 1, 2, 3}, {3, 2, 1, 2}, {5, 4, 3, 2, 1, 0, 11, 10, 9, 8, 7, 6}},
        // HWIO:F+flip=HW: memory walks o { i { w' { h' } } }, (h',w') holding (1-h', 2-w').
        Known{"HWIO:F+flip=HW", "OIHW", {2, 1, 2, 3}, {2, 3, 1, 2}, {5, 2, 4, 1, 3, 0, 11, 8, 10, 7, 9, 6}},
        // WHIO:F without the flip is byte-identical to OIHW.
        Known{"WHIO:F", "OIHW", {2, 1, 2, 3}, {3, 2, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
        // OHWI [2,2,1,3]: per (o,h,w) the two input channels; value = o*6 + i*3 + w.
        Known{"OHWI", "OIHW", {2, 2, 1, 3}, {2, 1, 3, 2}, {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11}},
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
  EXPECT_EQ(checked, 5 * 16 * 3);
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

}  // namespace
}  // namespace validate::layout
