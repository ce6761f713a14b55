#pragma once
// A probe is a small tensor whose every value is its own canonical flat index, shown in canonical
// and in layout memory order: a user checks their reader against it element by element
// (`validate probe --layout CHWN:F` prints `mem[1] = 20  (n=0 c=1 h=0 w=0)`: the second value in
// memory is canonical element 20, i.e. channel 1 of image 0).
#include <string>
#include <string_view>

#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"
#include "validate/layout/spec.hpp"

namespace validate::layout {

struct ProbeResult {
  Spec spec;
  std::string canonical_axes;  // "NCHW", ...
  Shape canonical_shape;
  Tensor canonical;  // float32, canonical C order, value = flat index
  Tensor in_layout;  // the same values in the layout's memory order; shape as written in the spec
};

// canonical_axes may be empty: then they are guessed from the spec's letters (guess_canonical_axes).
// Fails with a message on a bad spec, a shape whose rank is not the axes', or a probe too large to
// be exact (float32 holds integers exactly only up to 2^24 elements).
Result<ProbeResult> make_probe(std::string_view spec_text, const Shape& canonical_shape,
                               std::string_view canonical_axes = {});

// Text: the spec, shapes, then the first `max_elements` values of each tensor in memory order with
// their canonical coordinates.
std::string describe_probe(const ProbeResult& probe, int max_elements = 24);

}  // namespace validate::layout
