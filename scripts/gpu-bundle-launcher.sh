#!/usr/bin/env bash
# run-acceptance.sh of the GPU bundle (scripts/gpu-bundle.sh copies this file into it): runs the
# bundle's prebuilt binaries against THIS machine's torch 2.11 and nvidia-* wheels.
#
#   ./run-acceptance.sh [gpu-acceptance.sh arguments]      e.g. --steps quick --out reports/x
#   ./run-acceptance.sh --exec CMD [ARGS...]               runs CMD in the same environment
#     VALIDATE_PYTHON   the python whose torch to use (default python3)
#
# LibTorch, cuDNN, cuBLASLt and the CUDA runtime are found from that python at run time: torch's
# own lib/ folder and the lib/ folder of each package under the `nvidia` namespace (pip's CUDA
# wheels: nvidia/cu13/lib, nvidia/cudnn/lib, ...). A torch other than 2.11 built for CUDA 13 is
# refused with exit 2: the binaries were compiled against 2.11's headers, and LibTorch's C++ ABI
# changes between minor versions.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${VALIDATE_PYTHON:-python3}
info=$("$py" - <<'PY' 2>/dev/null
import os, sys
try:
    import torch
except Exception as e:
    print("ERR", "cannot import torch:", e); sys.exit(0)
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
try:
    import nvidia
    for base in nvidia.__path__:
        for name in sorted(os.listdir(base)):
            lib = os.path.join(base, name, "lib")
            if os.path.isdir(lib):
                dirs.append(lib)
except ImportError:
    pass
print("OK", torch.__version__, torch.version.cuda or "none", ":".join(dirs))
PY
) || true
info=$(tail -1 <<<"$info")  # torch may warn on stderr first (e.g. no numpy)
[[ -n $info ]] || info="ERR cannot run it, or it printed nothing"
read -r status version cuda dirs <<<"$info"
if [[ $status != OK ]]; then
  echo "run-acceptance: $py: ${info#ERR }" >&2
  exit 2
fi
if [[ ${version%%+*} != 2.11.* || ${cuda%%.*} != 13 ]]; then
  echo "run-acceptance: $py has torch $version (CUDA $cuda); this bundle was built against torch 2.11 with CUDA 13 ($(sed -n 3p "$here/BUNDLE.txt"))" >&2
  exit 2
fi
# The bundle's own syslib/ (libfmt.so.9) last: the machine's copy, if it has one, is the same ABI.
export LD_LIBRARY_PATH=$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$here/build-gpu/syslib
export VALIDATE_BUNDLE_TORCH="$version (CUDA $cuda) from $py"
if [[ ${1:-} == --exec ]]; then
  shift
  exec "$@"
fi
exec "$here/scripts/gpu-acceptance.sh" --build build-gpu --prebuilt "$@"
