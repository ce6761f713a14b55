// The backend registry (harness/backends): what `validate run --backend` can choose from, and the
// rules that keep one command line for every backend unambiguous.
#include <gtest/gtest.h>

#include "validate/backends/module.hpp"
#include "validate/backends/registry.hpp"

namespace vb = validate::backends;

TEST(BackendRegistry, ListsEveryBackendOfTheProjectInRegistrationOrder) {
  // Module backends are listed whether or not their module was built: --help shows them, and
  // choosing one without its module is an explicit error (backends.module_errors).
  EXPECT_EQ(vb::registry().names(), (std::vector<std::string>{"oracle", "exec", "torch", "cudnn"}));
  EXPECT_EQ(vb::registry().find("torch")->module, "torch");
  EXPECT_EQ(vb::registry().find("cudnn")->module, "cudnn");
  EXPECT_TRUE(vb::registry().find("oracle")->module.empty());
  EXPECT_NE(vb::registry().find("oracle")->make, nullptr);
  EXPECT_EQ(vb::registry().find("nosuch"), nullptr);
}

TEST(BackendRegistry, RefusesADuplicateNameAndAnOptionTwoBackendsWouldShare) {
  vb::BackendRegistry r;
  ASSERT_TRUE(r.add({"a", "first", "", "", {{"--x", "", "", false}}, nullptr}));
  auto dup = r.add({"a", "again", "", "", {}, nullptr});
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.message().find("'a' is registered twice"), std::string::npos) << dup.message();
  auto clash = r.add({"b", "", "", "", {{"--y", "", "", false}, {"--x", "", "", false}}, nullptr});
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.message().find("option --x is already an option of backend 'a'"),
            std::string::npos)
      << clash.message();
  EXPECT_EQ(r.names(), std::vector<std::string>{"a"});
  auto stray = r.provide("c", nullptr);
  ASSERT_FALSE(stray);
  EXPECT_NE(stray.message().find("'c', which validate does not declare"), std::string::npos);
}

TEST(BackendRegistry, UnknownBackendNamesTheKnownOnes) {
  vb::BackendRequest req;
  auto layouts = validate::layout::load_layout("torch");
  ASSERT_TRUE(layouts);
  req.layouts = &*layouts;
  auto r = vb::make_runner("nosuch", req);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("no such backend (this build knows: oracle, exec, torch, cudnn)"),
            std::string::npos)
      << r.message();
  auto oracle = vb::make_runner("oracle", req);
  ASSERT_TRUE(oracle) << oracle.message();
  EXPECT_EQ((*oracle)->name(), "oracle");
}

TEST(BackendRegistry, ExecChecksItsOwnOptions) {
  vb::BackendRequest req;
  auto layouts = validate::layout::load_layout("torch");
  ASSERT_TRUE(layouts);
  req.layouts = &*layouts;
  req.values = {{"--cmd", ""}, {"--timeout", "600"}, {"--keep-work", "0"}};
  auto no_cmd = vb::make_runner("exec", req);
  ASSERT_FALSE(no_cmd);
  EXPECT_NE(no_cmd.message().find("--backend exec needs --cmd"), std::string::npos)
      << no_cmd.message();
  req.values["--cmd"] = "true";
  req.values["--timeout"] = "12s";
  auto bad_timeout = vb::make_runner("exec", req);
  ASSERT_FALSE(bad_timeout);
  EXPECT_NE(bad_timeout.message().find("--timeout '12s' is not a number of seconds"),
            std::string::npos);
}

TEST(ModuleEntry, CompilerIdNamesTheStandardLibraryAbi) {
  // The id must change with the C++11 string ABI: std::string crosses the module boundary.
  EXPECT_NE(std::string(vb::kCompilerId).find("cxx11abi="), std::string::npos);
}
