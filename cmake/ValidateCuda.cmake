# CUDA toolkit + cuDNN + cuBLAS, found where the toolkit installs them. No GPU is needed to build.

# Enables CUDA in the calling directory (a macro: the settings must land in the caller's scope, and
# CMake wants enable_language in every directory that compiles CUDA): sm_80 (A100) and sm_90
# (H100/H200) unless the user chose (-DCMAKE_CUDA_ARCHITECTURES=...), and the shared runtime, the
# one LibTorch and cuDNN load too, so a process has one CUDA runtime.
macro(validate_enable_cuda)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90")
  endif()
  if(NOT CMAKE_CUDA_RUNTIME_LIBRARY)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  endif()
  enable_language(CUDA)
endmacro()

set(VALIDATE_HAVE_CUDA OFF)
if(NOT VALIDATE_CUDA STREQUAL "OFF")
  if(VALIDATE_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    find_path(VALIDATE_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include /usr/local/cuda/include)
    # The library of the header's own root only (<root>/lib64, lib, lib/<multiarch>): searching
    # the usual folders could pair this cudnn.h with another cuDNN installed elsewhere.
    if(VALIDATE_CUDNN_INCLUDE AND NOT VALIDATE_CUDNN_LIBRARY)
      get_filename_component(_cudnn_root "${VALIDATE_CUDNN_INCLUDE}" DIRECTORY)
      find_library(VALIDATE_CUDNN_LIBRARY cudnn NO_DEFAULT_PATH
                   PATHS ${_cudnn_root}/lib64 ${_cudnn_root}/lib ${_cudnn_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}
                         ${_cudnn_root}/lib/x86_64-linux-gnu)
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CUDAToolkit_FOUND AND VALIDATE_CUDNN_INCLUDE AND VALIDATE_CUDNN_LIBRARY AND CMAKE_CUDA_COMPILER)
    set(VALIDATE_HAVE_CUDA ON)
    message(STATUS "validate: CUDA ${CUDAToolkit_VERSION}, cuDNN ${VALIDATE_CUDNN_INCLUDE} + ${VALIDATE_CUDNN_LIBRARY}")
  elseif(VALIDATE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VALIDATE_CUDA=ON but the CUDA toolkit, nvcc or cuDNN was not found "
                        "(toolkit: ${CUDAToolkit_FOUND}, cudnn.h: ${VALIDATE_CUDNN_INCLUDE}, "
                        "libcudnn: ${VALIDATE_CUDNN_LIBRARY}, nvcc: ${CMAKE_CUDA_COMPILER})")
  else()
    message(STATUS "validate: CUDA/cuDNN not found; the cudnn runner is not built")
  endif()
endif()
