"""Drop-in loader for validate reference sets, with the API of the original reference script's loader.

Code written against the original guide runs unchanged on a `validate generate` set
(validate-reference/1); numpy and the standard library only, one file to copy next to your code:

    from load_torch_reference_outputs import ReferenceDataLoader
    loader = ReferenceDataLoader("ref/")
    loader.print_summary()
    loader.list_available_cases()            # [("bfloat16", 8), ("bfloat16", 16), ("float32", 8), ...]
    data = loader.load_test_case(dtype="bfloat16", input_channels=8)
    data["conv2d"]["input"], data["matmul"]["A"]           # numpy arrays, canonical NCHW / MK
    data["metadata"]["shapes"], data["metadata"]["dtypes"], data["metadata"]["input_hashes"]
    loader.verify_hashes(dtype="bfloat16", input_channels=8)  # {"conv2d": {"input": True, ...}, "matmul": {...}}
    loader.ic_to_k[8]                        # 72

    python load_torch_reference_outputs.py ref/     # verify a transferred set: exit 0 when every file
                                                    # and input hash matches, 1 when one does not

As in the original, bfloat16 tensors are float32 arrays holding bfloat16 values (numpy has no
bfloat16) and every tensor is in the canonical layout. Cases of a set that are not part of the
input-channel sweep (named other than k{K:04d}_ic{ic:03d}, e.g. smoke geometries) cannot be addressed
by (dtype, input_channels); python/validate_refs.py loads them by name.
"""
import hashlib
import json
import os
import re
import sys

import numpy as np

FORMAT = "validate-reference/1"
_SWEEP_NAME = re.compile(r"^k(\d+)_ic(\d+)$")


def _file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _values_sha256(arr):
    # The metadata hash: the tensor's values as little-endian float32 in C order (float16 widened).
    return hashlib.sha256(np.ascontiguousarray(arr, dtype="<f4").tobytes()).hexdigest()


