# Warnings for our own targets only (LibTorch headers are included as SYSTEM).
add_library(validate_warnings INTERFACE)
target_compile_options(validate_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${VALIDATE_WERROR}>>:-Werror>)
if(VALIDATE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
