// The per-element entry of every op (ops::OpDef::output_element, harness/ops/<op>/element_<op>.cpp)
// against the op's float64 reference (OpDef::reference) at every output position: the diagnosis's
// sampled recomputes read through it, so an element that is not the reference's value would make
// the diagnosis name the wrong mistake. The operands are given as bytes + strides: canonical, and
// in another memory order with an axis flipped (the weight as OHWI with H reversed, B as NK, ...),
// as float32 (the fast path) and float64 bytes (the general load). Options: float64 and bfloat16
// accumulation in every sum order the op lists, the bias first and last, lost and doubled, and the
// operands rounded on load (bfloat16, TF32) against the reference on pre-rounded values.
// Geometry: batch 2, groups 2, stride, padding, dilation, a bias, every axis a different size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "validate/ops/registry.hpp"

using namespace validate;

namespace {

using i64 = std::int64_t;

// Values exact in float32 (what a program is handed), so any storage holds them exactly.
std::vector<double> normals(i64 n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}

// TF32: float32 rounded to 10 mantissa bits, to nearest, ties to even (normal values only; these
// are far from float32's subnormals). Written from the definition, not from the harness's code.
double to_tf32(double v) {
  if (v == 0) return v;
  const double ulp = std::ldexp(1.0, std::ilogb(v) - 10);  // 10 mantissa bits after the leading one
  return std::nearbyint(v / ulp) * ulp;
}

// A tensor's canonical values stored in memory: axes in order `mem` (outermost first), the axes
// in `flip` reversed, as float32 or float64 bytes; and the operand that reads them back.
struct Stored {
  std::vector<float> f32;
  std::vector<double> f64;
  ops::ElementOperand e;
};

Stored store(const std::vector<double>& v, const Shape& dims, std::vector<int> mem, std::vector<int> flip,
             DType storage) {
  const int rank = static_cast<int>(dims.size());
  std::vector<i64> mstride(static_cast<std::size_t>(rank));
  i64 st = 1;
  for (int k = rank; k-- > 0;) {
    mstride[static_cast<std::size_t>(mem[static_cast<std::size_t>(k)])] = st;
    st *= dims[static_cast<std::size_t>(mem[static_cast<std::size_t>(k)])];
  }
  Stored s;
  s.e.storage = storage;
  for (int a = 0; a < rank; ++a) s.e.stride[static_cast<std::size_t>(a)] = mstride[static_cast<std::size_t>(a)];
  for (int a : flip) {
    s.e.base += (dims[static_cast<std::size_t>(a)] - 1) * s.e.stride[static_cast<std::size_t>(a)];
    s.e.stride[static_cast<std::size_t>(a)] = -s.e.stride[static_cast<std::size_t>(a)];
  }
  std::vector<double> memory(v.size());
  std::vector<i64> idx(static_cast<std::size_t>(rank), 0);
  for (std::size_t flat = 0; flat < v.size(); ++flat) {
    i64 r = static_cast<i64>(flat), off = s.e.base;
    for (int a = rank; a-- > 0;) {
      off += r % dims[static_cast<std::size_t>(a)] * s.e.stride[static_cast<std::size_t>(a)];
      r /= dims[static_cast<std::size_t>(a)];
    }
    memory[static_cast<std::size_t>(off)] = v[flat];
  }
  if (storage == DType::float64) {
    s.f64 = memory;
    s.e.data = s.f64.data();
  } else {
    s.f32.assign(memory.begin(), memory.end());
    s.e.data = s.f32.data();
  }
  return s;
}

// The non-canonical memory order of a rank-r operand: channels last (OHWI, NHWC) with H reversed
// for 4-d, transposed and reversed along axis 0 for 2-d, reversed for 1-d.
std::vector<int> other_order(std::size_t rank) {
  if (rank == 4) return {0, 2, 3, 1};
  if (rank == 2) return {1, 0};
  return {0};
}
std::vector<int> other_flip(std::size_t rank) { return rank == 4 ? std::vector<int>{2} : std::vector<int>{0}; }

struct Problem {
  ops::OpParams p;
  const ops::OpDef* def;
  std::vector<ops::TensorInfo> inputs;  // target excluded
  std::vector<std::vector<double>> values;
  Shape out_shape;
};

Problem make(const ops::OpParams& p) {
  Problem pr{p, &ops::find(ops::op_of(p)), {}, {}, {}};
  unsigned seed = 1;
  for (const auto& t : pr.def->tensors(p)) {
    if (t.role == ops::Role::output) pr.out_shape = t.shape;
    if (t.role != ops::Role::input || t.name == "target") continue;
    pr.inputs.push_back(t);
    pr.values.push_back(normals(shape_numel(t.shape), seed++));
  }
  return pr;
}

// The reference's output for inputs `values` (canonical, dense) with `opt`.
std::vector<double> reference(const Problem& pr, std::vector<std::vector<double>> values,
                              const ops::ReferenceOptions& opt) {
  ops::Views v;
  for (std::size_t i = 0; i < pr.inputs.size(); ++i) v[pr.inputs[i].name] = ops::dense_view(values[i], pr.inputs[i].shape);
  std::vector<double> y(static_cast<std::size_t>(shape_numel(pr.out_shape))), t(y.size(), 0.0);
  v["output"] = ops::dense_view(y, pr.out_shape);
  v["target"] = ops::dense_view(t, pr.out_shape);
  pr.def->reference(pr.p, v, opt);
  return y;
}

// Every output element through the element entry, the operands stored as `canonical` says (else
// in other_order with other_flip) in `storage`, each rounded on load as `round` says (not a bias).
std::vector<double> elements(const Problem& pr, bool canonical, DType storage, const ops::ElementOptions& opt,
                             ops::LoadRounding round = ops::LoadRounding::none) {
  std::vector<Stored> keep;
  keep.reserve(pr.inputs.size());
  ops::ElementOperands in = pr.def->element_operands();
  for (std::size_t i = 0; i < pr.inputs.size(); ++i) {
    const Shape& s = pr.inputs[i].shape;
    std::vector<int> mem(s.size());
    for (std::size_t a = 0; a < s.size(); ++a) mem[a] = static_cast<int>(a);
    keep.push_back(canonical ? store(pr.values[i], s, mem, {}, storage)
                             : store(pr.values[i], s, other_order(s.size()), other_flip(s.size()), storage));
    if (!canonical) {  // the bytes really are in another order
      const Stored c = store(pr.values[i], s, mem, {}, DType::float64);
      EXPECT_NE(c.f64, keep.back().f64.empty() ? std::vector<double>(keep.back().f32.begin(), keep.back().f32.end())
                                               : keep.back().f64)
          << pr.inputs[i].name;
    }
    if (pr.inputs[i].name != "bias") keep.back().e.round = round;
    in[pr.inputs[i].name] = keep.back().e;
  }
  std::vector<double> y(static_cast<std::size_t>(shape_numel(pr.out_shape)));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = pr.def->output_element(pr.p, static_cast<i64>(i), in, opt);
  return y;
}

// Equal to 1e-12 relative, every position; reports how many positions differ.
void expect_same(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  i64 bad = 0, first = -1;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-12 * std::fabs(want[i]))) {
      if (first < 0) first = static_cast<i64>(i);
      ++bad;
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " positions differ, first at " << first
                    << " (" << (first < 0 ? 0 : got[static_cast<std::size_t>(first)]) << " vs "
                    << (first < 0 ? 0 : want[static_cast<std::size_t>(first)]) << ")";
}

