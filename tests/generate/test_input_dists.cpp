// A case file's "inputs" (docs/cli.md, "Input distributions"): each distribution's statistics
// against expectations computed here (binomial bands, the Student-t CDF), element i from i alone
// (one thread and two give the same bytes), the normal fill unchanged, user .npy files written by
// numpy landing in the set exactly, and every bad spec or file refused naming what was wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/temp_dir.hpp"
#include "generate/generate_fixture.hpp"
#include "validate/cases/case_file.hpp"
#include "validate/cases/refset.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/rng.hpp"
#include "validate/generate/generate.hpp"
#include "validate/generate/inputs.hpp"

using namespace validate;
using validate::testing::options;
using validate::testing::slurp;
using validate::testing::TempDir;

namespace {

constexpr double kPi = 3.14159265358979323846;

// A conv2d case of 2*64*64*64 = 524,288 input elements (above the 2^18 that draws in parallel),
// K = 64, with `inputs` as its "inputs" object.
cases::Case stats_case(const std::string& inputs, DType dt = DType::float32, const std::string& extra = "") {
  const std::string text = R"({"cases": [{"name": "stats", "batch": 2, "in_channels": 64, "height": 64, "width": 64,
      "out_channels": 4, "kernel": [1, 1], "padding": [0, 0])" + extra + R"(, "inputs": )" + inputs + "}]}";
  auto f = cases::parse_case_file(Json::parse(text), "stats.json");
  EXPECT_TRUE(f) << f.message();
  cases::Case c = f->cases.at(0);
  c.dtype = dt;
  return c;
}

Tensor draw(const cases::Case& c, const std::string& tensor, int threads = 2, std::int64_t step = 0) {
  auto all = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random, threads, step);
  return std::move(all.at(tensor));
}

std::string parse_error(const std::string& text) {
  auto f = cases::parse_case_file(Json::parse(text), "f.json");
  return f ? std::string("(accepted)") : f.message();
}

// |count - n p| within 6 binomial standard deviations.
void expect_binomial(std::int64_t count, std::int64_t n, double p, const std::string& what) {
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::abs(static_cast<double>(count) - static_cast<double>(n) * p), 6 * sd + 1e-9)
      << what << ": " << count << " of " << n << ", expected " << n * p << " +- " << 6 * sd;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.bytes(), b.bytes(), a.nbytes()) == 0;
}

}  // namespace

TEST(InputDists, NormalSpelledOutIsTodaysFill) {
  // {"dist": "normal"} with nothing else draws today's stream: element i is the Philox normal(i).
  const cases::Case plain = stats_case("{}");
  const cases::Case named = stats_case(R"({"input": {"dist": "normal"}, "weight": {"dist": "normal"}})");
  for (const char* t : {"input", "weight", "bias", "target"}) EXPECT_TRUE(same_bytes(draw(plain, t), draw(named, t))) << t;
  const Tensor x = draw(named, "input");
  Philox rng(42, "stats", "conv2d", "input");
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{7}, x.numel() / 2 + 5, x.numel() - 1})
    EXPECT_EQ(static_cast<float>(x.get(i)), rng.normal(static_cast<std::uint64_t>(i))) << i;
  // The weight keeps its 1/sqrt(K) = 1/8 unless "scale" is given.
  Philox wr(42, "stats", "conv2d", "weight");
  EXPECT_EQ(static_cast<float>(draw(named, "weight").get(3)), wr.normal(3) * 0.125f);
  const cases::Case scaled = stats_case(R"({"weight": {"dist": "normal", "scale": 2}})");
  EXPECT_EQ(static_cast<float>(draw(scaled, "weight").get(3)), wr.normal(3) * 2.0f);
}

TEST(InputDists, ReluNormalIsTheNormalStreamClampedAtZero) {
  const cases::Case c = stats_case(R"({"input": {"dist": "relu_normal"}})");
  const Tensor x = draw(c, "input");
  Philox rng(42, "stats", "conv2d", "input");
  std::int64_t zeros = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float v = static_cast<float>(x.get(i));
    ASSERT_FALSE(std::signbit(v)) << i;  // no -0.0 either
    const float z = rng.normal(static_cast<std::uint64_t>(i));
    ASSERT_EQ(v, z > 0 ? z : 0.0f) << i;
    zeros += v == 0;
  }
  expect_binomial(zeros, x.numel(), 0.5, "relu_normal zeros");
}

