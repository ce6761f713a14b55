"""Load validate reference sets (validate-reference/1) with numpy alone.

For users on the Python side (TTNN, JAX, ...) who want the references without building the
harness. Only numpy and the standard library are needed.

    import validate_refs as vr
    ref = vr.ReferenceSet("ref/")
    ref.list_cases()                       # [("float32", "k0072_ic008"), ...]
    case = ref.load_case("float32", "k0072_ic008")
    case["conv2d"]["input"].shape          # (1, 8, 32, 32), NCHW, C order
    ref.verify_hashes()                    # raises HashMismatch naming the file
    print(ref.summary())

Module-level helpers with the same names take the set directory as the first argument.
"""
import hashlib
import json
import os

import numpy as np

FORMAT = "validate-reference/1"


class HashMismatch(Exception):
    """A file or tensor does not hash to what the manifest or metadata says."""


def _tensor_sha256(arr):
    # The metadata hash: the values as little-endian float32 in C order.
    return hashlib.sha256(np.ascontiguousarray(arr, dtype="<f4").tobytes()).hexdigest()


def _file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


class ReferenceSet:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        manifest = os.path.join(self.root, "manifest.json")
        if not os.path.exists(manifest):
            raise FileNotFoundError(f"{manifest} is missing: the set is incomplete (the manifest is written last)")
        with open(manifest) as f:
            self.manifest = json.load(f)
        if self.manifest.get("format") != FORMAT:
            raise ValueError(f"{manifest}: format {self.manifest.get('format')!r}, expected {FORMAT!r}")

    def _safe_path(self, rel):
        path = os.path.normpath(os.path.join(self.root, rel))
        if os.path.isabs(rel) or not path.startswith(self.root + os.sep):
            raise ValueError(f"{rel!r} leaves the reference set directory")
        return path

    def list_cases(self):
        """(dtype, case) pairs, dtype-major, sorted by case name."""
        out = []
        for rel in self.manifest["files"]:
            if rel.endswith("_metadata.json"):
                dtype, name = rel.split("/", 1)
                out.append((dtype, name[: -len("_metadata.json")]))
        order = {"float32": 0, "bfloat16": 1, "float16": 2}
        return sorted(out, key=lambda dc: (order.get(dc[0], 9), dc[1]))

    def metadata(self, dtype, case):
        with open(self._safe_path(f"{dtype}/{case}_metadata.json")) as f:
            return json.load(f)

    def load_case(self, dtype, case, mmap=False):
        """{op: {tensor: ndarray}} in canonical layout, plus "metadata". mmap=True memory-maps."""
        meta = self.metadata(dtype, case)
        out = {"metadata": meta}
        for op, desc in meta["ops"].items():
            out[op] = {}
            for name, t in desc["tensors"].items():
                arr = np.load(self._safe_path(f"{dtype}/{t['file']}"), mmap_mode="r" if mmap else None)
                if list(arr.shape) != t["shape"]:
                    raise ValueError(f"{t['file']}: shape {arr.shape}, metadata says {t['shape']}")
                out[op][name] = arr
        return out

    def verify_hashes(self, files=True, inputs=True):
        """Re-hash every file against the manifest and every input against metadata.
        Returns the number of checks; raises HashMismatch on the first mismatch."""
        checks = 0
        if files:
            for rel, entry in self.manifest["files"].items():
                got = _file_sha256(self._safe_path(rel))
                if got != entry["sha256"]:
                    raise HashMismatch(f"{rel}: sha256 {got}, manifest says {entry['sha256']}")
                checks += 1
        if inputs:
            for dtype, case in self.list_cases():
                meta = self.metadata(dtype, case)
                for op, desc in meta["ops"].items():
                    for name, t in desc["tensors"].items():
                        if t["role"] != "input":
                            continue
                        arr = np.load(self._safe_path(f"{dtype}/{t['file']}"), mmap_mode="r")
                        got = _tensor_sha256(arr)
                        if got != t["sha256"]:
                            raise HashMismatch(f"{dtype}/{t['file']}: values hash to {got}, metadata says {t['sha256']}")
                        checks += 1
        return checks

    def summary(self):
        cases = self.list_cases()
        lines = [f"{self.root}: {len(cases)} cases"]
        for dtype, case in cases:
            meta = self.metadata(dtype, case)
            conv = meta["ops"].get("conv2d", {})
            mm = meta["ops"].get("matmul", {}).get("params", {})
            lines.append(f"  {dtype:<9} {case:<22} K={conv.get('K', mm.get('K'))!s:<6} "
                         f"input={conv.get('tensors', {}).get('input', {}).get('shape')} "
                         f"A=[{mm.get('M')}, {mm.get('K')}] B=[{mm.get('K')}, {mm.get('N')}]")
        total = sum(e["size"] for e in self.manifest["files"].values())
        lines.append(f"total: {total / 1e6:.1f} MB in {len(self.manifest['files'])} files")
        return "\n".join(lines)


def list_cases(root):
    return ReferenceSet(root).list_cases()


def load_case(root, dtype, case, mmap=False):
    return ReferenceSet(root).load_case(dtype, case, mmap=mmap)


def verify_hashes(root, files=True, inputs=True):
    return ReferenceSet(root).verify_hashes(files=files, inputs=inputs)


def summary(root):
    return ReferenceSet(root).summary()


if __name__ == "__main__":
    import sys

    for root in sys.argv[1:] or ["."]:
        s = ReferenceSet(root)
        print(s.summary())
        print(f"verified: {s.verify_hashes()} checks")
