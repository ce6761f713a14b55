#!/usr/bin/python3
"""Writes the small .npy files under tests/data/ with numpy itself, so the C++ reader is checked
against numpy's own writer (not against our writer). Run: /usr/bin/python3 tests/data/make_npy.py"""
import os
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def save(name, arr, **kw):
    np.save(os.path.join(here, name), arr, **kw)


# Values are the flat index + 0.5 so every element is distinct and exactly representable.
a = (np.arange(2 * 3 * 4, dtype=np.float64) + 0.5).reshape(2, 3, 4)
save("f4_c_2x3x4.npy", a.astype("<f4"))
save("f2_c_2x3x4.npy", a.astype("<f2"))
save("f8_c_2x3x4.npy", a.astype("<f8"))
save("f4_fortran_2x3x4.npy", np.asfortranarray(a.astype("<f4")))
save("f4_scalar.npy", np.array(0.333251953125, dtype="<f4"))
save("f4_1d_5.npy", (np.arange(5, dtype="<f4") - 2.0))
save("f4_empty_0x3.npy", np.zeros((0, 3), dtype="<f4"))
# Format 2.0: numpy writes it when asked explicitly.
with open(os.path.join(here, "f4_v2_3x2.npy"), "wb") as f:
    np.lib.format.write_array(f, (np.arange(6, dtype="<f4") * 0.25).reshape(3, 2), version=(2, 0))
# Big-endian: must be rejected with a clear message.
save("f4_bigendian_2.npy", np.array([1.0, 2.0], dtype=">f4"))
save("i4_2.npy", np.array([1, 2], dtype="<i4"))
