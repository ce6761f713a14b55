// The exec runner against tiny /bin/sh "programs" written here: echo programs whose results the
// test can predict value by value, and programs that fail in every way the protocol names. All
// tasks of a test go through one runner, so a failure must not disturb the next task.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <thread>

#include "common/temp_dir.hpp"
#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/npy.hpp"
#include "validate/layout/preset.hpp"
#include "validate/runners/exec_runner.hpp"

namespace validate {
namespace {

using runners::RunOutcome;
using testing::conv_case;
using testing::conv_params;
using testing::make_inputs;
using testing::make_task;
using testing::matmul_case;
namespace stdfs = std::filesystem;

class Exec : public testing::ExecFixture {
 protected:
  Exec() : ExecFixture("exec") {}
  std::unique_ptr<runners::Runner> runner(const std::string& cmd, const layout::LayoutSet& set,
                                          double timeout = 30, bool keep = false) {
    return prepared({cmd, timeout, keep, {}}, set);
  }
  runners::OpResult run(runners::Runner& r, const cases::Case& c, cases::Op op,
                        const testing::Inputs& in, const std::string& dir) {
    auto v = r.run(make_task(c, op, in, dir));
    EXPECT_EQ(v.size(), 1u);
    return std::move(v[0]);
  }
};

// 1.5f, little-endian, written with printf's octal escapes.
constexpr const char* kWriteLoss = R"(printf '\000\000\300\077' > "$1/loss.bin")";

TEST_F(Exec, OutputOnlyLayoutFileEchoesTargetAndSkipsOtherOps) {
  // The file declares matmul's output and loss only: no gradient is expected, conv2d is skipped.
  auto set = layout_file("mm.json",
                         R"({"matmul": {"target": "MN:F", "output": "MN:F", "loss": "scalar"}})");
  auto r = runner(
      program("echo", std::string(R"(cp "$1/target.bin" "$1/output.bin")") + "\n" + kWriteLoss),
      set);
  auto c = conv_case("echo", conv_params(1, 2, 5, 4, 3, 2, 2, {1, 1}, {0, 1}, {1, 1}, 1, true),
                     DType::float32);
  const auto in = make_inputs(c, cases::Op::matmul, 5);
  auto res = run(*r, c, cases::Op::matmul, in, tmp / "w/mm");
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  ASSERT_EQ(res.outputs.size(), 2u);
  expect_same_values(res.outputs.at("output"), in.owned.at("target"), "output");
  EXPECT_EQ(res.outputs.at("loss").dim(), 0);
  EXPECT_EQ(res.outputs.at("loss").get(0), 1.5);
  EXPECT_EQ(res.info["layouts"]["output"], "MN:F");
  EXPECT_EQ(res.info["exit_status"], 0);

  const auto cin = make_inputs(c, cases::Op::conv2d, 5);
  auto skipped = run(*r, c, cases::Op::conv2d, cin, tmp / "w/conv");
  EXPECT_EQ(skipped.outcome, RunOutcome::skipped);
  EXPECT_EQ(skipped.message, "op not in the layout file");
  EXPECT_FALSE(stdfs::exists(tmp / "w/conv/case.json"));
}

// The fortran preset (flipped, column-major weights; CHWN:F activations) declares every gradient:
// a program that returns each input as "its" gradient must get it back, value for value.
TEST_F(Exec, EveryTensorRoundTripsThroughItsLayout) {
  auto r = runner(program("mirror", R"(
cd "$1"
if [ "$3" = conv2d ]; then
  cp input.bin grad_input.bin; cp weight.bin grad_weight.bin; cp bias.bin grad_bias.bin
else
  cp A.bin grad_A.bin; cp B.bin grad_B.bin
fi
cp target.bin output.bin
)" + std::string(kWriteLoss)),
                  *layout::load_layout("fortran"));
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
    auto c =
        conv_case("mirror", conv_params(2, 3, 5, 4, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 3, true), dt);
    for (cases::Op op : {cases::Op::conv2d, cases::Op::matmul}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + cases::op_name(op));
      const auto in = make_inputs(c, op, 9);
      auto res =
          run(*r, c, op, in, tmp / ("w/" + std::string(dtype_name(dt)) + cases::op_name(op)));
      ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
      const bool conv = op == cases::Op::conv2d;
      for (const char* from : conv ? std::vector<const char*>{"input", "weight", "bias"}
                                   : std::vector<const char*>{"A", "B"})
        expect_same_values(res.outputs.at(std::string("grad_") + from), in.owned.at(from), from);
      expect_same_values(res.outputs.at("output"), in.owned.at("target"), "output");
      EXPECT_EQ(res.outputs.size(), conv ? 5u : 4u);
    }
  }
}

