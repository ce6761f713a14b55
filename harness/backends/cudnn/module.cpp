// libvalidate_cudnn.so: the cudnn backend with CUDA, cuDNN and cuBLASLt. Loaded by validate on
// first use (harness/backends/include/validate/backends/module.hpp).
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "validate/backends/module.hpp"
#include "validate/backends/registry.hpp"
#include "validate/backends/cudnn_runner.hpp"

namespace validate::backends {
namespace {

Result<std::unique_ptr<runners::Runner>> make_cudnn(const BackendRequest& req) {
  runners::CudnnOptions o;
  if (req.device_given) o.device = req.device;  // else the runner's cuda:0, not run's cpu default
  o.conv_mode = req.value("--conv-mode");
  o.math = req.value("--math");
  // --algo fills only the directions whose own option was not given: --algo-fwd FFT must not
  // force FFT (or a forward-only name) onto the backward passes.
  const std::string& every = req.value("--algo");
  o.algo_fwd = req.given.count("--algo-fwd") ? req.value("--algo-fwd") : every;
  o.algo_bwd_data = req.given.count("--algo-bwd-data") ? req.value("--algo-bwd-data") : every;
  o.algo_bwd_filter = req.given.count("--algo-bwd-filter") ? req.value("--algo-bwd-filter") : every;
  const std::string& rep = req.value("--repeat");
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(rep.c_str(), &end, 10);
  if (rep.empty() || *end != '\0' || errno == ERANGE || n < INT_MIN || n > INT_MAX)
    return Error{"--repeat '" + rep + "' is not an integer"};
  o.repeat = static_cast<int>(n);  // < 1 is refused by make_cudnn_runner
  return runners::make_cudnn_runner(o, *req.layouts);
}

void provide(ModuleHost& host) { (void)host.backends->provide("cudnn", make_cudnn); }

}  // namespace
}  // namespace validate::backends

VALIDATE_DEFINE_MODULE("cudnn", ::validate::backends::provide)
