// --backend torch: LibTorch on another device. Its factory lives in libvalidate_torch.so
// (module.cpp), which also carries `validate generate`: nothing of LibTorch is in the binary.
#include "validate/backends/registry.hpp"

namespace validate::backends {

Backend backend_torch() {
  Backend b;
  b.name = "torch";
  b.description = "LibTorch on --device cpu|cuda[:N] (uses --threads, --allow-tf32)";
  b.module = "torch";
  b.build_hint = "configure with LibTorch (VALIDATE_TORCH=ON; scripts/install-deps.sh installs it)";
  return b;
}

}  // namespace validate::backends
