#!/usr/bin/env python3
"""Writes the helper .safetensors files that some bad graphs in this folder refer to.

Standard library only; rerun after changing it: python3 tests/bad_graphs/make_safetensors.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, header, data, length=None):
    h = json.dumps(header, separators=(",", ":")) if not isinstance(header, str) else header
    h = h.encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    n = len(h) if length is None else length
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(struct.pack("<Q", n) + h + data)


def f32(values):
    return struct.pack("<%df" % len(values), *values)


# A good file: w is F32 [4, 2, 3, 3], w16 is F16 [4].
w = [0.01 * i for i in range(72)]
write("weights.safetensors", {
    "w": {"dtype": "F32", "shape": [4, 2, 3, 3], "data_offsets": [0, 288]},
    "w16": {"dtype": "F16", "shape": [4], "data_offsets": [288, 296]},
}, f32(w) + struct.pack("<4e", 1.0, 2.0, 3.0, 4.0))

# Cut short: the header promises 288 bytes of data, the file has 100.
write("short.safetensors", {"w": {"dtype": "F32", "shape": [4, 2, 3, 3], "data_offsets": [0, 288]}},
      f32(w)[:100])

# Two tensors sharing bytes.
write("overlap.safetensors", {
    "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
    "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
}, f32([1, 2, 3, 4, 5, 6]))

# A dtype kiln does not read.
write("f64.safetensors", {"w": {"dtype": "F64", "shape": [4], "data_offsets": [0, 32]}},
      struct.pack("<4d", 1, 2, 3, 4))

# A header that is not JSON.
write("bad_header.safetensors", '{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]',
      f32([1, 2, 3, 4]))
