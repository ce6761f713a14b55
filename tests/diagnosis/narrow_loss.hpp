#pragma once
// Shared by the loss-side narrow-accumulation tests (test_diagnosis_accumulation.cpp for conv2d,
// test_diagnosis_conv_transpose.cpp): rounding to bfloat16 from the definition, and the check
// that the loss entry of a bfloat16 case whose output was summed with a bfloat16 accumulator
// (channels innermost) names that accumulator.
#include <gtest/gtest.h>

#include <cmath>

#include "validate/diagnosis/diagnosis.hpp"
#include "validate/metrics/metrics.hpp"
#include "validate/core/tensor.hpp"

namespace validate::testing {

// Round to `bits` significant bits, ties to even (std::nearbyint in the default mode), from the
// definition, independent of the harness's rounding. bfloat16: 8 bits, float16: 11 bits (normal
// range only: the values here stay far from the subnormals and the largest finite value).
inline double round_bits(double v, int bits) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e;
  std::frexp(v, &e);
  const double scale = std::ldexp(1.0, bits - e);
  return std::nearbyint(v * scale) / scale;
}
inline double bf16(double v) { return round_bits(v, 8); }

// `in`: the op's output entry with its inputs and parameters. Makes it the loss entry of a bfloat16
// case with target `t`: reference loss from `exact`, the run's from `narrow` (both rounded to
// bfloat16 first, as stored), and expects the bfloat16 accumulator named from the loss.
inline void expect_narrow_accumulator_named_from_loss(compare::DiagnosisInput in,
                                                      const Tensor& exact, const Tensor& narrow,
                                                      const Tensor& t) {
  auto mse = [&](const Tensor& y) {
    double sum = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) sum += std::pow(bf16(y.get(i)) - t.get(i), 2);
    return sum / static_cast<double>(y.numel());
  };
  in.role = validate::ops::Role::loss;
  in.tensor = "loss";
  in.logical = DType::bfloat16;
  in.inputs["target"] = compare::view_of(t);
  in.input_shapes["target"] = t.shape();
  in.input_shapes["output"] = t.shape();
  in.ref_loss = mse(exact);
  in.run_loss = mse(narrow);
  ASSERT_GT(std::fabs(in.run_loss - in.ref_loss), 1e-4 * in.ref_loss)
      << "the accumulator must move the loss";
  const auto dx = compare::diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "narrow_accumulation") << dx.summary;
  EXPECT_EQ(dx.named()->params["format"], "bfloat16") << dx.summary;
  // The program's order is among the matches. The loss, one number, seldom tells the orders apart
  // (the accumulator's squared errors move it alike in both), so the other may match too; a
  // float16 accumulator, 8 times finer, leaves the loss where the reference has it and must not.
  bool program_order = false;
  for (const auto& m : dx.matches) {
    EXPECT_EQ(m.params.value("format", ""), "bfloat16") << dx.summary;
    program_order = program_order || m.params.value("order", "") == "kh,kw,c";
  }
  EXPECT_TRUE(program_order) << dx.summary;
}

}  // namespace validate::testing
