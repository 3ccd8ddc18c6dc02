"""Reductions (ReduceMean/Sum/Max/Min/L2/Prod, ArgMax/ArgMin), Softmax, LogSoftmax and CumSum."""
import numpy as np

from ..fold import is_sym_array
from ..registry import converter
from ..shapes import reduced, reshape_shape
from .movement import dims_target, flatten_target

REDUCE = {"ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max",
          "ReduceMin": "reduce_min", "ReduceL2": "reduce_l2", "ReduceProd": "reduce_prod"}


@converter(*REDUCE)
def reduce(cx, n, at):
    """`axes` as an attribute or (opset 13/18 on) a constant input; no axes reduces all dims,
    unless noop_with_empty_axes makes the node an alias."""
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    r = cx.rank(n, xt)
    axes = at.get("axes")
    if axes is None and len(n.input) > 1 and n.input[1]:
        axes = [int(v) for v in np.asarray(cx.const(n, n.input[1], "axes")).flatten()]
    axes = list(axes or [])
    keep = cx.flag(n, at, "keepdims", 1)
    if not axes and cx.flag(n, at, "noop_with_empty_axes", 0):
        cx.alias(n, xt)
        return
    red = {cx.axis(n, a, r, "axes entry") for a in axes} if axes else set(range(r))
    cx.emit(n, REDUCE[n.op_type], [xt], {"axes": sorted(red), "keepdims": keep}, out=n.output[0],
            shape=reduced(s, red, keep))


@converter("ArgMax", "ArgMin")
def arg_reduce(cx, n, at):
    """The i64 index of the max / min along `axis` (first, or last with select_last_index), as
    onnxruntime picks it where values tie or are NaN (docs/graph_format.md)."""
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    r = cx.rank(n, xt)
    axis = cx.axis(n, int(at.get("axis", 0)), r)
    keep = cx.flag(n, at, "keepdims", 1)
    last = cx.flag(n, at, "select_last_index", 0)
    op = "argmax" if n.op_type == "ArgMax" else "argmin"
    cx.emit(n, op, [xt], {"axis": axis, "keepdims": keep, "select_last_index": last},
            out=n.output[0], shape=reduced(s, {axis}, keep), dtype="i64")


@converter("Softmax", "LogSoftmax")
def softmax(cx, n, at):
    """Opset >= 13: over `axis`. Before: over the flattened dims [axis, rank), which is a
    reshape to 2-D, a softmax over dim 1 and a reshape back (unless axis is the last dim)."""
    op = "softmax" if n.op_type == "Softmax" else "log_softmax"
    xt = cx.act(n, n.input[0])
    r = cx.rank(n, xt)
    axis = cx.axis(n, at.get("axis", -1 if cx.opset >= 13 else 1), r)
    if cx.opset >= 13 or axis == r - 1:
        cx.emit(n, op, [xt], {"axis": axis}, out=n.output[0])
        return
    s = cx.shp(xt)
    flat = flatten_target(cx, n, s, axis)
    f = cx.emit(n, "reshape", [xt], {"shape": flat}, shape=reshape_shape(s, flat),
                suffix="flatten")
    sm = cx.emit(n, op, [f], {"axis": 1})
    back = dims_target(cx, n, s)
    cx.emit(n, "reshape", [sm], {"shape": back}, out=n.output[0], shape=s, suffix="unflatten")


@converter("CumSum")
def cumsum(cx, n, at):
    """The axis is an input and must be a constant (a scalar or one value)."""
    if len(n.input) != 2 or not n.input[1]:
        cx.fail(n, "expected 2 inputs (x, axis)")
    xt = cx.act(n, n.input[0])
    ax = np.asarray(cx.const(n, n.input[1], "the axis input"))
    if is_sym_array(ax) or ax.size != 1 or not np.issubdtype(ax.dtype, np.integer):
        cx.fail(n, f"the axis input must be one constant integer, found {ax.tolist()}")
    axis = cx.axis(n, int(ax.reshape(())), cx.rank(n, xt))
    attrs = {"axis": axis, "exclusive": int(at.get("exclusive", 0)),
             "reverse": int(at.get("reverse", 0))}
    dt = cx.dtype[xt]
    if dt in ("i32", "i64"):
        xt = _counts_as_f32(cx, n, xt, axis)
    y = cx.emit(n, "cumsum", [xt], attrs, out=None if dt in ("i32", "i64") else n.output[0])
    if dt in ("i32", "i64"):
        cx.emit(n, "cast", [y], {"dtype": dt}, out=n.output[0], dtype=dt, suffix="int")


# f32 holds every integer up to 2^24 exactly.
F32_EXACT = 2 ** 24


def _counts_as_f32(cx, n, xt, axis):
    """kiln's cumsum is floating: an integer CumSum is computed in f32 when its input is a cast
    of a bool (0 / 1 values: transformers' packed-sequence ids, GPT-2), so that every partial
    sum is a count at most the axis length, exact in f32 below 2^24 (a static axis longer than
    that is refused; a symbolic one is the model's sequence length). Other integer inputs are
    refused: their sums could round."""
    src = cx.producer(n.input[0])
    ok = (src is not None and src.op_type == "Cast" and src.input[0] in cx.tmap
          and cx.dtype[cx.tmap[src.input[0]]] == "bool")
    if not ok:
        cx.fail(n, f"an integer CumSum ({cx.dtype[xt]}) is supported only over a cast of a bool "
                   f"tensor (kiln's cumsum is floating; these counts are exact in f32)")
    d = cx.shp(xt)[axis]
    if isinstance(d, int) and d > F32_EXACT:
        cx.fail(n, f"an integer CumSum over {d} elements could round in f32 (at most {F32_EXACT})")
    return cx.emit(n, "cast", [cx.tmap[src.input[0]]], {"dtype": "f32"}, dtype="f32",
                   suffix="counts")
