# LibTorch, from the first of: -DTorch_DIR; the torch of -DVALIDATE_TORCH_PYTHON=<python>;
# the venv scripts/install-torch.sh makes in this repository (.deps/torch-2.11: PyPI's torch
# 2.11.0+cu130, the build every script and the GPU bundle use); python3's torch. Debian's
# libtorch-dev (1.13, CPU only) is not used: a build against it cannot run on a GPU.
set(VALIDATE_HAVE_TORCH OFF)
set(VALIDATE_TORCH_PYTHON "" CACHE FILEPATH "python whose torch provides LibTorch (empty: .deps/torch-2.11's, else python3's)")
if(NOT VALIDATE_TORCH_PYTHON AND DEFINED ENV{VALIDATE_TORCH_PYTHON})
  set(VALIDATE_TORCH_PYTHON "$ENV{VALIDATE_TORCH_PYTHON}" CACHE FILEPATH "" FORCE)
endif()
if(NOT VALIDATE_TORCH_PYTHON AND EXISTS "${PROJECT_SOURCE_DIR}/.deps/torch-2.11/bin/python")
  set(VALIDATE_TORCH_PYTHON "${PROJECT_SOURCE_DIR}/.deps/torch-2.11/bin/python" CACHE FILEPATH "" FORCE)
