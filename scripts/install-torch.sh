#!/usr/bin/env bash
# Installs PyPI's torch 2.11.0 (CUDA 13.0 build, "2.11.0+cu130") with the nvidia-* / cuda-toolkit
# wheels it depends on into a virtual environment this repository owns, .deps/torch-2.11/
# (git-ignored), and prints the CMake prefix of its LibTorch. It is the same torch, with the same
# CUDA-side wheels, that the GPU machine's python3 has, so what is built against it here loads that
# machine's own copy there. Idempotent: when the venv already holds torch 2.11.0 it only checks.
#
#   scripts/install-torch.sh [--print-prefix]
#     VALIDATE_TORCH_VENV    where the venv goes (default <repo>/.deps/torch-2.11)
#     VALIDATE_TORCH_WHEELS  the wheels, downloaded once and installed from (default
#                            ~/.cache/validate/wheels-torch-2.11, outside the clone, so that every
#                            clone on the machine, CI's fresh ones included, downloads them once);
#                            scripts/check-gpu-bundle.sh installs its separate torch from them too
#
# Needs python3 (3.9 or newer, with the venv module) and PyPI; 2.6 GB of wheels downloaded (kept),
# 4.6 GB installed (libtorch_cuda alone is ~1 GB, cuDNN ~1 GB, cuBLAS ~0.7 GB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VALIDATE_TORCH_VENV:-$root/.deps/torch-2.11}
wheels=${VALIDATE_TORCH_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/validate/wheels-torch-2.11}
want=2.11.0
export PIP_DISABLE_PIP_VERSION_CHECK=1
print_prefix=0
[ "${1:-}" = "--print-prefix" ] && print_prefix=1

have() { "$venv/bin/python" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$want' and torch.version.cuda else 1)" 2>/dev/null; }

if ! have; then
  echo "install-torch: installing torch==$want (CUDA 13.0 build from PyPI) into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # PyPI's torch 2.11.0 for Linux x86-64 is the CUDA 13.0 build; its Requires-Dist pins
  # cuda-toolkit 13.0.2 (cudart, cublas, cufft, curand, cusolver, cusparse, nvrtc, nvjitlink, ...),
  # nvidia-cudnn-cu13 9.19.0.56, nccl-cu13, nvshmem-cu13 and cusparselt-cu13.
  mkdir -p "$wheels"
  # Downloaded into a folder of its own, then moved: a download cut short leaves no partial set of
  # wheels that a later install would take for complete.
  if ! "$venv/bin/python" -m pip install -q --dry-run --no-index --find-links "$wheels" "torch==$want" >/dev/null 2>&1; then
    partial=$(mktemp -d "$wheels.partial.XXXXXX")
    "$venv/bin/python" -m pip download -q -d "$partial" "torch==$want" >&2
    mv -f "$partial"/*.whl "$wheels"/ && rmdir "$partial"
  fi
  "$venv/bin/python" -m pip install -q --no-index --find-links "$wheels" "torch==$want" >&2
  have || { echo "install-torch: $venv has no CUDA torch $want after the install" >&2; exit 1; }
fi
if [ $print_prefix = 1 ]; then
  "$venv/bin/python" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
else
  "$venv/bin/python" -W ignore -c "import torch; print('install-torch: torch', torch.__version__, 'CUDA', torch.version.cuda, 'cuDNN', torch.backends.cudnn.version())" >&2
fi
