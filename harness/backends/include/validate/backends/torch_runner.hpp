#pragma once
// `--backend torch`: LibTorch on another device (cpu, cuda[:N]) for cross-device runs. LibTorch
// computes in canonical layout, so the layout option is recorded but changes nothing.
#include <memory>
#include <string>

#include "validate/backends/runner.hpp"

namespace validate::runners {

struct TorchOptions {
  std::string device = "cpu";
  bool allow_tf32 = false;
  int threads = 0;  // LibTorch/BLAS threads; 0: OMP_NUM_THREADS, else every core
};

// Error when LibTorch is not part of this build.
Result<std::unique_ptr<Runner>> make_torch_runner(const TorchOptions& opt);

}  // namespace validate::runners
