// The metric kernels for any CPU (baseline instruction set of the build).
#define VALIDATE_KERNEL_ISA "generic"
#define VALIDATE_KERNEL_TABLE kernels_generic
#include "metrics_kernel.inc"
