#include "validate/core/blas_info.hpp"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <thread>

namespace validate {

namespace {

template <class F>
F find_symbol(const char* name) {
  // RTLD_DEFAULT: the definition the process actually binds to (first in load order).
  return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace

// Resolved path of the loaded object that defines `symbol`; "" when none does.
static std::string defining_object(const char* symbol) {
  void* p = ::dlsym(RTLD_DEFAULT, symbol);
  Dl_info di{};
  if (!p || !::dladdr(p, &di) || !di.dli_fname) return "";
  char buf[PATH_MAX];
  return ::realpath(di.dli_fname, buf) ? std::string(buf) : std::string(di.dli_fname);
}

Json blas_info() {
  Json j = Json::object();
  const std::string blas = defining_object("sgemm_");
  // Debian's OpenBLAS libblas.so.3 is a wrapper that depends on libopenblas.so.0, and OpenBLAS may
  // also be loaded as the LAPACK alternative while libblas.so.3 is the reference BLAS: so ask the
  // object that defines sgemm_ (and its dependencies, which dlsym on its handle searches).
  void* handle = blas.empty() ? nullptr : ::dlopen(blas.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  auto in_blas = [&](const char* sym) { return handle ? ::dlsym(handle, sym) : nullptr; };
  const bool is_openblas = in_blas("openblas_get_config") != nullptr;
  if (!blas.empty()) {
    j["library"] = blas;
    if (is_openblas) j["name"] = "OpenBLAS";
    else if (blas.find("/blas/") != std::string::npos) j["name"] = "reference BLAS";
    else if (blas.find("mkl") != std::string::npos) j["name"] = "MKL";
    else if (blas.find("blis") != std::string::npos) j["name"] = "BLIS";
    else j["name"] = blas.substr(blas.find_last_of('/') + 1);
  } else {
    j["library"] = nullptr;  // no BLAS in this process (a build without LibTorch)
  }
  const std::string lapack = defining_object("dgetrf_");
  if (!lapack.empty()) j["lapack_library"] = lapack;
  if (is_openblas) {
    if (auto cfg = reinterpret_cast<char* (*)()>(in_blas("openblas_get_config"))) j["openblas_config"] = std::string(cfg());
    if (auto n = reinterpret_cast<int (*)()>(in_blas("openblas_get_num_threads"))) j["openblas_threads"] = n();
    if (auto par = reinterpret_cast<int (*)()>(in_blas("openblas_get_parallel"))) {
      const int v = par();
      j["openblas_parallel"] = v == 0 ? "sequential" : v == 1 ? "pthreads" : v == 2 ? "openmp" : std::to_string(v);
    }
  }
  if (handle) ::dlclose(handle);
  if (auto omp = find_symbol<int (*)()>("omp_get_max_threads")) j["omp_max_threads"] = omp();
  return j;
}

ThreadChoice choose_threads(int requested) {
  if (requested > 0) return {requested, "--threads"};
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0 && v <= 4096) return {static_cast<int>(v), "OMP_NUM_THREADS"};
  }
  return {static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), "all hardware threads"};
}

}  // namespace validate
