"""Data movement: Reshape, Flatten, Transpose, the aliases Identity and Dropout, and the byte-moving
ops Concat, Split, Slice, Expand, Tile, DepthToSpace, SpaceToDepth and Trilu."""
import numpy as np

from .. import symdim
from ..fold import is_sym_array
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


def _reshape_to(cx, n, xt, out_shape):
    """A reshape of run-time tensor xt to out_shape (ints, symbols; at most one unknown dim)."""
    target = [-1 if v is None else v for v in out_shape]
    if target.count(-1) > 1:
        cx.fail(n, f"the output shape {out_shape} has more than one dim unknown at conversion time")
    cx.emit(n, "reshape", [xt], {"shape": target}, out=n.output[0],
            shape=reshape_shape(cx.shp(xt), target))


@converter("Flatten")
def flatten(cx, n, at):
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    r = cx.rank(n, xt)
    axis = cx.axis(n, at.get("axis", 1), r, allow_end=True)
    _reshape_to(cx, n, xt, flatten_target(cx, n, s, axis))


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
    if None in target and (target.count(None) > 1 or -1 in target):
        cx.fail(n, f"the target shape {target} has dims computed from run-time values")
    _reshape_to(cx, n, xt, target)


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


# ------------------------------------------------------------------------------ byte-moving ops
# Concat, Split, Slice, Expand, Tile, DepthToSpace, SpaceToDepth and Trilu: their kiln ops copy
# elements into a new arrangement. Whatever sizes they take (split sizes, slice bounds, expand
# shapes, repeats, k) must be constants or folded shape computations; on constant inputs they
# fold (fold.py) and never reach these converters.

def _known_shape(cx, n, xt):
    s = cx.shp(xt)
    if s is None:
        cx.fail(n, f"needs the rank of '{xt}'")
    return s


def _ints(cx, n, t, what, allow_sym=False):
    """A constant integer vector input (symbols refused: these are sizes kiln bakes in, except
    with allow_sym, where entries may be dims of the model: a slice's ends, as GPT-2's x[..., :S])."""
    v = np.asarray(cx.const(n, t, what)).flatten().tolist()
    if allow_sym:
        return [int(x) if isinstance(x, (int, np.integer)) else x for x in v]
    if not all(isinstance(x, (int, np.integer)) for x in v):
        cx.fail(n, f"{what} {v} holds sizes computed from run-time dims; kiln needs them static")
    return [int(x) for x in v]


def _emit_several(cx, n, op, inputs, attrs, shapes):
    """A kiln node with one output per ONNX output of n (split)."""
    from ..names import sanitize
    base = sanitize(n.name, allow_dot=False, fallback=op) if n.name else op
    nname = cx.nnames.get(base, fallback=op)
    outs = [cx.tnames.get(o) for o in n.output]
    node = {"op": op, "name": nname, "inputs": list(inputs), "outputs": outs}
    node.update(attrs)
    cx.nodes.append(node)
    cx.origin[nname] = n
    for o, kt, s in zip(n.output, outs, shapes):
        cx.shape[kt] = list(s)
        cx.dtype[kt] = cx.dtype[inputs[0]]
        cx.tmap[o] = kt


@converter("Concat")
def concat(cx, n, at):
    """Constant inputs are materialized in the run-time inputs' dtype; empty ones drop out."""
    if "axis" not in at:
        cx.fail(n, "Concat needs its axis attribute")
    dt = cx.act_dtype(*n.input)
    xs = []
    for t in n.input:
        v = cx.plain_const(t) if t else None
        if not t or (v is not None and v.size == 0):
            continue
        xs.append(cx.act(n, t, dt))
    s0 = _known_shape(cx, n, xs[0])
    axis = cx.axis(n, int(at["axis"]), len(s0))
    sizes = [(cx.shp(x) or [None] * len(s0))[axis] for x in xs]
    out = list(s0)
    out[axis] = symdim.total(sizes)
    cx.emit(n, "concat", xs, {"axis": axis}, out=n.output[0], shape=out)


