// The metric kernels for any CPU (baseline instruction set of the build), 8 lanes.
#define VALIDATE_KERNEL_ISA "generic"
#define VALIDATE_KERNEL_TABLE kernels_generic
#define VALIDATE_KERNEL_WIDTH 8
#include "metrics_kernel.inc"
