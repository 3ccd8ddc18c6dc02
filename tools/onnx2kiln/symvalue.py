"""Shape values as run-time data: a dim of the model (a symbol `S`, an expression `N*S`) that the
graph uses in arithmetic, as transformers' attention-mask code does (`batch * S + kv`, the flat
index of a Gather).

kiln has no op that yields a symbol's value, but its `range` op takes a dim expression as its
length, and the position of the last element of range(0, L) is L - 1: a dim value d is
argmax(range(0, length=d - c)) + 1 + c (i64, exact; c is d's constant term, so that `S-1` needs
only S >= 1, as the model does). Constant entries are constants; several entries are concatenated
and reshaped to the value's shape."""
import numpy as np

from .symdim import Poly


def dim_tensor(cx, node, dim, dtype="i64"):
    """A [1] kiln tensor holding the value of dim (an int, a symbol or an expression), in dtype."""
    p = Poly.of(dim)
    if p is None:
        cx.fail(node, f"the dim {dim!r} has no value kiln can compute")
    key = ("#dim", p.dim(), dtype)
    if key in cx.kconst:
        return cx.kconst[key]
    c = p.terms.get((), 0)
    var = p - Poly.const(c)
    if var.value() is not None:  # a constant
        out = _const(cx, node, c, "i64")
    else:
        length = var.dim()
        r = cx.emit(node, "range", [], {"start": 0, "delta": 1, "length": [length], "dtype": "i64"},
                    shape=[length], dtype="i64", suffix="dim_range")
        m = cx.emit(node, "argmax", [r], {"axis": 0, "keepdims": 1, "select_last_index": 0},
                    shape=[1], dtype="i64", suffix="dim_last")
        out = cx.emit(node, "add", [m, _const(cx, node, c + 1, "i64")], shape=[1], dtype="i64",
                      suffix="dim_value")
    if dtype != "i64":
        out = cx.emit(node, "cast", [out], {"dtype": dtype}, shape=[1], dtype=dtype,
                      suffix="dim_cast")
    cx.kconst[key] = out
    return out


def _const(cx, node, value, dtype):
    key = cx.add_const("dim_const", np.array([int(value)], np.int64))
    return cx.materialize(node, key, dtype)


def sym_value(cx, node, t, dtype):
    """The kiln tensor of conversion-time shape value t (an object array of ints and dims) as
    data of dtype (default i64)."""
    a = cx.consts[t]
    dtype = dtype or "i64"
    parts = [dim_tensor(cx, node, v, dtype) for v in a.flat]
    if not parts:
        cx.fail(node, f"tensor '{t}' is an empty shape value used as data")
    out = parts[0]
    if len(parts) > 1:
        out = cx.emit(node, "concat", parts, {"axis": 0}, shape=[len(parts)], dtype=dtype,
                      suffix="shape_value")
    # The value's own tensor (named after t, as a graph output must be): a reshape to its shape,
    # a view. t stays a conversion-time value for the folders; callers cache the tensor.
    out = cx.emit(node, "reshape", [out], {"shape": list(a.shape)}, out=t, shape=list(a.shape),
                  dtype=dtype, suffix="shape_value")
    cx.tmap.pop(t, None)
    return out