def split_sizes(cx, n, at, dim):
    """The output sizes: the `split` attribute (opset < 13) or input (13), `num_outputs`
    (opset 18: ceil-sized parts, a smaller last one), or equal parts, one per output."""
    if len(n.input) > 1 and n.input[1]:
        return _ints(cx, n, n.input[1], "the split sizes")
    if "split" in at:
        return [int(v) for v in at["split"]]
    parts = int(at.get("num_outputs", len(n.output)))
    if parts != len(n.output):
        cx.fail(n, f"num_outputs {parts} but the node has {len(n.output)} outputs")
    if not isinstance(dim, int):
        cx.fail(n, f"equal parts of a symbolic axis ({dim}) are not supported")
    if "num_outputs" not in at and dim % parts:
        cx.fail(n, f"the axis of size {dim} does not split into {parts} equal parts")
    chunk = -(-dim // parts)
    return [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]


@converter("Split")
def split(cx, n, at):
    xt = cx.act(n, n.input[0])
    s = _known_shape(cx, n, xt)
    axis = cx.axis(n, int(at.get("axis", 0)), len(s))
    sizes = split_sizes(cx, n, at, s[axis])
    if len(sizes) != len(n.output):
        cx.fail(n, f"split sizes {sizes} for {len(n.output)} outputs")
    if isinstance(s[axis], int) and sum(sizes) != s[axis]:
        cx.fail(n, f"split sizes {sizes} sum to {sum(sizes)}, not to the axis size {s[axis]}")
    shapes = [s[:axis] + [k] + s[axis + 1:] for k in sizes]
    _emit_several(cx, n, "split", [xt], {"axis": axis, "split": sizes}, shapes)


def _slice_spec(cx, n, at, r):
    """(starts, ends, axes, steps) from attributes (opset < 10) or constant inputs."""
    if "starts" in at:
        starts, ends = [int(v) for v in at["starts"]], [int(v) for v in at["ends"]]
        axes = [int(v) for v in at.get("axes", range(len(starts)))]
        steps = [1] * len(starts)
    else:
        starts = _ints(cx, n, n.input[1], "the slice starts")
        ends = _ints(cx, n, n.input[2], "the slice ends", allow_sym=True)
        has = [len(n.input) > i and bool(n.input[i]) for i in (3, 4)]
        axes = _ints(cx, n, n.input[3], "the slice axes") if has[0] else list(range(len(starts)))
        steps = _ints(cx, n, n.input[4], "the slice steps") if has[1] else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        cx.fail(n, f"starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    axes = [cx.axis(n, a, r, "axes entry") for a in axes]
    return starts, ends, axes, steps


def _run_time_end(cx, n):
    """(data, start, end, axis, step) when n slices a constant along one axis up to an end
    computed from run-time dims (BERT's position_ids[:, :S]); else None."""
    if n.input[0] not in cx.consts or len(n.input) < 3 or "starts" in cx.attrs(n):
        return None
    vals = [cx.consts.get(t) if t else None for t in n.input[1:5]]
    if any(v is None for v in vals[:2]) or not is_sym_array(vals[1]) or vals[1].size != 1:
        return None
    rest = [np.asarray(v).flatten().tolist() for v in vals if v is not None]
    if any(len(r) != 1 for r in rest) or any(not isinstance(r[0], (int, np.integer))
                                              for i, r in enumerate(rest) if i != 1):
        return None
    start = int(rest[0][0])
    axis = int(rest[2][0]) if len(rest) > 2 else 0
    step = int(rest[3][0]) if len(rest) > 3 else 1
    return n.input[0], start, rest[1][0], axis, step


def _slice_as_gather(cx, n, spec):
    """x[start:end:step] along `axis` with a run-time end: Gather(x, Range(start, end, step)),
    converted by the Range and Gather converters (kiln's range and gather ops)."""
    from onnx import helper
    from ..convert import convert_node
    from ..registry import CONVERTERS
    data, start, end, axis, step = spec
    if "Range" not in CONVERTERS or "Gather" not in CONVERTERS or start < 0 or step < 1:
        cx.fail(n, f"the slice end ({end}) is computed from run-time dims; kiln slices with "
                   f"static bounds (a run-time end needs kiln's range and gather)")
    base = n.output[0]
    ks = [cx.add_const(f"{base}_start", np.array(start, np.int64)),
          cx.add_const(f"{base}_end", np.array([end], dtype=object).reshape(())),
          cx.add_const(f"{base}_step", np.array(step, np.int64))]
    idx = cx.derived(f"{base}_index")
    rng = helper.make_node("Range", ks, [idx], name=f"{n.name}_range")
    gat = helper.make_node("Gather", [data, idx], [n.output[0]], name=f"{n.name}_gather",
                           axis=axis)
    for node in (rng, gat):
        convert_node(cx, node)
    for k, src in cx.origin.items():  # messages and --report name the Slice
        if src is rng or src is gat:
            cx.origin[k] = n


@converter("Slice")
def slice_(cx, n, at):
    """A slice covering a symbolic dim whole (0 to the end, step 1) leaves it alone; any other
    bound on a symbolic dim is refused (kiln slices static dims). A constant sliced up to a
    run-time end becomes a gather of a range."""
    spec = _run_time_end(cx, n)
    if spec is not None:
        _slice_as_gather(cx, n, spec)
        return
    xt = cx.act(n, n.input[0])
    s = _known_shape(cx, n, xt)
    starts, ends, axes, steps = _slice_spec(cx, n, at, len(s))
    keep = [[], [], [], []]
    out = list(s)
    sym = []  # (axis, start, end, step) of bounded slices of symbolic dims: gathers, below
    for b, e, ax, st in zip(starts, ends, axes, steps):
        if st == 0:
            cx.fail(n, f"a slice step of 0 (axis {ax})")
        d = s[ax]
        if not isinstance(e, int):  # an end that is a dim of the model
            if isinstance(d, int) or symdim.Poly.of(e) is None:
                cx.fail(n, f"the slice end {e} of axis {ax} (size {d}) is computed from run-time "
                           f"dims; kiln needs it static")
            if symdim.same(e, d) and b == 0 and st == 1:
                continue
        if not isinstance(d, int):
            if b == 0 and isinstance(e, int) and e >= 2 ** 31 - 1 and st == 1:
                continue
            if b < 0 or st < 0:
                cx.fail(n, f"slicing symbolic dim {ax} ({d}) from {b} to {e} step {st} is not "
                           f"supported (a start from the end or a negative step)")
            sym.append((ax, b, e, st))
            continue
        length = len(range(*slice(b, e, st).indices(d)))
        if length == 0:
            cx.fail(n, f"the slice of axis {ax} (size {d}) from {b} to {e} step {st} is empty")
        out[ax] = length
        # Graph files bound integers to 32 bits; bounds past a dim mean the same clamped.
        lim = 2 ** 31 - 1
        b, e = max(-lim, min(lim, b)), max(-lim, min(lim, e))
        st = max(-lim, min(lim, st))
        for lst, v in zip(keep, (b, e, ax, st)):
            lst.append(v)
    if not keep[0] and not sym:
        cx.alias(n, xt)
        return
    if keep[0]:
        xt = cx.emit(n, "slice", [xt], {"starts": keep[0], "ends": keep[1], "axes": keep[2],
                                        "steps": keep[3]}, out=None if sym else n.output[0],
                     shape=out)
    for i, (ax, b, e, st) in enumerate(sym):
        xt = _symbolic_slice(cx, n, xt, s[ax], ax, b, e, st, i == len(sym) - 1)


def _symbolic_slice(cx, n, xt, d, ax, b, e, st, last):
    """x[b:e:st] along symbolic dim d (b >= 0, st > 0) as a gather of the positions: constants
    when e is a constant (the model's dim must reach it: kiln's gather reports an index past d at
    run time, where ONNX would clamp), a kiln range up to d (e past the end) or d + e (e < 0)."""
    if isinstance(e, int) and 0 <= e < 2 ** 31 - 1:
        pos = np.arange(b, e, st, dtype=np.int64)
        if pos.size == 0:
            cx.fail(n, f"the slice of axis {ax} from {b} to {e} step {st} is empty")
        it = cx.materialize(n, cx.add_const(f"{n.output[0]}_positions", pos), "i64")
        length = int(pos.size)
    else:
        end = (symdim.Poly.of(e) if not isinstance(e, int) else  # e <= d, or kiln's error
               symdim.Poly.of(d) + symdim.Poly.const(e if e < 0 else 0))
        span = end - symdim.Poly.const(b)
        # ceil(span / st) as kiln's floor division (which symdim does not fold: written as text)
        length = span.dim() if st == 1 else f"({symdim.text(span + symdim.Poly.const(st - 1))})/{st}"
        if span.value() is not None:
            cx.fail(n, f"slicing symbolic dim {ax} ({d}) from {b} to {e} step {st}: the length "
                       f"is a constant {span.value()}, not a dim of the model")
        it = cx.emit(n, "range", [], {"start": b, "delta": st, "length": [length], "dtype": "i64"},
                     shape=[length], dtype="i64", suffix=f"positions{ax}")
    shape = list(cx.shp(xt))
    shape[ax] = length
    return cx.emit(n, "gather", [xt, it], {"axis": ax}, out=n.output[0] if last else None,
                   shape=shape, suffix=None if last else f"gather{ax}")


@converter("Expand")
def expand(cx, n, at):
    from ..shapes import bcast
    xt = cx.act(n, n.input[0])
    tgt = np.asarray(cx.const(n, n.input[1], "the expand shape")).flatten().tolist()
    if any(v is None for v in tgt):
        cx.fail(n, f"the expand shape {tgt} has dims computed from run-time values")
    tgt = [int(v) if isinstance(v, (int, np.integer)) else v for v in tgt]
    cx.emit(n, "expand", [xt], {"shape": tgt}, out=n.output[0],
            shape=bcast(_known_shape(cx, n, xt), tgt))


@converter("ConstantOfShape")
def constant_of_shape(cx, n, at):
    """A shape computed from run-time dims (a mask of [N, S]): kiln's expand of the one value to
    that shape. (A static shape folds.)"""
    from ..model import to_numpy
    tgt = np.asarray(cx.const(n, n.input[0], "the shape")).flatten().tolist()
    if not tgt or any(v is None for v in tgt):
        cx.fail(n, f"the shape {tgt} has dims computed from run-time values")
    v = to_numpy(at["value"]) if "value" in at else np.zeros(1, np.float32)
    key = cx.add_const(f"{n.output[0]}_value", v.reshape(-1)[:1])
    vt = cx.materialize(n, key, cx.natural_dtype(key))
    tgt = [int(d) if isinstance(d, (int, np.integer)) else d for d in tgt]
    cx.emit(n, "expand", [vt], {"shape": tgt}, out=n.output[0], shape=tgt)


@converter("Tile")
def tile(cx, n, at):
    xt = cx.act(n, n.input[0])
    s = _known_shape(cx, n, xt)
    reps = _ints(cx, n, n.input[1], "the repeats")
    if len(reps) != len(s):
        cx.fail(n, f"repeats {reps}: expected {len(s)} values (one per dim)")
    if any(v < 1 for v in reps):
        cx.fail(n, f"repeats {reps}: zero repeats (an empty tensor) are not supported")
    out = [d * k if isinstance(d, int) else (d if k == 1 else None) for d, k in zip(s, reps)]
    cx.emit(n, "tile", [xt], {"repeats": reps}, out=n.output[0], shape=out)


@converter("DepthToSpace")
def depth_to_space(cx, n, at):
    from ..model import str_attr
    xt = cx.act(n, n.input[0])
    s = _known_shape(cx, n, xt)
    b = int(at.get("blocksize", 0))
    mode = str_attr(at, "mode", "DCR")
    if len(s) != 4 or not isinstance(s[1], int) or b < 1 or s[1] % (b * b):
        cx.fail(n, f"DepthToSpace of {s} with blocksize {b}: needs [N, C, H, W] with C a "
                   f"multiple of blocksize^2")
    mul = [d * b if isinstance(d, int) else None for d in s[2:]]
    cx.emit(n, "depth_to_space", [xt], {"blocksize": b, "mode": mode}, out=n.output[0],
            shape=[s[0], s[1] // (b * b)] + mul)


@converter("SpaceToDepth")
def space_to_depth(cx, n, at):
    xt = cx.act(n, n.input[0])
    s = _known_shape(cx, n, xt)
    b = int(at.get("blocksize", 0))
    if (len(s) != 4 or b < 1 or not all(isinstance(d, int) and d % b == 0 for d in s[2:])):
        cx.fail(n, f"SpaceToDepth of {s} with blocksize {b}: needs [N, C, H, W] with static H "
                   f"and W multiples of the blocksize")
    c = s[1] * b * b if isinstance(s[1], int) else None
    cx.emit(n, "space_to_depth", [xt], {"blocksize": b}, out=n.output[0],
            shape=[s[0], c, s[2] // b, s[3] // b])


@converter("Trilu")
def trilu(cx, n, at):
    xt = cx.act(n, n.input[0])
    if cx.rank(n, xt) < 2:
        cx.fail(n, "Trilu needs a tensor of rank >= 2")
    k = 0
    if len(n.input) > 1 and n.input[1]:
        kv = _ints(cx, n, n.input[1], "k")
        if len(kv) != 1:
            cx.fail(n, f"k must be a scalar, found {kv}")
        k = kv[0]
    cx.emit(n, "trilu", [xt], {"upper": int(at.get("upper", 1)), "k": k}, out=n.output[0])


def _squeeze_axes(cx, n, at):
    """Squeeze/Unsqueeze axes: an attribute before opset 13, a constant input from 13 on."""
    if "axes" in at:
        return [int(v) for v in at["axes"]]
    if len(n.input) > 1 and n.input[1]:
        return [int(v) for v in cx.const(n, n.input[1], "the axes").flatten().tolist()]
    return None


@converter("Unsqueeze")
def unsqueeze(cx, n, at):
    """On a run-time tensor (the class token of ViT, masks): a reshape inserting 1s."""
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    if s is None:
        cx.fail(n, "the input's rank is unknown at conversion time")
    axes = _squeeze_axes(cx, n, at)
    if axes is None:
        cx.fail(n, "Unsqueeze needs axes")
    r = len(s) + len(axes)
    norm = [cx.axis(n, a, r, what="axes") for a in axes]
    if len(set(norm)) != len(norm):
        cx.fail(n, f"axes {axes} repeat an axis")
    it = iter(s)
    _reshape_to(cx, n, xt, [1 if i in norm else next(it) for i in range(r)])


@converter("Squeeze")
def squeeze(cx, n, at):
    """On a run-time tensor: a reshape dropping dims of size 1 (the given ones, or every one)."""
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    if s is None:
        cx.fail(n, "the input's rank is unknown at conversion time")
    axes = _squeeze_axes(cx, n, at)
    if axes is None:
        if any(not isinstance(v, int) for v in s):
            cx.fail(n, f"Squeeze without axes of shape {s}: which dims are 1 is unknown")
        drop = {i for i, v in enumerate(s) if v == 1}
    else:
        drop = {cx.axis(n, a, len(s), what="axes") for a in axes}
        for i in drop:
            if s[i] != 1:
                cx.fail(n, f"axis {i} has size {s[i]}, not 1")
    _reshape_to(cx, n, xt, [v for i, v in enumerate(s) if i not in drop])