// npy: inputs carry fortran_order and the layout's shape, so numpy indexes them with the layout's
// axes; results are read the same way, whatever order the program saved them in.
TEST_F(Exec, NpyFilesAreIndexedWithTheLayoutsAxes) {
  Tensor loss(DType::float32, Shape{});
  loss.set(0, 0.25);
  ASSERT_TRUE(npy::write(tmp / "loss_template.npy", loss));
  auto set = layout_file("npy.json", R"({"format": "npy", "base": "fortran",
      "conv2d": {"grad_weight": "WHIO:F+flip=HW", "output": "CHWN:F"}})");
  auto r = runner(
      program("npy", R"(cd "$1"; cp weight.npy grad_weight.npy; cp target.npy output.npy; cp )" +
                         tmp / "loss_template.npy" + " loss.npy"),
      set, 30, /*keep=*/true);
  auto c = conv_case("npy", conv_params(1, 2, 4, 6, 3, 3, 2, {1, 1}, {1, 0}, {1, 1}, 1, false),
                     DType::float32);
  const auto in = make_inputs(c, cases::Op::conv2d, 3);
  auto res = run(*r, c, cases::Op::conv2d, in, tmp / "w/npy");
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  EXPECT_EQ(res.outputs.size(), 3u);  // output, loss, grad_weight: the file names no other gradient
  expect_same_values(res.outputs.at("grad_weight"), in.owned.at("weight"), "grad_weight");
  expect_same_values(res.outputs.at("output"), in.owned.at("target"), "output");
  EXPECT_EQ(res.outputs.at("loss").get(0), 0.25);

  // weight.npy is the Fortran array w(KW, KH, I, O), stored flipped: w[kw,kh,i,o] =
  // W[o,i,KH-1-kh,KW-1-kw].
  auto bytes = slurp(tmp / "w/npy/weight.npy");
  auto h = npy::parse_header(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(),
                             "weight.npy");
  ASSERT_TRUE(h.is_ok()) << h.message();
  EXPECT_TRUE(h->fortran_order);
  EXPECT_EQ(h->shape, (Shape{2, 3, 2, 3}));
  auto w = npy::read(tmp / "w/npy/weight.npy");  // returned in C order over (KW, KH, I, O)
  ASSERT_TRUE(w.is_ok());
  const Tensor& W = in.owned.at("weight");  // [O=3, I=2, KH=3, KW=2]
  for (int kw = 0; kw < 2; ++kw)
    for (int kh = 0; kh < 3; ++kh)
      for (int i = 0; i < 2; ++i)
        for (int o = 0; o < 3; ++o)
          ASSERT_EQ(w->get(((kw * 3 + kh) * 2 + i) * 3 + o),
                    W.get(((o * 2 + i) * 3 + (2 - kh)) * 2 + (1 - kw)));
  // A C-ordered result of the right logical shape is read the same as a Fortran-ordered one.
  ASSERT_TRUE(npy::write(tmp / "c_order_weight.npy", *w));
  auto r2 = runner(program("npy_c", R"(cd "$1"; cp )" + tmp / "c_order_weight.npy" +
                                        R"( grad_weight.npy; cp target.npy output.npy; cp )" +
                                        tmp / "loss_template.npy" + " loss.npy"),
                   set);
  auto res2 = run(*r2, c, cases::Op::conv2d, in, tmp / "w/npy_c");
  ASSERT_EQ(res2.outcome, RunOutcome::ok) << res2.message;
  expect_same_values(res2.outputs.at("grad_weight"), in.owned.at("weight"),
                     "grad_weight from C order");
}

// Failures of every kind, one runner, the good task after each still passes.
TEST_F(Exec, FailuresAreNamedAndDoNotStopTheNextTask) {
  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  auto r = runner(program("dispatch", R"(
case "$2" in
  short) head -c 10 "$1/target.bin" > "$1/output.bin" ;;
  longloss) cp "$1/target.bin" "$1/output.bin"; printf '12345678' > "$1/loss.bin"; exit 0 ;;
  status3) echo "starting" ; echo "boom: cannot read $1/weights.bin" >&2; exit 3 ;;
  segv) kill -SEGV $$ ;;
  quiet) echo "only on stdout"; exit 1 ;;
  nothing) exit 0 ;;
  *) cp "$1/target.bin" "$1/output.bin" ;;
