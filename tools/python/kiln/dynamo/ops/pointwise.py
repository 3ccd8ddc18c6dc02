"""Elementwise ops: activations, math, comparisons, where, casts."""
import math

import torch

from ..registry import CONVERTERS, Unsupported, _axis, converter, need  # noqa: F401


# ---- pointwise
_UNARY = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu", "exp": "exp",
          "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "neg": "neg",
          "reciprocal": "reciprocal", "erf": "erf", "sin": "sin", "cos": "cos",
          "hardswish": "hardswish", "mish": "mish", "logical_not": "not", "bitwise_not": "not"}
for _a, _k in _UNARY.items():
    CONVERTERS[_a] = (lambda k: lambda cx, n, a, kw: cx.op(k, [a[0]]))(_k)


@converter("gelu")
def _gelu(cx, n, a, kw):
    return cx.op("gelu", [a[0]], {"approximate": kw.get("approximate", "none")})


@converter("hardsigmoid")
def _hardsigmoid(cx, n, a, kw):
    return cx.op("hardsigmoid", [a[0]], {"alpha": 1.0 / 6.0, "beta": 0.5})


@converter("leaky_relu")
def _leaky(cx, n, a, kw):
    return cx.op("leaky_relu", [a[0]], {"alpha": float(a[1] if len(a) > 1 else 0.01)})


@converter("elu")
def _elu(cx, n, a, kw):
    need(all(float(v) == 1.0 for v in a[2:4]), "elu with scale/input_scale other than 1")
    return cx.op("elu", [a[0]], {"alpha": float(a[1] if len(a) > 1 else 1.0)})


@converter("softplus")
def _softplus(cx, n, a, kw):
    need(len(a) < 2 or float(a[1]) == 1.0, "softplus with beta != 1")
    need(len(a) < 3 or float(a[2]) == 20.0, "softplus with threshold != 20")
    return cx.op("softplus", [a[0]])


@converter("clamp", "hardtanh", "clamp_min", "clamp_max")
def _clamp(cx, n, a, kw):
    name = cx.target_name(n)
    lo, hi = -math.inf, math.inf
    if name == "hardtanh":
        lo, hi = (a[1] if len(a) > 1 else -1.0), (a[2] if len(a) > 2 else 1.0)
    elif name == "clamp_min":
        lo = a[1]
    elif name == "clamp_max":
        hi = a[1]
    else:
        lo = a[1] if len(a) > 1 and a[1] is not None else kw.get("min", -math.inf)
        hi = a[2] if len(a) > 2 and a[2] is not None else kw.get("max", math.inf)
    need(not cx.is_tensor(lo) and not cx.is_tensor(hi), "clamp with tensor bounds")
    lo = -math.inf if lo is None else lo
    hi = math.inf if hi is None else hi
    x = a[0]
    if cx.dtype_of_tensor(x) == "f16" and (_tiny(lo) or _tiny(hi)):
        # F.normalize's max(||x||, 1e-12): the bound is 0 in f16, and a zero row divides 0 by 0
        # (eager f16 gives NaN). Clamped in f32 and kept so: the binary op reading it computes
        # in f32 (_binary) and rounds its result once (as onnx2kiln does for the ONNX Clip).
        x = cx.op("cast", [x], {"dtype": "f32"})
    return cx.op("clamp", [x], {"min": float(lo), "max": float(hi)})


# f16's smallest normal number: a bound below it is flushed (1e-12 is 0 in f16).
F16_MIN_NORMAL = 2.0 ** -14


def _tiny(v):
    return 0 < abs(float(v)) < F16_MIN_NORMAL


_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max",
           "minimum": "min", "pow": "pow", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le",
           "gt": "gt", "ge": "ge", "logical_and": "and", "logical_or": "or",
           "logical_xor": "xor", "bitwise_and": "and", "bitwise_or": "or", "remainder": "mod"}


