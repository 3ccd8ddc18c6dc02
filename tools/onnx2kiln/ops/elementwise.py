"""Elementwise ops: unary math and activations, binary math with broadcasting, Clip, Cast."""
import math

import numpy as np

from ..model import str_attr
from ..registry import converter
from ..shapes import bcast

# ONNX op -> kiln op, for ops that map one to one with no attributes.
UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Sqrt": "sqrt", "Erf": "erf",
         "Exp": "exp", "Log": "log", "Neg": "neg", "Abs": "abs", "Reciprocal": "reciprocal",
         "Softplus": "softplus"}
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
    at_, bt_ = cx.act(n, a, dt), cx.act(n, b, dt)
    cx.emit(n, BINARY[n.op_type], [at_, bt_], out=n.output[0],
            shape=bcast(cx.shp(at_), cx.shp(bt_)))


@converter("Gelu")
def gelu(cx, n, at):
    approx = str_attr(at, "approximate", "none")
    if approx not in ("none", "tanh"):
        cx.fail(n, f"approximate '{approx}': expected 'none' or 'tanh'")
    cx.emit(n, "gelu", [cx.act(n, n.input[0])], {"approximate": approx}, out=n.output[0])


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
    cx.emit(n, "clamp", [xt], {"min": _bound(float(lo)), "max": _bound(float(hi))},
            out=n.output[0])


@converter("Cast")
def cast(cx, n, at):
    """Float targets only (after --dtype); a cast to the tensor's own dtype is dropped."""
    xt = cx.act(n, n.input[0])
    to = cx.fdtype(at["to"], f"{cx.where(n)}: the cast target")
    if to == cx.dtype[xt]:
        cx.alias(n, xt)
        return
    cx.emit(n, "cast", [xt], {"dtype": to}, out=n.output[0], dtype=to)
