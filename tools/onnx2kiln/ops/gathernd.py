"""GatherND (ONNX semantics, any batch_dims) lowered to kiln's integer math and one `gather`.

data [B..., D_0..D_{k-1}, R...] (b batch dims), indices [B..., I..., k]: output [B..., I..., R...],
out[b, i] = data[b, idx[b, i, 0], ..., idx[b, i, k-1]]. The index tuple becomes one linear index
into data reshaped to [prod(B) * prod(D), R...]:

    lin = sum_m coord_m(b) * prod(B_{m+1..}) * prod(D)  +  sum_j idx_j * prod(D_{j+1..})

(batch coordinates from `range` ops shaped to broadcast), and a `gather` on axis 0 reads the rows.
Negative indices wrap as ONNX says (idx + D_j where idx < 0); an index outside [-D_j, D_j) makes
the linear index prod(B) * prod(D), out of range, so that kiln's gather reports it at run time
instead of reading a neighbouring row. Dims may be symbolic: their values as data come from
symvalue.dim_tensor. transformers 5's causal / packed-sequence mask (GPT-2, dynamo exporter) gathers
`position_ids[batch, q]` this way."""
import numpy as np

from ..registry import converter
from ..shapes import bcast
from ..symdim import Poly, product
from ..symvalue import dim_tensor


def _i64(cx, n, t, what):
    kt = cx.act(n, t, cx.natural_dtype(t) if not cx.is_act(t) else None)
    dt = cx.dtype[kt]
    if dt not in ("i32", "i64"):
        cx.fail(n, f"the {what} '{t}' are {dt}; GatherND takes int64 indices")
    if dt == "i32":
        kt = cx.emit(n, "cast", [kt], {"dtype": "i64"}, dtype="i64", suffix="idx_i64")
    return kt


def _shapes(cx, n, xt, it, b):
    s, q = cx.shp(xt), cx.shp(it)
    if s is None or q is None:
        cx.fail(n, "needs the ranks of its data and indices")
    if not q or not isinstance(q[-1], int):
        cx.fail(n, f"the indices' last dim must be a static size, found {q[-1] if q else 'rank 0'}")
    k = q[-1]
    if not 0 <= b < min(len(s), len(q)):
        cx.fail(n, f"batch_dims {b} must be below the ranks of data ({len(s)}) and indices "
                   f"({len(q)})")
    if not 1 <= k <= len(s) - b:
        cx.fail(n, f"the index tuples have {k} entries; data of rank {len(s)} with batch_dims {b} "
                   f"takes 1 to {len(s) - b}")
    for m in range(b):
        if Poly.of(s[m]) != Poly.of(q[m]):
            cx.fail(n, f"batch dim {m}: data has {s[m]}, indices {q[m]}")
    if None in s[:b + k]:
        cx.fail(n, f"needs the sizes of the indexed dims of '{n.input[0]}' ({s})")
    return s, q, k


def _coord(cx, n, it, j, q):
    """Entry j of the index tuples, [I..., 1], i64."""
    return cx.emit(n, "slice", [it], {"starts": [j], "ends": [j + 1], "axes": [len(q) - 1],
                                      "steps": [1]},
                   shape=q[:-1] + [1], dtype="i64", suffix=f"idx{j}")


def _wrapped(cx, n, c, d, j, shape):
    """(coordinate with negatives wrapped, bool [I..., 1] where it is out of range)."""
    dt = dim_tensor(cx, n, d)
    zero = dim_tensor(cx, n, 0)
    neg = cx.emit(n, "lt", [c, zero], shape=shape, dtype="bool", suffix=f"neg{j}")
    plus = cx.emit(n, "add", [c, dt], shape=shape, dtype="i64", suffix=f"wrap{j}")
    w = cx.emit(n, "where", [neg, plus, c], shape=shape, dtype="i64", suffix=f"wrapped{j}")
    lo = cx.emit(n, "lt", [w, zero], shape=shape, dtype="bool", suffix=f"low{j}")
    hi = cx.emit(n, "ge", [w, dt], shape=shape, dtype="bool", suffix=f"high{j}")
    bad = cx.emit(n, "or", [lo, hi], shape=shape, dtype="bool", suffix=f"bad{j}")
    return w, bad


