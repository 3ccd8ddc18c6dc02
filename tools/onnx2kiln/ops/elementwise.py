"""Elementwise ops: unary math and activations, binary math with broadcasting, PRelu, Clip, Cast,
comparisons, logical ops, Where, Mod."""
import math

import numpy as np

from ..fold import is_sym_array
from ..model import str_attr
from ..registry import converter
from ..shapes import bcast

# ONNX op -> kiln op, for ops that map one to one with no attributes.
UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Sqrt": "sqrt", "Erf": "erf",
         "Exp": "exp", "Log": "log", "Neg": "neg", "Abs": "abs", "Reciprocal": "reciprocal",
         "Softplus": "softplus", "HardSwish": "hardswish", "Mish": "mish", "Sin": "sin",
         "Cos": "cos"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Max": "max",
          "Min": "min"}


@converter(*UNARY)
def unary(cx, n, at):
    cx.emit(n, UNARY[n.op_type], [cx.act(n, n.input[0])], out=n.output[0])


@converter(*BINARY)
def binary(cx, n, at):
    """Broadcasting binary ops; a constant operand takes the other operand's dtype."""
    if len(n.input) != 2:
        cx.fail(n, f"expected 2 inputs, found {len(n.input)}")
    a, b = n.input
    dt = cx.act_dtype(a, b)
    if n.op_type in ("Max", "Min") and dt == "f16" and _tiny_scalar(cx, a, b):
        # max(x, eps) as Clip with a tiny bound: computed and kept in f32 (_f32_copy).
        at_, bt_ = (_f32_copy(cx, n, cx.act(n, t)) if cx.is_act(t) else cx.act(n, t, "f32")
                    for t in (a, b))
    else:
        at_, bt_ = cx.act(n, a, dt), cx.act(n, b, dt)
    cx.emit(n, BINARY[n.op_type], [at_, bt_], out=n.output[0],
            shape=bcast(cx.shp(at_), cx.shp(bt_)))


@converter("Gelu")
def gelu(cx, n, at):
    approx = str_attr(at, "approximate", "none")
    if approx not in ("none", "tanh"):
        cx.fail(n, f"approximate '{approx}': expected 'none' or 'tanh'")
    cx.emit(n, "gelu", [cx.act(n, n.input[0])], {"approximate": approx}, out=n.output[0])


@converter("HardSigmoid")
def hard_sigmoid(cx, n, at):
    cx.emit(n, "hardsigmoid", [cx.act(n, n.input[0])],
            {"alpha": float(at.get("alpha", 0.2)), "beta": float(at.get("beta", 0.5))},
            out=n.output[0])


@converter("PRelu")
def prelu(cx, n, at):
    """The slope broadcasts to x (kiln checks that it does); a constant slope takes x's dtype."""
    if len(n.input) != 2:
        cx.fail(n, f"expected 2 inputs, found {len(n.input)}")
    xt = cx.act(n, n.input[0])
    st = cx.act(n, n.input[1], cx.dtype[xt])
    cx.emit(n, "prelu", [xt, st], out=n.output[0])


@converter("LeakyRelu")
def leaky_relu(cx, n, at):
    cx.emit(n, "leaky_relu", [cx.act(n, n.input[0])], {"alpha": float(at.get("alpha", 0.01))},
            out=n.output[0])


@converter("Elu")
def elu(cx, n, at):
    cx.emit(n, "elu", [cx.act(n, n.input[0])], {"alpha": float(at.get("alpha", 1.0))},
            out=n.output[0])


def _bound(v):
    """A clamp bound for the graph file: infinities as strings."""
    return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")


def _clip_bound(cx, n, i, what):
    """Clip's bound input i (min or max): a constant scalar."""
    v = np.asarray(cx.const(n, n.input[i], what))
    if v.size != 1:
        cx.fail(n, f"{what} '{n.input[i]}' has shape {list(v.shape)}; expected a scalar")
    return float(v.reshape(()))


@converter("Clip")
def clip(cx, n, at):
    """Bounds as attributes (opset < 11) or constant inputs; a missing one is unbounded. A min
    above max gives max everywhere (the spec's rule, and min(max(x, lo), hi)): clamp(hi, hi)."""
    xt = cx.act(n, n.input[0])
    lo, hi = float(at.get("min", -math.inf)), float(at.get("max", math.inf))
    if len(n.input) > 1 and n.input[1]:
        lo = _clip_bound(cx, n, 1, "min")
    if len(n.input) > 2 and n.input[2]:
        hi = _clip_bound(cx, n, 2, "max")
    if math.isnan(lo) or math.isnan(hi):
        cx.fail(n, f"a NaN bound (min {lo}, max {hi}) is not supported")
    lo = min(lo, hi)
    if cx.dtype[xt] == "f16" and (_tiny(lo) or _tiny(hi)):
        xt = _f32_copy(cx, n, xt)
    cx.emit(n, "clamp", [xt], {"min": _bound(float(lo)), "max": _bound(float(hi))},
            out=n.output[0])