esac
)" + std::string(kWriteLoss)),
                  set);
  const auto expect_error = [&](const std::string& name, std::vector<std::string> needles) {
    SCOPED_TRACE(name);
    auto c = matmul_case(name, 6, 5, 4, DType::float32);
    const auto in = make_inputs(c, cases::Op::matmul, 2);
    auto res = run(*r, c, cases::Op::matmul, in, tmp / ("w/" + name));
    EXPECT_EQ(res.outcome, RunOutcome::error);
    EXPECT_TRUE(res.outputs.empty());
    for (const auto& n : needles)
      EXPECT_NE(res.message.find(n), std::string::npos) << "no '" << n << "' in: " << res.message;
    // ... and the next task is fine.
    auto good = matmul_case("good", 6, 5, 4, DType::float32);
    const auto gin = make_inputs(good, cases::Op::matmul, 3);
    auto ok = run(*r, good, cases::Op::matmul, gin, tmp / "w/good");
    EXPECT_EQ(ok.outcome, RunOutcome::ok) << ok.message;
  };
  expect_error("short", {"output.bin: 10 bytes, expected 96 bytes", "float32 [6, 4] in layout MN"});
  expect_error("longloss", {"loss.bin: 8 bytes, expected 4 bytes", "exactly one value"});
  expect_error("status3", {"exited with status 3", "stderr: boom: cannot read", "weights.bin"});
  // `sh -c 'sh script'` reports the script's segfault as status 139; the message decodes it.
  expect_error("segv", {"killed by SIGSEGV"});
  {
    auto self = runner("kill -SEGV $$", set);  // the top-level shell itself dies of the signal
    auto c = matmul_case("selfsegv", 6, 5, 4, DType::float32);
    const auto in = make_inputs(c, cases::Op::matmul, 2);
    auto res = run(*self, c, cases::Op::matmul, in, tmp / "w/selfsegv");
    EXPECT_EQ(res.outcome, RunOutcome::error);
    EXPECT_NE(res.message.find("the program was killed by SIGSEGV (Segmentation fault)"),
              std::string::npos)
        << res.message;
  }
  expect_error("quiet", {"exited with status 1", "nothing on stderr; stdout: only on stdout"});
  // A declared file left from an earlier task in the same directory is not an answer.
  {
    auto c = matmul_case("nothing", 6, 5, 4, DType::float32);
    const auto in = make_inputs(c, cases::Op::matmul, 2);
    auto good = runner(
        program("good", std::string(R"(cp "$1/target.bin" "$1/output.bin")") + "\n" + kWriteLoss),
        set);
    ASSERT_EQ(run(*good, c, cases::Op::matmul, in, tmp / "w/reused").outcome, RunOutcome::ok);
    auto res = run(*r, c, cases::Op::matmul, in, tmp / "w/reused");
    EXPECT_EQ(res.outcome, RunOutcome::error);
    EXPECT_NE(res.message.find("output.bin: missing"), std::string::npos) << res.message;
  }
}

// A program that does not do a task says so with unsupported.txt and exit 0: the task is
// `unsupported` with the program's reason, not an error, and the next task runs as usual.
TEST_F(Exec, UnsupportedTxtMakesTheTaskUnsupportedNotAnError) {
  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  auto r = runner(program("dispatch", R"(
case "$2" in
  unsup) printf 'no float16 here\nsecond line is ignored\n' > "$1/unsupported.txt"; exit 0 ;;
  unsup_ctrl) printf '  tab\there \033[1m\n' > "$1/unsupported.txt"; exit 0 ;;
  unsup_empty) : > "$1/unsupported.txt"; exit 0 ;;
  unsup_status4) echo "half-way" > "$1/unsupported.txt"; echo "crashed" >&2; exit 4 ;;
  unsup_fifo) mkfifo "$1/unsupported.txt"; exit 0 ;;
  *) cp "$1/target.bin" "$1/output.bin" ;;
