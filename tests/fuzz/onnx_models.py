"""Hypothesis strategies for the ONNX-importer fuzz target: structure-aware ONNX models.

`cases()` draws a Case: the bytes of a model file plus the side files beside it (external data).
Three kinds, mixed:

  generated   small random graphs over the ops the importer supports (its @converter and
              @folder registries, Constant, and a few it does not support), mostly consistent
              (shapes that fit, the attributes the spec allows) so that conversions get deep, with
              random damage: attributes the spec forbids (stride 0, negative pads, wrong-length
              lists, group not dividing the channels, huge values, wrong types, duplicates),
              initializers whose dims do not match their data, raw_data beside typed data,
              external data inside and outside the model's directory, empty and duplicate names,
              dangling inputs, cycles, missing and extra inputs and outputs, opsets 7..25;
  mutated     a generated model's bytes truncated, bit-flipped, with junk inserted or cut;
  raw         short byte strings (empty, text, protobuf-looking junk).
"""
import math

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT

# The file name of the model in its directory, and of the external data file written beside it.
MODEL_FILE = "m.onnx"
DATA_FILE = "weights.bin"

UNARY = ["Relu", "Sigmoid", "Tanh", "Sqrt", "Erf", "Exp", "Log", "Neg", "Abs", "Reciprocal",
         "Softplus", "Identity", "Floor", "Ceil"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"]
POOLS = ["MaxPool", "AveragePool"]
REDUCE = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"]
UNSUPPORTED = ["Resize", "TopK", "LSTM", "NonZero"]

HUGE = [2**31 - 1, 2**31, 2**32 + 1, 2**40, 2**62, -(2**31), -(2**62)]


class Case:
    """A model file's bytes and the files beside it ({name: bytes}); `what` says how it was made
    (for messages)."""

    def __init__(self, data, side=None, what=""):
        self.data, self.side, self.what = data, dict(side or {}), what


# ------------------------------------------------------------------------------ small pieces

def small_dims(rank):
    return st.lists(st.integers(1, 6), min_size=rank, max_size=rank)


def weird_int():
    return st.one_of(st.integers(-3, 8), st.sampled_from(HUGE))


def ints_list(n):
    """Mostly n valid small ints, sometimes the wrong length or forbidden values."""
    return st.one_of(st.lists(st.integers(1, 3), min_size=n, max_size=n),
                     st.lists(weird_int(), min_size=0, max_size=n + 2))


def _attr(name, value):
    """An AttributeProto; an empty list is an empty INTS."""
    if isinstance(value, (list, tuple)) and not value:
        return helper.make_attribute(name, [], attr_type=onnx.AttributeProto.INTS)
    return helper.make_attribute(name, value)


class Graph:
    """A graph under construction: nodes, initializers, graph inputs, and the tensors so far with
    the shapes the generator believes they have (None: unknown)."""

    def __init__(self, opset):
        self.opset = opset
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.tensors = {}  # name -> list of dims or None
        self.count = 0

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def add_input(self, shape, elem=F, name=None):
        name = name or self.fresh("x")
        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        self.tensors[name] = list(shape) if shape is not None else None
        return name

    def add_init(self, array, name=None):
        name = name or self.fresh("w")
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        self.tensors[name] = list(np.shape(array))
        return name

    def add_node(self, op, inputs, nout=1, shape=None, name=None, **attrs):
        outs = [self.fresh("t") for _ in range(nout)]
        node = helper.make_node(op, inputs, outs, name=name or self.fresh(op.lower()))
        node.attribute.extend(_attr(k, v) for k, v in sorted(attrs.items()))
        self.nodes.append(node)
        self.tensors[outs[0]] = shape
        return outs[0]


@st.composite
def float_array(draw, shape):
    """Random float32 values of `shape` (never all zero)."""
    seed = draw(st.integers(0, 2**32 - 1))
    shape = [d if isinstance(d, int) and 0 < d <= 64 else 1 for d in shape]
    size = math.prod(shape)
    if size > 4096:
        shape = [1] * len(shape)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) + 0.25