endif()
if(NOT VALIDATE_TORCH STREQUAL "OFF")
  if(NOT Torch_DIR)
    # python's torch ships its CMake package; ask it where, if it is there.
    if(VALIDATE_TORCH_PYTHON)
      set(_torch_python ${VALIDATE_TORCH_PYTHON})
    else()
      find_package(Python3 COMPONENTS Interpreter QUIET)
      set(_torch_python ${Python3_EXECUTABLE})
    endif()
    if(_torch_python)
      execute_process(COMMAND ${_torch_python} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                      OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                      RESULT_VARIABLE _torch_rc)
      if(_torch_rc EQUAL 0 AND _torch_prefix)
        # Fail here, with the reason, rather than deep inside find_package(Torch) (ValidateTorchGuard).
        include(ValidateTorchGuard)
        find_package(CUDAToolkit QUIET)
        validate_torch_guard(${_torch_python} "${CUDAToolkit_VERSION}" _torch_error _torch_desc)
        if(_torch_error AND VALIDATE_TORCH STREQUAL "ON")
          message(FATAL_ERROR "validate: ${_torch_error}")
        elseif(_torch_error)
          # AUTO: leave python's torch out (another LibTorch, or none, may still be found).
          message(WARNING "validate: not using python's torch: ${_torch_error}")
        else()
          message(STATUS "validate: python's ${_torch_desc} at ${_torch_prefix}")
          list(APPEND CMAKE_PREFIX_PATH ${_torch_prefix})
          # TorchConfig finds libtorch.so and libc10.so with find_library, which searches the
          # system's folders before torch's own: with Debian's libtorch-dev installed it would
          # take 1.13's (the link line then held both c10s). Name the wheel's first.
          get_filename_component(_torch_libdir "${_torch_prefix}/../../lib" ABSOLUTE)
          foreach(_lib torch c10)
            set(_var ${_lib}_LIBRARY)
            if(_lib STREQUAL "torch")
              set(_var TORCH_LIBRARY)
            endif()
            if(EXISTS "${_torch_libdir}/lib${_lib}.so")
              set(${_var} "${_torch_libdir}/lib${_lib}.so" CACHE FILEPATH "LibTorch's lib${_lib}.so")
            endif()
          endforeach()
        endif()
      elseif(VALIDATE_TORCH_PYTHON)
        message(FATAL_ERROR "validate: VALIDATE_TORCH_PYTHON=${VALIDATE_TORCH_PYTHON} has no torch (run scripts/install-torch.sh)")
      endif()
    endif()
  endif()
  # A CUDA LibTorch 2.x (its Caffe2/public/cuda.cmake) sets CMAKE_CUDA_ARCHITECTURES to OFF and
  # appends -gencode flags for TORCH_CUDA_ARCH_LIST to CMAKE_CUDA_FLAGS, by default for a list that
  # starts at compute_50, which CUDA 13's nvcc no longer accepts. Give it the architectures the
  # project's own kernels are built for (ValidateCuda.cmake: sm_80, sm_90) and put the caller's
  # CMAKE_CUDA_ARCHITECTURES back afterwards.
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  # Enabling CUDA inside find_package(Torch) also stores CMake's own default (the compiler's, sm_75)
  # in the cache, which the next configure would take for the caller's choice: the project's
  # kernels then changed architecture, and every CUDA target was rebuilt, on each reconfigure
  # (scripts/test.sh right after scripts/build.sh). That default is remembered and set aside.
  set(_validate_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
  if(DEFINED VALIDATE_CUDA_ARCHS_DEFAULT AND _validate_cuda_archs STREQUAL VALIDATE_CUDA_ARCHS_DEFAULT)
    set(_validate_cuda_archs "")
  endif()
  set(_validate_cuda_archs_cached OFF)
  if(DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES})
    set(_validate_cuda_archs_cached ON)
  endif()
  # Debian's TorchConfig pulls Caffe2 which probes for CUDA; keep it off unless asked.
  if(VALIDATE_TORCH STREQUAL "ON")
    find_package(Torch REQUIRED)
  else()
    find_package(Torch QUIET)
  endif()
  if(NOT _validate_cuda_archs_cached AND DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES})
    set(VALIDATE_CUDA_ARCHS_DEFAULT "$CACHE{CMAKE_CUDA_ARCHITECTURES}" CACHE INTERNAL
        "CMake's default CUDA architectures, stored while LibTorch enabled CUDA: not the user's choice")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_validate_cuda_archs}")
  if(Torch_FOUND)
    set(VALIDATE_HAVE_TORCH ON)
    add_library(validate_torch_deps INTERFACE)
    target_link_libraries(validate_torch_deps INTERFACE ${TORCH_LIBRARIES})
    target_include_directories(validate_torch_deps SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
    # PyPI's LibTorch (a torch wheel; not Debian's, whose headers sit in /usr/include beside the
    # system's {fmt}) needs two link-time adjustments. Recognised by the {fmt} it carries in its own
    # include folder; decided on every configure (Torch_DIR is cached, so the python branch above
    # runs only on the first).
    set(_torch_wheel OFF)
    foreach(_dir ${TORCH_INCLUDE_DIRS})
      if(EXISTS ${_dir}/fmt/format-inl.h AND NOT _dir MATCHES "^/usr(/local)?/include/?$")
        set(_torch_wheel ON)
      endif()
    endforeach()
    if(_torch_wheel)
      # It ships {fmt} 12 in its include folder, found before the system's (an -isystem folder is
      # searched before /usr/include): a target with LibTorch's includes would compile against
      # fmt 12 and link the system's libfmt (9 on Debian 12): undefined fmt::v12::vformat. Those
      # targets use {fmt} header-only, so whichever headers they see are complete; the rest of the
      # project keeps the system's libfmt (another inline namespace, no clash).
      target_compile_definitions(validate_torch_deps INTERFACE FMT_HEADER_ONLY=1)
      # It is built with a newer GCC than the system's and carries (and exports) the parts of
      # libstdc++ that GCC added, std::filesystem among them. An executable that lists
      # libtorch.so before libstdc++.so.6 binds its own std::filesystem::remove_all to LibTorch's
      # copy, which jumps to a null pointer; so libstdc++ goes first in the link line of whatever
      # links LibTorch (the modules are unaffected: the binary's libstdc++ is already global).
      # Debian's LibTorch needs neither, and an ASan build needs its runtime, not libstdc++, first.
      target_link_options(validate_torch_deps INTERFACE "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")
      # Installed, the torch module must still find the wheel's libraries (torch/lib, with
      # libtorch_cuda.so; rarely on the loader's path). INSTALL_RPATH_USE_LINK_PATH leaves out the
      # folders of imported targets, so harness/backends/torch adds this one to its install run path.
      set(VALIDATE_TORCH_WHEEL_LIBDIR "${TORCH_INSTALL_PREFIX}/lib")
    endif()
    message(STATUS "validate: LibTorch ${Torch_VERSION} found")
  else()
    message(STATUS "validate: LibTorch not found; generate and the torch runner are not built")
  endif()
endif()
