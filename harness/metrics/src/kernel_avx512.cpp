// The metric kernels compiled for AVX-512F (#pragma GCC target, see metrics_kernel.inc), 16 lanes;
// used only when the CPU reports AVX-512F. No -mfma, as for AVX2.
#define VALIDATE_KERNEL_ISA "avx512"
#define VALIDATE_KERNEL_TABLE kernels_avx512
#define VALIDATE_KERNEL_WIDTH 16
#define VALIDATE_KERNEL_TARGET "avx512f"
#include "metrics_kernel.inc"