def _tiny_scalar(cx, a, b):
    """Whether a conversion-time scalar operand of a, b is nonzero and below f16's normal range."""
    for t in (a, b):
        v = cx.consts.get(t) if not cx.is_act(t) else None
        if v is not None and not is_sym_array(v) and np.asarray(v).size == 1:
            if _tiny(float(np.asarray(v, dtype=np.float64).reshape(()))):
                return True
    return False


# f16's smallest normal number. A bound below it is flushed (1e-12 is 0 in f16) or kept with a
# few bits at most.
F16_MIN_NORMAL = 2.0 ** -14


def _tiny(v):
    return 0 < abs(v) < F16_MIN_NORMAL


def _f32_copy(cx, n, xt):
    """f16 tensor xt cast to f32, for a clamp to a bound that f16 cannot hold: the epsilon of
    F.normalize's x / max(||x||, 1e-12) must survive, or a zero row (Swin V2's padded window
    tokens) divides 0 by 0. The cast and the clamp fuse into the producer's epilogue; the f32
    result is the small reduced tensor, and its consumer computes in f32 anyway."""
    return cx.emit(n, "cast", [xt], {"dtype": "f32"}, dtype="f32", suffix="f32")


@converter("Cast")
def cast(cx, n, at):
    """To f32/f16/bf16 (after --dtype), i32, i64 or bool; a cast to the tensor's own dtype is
    dropped."""
    xt = cx.act(n, n.input[0])
    to = cx.tdtype(at["to"], f"{cx.where(n)}: the cast target")
    if to == cx.dtype[xt]:
        cx.alias(n, xt)
        return
    cx.emit(n, "cast", [xt], {"dtype": to}, out=n.output[0], dtype=to)


# Comparisons (a bool result) and logical ops: broadcasting, a constant operand takes the other
# operand's dtype (logical operands are bool).
COMPARE = {"Equal": "eq", "Less": "lt", "LessOrEqual": "le", "Greater": "gt",
           "GreaterOrEqual": "ge"}
LOGICAL = {"And": "and", "Or": "or", "Xor": "xor"}


@converter(*COMPARE, *LOGICAL)
def compare_logical(cx, n, at):
    if len(n.input) != 2:
        cx.fail(n, f"expected 2 inputs, found {len(n.input)}")
    a, b = n.input
    dt = "bool" if n.op_type in LOGICAL else cx.act_dtype(a, b)
    if dt is None:  # both constant but not folded (a non-numeric case): keep their own type
        dt = cx.natural_dtype(a)
    at_, bt_ = cx.act(n, a, dt), cx.act(n, b, dt)
    op = COMPARE.get(n.op_type) or LOGICAL[n.op_type]
    cx.emit(n, op, [at_, bt_], out=n.output[0], shape=bcast(cx.shp(at_), cx.shp(bt_)),
            dtype="bool")


@converter("Not")
def logical_not(cx, n, at):
    cx.emit(n, "not", [cx.act(n, n.input[0], "bool")], out=n.output[0], dtype="bool")


@converter("Where")
def where(cx, n, at):
    """cond ? x : y with all three broadcast; constant values take the other value's dtype."""
    if len(n.input) != 3:
        cx.fail(n, f"expected 3 inputs, found {len(n.input)}")
    c, x, y = n.input
    dt = cx.act_dtype(x, y) or cx.natural_dtype(x)
    ct, xt, yt = cx.act(n, c, "bool"), cx.act(n, x, dt), cx.act(n, y, dt)
    shape = bcast(bcast(cx.shp(ct), cx.shp(xt)), cx.shp(yt))
    cx.emit(n, "where", [ct, xt, yt], out=n.output[0], shape=shape, dtype=cx.dtype[xt])


@converter("Mod")
def mod(cx, n, at):
    """ONNX Mod: fmod 0 (the divisor's sign; integers only in ONNX) or 1 (the dividend's)."""
    if len(n.input) != 2:
        cx.fail(n, f"expected 2 inputs, found {len(n.input)}")
    a, b = n.input
    dt = cx.act_dtype(a, b)
    at_, bt_ = cx.act(n, a, dt), cx.act(n, b, dt)
    cx.emit(n, "mod", [at_, bt_], {"fmod": int(at.get("fmod", 0))}, out=n.output[0],
            shape=bcast(cx.shp(at_), cx.shp(bt_)))
