#!/usr/bin/env python3
"""Writes the .npy seed files in this directory (see README.md).

Run from anywhere with numpy installed: python3 make_seeds.py
Values are random on every run; only the layout of each file matters.
"""
import io
import os

import numpy as np
from numpy.lib import format as npy_format

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng()


def npy_bytes(array, version=None):
    out = io.BytesIO()
    npy_format.write_array(out, array, version=version)
    return out.getvalue()


def header_file(header, data=b"", major=1):
    """A .npy file with a hand-written header dict (for malformed ones)."""
    text = (header + "\n").encode("latin1")
    width = 2 if major == 1 else 4
    return b"\x93NUMPY" + bytes([major, 0]) + len(text).to_bytes(width, "little") + text + data


def floats(shape, dtype):
    return (rng.standard_normal(shape) * 100).astype(dtype)


def ints(shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


def write(name, contents):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(contents)


valid_f32 = npy_bytes(floats((3, 4), "<f4"))
seeds = {
    "valid_f32.npy": valid_f32,
    "valid_f64.npy": npy_bytes(floats((5,), "<f8")),
    "valid_i32.npy": npy_bytes(ints((2, 3), "<i4")),
    "valid_i64.npy": npy_bytes(ints((2, 2, 2), "<i8")),
    "valid_scalar_f64.npy": npy_bytes(floats((), "<f8")),
    "valid_empty_f32.npy": npy_bytes(np.zeros((0, 3), "<f4")),
    "valid_v2_f32.npy": npy_bytes(floats((2, 2), "<f4"), version=(2, 0)),
    "valid_v3_i64.npy": npy_bytes(ints((3,), "<i8"), version=(3, 0)),
    "valid_f16.npy": npy_bytes(floats((4,), "<f2")),
    "valid_bool.npy": npy_bytes(rng.integers(0, 2, size=(2, 3)).astype("|b1")),
    "valid_u32.npy": npy_bytes(ints((4,), "<u4")),
    "bad_magic.npy": b"\x93NUMPZ" + valid_f32[6:],
    "bad_version.npy": valid_f32[:6] + b"\x04\x00" + valid_f32[8:],
    "bad_truncated_header.npy": valid_f32[:40],
    "bad_truncated_data.npy": valid_f32[:-5],
    "bad_trailing_data.npy": valid_f32 + b"\x00\x00\x00\x00",
    "bad_dict.npy": header_file("{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", b"\x00" * 8),
    "bad_fortran.npy": npy_bytes(np.asfortranarray(floats((2, 3), "<f4"))),
    "bad_big_endian.npy": npy_bytes(floats((4,), ">f4")),
    "bad_dtype_c8.npy": header_file("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", b"\x00" * 16),
    "bad_huge_shape.npy": header_file(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", b"\x00" * 16),
}
for name, contents in seeds.items():
    assert len(contents) < 1024, name
    write(name, contents)
