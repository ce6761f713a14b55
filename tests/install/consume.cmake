# cmake -P script behind the install.find_package test (see CMakeLists.txt next to it).
# Every step that fails stops the test with the command's own output.
cmake_minimum_required(VERSION 3.25)
foreach(v BUILD_DIR CONSUMER_DIR WORK_DIR REFERENCE_NPY CXX GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consume.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (exit ${rc}):\n${out}")
  endif()
  message(STATUS "install test: ${what}: ok")
endfunction()

# A prefix whose path the build never saw: the package must not point back into the build tree.
set(prefix "${WORK_DIR}/prefix with space")
file(REMOVE_RECURSE ${WORK_DIR})
step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix "${prefix}" --config ${BUILD_TYPE})
file(GLOB_RECURSE _cfg "${prefix}/*/validateConfig.cmake")
if(NOT _cfg)
  message(FATAL_ERROR "install test: no validateConfig.cmake under ${prefix}")
endif()
file(GLOB_RECURSE _targets "${prefix}/*/validateTargets*.cmake")
foreach(f ${_targets})
  file(READ ${f} text)
  string(FIND "${text}" "${BUILD_DIR}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "install test: ${f} refers to the build tree ${BUILD_DIR}")
  endif()
endforeach()

# The installed binary finds the modules installed beside it (bin/ -> lib/validate), not the build
# tree's: each module the build made must load from the prefix (harness/backends).
get_filename_component(_smoke "${REFERENCE_NPY}" DIRECTORY)
get_filename_component(_smoke "${_smoke}" DIRECTORY)
file(GLOB _built_modules "${BUILD_DIR}/lib/validate/libvalidate_*.so")
foreach(m ${_built_modules})
  get_filename_component(_name "${m}" NAME)
  file(GLOB_RECURSE _installed "${prefix}/*/${_name}")
  if(NOT _installed)
    message(FATAL_ERROR "install test: ${_name} was built but not installed under ${prefix}")
  endif()
endforeach()
if(EXISTS "${BUILD_DIR}/lib/validate/libvalidate_torch.so")
  step("the installed validate loads its torch module" "${prefix}/bin/validate" run --backend torch
       --ref "${_smoke}" --out "${WORK_DIR}/torch_run" --only "^float32/k0072" --progress 0)
endif()

# Libraries built with -fsanitize (VALIDATE_SANITIZE) need the sanitizer runtimes in the consumer.
set(flags)
if(SANITIZE)
  set(flags "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif()
step("configure the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer -G ${GENERATOR} ${flags}
     "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
     -DREFERENCE_NPY=${REFERENCE_NPY})
step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer --config ${BUILD_TYPE})
file(GLOB_RECURSE exe LIST_DIRECTORIES false "${WORK_DIR}/consumer/consumer_tests" "${WORK_DIR}/consumer/consumer_tests.exe")
if(NOT exe)
  message(FATAL_ERROR "install test: the consumer built no consumer_tests executable")
endif()
list(GET exe 0 exe)

step("the passing test" ${exe} --gtest_filter=Consumer.IdenticalResultPasses)

# The failing test must fail, and say why in compare's words.
execute_process(COMMAND ${exe} --gtest_filter=Consumer.SwappedHeightAndWidthFails
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "install test: Consumer.SwappedHeightAndWidthFails passed; it must fail:\n${out}")
endif()
foreach(want
    "Expected: is within 4 ULP of the reference [1, 8, 32, 32]"
    "Actual: float32 [1, 8, 32, 32]"
    "elements beyond tolerance (max_ulp 4); worst at n=0 c="
    "diagnosis: the run equals reference with H and W swapped (its bytes are NCWH)"
    "where you write the tensor under test"
    "[  FAILED  ] Consumer.SwappedHeightAndWidthFails")
  string(FIND "${out}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "install test: the failure text lacks \"${want}\":\n${out}")
  endif()
endforeach()
# A tensor in a test has no file: the advice must not name one (".bin" is the exec protocol's).
string(FIND "${out}" ".bin" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "install test: the failure text names a .bin file for a tensor compared in memory:\n${out}")
endif()
message(STATUS "install test: the failing test failed with compare's worst element and diagnosis")
