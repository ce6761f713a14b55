// The metric kernels compiled for AVX2 (#pragma GCC target, see metrics_kernel.inc), 8 lanes; used
// only when the CPU reports AVX2. Deliberately no -mfma: contraction would change rounding between
// machines.
#define VALIDATE_KERNEL_ISA "avx2"
#define VALIDATE_KERNEL_TABLE kernels_avx2
#define VALIDATE_KERNEL_WIDTH 8
#define VALIDATE_KERNEL_TARGET "avx2"
#include "metrics_kernel.inc"
