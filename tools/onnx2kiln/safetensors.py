"""The safetensors reader and writer of kiln's Python tooling.

The importer writes its weights with it; the tests, tools/export_torchvision.py and the bench/
scripts read `kiln run --output` files and write `kiln run --inputs` files with it. It handles the
dtypes kiln reads and writes (F32, F16, BF16, I32, I64, BOOL), little endian, logical row-major shapes.

It lives in the onnx2kiln package (not beside it in tools/) so that the installed package,
share/kiln/onnx2kiln/, is self-contained. Importing it does not import the converter (nor onnx).
"""
import json
import struct

import numpy as np

# kiln dtype -> (safetensors dtype, bytes per element)
DTYPES = {"f32": ("F32", 4), "f16": ("F16", 2), "bf16": ("BF16", 2), "i32": ("I32", 4),
          "i64": ("I64", 8), "bool": ("BOOL", 1)}


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, rounding to nearest even, NaN kept quiet."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        rounded = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)
    return rounded


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def tensor_bytes(arr, dtype):
    """The little-endian bytes of `arr` (any float array) stored as kiln dtype `dtype`."""
    if dtype == "f32":
        return np.ascontiguousarray(arr, dtype="<f4").tobytes()
    if dtype == "f16":
        return np.ascontiguousarray(arr, dtype="<f2").tobytes()
    if dtype == "bf16":
        return f32_to_bf16_bits(np.asarray(arr, dtype=np.float32)).astype("<u2").tobytes()
    if dtype == "i32":
        return np.ascontiguousarray(arr, dtype="<i4").tobytes()
    if dtype == "i64":
        return np.ascontiguousarray(arr, dtype="<i8").tobytes()
    if dtype == "bool":
        return np.ascontiguousarray(np.asarray(arr) != 0, dtype=np.uint8).tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors):
    """tensors: {name: (kiln dtype, numpy array)}. Writes them sorted by name, contiguously, after
    a compact JSON header padded with spaces to a multiple of 8 bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        data = tensor_bytes(arr, dtype)
        header[name] = {"dtype": DTYPES[dtype][0], "shape": [int(d) for d in np.shape(arr)],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """{name: numpy array} from a safetensors file: float32 for F32/F16/BF16 tensors, int32,
    int64 and bool arrays for I32, I64 and BOOL ones."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif e["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            a = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
        elif e["dtype"] in ("I32", "I64", "BOOL"):
            a = {"I32": lambda: np.frombuffer(buf, dtype="<i4").astype(np.int32),
                 "I64": lambda: np.frombuffer(buf, dtype="<i8").astype(np.int64),
                 "BOOL": lambda: np.frombuffer(buf, dtype=np.uint8) != 0}[e["dtype"]]()
            out[name] = a.reshape(e["shape"])
            continue
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {e['dtype']}")
        out[name] = a.reshape(e["shape"]).astype(np.float32)
    return out
