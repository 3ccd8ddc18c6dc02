"""Gather and GatherElements with a run-time operand (on constants both fold, fold.py).

Gather(weight initializer [V, D], input_ids [N, S]) -- an embedding lookup -- becomes a kiln
`gather` reading the weight as a constant. A constant index that selects one position (a scalar)
or a run of consecutive positions (a 1-D arithmetic range of step 1) becomes a `slice` (and a
`reshape` dropping the axis for a scalar): views and copies kiln already plans well. Constant
indices out of range are refused here, as onnxruntime refuses them."""
import numpy as np

from ..registry import converter


def _data(cx, n, t):
    """The kiln tensor of data input t: a constant keeps its integer / bool dtype as data."""
    return cx.act(n, t, cx.natural_dtype(t) if not cx.is_act(t) else None)


def _indices(cx, n, t):
    """The kiln tensor of index input t (i32 / i64; a constant keeps its integer dtype)."""
    if cx.is_act(t):
        it = cx.act(n, t)
        if cx.dtype[it] not in ("i32", "i64"):
            cx.fail(n, f"the indices '{t}' are {cx.dtype[it]}; Gather takes int32 or int64 "
                       f"indices")
        return it
    dt = cx.natural_dtype(t)
    if dt not in ("i32", "i64"):
        cx.fail(n, f"the indices '{t}' must be integers (int32 or int64)")
    return cx.act(n, t, dt)


def _checked(cx, n, idx, dim, axis):
    """Constant indices normalized into [0, dim) (dim an int), or a refusal naming the first
    index out of range."""
    flat = idx.astype(np.int64).flatten()
    bad = np.nonzero((flat < -dim) | (flat >= dim))[0]
    if bad.size:
        pos = [int(p) for p in np.unravel_index(int(bad[0]), idx.shape)] if idx.ndim else []
        cx.fail(n, f"index out of range: indices{pos} is {int(flat[bad[0]])}, outside "
                   f"[{-dim}, {dim}) for axis {axis} (size {dim})")
    return np.where(flat < 0, flat + dim, flat).reshape(idx.shape)


def _as_slice(cx, n, xt, s, axis, idx):
    """A constant scalar or step-1 range index over a static axis as slice (+ reshape)."""
    v = _checked(cx, n, idx, s[axis], axis)
    flat = v.flatten()
    if v.ndim > 1 or (v.ndim == 1 and np.any(np.diff(flat) != 1)):
        return False
    start, length = int(flat[0]), int(flat.size)
    out = list(s)
    out[axis] = length
    if v.ndim == 1 and start == 0 and length == s[axis]:  # the whole axis in order
        cx.alias(n, xt)
        return True
    attrs = {"starts": [start], "ends": [start + length], "axes": [axis], "steps": [1]}
    if v.ndim == 1:
        cx.emit(n, "slice", [xt], attrs, out=n.output[0], shape=out)
        return True
    if None in s[:axis] + s[axis + 1:]:
        return False
    st = cx.emit(n, "slice", [xt], attrs, shape=out, suffix="slice")
    target = s[:axis] + s[axis + 1:]
    cx.emit(n, "reshape", [st], {"shape": target}, out=n.output[0], shape=target)
    return True


@converter("Gather")
def gather(cx, n, at):
    xt = _data(cx, n, n.input[0])
    s = cx.shp(xt)
    if s is None:
        cx.fail(n, f"needs the rank of '{n.input[0]}'")
    if not s:
        cx.fail(n, "gathers from a scalar (rank 0) data tensor")
    axis = cx.axis(n, int(at.get("axis", 0)), len(s))
    idx = cx.plain_const(n.input[1])
    if idx is not None:
        if idx.dtype.kind not in "iu":
            cx.fail(n, f"the indices '{n.input[1]}' must be integers (int32 or int64)")
        if idx.size == 0:
            cx.fail(n, "empty indices (an empty result) are not supported")
        if isinstance(s[axis], int):
            if _as_slice(cx, n, xt, s, axis, idx):
                return
    it = _indices(cx, n, n.input[1])
    out = s[:axis] + list(cx.shp(it) or [None]) + s[axis + 1:] if cx.shp(it) is not None else None
    cx.emit(n, "gather", [xt, it], {"axis": axis}, out=n.output[0], shape=out)


@converter("GatherElements")
def gather_elements(cx, n, at):
    xt = _data(cx, n, n.input[0])
    s = cx.shp(xt)
    if s is None:
        cx.fail(n, f"needs the rank of '{n.input[0]}'")
    axis = cx.axis(n, int(at.get("axis", 0)), len(s))
    idx = cx.plain_const(n.input[1])
    if idx is not None:
        if idx.dtype.kind not in "iu":
            cx.fail(n, f"the indices '{n.input[1]}' must be integers (int32 or int64)")
        if isinstance(s[axis], int):
            _checked(cx, n, idx, s[axis], axis)
    it = _indices(cx, n, n.input[1])
    cx.emit(n, "gather_elements", [xt, it], {"axis": axis}, out=n.output[0], shape=cx.shp(it))
