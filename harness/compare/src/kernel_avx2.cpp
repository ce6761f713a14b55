// The metric kernels compiled with -mavx2 (see harness/compare/CMakeLists.txt); used only when the
// CPU reports AVX2. Deliberately no -mfma: contraction would change rounding between machines.
#define VALIDATE_KERNEL_ISA "avx2"
#define VALIDATE_KERNEL_TABLE kernels_avx2
#include "metrics_kernel.inc"
