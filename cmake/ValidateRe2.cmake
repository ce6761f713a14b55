# RE2 (user regexes match in linear time: harness/core pattern.hpp) as the imported target
# PkgConfig::RE2. Debian's libre2-dev ships a pkg-config file and no CMake package; without
# pkg-config (a GPU machine given scripts/prepare-gpu-carry.sh's folder) re2/re2.h and libre2 are
# looked up on CMAKE_PREFIX_PATH. Included by the build and by the installed validateConfig.cmake.
if(NOT TARGET PkgConfig::RE2)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(RE2 QUIET IMPORTED_TARGET GLOBAL re2)
  endif()
endif()
if(NOT TARGET PkgConfig::RE2)
  find_path(VALIDATE_RE2_INCLUDE_DIR re2/re2.h)
  find_library(VALIDATE_RE2_LIBRARY NAMES re2)
  if(NOT VALIDATE_RE2_INCLUDE_DIR OR NOT VALIDATE_RE2_LIBRARY)
    message(FATAL_ERROR "RE2 not found: install libre2-dev (scripts/install-deps.sh)")
  endif()
  add_library(PkgConfig::RE2 UNKNOWN IMPORTED GLOBAL)
  set_target_properties(PkgConfig::RE2 PROPERTIES IMPORTED_LOCATION "${VALIDATE_RE2_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${VALIDATE_RE2_INCLUDE_DIR}")
endif()
