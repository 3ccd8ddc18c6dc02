"""Constant folding: evaluating nodes at conversion time.

Exporters compute shapes with Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains. The
importer evaluates such nodes when their inputs are known: numeric constants, or *symbolic* int
vectors (numpy object arrays whose entries are ints, kiln dims as text (str: a symbol or a
polynomial over symbols, `N*S`, in symdim.py's canonical form) or None for unknown), which is how
`Shape` of a tensor with a dynamic batch looks (`['batch', 197, 768]`); arithmetic on them stays
symbolic (`Shape[0] * Shape[1]` is `N*S`). Elementwise
ops on constants fold too. Each op's evaluation is registered with @folder; an op with a folder and
no converter (Gather, Concat, ...) is supported only where it folds.
"""
import math

import numpy as np
from onnx import helper

from . import symdim
from .registry import FOLDERS, folder

# A folded value may have at most this many elements: ConstantOfShape, Expand and Range make
# arrays whose size comes from the model's numbers, and a hostile model asks for petabytes.
FOLD_MAX_ELEMENTS = 1 << 24


def bounded(shape, what="the folded value"):
    """`shape` as ints when it has at most FOLD_MAX_ELEMENTS elements (ValueError otherwise)."""
    shape = [int(d) for d in shape]
    if any(d < 0 for d in shape):
        raise ValueError(f"{what} would have a negative dim: {shape}")
    if math.prod(shape) > FOLD_MAX_ELEMENTS:
        raise ValueError(f"{what} would have shape {shape}, more than {FOLD_MAX_ELEMENTS} "
                         f"elements")
    return shape


def is_sym_array(a):
    return isinstance(a, np.ndarray) and a.dtype == object


def any_sym(ins):
    return any(is_sym_array(a) for a in ins if a is not None)


def tidy(a):
    """An object (symbolic) array whose entries are all ints becomes int64."""
    if is_sym_array(a) and all(isinstance(v, (int, np.integer)) for v in a.flat):
        return a.astype(np.int64)
    return a


def is_int(v):
    return isinstance(v, (int, np.integer))


def sym_binop(op, x, y):
    """Elementwise int arithmetic where entries may be symbolic dims (symbols or polynomial
    texts, str) or unknown (None): the result in canonical form, None when it is no polynomial
    (a floor division that does not divide, Mod of a symbol)."""
    return symdim.binop(op, x, y)


def try_fold(cx, n):
    """Evaluates n at conversion time when it can (its output goes to cx.consts). Returns True if
    done."""
    op = n.op_type
    if op == "Constant":
        return True  # evaluated before conversion starts
    fn = FOLDERS.get(op)
    if fn is None:
        return False
    at = cx.attrs(n)
    if fn.reads_shape:
        out = fn(cx, n, at)
        if out is None:
            return False
        cx.consts[n.output[0]] = out
        return True
    if not all(cx.known(t) for t in n.input):
        return False
    ins = [cx.consts[t] if t else None for t in n.input]
    try:
        # NaN and infinities are what ONNX computes too (0 / 0, a negative base to a fractional
        # power): no numpy warning on stderr.
        with np.errstate(all="ignore"):
            out = fn(ins, at)
    except Exception as e:  # noqa: BLE001 - a fold that numpy cannot do
        cx.fail(n, f"cannot fold this op on constant inputs: {e}")
    if out is None:
        return False
    if isinstance(out, tuple):  # one value per output (Split)
        for o, v in zip(n.output, out):
            cx.consts[o] = v
        return True
    if not isinstance(out, np.ndarray):
        out = np.array(out, dtype=object if isinstance(out, str) or out is None else None)
    cx.consts[n.output[0]] = tidy(out) if is_sym_array(out) else out
    return True


# ------------------------------------------------------------------------------ shapes of tensors

def input_shape(cx, t):
    """The shape of ONNX tensor t: of its value when a constant, else what the converter knows."""
    if t in cx.consts:
        return list(np.shape(cx.consts[t]))
    kt = cx.tmap.get(t)
    return cx.shp(kt) if kt else None


@folder("Shape", reads_shape=True)
def fold_shape(cx, n, at):
    s = input_shape(cx, n.input[0])
    if s is None:
        return None
    r = len(s)
    start, end = at.get("start", 0), at.get("end", r)
    start = max(0, start + r if start < 0 else start)
    end = min(r, end + r if end < 0 else end)
    return tidy(np.array(s[start:end], dtype=object))


