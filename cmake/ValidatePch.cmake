# Precompiled headers. Most translation units here spend more time in the same few headers
# ({fmt}, nlohmann::json, the standard library, GoogleTest, LibTorch) than in their own code; with
# two cores, CI builds the project twice (Release and ASan+UBSan) and the build is the larger part
# of its time. Each C++ target gets one precompiled header of the headers it can see, built with
# that target's own flags (GCC refuses a precompiled header made with other ones).
# -DVALIDATE_PCH=OFF builds without them (a header that forgot an include then fails to compile,
# which a precompiled header would hide: the fuzz build, scripts/fuzz.sh, builds without).
option(VALIDATE_PCH "Precompile the common headers of every C++ target" ON)

set(VALIDATE_PCH_COMMON
  <algorithm> <array> <cmath> <cstdint> <cstring> <filesystem> <functional> <map> <memory>
  <optional> <set> <sstream> <string> <unordered_map> <utility> <variant> <vector>
  <fmt/format.h> <nlohmann/json.hpp>)

# _validate_pch_share_key(TARGET HEADERS LIBS OUT): a key that targets compiled with the same flags
# share, or "" for a target that keeps a header of its own. Each precompiled header costs 4-8
# CPU-seconds to build; the test executables (the same headers, options and definitions) and most
# libraries can each share one, which the compiler accepts only when the flags match: so a target
# that links LibTorch (whose definitions come with the link) keeps its own, and the key holds what
# else sets the flags (target type, position-independent code, definitions, options).
function(_validate_pch_share_key t headers libs out)
  get_target_property(_defs ${t} COMPILE_DEFINITIONS)
  get_target_property(_pic ${t} POSITION_INDEPENDENT_CODE)
  get_target_property(_type ${t} TYPE)
  if(libs MATCHES "torch")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  get_target_property(_opts ${t} COMPILE_OPTIONS)
  get_target_property(_std ${t} CXX_STANDARD)
  string(MD5 _key "${_type}|${_pic}|${headers}|${_defs}|${_opts}|${_std}")
  set(${out} ${_key} PARENT_SCOPE)
endfunction()

# validate_precompile_headers(DIR): every C++ library and executable defined in DIR and below.
function(validate_precompile_headers dir)
  if(NOT VALIDATE_PCH)
    return()
  endif()
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(_t ${_targets})
    get_target_property(_type ${_t} TYPE)
    if(NOT _type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(_sources ${_t} SOURCES)
    set(_cxx 0)
    foreach(_s ${_sources})
      if(_s MATCHES "\\.(cpp|cc|cxx)$")
        math(EXPR _cxx "${_cxx} + 1")
      endif()
    endforeach()
    if(_cxx LESS 1)
      continue()
    endif()
    # validate_generate_torch takes validate_ops_torch's, below.
    if(_t STREQUAL "validate_generate_torch" AND TARGET validate_ops_torch)
      continue()
    endif()
    set(_headers ${VALIDATE_PCH_COMMON})
    # LibTorch's <torch/torch.h> is about 375k lines: parsed once for the ops' three LibTorch
    # forwards and the generator's driver together instead of once each.
    if(_t STREQUAL "validate_ops_torch")
      list(APPEND _headers <torch/torch.h>)
    endif()
    get_target_property(_libs ${_t} LINK_LIBRARIES)
    if(_libs MATCHES "GTest::")
      list(APPEND _headers <gtest/gtest.h>)
    endif()
    # CLI11 is header-only and about half of each `validate` command file's compile time.
    if(_libs MATCHES "CLI11::")
      list(APPEND _headers <CLI/CLI.hpp>)
    endif()
    # C++ sources only (a target may hold C, CUDA or Fortran ones too); the closing '>' of each
    # header name is written $<ANGLE-R> inside the generator expression.
    set(_pch "")
    foreach(_h ${_headers})
      string(REPLACE ">" "$<ANGLE-R>" _h "${_h}")
      list(APPEND _pch "$<$<COMPILE_LANGUAGE:CXX>:${_h}>")
    endforeach()
    _validate_pch_share_key(${_t} "${_headers}" "${_libs}" _key)
    get_property(_donor GLOBAL PROPERTY "VALIDATE_PCH_DONOR_${_key}")
    if(_key AND _donor)
      target_precompile_headers(${_t} REUSE_FROM ${_donor})
    elseif(_cxx GREATER_EQUAL 2)  # one source gains nothing from a header precompiled for it alone
      target_precompile_headers(${_t} PRIVATE ${_pch})
      if(_key)
        set_property(GLOBAL PROPERTY "VALIDATE_PCH_DONOR_${_key}" ${_t})
      endif()
    endif()
  endforeach()
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_d ${_subdirs})
    validate_precompile_headers(${_d})
  endforeach()
  # Both are built with the same flags and LibTorch's definitions, so the compiler accepts one's
  # precompiled header in the other.
  if(dir STREQUAL PROJECT_SOURCE_DIR AND TARGET validate_ops_torch AND TARGET validate_generate_torch)
    target_precompile_headers(validate_generate_torch REUSE_FROM validate_ops_torch)
  endif()
endfunction()
