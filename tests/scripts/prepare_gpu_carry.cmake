# cmake -DSOURCE_DIR=<repo> -DWORK=<scratch> -P prepare_gpu_carry.cmake
# Runs scripts/prepare-gpu-carry.sh into WORK/carry, then configures and builds
# tests/scripts/carry_consumer against it exactly as scripts/gpu-acceptance.sh points CMake at it
# (CMAKE_PREFIX_PATH=carry/prefix, CMAKE_FIND_PACKAGE_PREFER_CONFIG=ON, OpenSSL headers from the
# carry), and runs the result.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(carry ${WORK}/carry)
execute_process(COMMAND ${SOURCE_DIR}/scripts/prepare-gpu-carry.sh ${carry} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "prepare-gpu-carry.sh failed (${rc})")
endif()
file(GLOB_RECURSE crypto ${carry}/openssl/lib/libcrypto.so.3)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/scripts/carry_consumer -B ${WORK}/build
                        -DCARRY=${carry} -DCMAKE_PREFIX_PATH=${carry}/prefix -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON
                        -DOPENSSL_INCLUDE_DIR=${carry}/openssl/include -DOPENSSL_CRYPTO_LIBRARY=${crypto}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring against the carry failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building against the carry failed (${rc})")
endif()
execute_process(COMMAND ${WORK}/build/consumer --word carry OUTPUT_VARIABLE out RESULT_VARIABLE rc)
# sha256("carry") starts with byte 0x5a? whatever it is, it must be OpenSSL's: compare with cmake's own.
string(SHA256 want "carry")
string(SUBSTRING "${want}" 0 2 want_byte)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\\{\"sha256_bytes\":32,\"word\":\"carry\"\\} ${want_byte}")
  message(FATAL_ERROR "consumer printed '${out}' (exit ${rc}), expected the json and byte ${want_byte}")
endif()
file(REMOVE_RECURSE ${WORK})
message(STATUS "prepare-gpu-carry: the carry configures and builds a consumer of every package")
