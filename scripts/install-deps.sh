#!/usr/bin/env bash
# Installs what validate needs: Debian's packages, then LibTorch, which is PyPI's torch 2.11.0
# (the CUDA 13.0 build) in a venv this repository owns (scripts/install-torch.sh, .deps/torch-2.11).
# Idempotent: when everything is there it only checks (a few seconds). The CUDA toolkit + cuDNN
# are not Debian packages; CMake finds them in /usr/local/cuda when present (VALIDATE_CUDA=AUTO)
# and builds without them otherwise (LibTorch's own CUDA libraries come with the torch wheel).
#
#   VALIDATE_TORCH_PYTHON=PY  use PY's torch (a venv or conda env of your own: 2.8 or newer, built
#                             for CUDA 13 if it is a CUDA build) instead of installing one
#
#   scripts/install-deps.sh            what the test suite needs (scripts/test.sh, .ci/run)
#   scripts/install-deps.sh --runtime  only what building and running validate needs (the nightly
#                                      gate, scripts/nightly.sh: compiler, CMake, LibTorch, BLAS,
#                                      the header libraries, numpy-free python3): no GoogleTest,
#                                      Slurm, munge, Chromium, clang or gfortran
#
set -euo pipefail
runtime=0
case "${1:-}" in
  --runtime) runtime=1 ;;
  "") ;;
  *) echo "install-deps: unknown option '$1' (expected --runtime or nothing)" >&2; exit 2 ;;
esac
packages=(
  build-essential cmake git pkg-config python3
  libopenblas0-openmp     # libblas.so.3 for numpy and the examples (the reference BLAS is ~13x
                          # slower); LibTorch's own BLAS is the MKL inside its wheel
  nlohmann-json3-dev libssl-dev libcli11-dev libfmt-dev
  libre2-dev              # RE2: user regexes (--only, --variant) match in linear time
)
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  gfortran                # examples/fortran
  python3-numpy           # tests that check our files against numpy (Debian's /usr/bin/python3)
  cmark                   # reliability.text.markdown_html: renders the Markdown report (CommonMark)
  chromium                # report.html_in_chromium: renders the HTML report (DOM + screenshot)
  slurmctld slurmd slurm-client munge iproute2  # slurm.array_generate: a private one-node Slurm
                          # cluster (scripts/slurm-cluster.sh); the packages start no daemon
  clang libclang-rt-dev   # the libFuzzer targets (scripts/fuzz.sh, ctest fuzz.script): without
                          # them that test is skipped, so a clean CI machine would never fuzz
)
[ $runtime = 1 ] || packages+=("${test_packages[@]}")
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#packages[@]} packages present"
fi
# libblas.so.3/liblapack.so.3 are alternatives: a machine set to manual mode keeps the reference
# BLAS even with OpenBLAS installed, so point them at OpenBLAS-OpenMP explicitly (this machine's arch).
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for lib in libblas.so.3 liblapack.so.3; do
  want=/usr/lib/$arch/openblas-openmp/$lib
  if [ "$(readlink -f "/usr/lib/$arch/$lib")" != "$(readlink -f "$want")" ]; then
    echo "install-deps: $lib -> $want"
    $SUDO update-alternatives --set "$lib-$arch" "$want"
  fi
done
# LibTorch: PyPI's torch 2.11.0+cu130 (2.6 GB of wheels, 4.6 GB installed, once), unless the
# caller names a python whose torch to use.
if [ -n "${VALIDATE_TORCH_PYTHON:-}" ]; then
  "$VALIDATE_TORCH_PYTHON" -c "import torch; print('install-deps: using torch', torch.__version__, 'from', '$VALIDATE_TORCH_PYTHON')" ||
    { echo "install-deps: VALIDATE_TORCH_PYTHON=$VALIDATE_TORCH_PYTHON has no torch" >&2; exit 2; }
else
  "$(dirname "$0")/install-torch.sh"
fi