// The element entry equals the reference with the same options, every layout and storage.
void check_options(const ops::OpParams& p) {
  const Problem pr = make(p);
  for (auto acc : {ops::Accumulation::float64, ops::Accumulation::bfloat16})
    for (const auto& order : pr.def->sum_orders())
      for (bool bias_first : {false, true}) {
        ops::ReferenceOptions ro;
        ro.accumulation = acc;
        ro.order = order.order;
        ro.bias_first = bias_first;
        ops::ElementOptions eo;
        eo.accumulation = acc;
        eo.order = order.order;
        eo.bias_first = bias_first;
        const auto want = reference(pr, pr.values, ro);
        for (bool canonical : {true, false})
          for (DType storage : {DType::float32, DType::float64})
            expect_same(elements(pr, canonical, storage, eo), want,
                        std::string(pr.def->name()) + " acc " + ops::accumulation_name(acc) + " order " + order.name +
                            (bias_first ? " bias first" : " bias last") + (canonical ? " canonical " : " strided ") +
                            std::string(dtype_name(storage)));
      }
}

// The bias lost or doubled, and the operands rounded on load, against the reference on inputs
// changed that way.
void check_hypotheses(const ops::OpParams& p) {
  const Problem pr = make(p);
  for (std::size_t i = 0; i < pr.inputs.size(); ++i) {
    if (pr.inputs[i].name != "bias") continue;
    for (double scale : {0.0, 2.0}) {
      auto values = pr.values;
      for (double& b : values[i]) b *= scale;
      ops::ElementOptions eo;
      eo.bias_scale = scale;
      expect_same(elements(pr, false, DType::float32, eo), reference(pr, values, {}),
                  std::string(pr.def->name()) + " bias x" + std::to_string(scale));
    }
  }
  struct Load {
    ops::LoadRounding r;
    double (*round)(double);
  };
  const Load loads[] = {{ops::LoadRounding::bfloat16, [](double v) { return round_to_dtype(v, DType::bfloat16); }},
                        {ops::LoadRounding::tf32, to_tf32}};
  for (const Load& l : loads) {
    auto values = pr.values;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (pr.inputs[i].name != "bias")
        for (double& v : values[i]) v = l.round(v);
    ASSERT_NE(values, pr.values);
    expect_same(elements(pr, false, DType::float32, {}, l.r), reference(pr, values, {}),
                std::string(pr.def->name()) + " rounded on load " + std::to_string(static_cast<int>(l.r)));
  }
}