def x4(draw, g):
    """A rank-4 run-time tensor: an existing one or a new graph input."""
    have = [t for t, s in g.tensors.items() if s is not None and len(s) == 4 and t not in
            {i.name for i in g.inits}]
    if have and draw(st.booleans()):
        return draw(st.sampled_from(have))
    dims = draw(small_dims(4))
    dims = [max(d, 3) for d in dims[:2]] + [d + 4 for d in dims[2:]]
    if draw(st.integers(0, 9)) == 0:
        dims[0] = "N"
    return g.add_input(dims)


def pick(draw, g):
    """Any tensor so far (mostly run-time ones), or a new rank 1..4 graph input."""
    names = [t for t in g.tensors if t not in {i.name for i in g.inits}]
    if names and draw(st.integers(0, 3)):
        return draw(st.sampled_from(names))
    rank = draw(st.integers(1, 4))
    return g.add_input(draw(small_dims(rank)))


# ------------------------------------------------------------------------------ op builders

@st.composite
def op_unary(draw, g):
    op = draw(st.sampled_from(UNARY + ["LeakyRelu", "Elu", "Gelu", "Clip", "Cast", "Dropout"]))
    x = pick(draw, g)
    s = g.tensors.get(x)
    if op == "LeakyRelu" or op == "Elu":
        return g.add_node(op, [x], shape=s, alpha=draw(st.floats(-2, 2)))
    if op == "Gelu":
        return g.add_node(op, [x], shape=s,
                          approximate=draw(st.sampled_from(["none", "tanh", "bogus"])))
    if op == "Clip":
        if g.opset < 11:
            return g.add_node(op, [x], shape=s, min=draw(st.floats(-3, 0)),
                              max=draw(st.floats(0, 3)))
        lo = g.add_init(np.array(draw(st.floats(-3, 0)), np.float32))
        hi = g.add_init(np.array(draw(st.sampled_from([1.0, 6.0, math.inf, math.nan])),
                                 np.float32))
        return g.add_node(op, [x, lo, draw(st.sampled_from([hi, "", "nope"]))], shape=s)
    if op == "Cast":
        to = draw(st.sampled_from([F, TensorProto.FLOAT16, TensorProto.BFLOAT16,
                                   TensorProto.DOUBLE, TensorProto.INT64, 0, 999]))
        return g.add_node(op, [x], shape=s, to=to)
    if op == "Dropout":
        nout = draw(st.integers(1, 2))
        if g.opset >= 12 and draw(st.booleans()):
            r = g.add_init(np.array(0.5, np.float32))
            return g.add_node(op, [x, r], nout=nout, shape=s)
        return g.add_node(op, [x], nout=nout, shape=s)
    return g.add_node(op, [x], shape=s)


@st.composite
def op_binary(draw, g):
    op = draw(st.sampled_from(BINARY))
    x = pick(draw, g)
    s = g.tensors.get(x)
    kind = draw(st.integers(0, 3))
    if kind == 0 or s is None:
        y = pick(draw, g)
    else:
        # A broadcasting constant: a suffix of x's shape with some dims 1.
        k = draw(st.integers(0, len(s)))
        shape = [d if isinstance(d, int) and draw(st.booleans()) else 1 for d in s[len(s) - k:]]
        if kind == 3:
            shape = draw(st.lists(st.integers(1, 5), max_size=4))
        y = g.add_init(draw(float_array(shape)))
    if draw(st.booleans()):
        x, y = y, x
    return g.add_node(op, [x, y], shape=s)


@st.composite
def op_matmul(draw, g):
    x = pick(draw, g)
    s = g.tensors.get(x) or [draw(st.integers(1, 5))]
    k = s[-1] if isinstance(s[-1], int) else 4
    if draw(st.integers(0, 5)) == 0:
        k = draw(st.integers(1, 6))
    n = draw(st.integers(1, 6))
    if draw(st.integers(0, 2)) == 0:
        return g.add_node("MatMul", [x, g.add_init(draw(float_array([k])))], shape=s[:-1])
    w = g.add_init(draw(float_array([k, n])))
    if draw(st.booleans()):
        return g.add_node("MatMul", [x, w], shape=s[:-1] + [n])
    ta, tb = draw(st.integers(0, 1)), draw(st.integers(0, 1))
    if tb:
        g.inits[-1] = numpy_helper.from_array(numpy_helper.to_array(g.inits[-1]).T.copy(), w)
    ins = [x, w]
    c = draw(st.sampled_from(["none", "vec", "mat", "scalar", "runtime"]))
    if c == "vec":
        ins.append(g.add_init(draw(float_array([n]))))
    elif c == "mat":
        ins.append(g.add_init(draw(float_array([s[0] if isinstance(s[0], int) else 1, n]))))
    elif c == "scalar":
        ins.append(g.add_init(np.array(1.5, np.float32)))
    elif c == "runtime":
        ins.append(pick(draw, g))
    return g.add_node("Gemm", ins, shape=[s[0], n], transA=ta, transB=tb,
                      alpha=draw(st.sampled_from([1.0, 0.5, -2.0])),
                      beta=draw(st.sampled_from([1.0, 0.0, 3.0])))


