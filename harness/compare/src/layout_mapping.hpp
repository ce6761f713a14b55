#pragma once
// Internal to the diagnosis: "the run's bytes are the canonical tensor stored as axis order `perm`,
// C order, with axes `flip` reversed" as an index mapping, canonical multi-index -> element offset.
// Sampled positions are evaluated in place; whole-tensor confirmation goes through
// validate::layout::permute_copy (src_strides/src_offset) when that module is built. A Fortran
// layout is the reversed axis order in C order, so permutations cover it.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "validate/core/tensor.hpp"

namespace validate::compare::detail {

struct LayoutMapping {
  Shape shape;                       // canonical shape
  std::vector<int> perm;             // stored axis j holds canonical axis perm[j]
  std::vector<bool> flip;            // per canonical axis: stored reversed
  std::vector<std::int64_t> stride;  // per canonical axis: element stride in the stored array

  static LayoutMapping make(const Shape& shape, const std::vector<int>& perm,
                            const std::vector<bool>& flip) {
    LayoutMapping m{shape, perm, flip, std::vector<std::int64_t>(shape.size(), 0)};
    std::int64_t s = 1;
    for (std::size_t j = perm.size(); j-- > 0;) {
      m.stride[static_cast<std::size_t>(perm[j])] = s;
      s *= shape[static_cast<std::size_t>(perm[j])];
    }
    return m;
  }
  Shape stored_shape() const {
    Shape s;
    for (int a : perm) s.push_back(shape[static_cast<std::size_t>(a)]);
    return s;
  }
  std::int64_t offset(const std::int64_t* idx) const {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < shape.size(); ++a)
      off += stride[a] * (flip[a] ? shape[a] - 1 - idx[a] : idx[a]);
    return off;
  }
  // The same mapping in validate::layout::permute_copy's terms: per canonical axis the stride in
  // elements (negative when flipped), and the element offset of canonical index 0.
  std::vector<std::int64_t> src_strides() const {
    std::vector<std::int64_t> s(shape.size());
    for (std::size_t a = 0; a < shape.size(); ++a) s[a] = flip[a] ? -stride[a] : stride[a];
    return s;
  }
  std::int64_t src_offset() const {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < shape.size(); ++a)
      if (flip[a]) off += stride[a] * (shape[a] - 1);
    return off;
  }
  // Two mappings that agree on every axis longer than 1 read the same bytes in the same places.
  std::vector<std::pair<std::int64_t, bool>> signature() const {
    std::vector<std::pair<std::int64_t, bool>> s;
    for (std::size_t a = 0; a < shape.size(); ++a)
      if (shape[a] > 1) s.emplace_back(stride[a], flip[a]);
    return s;
  }
  bool is_identity() const {
    std::vector<int> id(shape.size());
    for (std::size_t a = 0; a < id.size(); ++a) id[a] = static_cast<int>(a);
    return signature() == make(shape, id, std::vector<bool>(shape.size(), false)).signature();
  }
};

}  // namespace validate::compare::detail