@folder("Size", reads_shape=True)
def fold_size(cx, n, at):
    s = input_shape(cx, n.input[0])
    if s is None or not all(isinstance(v, int) for v in s) or math.prod(s) >= 2**63:
        return None
    return np.array(math.prod(s), dtype=np.int64)


# ------------------------------------------------------------------------------ movement

@folder("Identity", "Dropout")
def fold_identity(ins, at):
    return ins[0]


@folder("Gather")
def fold_gather(ins, at):
    return np.take(ins[0], ins[1].astype(np.int64), axis=at.get("axis", 0))


def _axis(v, r):
    """ONNX axis v of rank r as 0..r-1; out of range is an error (the fold is refused)."""
    if not -r <= v < r:
        raise ValueError(f"axis {v} is out of range for rank {r}")
    return v + r if v < 0 else v


def _axes(ins, at):
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an input from opset 13 on."""
    axes = at.get("axes")
    if axes is None and len(ins) > 1 and ins[1] is not None:
        axes = [int(v) for v in ins[1].flatten()]
    return axes


@folder("Squeeze")
def fold_squeeze(ins, at):
    a, axes = ins[0], _axes(ins, at)
    if axes is None:
        return np.squeeze(a)
    return np.squeeze(a, axis=tuple(_axis(v, a.ndim) for v in axes))


@folder("Unsqueeze")
def fold_unsqueeze(ins, at):
    a, axes = ins[0], _axes(ins, at)
    r = a.ndim + len(axes)
    out_shape, it = [], iter(a.shape)
    axes = {_axis(v, r) for v in axes}
    for i in range(r):
        out_shape.append(1 if i in axes else next(it))
    return a.reshape(out_shape)


@folder("Concat")
def fold_concat(ins, at):
    arrs = [a for a in ins if a is not None and a.size > 0] or [ins[0]]
    if any(is_sym_array(a) for a in arrs):
        arrs = [a.astype(object) for a in arrs]
    return np.concatenate(arrs, axis=at.get("axis", 0))


@folder("Slice")
def fold_slice(ins, at):
    a = ins[0]
    if any(is_sym_array(v) for v in ins[1:] if v is not None):
        return None  # a bound computed from run-time dims: the converter's case
    if "starts" in at:  # opset < 10: attributes
        starts, ends = at["starts"], at["ends"]
        axes = at.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = ins[1].tolist(), ins[2].tolist()
        axes = ins[3].tolist() if len(ins) > 3 and ins[3] is not None else list(
            range(len(starts)))
        steps = ins[4].tolist() if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    sl = [slice(None)] * a.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        sl[_axis(int(ax), a.ndim)] = slice(int(s), int(e), int(st))
    return a[tuple(sl)]


@folder("Reshape")
def fold_reshape(ins, at):
    target = [int(v) for v in ins[1].flatten()] if not is_sym_array(ins[1]) else None
    if target is None:
        return None  # a shape vector reshaped to shape values: the converter's case
    target = [ins[0].shape[i] if v == 0 else v for i, v in enumerate(target)]
    return ins[0].reshape(target)


@folder("Flatten")
def fold_flatten(ins, at):
    a = ins[0]
    ax = at.get("axis", 1) % max(a.ndim, 1) if a.ndim else 0
    return a.reshape(math.prod(a.shape[:ax]), -1)


@folder("Transpose")
def fold_transpose(ins, at):
    return np.transpose(ins[0], at.get("perm"))


@folder("Expand")
def fold_expand(ins, at):
    if any_sym(ins):
        return None
    shape = bounded(ins[1].flatten(), "Expand's shape")
    out = bounded(np.broadcast_shapes(np.shape(ins[0]), tuple(shape)))
    return np.broadcast_to(ins[0], out).copy()


@folder("Tile")
def fold_tile(ins, at):
    if any_sym(ins):
        return None
    return np.tile(ins[0], [int(v) for v in ins[1].flatten()])


@folder("Split")
def fold_split(ins, at):
    a = ins[0]
    axis = _axis(int(at.get("axis", 0)), a.ndim)
    if len(ins) > 1 and ins[1] is not None:
        sizes = [int(v) for v in ins[1].flatten()]
    elif "split" in at:
        sizes = [int(v) for v in at["split"]]
    else:
        return None  # equal parts need the output count: the converter decides
    return tuple(np.split(a, np.cumsum(sizes)[:-1], axis=axis))


@folder("DepthToSpace")
def fold_depth_to_space(ins, at):
    a, b = ins[0], int(at["blocksize"])
    n, c, h, w = a.shape
    mode = at.get("mode", b"DCR")
    if (mode.decode() if isinstance(mode, bytes) else mode) == "DCR":
        t = a.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = a.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


@folder("SpaceToDepth")
def fold_space_to_depth(ins, at):
    a, b = ins[0], int(at["blocksize"])
    n, c, h, w = a.shape
    t = a.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


@folder("Trilu")
def fold_trilu(ins, at):
    if any_sym(ins):
        return None
    k = int(ins[1].reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None else 0
    return np.triu(ins[0], k) if at.get("upper", 1) else np.tril(ins[0], k)


# ------------------------------------------------------------------------------ scatters
# ScatterND / ScatterElements on constants (Swin's shifted-window attention mask is built from
# zeros and slice assignments): ONNX semantics, updates applied in index order, `reduction`
# none / add / mul / max / min. On run-time data they are refused (no converter): a located error.

SCATTER_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduction(at):
    r = at.get("reduction", "none")
    r = r.decode() if isinstance(r, bytes) else r
    if r != "none" and r not in SCATTER_REDUCE:
        raise ValueError(f"reduction '{r}': expected none, add, mul, max or min")
    return r


def _scatter_put(out, pos, vals, red):
    """out[pos] = vals (or combined with `red`), pos a tuple of index arrays; later updates win
    for `none` (the order ONNX's reference applies them in)."""
    if red == "none":
        out[pos] = vals
    else:
        SCATTER_REDUCE[red].at(out, pos, vals)


def _wrapped(idx, size, what):
    """Indices in [-size, size) as 0..size-1; out of range is an error."""
    if idx.size and (idx.min() < -size or idx.max() >= size):
        bad = idx[(idx < -size) | (idx >= size)].flatten()[0]
        raise ValueError(f"index {int(bad)} is out of range for {what} of size {size}")
    return np.where(idx < 0, idx + size, idx)


@folder("ScatterND")
def fold_scatter_nd(ins, at):
    if any_sym(ins):
        return None
    data, indices, updates = ins[0], ins[1].astype(np.int64), ins[2]
    red = _reduction(at)
    r, q = data.ndim, indices.ndim
    if q < 1:
        raise ValueError("ScatterND indices need rank >= 1")
    k = indices.shape[-1]
    if k > r:
        raise ValueError(f"index tuples of length {k} for data of rank {r}")
    want = list(indices.shape[:-1]) + list(data.shape[k:])
    if list(updates.shape) != want:
        raise ValueError(f"updates have shape {list(updates.shape)}, expected {want}")
    flat = indices.reshape(-1, k)
    pos = tuple(_wrapped(flat[:, d], data.shape[d], f"dim {d}") for d in range(k))
    out = data.copy()
    _scatter_put(out, pos, updates.reshape((flat.shape[0],) + data.shape[k:]), red)
    return out


@folder("ScatterElements", "Scatter")
def fold_scatter_elements(ins, at):
    if any_sym(ins):
        return None
    data, indices, updates = ins[0], ins[1].astype(np.int64), ins[2]
    red = _reduction(at)
    axis = _axis(int(at.get("axis", 0)), data.ndim)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise ValueError(f"indices {list(indices.shape)} and updates {list(updates.shape)} must "
                         f"have one shape of data's rank {data.ndim}")
    if any(i > d for i, d in zip(indices.shape, data.shape)):
        raise ValueError(f"indices {list(indices.shape)} exceed data {list(data.shape)}")
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = _wrapped(indices, data.shape[axis], f"axis {axis}")
    pos = tuple(np.broadcast_arrays(*grid))
    out = data.copy()
    _scatter_put(out, pos, updates, red)
    return out


# ------------------------------------------------------------------------------ values

@folder("Cast")
def fold_cast(ins, at):
    if any_sym(ins):
        return ins[0]  # shape vectors stay symbolic through int casts
    np_t = helper.tensor_dtype_to_np_dtype(at["to"])
    if "bfloat16" in str(np_t):
        np_t = np.float32
    return ins[0].astype(np_t)


@folder("ConstantOfShape")
def fold_constant_of_shape(ins, at):
    from .model import to_numpy
    if any_sym(ins):
        return None
    v = to_numpy(at["value"]) if "value" in at else np.zeros(1, np.float32)
    return np.full(bounded(ins[0].flatten()), v.flatten()[0], dtype=v.dtype)


@folder("Range")
def fold_range(ins, at):
    if any_sym(ins):
        return None
    start, limit, delta = (ins[i].item() for i in range(3))
    if delta == 0 or not all(math.isfinite(v) for v in (start, limit, delta)):
        raise ValueError(f"Range({start}, {limit}, {delta}) has no finite length")
    bounded([max(math.ceil((limit - start) / delta), 0)], "the range")
    return np.arange(start, limit, delta).astype(ins[0].dtype)


def _sym_elementwise(fn, a, b, dtype=object):
    """fn(x, y) over the broadcast entries of two (possibly symbolic) arrays; None when an entry
    is undecided (fn returned None)."""
    a, b = np.broadcast_arrays(np.asarray(a).astype(object), np.asarray(b).astype(object))
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(a.shape):
        out[idx] = fn(a[idx], b[idx])
        if out[idx] is None and dtype is not object:
            return None
    return out if dtype is object else out.astype(dtype)


COMPARE = {"Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
           "Greater": np.greater, "GreaterOrEqual": np.greater_equal}


def _compare(op):
    def fold(ins, at):
        if any_sym(ins):
            # Sizes are positive: `N == -1` is False (the exporters' Where(Equal(shape, -1))).
            return _sym_elementwise(lambda x, y: symdim.compare(op, x, y), ins[0], ins[1],
                                    dtype=np.bool_)
        return COMPARE[op](ins[0], ins[1])
    return fold


for _op in COMPARE:
    folder(_op)(_compare(_op))


LOGICAL = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}


