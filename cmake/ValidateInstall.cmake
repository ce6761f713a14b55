# `cmake --install` exports the LibTorch- and CUDA-free part of the harness as a CMake package:
#   find_package(validate) -> validate::harness (core, layout, cases, metrics, diagnosis, compare, report,
#   testing matchers)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_validate_export_targets validate_warnings)
set(_validate_harness_members)
foreach(mod core ops layout cases metrics diagnosis compare report testing train)
  if(TARGET validate_${mod})
    list(APPEND _validate_export_targets validate_${mod})
    list(APPEND _validate_harness_members validate::${mod})
    set_target_properties(validate_${mod} PROPERTIES EXPORT_NAME ${mod})
    if(EXISTS ${PROJECT_SOURCE_DIR}/harness/${mod}/include)
      install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/${mod}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    endif()
  endif()
endforeach()
# core's rooms keep their headers beside their sources (harness/core/<room>/include).
# The training room's checks are compiled into validate::compare; their headers sit beside them.
if(TARGET validate_compare)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/train/check/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
if(TARGET validate_core)
  foreach(room ${VALIDATE_CORE_ROOMS})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/core/${room}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endforeach()
endif()
# An op's headers sit in its folder (harness/ops/<op>/*.hpp), included as "<op>/params.hpp".
install(DIRECTORY ${PROJECT_SOURCE_DIR}/harness/ops/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*/*.hpp" PATTERN "include" EXCLUDE PATTERN "src" EXCLUDE)
add_library(validate_harness INTERFACE)
add_library(validate::harness ALIAS validate_harness)
set_target_properties(validate_harness PROPERTIES EXPORT_NAME harness)
target_link_libraries(validate_harness INTERFACE ${_validate_harness_members})
list(APPEND _validate_export_targets validate_harness)

install(TARGETS ${_validate_export_targets} EXPORT validateTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT validateTargets NAMESPACE validate:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/validate)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/validateConfig.cmake.in
  ${PROJECT_BINARY_DIR}/validateConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/validate)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/validateConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/validateConfig.cmake ${PROJECT_BINARY_DIR}/validateConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/ValidateRe2.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/validate)