esac
)" + std::string(kWriteLoss)),
                  set);
  const auto go = [&](const std::string& name, const std::string& dir) {
    auto c = matmul_case(name, 6, 5, 4, DType::float32);
    return run(*r, c, cases::Op::matmul, make_inputs(c, cases::Op::matmul, 2), tmp / dir);
  };
  {
    auto res = go("unsup", "w/a");
    EXPECT_EQ(res.outcome, RunOutcome::unsupported) << res.message;
    EXPECT_EQ(res.message, "the program does not support this task: no float16 here (unsupported.txt)");
    EXPECT_EQ(res.info.value("unsupported", ""), "no float16 here");
    EXPECT_TRUE(res.outputs.empty());
    EXPECT_FALSE(stdfs::exists(tmp / "w/a/A.bin"));  // inputs cleaned up as after a success
    // A stale answer is removed before the next task in the same directory: it runs and is ok.
    auto ok = go("good", "w/a");
    EXPECT_EQ(ok.outcome, RunOutcome::ok) << ok.message;
  }
  EXPECT_EQ(go("unsup_ctrl", "w/b").message,
            "the program does not support this task: tab?here ?[1m (unsupported.txt)");
  EXPECT_EQ(go("unsup_empty", "w/c").message,
            "the program does not support this task: (no reason given) (unsupported.txt)");
  {
    auto res = go("unsup_status4", "w/d");  // a failing program is a failure, whatever it wrote
    EXPECT_EQ(res.outcome, RunOutcome::error);
    EXPECT_NE(res.message.find("exited with status 4"), std::string::npos) << res.message;
  }
  {
    auto res = go("unsup_fifo", "w/e");
    EXPECT_EQ(res.outcome, RunOutcome::error);
    EXPECT_NE(res.message.find("unsupported.txt: not a regular file"), std::string::npos) << res.message;
  }
}

TEST_F(Exec, MissingDeclaredGradientsFail) {
  auto r = runner(
      program("no_grads", std::string(R"(cp "$1/target.bin" "$1/output.bin")") + "\n" + kWriteLoss),
      *layout::load_layout("torch"));
  auto c = matmul_case("nograd", 3, 4, 5, DType::float32);
  const auto in = make_inputs(c, cases::Op::matmul, 2);
  auto res = run(*r, c, cases::Op::matmul, in, tmp / "w/ng");
  EXPECT_EQ(res.outcome, RunOutcome::error);
  EXPECT_NE(res.message.find("grad_A.bin: missing"), std::string::npos) << res.message;
  EXPECT_NE(res.message.find("grad_B.bin: missing"), std::string::npos) << res.message;
}