def _logical(op):
    def fold(ins, at):
        if any_sym(ins):
            return None
        return LOGICAL[op](ins[0].astype(bool), ins[1].astype(bool))
    return fold


for _op in LOGICAL:
    folder(_op)(_logical(_op))


@folder("Not")
def fold_not(ins, at):
    if any_sym(ins):
        return None
    return np.logical_not(ins[0].astype(bool))


@folder("Mod")
def fold_mod(ins, at):
    """ONNX Mod: fmod 0 takes the divisor's sign (Python's %), fmod 1 the dividend's (C fmod)."""
    fmod = int(at.get("fmod", 0))
    if any_sym(ins):
        if fmod:
            return None
        return _sym_elementwise(lambda x, y: symdim.binop("Mod", x, y), ins[0], ins[1])
    a, b = ins[0], ins[1]
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        if np.any(b == 0):
            raise ValueError("integer Mod by zero")
        return (np.fmod(a, b) if fmod else np.mod(a, b)).astype(a.dtype)
    return (np.fmod(a, b) if fmod else np.mod(a, b)).astype(a.dtype)


@folder("Where")
def fold_where(ins, at):
    if any_sym(ins) and is_sym_array(ins[0]):
        return None
    return np.where(ins[0], ins[1], ins[2])


NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                "Pow": np.power, "Max": np.maximum, "Min": np.minimum}


