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

# validate_user_programs(): called first in a directory whose programs stand for users' programs
# under test (the C examples that `validate run --backend exec` starts). The sanitizer build
# instruments the harness that starts, reads and judges them; these programs are built plain and
# at -O2 there, as in a user's build. Instrumented at -O1, the mutation suite's program took 6.9 of
# the 7.8 s of a mutant's `validate run` (its float64 loops under ASan), and that suite was the
# sanitized suite's longest test.
macro(validate_user_programs)
  if(VALIDATE_SANITIZE)
    set_property(DIRECTORY PROPERTY COMPILE_OPTIONS "")
    set_property(DIRECTORY PROPERTY LINK_OPTIONS "")
    set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O2 -g1")
  endif()
endmacro()