TEST(InputDists, ZerosFractionOnAnyDistribution) {
  for (const char* spec : {R"({"input": {"dist": "sparse", "zeros": 0.9}})",
                           R"({"input": {"dist": "log_uniform", "zeros": 0.3}})",
                           R"({"input": {"dist": "student_t", "dof": 5, "zeros": 0.05}})"}) {
    const double p = Json::parse(spec)["input"]["zeros"].get<double>();
    const Tensor x = draw(stats_case(spec), "input");
    std::int64_t zeros = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) zeros += x.get(i) == 0.0;
    expect_binomial(zeros, x.numel(), p, spec);
  }
  // sparse's non-zeros are the normal stream's own values.
  const Tensor s = draw(stats_case(R"({"input": {"dist": "sparse", "zeros": 0.5}})"), "input");
  Philox rng(42, "stats", "conv2d", "input");
  for (std::int64_t i = 0; i < 1000; ++i)
    if (s.get(i) != 0.0) {
      ASSERT_EQ(static_cast<float>(s.get(i)), rng.normal(static_cast<std::uint64_t>(i))) << i;
    }
  // zeros = 1 leaves nothing.
  const Tensor all = draw(stats_case(R"({"input": {"dist": "relu_normal", "zeros": 1}})"), "input");
  for (std::int64_t i = 0; i < all.numel(); ++i) ASSERT_EQ(all.get(i), 0.0) << i;
}

TEST(InputDists, LogUniformSpansItsDecadesUniformlyInLog10) {
  const double d = 4;
  const cases::Case c = stats_case(R"({"input": {"dist": "log_uniform", "decades": 4},
                                       "weight": {"dist": "log_uniform", "decades": 4, "sign": "positive"}})");
  const Tensor x = draw(c, "input");
  const std::int64_t n = x.numel();
  std::int64_t per_decade[4] = {0, 0, 0, 0}, negative = 0;
  double lo = 1e300, hi = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = x.get(i), a = std::fabs(v);
    ASSERT_GT(a, std::pow(10.0, -d) * (1 - 1e-7)) << i;
    ASSERT_LE(a, 1.0) << i;
    lo = std::min(lo, a), hi = std::max(hi, a);
    negative += v < 0;
    ++per_decade[std::min(3, static_cast<int>(-std::log10(a)))];
  }
  // 524,288 uniform draws of log10|x| in (-4, 0]: the extremes come within 1e-4 decades of each end.
  EXPECT_NEAR(std::log10(lo), -d, 1e-3);
  EXPECT_NEAR(std::log10(hi), 0, 1e-3);
  for (int k = 0; k < 4; ++k) expect_binomial(per_decade[k], n, 0.25, "decade " + std::to_string(k));
  expect_binomial(negative, n, 0.5, "log_uniform negatives");
  // The weight's top is its 1/sqrt(K) = 1/8 and "positive" leaves no negative value.
  const Tensor w = draw(c, "weight");
  double whi = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    ASSERT_GT(w.get(i), 0.125 * 1e-4 * (1 - 1e-7)) << i;
    whi = std::max(whi, w.get(i));
  }
  EXPECT_LE(whi, 0.125);
  EXPECT_GT(whi, 0.125 * 0.5);  // 256 draws: the top decade holds about 64 of them
}

TEST(InputDists, StudentTTailsMatchItsCdf) {
  // P(|T| > t) for nu = 3: 1 - 2 (F(t) - 1/2), F(t) - 1/2 = (x/(1 + x^2) + atan x) / pi, x = t/sqrt 3;
  // for nu = 1 (Cauchy): 1 - 2 atan(t) / pi.
  auto tail3 = [](double t) {
    const double x = t / std::sqrt(3.0);
    return 1 - 2 * (x / (1 + x * x) + std::atan(x)) / kPi;
  };
  auto tail1 = [](double t) { return 1 - 2 * std::atan(t) / kPi; };
  for (int nu : {3, 1}) {
    const Tensor x = draw(stats_case(R"({"input": {"dist": "student_t", "dof": )" + std::to_string(nu) + "}}"), "input");
    std::int64_t negative = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_TRUE(std::isfinite(x.get(i))) << i;
      negative += x.get(i) < 0;
    }
    expect_binomial(negative, x.numel(), 0.5, "student_t negatives");
    for (double t : {0.5, 1.0, 3.0, 10.0, 30.0}) {
      std::int64_t over = 0;
      for (std::int64_t i = 0; i < x.numel(); ++i) over += std::fabs(x.get(i)) > t;
      expect_binomial(over, x.numel(), nu == 3 ? tail3(t) : tail1(t), "nu=" + std::to_string(nu) + " |T|>" + std::to_string(t));
    }
  }
}