def _scaled(cx, n, t, stride, shape, what):
    if Poly.of(stride) == Poly.const(1):
        return t
    return cx.emit(n, "mul", [t, dim_tensor(cx, n, stride)], shape=shape, dtype="i64",
                   suffix=f"{what}_scaled")


def _batch_coords(cx, n, s, q, b, inner):
    """sum_m range(B_m) (shaped to dim m of [B..., I..., 1]) * prod(B_{m+1..}) * inner."""
    total = None
    for m in range(b):
        shape = [1] * m + [s[m]] + [1] * (len(q) - 1 - m)
        if isinstance(s[m], int):  # a static batch dim: its coordinates are a constant
            key = cx.add_const(f"{n.output[0]}_batch{m}", np.arange(s[m]).reshape(shape))
            r = cx.materialize(n, key, "i64")
        else:
            r = cx.emit(n, "range", [], {"start": 0, "delta": 1, "length": [s[m]], "dtype": "i64"},
                        shape=[s[m]], dtype="i64", suffix=f"batch{m}")
            r = cx.emit(n, "reshape", [r], {"shape": shape}, shape=shape, dtype="i64",
                        suffix=f"batch{m}_bcast")
        r = _scaled(cx, n, r, product(list(s[m + 1:b]) + [inner]), shape, f"batch{m}")
        total = r if total is None else cx.emit(n, "add", [total, r], shape=_bc(total, r, cx),
                                                dtype="i64", suffix=f"batch{m}_sum")
    return total


def _bc(a, b, cx):
    return bcast(cx.shp(a), cx.shp(b))


@converter("GatherND")
def gather_nd(cx, n, at):
    if len(n.input) != 2:
        cx.fail(n, f"expected 2 inputs (data, indices), found {len(n.input)}")
    b = int(at.get("batch_dims", 0))
    xt = cx.act(n, n.input[0], cx.natural_dtype(n.input[0]) if not cx.is_act(n.input[0]) else None)
    it = _i64(cx, n, n.input[1], "indices")
    s, q, k = _shapes(cx, n, xt, it, b)
    dims = s[b:b + k]
    lin, bad = None, None
    for j in range(k):
        c = _coord(cx, n, it, j, q)
        w, oob = _wrapped(cx, n, c, dims[j], j, cx.shp(c))
        w = _scaled(cx, n, w, product(dims[j + 1:]), cx.shp(c), f"idx{j}")
        lin = w if lin is None else cx.emit(n, "add", [lin, w], shape=cx.shp(c), dtype="i64",
                                            suffix=f"lin{j}")
        bad = oob if bad is None else cx.emit(n, "or", [bad, oob], shape=cx.shp(c),
                                              dtype="bool", suffix=f"bad_any{j}")
    if b:
        bt = _batch_coords(cx, n, s, q, b, product(dims))
        lin = cx.emit(n, "add", [lin, bt], shape=_bc(lin, bt, cx), dtype="i64", suffix="lin_batch")
    rows = product(list(s[:b + k]))
    lin = cx.emit(n, "where", [bad, dim_tensor(cx, n, rows), lin], shape=cx.shp(lin),
                  dtype="i64", suffix="lin_checked")
    ishape = q[:-1]
    lin = cx.emit(n, "reshape", [lin], {"shape": ishape}, shape=ishape, dtype="i64",
                  suffix="lin")
    rest = list(s[b + k:])
    flat = cx.emit(n, "reshape", [xt], {"shape": [rows] + rest}, shape=[rows] + rest,
                   suffix="rows")
    cx.emit(n, "gather", [flat, lin], {"axis": 0}, out=n.output[0], shape=ishape + rest)
