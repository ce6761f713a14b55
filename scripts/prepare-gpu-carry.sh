#!/usr/bin/env bash
# Copies what a GPU machine with no package registry needs to build validate into the ignored folder
# third_party_carry/ (run it here, on the Debian development machine; the folder then travels with
# the working tree, e.g. as a `carry` path of the device tool). scripts/gpu-acceptance.sh uses it.
#
#   scripts/prepare-gpu-carry.sh [DEST]        (DEST defaults to third_party_carry/ at the repo root)
#
# What goes in, and why each piece is carried the way it is:
#   googletest/               GoogleTest 1.12 *sources* (/usr/src/googletest): built on the GPU machine
#                             with its own compiler, then installed into prefix/ (no ABI guesswork)
#   prefix/include/nlohmann   nlohmann_json headers (header-only)     + prefix/lib/cmake/nlohmann_json/
#   prefix/include/CLI        CLI11 headers (header-only)             + prefix/lib/cmake/CLI11/
#   prefix/include/fmt        fmt 9 headers, used header-only (FMT_HEADER_ONLY=1): no libfmt.so to
#                             match against the GPU machine's libstdc++  + prefix/lib/cmake/fmt/
#   openssl/include/openssl   OpenSSL 3 headers incl. Debian's multiarch opensslconf.h/configuration.h
#                             (the GPU image has libcrypto.so.3 for Python but maybe no -dev headers)
#   openssl/lib/libcrypto.so.3  a fallback, used only if the GPU machine has no libcrypto.so.3
#   prefix/include/re2, prefix/lib/libre2.so(.9)  RE2 (no header-only form): found on
#                             CMAKE_PREFIX_PATH by cmake/ValidateRe2.cmake when pkg-config has no re2
# The CMake package files written here define the same imported targets the system packages do
# (nlohmann_json::nlohmann_json, CLI11::CLI11, fmt::fmt), with paths relative to themselves, so the
# folder works wherever it lands. About 12 MB in all.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${1:-$ROOT/third_party_carry}
MULTIARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

need() {
  [[ -e $1 ]] || { echo "prepare-gpu-carry: $1 is missing; install $2 (apt-get install $2)" >&2; exit 2; }
}
need /usr/src/googletest/CMakeLists.txt googletest
need /usr/include/nlohmann/json.hpp nlohmann-json3-dev
need /usr/include/CLI/CLI.hpp libcli11-dev
need /usr/include/fmt/format-inl.h libfmt-dev
need /usr/include/openssl/evp.h libssl-dev
need /usr/include/re2/re2.h libre2-dev
need "/usr/lib/$MULTIARCH/libcrypto.so.3" libssl3

rm -rf "$DEST"
mkdir -p "$DEST/prefix/include" "$DEST/prefix/lib/cmake" "$DEST/openssl/include" "$DEST/openssl/lib"
cp -a /usr/src/googletest "$DEST/googletest"
cp -a /usr/include/nlohmann /usr/include/CLI /usr/include/fmt "$DEST/prefix/include/"
cp -a /usr/include/openssl "$DEST/openssl/include/"
# Debian keeps two generated OpenSSL headers in the multiarch folder; a plain include dir needs them.
cp -a "/usr/include/$MULTIARCH/openssl/." "$DEST/openssl/include/openssl/"
cp -L "/usr/lib/$MULTIARCH/libcrypto.so.3" "$DEST/openssl/lib/libcrypto.so.3"
cp -a /usr/include/re2 "$DEST/prefix/include/"
cp -L "/usr/lib/$MULTIARCH/libre2.so.9" "$DEST/prefix/lib/libre2.so.9" && ln -s libre2.so.9 "$DEST/prefix/lib/libre2.so"

version_of() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null | sed 's/[-+~].*//'; }
NLOHMANN_VERSION=$(version_of nlohmann-json3-dev); NLOHMANN_VERSION=${NLOHMANN_VERSION:-3.11.2}
CLI11_VERSION=$(version_of libcli11-dev); CLI11_VERSION=${CLI11_VERSION:-2.1.2}
FMT_VERSION=$(version_of libfmt-dev); FMT_VERSION=${FMT_VERSION:-9.1.0}

# One header-only package: <name>Config.cmake + <name>ConfigVersion.cmake defining TARGET.
write_package() {  # dir-name config-file-stem version target extra-cmake
  local dir="$DEST/prefix/lib/cmake/$1"
  mkdir -p "$dir"
  cat >"$dir/$2.cmake" <<CMAKE
# Written by scripts/prepare-gpu-carry.sh: header-only $1 $3 carried from a Debian machine.
get_filename_component(_carry_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET $4)
  add_library($4 INTERFACE IMPORTED)
  set_target_properties($4 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${_carry_prefix}/include")
  $5
endif()
set($1_FOUND TRUE)
CMAKE
  cat >"$dir/$(echo "$2" | sed 's/Config$/ConfigVersion/; s/-config$/-config-version/').cmake" <<CMAKE
set(PACKAGE_VERSION "$3")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE
}
write_package nlohmann_json nlohmann_jsonConfig "$NLOHMANN_VERSION" nlohmann_json::nlohmann_json ""
write_package CLI11 CLI11Config "$CLI11_VERSION" CLI11::CLI11 ""
# fmt header-only: every user compiles fmt's implementation inline (format-inl.h), so nothing links.
write_package fmt fmt-config "$FMT_VERSION" fmt::fmt \
  'set_target_properties(fmt::fmt PROPERTIES INTERFACE_COMPILE_DEFINITIONS "FMT_HEADER_ONLY=1")
  add_library(fmt::fmt-header-only ALIAS fmt::fmt)'

cat >"$DEST/README.md" <<EOF2
# third_party_carry (generated by scripts/prepare-gpu-carry.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ))

Build dependencies for a GPU machine that reaches no package registry. Not committed (.gitignore).
googletest sources (built there by scripts/gpu-acceptance.sh into prefix/), header-only
nlohmann_json $NLOHMANN_VERSION, CLI11 $CLI11_VERSION and fmt $FMT_VERSION (FMT_HEADER_ONLY) with CMake
package files in prefix/lib/cmake, and OpenSSL 3 headers (+ a fallback libcrypto.so.3) in openssl/.
EOF2
echo "prepare-gpu-carry: wrote $DEST ($(du -sh "$DEST" | cut -f1))"