@st.composite
def window_attrs(draw, nsp, kernel=None):
    """strides, pads, dilations (and kernel_shape) for a conv or pool: valid mostly."""
    at = {}
    bad = draw(st.integers(0, 4)) == 0
    lst = ints_list if bad else (lambda n: st.lists(st.integers(1, 2), min_size=n, max_size=n))
    if kernel is not None and draw(st.booleans()):
        at["kernel_shape"] = draw(lst(nsp)) if bad else kernel
    for key in ("strides", "dilations"):
        if draw(st.booleans()):
            at[key] = draw(lst(nsp))
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "NOTSET", "VALID", "SAME_UPPER",
                                 "SAME_LOWER", "bogus"]))
    if auto != "NOTSET":
        at["auto_pad"] = auto
    elif draw(st.booleans()):
        at["pads"] = draw(ints_list(2 * nsp)) if bad else draw(
            st.lists(st.integers(0, 2), min_size=2 * nsp, max_size=2 * nsp))
    return at


@st.composite
def op_conv(draw, g):
    one_d = draw(st.integers(0, 4)) == 0
    x = x4(draw, g) if not one_d else g.add_input([1, 3, draw(st.integers(5, 12))])
    s = g.tensors[x]
    c = s[1] if isinstance(s[1], int) else 3
    group = draw(st.sampled_from([1, 1, 1, c, 2, 0, -1, 3]))
    gdiv = group if group > 0 and c % group == 0 else 1
    k = draw(st.integers(1, 3)) * (group if group > 0 else 1)
    kh = [draw(st.integers(1, 3)) for _ in range(1 if one_d else 2)]
    wshape = [k, c // gdiv] + kh
    wrank = draw(st.integers(0, 8))
    if wrank == 0:
        wshape = wshape[:-1]  # a rank-3 filter for a 2-D conv (or rank 2 for 1-D)
    elif wrank == 1:
        wshape = wshape + [1]
    elif wrank == 2:
        wshape[1] += 1  # channels that do not fit
    ins = [x, g.add_init(draw(float_array(wshape)))]
    if draw(st.booleans()):
        ins.append(g.add_init(draw(float_array([draw(st.sampled_from([k, k, k + 1]))]))))
    at = draw(window_attrs(len(kh), kh))
    return g.add_node("Conv", ins, shape=None, group=group, **at)


@st.composite
def op_pool(draw, g):
    op = draw(st.sampled_from(POOLS + ["GlobalAveragePool", "GlobalMaxPool"]))
    x = x4(draw, g)
    if op.startswith("Global"):
        return g.add_node(op, [x], shape=g.tensors[x][:2] + [1, 1])
    kernel = [draw(st.integers(1, 3)) for _ in range(2)]
    at = draw(window_attrs(2))
    at["kernel_shape"] = kernel if draw(st.integers(0, 5)) else draw(ints_list(2))
    if draw(st.booleans()):
        at["ceil_mode"] = draw(st.integers(0, 1))
    if op == "AveragePool" and draw(st.booleans()):
        at["count_include_pad"] = draw(st.integers(0, 1))
    if g.opset < 10 or op == "AveragePool" and g.opset < 19:
        at.pop("dilations", None)
    if g.opset < 10:
        at.pop("ceil_mode", None)
    return g.add_node(op, [x], nout=draw(st.integers(1, 2)) if op == "MaxPool" else 1,
                      shape=None, **at)


@st.composite
def op_norm(draw, g):
    op = draw(st.sampled_from(["BatchNormalization", "LayerNormalization",
                               "InstanceNormalization", "GroupNormalization"]))
    x = x4(draw, g)
    s = g.tensors[x]
    c = s[1] if isinstance(s[1], int) else 3
    cc = c if draw(st.integers(0, 6)) else c + 1
    eps = draw(st.sampled_from([1e-5, 0.0, -1.0, 1e-3]))
    if op == "BatchNormalization":
        ps = [g.add_init(draw(float_array([cc]))) for _ in range(3)]
        ps.append(g.add_init(np.abs(draw(float_array([cc]))) + 0.5))
        at = {"epsilon": eps}
        if draw(st.integers(0, 5)) == 0 and g.opset >= 14:
            at["training_mode"] = 1
        return g.add_node(op, [x] + ps, shape=s, nout=draw(st.sampled_from([1, 1, 3])), **at)
    if op == "LayerNormalization":
        axis = draw(st.integers(-5, 4))
        norm = s[axis:] if -4 <= axis < 4 else [4]
        pshape = [d if isinstance(d, int) else 1 for d in norm]
        ins = [x, g.add_init(draw(float_array(pshape)))]
        if draw(st.booleans()):
            ins.append(g.add_init(draw(float_array(pshape))))
        return g.add_node(op, ins, shape=s, axis=axis, epsilon=eps)
    if op == "InstanceNormalization":
        return g.add_node(op, [x, g.add_init(draw(float_array([cc]))),
                               g.add_init(draw(float_array([cc])))], shape=s, epsilon=eps)
    groups = draw(st.sampled_from([1, c, 2, 3, 0, -2]))
    n = draw(st.sampled_from([cc, groups if groups > 0 else 1]))
    return g.add_node(op, [x, g.add_init(draw(float_array([n]))),
                           g.add_init(draw(float_array([n])))], shape=s, num_groups=groups,
                      epsilon=eps)


def _factor_target(draw, s):
    """A reshape target for shape s: its element count refactored, with 0 and -1 sometimes."""
    if s is None or not all(isinstance(d, int) for d in s) or not 0 < math.prod(s) <= 4096:
        return draw(st.lists(st.integers(-1, 6), min_size=1, max_size=4))
    total = math.prod(s)
    out = []
    while total > 1 and len(out) < 3:
        f = draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
        out.append(f)
        total //= f
    out.append(total)
    if draw(st.booleans()):
        out[draw(st.integers(0, len(out) - 1))] = -1
    return out


@st.composite
def op_movement(draw, g):
    op = draw(st.sampled_from(["Reshape", "Flatten", "Transpose", "Softmax"] + REDUCE + ["Pad"]))
    x = pick(draw, g)
    s = g.tensors.get(x)
    r = len(s) if s is not None else 2
    if op == "Reshape":
        tgt = _factor_target(draw, s) if draw(st.integers(0, 4)) else draw(
            st.lists(weird_int(), min_size=0, max_size=5))
        at = {"allowzero": 1} if g.opset >= 14 and draw(st.integers(0, 5)) == 0 else {}
        return g.add_node(op, [x, g.add_init(np.array(tgt, np.int64))], shape=None, **at)
    if op == "Flatten":
        return g.add_node(op, [x], shape=None, axis=draw(st.integers(-r - 1, r + 1)))
    if op == "Transpose":
        perm = draw(st.permutations(list(range(r))))
        if draw(st.integers(0, 4)) == 0:
            perm = draw(st.lists(st.integers(-1, r), max_size=r + 1))
        return g.add_node(op, [x], shape=[s[p] for p in perm] if s and sorted(perm) == list(
            range(r)) else None, perm=list(perm))
    if op == "Softmax":
        return g.add_node(op, [x], shape=s, axis=draw(st.integers(-r - 1, r)))
    if op == "Pad":
        pads = draw(st.lists(st.integers(-1, 2), min_size=2 * r, max_size=2 * r))
        if draw(st.integers(0, 4)) == 0:
            pads = draw(st.lists(weird_int(), max_size=2 * r + 2))
        mode = draw(st.sampled_from(["constant", "constant", "reflect", "edge", "bogus"]))
        if g.opset < 11:
            return g.add_node(op, [x], shape=None, pads=pads, mode=mode,
                              value=draw(st.floats(allow_nan=True)))
        ins = [x, g.add_init(np.array(pads, np.int64))]
        if draw(st.booleans()):
            ins.append(g.add_init(np.array(draw(st.floats(-2, 2)), np.float32)))
        return g.add_node(op, ins, shape=None, mode=mode)
    axes = draw(st.lists(st.integers(-r - 1, r), max_size=r, unique=True))
    keep = draw(st.integers(0, 1))
    attr_axes = g.opset < 13 or (op != "ReduceSum" and g.opset < 18)
    if attr_axes:
        return g.add_node(op, [x], shape=None, keepdims=keep,
                          **({"axes": axes} if axes else {}))
    ins = [x] + ([g.add_init(np.array(axes, np.int64))] if axes else [])
    return g.add_node(op, ins, shape=None, keepdims=keep,
                      noop_with_empty_axes=draw(st.integers(0, 1)))


@st.composite
def op_shape_chain(draw, g):
    """Shape computations the importer folds: Shape/Gather/Unsqueeze/Concat/Slice/... feeding a
    Reshape, and ops that make constants (ConstantOfShape, Range, Expand)."""
    x = pick(draw, g)
    s = g.tensors.get(x)
    r = len(s) if s is not None else 2
    kind = draw(st.sampled_from(["shape_reshape", "constant_of_shape", "range", "expand",
                                 "gather", "slice", "constant", "size", "where"]))
    if kind == "shape_reshape":
        sh = g.add_node("Shape", [x], shape=[r])
        idx = g.add_init(np.array(draw(st.lists(st.integers(-r - 1, r), min_size=1,
                                                max_size=2)), np.int64))
        ga = g.add_node("Gather", [sh, idx], shape=None, axis=draw(st.sampled_from([0, 0, 1])))
        minus = g.add_init(np.array([-1], np.int64))
        cat = g.add_node("Concat", [ga, minus], shape=None, axis=draw(st.sampled_from([0, 0, 1])))
        return g.add_node("Reshape", [x, cat], shape=None)
    if kind == "constant_of_shape":
        dims = draw(st.lists(st.one_of(st.integers(0, 4), st.sampled_from(HUGE)), max_size=3))
        shp = g.add_init(np.array(dims, np.int64))
        val = numpy_helper.from_array(np.array([draw(st.floats(-2, 2))], np.float32), "v")
        c = g.add_node("ConstantOfShape", [shp], shape=dims, value=val)
        return g.add_node("Add", [x, c], shape=s)
    if kind == "range":
        start, limit = draw(st.integers(-5, 5)), draw(st.sampled_from([5, 0, 2**40, -(2**40)]))
        delta = draw(st.sampled_from([1, 2, -1, 0, 1e-9]))
        ts = [g.add_init(np.array(v, np.float32 if isinstance(delta, float) else np.int64))
              for v in (start, limit, delta)]
        rg = g.add_node("Range", ts, shape=None)
        return g.add_node("Reshape", [x, rg], shape=None) if draw(st.booleans()) else g.add_node(
            "Add", [x, g.add_node("Cast", [rg], shape=None, to=F)], shape=None)
    if kind == "expand":
        c = g.add_init(draw(float_array([1])))
        dims = draw(st.lists(st.one_of(st.integers(-1, 4), st.sampled_from(HUGE)), max_size=3))
        e = g.add_node("Expand", [c, g.add_init(np.array(dims, np.int64))], shape=None)
        return g.add_node("Mul", [x, e], shape=s)
    if kind == "gather":
        data = g.add_init(draw(float_array(draw(small_dims(draw(st.integers(1, 3)))))))
        idx = g.add_init(np.array(draw(st.lists(st.integers(-8, 8), max_size=3)), np.int64))
        ga = g.add_node("Gather", [data, idx], shape=None, axis=draw(st.integers(-3, 3)))
        return g.add_node("Add", [x, ga], shape=None)
    if kind == "slice":
        data = g.add_init(draw(float_array(draw(small_dims(2)))))
        vals = [draw(st.lists(weird_int(), min_size=1, max_size=2)) for _ in range(4)]
        ins = [data] + [g.add_init(np.array(v, np.int64)) for v in vals[:draw(st.integers(2, 4))]]
        if g.opset < 10:
            sl = g.add_node("Slice", [data], shape=None, starts=vals[0], ends=vals[1])
        else:
            sl = g.add_node("Slice", ins, shape=None)
        return g.add_node("Add", [x, sl], shape=None)
    if kind == "constant":
        form = draw(st.sampled_from(["value", "value_float", "value_floats", "value_int",
                                     "value_ints", "none", "two"]))
        at = {}
        if form in ("value", "two"):
            at["value"] = numpy_helper.from_array(draw(float_array(draw(small_dims(2)))), "c")
        if form in ("value_float", "two"):
            at["value_float"] = 2.0
        if form == "value_floats":
            at["value_floats"] = [1.0, 2.0]
        if form == "value_int":
            at["value_int"] = 3
        if form == "value_ints":
            at["value_ints"] = [1, 2]
        c = g.add_node("Constant", [], shape=None, **at)
        return g.add_node("Mul", [x, c], shape=None)
    if kind == "size":
        sz = g.add_node("Size", [x], shape=[])
        return g.add_node("Add", [x, g.add_node("Cast", [sz], shape=[], to=F)], shape=s)
    cond = g.add_init(np.array(draw(st.lists(st.booleans(), min_size=1, max_size=3))))
    w = g.add_node("Where", [cond, g.add_init(draw(float_array([1]))),
                             g.add_init(draw(float_array([1])))], shape=None)
    return g.add_node("Sub", [x, w], shape=None)


@st.composite
def op_unsupported(draw, g):
    x = pick(draw, g)
    domain = draw(st.sampled_from(["", "", "com.microsoft", "ai.onnx"]))
    op = draw(st.sampled_from(UNSUPPORTED + ["Relu", "Gemm", ""]))
    g.nodes.append(helper.make_node(op, [x], [g.fresh("t")], name=g.fresh("u"), domain=domain))
    g.tensors[g.nodes[-1].output[0]] = None
    return g.nodes[-1].output[0]


OP_BUILDERS = [op_unary, op_binary, op_matmul, op_conv, op_pool, op_norm, op_movement,
               op_shape_chain, op_unsupported]
WEIGHTS = [4, 4, 3, 4, 3, 3, 4, 3, 1]


# ------------------------------------------------------------------------------ damage

@st.composite
def damage_attributes(draw, node):
    """Attributes the spec forbids: a forbidden or huge value, the wrong type, a duplicate, an
    unknown one, or a required one removed."""
    kind = draw(st.sampled_from(["value", "type", "duplicate", "unknown", "remove", "empty"]))
    attrs = list(node.attribute)
    if kind == "unknown" or not attrs:
        node.attribute.append(_attr(draw(st.sampled_from(["bogus", "group", "strides", ""])),
                                    draw(st.sampled_from([0, -1, [0, 0], 1.5, "x"]))))
        return
    i = draw(st.integers(0, len(attrs) - 1))
    a = attrs[i]
    if kind == "remove":
        del node.attribute[i]
    elif kind == "duplicate":
        node.attribute.append(a)
    elif kind == "type":
        node.attribute[i].CopyFrom(_attr(a.name, draw(st.sampled_from([1.5, "s", [1.0], [b"a"]]))))
    elif kind == "empty":
        node.attribute[i].CopyFrom(_attr(a.name, []) if a.ints or a.floats else a)
        if not (a.ints or a.floats):
            node.attribute[i].ClearField("name")
    elif a.type == onnx.AttributeProto.INT:
        node.attribute[i].i = draw(weird_int())
    elif a.type == onnx.AttributeProto.INTS:
        del node.attribute[i].ints[:]
        node.attribute[i].ints.extend(draw(st.lists(weird_int(), max_size=5)))
    elif a.type == onnx.AttributeProto.FLOAT:
        node.attribute[i].f = draw(st.floats(allow_nan=True, allow_infinity=True, width=32))
    elif a.type == onnx.AttributeProto.STRING:
        node.attribute[i].s = draw(st.binary(max_size=8))


@st.composite
def damage_initializer(draw, t, side):
    """Dims that do not match the data, raw_data beside typed data, a wrong or unknown data
    type, huge dims, or external data (in the model's directory, outside it, absent)."""
    kind = draw(st.sampled_from(["dims", "raw_short", "both", "typed", "dtype", "huge", "negative",
                                 "external_ok", "external_out", "external_bad", "segment",
                                 "string"]))
    if kind == "dims":
        t.dims.append(draw(st.integers(0, 3)))
    elif kind == "raw_short" and t.raw_data:
        t.raw_data = t.raw_data[:draw(st.integers(0, max(len(t.raw_data) - 1, 0)))]
    elif kind == "both":
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            t.float_data.extend(a.flatten().tolist())
        else:
            t.int64_data.extend([int(v) for v in a.flatten().tolist()])
    elif kind == "typed":
        a = numpy_helper.to_array(t)
        t.ClearField("raw_data")
        if a.dtype == np.float32:
            t.float_data.extend(a.flatten().tolist()[:draw(st.integers(0, a.size))])
        else:
            t.int64_data.extend([int(v) for v in a.flatten().tolist()])
    elif kind == "dtype":
        t.data_type = draw(st.sampled_from([0, 7, 6, 11, 10, 16, 8, 9, 17, 22, 23, 25, 30, 999]))
    elif kind == "huge":
        t.dims.extend([draw(st.sampled_from(HUGE[:5]))])
    elif kind == "negative":
        t.dims[:] = [-1] + list(t.dims)
    elif kind.startswith("external") or kind == "segment":
        raw = t.raw_data or numpy_helper.to_array(t).tobytes()
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.ClearField("int64_data")
        t.data_location = TensorProto.EXTERNAL
        offset = draw(st.sampled_from([0, 0, 16, 3, 2**40, -8]))
        length = draw(st.sampled_from([len(raw), len(raw), len(raw) + 4, 0, 2**40, None]))
        loc = DATA_FILE
        if kind == "external_out":
            loc = draw(st.sampled_from([f"../outside/{DATA_FILE}", "/etc/passwd", "/etc",
                                        f"sub/../../outside/{DATA_FILE}", "link.bin"]))
        elif kind == "external_bad":
            loc = draw(st.sampled_from(["", ".", "missing.bin", "sub", "\x00x", "a" * 300]))
        entries = [("location", loc), ("offset", str(offset))]
        if length is not None:
            entries.append(("length", str(length)))
        if draw(st.integers(0, 5)) == 0:
            entries.append(("checksum", "0"))
        for k, v in entries:
            e = t.external_data.add()
            e.key, e.value = k, v
        side[DATA_FILE] = b"\0" * (offset if 0 < offset < 2**20 else 0) + raw
        side["@link.bin"] = f"../outside/{DATA_FILE}"  # a symlink leaving the directory
        if kind == "segment":
            t.segment.begin, t.segment.end = 0, draw(st.integers(0, 4))
    elif kind == "string":
        t.data_type = TensorProto.STRING
        t.string_data.append(b"abc")


@st.composite
def damage_graph(draw, g):
    """Graph-level damage: names emptied or duplicated, dangling inputs, cycles, missing or extra
    inputs and outputs, an initializer shadowing an input."""
    kind = draw(st.sampled_from(["empty_node_name", "dup_node_name", "dup_output", "dangling",
                                 "cycle", "self_loop", "drop_input", "extra_input", "no_output",
                                 "bad_output", "dup_graph_output", "shadow", "dup_init",
                                 "empty_tensor_name", "output_is_input", "input_no_shape",
                                 "input_bad_dim"]))
    nodes = g.node
    if kind == "empty_node_name" and nodes:
        nodes[draw(st.integers(0, len(nodes) - 1))].name = ""
    elif kind == "dup_node_name" and len(nodes) > 1:
        nodes[-1].name = nodes[0].name
    elif kind == "dup_output" and len(nodes) > 1:
        nodes[-1].output[0] = nodes[0].output[0]
    elif kind == "dangling" and nodes:
        n = nodes[draw(st.integers(0, len(nodes) - 1))]
        if n.input:
            n.input[draw(st.integers(0, len(n.input) - 1))] = "nowhere"
    elif kind == "cycle" and len(nodes) > 1 and nodes[0].input:
        nodes[0].input[0] = nodes[-1].output[0]
    elif kind == "self_loop" and nodes and nodes[-1].input:
        nodes[-1].input[0] = nodes[-1].output[0]
    elif kind == "drop_input" and g.input:
        del g.input[draw(st.integers(0, len(g.input) - 1))]
    elif kind == "extra_input":
        g.input.append(helper.make_tensor_value_info("unused", F, [2]))
    elif kind == "no_output":
        del g.output[:]
    elif kind == "bad_output":
        g.output.append(helper.make_tensor_value_info("never", F, None))
    elif kind == "dup_graph_output" and g.output:
        g.output.append(g.output[0])
    elif kind == "shadow" and g.input and g.initializer:
        g.initializer[0].name = g.input[0].name
    elif kind == "dup_init" and g.initializer:
        g.initializer.append(g.initializer[0])
        g.initializer[-1].dims[:] = list(g.initializer[-1].dims) + [1]
    elif kind == "empty_tensor_name" and nodes:
        nodes[-1].output[0] = ""
    elif kind == "output_is_input" and g.input and g.output:
        g.output[0].name = g.input[0].name
    elif kind == "input_no_shape" and g.input:
        g.input[0].type.tensor_type.ClearField("shape")
    elif kind == "input_bad_dim" and g.input and g.input[0].type.tensor_type.shape.dim:
        d = g.input[0].type.tensor_type.shape.dim[0]
        d.dim_value = draw(st.sampled_from([0, -1, 2**40, 2**62]))


# ------------------------------------------------------------------------------ models

@st.composite
def generated(draw):
    """A Case: a random model over the supported ops, damaged some of the time."""
    opset = draw(st.integers(7, 25))
    g = Graph(opset)
    builders = [b for b, w in zip(OP_BUILDERS, WEIGHTS) for _ in range(w)]
    for _ in range(draw(st.integers(1, 5))):
        draw(draw(st.sampled_from(builders))(g))
    outs = [n.output[0] for n in g.nodes if n.output]
    consumed = {t for n in g.nodes for t in n.input}
    finals = [t for t in outs if t not in consumed] or outs[-1:]
    if draw(st.integers(0, 3)) == 0 and len(outs) > 1:
        finals.append(draw(st.sampled_from(outs)))
    graph = helper.make_graph(g.nodes, draw(st.sampled_from(["g", "", "main_graph", "a/b c"])),
                              g.inputs, [helper.make_tensor_value_info(t, F, None)
                                         for t in finals], initializer=g.inits)
    imports = [helper.make_opsetid("", opset)]
    if draw(st.integers(0, 9)) == 0:
        imports.append(helper.make_opsetid(draw(st.sampled_from(["", "ai.onnx", "com.x"])),
                                           draw(st.integers(1, 30))))
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = draw(st.sampled_from([3, 4, 7, 8, 9, 10]))
    side = {}
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):
        what = draw(st.sampled_from(["attr", "attr", "init", "graph", "graph"]))
        if what == "attr" and m.graph.node:
            draw(damage_attributes(m.graph.node[draw(st.integers(0, len(m.graph.node) - 1))]))
        elif what == "init" and m.graph.initializer:
            i = draw(st.integers(0, len(m.graph.initializer) - 1))
            try:
                draw(damage_initializer(m.graph.initializer[i], side))
            except Exception:  # noqa: BLE001 - onnx's ValueError, ValidationError, ...
                pass  # a tensor an earlier damage made unreadable: it stays as it is
        else:
            draw(damage_graph(m.graph))
    return Case(m.SerializeToString(), side, "generated")


@st.composite
def mutated(draw):
    """A generated model's bytes, damaged: truncated, bits flipped, junk inserted, a range cut or
    repeated."""
    case = draw(generated())
    data = bytearray(case.data)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "cut", "repeat", "byte"]))
        i = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            del data[i:]
        elif kind == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "cut":
            del data[i:i + draw(st.integers(1, 16))]
        elif kind == "repeat":
            data[i:i] = data[i:i + draw(st.integers(1, 32))]
        else:
            data[i] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, 0x08, 0x12, 0x3A]))
    return Case(bytes(data), case.side, "mutated")


@st.composite
def raw(draw):
    """Short byte strings: empty, text, protobuf-looking tags."""
    data = draw(st.one_of(st.just(b""), st.binary(max_size=64),
                          st.text(max_size=40).map(str.encode),
                          st.lists(st.sampled_from([b"\x08\x08", b"\x3a\x00", b"\x3a\x02\x0a\x00",
                                                    b"\x42\x02\x10\x11", b"\x12\x00"]),
                                   max_size=6).map(b"".join)))
    return Case(data, {}, "raw")


def cases():
    return st.one_of(generated(), generated(), generated(), mutated(), raw())
