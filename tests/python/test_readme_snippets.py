"""docs/python.md (the README's "From Python" links to it), run as written: every ```python
block, in a scratch directory where ref/ is the smoke set and run/ a float64 oracle run of it in
the fortran layouts. test_readme_snippets.py DOCS/PYTHON.MD REF_DIR SCRATCH_DIR VALIDATE_BIN"""
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import warnings

readme, ref, scratch, bin_ = (os.path.abspath(a) for a in sys.argv[1:5])
text = open(readme, encoding="utf-8").read()
blocks = re.findall(r"```python\n(.*?)```", text, re.S)
assert len(blocks) == 2, f"expected the two loaders' blocks, found {len(blocks)}"
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
os.symlink(ref, os.path.join(scratch, "ref"))
subprocess.run([bin_, "run", "--backend", "oracle", "--layout", "fortran", "--ref", ref,
                "--out", os.path.join(scratch, "run"), "--progress", "0"], check=True)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(readme)), "python"))
os.chdir(scratch)
for i, code in enumerate(blocks):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, f"docs/python.md python block {i + 1}", "exec"), {})
    print(f"block {i + 1}: ran, {len(out.getvalue().splitlines())} lines printed")
    if i == 1:
        assert "no case 'k0072_ic009' in float32; did you mean k0072_ic008?" in out.getvalue(), out.getvalue()
print("docs/python.md snippets: all ran")
