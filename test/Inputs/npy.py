#!/usr/bin/env python3
"""Small .npy files for tests, without numpy.

  npy.py write DTYPE SHAPE OUT VALUE...   DTYPE f4, f8, f2, i1, i2, i4, i8, u1, u2, u4, u8 or b1;
                                          SHAPE like 2x3 or scalar
  npy.py print IN                         the values, one per line (repr of a Python float or int)
"""
import struct
import sys

FORMATS = {"f4": "f", "f8": "d", "i4": "i", "i8": "q", "f2": "e", "i1": "b", "i2": "h", "u1": "B", "u2": "H",
           "u4": "I", "u8": "Q", "b1": "?"}


def write(dtype, shape, path, values):
    dims = () if shape == "scalar" else tuple(int(d) for d in shape.split("x"))
    count = 1
    for d in dims:
        count *= d
    if len(values) != count:
        sys.exit(f"npy.py: shape {shape} holds {count} values, not {len(values)}")
    convert = float if dtype.startswith("f") else int
    body = struct.pack("<" + FORMATS[dtype] * count, *(convert(v) for v in values))
    shape_text = "(" + "".join(f"{d}, " for d in dims).rstrip(" ") + ")" if len(dims) != 1 else f"({dims[0]},)"
    order = "|" if struct.calcsize(FORMATS[dtype]) == 1 else "<"  # as numpy writes one-byte types
    header = "{'descr': '%s%s', 'fortran_order': False, 'shape': %s, }" % (order, dtype, shape_text)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as out:
        out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + body)


def read(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack("<H", data[8:10])
    header = data[10 : 10 + length].decode()
    dtype = header.split("'descr': '")[1][1:3]
    body = data[10 + length :]
    size = struct.calcsize(FORMATS[dtype])
    return struct.unpack("<" + FORMATS[dtype] * (len(body) // size), body)


def main(args):
    if args[:1] == ["write"] and len(args) >= 4:
        write(args[1], args[2], args[3], args[4:])
    elif args[:1] == ["print"] and len(args) == 2:
        for value in read(args[1]):
            print(repr(value))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