def _binary(op):
    def fold(ins, at):
        a, b = ins[0], ins[1]
        if any_sym(ins):
            if op not in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
                return None
            return _sym_elementwise(lambda x, y: sym_binop(op, x, y), a, b)
        if op == "Div" and a.dtype.kind in "iu" and b.dtype.kind in "iu":
            return np.trunc(a / b).astype(a.dtype)  # ONNX integer division truncates
        return NUMPY_BINARY[op](a, b).astype(a.dtype)
    return fold


for _op in NUMPY_BINARY:
    folder(_op)(_binary(_op))


def _erf(a):
    return np.vectorize(math.erf, otypes=[np.float64])(a)


NUMPY_UNARY = {"Relu": lambda a: np.maximum(a, 0), "Sigmoid": lambda a: 1 / (1 + np.exp(-a)),
               "Tanh": np.tanh, "Sqrt": np.sqrt, "Erf": _erf, "Exp": np.exp, "Log": np.log,
               "Neg": np.negative, "Abs": np.abs, "Reciprocal": lambda a: 1 / a,
               "Floor": np.floor, "Ceil": np.ceil, "Softplus": lambda a: np.log1p(np.exp(a))}


def _unary(fn):
    def fold(ins, at):
        if any_sym(ins):
            return None
        return fn(ins[0]).astype(ins[0].dtype)
    return fold


for _op, _fn in NUMPY_UNARY.items():
    folder(_op)(_unary(_fn))
