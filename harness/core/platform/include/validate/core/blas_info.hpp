#pragma once
// Which BLAS and how many threads are actually in force in this process, for system_info.json.
// References made with the reference BLAS and with OpenBLAS differ by tens of ULP (different
// summation orders), so a set must say which one computed it. Found from the loaded objects, not
// from the package database: libblas.so.3 is an alternatives symlink, and LD_LIBRARY_PATH or a
// manual alternative can make the library in the process differ from what dpkg would say.
#include "validate/core/json_io.hpp"

namespace validate {

// {"library": resolved path of the object that defines sgemm_, "name": "OpenBLAS" | "reference BLAS"
//  | file name, "openblas_config", "openblas_threads", "openblas_parallel": "sequential"|"pthreads"|
//  "openmp" (OpenBLAS only)} plus "omp_max_threads" when an OpenMP runtime is loaded. Keys that
// cannot be found are left out; nothing here loads a library.
Json blas_info();

// The thread count a command uses: `requested` when > 0, else a valid OMP_NUM_THREADS (the user's
// environment wins over our default), else every hardware thread. `source` names which.
struct ThreadChoice {
  int threads = 1;
  const char* source = "all hardware threads";
};
ThreadChoice choose_threads(int requested);

}  // namespace validate
