// The exec runner's guard: a program that writes outside its work directory (the reference set,
// the run's results, another case's work directory) fails that task only, with every file named.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/backends/exec_runner.hpp"

namespace validate {
namespace {

using runners::RunOutcome;
using testing::Exec;
using testing::kWriteLoss;
using testing::make_inputs;
using testing::make_task;
using testing::matmul_case;
namespace stdfs = std::filesystem;

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

}  // namespace
}  // namespace validate
