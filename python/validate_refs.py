"""Load validate reference sets (validate-reference/1) and run directories (validate-run/1) with numpy.

For users on the Python side (TTNN, JAX, ...) who want the references, or what their stack produced,
without building the harness. Only numpy and the standard library are needed; `ml_dtypes`, when it
is importable, turns bfloat16 tensors into real bfloat16 arrays.

    import validate_refs as vr
    ref = vr.ReferenceSet("ref/")
    ref.list_cases()                             # [("float32", "k0072_ic008"), ...]
    case = ref.load_case("k0072_ic008", dtype="bfloat16")
    case["conv2d"]["input"].shape                # (1, 8, 32, 32), NCHW, C order
    case.logical_dtype("conv2d", "input")        # "bfloat16" (the array is float32 without ml_dtypes)
    ref.verify_hashes()                          # raises HashMismatch naming the file
    print(ref.summary())

    run = vr.load_run("run/")                    # a `validate run` directory, as compare sees it
    r = run.load_case("k0072_ic008", dtype="float32")
    r["conv2d"]["output"], r.outcome("conv2d"), r.layouts["conv2d"]

Module-level helpers take the directory first: load_case(root, case, dtype=...), list_cases(root),
verify_hashes(root), summary(root), load_run(run_dir). A case that does not exist raises
CaseNotFound, which lists the cases that do. For the original reference script's loader API
(ReferenceDataLoader), use load_torch_reference_outputs.py.
"""
import difflib
import hashlib
import json
import os
import warnings

import numpy as np

FORMAT = "validate-reference/1"
RUN_FORMAT = "validate-run/1"
DTYPES = ("float32", "bfloat16", "float16")

try:  # optional: real bfloat16 arrays
    import ml_dtypes as _ml_dtypes
except ImportError:  # pragma: no cover - depends on the machine
    _ml_dtypes = None


class HashMismatch(Exception):
    """A file or tensor does not hash to what the manifest or metadata says."""


class CaseNotFound(LookupError):
    """No such case (or dtype) in the set; the message lists what exists."""


class BFloat16AsFloat32Warning(UserWarning):
    """bfloat16 tensors were returned as float32 arrays holding bfloat16 values."""


def _tensor_sha256(arr):
    # The metadata hash: the values as little-endian float32 in C order.
    return hashlib.sha256(np.ascontiguousarray(arr, dtype="<f4").tobytes()).hexdigest()


def _file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _dtype_order(dc):
    return (DTYPES.index(dc[0]) if dc[0] in DTYPES else 9, dc[1])


def _logical_dtype(case_dtype, role):
    # The loss is a float32 scalar in every dtype (the harness reduces in float32).
    return "float32" if role == "loss" else case_dtype


_warned_bf16 = False


def _as_logical(arr, logical, path, want_ml_dtypes):
    """float32 storage of bfloat16 values -> ml_dtypes.bfloat16 when asked and importable."""
    if logical != "bfloat16" or arr.dtype != np.float32:
        return arr
    if want_ml_dtypes and _ml_dtypes is not None:
        out = np.asarray(arr).astype(_ml_dtypes.bfloat16)
        # The conversion rounds; a file whose values are not bfloat16 would change silently.
        back = out.astype(np.float32)
        same = (back == arr) | (np.isnan(back) & np.isnan(arr))
        if not np.all(same):
            raise ValueError(f"{path}: holds values that are not bfloat16 ({int((~same).sum())} elements)")
        return out
    global _warned_bf16
    if not _warned_bf16:
        _warned_bf16 = True
        why = "ml_dtypes is not importable" if _ml_dtypes is None else "ml_dtypes=False"
        warnings.warn(f"bfloat16 tensors are returned as float32 arrays holding bfloat16 values ({why}); "
                      "Case.logical_dtype(op, tensor) says which", BFloat16AsFloat32Warning, stacklevel=4)
    return arr


class Case(dict):
    """{op: {tensor: ndarray}, "metadata": ...} plus the logical dtype of every tensor.

    For a run case, also the run's record (`record`, `outcome(op)`, `layouts`)."""

    def __init__(self, name, dtype, source):
        super().__init__()
        self.name = name
        self.dtype = dtype
        self.source = source
        self.logical_dtypes = {}  # {op: {tensor: "float32" | "bfloat16" | "float16"}}
        self.record = None
        self.layouts = {}

    def logical_dtype(self, op, tensor):
        return self.logical_dtypes[op][tensor]

    def outcome(self, op):
        """A run case's outcome of `op`: ok, error, skipped or unsupported (None for a reference)."""
        if self.record is None:
            return None
        return self.record.get("ops", {}).get(op, {}).get("outcome")

    def __repr__(self):
        ops = {op: sorted(t) for op, t in self.items() if op != "metadata"}
        return f"<Case {self.dtype}/{self.name} from {self.source}: {ops}>"