TEST(InputDists, EveryDistributionDrawsTheSameBytesOnOneThreadAndTwo) {
  for (const char* spec : {R"({"input": {"dist": "relu_normal"}})", R"({"input": {"dist": "log_uniform", "decades": 6}})",
                           R"({"input": {"dist": "student_t", "dof": 2, "zeros": 0.2}})",
                           R"({"input": {"dist": "sparse", "zeros": 0.7, "sign": "negative"}})"})
    for (DType dt : {DType::float32, DType::bfloat16, DType::float16}) {
      const cases::Case c = stats_case(spec, dt);
      const Tensor one = draw(c, "input", 1), two = draw(c, "input", 2);
      EXPECT_TRUE(same_bytes(one, two)) << spec << " " << dtype_name(dt);
      for (std::int64_t i = 0; i < one.numel(); ++i) {
        const double v = one.get(i);
        ASSERT_TRUE(std::isfinite(v)) << spec << " " << i;
        if (dt == DType::bfloat16) {
          ASSERT_EQ(static_cast<float>(v), round_to_dtype(static_cast<float>(v), dt)) << i;
        }
      }
    }
}

TEST(InputDists, ATrainingCaseDrawsEachStepFromTheRecordedDistribution) {
  // The runner rebuilds the case from its metadata and draws step s from it: the same bytes.
  const cases::Case c = stats_case(R"({"input": {"dist": "relu_normal"}, "target": {"dist": "student_t", "dof": 4}})",
                                   DType::float32, R"(, "train": {"steps": 3, "lr": 0.01})");
  ASSERT_TRUE(c.train);
  auto back = cases::case_from_metadata(cases::case_metadata(c, {}), "meta.json");
  ASSERT_TRUE(back) << back.message();
  for (std::int64_t step : {1, 2}) {
    auto a = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random, 2, step);
    auto b = generate::make_inputs(*back, cases::Op::conv2d, 42, generate::Fill::random, 2, step);
    EXPECT_EQ(a.count("weight"), 0u);  // parameters are the optimizer's
    for (const char* t : {"input", "target"}) EXPECT_TRUE(same_bytes(a.at(t), b.at(t))) << t << step;
    const Tensor& x = a.at("input");
    for (std::int64_t i = 0; i < x.numel(); ++i) ASSERT_GE(x.get(i), 0.0) << i;
    EXPECT_FALSE(same_bytes(x, draw(c, "input", 2, 0)));  // a new batch
  }
}

