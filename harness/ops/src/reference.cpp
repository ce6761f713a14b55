#include "validate/ops/reference.hpp"

#include <cmath>

namespace validate::ops {

const char* accumulation_name(Accumulation a) {
  switch (a) {
    case Accumulation::float64: return "float64";
    case Accumulation::float32: return "float32";
    case Accumulation::bfloat16: return "bfloat16";
    case Accumulation::float16: return "float16";
  }
  return "?";
}

namespace {

// Neumaier-compensated running sum.
struct Sum {
  double s = 0, c = 0;
  void add(double v) {
    const double t = s + v;
    c += std::abs(s) >= std::abs(v) ? (s - t) + v : (v - t) + s;
    s = t;
  }
  double value() const { return s + c; }
};

}  // namespace

double mse(const std::vector<std::int64_t>& shape, const View& y, const View& t, DType output_dtype,
           std::vector<double>& dy) {
  using i64 = std::int64_t;
  i64 numel = 1;
  for (i64 s : shape) numel *= s;
  dy.assign(static_cast<std::size_t>(numel), 0.0);
  Sum sum;
  auto one = [&](double yv, double tv, i64 i) {
    const double d = round_to_dtype(yv, output_dtype) - tv;
    sum.add(d * d);
    dy[static_cast<std::size_t>(i)] = 2.0 * d / static_cast<double>(numel);
  };
  i64 i = 0;
  if (shape.size() == 4) {
    for (i64 a = 0; a < shape[0]; ++a)
      for (i64 b = 0; b < shape[1]; ++b)
        for (i64 c = 0; c < shape[2]; ++c)
          for (i64 d = 0; d < shape[3]; ++d, ++i) one(y.at(a, b, c, d), t.at(a, b, c, d), i);
  } else {
    for (i64 a = 0; a < shape[0]; ++a)
      for (i64 b = 0; b < shape[1]; ++b, ++i) one(y.at(a, b), t.at(a, b), i);
  }
  return sum.value() / static_cast<double>(numel);
}

}  // namespace validate::ops