class ReferenceDataLoader:
    def __init__(self, data_dir):
        self.data_dir = os.path.abspath(data_dir)
        manifest = os.path.join(self.data_dir, "manifest.json")
        if not os.path.isfile(manifest):
            raise FileNotFoundError(
                f"{manifest} is missing: not a reference set, or an incomplete one (the manifest is written last)")
        with open(manifest) as f:
            self.manifest = json.load(f)
        if self.manifest.get("format") != FORMAT:
            raise ValueError(f"{manifest}: format {self.manifest.get('format')!r}, expected {FORMAT!r}")
        # (dtype, input_channels) -> case name, and input_channels -> K, from the sweep's case names.
        self._cases = {}
        self.other_cases = []  # (dtype, case name) not addressable by input channels
        self.ic_to_k = {}
        for rel in self.manifest.get("files", {}):
            if not rel.endswith("_metadata.json") or "/" not in rel:
                continue
            dtype, name = rel.split("/", 1)
            name = name[: -len("_metadata.json")]
            m = _SWEEP_NAME.match(name)
            if m:
                k, ic = int(m.group(1)), int(m.group(2))
                self._cases[(dtype, ic)] = name
                self.ic_to_k[ic] = k
            else:
                self.other_cases.append((dtype, name))
        self.ic_to_k = dict(sorted(self.ic_to_k.items()))
        self.other_cases.sort()

    def _path(self, rel):
        path = os.path.normpath(os.path.join(self.data_dir, rel))
        if os.path.isabs(rel) or not path.startswith(self.data_dir + os.sep):
            raise ValueError(f"{rel!r} leaves the reference set directory {self.data_dir}")
        return path

    def _case(self, dtype, input_channels):
        key = (str(dtype), int(input_channels))
        if key not in self._cases:
            have = ", ".join(f"({d!r}, {ic})" for d, ic in self.list_available_cases()) or "none"
            raise FileNotFoundError(
                f"{self.data_dir}: no case for dtype={dtype!r}, input_channels={input_channels}; available: {have}")
        return self._cases[key]

    def _metadata(self, dtype, name):
        with open(self._path(f"{dtype}/{name}_metadata.json")) as f:
            return json.load(f)

    def list_available_cases(self):
        """[(dtype, input_channels), ...] sorted by dtype, then input channels."""
        return sorted(self._cases)

    def load_test_case(self, dtype, input_channels):
        """{"conv2d": {tensor: ndarray}, "matmul": {tensor: ndarray}, "metadata": the case's metadata}."""
        name = self._case(dtype, input_channels)
        meta = self._metadata(dtype, name)
        data = {"metadata": meta}
        for op, desc in meta["ops"].items():
            data[op] = {}
            for tensor, t in desc["tensors"].items():
                arr = np.load(self._path(f"{dtype}/{t['file']}"))
                if list(arr.shape) != list(t["shape"]):
                    raise ValueError(f"{dtype}/{t['file']}: shape {list(arr.shape)}, metadata says {t['shape']}")
                data[op][tensor] = arr
        return data

    def verify_hashes(self, dtype, input_channels):
        """{op: {input tensor: True when its values hash to the metadata's input_hashes}}."""
        name = self._case(dtype, input_channels)
        meta = self._metadata(dtype, name)
        out = {}
        for op, hashes in meta["input_hashes"].items():
            out[op] = {}
            for tensor, want in hashes.items():
                path = self._path(f"{dtype}/{meta['ops'][op]['tensors'][tensor]['file']}")
                try:
                    out[op][tensor] = _values_sha256(np.load(path, mmap_mode="r")) == want
                except (OSError, ValueError):
                    out[op][tensor] = False
        return out

    def verify_files(self):
        """{relative path: True when the file's SHA-256 matches the manifest} for every listed file."""
        out = {}
        for rel, entry in self.manifest["files"].items():
            try:
                out[rel] = _file_sha256(self._path(rel)) == entry["sha256"]
            except OSError:
                out[rel] = False
        return out

    def print_summary(self):
        gen = self.manifest.get("generator", {})
        print(f"Reference set: {self.data_dir}")
        print(f"  generator {gen.get('version', '?')} ({gen.get('git_commit', '?')}), created {self.manifest.get('created_at', '?')}")
        print(f"  {len(self._cases)} sweep cases, {len(self.other_cases)} other cases, "
              f"{len(self.manifest['files'])} files, "
              f"{sum(e['size'] for e in self.manifest['files'].values()) / 1e6:.1f} MB")
        for dtype, ic in self.list_available_cases():
            name = self._cases[(dtype, ic)]
            meta = self._metadata(dtype, name)
            conv = meta["shapes"].get("conv2d", {})
            mm = meta["shapes"].get("matmul", {})
            print(f"  {dtype:<9} ic={ic:<5} K={self.ic_to_k[ic]:<6} input={conv.get('input')} "
                  f"weight={conv.get('weight')} A={mm.get('A')} B={mm.get('B')}")
        for dtype, name in self.other_cases:
            print(f"  {dtype:<9} {name} (load it by name with validate_refs.load_case)")


def main(argv):
    if len(argv) != 2:
        print(f"usage: {os.path.basename(argv[0])} REFERENCE_DIR", file=sys.stderr)
        return 2
    try:
        loader = ReferenceDataLoader(argv[1])
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    loader.print_summary()
    bad = [rel for rel, ok in loader.verify_files().items() if not ok]
    for dtype, ic in loader.list_available_cases():
        for op, tensors in loader.verify_hashes(dtype=dtype, input_channels=ic).items():
            bad += [f"{dtype} ic={ic} {op}.{t} (input hash)" for t, ok in tensors.items() if not ok]
    for b in bad:
        print(f"MISMATCH: {b}")
    n = len(loader.manifest["files"])
    print(f"{n - len([b for b in bad if '(input hash)' not in b])}/{n} files match the manifest; "
          f"{'all input hashes match' if not any('(input hash)' in b for b in bad) else 'input hash mismatches above'}")
    print("OK" if not bad else "FAILED")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
