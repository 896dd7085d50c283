#!/usr/bin/env python3
"""Writes a damaged copy of a .safetensors file, for error tests.

  damage_safetensors.py corrupt-header IN OUT      JSON header made invalid
  damage_safetensors.py drop NAME IN OUT           tensor NAME removed (header and bytes; the rest still tile the data)
  damage_safetensors.py reshape NAME DIMS IN OUT   NAME's shape set to DIMS (e.g. 8x8), same bytes
  damage_safetensors.py truncate BYTES IN OUT      only the first BYTES bytes kept
  damage_safetensors.py nan NAME IN OUT            NAME's first element (F32) set to NaN
"""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def write(path, header, body):
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + body)


def main(args):
    action = args[0]
    if action == "corrupt-header":
        data = bytearray(open(args[1], "rb").read())
        data[8:20] = b'{"oops": [1,'
        open(args[2], "wb").write(data)
    elif action == "drop":
        header, body = read(args[2])
        begin, end = header.pop(args[1])["data_offsets"]
        for entry in header.values():
            if isinstance(entry, dict) and "data_offsets" in entry and entry["data_offsets"][0] >= end:
                entry["data_offsets"] = [offset - (end - begin) for offset in entry["data_offsets"]]
        write(args[3], header, body[:begin] + body[end:])
    elif action == "reshape":
        header, body = read(args[3])
        header[args[1]]["shape"] = [int(d) for d in args[2].split("x")]
        write(args[4], header, body)
    elif action == "nan":
        header, body = read(args[2])
        begin = header[args[1]]["data_offsets"][0]
        body = body[:begin] + struct.pack("<f", float("nan")) + body[begin + 4 :]
        write(args[3], header, body)
    elif action == "truncate":
        open(args[3], "wb").write(open(args[2], "rb").read()[: int(args[1])])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
