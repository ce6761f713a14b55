#pragma once
// One output element of an op, in float64, read in place from the bytes a program was handed:
// the per-position entry of OpDef (OpDef::output_element), implemented in each op's folder
// (harness/ops/<op>/element_<op>.cpp).
//
// Why not OpDef::reference: the diagnosis's input-side hypotheses ("your program read weight.bin
// as OHWI", "rounded to TF32 before the products") recompute a few hundred output positions
// through ~150 different readings of the same bytes. The reference takes float64 Views of whole
// tensors: one reading would cost a float64 copy of every input (a failing 3 GB tensor would
// double its memory) for a few hundred sums. Here an operand is the raw bytes plus signed strides
// (a flipped axis has a negative stride, any layout hypothesis is an offset and 4 strides), read
// where they lie.
//
// Speed: the diagnosis runs ~150 hypotheses x a few hundred positions x K multiply-adds, so the
// inner loop is a strided multiply-add of two loads: one virtual call per output element, none
// per term; the loads and the accumulator are template parameters picked once per element.
#include <array>
#include <cstdint>
#include <string_view>

#include "validate/core/dtype.hpp"
#include "validate/ops/reference.hpp"

namespace validate::ops {

// A rounding applied to every operand value as it is loaded: what a stack that converts its
// operands before the products computes. tf32 is float32 with a 10-bit mantissa (Ampere tensor
// cores), not a storage DType, hence its own enum.
enum class LoadRounding { none, tf32, bfloat16, float16 };
// Nearest value of `r` (ties to even; NaN and infinities unchanged).
float round_load(float x, LoadRounding r);

// The value of element `i` of `data` stored as `storage`, as float: float16 widened, float64
// narrowed to float32 (what the program was handed is float32 at best), float32 and bfloat16
// (stored as float32 bytes) as they are. compare's read_value is this.
float element_value(const void* data, DType storage, std::int64_t i);

// One input tensor as the program read it: canonical multi-index (i0..i3) -> element
// base + sum(i_a * stride[a]) of `data`.
struct ElementOperand {
  const void* data = nullptr;
  DType storage = DType::float32;
  std::int64_t base = 0;
  std::array<std::int64_t, 4> stride{};  // per canonical axis, in elements; negative when flipped
  LoadRounding round = LoadRounding::none;

  explicit operator bool() const { return data != nullptr; }
  // The fast path: float32 bytes used as they are (one load, no conversion).
  bool plain() const { return storage == DType::float32 && round == LoadRounding::none; }
  double load(std::int64_t off) const {
    const float v = storage == DType::float32 ? static_cast<const float*>(data)[off]
                                              : element_value(data, storage, off);
    return round == LoadRounding::none ? v : round_load(v, round);
  }
};

// The operands of one op, in fixed slots (the op's inputs, target excluded, in tensor-table
// order: conv2d and conv_transpose2d input, weight, bias; matmul A, B). The slots are named once,
// at the boundary (OpDef::element_operands, operator[]); the sum reads them by index.
struct ElementOperands {
  static constexpr std::size_t kSlots = 4;
  std::array<const char*, kSlots> name{};  // nullptr: no such slot
  std::array<ElementOperand, kSlots> slot{};
  // The slot named `n`; throws std::out_of_range for a name the op does not have.
  ElementOperand& operator[](std::string_view n);
  const ElementOperand& operator[](std::string_view n) const;
};

// How the sum of one element is formed: the same options as the reference's element-by-element
// path (ReferenceOptions::accumulation, order, bias_first; see reference.hpp), so an element
// equals the reference's output at that position, plus the bias's "lost or doubled" hypotheses.
struct ElementOptions {
  Accumulation accumulation = Accumulation::float64;
  SumOrder order = SumOrder::canonical;
  bool bias_first = false;  // the running sum starts at the (scaled) bias
  double bias_scale = 1.0;  // 0: the bias lost, 2: added twice
  // With a narrow accumulation: each add is a float32 add whose result is stored in the narrow
  // type, so the sum is rounded twice (to float32, then to the narrow type) — what a program with
  // a bfloat16/float16 accumulator variable computes, and what the diagnosis recomputes. false:
  // rounded once from the exact double sum, as the reference (ops::accumulate). The two differ
  // where the float32 sum lands on a tie of the narrow type (about one add in 2^13 for float16),
  // and a difference early in a long sum carries to the end.
  bool float32_adds = false;
};

}  // namespace validate::ops