class _Directory:
    kind = "set"

    def __init__(self, root, fmt):
        self.root = os.path.abspath(root)
        manifest = os.path.join(self.root, "manifest.json")
        if not os.path.isfile(manifest):
            raise FileNotFoundError(f"{manifest} is missing: not a {fmt} directory, or an incomplete one "
                                    "(the manifest is written last)")
        with open(manifest) as f:
            self.manifest = json.load(f)
        if self.manifest.get("format") != fmt:
            raise ValueError(f"{manifest}: format {self.manifest.get('format')!r}, expected {fmt!r}")

    def _safe_path(self, rel):
        path = os.path.normpath(os.path.join(self.root, rel))
        if os.path.isabs(rel) or not path.startswith(self.root + os.sep):
            raise ValueError(f"{rel!r} leaves the directory {self.root}")
        return path

    def _cases_with_suffix(self, suffix):
        out = []
        for rel in self.manifest.get("files", {}):
            if rel.endswith(suffix) and rel.count("/") == 1:
                dtype, name = rel.split("/", 1)
                if dtype in DTYPES:
                    out.append((dtype, name[: -len(suffix)]))
        return sorted(out, key=_dtype_order)

    def _resolve(self, case, dtype):
        """(dtype, case) for a case name and an optional dtype; CaseNotFound listing what exists."""
        # The earlier form load_case(root, dtype, case): accept it when the arguments say so.
        if case in DTYPES and dtype is not None and dtype not in DTYPES:
            case, dtype = dtype, case
        cases = self.list_cases()
        if dtype is not None and dtype not in DTYPES:
            raise CaseNotFound(f"{self.root}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        have = [d for d, c in cases if c == case]
        if dtype is None:
            if len(have) == 1:
                return have[0], case
            if len(have) > 1:
                raise CaseNotFound(f"{self.root}: case {case!r} exists in {', '.join(have)}: pass dtype=")
        elif dtype in have:
            return dtype, case
        names = sorted({c for d, c in cases if dtype is None or d == dtype})
        where = f"in {dtype}" if dtype is not None else "in any dtype"
        msg = f"{self.root}: no case {case!r} {where}"
        if have:
            msg += f" (it exists in {', '.join(have)})"
        close = difflib.get_close_matches(case, names, n=3)
        if close:
            msg += f"; did you mean {', '.join(close)}?"
        listing = ", ".join(f"{d}/{c}" for d, c in cases) or "none"
        raise CaseNotFound(f"{msg}\n{self.kind} has: {listing}")


class ReferenceSet(_Directory):
    kind = "the reference set"

    def __init__(self, root):
        super().__init__(root, FORMAT)

    def list_cases(self):
        """(dtype, case) pairs, dtype-major (float32, bfloat16, float16), sorted by case name."""
        return self._cases_with_suffix("_metadata.json")

    def metadata(self, case, dtype=None):
        dtype, case = self._resolve(case, dtype)
        with open(self._safe_path(f"{dtype}/{case}_metadata.json")) as f:
            return json.load(f)

    def load_case(self, case, dtype=None, mmap=False, ml_dtypes=True):
        """The case's tensors in canonical layout (NCHW / OIHW / MK, C order) and its "metadata".

        dtype may be left out when the case exists in one dtype only. mmap=True memory-maps the
        files (not with an ml_dtypes conversion, which copies). bfloat16 tensors are ml_dtypes
        bfloat16 arrays when ml_dtypes is importable and ml_dtypes=True, otherwise float32 arrays
        holding bfloat16 values (a BFloat16AsFloat32Warning says so once); float16 tensors are
        numpy float16. case.logical_dtype(op, tensor) gives each tensor's dtype either way."""
        dtype, case = self._resolve(case, dtype)
        meta = self.metadata(case, dtype)
        out = Case(case, dtype, self.root)
        out["metadata"] = meta
        for op, desc in meta["ops"].items():
            out[op] = {}
            out.logical_dtypes[op] = {}
            for name, t in desc["tensors"].items():
                path = self._safe_path(f"{dtype}/{t['file']}")
                arr = np.load(path, mmap_mode="r" if mmap else None)
                if list(arr.shape) != t["shape"]:
                    raise ValueError(f"{path}: shape {list(arr.shape)}, metadata says {t['shape']}")
                logical = _logical_dtype(dtype, t["role"])
                out[op][name] = _as_logical(arr, logical, path, ml_dtypes)
                out.logical_dtypes[op][name] = logical
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
                meta = self.metadata(case, dtype)
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
            meta = self.metadata(case, dtype)
            conv = meta["ops"].get("conv2d", {})
            mm = meta["ops"].get("matmul", {}).get("params", {})
            lines.append(f"  {dtype:<9} {case:<22} K={conv.get('K', mm.get('K'))!s:<6} "
                         f"input={conv.get('tensors', {}).get('input', {}).get('shape')} "
                         f"A=[{mm.get('M')}, {mm.get('K')}] B=[{mm.get('K')}, {mm.get('N')}]")
        total = sum(e["size"] for e in self.manifest["files"].values())
        lines.append(f"total: {total / 1e6:.1f} MB in {len(self.manifest['files'])} files")
        return "\n".join(lines)


class RunDirectory(_Directory):
    """What `validate run` wrote: the results a backend produced, already converted back from the
    layouts the program used (recorded per tensor in the run record's "layouts") to the canonical
    layout, in the reference's storage dtype. This is exactly what `validate compare` pairs with
    the reference. Runs with several variants (cuDNN --algo all) have each one in `variants`."""

    kind = "the run directory"

    def __init__(self, root):
        super().__init__(root, RUN_FORMAT)
        info = os.path.join(self.root, "run_info.json")
        self.info = {}
        if os.path.isfile(info):
            with open(info) as f:
                self.info = json.load(f)
        self.variants = {}
        vdir = os.path.join(self.root, "variants")
        for v in self.info.get("variants", []) or []:
            if os.path.isdir(os.path.join(vdir, v)):
                self.variants[v] = RunDirectory(self._safe_path(f"variants/{v}"))

    def list_cases(self):
        return self._cases_with_suffix("_run.json")

    def record(self, case, dtype=None):
        dtype, case = self._resolve(case, dtype)
        with open(self._safe_path(f"{dtype}/{case}_run.json")) as f:
            return json.load(f)

    def load_case(self, case, dtype=None, mmap=False, ml_dtypes=True):
        """{op: {tensor: ndarray}} of every tensor the run record lists as produced, canonical
        layout; `record` is the run record, `outcome(op)` its outcome, `layouts` {op: {tensor: spec}}
        the layouts the program itself used. Tensors an op did not produce are absent (compare
        reports them as not run)."""
        dtype, case = self._resolve(case, dtype)
        rec = self.record(case, dtype)
        out = Case(case, dtype, self.root)
        out.record = rec
        for op, o in rec.get("ops", {}).items():
            out[op] = {}
            out.logical_dtypes[op] = {}
            out.layouts[op] = dict(o.get("layouts", {}))
            for name in o.get("produced", []):
                path = self._safe_path(f"{dtype}/{case}_{op}_{name}.npy")
                arr = np.load(path, mmap_mode="r" if mmap else None)
                logical = _logical_dtype(dtype, "loss" if name == "loss" else "result")
                out[op][name] = _as_logical(arr, logical, path, ml_dtypes)
                out.logical_dtypes[op][name] = logical
        return out

    def summary(self):
        cases = self.list_cases()
        lines = [f"{self.root}: backend {self.info.get('backend', '?')} on {self.info.get('device', '?')}, "
                 f"layout {self.info.get('layout', {}).get('name', '?')}, {len(cases)} cases"]
        for dtype, case in cases:
            rec = self.record(case, dtype)
            ops = ", ".join(f"{op} {o.get('outcome')} ({len(o.get('produced', []))} tensors)"
                            for op, o in rec.get("ops", {}).items())
            lines.append(f"  {dtype:<9} {case:<22} {ops}")
        if self.variants:
            lines.append(f"variants: {', '.join(self.variants)}")
        return "\n".join(lines)


def list_cases(root):
    return ReferenceSet(root).list_cases()


def load_case(root, case, dtype=None, mmap=False, ml_dtypes=True):
    return ReferenceSet(root).load_case(case, dtype=dtype, mmap=mmap, ml_dtypes=ml_dtypes)


def verify_hashes(root, files=True, inputs=True):
    return ReferenceSet(root).verify_hashes(files=files, inputs=inputs)


def summary(root):
    return ReferenceSet(root).summary()


def load_run(run_dir):
    return RunDirectory(run_dir)


if __name__ == "__main__":
    import sys

    for root in sys.argv[1:] or ["."]:
        if os.path.isfile(os.path.join(root, "run_info.json")):
            print(RunDirectory(root).summary())
            continue
        s = ReferenceSet(root)
        print(s.summary())
        print(f"verified: {s.verify_hashes()} checks")
