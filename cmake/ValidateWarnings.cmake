# Warnings for our own targets only (LibTorch headers are included as SYSTEM).
add_library(validate_warnings INTERFACE)
target_compile_options(validate_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${VALIDATE_WERROR}>>:-Werror>)
if(VALIDATE_SANITIZE)
  # Each language's own compiler instruments it and links its own runtime: with clang for C and
  # C++ (the sanitizer build of scripts/test-sanitized.sh), gfortran still builds and links the
  # Fortran example, a program of its own, against GCC's runtime.
  set(_validate_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX,Fortran>:${_validate_san}>")
  add_link_options("$<$<LINK_LANGUAGE:C,CXX,Fortran>:-fsanitize=address,undefined>")
endif()
