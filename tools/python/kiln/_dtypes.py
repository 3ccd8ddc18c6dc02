"""dtype names between kiln ("f32", "bf16", ...), numpy and torch, and host arrays as kiln's
bytes (row-major logical order). numpy has no bfloat16: bf16 data travels as uint16 bit patterns
and comes back as float32."""
import numpy as np

from . import _kiln

NUMPY = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "bool": np.bool_}
_FROM_NUMPY = {np.dtype(v): k for k, v in NUMPY.items()}


def from_numpy_dtype(dt, where="array"):
    dt = np.dtype(dt)
    if dt in _FROM_NUMPY:
        return _FROM_NUMPY[dt]
    raise _kiln.UserError(f"{where}: numpy dtype {dt} has no kiln dtype (f32, f16, bf16 as "
                          "uint16 bits, i32, i64, bool)")


def torch_dtypes():
    import torch
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
            "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}


def f32_to_bf16_bits(a):
    """float32 values rounded to bfloat16 (to nearest even), as uint16 bit patterns."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        rounded = np.where(nan, np.uint16(0x7FC0), rounded)
    return rounded


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _torch_to_numpy(t):
    import torch
    t = t.detach()
    if t.device.type != "cpu":
        raise _kiln.UserError(f"a {t.device} tensor where host data is needed: .cpu() it first")
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16), "bf16"
    name = {v: k for k, v in torch_dtypes().items()}.get(t.dtype)
    if name is None:
        if t.dtype == torch.float64:
            return t.contiguous().numpy(), None
        raise _kiln.UserError(f"torch dtype {t.dtype} has no kiln dtype")
    return t.contiguous().numpy(), name


def numpy_bytes(data, dtype=None, where="array"):
    """(a C-contiguous numpy array holding `data` as kiln dtype `dtype`, that dtype name)."""
    src = None
    if type(data).__module__.startswith("torch"):
        arr, src = _torch_to_numpy(data)
    else:
        arr = np.asarray(data)
        if arr.dtype != np.float64 and arr.dtype != np.uint16:
            src = from_numpy_dtype(arr.dtype, where)
    if dtype is None:
        dtype = src or ("f32" if arr.dtype.kind == "f" else None)
        if dtype is None:
            raise _kiln.UserError(f"{where}: numpy dtype {arr.dtype}: say which kiln dtype "
                                  "(dtype=...)")
    if dtype == src:
        return np.ascontiguousarray(arr), dtype
    values = bf16_bits_to_f32(arr) if src == "bf16" else arr
    if dtype == "bf16":
        return f32_to_bf16_bits(values.astype(np.float32)), dtype
    if dtype not in NUMPY:
        raise _kiln.UserError(f"{where}: unknown dtype '{dtype}' (expected f32, f16, bf16, i32, "
                              "i64 or bool)")
    return np.ascontiguousarray(values.astype(NUMPY[dtype])), dtype


def to_numpy(dtype, shape, data):
    """kiln's (dtype, shape, bytes) as a numpy array (bf16 as float32)."""
    if dtype == "bf16":
        return bf16_bits_to_f32(np.frombuffer(data, dtype=np.uint16)).reshape(shape)
    return np.frombuffer(data, dtype=NUMPY[dtype]).reshape(shape).copy()