bool process_gone(int pid) {
  // Gone, or a zombie nobody has reaped yet: either way it no longer runs.
  for (int i = 0; i < 200; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!stat || !std::getline(stat, line)) return true;
    const auto p = line.rfind(')');
    if (p != std::string::npos && p + 2 < line.size() && line[p + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(Exec, TimeoutKillsTheWholeProcessGroup) {
  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  auto r = runner(
      program("hang", R"(sleep 30 & echo $! > "$1/child.pid"; echo "waiting" >&2; sleep 30)"), set,
      1.0);
  auto c = matmul_case("hang", 2, 3, 4, DType::float32);
  const auto in = make_inputs(c, cases::Op::matmul, 2);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = run(*r, c, cases::Op::matmul, in, tmp / "w/hang");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(res.outcome, RunOutcome::error);
  EXPECT_NE(res.message.find("timed out after 1 s"), std::string::npos) << res.message;
  EXPECT_NE(res.message.find("stderr: waiting"), std::string::npos) << res.message;
  EXPECT_GE(s, 0.9);
  EXPECT_LT(s, 5.0);
  const int child = std::atoi(slurp(tmp / "w/hang/child.pid").c_str());
  ASSERT_GT(child, 0);
  EXPECT_TRUE(process_gone(child)) << "the program's background child survived the timeout";
}

TEST_F(Exec, ProcessesLeftBehindAreKilledAndWorkFilesRemoved) {
  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  auto r = runner(
      program("bg",
              std::string(
                  R"(sleep 30 & echo $! > "$1/child.pid"; cp "$1/target.bin" "$1/output.bin")") +
                  "\n" + kWriteLoss),
      set);
  auto c = matmul_case("bg", 2, 3, 4, DType::float32);
  const auto in = make_inputs(c, cases::Op::matmul, 2);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = run(*r, c, cases::Op::matmul, in, tmp / "w/bg");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  EXPECT_TRUE(process_gone(std::atoi(slurp(tmp / "w/bg/child.pid").c_str())));
  // keep_work=false: tensors gone, case.json and the logs kept.
  for (const char* f : {"A.bin", "B.bin", "target.bin", "output.bin", "loss.bin"})
    EXPECT_FALSE(stdfs::exists(tmp / ("w/bg/" + std::string(f)))) << f;
  for (const char* f : {"case.json", "stdout.log", "stderr.log"})
    EXPECT_TRUE(stdfs::exists(tmp / ("w/bg/" + std::string(f)))) << f;
}

TEST_F(Exec, EnvironmentAndCaseJsonFollowTheProtocol) {
  ::setenv("VALIDATE_M", "999", 1);  // stale protocol variable of an enclosing run: must not leak
  ::setenv("VALIDATE_TEST_PASSTHROUGH", "kept", 1);
  auto r = runner(
      program(
          "env",
          R"(env > "$1/env.txt"; printf '%s|%s|%s|%s' "$1" "$2" "$3" "$4" > "$1/args.txt"; exit 7)"),
      *layout::load_layout("fortran"));
  ::unsetenv("VALIDATE_M");
  auto c = conv_case("env_case", conv_params(2, 6, 7, 9, 4, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, false),
                     DType::bfloat16);
  const auto in = make_inputs(c, cases::Op::conv2d, 4);
  // A work dir with a space and a quote: {dir} must reach the program as one argument.
  const std::string dir = tmp / "w/it's a dir/conv2d";
  ::setenv("VALIDATE_M", "999", 1);
  auto res = run(*r, c, cases::Op::conv2d, in, dir);
  ::unsetenv("VALIDATE_M");
  ::unsetenv("VALIDATE_TEST_PASSTHROUGH");
  EXPECT_EQ(res.outcome, RunOutcome::error);
  EXPECT_NE(res.message.find("exited with status 7"), std::string::npos) << res.message;
  EXPECT_EQ(slurp(dir + "/args.txt"), dir + "|env_case|conv2d|bfloat16");

  std::map<std::string, std::string> env;
  std::istringstream lines(slurp(dir + "/env.txt"));
  for (std::string l; std::getline(lines, l);)
    if (auto eq = l.find('='); eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
  const std::map<std::string, std::string> want{{"VALIDATE_OP", "conv2d"},
                                                {"VALIDATE_CASE", "env_case"},
                                                {"VALIDATE_DTYPE", "bfloat16"},
                                                {"VALIDATE_DIR", dir},
                                                {"VALIDATE_FORMAT", "bin"},
                                                {"VALIDATE_N", "2"},
                                                {"VALIDATE_C", "6"},
                                                {"VALIDATE_H", "7"},
                                                {"VALIDATE_W", "9"},
                                                {"VALIDATE_O", "4"},
                                                {"VALIDATE_KH", "3"},
                                                {"VALIDATE_KW", "2"},
                                                {"VALIDATE_SH", "2"},
                                                {"VALIDATE_SW", "1"},
                                                {"VALIDATE_PH", "1"},
                                                {"VALIDATE_PW", "0"},
                                                {"VALIDATE_DH", "1"},
                                                {"VALIDATE_DW", "2"},
                                                {"VALIDATE_GROUPS", "2"},
                                                {"VALIDATE_HOUT", "4"},
                                                {"VALIDATE_WOUT", "7"},
                                                {"VALIDATE_BIAS", "0"},
                                                {"VALIDATE_TEST_PASSTHROUGH", "kept"}};
  for (const auto& [k, v] : want) EXPECT_EQ(env[k], v) << k;
  for (const char* k : {"VALIDATE_M", "VALIDATE_K", "VALIDATE_NCOLS"})
    EXPECT_EQ(env.count(k), 0u) << k;

  auto doc = read_json(dir + "/case.json");
  ASSERT_TRUE(doc.is_ok()) << doc.message();
  const Json& j = *doc;
  EXPECT_EQ(j["protocol"], "validate-exec/1");
  EXPECT_EQ(j["op"], "conv2d");
  EXPECT_EQ(j["case"], "env_case");
  EXPECT_EQ(j["dtype"], "bfloat16");
  EXPECT_EQ(j["storage_dtype"], "float32");
  EXPECT_EQ(j["format"], "bin");
  EXPECT_EQ(
      j["params"],
      Json::parse(R"({"N": 2, "C": 6, "H": 7, "W": 9, "O": 4, "KH": 3, "KW": 2, "stride": [2, 1],
      "padding": [1, 0], "dilation": [1, 2], "groups": 2, "bias": false, "Hout": 4, "Wout": 7})"));
  const Json want_tensors = Json::parse(R"({
    "input":  {"file": "input.bin",  "layout": "CHWN:F", "shape": [6, 7, 9, 2], "role": "input", "dtype": "float32"},
    "weight": {"file": "weight.bin", "layout": "WHIO:F+flip=HW", "shape": [2, 3, 3, 4], "role": "input", "dtype": "float32"},
    "target": {"file": "target.bin", "layout": "CHWN:F", "shape": [4, 4, 7, 2], "role": "input", "dtype": "float32"},
    "output": {"file": "output.bin", "layout": "CHWN:F", "shape": [4, 4, 7, 2], "role": "output", "dtype": "float32"},
    "loss":   {"file": "loss.bin",   "layout": "scalar", "shape": [], "role": "loss", "dtype": "float32"},
    "grad_input":  {"file": "grad_input.bin",  "layout": "CHWN:F", "shape": [6, 7, 9, 2], "role": "grad", "dtype": "float32"},
    "grad_weight": {"file": "grad_weight.bin", "layout": "WHIO:F+flip=HW", "shape": [2, 3, 3, 4], "role": "grad", "dtype": "float32"}})");
  EXPECT_EQ(j["tensors"], want_tensors) << j["tensors"].dump(1);
  // The input files are the tensors in those layouts: sizes say so (no bias file without a bias).
  EXPECT_EQ(stdfs::file_size(dir + "/input.bin"), 2u * 6 * 7 * 9 * 4);
  EXPECT_FALSE(stdfs::exists(dir + "/bias.bin"));

  // matmul, float16 storage.
  auto m = matmul_case("mm_env", 6, 5, 4, DType::float16);
  const auto min = make_inputs(m, cases::Op::matmul, 4);
  const std::string mdir = tmp / "w/mm";
  run(*r, m, cases::Op::matmul, min, mdir);
  env.clear();
  std::istringstream mlines(slurp(mdir + "/env.txt"));
  for (std::string l; std::getline(mlines, l);)
    if (auto eq = l.find('='); eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
  EXPECT_EQ(env["VALIDATE_M"], "6");
  EXPECT_EQ(env["VALIDATE_K"], "5");
  EXPECT_EQ(env["VALIDATE_NCOLS"], "4");
  EXPECT_EQ(env["VALIDATE_DTYPE"], "float16");
  for (const char* k : {"VALIDATE_N", "VALIDATE_GROUPS", "VALIDATE_BIAS"})
    EXPECT_EQ(env.count(k), 0u) << k;
  auto mdoc = read_json(mdir + "/case.json");
  ASSERT_TRUE(mdoc.is_ok());
  EXPECT_EQ((*mdoc)["params"], Json::parse(R"({"M": 6, "K": 5, "N": 4})"));
  EXPECT_EQ((*mdoc)["storage_dtype"], "float16");
  EXPECT_EQ(
      (*mdoc)["tensors"]["B"],
      Json::parse(
          R"({"file": "B.bin", "layout": "KN:F", "shape": [5, 4], "role": "input", "dtype": "float16"})"));
  EXPECT_EQ((*mdoc)["tensors"]["loss"]["dtype"], "float32");
  EXPECT_EQ(stdfs::file_size(mdir + "/A.bin"), 6u * 5 * 2);
}

// NaN and Inf are values, not failures: the runner hands them on bit for bit (compare judges
// them, tests/reliability/exec_faults.sh checks that it fails the case), in both storage dtypes.
TEST_F(Exec, NanAndInfArePassedOnUnchanged) {
  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  // output = target with element 0 NaN, 1 +Inf, 2 -Inf (little-endian bit patterns); loss NaN.
  auto r = runner(program("nan", R"(
cd "$1"; cp target.bin output.bin
if [ "$4" = float16 ]; then nan='\000\176'; pinf='\000\174'; ninf='\000\374'; else
  nan='\000\000\300\177'; pinf='\000\000\200\177'; ninf='\000\000\200\377'; fi
printf "$nan$pinf$ninf" | dd of=output.bin conv=notrunc status=none
printf '\000\000\300\177' > loss.bin)"),
                  set);
  for (DType dt : {DType::float32, DType::float16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto c = matmul_case("nan", 3, 5, 4, dt);
    const auto in = make_inputs(c, cases::Op::matmul, 8);
    auto res = run(*r, c, cases::Op::matmul, in, tmp / ("w/nan" + std::string(dtype_name(dt))));
    ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
    const Tensor& out = res.outputs.at("output");
    const Tensor& target = in.owned.at("target");
    ASSERT_EQ(out.numel(), 12);
    EXPECT_TRUE(std::isnan(out.get(0)));
    EXPECT_EQ(out.get(1), std::numeric_limits<double>::infinity());
    EXPECT_EQ(out.get(2), -std::numeric_limits<double>::infinity());
    for (std::int64_t i = 3; i < 12; ++i) EXPECT_EQ(out.get(i), target.get(i)) << i;
    EXPECT_TRUE(std::isnan(res.outputs.at("loss").get(0)));
  }
}

// A program that writes into the reference set, into the run directory's results or another
// case's work directory fails that task, with every file it touched named; its own work dir and
// its TMPDIR (inside the work dir) are its to use. One runner throughout: the good task after each
// bad one passes, so a change is blamed on the task that made it and on no later one.
TEST_F(Exec, WritesOutsideTheWorkDirectoryFailThatTaskOnly) {
  const std::string ref = tmp / "ref", run_dir = tmp / "run";
  for (const auto& d :
       {ref + "/float32", run_dir + "/float32", run_dir + "/work/float32/other/matmul"})
    stdfs::create_directories(d);
  ASSERT_TRUE(fs::write_atomic(ref + "/manifest.json", "{}"));
  ASSERT_TRUE(fs::write_atomic(ref + "/float32/x_matmul_A.npy", "0123456789"));
  ASSERT_TRUE(fs::write_atomic(run_dir + "/float32/done_matmul_output.npy", "results"));
  ASSERT_TRUE(fs::write_atomic(run_dir + "/work/float32/other/matmul/case.json", "{}"));
  // Timestamps move in ticks of a few ms: let the clock leave the tick these files were made in.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  const std::string answer =
      std::string(R"(cp "$1/target.bin" "$1/output.bin")") + "\n" + kWriteLoss;
  auto r = runners::make_exec_runner({program("outside", R"(
ref=')" + ref + R"('; run=')" + run_dir + R"sh('
case "$2" in
  append_ref) printf 'x' >> "$ref/float32/x_matmul_A.npy" ;;
  same_size_ref) f="$ref/float32/x_matmul_A.npy"; cp -p "$f" "$TMPDIR/keep"  # same size, and the
                 printf 'abcdefghij' | dd of="$f" conv=notrunc status=none  # mtime put back:
                 touch -r "$TMPDIR/keep" "$f" ;;                            # only ctime tells
  new_result) printf 'x' > "$run/float32/stray.npy" ;;
  parent) printf 'x' > "$1/../stray.bin" ;;
  other_case) rm "$run/work/float32/other/matmul/case.json" ;;
  replace_result) printf 'results' > "$run/tmp.npy"; mv "$run/tmp.npy" "$run/float32/done_matmul_output.npy" ;;
  crash_outside) printf 'x' > "$ref/crash.txt"; exit 3 ;;
  tmpfile) [ "$TMPDIR" = "$1/tmp" ] && [ "$TMP" = "$1/tmp" ] && [ -z "$(ls -A "$TMPDIR")" ] || exit 9
           mktemp > /dev/null; mktemp -d > /dev/null; echo "$TMPDIR" > "$1/tmpdir.txt" ;;
esac
)sh" + answer),
                                      30,
                                      false,
                                      {ref}},
                                     set);
  ASSERT_TRUE(r->prepare().is_ok());
  int good_runs = 0;
  auto task = [&](const std::string& name) {
    auto c = matmul_case(name, 6, 5, 4, DType::float32);
    const auto in = make_inputs(c, cases::Op::matmul, 2);
    auto t = make_task(c, cases::Op::matmul, in, run_dir + "/work/float32/" + name + "/matmul");
    t.run_dir = run_dir;  // as `validate run` passes it: the program must leave it alone
    auto v = r->run(t);
    EXPECT_EQ(v.size(), 1u);
    return std::move(v.at(0));
  };
  auto expect_outside = [&](const std::string& name, const std::vector<std::string>& files) {
    SCOPED_TRACE(name);
    auto res = task(name);
    EXPECT_EQ(res.outcome, RunOutcome::error);
    EXPECT_TRUE(res.outputs.empty());
    EXPECT_EQ(res.message.rfind("the program wrote outside its work directory: ", 0), 0u)
        << res.message;
    for (const auto& f : files)
      EXPECT_NE(res.message.find(f), std::string::npos) << "no '" << f << "' in: " << res.message;
    EXPECT_EQ(res.info["written_outside"].size(), files.size()) << res.info.dump();
    auto ok = task("good" + std::to_string(good_runs++));
    EXPECT_EQ(ok.outcome, RunOutcome::ok) << ok.message;
  };
  expect_outside("append_ref", {ref + "/float32/x_matmul_A.npy (modified)"});
  expect_outside("same_size_ref", {ref + "/float32/x_matmul_A.npy (modified)"});
  expect_outside("new_result", {run_dir + "/float32/stray.npy (created)"});
  expect_outside("parent", {run_dir + "/work/float32/parent/stray.bin (created)"});
  expect_outside("other_case", {run_dir + "/work/float32/other/matmul/case.json (deleted)"});
  expect_outside("replace_result", {run_dir + "/float32/done_matmul_output.npy (modified)"});
  {
    // A program that also fails says both, the write outside first.
    auto res = task("crash_outside");
    EXPECT_EQ(res.outcome, RunOutcome::error);
    EXPECT_EQ(res.message.rfind("the program wrote outside its work directory: " + ref +
                                    "/crash.txt (created); the program exited with status 3",
                                0),
              0u)
        << res.message;
  }
  // Temporary files under TMPDIR = <work dir>/tmp are the program's own; the directory is
  // emptied before the program runs and removed after a successful read.
  auto res = task("tmpfile");
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  EXPECT_EQ(slurp(run_dir + "/work/float32/tmpfile/matmul/tmpdir.txt"),
            run_dir + "/work/float32/tmpfile/matmul/tmp\n");
  EXPECT_FALSE(stdfs::exists(run_dir + "/work/float32/tmpfile/matmul/tmp"));
  EXPECT_EQ(good_runs, 6);
}