def _binary(kop):
    def fn(cx, n, a, kw):
        x, y = a[0], a[1]
        if kop in ("add", "sub"):
            alpha = kw.get("alpha", a[2] if len(a) > 2 else 1)
            if alpha != 1:
                y = cx.op("mul", [cx.as_tensor(y, like=n), cx.scalar(alpha, n)])
                x = cx.as_tensor(x, like=n)
        if kop == "div":
            need(kw.get("rounding_mode") is None, "div with a rounding mode")
        if kop in ("and", "or", "xor") and cx.dtype_of(n) != "bool":
            raise Unsupported("bitwise ops on integers")
        # a Python number takes the dtype of the tensor operand (a comparison's result is bool)
        like = x if cx.is_tensor(x) else y if cx.is_tensor(y) else n
        xs = [cx.as_tensor(v, like=like, operand=True) for v in (x, y)]
        dts = {cx.dtype_of_tensor(t) for t in xs}
        if len(dts) == 2 and dts <= {"f32", "f16", "bf16"} and "f32" in dts:
            # an operand kept in f32 (_clamp's tiny bound): computed in f32, rounded once
            xs = [t if cx.dtype_of_tensor(t) == "f32" else cx.op("cast", [t], {"dtype": "f32"})
                  for t in xs]
            out, want = cx.op(kop, xs), cx.dtype_of(n)
            return out if want == "f32" else cx.op("cast", [out], {"dtype": want})
        return cx.op(kop, xs)
    return fn


for _a, _k in _BINARY.items():
    CONVERTERS[_a] = _binary(_k)


@converter("scalar_tensor")
def _scalar_tensor(cx, n, a, kw):
    return cx.scalar(a[0], n)


@converter("where")
def _where(cx, n, a, kw):
    return cx.op("where", [a[0], cx.as_tensor(a[1], like=n), cx.as_tensor(a[2], like=n)])


@converter("_to_copy", "to")
def _to_copy(cx, n, a, kw):
    """A cast. A move between the host and the GPU is none inside a kiln graph, which holds every
    value on its device: the partition's inputs and outputs go where the program holds them
    (KilnPart: host inputs copied in, host outputs handed back on the host). `cuda` and
    `cuda:0` are one device."""
    dev = kw.get("device")
    if dev is not None:
        dev, src = torch.device(dev), cx.val(n.args[0]).device
        need(dev.type in ("cpu", "cuda") and src.type in ("cpu", "cuda") and
             (dev.type != src.type or dev.index in (None, src.index)),
             "a copy to another device")
    dt = cx.dtype_of(n)
    src = cx.dtype_of(n.args[0])
    return a[0] if dt == src else cx.op("cast", [a[0]], {"dtype": dt})


@converter("copy")
def _copy(cx, n, a, kw):
    """copy(self, src): src's values in self's shape and dtype (functionalized `self[...] = src`;
    self's own values are not read). A one-element src may live on the CPU: `t[i:j] = 3` on a
    CUDA tensor copies a lifted CPU scalar, a value kiln's graph holds like any constant."""
    dst, s = cx.val(n.args[0]), cx.val(n.args[1])
    need(str(dst.device) == str(s.device) or (s.device.type == "cpu" and s.numel() == 1),
         "a copy across devices")
    src, shape = a[1], cx.out_shape(n)
    if list(src.shape) != list(shape):
        src = cx.op("expand", [src], {"shape": shape})
    dt = cx.dtype_of(n)
    return src if dt == cx.dtype_of(n.args[1]) else cx.op("cast", [src], {"dtype": dt})


@converter("clone", "contiguous", "alias", "detach", "lift_fresh_copy")
def _identity(cx, n, a, kw):
    return a[0]


@converter("full_like", "zeros_like", "ones_like")
def _full_like(cx, n, a, kw):
    name = cx.target_name(n)
    v = a[1] if name == "full_like" else (0 if name == "zeros_like" else 1)
    need(not cx.is_tensor(v), "full_like with a tensor value")
    return cx.op("expand", [cx.scalar(v, n, rank=len(a[0].shape))], {"shape": cx.out_shape(n)})
