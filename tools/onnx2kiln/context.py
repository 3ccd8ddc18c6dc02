"""The Converter: the state of one conversion and the helpers every op converter uses.

Converters (ops/*.py) and fusions (fusions.py) receive it as `cx`. It maps ONNX tensors to kiln
tensors (`tmap`) or to conversion-time values (`consts`), emits kiln nodes (`emit`), turns
constants into kiln constants (`materialize`) and keeps each kiln tensor's dtype and shape (the
shapes that Shape/Size folding and the converters' decisions read during conversion).
"""
import math

import numpy as np

from . import model as onnx_model
from .errors import ConvertError, describe
from .fold import is_sym_array
from .names import Names, sanitize
from .symvalue import sym_value

# emit()'s default output shape: the shape of its first input (elementwise ops, norms, ...).
SAME = object()

# Constants of at most this many elements are written inline in the graph file.
INLINE_MAX = 16


class Converter:
    def __init__(self, model, name, layout="NCHW", dtype=None, source="model.onnx"):
        self.model = model
        self.g = model.graph
        self.name = sanitize(name, allow_dot=False, fallback="graph")
        self.layout = layout
        self.force_dtype = dtype
        self.source = source
        self.opset = onnx_model.default_opset(model)
        self.tnames = Names(allow_dot=True)
        self.nnames = Names(allow_dot=False)
        self.tmap = {}        # onnx tensor -> kiln tensor (activations)
        self.shape = {}       # kiln tensor -> [int | str | None]
        self.dtype = {}       # kiln tensor -> kiln dtype
        self.consts = {}      # onnx tensor -> numpy array (object dtype: symbolic ints)
        self.kconst = {}      # (onnx tensor, dtype) -> kiln constant name
        self.inputs = {}      # kiln name -> spec
        self.constants = {}   # kiln name -> spec
        self.weights = {}     # safetensors key -> (dtype, array)
        self.nodes = []
        self.outputs = []
        self.warnings = []
        self.input_map = {}
        self.output_map = {}
        self.origin = {}      # kiln node name -> the ONNX node it came from (for messages)
        self.skip = set()     # ids of ONNX nodes a fusion has taken over
        self.replace = {}     # id of an ONNX node -> fn(cx, node) that emits it instead
        self.extra_pads = {}  # id of a Conv -> [t, l, b, r] from a Pad folded into it
        self.became = {}      # id of an ONNX node -> folded / fused / converted (--report)
        self.aliases = set()  # ids of ONNX nodes that became an alias of a kiln tensor
        self.consumers = {}
        for n in self.g.node:
            for t in n.input:
                if t:
                    self.consumers.setdefault(t, []).append(n)
        self.producers = {o: n for n in self.g.node for o in n.output if o}
        self.graph_outputs = {o.name for o in self.g.output}

    # ---------------------------------------------------------------- messages
    def where(self, node):
        return describe(node)

    def fail(self, node, msg):
        raise ConvertError(f"{self.source}: {self.where(node)}: {msg}")

    def fdtype(self, elem_type, what):
        """The kiln dtype of ONNX element type `elem_type` (after --dtype); refuses non-floats."""
        if elem_type not in onnx_model.ONNX_FLOAT:
            raise ConvertError(f"{self.source}: {what} has element type "
                               f"{onnx_model.elem_type_name(elem_type)}; kiln graphs compute in "
                               f"f32, f16 or bf16 only")
        return self.force_dtype or onnx_model.ONNX_FLOAT[elem_type]

    def tdtype(self, elem_type, what):
        """The kiln dtype of ONNX element type `elem_type`: a floating one (after --dtype) or
        i32, i64, bool as they are; refuses the others."""
        if elem_type in onnx_model.ONNX_INT:
            return onnx_model.ONNX_INT[elem_type]
        if elem_type not in onnx_model.ONNX_FLOAT:
            raise ConvertError(f"{self.source}: {what} has element type "
                               f"{onnx_model.elem_type_name(elem_type)}; kiln graphs hold f32, "
                               f"f16, bf16, i32, i64 or bool tensors")
        return self.fdtype(elem_type, what)

    def attrs(self, node):
        return onnx_model.attributes(node)

    def flag(self, node, at, key, default):
        """A 0/1 attribute (keepdims, transA, ceil_mode, ...) as 0 or 1; any other value is
        refused, not read as true."""
        v = at.get(key, default)
        if v not in (0, 1):
            self.fail(node, f"{key} {v}: expected 0 or 1")
        return int(v)

    # ---------------------------------------------------------------- tensors
    def is_act(self, t):
        return t in self.tmap

    def known(self, t):
        return t == "" or t in self.consts

    def const(self, node, t, what):
        if t not in self.consts:
            self.fail(node, f"{what} ('{t}') must be a constant (an initializer, a Constant or a "
                            f"foldable shape computation), found a run-time tensor")
        return self.consts[t]

    def act(self, node, t, dtype=None):
        """The kiln tensor for ONNX tensor t; constants are materialized (in `dtype`; without
        one, bool and integer values keep their own dtype and floats take the graph's)."""
        if t in self.tmap:
            return self.tmap[t]
        if t in self.consts:
            return self.materialize(node, t, dtype or self.natural_dtype(t))
        self.fail(node, f"input '{t}' is not defined")

    def act_dtype(self, *ts):
        """The dtype of the first of ONNX tensors `ts` that is a run-time tensor (None: none is);
        constant operands are materialized in it."""
        for t in ts:
            if self.is_act(t):
                return self.dtype[self.tmap[t]]
        return None

    def materialize(self, node, t, dtype):
        """The kiln constant holding conversion-time value `t` in `dtype` (made once per dtype):
        inline data for small ones, else a tensor of the weights file. A shape value over run-time
        dims becomes kiln ops that compute it (symvalue.py)."""
        a = self.consts[t]
        if is_sym_array(a):
            key = (t, dtype or "i64")
            if key not in self.kconst:
                self.kconst[key] = sym_value(self, node, t, dtype)
                self.shape.setdefault(self.kconst[key], list(a.shape))
            return self.kconst[key]
        dtype = dtype or self.force_dtype or "f32"
        key = (t, dtype)
        if key in self.kconst:
            return self.kconst[key]
        name = self.tnames.get(t)
        arr = np.asarray(a)
        if dtype in onnx_model.INT_DTYPES:
            arr = self.integral(node, t, arr, dtype)
        elif arr.dtype != np.float32:
            arr = arr.astype(np.float64)
        if 0 in arr.shape:
            self.fail(node, f"tensor '{t}' is empty (shape {list(arr.shape)}); kiln tensors have "
                            f"no zero-size dims")
        arr = self.representable(arr, dtype, name)
        spec = {"dtype": dtype, "shape": [int(d) for d in arr.shape]}
        if arr.size <= INLINE_MAX:
            if dtype in onnx_model.INT_DTYPES:
                spec["data"] = [int(v) for v in arr.astype(np.int64).flatten().tolist()]
            else:
                spec["data"] = [json_number(v) for v in arr.astype(np.float32).flatten().tolist()]
        else:
            spec["file"] = f"{self.name}.safetensors"
            spec["key"] = name
            if dtype in onnx_model.INT_DTYPES:
                self.weights[name] = (dtype, arr)
            else:
                self.weights[name] = (dtype, np.asarray(arr, dtype=np.float32))
        self.constants[name] = spec
        self.kconst[key] = name
        self.shape[name] = list(arr.shape)
        self.dtype[name] = dtype
        return name

    def natural_dtype(self, t):
        """The kiln dtype a conversion-time value keeps as data of its own: i32 / i64 / bool for
        integer and bool arrays, None (the float default) otherwise."""
        a = self.consts.get(t)
        if a is None or is_sym_array(a):
            return None
        kind = np.asarray(a).dtype
        if kind == np.bool_:
            return "bool"
        if kind.kind in "iu":
            return "i32" if kind.itemsize <= 4 and kind.kind == "i" else "i64"
        return None

    def integral(self, node, t, arr, dtype):
        """Constant `t` as exact values of integer / bool dtype `dtype`: integers (and bools)
        convert exactly within range; floating values only when they are whole numbers."""
        want = onnx_model.NUMPY_OF[dtype]
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                self.fail(node, f"constant '{t}' holds non-integer values but is used as {dtype} "
                                f"data (insert a Cast)")
        if dtype != "bool" and arr.size:
            info = np.iinfo(want)
            if arr.min() < info.min or arr.max() > info.max:
                self.fail(node, f"constant '{t}' holds values out of the {dtype} range")
        return arr.astype(want)

    def representable(self, arr, dtype, name):
        """f16 values beyond the f16 range are clipped to it (with a warning)."""
        if dtype != "f16":
            return arr
        lim = 65504.0
        finite = np.isfinite(arr)
        over = finite & (np.abs(arr) > lim)
        if over.any():
            self.warnings.append(f"constant '{name}': {int(over.sum())} values beyond the f16 "
                                 f"range clipped to +-65504")
            arr = np.where(over, np.sign(arr) * lim, arr)
        return arr

    def derived(self, raw):
        """A fresh key in self.consts for a constant derived from another."""
        key, i = raw, 1
        while key in self.consts:
            key = f"{raw}_{i}"
            i += 1
        return key

    def add_const(self, raw, value):
        """Stores a derived conversion-time value under a fresh key; returns the key."""
        key = self.derived(raw)
        self.consts[key] = value
        return key

    def emit(self, node, op, inputs, attrs=None, out=None, shape=SAME, dtype=None, suffix=None):
        """Adds a kiln node; `out` is the ONNX tensor it defines (None: an internal temporary).
        `shape` is the output's shape as far as the importer knows it (default: the first
        input's), `dtype` its dtype (default: the first input's)."""
        base = sanitize(node.name, allow_dot=False, fallback=op) if node.name else op
        nname = self.nnames.get(base + (f"_{suffix}" if suffix else ""), fallback=op)
        if out is not None:
            tname = self.tnames.get(out)
        else:
            tname = self.tnames.get(nname + "_out")
        n = {"op": op, "name": nname, "inputs": list(inputs), "outputs": [tname]}
        n.update(attrs or {})
        self.nodes.append(n)
        self.origin[nname] = node
        if shape is SAME:
            shape = self.shp(inputs[0])
        self.shape[tname] = list(shape) if shape is not None else None
        self.dtype[tname] = dtype or self.dtype[inputs[0]]
        if out is not None:
            self.tmap[out] = tname
        return tname

    def shp(self, kt):
        """The shape of kiln tensor kt: a list of ints, symbols (str) and None (unknown), or None
        when even the rank is unknown."""
        return self.shape.get(kt)

    def rank(self, node, kt):
        s = self.shp(kt)
        if s is None:
            self.fail(node, f"the rank of '{kt}' is unknown")
        return len(s)

    def axis(self, node, a, r, what="axis", allow_end=False):
        """ONNX axis `a` of a rank-r tensor as 0..r-1 (0..r with allow_end); an axis outside
        [-r, r) (or [-r, r]) is refused, not wrapped."""
        hi = r + 1 if allow_end else r
        if not -r <= a < hi:
            self.fail(node, f"{what} {a} is out of range for rank {r} (expected {-r} to {hi - 1})")
        return a + r if a < 0 else a

    def alias(self, n, xt=None):
        """ONNX output 0 of n is kiln tensor xt (default: its input 0), with no node of its own;
        an `identity` node when that output is a graph output."""
        self.aliases.add(id(n))
        if n.output[0] in self.graph_outputs:
            xt = xt or self.act(n, n.input[0])
            self.emit(n, "identity", [xt], out=n.output[0])
        else:
            self.tmap[n.output[0]] = xt or self.act(n, n.input[0])

    def no_extra_outputs(self, n, keep=1):
        for t in n.output[keep:]:
            if t and (t in self.consumers or t in self.graph_outputs):
                self.fail(n, f"output '{t}' is used; kiln computes only the op's first output "
                             f"(inference form)")

    # ---------------------------------------------------------------- graph queries
    def producer(self, t):
        return self.producers.get(t)

    def single_consumer(self, t, op_types):
        """The only node reading t when it has one of `op_types` and t is no graph output."""
        if t in self.graph_outputs:
            return None
        cs = self.consumers.get(t, [])
        if len(cs) != 1 or cs[0].op_type not in op_types:
            return None
        return cs[0]

    def other(self, node, t):
        """The other input of a binary node given one input t (None when t is not an input)."""
        if node.input[0] == t:
            return node.input[1]
        if node.input[1] == t:
            return node.input[0]
        return None

    def plain_const(self, t):
        """The conversion-time value of t as a numeric array, or None (run-time or symbolic)."""
        a = self.consts.get(t) if t else None
        return None if a is None or is_sym_array(a) else np.asarray(a)

    def scalar_is(self, t, v, tol=1e-3):
        a = self.consts.get(t)
        if a is None or is_sym_array(a) or a.size != 1:
            return False
        return abs(float(a.reshape(())) - v) <= tol * abs(v)


def json_number(v):
    """A float for the graph file: NaN and infinities as the strings kiln reads."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v