TEST(InputDists, BadSpecsAreRefusedWithADidYouMean) {
  const std::string head = R"({"cases": [{"name": "c", "in_channels": 4, "inputs": )";
  EXPECT_NE(parse_error(head + R"({"input": {"dist": "relu_norml"}}}]})").find("did you mean 'relu_normal'"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"input": {"dist": "log_uniform", "decade": 3}}}]})").find("did you mean 'decades'"),
            std::string::npos);
  EXPECT_NE(parse_error(head + R"({"inptu": {"dist": "normal"}}}]})").find("did you mean 'input'"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"conv2d.A": {}}}]})").find("'conv2d.A' is not an input"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"input": {"dist": "sparse"}}}]})").find("needs 'zeros'"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"input": {"zeros": 1.5}}}]})").find("'zeros' must be a number in [0, 1]"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"input": {"dist": "student_t", "dof": 0.5}}}]})").find("'dof'"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"input": {"dist": "normal", "sign": "up"}}}]})").find("'sign'"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"input": {"scale": 1e16}}}]})").find("'scale' must be a number in (0, 1e+15]"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"weight": {"dist": "npy"}}}]})").find("needs 'file'"), std::string::npos);
  EXPECT_NE(parse_error(head + R"({"weight": {"dist": "npy", "file": "w.npy", "zeros": 0.5}}}]})").find("do not apply"),
            std::string::npos);
  // A training case's data inputs are drawn anew each step: not from a file. Its parameters may be.
  const std::string train = R"({"cases": [{"name": "c", "in_channels": 4, "train": {"steps": 2, "lr": 0.1}, "inputs": )";
  const std::string refused = parse_error(train + R"({"input": {"dist": "npy", "file": "x.npy"}}}]})");
  EXPECT_NE(refused.find("draws a new 'input' for every step"), std::string::npos) << refused;
  EXPECT_EQ(parse_error(train + R"({"weight": {"dist": "npy", "file": "w.npy"}}}]})"), "(accepted)");
  // "defaults" take "inputs" too, and a case's own entry replaces the defaults' for that tensor.
  auto f = cases::parse_case_file(Json::parse(R"({"defaults": {"inputs": {"input": {"dist": "relu_normal"},
      "weight": {"dist": "log_uniform"}}}, "sweep": {"in_channels": [4]},
      "cases": [{"name": "c", "in_channels": 4, "inputs": {"weight": {"dist": "student_t"}}}]})"),
                                  "f.json");
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ(cases::describe(f->cases[0].input_dists), "input relu_normal; weight log_uniform decades=3");
  EXPECT_EQ(cases::describe(f->cases[1].input_dists), "input relu_normal; weight student_t dof=3");
}

namespace {

// Runs a python3 script with numpy (the test is skipped without one).
bool run_numpy(const std::string& dir, const std::string& script) {
  const std::string py = dir + "/make.py";
  std::ofstream(py) << "import hashlib, numpy as np, os, sys\nos.chdir(sys.argv[1])\n" << script;
  return std::system((std::string(VALIDATE_TEST_NUMPY_PYTHON) + " " + py + " " + dir).c_str()) == 0;
}

std::string npy_case_file(const std::string& inputs, const std::string& dtypes = R"(["float32", "bfloat16"])") {
  return R"({"format": "validate-cases/1", "seed": 5, "dtypes": )" + dtypes + R"(,
    "defaults": {"batch": 2, "in_channels": 3, "height": 5, "width": 4, "out_channels": 6, "kernel": [3, 2],
                 "padding": [1, 0], "bias": true},
    "cases": [{"name": "user", "inputs": )" + inputs + "}]}";
}

}  // namespace

