#pragma once
// The base of the exec runner tests (test_exec_*.cpp, test_exec_train.cpp): /bin/sh "programs" and
// layout files written into a temp dir, runners prepared from them, and byte-exact comparisons;
// `Exec`, the fixture of test_exec_*.cpp, runs one task at a time through such a runner.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "common/temp_dir.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/tensor.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/exec_runner.hpp"

namespace validate::testing {

class ExecFixture : public ::testing::Test {
 protected:
  explicit ExecFixture(const std::string& name) : tmp{name} {}
  TempDir tmp;

  // A program: a shell script in the temp dir, run as `sh SCRIPT {dir} {case} {op} {dtype}`.
  std::string program(const std::string& name, const std::string& body) {
    const std::string path = tmp / (name + ".sh");
    EXPECT_TRUE(fs::write_atomic(path, "set -e\n" + body + "\n"));
    return "sh " + path + " {dir} {case} {op} {dtype}";
  }
  layout::LayoutSet layout_file(const std::string& name, const std::string& json) {
    const std::string path = tmp / name;
    EXPECT_TRUE(fs::write_atomic(path, json));
    auto s = layout::load_layout(path);
    EXPECT_TRUE(s.is_ok()) << (s ? "" : s.message());
    return s ? *s : layout::LayoutSet{};
  }
  static std::unique_ptr<runners::Runner> prepared(const runners::ExecOptions& o, const layout::LayoutSet& set) {
    auto r = runners::make_exec_runner(o, set);
    EXPECT_TRUE(r->prepare().is_ok());
    return r;
  }
  static void expect_same_values(const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
    EXPECT_EQ(std::memcmp(got.bytes(), want.bytes(), got.nbytes()), 0) << what;
  }
  static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
};

// One runner for all tasks of a test, so a failure must not disturb the next task.
class Exec : public ExecFixture {
 protected:
  Exec() : ExecFixture("exec") {}
  std::unique_ptr<runners::Runner> runner(const std::string& cmd, const layout::LayoutSet& set,
                                          double timeout = 30, bool keep = false) {
    return prepared({cmd, timeout, keep, {}}, set);
  }
  runners::OpResult run(runners::Runner& r, const cases::Case& c, cases::Op op,
                        const Inputs& in, const std::string& dir) {
    auto v = r.run(make_task(c, op, in, dir));
    EXPECT_EQ(v.size(), 1u);
    return std::move(v[0]);
  }
};

// 1.5f, little-endian, written with printf's octal escapes.
inline constexpr const char* kWriteLoss = R"(printf '\000\000\300\077' > "$1/loss.bin")";

}  // namespace validate::testing
