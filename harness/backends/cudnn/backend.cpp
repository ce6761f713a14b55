// --backend cudnn: cuDNN convolutions and cuBLASLt matmuls (the rest of this folder). Its factory
// lives in libvalidate_cudnn.so (module.cpp): nothing of CUDA is in the binary.
#include "validate/backends/registry.hpp"

namespace validate::backends {

Backend backend_cudnn() {
  Backend b;
  b.name = "cudnn";
  b.description =
      "cuDNN convolutions and cuBLASLt matmuls on --device cuda[:N], fed in the layouts under test";
  b.module = "cudnn";
  b.build_hint = "configure with the CUDA toolkit and cuDNN (VALIDATE_CUDA=ON)";
  b.options = {
      {"--conv-mode",
       "auto (the mode the layout's conv2d weight declares: +flip=HW is conv) | xcorr | conv "
       "(CUDNN_CONVOLUTION); a mode that contradicts the weight layout is refused",
       "auto", false},
      {"--math", "fma (IEEE float32, no TF32) | tf32 | default", "fma", false},
      {"--algo", "auto | all | NAME for every direction not named by --algo-*", "auto", false},
      {"--algo-fwd", "Forward algorithm", "", false},
      {"--algo-bwd-data", "Backward-data algorithm", "", false},
      {"--algo-bwd-filter", "Backward-filter algorithm", "", false},
      {"--repeat", "Rerun N times and flag bitwise nondeterminism", "1", false, "INT"},
  };
  return b;
}

}  // namespace validate::backends
