// conv_transpose2d through cuDNN (conv_geometry.hpp): cudnnConvolutionBackwardData as the forward,
// Forward for grad_input, BackwardFilter with the roles of input and grad_output exchanged.
// Device-free: the geometry of cases/conv_transpose2d.json (shapes worked out by hand from
// PyTorch's formula, and cuDNN's forward formula taking the output back to the input), which
// direction produces which tensor and in what order, every preset's weight reaching cuDNN as a
// native filter, the gradient's layout and the convolution mode. On a device: every preset and
// dtype against the float64 reference.
#include <gtest/gtest.h>

#include <set>

#include "conv_case.hpp"
#include "gpu_test_util.hpp"
#include "validate/layout/layout.hpp"
#include "validate/backends/cudnn_runner.hpp"

namespace validate::runners::cudnn_detail {
namespace {

// cases/conv_transpose2d.json, its two cases.
ops::ConvTransposeParams grouped() {
  ops::ConvTransposeParams p;
  p.n = 2, p.c = 4, p.h = 5, p.w = 7, p.o = 6, p.kh = 2, p.kw = 5;
  p.stride = {2, 2}, p.padding = {1, 2}, p.output_padding = {1, 1}, p.dilation = {1, 2};
  p.groups = 2, p.bias = false;
  return p;
}
ops::ConvTransposeParams biased() {
  ops::ConvTransposeParams p;
  p.n = 3, p.c = 5, p.h = 4, p.w = 6, p.o = 7, p.kh = 3, p.kw = 2;
  p.stride = {2, 1}, p.padding = {0, 1}, p.output_padding = {1, 0}, p.dilation = {2, 1};
  p.groups = 1, p.bias = true;
  return p;
}

TEST(CudnnConvTransposeHost, GeometryAndCudnnsForwardTakeTheOutputBackToTheInput) {
  // H_out = (H - 1) s - 2 p + d (k - 1) + output_padding + 1:
  //   grouped: (5-1)2 - 2 + 1 + 1 + 1 = 9,  (7-1)2 - 4 + 8 + 1 + 1 = 18
  //   biased:  (4-1)2 - 0 + 4 + 1 + 1 = 12, (6-1)1 - 2 + 1 + 0 + 1 = 5
  const ConvGeometry g = conv_geometry(grouped());
  EXPECT_TRUE(g.transposed);
  EXPECT_EQ(g.op, "conv_transpose2d");
  EXPECT_EQ(g.weight_axes, "IOHW");
  EXPECT_EQ(g.x, (Shape{2, 4, 5, 7}));
  EXPECT_EQ(g.w, (Shape{4, 3, 2, 5}));  // (in, out / groups, kh, kw): cuDNN's K = 4, C = 3
  EXPECT_EQ(g.y, (Shape{2, 6, 9, 18}));
  EXPECT_EQ(g.channels_out, 6);
  EXPECT_EQ(g.cudnn_x(), g.y);
  EXPECT_EQ(g.cudnn_y(), g.x);
  // cuDNN's forward of the output with the filter: (9 + 2 - 1 - 1) / 2 + 1 = 5,
  // (18 + 4 - 8 - 1) / 2 + 1 = 7 — the input; output_padding is what the division drops.
  EXPECT_EQ(cudnn_forward_dims(g, g.cudnn_x(), g.w), (Shape{2, 4, 5, 7}));

  const ConvGeometry b = conv_geometry(biased());
  EXPECT_EQ(b.y, (Shape{3, 7, 12, 5}));
  EXPECT_EQ(b.w, (Shape{5, 7, 3, 2}));
  EXPECT_TRUE(b.bias);
  // (12 - 4 - 1) / 2 + 1 = 4, (5 + 2 - 1 - 1) / 1 + 1 = 6.
  EXPECT_EQ(cudnn_forward_dims(b, b.cudnn_x(), b.w), (Shape{3, 5, 4, 6}));

  // conv2d: the same formula gives its output from its input.
  ops::ConvParams c;
  c.n = 2, c.c = 6, c.h = 7, c.w = 9, c.o = 4, c.kh = 3, c.kw = 2;
  c.stride = {2, 1}, c.padding = {1, 0}, c.dilation = {1, 2}, c.groups = 2;
  const ConvGeometry f = conv_geometry(c);
  EXPECT_FALSE(f.transposed);
  EXPECT_EQ(f.w, (Shape{4, 3, 3, 2}));
  EXPECT_EQ(f.y, (Shape{2, 4, 4, 7}));  // (7 + 2 - 2 - 1) / 2 + 1 = 4, (9 - 2 - 1) + 1 = 7
  EXPECT_EQ(cudnn_forward_dims(f, f.cudnn_x(), f.w), f.y);
}

TEST(CudnnConvTransposeHost, BackwardDataProducesTheOutputAndRunsFirst) {
  EXPECT_STREQ(produced_tensor(Direction::bwd_data, true), "output");
  EXPECT_STREQ(produced_tensor(Direction::fwd, true), "grad_input");
  EXPECT_STREQ(produced_tensor(Direction::bwd_filter, true), "grad_weight");
  EXPECT_STREQ(produced_tensor(Direction::fwd, false), "output");
  EXPECT_STREQ(produced_tensor(Direction::bwd_data, false), "grad_input");
  EXPECT_STREQ(produced_tensor(Direction::bwd_filter, false), "grad_weight");
  const auto t = execution_order(true), c = execution_order(false);
  EXPECT_EQ(t[0], Direction::bwd_data);
  EXPECT_EQ(t[1], Direction::fwd);
  EXPECT_EQ(t[2], Direction::bwd_filter);
  EXPECT_EQ(c[0], Direction::fwd);
  EXPECT_EQ(c[1], Direction::bwd_data);
}

// Each call's operands, held to the geometry: cuDNN's Forward reads X and writes Y, BackwardData
// reads dY and writes dX, BackwardFilter reads X and dY — so every operand must have the shape of
// the cuDNN tensor its slot is, for both ops, and each op tensor is written by one call only.
TEST(CudnnConvTransposeHost, EveryCallsOperandsHaveTheShapesCudnnExpects) {
  for (const ConvGeometry& g : {conv_geometry(grouped()), conv_geometry(biased())}) {
    ops::ConvParams c;
    c.n = 2, c.c = 6, c.h = 7, c.w = 9, c.o = 4, c.kh = 3, c.kw = 2, c.groups = 2;
    for (const ConvGeometry& geo : {g, conv_geometry(c)}) {
      auto shape_of = [&](const std::string& t) -> const Shape& {
        return t == "input" || t == "grad_input" ? geo.x : geo.y;
      };
      const Shape* want[3][2] = {{&geo.cudnn_x(), &geo.cudnn_y()},   // Forward: x, y
                                 {&geo.cudnn_y(), &geo.cudnn_x()},   // BackwardData: dy, dx
                                 {&geo.cudnn_x(), &geo.cudnn_y()}};  // BackwardFilter: x, dy
      std::set<std::string> written;
      for (Direction d : kDirections) {
        const auto ops = operand_tensors(d, geo.transposed);
        for (int k = 0; k < 2; ++k)
          EXPECT_EQ(shape_of(ops[static_cast<std::size_t>(k)]), *want[static_cast<int>(d)][k])
              << geo.op << " " << direction_name(d) << " operand " << k;
        if (d != Direction::bwd_filter) {
          // The written operand is the tensor the direction produces.
          EXPECT_STREQ(ops[1], produced_tensor(d, geo.transposed)) << geo.op;
          written.insert(ops[1]);
        }
      }
      EXPECT_EQ(written, (std::set<std::string>{"output", "grad_input"})) << geo.op;
    }
  }
  // The transposed op's calls read grad_output where conv2d's read input, and the reverse.
  EXPECT_STREQ(operand_tensors(Direction::fwd, true)[0], "grad_output");
  EXPECT_STREQ(operand_tensors(Direction::bwd_filter, true)[1], "input");
  EXPECT_STREQ(operand_tensors(Direction::bwd_data, true)[0], "input");
}

// Each preset's conv_transpose2d weight is a native cuDNN filter (IOHW is KCRS with K = in), and
// cuDNN writes dW in that memory order: the grad_weight spec the preset declares.
TEST(CudnnConvTransposeHost, EveryPresetsWeightIsANativeFilter) {
  const Shape w{4, 3, 2, 5};
  struct Want {
    const char* preset;
    cudnnTensorFormat_t format;
    const char* grad;
  };
  for (const Want& want :
       {Want{"torch", CUDNN_TENSOR_NCHW, "IOHW"}, Want{"channels_last", CUDNN_TENSOR_NHWC, "IHWO"},
        Want{"fortran", CUDNN_TENSOR_NCHW, "IOHW"}}) {
    auto ls = layout::load_layout(want.preset);
    ASSERT_TRUE(ls) << ls.message();
    const layout::Spec* spec = ls->find("conv_transpose2d", "weight");
    ASSERT_NE(spec, nullptr) << want.preset;
    const FilterPlan f = plan_filter(*spec, w, false, "IOHW");
    EXPECT_EQ(f.path, "native") << want.preset;
    EXPECT_EQ(f.format, want.format) << want.preset;
    const layout::Spec dw = cudnn_grad_weight_spec(f, *spec, "IOHW");
    EXPECT_EQ(layout::to_string(dw), want.grad) << want.preset;
    // The bytes cuDNN writes are the declared grad_weight's memory order: no reorder needed.
    const layout::Spec* declared = ls->find("conv_transpose2d", "grad_weight");
    ASSERT_NE(declared, nullptr);
    EXPECT_TRUE(layout::same_offsets(layout::placement(dw, "IOHW", w),
                                     layout::placement(*declared, "IOHW", w)))
        << want.preset;
    // The NCHW fallback converts a KRSC filter to KCRS (IOHW memory); a KCRS one stays.
    const FilterPlan conv = plan_filter(*spec, w, true, "IOHW");
    EXPECT_EQ(conv.path, want.format == CUDNN_TENSOR_NHWC ? "converted" : "native") << want.preset;
    EXPECT_EQ(conv.format, CUDNN_TENSOR_NCHW);
    EXPECT_TRUE(
        layout::same_offsets(layout::placement(conv.stack, "IOHW", w),
                             layout::placement(*layout::parse_spec("IOHW", "IOHW"), "IOHW", w)))
        << want.preset << ": " << layout::to_string(conv.stack);
  }
  // The fortran preset's activations reach cuDNN strided, as for conv2d.
  auto f = layout::load_layout("fortran");
  ASSERT_TRUE(f);
  const ActPlan a = plan_activation(*f->find("conv_transpose2d", "input"), {2, 4, 5, 7}, false);
  EXPECT_EQ(a.path, "strided");
  EXPECT_EQ(a.strides, (std::vector<std::int64_t>{4 * 5 * 7, 1, 4, 4 * 5}));
}

TEST(CudnnConvTransposeHost, TheModeFollowsTheWeightsFlip) {
  auto mode = [](const char* text) {
    auto s = layout::parse_spec(text, "IOHW");
    EXPECT_TRUE(s) << s.message();
    return convolution_mode_of(*s);
  };
  ASSERT_TRUE(mode("IOHW"));
  EXPECT_FALSE(*mode("IOHW"));
  EXPECT_FALSE(*mode("WHOI:F"));
  EXPECT_TRUE(*mode("IOHW+flip=HW"));
  const auto half = mode("IOHW+flip=W");
  ASSERT_FALSE(half);
  EXPECT_NE(half.message().find("flipped in W only"), std::string::npos) << half.message();
}

// ---- device ----

cases::Case transpose_case(DType dt, const ops::ConvTransposeParams& p) {
  cases::Case c;
  c.name = "ct";
  c.dtype = dt;
  c.params<ops::ConvTransposeParams>() = p;
  return c;
}

testing_gpu::Tensors transpose_inputs(const cases::Case& c) {
  testing_gpu::Tensors in;
  const auto& p = c.params<ops::ConvTransposeParams>();
  for (const auto& t : c.inputs(cases::Op::conv_transpose2d)) {
    const float scale = t.name == "weight" ? 1.f / std::sqrt(static_cast<float>(p.k()))
                        : t.name == "bias" ? 0.1f
                                           : 1.f;
    in.emplace(t.name, testing_gpu::random_tensor(t.shape, c.dtype, "ct_" + t.name, scale));
  }
  return in;
}

TEST(CudnnConvTranspose, EveryPresetMatchesTheFloat64Reference) {
  VALIDATE_REQUIRE_GPU();
  for (const char* preset : {"torch", "channels_last", "fortran"})
    for (DType dt : {DType::float32, DType::bfloat16})
      for (const auto& p : {grouped(), biased()}) {
        const auto c = transpose_case(dt, p);
        const auto in = transpose_inputs(c);
        const auto ref = testing_gpu::op_reference(c, cases::Op::conv_transpose2d, in);
        auto r = make_cudnn_runner(CudnnOptions{}, *layout::load_layout(preset));
        ASSERT_TRUE(r) << r.message();
        ASSERT_TRUE((*r)->prepare());
        OpTask task;
        task.c = &c;
        task.op = cases::Op::conv_transpose2d;
        for (const auto& [name, t] : in) task.inputs[name] = &t;
        const auto results = (*r)->run(task);
        ASSERT_EQ(results.size(), 1u);
        const OpResult& res = results[0];
        const std::string what = std::string(preset) + "/" + std::string(dtype_name(dt));
        ASSERT_EQ(res.outcome, RunOutcome::ok) << what << ": " << res.message;
        const double tol = dt == DType::float32 ? 2e-5 : 4e-2;
        for (const auto& [name, want] : ref) {
          auto it = res.outputs.find(name);
          ASSERT_NE(it, res.outputs.end()) << what << ": no " << name;
          EXPECT_LE(testing_gpu::relative_error(it->second, want), tol) << what << " " << name;
        }
        // The output came from BackwardData: its algorithm is recorded under "output".
        const std::string out_algo = res.info["cudnn_algorithms"].value("output", "");
        EXPECT_EQ(out_algo.rfind("CUDNN_CONVOLUTION_BWD_DATA_ALGO_", 0), 0u) << out_algo;
        const std::string gi_algo = res.info["cudnn_algorithms"].value("grad_input", "");
        EXPECT_EQ(gi_algo.rfind("CUDNN_CONVOLUTION_FWD_ALGO_", 0), 0u) << gi_algo;
      }
}

}  // namespace
}  // namespace validate::runners::cudnn_detail