// The snapshot is names and lstat only: on a guarded tree of 5000 files it must still find the
// one file a program touched, and name only that one.
TEST_F(Exec, OneWriteAmongThousandsOfGuardedFilesIsFound) {
  const std::string ref = tmp / "bigref";
  for (int d = 0; d < 10; ++d) {
    const std::string sub = ref + "/d" + std::to_string(d);
    stdfs::create_directories(sub);
    for (int f = 0; f < 500; ++f) std::ofstream(sub + "/f" + std::to_string(f) + ".npy") << f;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  auto r = runners::make_exec_runner(
      {program("one", "printf 7 >> '" + ref + "/d7/f123.npy'\n" +
                          R"(cp "$1/target.bin" "$1/output.bin")" + "\n" + kWriteLoss),
       30,
       false,
       {ref}},
      set);
  auto c = matmul_case("one", 6, 5, 4, DType::float32);
  const auto in = make_inputs(c, cases::Op::matmul, 2);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = run(*r, c, cases::Op::matmul, in, tmp / "w/one");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(res.outcome, RunOutcome::error);
  EXPECT_EQ(res.info["written_outside"], Json::array({ref + "/d7/f123.npy (modified)"}))
      << res.info.dump();
  std::cout << "[ info ] task with a guarded tree of 5000 files: " << s << " s (program "
            << res.info["program_s"].get<double>() << " s)\n";
}

TEST(ExecCommand, PlaceholdersAreShellQuoted) {
  EXPECT_EQ(runners::expand_command("run {dir} --case={case} {op}/{dtype} {other} {dir",
                                    "/a b/it's", "k1", "matmul", "float16"),
            "run '/a b/it'\\''s' --case='k1' 'matmul'/'float16' {other} {dir");
}

TEST(ExecPrepare, RejectsAnEmptyCommandAndABadTimeout) {
  auto set = *layout::load_layout("torch");
  EXPECT_FALSE(runners::make_exec_runner({"", 10, false, {}}, set)->prepare().is_ok());
  EXPECT_FALSE(runners::make_exec_runner({"true", 0, false, {}}, set)->prepare().is_ok());
  EXPECT_TRUE(runners::make_exec_runner({"true", 10, false, {}}, set)->prepare().is_ok());
}

}  // namespace
}  // namespace validate