ops::ConvParams conv_params() {
  ops::ConvParams p;  // input 2x6x7x9, weight 4x3x5x2, output 2x4x3x11
  p.n = 2, p.c = 6, p.h = 7, p.w = 9, p.o = 4, p.kh = 5, p.kw = 2;
  p.stride = {2, 1}, p.padding = {1, 2}, p.dilation = {1, 2}, p.groups = 2, p.bias = true;
  return p;
}

ops::ConvTransposeParams conv_transpose_params() {
  ops::ConvTransposeParams p;  // input 2x4x5x3, weight 4x3x5x2 (IOHW), output 2x6x16x10
  p.n = 2, p.c = 4, p.h = 5, p.w = 3, p.o = 6, p.kh = 5, p.kw = 2;
  p.stride = {2, 3}, p.padding = {1, 0}, p.output_padding = {1, 2}, p.dilation = {2, 1}, p.groups = 2;
  p.bias = true;
  return p;
}

ops::MatmulParams matmul_params() { return {5, 7, 3}; }  // A 5x7, B 7x3 (matmul has no batch)

}  // namespace

TEST(OutputElement, Conv2dIsTheReferenceAtEveryPosition) { check_options(conv_params()); }
TEST(OutputElement, ConvTranspose2dIsTheReferenceAtEveryPosition) { check_options(conv_transpose_params()); }
TEST(OutputElement, MatmulIsTheReferenceAtEveryPosition) { check_options(matmul_params()); }

TEST(OutputElement, Conv2dBiasAndLoadRoundings) { check_hypotheses(conv_params()); }
TEST(OutputElement, ConvTranspose2dBiasAndLoadRoundings) { check_hypotheses(conv_transpose_params()); }
TEST(OutputElement, MatmulLoadRoundings) { check_hypotheses(matmul_params()); }

// Every op has an element path with its inputs as named slots (target excluded).
TEST(OutputElement, EveryOpNamesItsOperands) {
  for (const ops::OpDef* def : ops::registry()) {
    const ops::OpParams p = ops::with_all_tensors(*def);
    ops::ElementOperands in = def->element_operands();
    for (const auto& t : def->tensors(p))
      if (t.role == ops::Role::input && t.name != "target") {
        EXPECT_NO_THROW(in[t.name]) << def->name() << " " << t.name;
      }
    EXPECT_THROW(in["target"], std::out_of_range) << def->name();
  }
}

// float32_adds (what the diagnosis recomputes): each add a float32 add stored in the narrow type,
// against that sum written out here, over a long k; and not the once-rounded sum of the reference
// (the flag is not ignored: over ~100k float16 adds some float32 sums land on a float16 tie).
TEST(OutputElement, Float32AddsRoundTwice) {
  const Problem pr = make(ops::MatmulParams{4, 8192, 3});
  const std::vector<double>&A = pr.values[0], &B = pr.values[1];
  for (auto [acc, dt] : {std::pair{ops::Accumulation::float16, DType::float16},
                         std::pair{ops::Accumulation::bfloat16, DType::bfloat16}}) {
    std::vector<double> want;
    for (i64 m = 0; m < 4; ++m)
      for (i64 j = 0; j < 3; ++j) {
        double s = 0;
        for (i64 k = 0; k < 8192; ++k)
          s = round_to_dtype(static_cast<float>(s + A[static_cast<std::size_t>(m * 8192 + k)] *
                                                        B[static_cast<std::size_t>(k * 3 + j)]),
                             dt);
        want.push_back(s);
      }
    ops::ElementOptions eo;
    eo.accumulation = acc;
    eo.float32_adds = true;
    expect_same(elements(pr, false, DType::float32, eo), want, std::string("float32 adds ") + dtype_name(dt).data());
    if (acc == ops::Accumulation::float16) {
      ops::ReferenceOptions ro;
      ro.accumulation = acc;
      EXPECT_NE(reference(pr, pr.values, ro), want);
    }
  }
}
