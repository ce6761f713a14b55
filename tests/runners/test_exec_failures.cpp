// The exec runner against programs that fail in every way the protocol names (exit status, signal,
// wrong or missing files, timeout, processes left behind) or answer "not supported": each failure
// is named, and the next task through the same runner still passes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/layout/preset.hpp"

namespace validate {
namespace {

using runners::RunOutcome;
using testing::Exec;
using testing::kWriteLoss;
using testing::make_inputs;
using testing::matmul_case;
namespace stdfs = std::filesystem;

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
  // Gone, or a zombie nobody has reaped yet: either way it no longer runs. Up to 10 s: a loaded
  // machine (CI runs the sanitizer build beside this one) may be slow to deliver the kill.
  for (int i = 0; i < 1000; ++i) {
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
  EXPECT_LT(s, 20.0);  // cut at 1 s, not at the program's 30 s (with room for a loaded machine)
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
  // Not waiting for the background child's 30 s (with room for a loaded machine).
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  EXPECT_TRUE(process_gone(std::atoi(slurp(tmp / "w/bg/child.pid").c_str())));
  // keep_work=false: tensors gone, case.json and the logs kept.
  for (const char* f : {"A.bin", "B.bin", "target.bin", "output.bin", "loss.bin"})
    EXPECT_FALSE(stdfs::exists(tmp / ("w/bg/" + std::string(f)))) << f;
  for (const char* f : {"case.json", "stdout.log", "stderr.log"})
    EXPECT_TRUE(stdfs::exists(tmp / ("w/bg/" + std::string(f)))) << f;
}

}  // namespace
}  // namespace validate
