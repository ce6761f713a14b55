#pragma once
// A layout spec names every axis of a stored array and how memory walks them, so nothing is
// implied: `<axes>[:C|:F][+flip=<axes>]` (docs/layouts.md, "The spec grammar").
//   NHWC            axes (N,H,W,C), C order: the last axis is fastest in memory
//   CHWN:F          the Fortran array x(C,H,W,N): column-major, the FIRST axis is fastest
//   WHIO:F+flip=HW  as above, and the value of canonical (h, w) sits at (KH-1-h, KW-1-w)
//   scalar          a 0-d tensor (the loss); "" means the same
// The axes are the canonical ones (NCHW, OIHW, O, MK, KN, MN) renamed in storage order; a spec
// only makes sense against the canonical axes of the tensor it describes, so parsing takes them.
#include <string>
#include <string_view>

#include "validate/core/result.hpp"

namespace validate::layout {

struct Spec {
  std::string axes;      // storage axis order as written ("HWIO"); empty for a scalar
  bool fortran = false;  // true: first axis fastest (":F"); false: last axis fastest (":C")
  std::string flip;      // axes stored reversed, in canonical order ("HW"); empty for none

  bool is_scalar() const { return axes.empty(); }
  friend bool operator==(const Spec& a, const Spec& b) {
    return a.axes == b.axes && a.fortran == b.fortran && a.flip == b.flip;
  }
  friend bool operator!=(const Spec& a, const Spec& b) { return !(a == b); }
};

// The canonical spec of a tensor: its canonical axes, C order, nothing flipped.
Spec canonical_spec(std::string_view canonical_axes);

// Parses `text` for a tensor whose canonical axes are `canonical_axes` ("NCHW", "OIHW", "O", "MK",
// "KN", "MN", or "" for a scalar). Every rejection says what was expected. Surrounding blanks are
// ignored; letters are case-sensitive (upper case), since "n" vs "N" in a hand-written file is
// more likely a typo than a convention. The flip axes are normalised to canonical order, so
// to_string(parse_spec(s)) is the canonical spelling of s.
Result<Spec> parse_spec(std::string_view text, std::string_view canonical_axes);

// "NHWC", "CHWN:F", "WHIO:F+flip=HW", "scalar". ":C" is never printed: it is the default.
std::string to_string(const Spec& spec);

// The canonical axes a spec's letters belong to when the caller does not say (the probe CLI):
// N/C -> NCHW, O/I -> OIHW, one of O -> O, M+K -> MK, K+N -> KN, M+N -> MN, "scalar" -> "".
// Fails when the letters fit no tensor (e.g. "HW" alone, or N with O).
Result<std::string> guess_canonical_axes(std::string_view spec_text);

}  // namespace validate::layout
