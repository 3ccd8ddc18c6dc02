"""Data movement: Reshape, Flatten, Transpose, and the aliases Identity and Dropout."""
import numpy as np

from ..registry import converter
from ..shapes import one_dim, reshape_shape


@converter("Identity")
def identity(cx, n, at):
    cx.alias(n)


@converter("Dropout")
def dropout(cx, n, at):
    """Inference: the input itself; the mask output must be unused."""
    cx.no_extra_outputs(n)
    cx.alias(n)


def flatten_target(cx, n, s, axis):
    """The kiln reshape target that flattens shape s to 2-D at `axis`: [front, back], with -1
    for the side kiln cannot write as one dim."""
    if s is None:
        cx.fail(n, "needs a known input rank")
    f, b = one_dim(s[:axis]), one_dim(s[axis:])
    if f is not None and b is not None:
        return [f, b]
    if f is not None:
        return [f, -1]
    if b is not None:
        return [-1, b]
    cx.fail(n, f"cannot express the flattened shape of {s} in kiln dims")


def dims_target(cx, n, s):
    """Shape s as a reshape target (every dim static or a symbol)."""
    if s is None or None in s:
        cx.fail(n, "needs the input shape to be static or symbolic, found an unknown dim")
    return list(s)


@converter("Flatten")
def flatten(cx, n, at):
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    r = cx.rank(n, xt)
    axis = cx.axis(n, at.get("axis", 1), r, allow_end=True)
    target = flatten_target(cx, n, s, axis)
    cx.emit(n, "reshape", [xt], {"shape": target}, out=n.output[0],
            shape=reshape_shape(s, target))


@converter("Reshape")
def reshape(cx, n, at):
    """The target comes from a constant or a folded shape computation: 0 copies a dim, -1 is
    inferred, a symbol stays a symbol; one unknown entry becomes -1."""
    xt = cx.act(n, n.input[0])
    tgt = cx.const(n, n.input[1], "the target shape")
    if cx.flag(n, at, "allowzero", 0) and any(isinstance(v, (int, np.integer)) and v == 0
                                      for v in tgt.flatten()):
        cx.fail(n, "allowzero=1 with a 0 in the shape (an empty tensor) is not supported")
    target = []
    for v in tgt.flatten().tolist():
        target.append(int(v) if isinstance(v, (int, np.integer)) else v)
    if None in target:
        if target.count(None) == 1 and -1 not in target:
            target[target.index(None)] = -1
        else:
            cx.fail(n, f"the target shape {target} has dims computed from run-time values")
    cx.emit(n, "reshape", [xt], {"shape": target}, out=n.output[0],
            shape=reshape_shape(cx.shp(xt), target))


@converter("Transpose")
def transpose(cx, n, at):
    """The default perm reverses the dims."""
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    r = cx.rank(n, xt)
    perm = list(at.get("perm", list(range(r))[::-1]))
    if sorted(perm) != list(range(r)):
        cx.fail(n, f"perm {perm} is not a permutation of the {r} dims")
    cx.emit(n, "transpose", [xt], {"perm": perm}, out=n.output[0], shape=[s[p] for p in perm])
