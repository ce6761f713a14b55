#include "validate/layout/spec.hpp"

#include <fmt/format.h>

namespace validate::layout {

namespace {

constexpr std::string_view kLetters = "NCHWOIMK";
constexpr std::string_view kAlphabetHelp =
    "axis letters are N C H W (activations), O I H W (weights), M K N (matrices)";

std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string expected_for(std::string_view canonical) {
  if (canonical.empty()) return "expected 'scalar' (a 0-d tensor has no axes)";
  if (canonical.size() == 1)
    return fmt::format("expected '{}' (a 1-d tensor has one axis)", canonical);
  return fmt::format("expected a permutation of {} with optional :C or :F and +flip=<axes>, e.g. {}",
                     canonical, canonical.size() == 4 ? std::string(canonical) + ", " +
                     std::string{canonical[0], canonical[2], canonical[3], canonical[1]} + " or " +
                     std::string{canonical[1], canonical[2], canonical[3], canonical[0]} + ":F"
                     : std::string{canonical[1], canonical[0]} + " or " + std::string(canonical) + ":F");
}

// Checks that `letters` are known, distinct and axes of `allowed`; `what` names the part of the
// spec for messages ("layout" or "flip").
Status check_letters(std::string_view text, std::string_view letters, std::string_view allowed,
                     std::string_view what) {
  for (std::size_t i = 0; i < letters.size(); ++i) {
    const char c = letters[i];
    if (kLetters.find(c) == std::string_view::npos)
      return Error{fmt::format("layout '{}': unknown axis letter '{}' in the {} ({}{})", text, c,
                               what, kAlphabetHelp,
                               (c >= 'a' && c <= 'z') ? "; upper case only" : "")};
    if (letters.find(c, i + 1) != std::string_view::npos)
      return Error{fmt::format("layout '{}': axis '{}' appears twice in the {}", text, c, what)};
    if (allowed.find(c) == std::string_view::npos)
      return Error{fmt::format("layout '{}': axis '{}' in the {} is not one of this tensor's axes ({})",
                               text, c, what, allowed)};
  }
  return Status::ok();
}

}  // namespace

Spec canonical_spec(std::string_view canonical_axes) { return Spec{std::string(canonical_axes), false, {}}; }

Result<Spec> parse_spec(std::string_view raw, std::string_view canonical) {
  const std::string_view text = trim(raw);
  if (text.empty() || text == "scalar") {
    if (canonical.empty()) return Spec{};
    return Error{fmt::format("layout '{}' is for a scalar, but this tensor has axes {}: {}", text,
                             canonical, expected_for(canonical))};
  }
  if (canonical.empty())
    return Error{fmt::format("layout '{}' for a scalar: {}", text, expected_for(canonical))};

  // Split "<axes>[:C|:F][+flip=<axes>]".
  std::string_view head = text, mod;
  if (auto plus = text.find('+'); plus != std::string_view::npos) {
    head = text.substr(0, plus);
    mod = text.substr(plus);
  }
  std::string_view axes = head, suffix;
  if (auto colon = head.find(':'); colon != std::string_view::npos) {
    axes = head.substr(0, colon);
    suffix = head.substr(colon);
  }
  Spec spec;
  if (!suffix.empty()) {
    if (suffix == ":F") {
      spec.fortran = true;
    } else if (suffix != ":C") {
      return Error{fmt::format("layout '{}': bad suffix '{}': expected :C (C order, last axis fastest) "
                               "or :F (Fortran order, first axis fastest), before any +flip=",
                               text, suffix)};
    }
  }
  if (axes.empty())
    return Error{fmt::format("layout '{}': no axes before the suffix; {}", text, expected_for(canonical))};
  VALIDATE_TRY(check_letters(text, axes, canonical, "axes"));
  if (axes.size() != canonical.size())
    return Error{fmt::format("layout '{}' names {} of the tensor's {} axes ({}); every axis must appear "
                             "exactly once: {}", text, axes.size(), canonical.size(), canonical,
                             expected_for(canonical))};
  spec.axes = std::string(axes);

  if (!mod.empty()) {
    constexpr std::string_view kFlip = "+flip=";
    if (mod.substr(0, kFlip.size()) != kFlip)
      return Error{fmt::format("layout '{}': bad modifier '{}': expected +flip=<axes>, e.g. +flip=HW, "
                               "after the :C/:F suffix", text, mod)};
    const std::string_view flip = mod.substr(kFlip.size());
    if (flip.empty())
      return Error{fmt::format("layout '{}': +flip= names no axes; expected e.g. +flip=HW", text)};
    if (flip.find_first_of(":+") != std::string_view::npos)
      return Error{fmt::format("layout '{}': '{}' after +flip=: the :C/:F suffix goes before +flip=, "
                               "and there is only one +flip=", text, flip)};
    VALIDATE_TRY(check_letters(text, flip, canonical, "flip"));
    // Canonical order, so that "+flip=WH" and "+flip=HW" print (and compare) the same.
    for (char c : canonical)
      if (flip.find(c) != std::string_view::npos) spec.flip += c;
  }
  return spec;
}

std::string to_string(const Spec& spec) {
  if (spec.is_scalar()) return "scalar";
  std::string s = spec.axes;
  if (spec.fortran) s += ":F";
  if (!spec.flip.empty()) s += "+flip=" + spec.flip;
  return s;
}

Result<std::string> guess_canonical_axes(std::string_view raw) {
  const std::string_view text = trim(raw);
  if (text.empty() || text == "scalar") return std::string();
  const std::string_view axes = text.substr(0, text.find_first_of(":+"));
  const auto has = [&](char c) { return axes.find(c) != std::string_view::npos; };
  if (has('C')) return std::string("NCHW");
  if (has('I')) return std::string("OIHW");
  if (has('M') || has('K')) {
    if (has('M') && has('K')) return std::string("MK");
    if (has('K') && has('N')) return std::string("KN");
    if (has('M') && has('N')) return std::string("MN");
  } else if (has('H') || has('W')) {
    return std::string(has('O') ? "OIHW" : "NCHW");
  } else if (axes == "O") {
    return std::string("O");
  }
  return Error{fmt::format("layout '{}': cannot tell which tensor it is for; give the canonical axes "
                           "(NCHW, OIHW, O, MK, KN, MN)", text)};
}

}  // namespace validate::layout
