# The LibTorch 2.x guard: a CUDA build of python's torch is only usable here when it is 2.8 or
# newer and built for the CUDA major version of the toolkit that compiles the rest. Older torch
# CMake files look for CUDA::nvToolsExt, which CUDA 13 no longer ships, and a torch built for
# another CUDA major links a second CUDA runtime into the process; both fail late, deep inside
# find_package(Torch) or at run time. This says so before find_package(Torch) is called.
# A CPU-only torch (Debian's libtorch 1.13, or a CPU wheel) is not guarded: it needs no toolkit.
#
# validate_torch_guard(<python> <toolkit-version or ""> <out-error> <out-description>)
#   out-error: "" when the torch found is fine (or there is none), else the message to stop with.
#   out-description: "torch 2.11.0+cu130 (CUDA 13.0)" or "" when python has no torch.
# tests/scripts/torch_guard.cmake drives it with fake python executables.
function(validate_torch_guard python toolkit_version out_error out_desc)
  set(${out_error} "" PARENT_SCOPE)
  set(${out_desc} "" PARENT_SCOPE)
  execute_process(COMMAND ${python} -c "import torch; print(torch.__version__); print(torch.version.cuda or '')"
                  OUTPUT_VARIABLE _out ERROR_QUIET RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0 OR _out STREQUAL "")
    return()  # no torch in this python: nothing to guard
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  list(LENGTH _lines _n)
  list(GET _lines 0 _torch)
  set(_cuda "")
  if(_n GREATER 1)
    list(GET _lines 1 _cuda)
  endif()
  string(STRIP "${_torch}" _torch)
  string(STRIP "${_cuda}" _cuda)
  if(_cuda STREQUAL "")
    set(${out_desc} "torch ${_torch} (CPU only)" PARENT_SCOPE)
    return()
  endif()
  set(${out_desc} "torch ${_torch} (CUDA ${_cuda})" PARENT_SCOPE)
  # "2.11.0+cu130" -> 2.11.0; "2.8.0a0+git1234" -> 2.8.0
  string(REGEX MATCH "^[0-9]+\\.[0-9]+(\\.[0-9]+)?" _torch_num "${_torch}")
  set(_fix "use python's torch 2.8 or newer built for the toolkit's CUDA major (e.g. torch 2.11.0+cu130 with CUDA 13), point -DTorch_DIR at a matching LibTorch, or configure with -DVALIDATE_TORCH=OFF")
  if(_torch_num STREQUAL "" OR _torch_num VERSION_LESS 2.8)
    set(${out_error} "python's torch ${_torch} (CUDA ${_cuda}, from ${python}) is older than 2.8: its CMake files look for CUDA::nvToolsExt, which CUDA 13 does not ship, and the LibTorch 2.x build of validate needs 2.8 or newer; ${_fix}" PARENT_SCOPE)
    return()
  endif()
  if(NOT toolkit_version STREQUAL "")
    string(REGEX MATCH "^[0-9]+" _torch_major "${_cuda}")
    string(REGEX MATCH "^[0-9]+" _toolkit_major "${toolkit_version}")
    if(NOT _torch_major STREQUAL _toolkit_major)
      set(${out_error} "python's torch ${_torch} (from ${python}) was built for CUDA ${_cuda}, but the CUDA toolkit here is ${toolkit_version}: one process would load two CUDA runtimes of different major versions; ${_fix}" PARENT_SCOPE)
    endif()
  endif()
endfunction()