TEST(InputDists, NumpyFilesLandInTheSetExactly) {
  if (std::string(VALIDATE_TEST_NUMPY_PYTHON).empty()) GTEST_SKIP() << "no python3 with numpy";
  TempDir dir("npy_inputs");
  // numpy writes the user's files, and what the set must hold: the values rounded to float32 (and
  // from there to bfloat16, nearest even), as raw little-endian float32, and each file's sha256.
  ASSERT_TRUE(run_numpy(dir.path(), R"(
rng = np.random.default_rng(3)
os.makedirs("data")
w = rng.standard_normal((6, 3, 3, 2)) * 10.0 ** rng.uniform(-3, 1, (6, 3, 3, 2))   # float64
x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
b = (rng.standard_normal(6) * 3).astype(np.float16)
np.save("data/w.npy", w); np.save("x.npy", x); np.save("data/b.npy", b)
def bf16(f):
    u = f.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32)
for name, a in (("w", w), ("x", x), ("b", b)):
    a.astype(np.float32).astype("<f4").tofile(name + ".float32.bin")
    bf16(a).astype("<f4").tofile(name + ".bfloat16.bin")
for p in ("data/w.npy", "x.npy", "data/b.npy"):
    open(p.replace("/", "_") + ".sha256", "w").write(hashlib.sha256(open(p, "rb").read()).hexdigest())
)"));
  const std::string cases_path = dir / "cases.json";
  ASSERT_TRUE(fs::write_atomic(cases_path, npy_case_file(R"({"weight": {"dist": "npy", "file": "data/w.npy"},
      "input": {"dist": "npy", "file": "x.npy"}, "bias": {"dist": "npy", "file": "data/b.npy"}})")));
  std::ostringstream log;
  auto o = options(cases_path, dir / "ref");
  auto sum = generate::generate(o, log);
  ASSERT_TRUE(sum) << sum.message() << log.str();
  for (const char* dt : {"float32", "bfloat16"}) {
    for (auto [t, src] : {std::pair{"weight", "w"}, std::pair{"input", "x"}, std::pair{"bias", "b"}}) {
      auto got = npy::read(dir / ("ref/" + std::string(dt) + "/user_conv2d_" + t + ".npy"));
      ASSERT_TRUE(got) << got.message();
      const std::string want = slurp(dir / (std::string(src) + "." + dt + ".bin"));
      ASSERT_EQ(want.size(), got->nbytes()) << dt << " " << t;
      EXPECT_EQ(std::memcmp(want.data(), got->bytes(), want.size()), 0) << dt << " " << t;
    }
    // Recorded: each file's sha256 beside the distribution, in the metadata and config.json.
    auto meta = read_json(dir / ("ref/" + std::string(dt) + "/user_metadata.json"));
    ASSERT_TRUE(meta);
    EXPECT_EQ((*meta)["inputs"]["weight"]["sha256"], slurp(dir / "data_w.npy.sha256"));
    EXPECT_EQ((*meta)["inputs"]["input"]["sha256"], slurp(dir / "x.npy.sha256"));
    EXPECT_EQ((*meta)["inputs"]["bias"]["file"], "data/b.npy");
    auto back = cases::case_from_metadata(*meta, "meta");
    ASSERT_TRUE(back) << back.message();
    EXPECT_EQ(back->input_dist(cases::Op::conv2d, "weight")->dist, cases::Dist::npy);
  }
  auto config = read_json(dir / "ref/config.json");
  ASSERT_TRUE(config);
  EXPECT_EQ((*config)["expanded_cases"][0]["inputs"]["bias"]["sha256"], slurp(dir / "data_b.npy.sha256"));
  // The im2col matmul named nothing: its A and B are the normal fill, recorded as nothing.
  EXPECT_EQ((*config)["expanded_cases"][0]["inputs"].size(), 3u);
  // The set's README lists them under its cases.
  const std::string readme = slurp(dir / "ref/README.md");
  EXPECT_NE(readme.find("## Input distributions"), std::string::npos);
  EXPECT_NE(readme.find("- float32/user: bias npy file=data/b.npy sha256=" + slurp(dir / "data_b.npy.sha256").substr(0, 12) +
                        "; input npy file=x.npy"),
            std::string::npos)
      << readme;
}

TEST(InputDists, BadNumpyFilesAreRefusedNamingTheFileBeforeAnythingIsWritten) {
  if (std::string(VALIDATE_TEST_NUMPY_PYTHON).empty()) GTEST_SKIP() << "no python3 with numpy";
  TempDir dir("npy_bad");
  ASSERT_TRUE(run_numpy(dir.path(), R"(
np.save("wrong.npy", np.zeros((6, 3, 2, 3), np.float32))
np.save("ok.npy", np.ones((6, 3, 3, 2), np.float32))
open("truncated.npy", "wb").write(open("ok.npy", "rb").read()[:-10])
np.save("ints.npy", np.ones((6, 3, 3, 2), np.int32))
np.save("inf.npy", np.full((6, 3, 3, 2), np.inf, np.float32))
np.save("big.npy", np.full((6, 3, 3, 2), 7e4, np.float32))
os.makedirs("adir.npy")
)"));
  auto refuse = [&](const std::string& inputs, const std::string& dtypes, const std::string& expect) {
    const std::string cases_path = dir / "cases.json";
    ASSERT_TRUE(fs::write_atomic(cases_path, npy_case_file(inputs, dtypes)));
    std::ostringstream log;
    auto o = options(cases_path, dir / "ref");
    auto sum = generate::generate(o, log);
    ASSERT_FALSE(sum) << inputs;
    EXPECT_NE(sum.message().find(expect), std::string::npos) << sum.message();
    EXPECT_FALSE(std::filesystem::exists(dir / "ref")) << inputs;  // nothing half-written
  };
  const std::string f32 = R"(["float32"])";
  refuse(R"({"weight": {"dist": "npy", "file": "wrong.npy"}})", f32,
         dir / "wrong.npy has shape (6, 3, 2, 3), conv2d weight needs (6, 3, 3, 2)");
  refuse(R"({"weight": {"dist": "npy", "file": "truncated.npy"}})", f32, dir / "truncated.npy");
  refuse(R"({"weight": {"dist": "npy", "file": "missing.npy"}})", f32, dir / "missing.npy is not a regular file");
  refuse(R"({"weight": {"dist": "npy", "file": "adir.npy"}})", f32, dir / "adir.npy is not a regular file");
  refuse(R"({"weight": {"dist": "npy", "file": "ints.npy"}})", f32, dir / "ints.npy");
  refuse(R"({"weight": {"dist": "npy", "file": "inf.npy"}})", f32, "inputs must be finite");
  refuse(R"({"weight": {"dist": "npy", "file": "big.npy"}})", R"(["float16"])", "beyond float16's largest finite value");
  refuse(R"({"weight": {"dist": "npy", "file": "ok.npy", "sha256": ")" + std::string(64, '0') + R"("}})", f32,
         "the case file asks for " + std::string(64, '0'));
  // --fill exact draws small integers for every input: a distribution is refused, not ignored.
  const std::string cases_path = dir / "cases.json";
  ASSERT_TRUE(fs::write_atomic(cases_path, npy_case_file(R"({"input": {"dist": "relu_normal"}})", f32)));
  std::ostringstream log;
  auto o = options(cases_path, dir / "ref");
  o.fill = generate::Fill::exact;
  auto sum = generate::generate(o, log);
  ASSERT_FALSE(sum);
  EXPECT_NE(sum.message().find("--fill exact"), std::string::npos) << sum.message();
  EXPECT_FALSE(std::filesystem::exists(dir / "ref"));
}

TEST(InputDists, GenerateWritesTheSameInputsOnOneThreadAndTwo) {
  // A whole set: every input file (524,288 elements, drawn in parallel) is the same bytes with
  // --threads 1 and 2 (results may differ: the BLAS splits its sums by thread count).
  TempDir dir("dists_threads");
  const std::string cases_path = dir / "cases.json";
  ASSERT_TRUE(fs::write_atomic(cases_path, R"({"seed": 9, "dtypes": ["bfloat16"], "cases": [{"name": "big", "batch": 2,
      "in_channels": 64, "height": 64, "width": 64, "out_channels": 2, "kernel": [1, 1], "padding": [0, 0],
      "inputs": {"input": {"dist": "student_t", "dof": 3, "zeros": 0.25}, "A": {"dist": "log_uniform", "decades": 5},
                 "weight": {"dist": "relu_normal"}, "B": {"dist": "sparse", "zeros": 0.5}}}]})"));
  for (int threads : {1, 2}) {
    std::ostringstream log;
    auto o = options(cases_path, dir / ("t" + std::to_string(threads)));
    o.threads = threads;
    auto sum = generate::generate(o, log);
    ASSERT_TRUE(sum) << sum.message() << log.str();
  }
  for (const char* f : {"big_conv2d_input", "big_conv2d_weight", "big_conv2d_bias", "big_conv2d_target", "big_matmul_A",
                        "big_matmul_B", "big_matmul_target"}) {
    const std::string one = slurp(dir / ("t1/bfloat16/" + std::string(f) + ".npy"));
    EXPECT_GT(one.size(), 100u) << f;
    EXPECT_EQ(one, slurp(dir / ("t2/bfloat16/" + std::string(f) + ".npy"))) << f;
  }
}

TEST(InputDists, TheExampleCaseFileUsesEveryDistribution) {
  auto f = cases::load_case_file(std::string(VALIDATE_SOURCE_DIR) + "/cases/user_data.json");
  ASSERT_TRUE(f) << f.message();
  std::set<cases::Dist> seen;
  for (const auto& c : f->cases)
    for (const auto& [name, d] : c.input_dists) {
      seen.insert(d.dist);
      if (d.dist == cases::Dist::npy) {
        ASSERT_TRUE(d.data) << name;
        EXPECT_EQ(d.sha256.size(), 64u);
      }
    }
  EXPECT_EQ(seen.size(), 6u);  // normal (spelled out), relu_normal, log_uniform, student_t, sparse, npy
  const auto& p = f->cases.front().params<cases::ConvParams>();
  EXPECT_GT(p.n, 1);
  std::set<std::int64_t> sizes{p.n, p.c, p.h, p.w, p.o};
  EXPECT_EQ(sizes.size(), 5u);  // every axis a different size
}
