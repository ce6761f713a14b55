// Shared setup of the trajectory tests: comparing a reference and a run set, the dW layouts a
// stack may hold, and the test fixture with its temporary directory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../../common/temp_dir.hpp"
#include "trajectory_fixture.hpp"
#include "validate/compare/compare.hpp"
#include "validate/train/trajectory_check.hpp"
#include "validate/train/trajectory_gate.hpp"

using namespace validate;
using namespace validate::testing;

namespace {

struct Sets {
  compare::Report report;
  const compare::Entry* find(const std::string& tensor) const {
    for (const auto& e : report.entries)
      if (e.tensor == tensor) return &e;
    return nullptr;
  }
};

inline Sets compare_sets(const std::string& ref, const std::string& run, bool require_all = false,
                  const std::vector<std::string>& gates = {}) {
  compare::CompareOptions o;
  o.ref_dir = ref;
  o.run_dir = run;
  o.threads = 1;
  o.require_all = require_all;
  for (const auto& g : gates) EXPECT_TRUE(o.policy.add_gate(g)) << g;
  auto r = compare::compare_sets(o);
  EXPECT_TRUE(r) << r.message();
  return Sets{std::move(*r)};
}

// The permutations of OIHW whose bytes a stack may hold dW in.
const std::vector<std::pair<std::string, std::vector<int>>> kLayouts = {
    {"OHWI", {0, 2, 3, 1}}, {"HWIO", {2, 3, 1, 0}}, {"IOHW", {1, 0, 2, 3}}};

}  // namespace

// Outside the unnamed namespace: gtest requires one fixture class per suite across all files.
class Trajectory : public ::testing::Test {
 protected:
  TempDir tmp{"trajectory"};
};



