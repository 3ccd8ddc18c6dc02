#!/usr/bin/env python3
"""onnx2kiln: convert an ONNX model to a kiln graph file (format version 1) plus its weights.

    onnx2kiln.py MODEL.onnx --out DIR [--name NAME] [--layout NCHW|NHWC] [--dtype f32|f16|bf16]

writes DIR/NAME.json (the graph) and DIR/NAME.safetensors (every initializer and large constant
that the graph uses, logical row-major shapes, little endian). Shape-only subgraphs
(Shape/Gather/Unsqueeze/Concat/... chains that compute static or symbolic shapes) are folded at
conversion time; dynamic ONNX dims become kiln symbols. See docs/ONNX.md for the op coverage.

Exit status: 0 success, 2 a user error (unreadable model, unsupported ops, shapes that depend on
run-time values), 1 an internal error.
"""
import argparse
import json
import math
import os
import re
import struct
import sys

np = None


def _import_numpy():
    """numpy, imported on first need: a warm `kiln import` whose stamp says the conversion is up to
    date exits before paying for it."""
    global np
    if np is None:
        try:
            import numpy
        except ImportError:  # pragma: no cover - depends on the environment
            print("onnx2kiln: error: the Python package 'numpy' is not installed "
                  "(pip install -r tools/requirements.txt)", file=sys.stderr)
            sys.exit(2)
        np = numpy
    return np


if __name__ != "__main__":  # used as a library (tests, export and bench scripts)
    _import_numpy()

# ------------------------------------------------------------------------------------ errors


class ConvertError(Exception):
    """A problem with the model or the arguments (exit status 2)."""


# ------------------------------------------------------------------------------------ safetensors

_ST_DTYPES = {"f32": ("F32", 4), "f16": ("F16", 2), "bf16": ("BF16", 2)}


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bit patterns, rounding to nearest even, NaN kept quiet."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        rounded = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)
    return rounded


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def tensor_bytes(arr, dtype):
    """The little-endian bytes of `arr` (any float array) stored as kiln dtype `dtype`."""
    if dtype == "f32":
        return np.ascontiguousarray(arr, dtype="<f4").tobytes()
    if dtype == "f16":
        return np.ascontiguousarray(arr, dtype="<f2").tobytes()
    if dtype == "bf16":
        return f32_to_bf16_bits(np.asarray(arr, dtype=np.float32)).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors):
    """tensors: {name: (kiln dtype, numpy array)}. Writes them sorted by name, contiguously."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, arr = tensors[name]
        data = tensor_bytes(arr, dtype)
        header[name] = {"dtype": _ST_DTYPES[dtype][0], "shape": [int(d) for d in np.shape(arr)],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """{name: float32 numpy array} from a safetensors file of F32/F16/BF16 tensors."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif e["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            a = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {e['dtype']}")
        out[name] = a.reshape(e["shape"]).astype(np.float32)
    return out


# ------------------------------------------------------------------------------------ names

def sanitize(name, allow_dot=True, fallback="t"):
    pat = r"[^A-Za-z0-9_.]" if allow_dot else r"[^A-Za-z0-9_]"
    s = re.sub(pat, "_", name or "")
    s = re.sub(r"_+", "_", s).strip("_.")
    if not s:
        s = fallback
    if not (s[0].isalpha() or s[0] == "_"):
        s = fallback + "_" + s
    return s


def sanitize_symbol(name):
    return sanitize(name, allow_dot=False, fallback="d")


class Names:
    """Unique sanitized names."""

    def __init__(self, allow_dot=True):
        self.used = set()
        self.allow_dot = allow_dot

    def get(self, raw, fallback="t"):
        base = sanitize(raw, self.allow_dot, fallback)
        s, i = base, 1
        while s in self.used:
            s = f"{base}_{i}"
            i += 1
        self.used.add(s)
        return s


# ------------------------------------------------------------------------------------ ops

UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Sqrt": "sqrt", "Erf": "erf",
         "Exp": "exp", "Log": "log", "Neg": "neg", "Abs": "abs", "Reciprocal": "reciprocal",
         "Softplus": "softplus"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow"}
# Ops that only work when they can be folded at conversion time (shape computations).
FOLD_ONLY = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "ConstantOfShape",
             "Range", "Equal", "Where", "Expand", "Floor", "Ceil", "Size"}
SUPPORTED = (set(UNARY) | set(BINARY) | FOLD_ONLY | {
    "Conv", "Gemm", "MatMul", "Gelu", "Softmax", "BatchNormalization", "LayerNormalization",
    "GroupNormalization", "InstanceNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "Flatten", "Reshape", "Transpose", "Cast", "Clip", "ReduceMean", "ReduceSum",
    "ReduceMax", "ReduceMin", "Identity", "Constant", "Dropout", "LeakyRelu", "Elu", "Max",
    "Min", "Pad"})

_ONNX_FLOAT = {1: "f32", 10: "f16", 16: "bf16", 11: "f32"}  # FLOAT, FLOAT16, BFLOAT16, DOUBLE


def _erf(a):
    return np.vectorize(math.erf, otypes=[np.float64])(a)


# Lambdas, not np.tanh etc.: numpy is imported on first need (_import_numpy).
NUMPY_UNARY = {"Relu": lambda a: np.maximum(a, 0), "Sigmoid": lambda a: 1 / (1 + np.exp(-a)),
               "Tanh": lambda a: np.tanh(a), "Sqrt": lambda a: np.sqrt(a), "Erf": _erf,
               "Exp": lambda a: np.exp(a), "Log": lambda a: np.log(a),
               "Neg": lambda a: np.negative(a), "Abs": lambda a: np.abs(a),
               "Reciprocal": lambda a: 1 / a, "Floor": lambda a: np.floor(a),
               "Ceil": lambda a: np.ceil(a), "Softplus": lambda a: np.log1p(np.exp(a))}


def _is_sym_array(a):
    return isinstance(a, np.ndarray) and a.dtype == object


def _tidy(a):
    """An object (symbolic) array whose entries are all ints becomes int64."""
    if _is_sym_array(a) and all(isinstance(v, (int, np.integer)) for v in a.flat):
        return a.astype(np.int64)
    return a


def _sym_binop(op, x, y):
    """Elementwise int arithmetic where entries may be symbols (str) or unknown (None)."""
    if isinstance(x, (int, np.integer)) and isinstance(y, (int, np.integer)):
        x, y = int(x), int(y)
        if op == "Add":
            return x + y
        if op == "Sub":
            return x - y
        if op == "Mul":
            return x * y
        if op == "Div":
            return int(x / y) if y else None
        return None
    if op == "Mul" and isinstance(y, (int, np.integer)) and y == 1:
        return x
    if op == "Mul" and isinstance(x, (int, np.integer)) and x == 1:
        return y
    if op in ("Add", "Sub") and isinstance(y, (int, np.integer)) and y == 0:
        return x
    if op == "Div" and isinstance(y, (int, np.integer)) and y == 1:
        return x
    return None


# ------------------------------------------------------------------------------------ converter

class Converter:
    def __init__(self, model, name, layout="NCHW", dtype=None, source="model.onnx"):
        import onnx
        from onnx import numpy_helper
        self.onnx = onnx
        self.numpy_helper = numpy_helper
        self.model = model
        self.g = model.graph
        self.name = sanitize(name, allow_dot=False, fallback="graph")
        self.layout = layout
        self.force_dtype = dtype
        self.source = source
        self.opset = 1
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = imp.version
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
        self.consumers = {}
        for n in self.g.node:
            for t in n.input:
                if t:
                    self.consumers.setdefault(t, []).append(n)
        self.graph_outputs = {o.name for o in self.g.output}

    # ---------------------------------------------------------------- helpers
    def where(self, node):
        op = getattr(node, "op_type", "graph output")
        return f"node '{node.name or '(unnamed)'}' ({op})"

    def fail(self, node, msg):
        raise ConvertError(f"{self.source}: {self.where(node)}: {msg}")

    def fdtype(self, elem_type, what):
        if elem_type not in _ONNX_FLOAT:
            import onnx
            tname = onnx.TensorProto.DataType.Name(elem_type)
            raise ConvertError(f"{self.source}: {what} has element type {tname}; kiln graphs "
                               f"compute in f32, f16 or bf16 only")
        return self.force_dtype or _ONNX_FLOAT[elem_type]

    def attrs(self, node):
        from onnx import helper
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

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
        """The kiln tensor for ONNX tensor t; constants are materialized (in `dtype`)."""
        if t in self.tmap:
            return self.tmap[t]
        if t in self.consts:
            return self.materialize(node, t, dtype)
        self.fail(node, f"input '{t}' is not defined")

    def materialize(self, node, t, dtype):
        a = self.consts[t]
        if _is_sym_array(a):
            self.fail(node, f"tensor '{t}' is a shape computed from run-time dims ({a.tolist()}) "
                            f"and is used as data; kiln cannot compute with run-time shapes")
        dtype = dtype or self.force_dtype or "f32"
        key = (t, dtype)
        if key in self.kconst:
            return self.kconst[key]
        name = self.tnames.get(t)
        arr = np.asarray(a)
        if arr.dtype != np.float32:
            arr = arr.astype(np.float64)
        arr = self.representable(arr, dtype, name)
        spec = {"dtype": dtype, "shape": [int(d) for d in arr.shape]}
        if arr.size <= 16:
            vals = []
            for v in arr.astype(np.float32).flatten().tolist():
                if math.isnan(v):
                    vals.append("nan")
                elif math.isinf(v):
                    vals.append("inf" if v > 0 else "-inf")
                else:
                    vals.append(v)
            spec["data"] = vals
        else:
            spec["file"] = f"{self.name}.safetensors"
            spec["key"] = name
            self.weights[name] = (dtype, np.asarray(arr, dtype=np.float32))
        self.constants[name] = spec
        self.kconst[key] = name
        self.shape[name] = list(arr.shape)
        self.dtype[name] = dtype
        return name

    def representable(self, arr, dtype, name):
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

    def emit(self, node, op, inputs, attrs=None, out=None, shape=None, dtype=None, suffix=None):
        """Adds a kiln node; `out` is the ONNX tensor it defines (None: an internal temporary)."""
        base = sanitize(node.name, allow_dot=False, fallback=op) if node.name else op
        nname = self.nnames.get(base + (f"_{suffix}" if suffix else ""), fallback=op)
        if out is not None:
            tname = self.tnames.get(out)
        else:
            tname = self.tnames.get(nname + "_out")
        n = {"op": op, "name": nname, "inputs": list(inputs), "outputs": [tname]}
        n.update(attrs or {})
        self.nodes.append(n)
        self.shape[tname] = list(shape) if shape is not None else None
        self.dtype[tname] = dtype or self.dtype[inputs[0]]
        if out is not None:
            self.tmap[out] = tname
        return tname

    def shp(self, kt):
        s = self.shape.get(kt)
        if s is None:
            return None
        return s

    def rank(self, node, kt):
        s = self.shp(kt)
        if s is None:
            self.fail(node, f"the rank of '{kt}' is unknown")
        return len(s)

    # ---------------------------------------------------------------- shapes
    @staticmethod
    def bcast(a, b):
        if a is None or b is None:
            return None
        r = max(len(a), len(b))
        a = [1] * (r - len(a)) + list(a)
        b = [1] * (r - len(b)) + list(b)
        out = []
        for x, y in zip(a, b):
            if x == 1:
                out.append(y)
            elif y == 1:
                out.append(x)
            elif x == y:
                out.append(x)
            elif isinstance(x, int):
                out.append(x)
            elif isinstance(y, int):
                out.append(y)
            else:
                out.append(x if x is not None else y)
        return out

    @staticmethod
    def window(size, pad_total, k, s, d):
        if not isinstance(size, int):
            return None
        return (size + pad_total - (d * (k - 1) + 1)) // s + 1

    @staticmethod
    def reshape_shape(x, target):
        """Output shape of a reshape (0 copies, -1 inferred) with symbols, None when unknown."""
        if x is None:
            return [None if (isinstance(v, int) and v == -1) else v for v in target]
        out = []
        for i, v in enumerate(target):
            out.append(x[i] if (isinstance(v, int) and v == 0 and i < len(x)) else v)
        if any(isinstance(v, int) and v == -1 for v in out):
            i = next(j for j, v in enumerate(out) if isinstance(v, int) and v == -1)
            known = [v for j, v in enumerate(out) if j != i]
            if None in x or None in known:
                out[i] = None
                return out
            cin = math.prod(v for v in x if isinstance(v, int))
            cout = math.prod(v for v in known if isinstance(v, int))
            sin = sorted(v for v in x if isinstance(v, str))
            sout = sorted(v for v in known if isinstance(v, str))
            rest = list(sin)
            for s in sout:
                if s in rest:
                    rest.remove(s)
                else:
                    out[i] = None
                    return out
            c = cin // cout if cout else None
            if not rest:
                out[i] = c
            elif len(rest) == 1 and c == 1:
                out[i] = rest[0]
            else:
                out[i] = None
        return out

    # ---------------------------------------------------------------- main
    def convert(self):
        g = self.g
        for init in g.initializer:
            self.consts[init.name] = self.to_numpy(init)
        init_names = {i.name for i in g.initializer}
        # Unsupported ops: all of them, in one message.
        bad = {}
        for n in g.node:
            if n.domain not in ("", "ai.onnx") or n.op_type not in SUPPORTED:
                op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                bad.setdefault(op, []).append(n.name or "(unnamed)")
        if bad:
            parts = []
            for op, names in sorted(bad.items()):
                shown = ", ".join(f"'{s}'" for s in names[:5])
                more = f" and {len(names) - 5} more" if len(names) > 5 else ""
                parts.append(f"{op} (node{'s' if len(names) > 1 else ''} {shown}{more})")
            raise ConvertError(f"{self.source}: unsupported ONNX op{'s' if len(bad) > 1 else ''}: "
                               f"{'; '.join(parts)}")
        # Inputs.
        for vi in g.input:
            if vi.name in init_names:
                continue
            tt = vi.type.tensor_type
            dtype = self.fdtype(tt.elem_type, f"graph input '{vi.name}'")
            if not tt.HasField("shape"):
                raise ConvertError(f"{self.source}: graph input '{vi.name}' has no shape (unknown "
                                   f"rank); kiln inputs need a rank (dims may be symbolic)")
            kname = self.tnames.get(vi.name)
            dims = []
            for i, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value"):
                    if d.dim_value <= 0:
                        raise ConvertError(f"{self.source}: graph input '{vi.name}' dim {i}: "
                                           f"expected a positive size, found {d.dim_value}")
                    dims.append(int(d.dim_value))
                elif d.dim_param:
                    dims.append(sanitize_symbol(d.dim_param))
                else:
                    dims.append(sanitize_symbol(f"{kname}_dim{i}"))
            spec = {"dtype": dtype, "shape": dims}
            if self.layout == "NHWC" and len(dims) == 4:
                spec["layout"] = "NHWC"
            self.inputs[kname] = spec
            self.tmap[vi.name] = kname
            self.shape[kname] = dims
            self.dtype[kname] = dtype
            self.input_map[kname] = vi.name
        # Constant nodes first: patterns look at their values.
        for n in g.node:
            if n.op_type == "Constant":
                self.consts[n.output[0]] = self.constant_value(n)
        self.skip = set()
        self.replace = {}
        self.extra_pads = {}
        for n in g.node:
            if n.op_type == "Erf":
                self.match_gelu(n)
        for n in g.node:
            if id(n) in self.skip:
                continue
            if id(n) in self.replace:
                x = self.replace[id(n)]
                xt = self.act(n, x)
                self.emit(n, "gelu", [xt], {"approximate": "none"}, out=n.output[0],
                          shape=self.shp(xt))
                continue
            self.convert_node(n)
        # Outputs.
        used = set()
        for o in g.output:
            if o.name in self.tmap:
                kt = self.tmap[o.name]
            elif o.name in self.consts:
                kt = self.materialize(o, o.name, None)
            else:
                raise ConvertError(f"{self.source}: graph output '{o.name}' is not computed")
            if kt in used or kt in self.inputs or kt in self.constants:
                fake = type("N", (), {"name": sanitize(o.name, False) + "_out", "op_type": "Identity"})
                kt = self.emit(fake, "identity", [kt], out=None, shape=self.shp(kt))
            used.add(kt)
            self.outputs.append(kt)
            self.output_map[kt] = o.name
        self.prune()
        return self.graph_json()

    def prune(self):
        live = set(self.outputs)
        keep = []
        for n in reversed(self.nodes):
            if n["outputs"][0] in live:
                keep.append(n)
                live.update(n["inputs"])
        self.nodes = list(reversed(keep))
        self.constants = {k: v for k, v in self.constants.items() if k in live}
        self.weights = {k: v for k, v in self.weights.items() if k in self.constants}

    def graph_json(self):
        meta = {"converted_from": os.path.basename(self.source), "onnx_opset": self.opset,
                "inputs": self.input_map, "outputs": self.output_map}
        return {"kiln": 1, "name": self.name, "metadata": {"onnx": meta}, "inputs": self.inputs,
                "constants": self.constants, "nodes": self.nodes, "outputs": self.outputs}

    def to_numpy(self, tensor):
        a = self.numpy_helper.to_array(tensor)
        if a.dtype.kind == "V" or "bfloat16" in str(a.dtype):
            a = a.astype(np.float32)
        return np.array(a)

    def constant_value(self, n):
        a = self.attrs(n)
        if "value" in a:
            return self.to_numpy(a["value"])
        if "value_float" in a:
            return np.array(a["value_float"], dtype=np.float32)
        if "value_floats" in a:
            return np.array(a["value_floats"], dtype=np.float32)
        if "value_int" in a:
            return np.array(a["value_int"], dtype=np.int64)
        if "value_ints" in a:
            return np.array(a["value_ints"], dtype=np.int64)
        self.fail(n, f"unsupported Constant attribute(s): {sorted(a)}")

    # ---------------------------------------------------------------- gelu pattern
    def single_consumer(self, t, op_types):
        if t in self.graph_outputs:
            return None
        cs = self.consumers.get(t, [])
        if len(cs) != 1 or cs[0].op_type not in op_types:
            return None
        return cs[0]

    def scalar_is(self, t, v, tol=1e-3):
        a = self.consts.get(t)
        if a is None or _is_sym_array(a) or a.size != 1:
            return False
        return abs(float(a.reshape(())) - v) <= tol * abs(v)

    def other(self, node, t):
        """The other input of a binary node given one input t (None when t is not an input)."""
        if node.input[0] == t:
            return node.input[1]
        if node.input[1] == t:
            return node.input[0]
        return None

    def producer(self, t):
        if not hasattr(self, "_producers"):
            self._producers = {o: n for n in self.g.node for o in n.output if o}
        return self._producers.get(t)

    def match_gelu(self, erf):
        d = self.producer(erf.input[0])
        if d is None or self.single_consumer(erf.input[0], {"Erf"}) is None:
            return
        x = None
        if d.op_type == "Div" and self.scalar_is(d.input[1], math.sqrt(2)):
            x = d.input[0]
        elif d.op_type == "Mul":
            for i in (0, 1):
                if self.scalar_is(d.input[1 - i], 1 / math.sqrt(2)):
                    x = d.input[i]
        if x is None:
            return
        a = self.single_consumer(erf.output[0], {"Add"})
        if a is None or not self.scalar_is(self.other(a, erf.output[0]), 1.0):
            return
        m1 = self.single_consumer(a.output[0], {"Mul"})
        if m1 is None:
            return
        o = self.other(m1, a.output[0])
        chain = [d, erf, a, m1]
        final = None
        if o == x:  # x * (1 + erf) * 0.5
            m2 = self.single_consumer(m1.output[0], {"Mul"})
            if m2 is not None and self.scalar_is(self.other(m2, m1.output[0]), 0.5):
                final = m2
        elif self.scalar_is(o, 0.5):  # x * ((1 + erf) * 0.5)
            m2 = self.single_consumer(m1.output[0], {"Mul"})
            if m2 is not None and self.other(m2, m1.output[0]) == x:
                final = m2
        else:  # (x * 0.5) * (1 + erf)
            h = self.producer(o)
            if (h is not None and h.op_type == "Mul" and self.single_consumer(o, {"Mul"}) is m1
                    and self.other(h, x) is not None and self.scalar_is(self.other(h, x), 0.5)):
                chain.append(h)
                final = m1
        if final is None:
            return
        if final is not m1:
            chain.append(final)
        for n in chain:
            if n is not final:
                self.skip.add(id(n))
        self.replace[id(final)] = x

    # ---------------------------------------------------------------- folding
    def try_fold(self, n):
        """Evaluates n at conversion time when all its inputs are known. Returns True if done."""
        op = n.op_type
        if op == "Constant":
            return True  # done up front
        if op == "Shape":
            src = n.input[0]
            if src in self.consts:
                s = list(np.shape(self.consts[src]))
            else:
                kt = self.tmap.get(src)
                s = self.shp(kt) if kt else None
                if s is None:
                    return False
            at = self.attrs(n)
            r = len(s)
            start, end = at.get("start", 0), at.get("end", r)
            start = max(0, start + r if start < 0 else start)
            end = min(r, end + r if end < 0 else end)
            self.consts[n.output[0]] = _tidy(np.array(s[start:end], dtype=object))
            return True
        if op == "Size":
            src = n.input[0]
            s = list(np.shape(self.consts[src])) if src in self.consts else self.shp(
                self.tmap.get(src))
            if s is None or not all(isinstance(v, int) for v in s):
                return False
            self.consts[n.output[0]] = np.array(math.prod(s), dtype=np.int64)
            return True
        if not all(self.known(t) for t in n.input):
            return False
        ins = [self.consts[t] if t else None for t in n.input]
        at = self.attrs(n)
        try:
            out = self.fold_eval(n, op, ins, at)
        except ConvertError:
            raise
        except Exception as e:  # noqa: BLE001 - a fold that numpy cannot do
            self.fail(n, f"cannot fold this op on constant inputs: {e}")
        if out is None:
            return False
        if not isinstance(out, np.ndarray):
            out = np.array(out, dtype=object if isinstance(out, str) or out is None else None)
        self.consts[n.output[0]] = _tidy(out) if _is_sym_array(out) else out
        return True

    def fold_eval(self, n, op, ins, at):
        sym = any(_is_sym_array(a) for a in ins if a is not None)
        if op in ("Identity", "Dropout"):
            return ins[0]
        if op == "Gather":
            axis = at.get("axis", 0)
            return np.take(ins[0], ins[1].astype(np.int64), axis=axis)
        if op in ("Unsqueeze", "Squeeze"):
            axes = at.get("axes")
            if axes is None and len(ins) > 1 and ins[1] is not None:
                axes = [int(v) for v in ins[1].flatten()]
            a = ins[0]
            if op == "Squeeze":
                if axes is None:
                    return np.squeeze(a)
                return np.squeeze(a, axis=tuple(v % a.ndim for v in axes))
            r = a.ndim + len(axes)
            out_shape, it = [], iter(a.shape)
            axes = {v % r for v in axes}
            for i in range(r):
                out_shape.append(1 if i in axes else next(it))
            return a.reshape(out_shape)
        if op == "Concat":
            arrs = [a for a in ins if a is not None and a.size > 0] or [ins[0]]
            if any(_is_sym_array(a) for a in arrs):
                arrs = [a.astype(object) for a in arrs]
            return np.concatenate(arrs, axis=at.get("axis", 0))
        if op == "Slice":
            a = ins[0]
            if "starts" in at:
                starts, ends = at["starts"], at["ends"]
                axes = at.get("axes", list(range(len(starts))))
                steps = [1] * len(starts)
            else:
                starts, ends = ins[1].tolist(), ins[2].tolist()
                axes = ins[3].tolist() if len(ins) > 3 and ins[3] is not None else list(
                    range(len(starts)))
                steps = ins[4].tolist() if len(ins) > 4 and ins[4] is not None else [1] * len(
                    starts)
            sl = [slice(None)] * a.ndim
            for s, e, ax, st in zip(starts, ends, axes, steps):
                sl[ax % a.ndim] = slice(int(s), int(e), int(st))
            return a[tuple(sl)]
        if op == "Cast":
            to = at["to"]
            if sym:
                return ins[0]
            import onnx
            np_t = onnx.helper.tensor_dtype_to_np_dtype(to)
            if "bfloat16" in str(np_t):
                np_t = np.float32
            return ins[0].astype(np_t)
        if op == "Reshape":
            target = [int(v) for v in ins[1].flatten()] if not _is_sym_array(ins[1]) else None
            if target is None or _is_sym_array(ins[0]):
                return None
            target = [ins[0].shape[i] if v == 0 else v for i, v in enumerate(target)]
            return ins[0].reshape(target)
        if op == "Flatten":
            a = ins[0]
            ax = at.get("axis", 1) % max(a.ndim, 1) if a.ndim else 0
            return a.reshape(math.prod(a.shape[:ax]), -1)
        if op == "Transpose":
            return np.transpose(ins[0], at.get("perm"))
        if op == "ConstantOfShape":
            if sym:
                return None
            v = self.to_numpy(at["value"]) if "value" in at else np.zeros(1, np.float32)
            return np.full([int(d) for d in ins[0]], v.flatten()[0], dtype=v.dtype)
        if op == "Range":
            if sym:
                return None
            return np.arange(ins[0].item(), ins[1].item(), ins[2].item()).astype(ins[0].dtype)
        if op == "Expand":
            if sym:
                return None
            shape = [int(d) for d in ins[1]]
            return ins[0] * np.ones(shape, dtype=ins[0].dtype)
        if op == "Equal":
            if sym:
                return None
            return np.equal(ins[0], ins[1])
        if op == "Where":
            if sym:
                a = np.where(ins[0], ins[1], ins[2]) if not _is_sym_array(ins[0]) else None
                return a
            return np.where(ins[0], ins[1], ins[2])
        if op in BINARY or op in ("Max", "Min"):
            a, b = ins[0], ins[1]
            if sym:
                if op not in ("Add", "Sub", "Mul", "Div"):
                    return None
                a, b = np.broadcast_arrays(a.astype(object), b.astype(object))
                out = np.empty(a.shape, dtype=object)
                for idx in np.ndindex(a.shape):
                    out[idx] = _sym_binop(op, a[idx], b[idx])
                return out
            if op == "Div" and a.dtype.kind in "iu" and b.dtype.kind in "iu":
                return np.trunc(a / b).astype(a.dtype)
            f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                 "Pow": np.power, "Max": np.maximum, "Min": np.minimum}[op]
            return f(a, b).astype(a.dtype)
        if op in NUMPY_UNARY:
            if sym:
                return None
            return NUMPY_UNARY[op](ins[0]).astype(ins[0].dtype)
        return None  # everything else is computed by kiln

    # ---------------------------------------------------------------- exporter patterns
    # Tried when the first node of a pattern is reached (its inputs are converted by then); a
    # match emits one kiln node defining the pattern's last output and skips the later nodes.
    # Earlier nodes that only fed the pattern are dropped by prune().

    def plain_const(self, t):
        a = self.consts.get(t) if t else None
        return None if a is None or _is_sym_array(a) else np.asarray(a)

    def channel_vector(self, t, c, rank):
        """A constant broadcasting as one value per channel (dim 1) of a rank-`rank` tensor:
        shape [C, 1, ..., 1] (rank-1 dims) or [1, C, 1, ..., 1]. Returns it as [C] or None."""
        a = self.plain_const(t)
        if a is None or a.size != c:
            return None
        if a.ndim == rank - 1 and a.shape[0] == c:
            return a.reshape(c)
        if a.ndim == rank and a.shape[0] == 1 and a.shape[1] == c:
            return a.reshape(c)
        return None

    def fuse_InstanceNormalization(self, n):
        """torch's GroupNorm export: Reshape(x, [0, G, -1]) -> InstanceNormalization(ones, zeros)
        -> Reshape(., Shape(x)) [-> Mul(w[C,1,1]) -> Add(b[C,1,1])]  =>  groupnorm(G)."""
        r1 = self.producer(n.input[0])
        if r1 is None or r1.op_type != "Reshape" or r1.input[0] not in self.tmap:
            return False
        x = r1.input[0]
        xt = self.tmap[x]
        s = self.shp(xt)
        tgt = self.plain_const(r1.input[1])
        if s is None or len(s) < 3 or not isinstance(s[1], int) or tgt is None or tgt.size != 3:
            return False
        groups = int(tgt.flatten()[1])
        c = s[1]
        if tgt.flatten()[2] != -1 or groups <= 0 or c % groups:
            return False
        if tgt.flatten()[0] != 0 and tgt.flatten()[0] != s[0]:
            return False
        scale, bias = self.plain_const(n.input[1]), self.plain_const(n.input[2])
        if scale is None or bias is None or not (np.all(scale == 1) and np.all(bias == 0)):
            return False
        r2 = self.single_consumer(n.output[0], {"Reshape"})
        if r2 is None:
            return False
        sh = self.producer(r2.input[1])
        back = self.plain_const(r2.input[1])
        if sh is not None and sh.op_type == "Shape" and sh.input[0] == x and not sh.attribute:
            pass
        elif back is not None and back.tolist() == s:
            pass
        else:
            return False
        chain, out, params = [r2], r2, []
        mul = self.single_consumer(r2.output[0], {"Mul"})
        if mul is not None:
            w = self.channel_vector(self.other(mul, r2.output[0]), c, len(s))
            add = self.single_consumer(mul.output[0], {"Add"}) if w is not None else None
            b = self.channel_vector(self.other(add, mul.output[0]), c, len(s)) if add else None
            if b is not None:
                chain += [mul, add]
                out = add
                params = [w, b]
        eps = float(self.attrs(n).get("epsilon", 1e-5))
        dt = self.dtype[xt]
        ins = [xt]
        for p, what in zip(params, ("scale", "bias")):
            key = self.derived(f"{n.name or 'groupnorm'}_{what}")
            self.consts[key] = p
            ins.append(self.materialize(n, key, dt))
        for m in chain:
            self.skip.add(id(m))
        self.emit(n, "groupnorm", ins, {"groups": groups, "eps": eps}, out=out.output[0], shape=s)
        return True

    def fuse_Sigmoid(self, n):
        """x * sigmoid(x) (either operand order)  =>  silu."""
        x = n.input[0]
        m = self.single_consumer(n.output[0], {"Mul"})
        if m is None or self.other(m, n.output[0]) != x or x not in self.tmap:
            return False
        self.skip.add(id(m))
        xt = self.tmap[x]
        self.emit(m, "silu", [xt], out=m.output[0], shape=self.shp(xt))
        return True

    def fuse_MatMul(self, n):
        """MatMul(a, b) -> Add(., bias[N])  =>  matmul with bias (torch's Linear on 3-D input)."""
        add = self.single_consumer(n.output[0], {"Add"})
        if add is None:
            return False
        bias = self.plain_const(self.other(add, n.output[0]))
        a, b = n.input
        sa = self.shp(self.tmap[a]) if a in self.tmap else list(np.shape(self.consts.get(a, [])))
        sb = self.shp(self.tmap[b]) if b in self.tmap else list(np.shape(self.consts.get(b, [])))
        if bias is None or sa is None or sb is None or len(sa) < 2 or len(sb) < 2:
            return False
        ncols = sb[-1]
        rank = max(len(sa), len(sb))
        if not isinstance(ncols, int) or bias.size != ncols or bias.ndim > rank or (
                bias.ndim and bias.shape[-1] != ncols):
            return False
        dt = self.dtype[self.tmap[a]] if a in self.tmap else (
            self.dtype[self.tmap[b]] if b in self.tmap else None)
        at_, bt_ = self.act(n, a, dt), self.act(n, b, dt)
        key = self.derived(self.other(add, n.output[0]) + "_vec")
        self.consts[key] = bias.reshape(ncols)
        self.skip.add(id(add))
        self.emit(n, "matmul", [at_, bt_, self.materialize(n, key, dt)], out=add.output[0],
                  shape=self.mm_shape(self.shp(at_), self.shp(bt_)))
        return True

    def op_Pad(self, n, at):
        """Zero padding of H and W whose only use is a 2-D Conv folds into the conv's padding; any
        other constant padding (no cropping, static padded dims) becomes kiln's `pad` op."""
        mode = at.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        xt = self.act(n, n.input[0])
        r = self.rank(n, xt)
        if "pads" in at:
            pads, value = list(at["pads"]), float(at.get("value", 0.0))
        else:
            pads = [int(v) for v in np.asarray(self.const(n, n.input[1], "pads")).flatten()]
            cv = self.plain_const(n.input[2]) if len(n.input) > 2 and n.input[2] else None
            value = float(cv.reshape(-1)[0]) if cv is not None and cv.size else 0.0
            if len(n.input) > 3 and n.input[3]:
                axes = [int(v) % r for v in np.asarray(self.const(n, n.input[3], "axes")).flatten()]
                full = [0] * (2 * r)
                for i, ax in enumerate(axes):
                    full[ax], full[r + ax] = pads[i], pads[len(axes) + i]
                pads = full
        conv = self.single_consumer(n.output[0], {"Conv"})
        ok = (mode == "constant" and value == 0.0 and r == 4 and len(pads) == 8
              and all(p >= 0 for p in pads) and pads[0] == pads[1] == pads[4] == pads[5] == 0
              and conv is not None and conv.input[0] == n.output[0])
        if ok:
            cat = self.attrs(conv)
            auto = cat.get("auto_pad", b"NOTSET")
            ok = (auto.decode() if isinstance(auto, bytes) else auto) in ("NOTSET", "")
        if ok:
            self.extra_pads[id(conv)] = [pads[2], pads[3], pads[6], pads[7]]
            self.tmap[n.output[0]] = xt
            return
        # Otherwise kiln's own `pad` op: constant mode, no cropping, padded dims static.
        if mode != "constant":
            self.fail(n, f"Pad mode '{mode}' is not supported (only 'constant')")
        if len(pads) != 2 * r or any(p < 0 for p in pads):
            self.fail(n, f"Pad with pads {pads}: negative pads (cropping) are not supported")
        s = self.shp(xt)
        if s is None:
            self.fail(n, "Pad needs a known input shape")
        out_shape = []
        for i, d in enumerate(s):
            if pads[i] == 0 and pads[r + i] == 0:
                out_shape.append(d)
            elif isinstance(d, int):
                out_shape.append(d + pads[i] + pads[r + i])
            else:
                self.fail(n, f"Pad of dim {i} ({d}) is not supported: a symbolic dim can not grow")
        if math.isinf(value):
            jvalue = "inf" if value > 0 else "-inf"
        elif math.isnan(value):
            self.fail(n, "Pad with a NaN value is not supported")
        else:
            jvalue = value
        self.emit(n, "pad", [xt], {"pads": [int(p) for p in pads], "value": jvalue},
                  out=n.output[0], shape=out_shape)

    # ---------------------------------------------------------------- per op
    def no_extra_outputs(self, n, keep=1):
        for t in n.output[keep:]:
            if t and (t in self.consumers or t in self.graph_outputs):
                self.fail(n, f"output '{t}' is used; kiln computes only the op's first output "
                             f"(inference form)")

    def convert_node(self, n):
        op = n.op_type
        if self.try_fold(n):
            return
        if op in FOLD_ONLY:
            runtime = [t for t in n.input if t and t not in self.consts]
            why = (f"its input{'s' if len(runtime) > 1 else ''} "
                   f"{', '.join(repr(t) for t in runtime)} {'are' if len(runtime) > 1 else 'is'} "
                   f"computed at run time" if runtime and op != "Shape" else
                   "the shape has dims that kiln cannot express")
            self.fail(n, f"{op} is supported only where it can be computed at conversion time "
                         f"(shape computations with static sizes or plain symbols); here {why}")
        fuse = getattr(self, "fuse_" + op, None)
        if fuse is not None and fuse(n):
            return
        h = getattr(self, "op_" + op, None)
        if h is not None:
            return h(n, self.attrs(n))
        if op in UNARY:
            xt = self.act(n, n.input[0])
            self.emit(n, UNARY[op], [xt], out=n.output[0], shape=self.shp(xt))
            return
        if op in BINARY or op in ("Max", "Min"):
            return self.binary(n, BINARY.get(op, op.lower()))
        self.fail(n, "unsupported")  # pre-scan makes this unreachable

    def binary(self, n, kop):
        if len(n.input) != 2:
            self.fail(n, f"expected 2 inputs, found {len(n.input)}")
        a, b = n.input
        dt = None
        for t in (a, b):
            if self.is_act(t):
                dt = self.dtype[self.tmap[t]]
                break
        at, bt = self.act(n, a, dt), self.act(n, b, dt)
        self.emit(n, kop, [at, bt], out=n.output[0],
                  shape=self.bcast(self.shp(at), self.shp(bt)))

    def op_Identity(self, n, at):
        self.alias(n)

    def op_Dropout(self, n, at):
        self.no_extra_outputs(n)
        self.alias(n)

    def alias(self, n):
        if n.output[0] in self.graph_outputs:
            xt = self.act(n, n.input[0])
            self.emit(n, "identity", [xt], out=n.output[0], shape=self.shp(xt))
        else:
            self.tmap[n.output[0]] = self.act(n, n.input[0])

    def op_Gelu(self, n, at):
        xt = self.act(n, n.input[0])
        approx = at.get("approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        self.emit(n, "gelu", [xt], {"approximate": approx}, out=n.output[0], shape=self.shp(xt))

    def op_LeakyRelu(self, n, at):
        xt = self.act(n, n.input[0])
        self.emit(n, "leaky_relu", [xt], {"alpha": float(at.get("alpha", 0.01))},
                  out=n.output[0], shape=self.shp(xt))

    def op_Elu(self, n, at):
        xt = self.act(n, n.input[0])
        self.emit(n, "elu", [xt], {"alpha": float(at.get("alpha", 1.0))}, out=n.output[0],
                  shape=self.shp(xt))

    def op_Cast(self, n, at):
        xt = self.act(n, n.input[0])
        to = self.fdtype(at["to"], f"{self.where(n)}: the cast target")
        if to == self.dtype[xt]:
            self.tmap[n.output[0]] = xt
            if n.output[0] in self.graph_outputs:
                self.emit(n, "identity", [xt], out=n.output[0], shape=self.shp(xt))
            return
        self.emit(n, "cast", [xt], {"dtype": to}, out=n.output[0], shape=self.shp(xt), dtype=to)

    def op_Clip(self, n, at):
        xt = self.act(n, n.input[0])
        lo, hi = at.get("min", -math.inf), at.get("max", math.inf)
        if len(n.input) > 1 and n.input[1]:
            lo = float(np.asarray(self.const(n, n.input[1], "min")).reshape(()))
        if len(n.input) > 2 and n.input[2]:
            hi = float(np.asarray(self.const(n, n.input[2], "max")).reshape(()))

        def num(v):
            return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")
        self.emit(n, "clamp", [xt], {"min": num(float(lo)), "max": num(float(hi))},
                  out=n.output[0], shape=self.shp(xt))

    def op_Softmax(self, n, at):
        xt = self.act(n, n.input[0])
        r = self.rank(n, xt)
        axis = at.get("axis", -1 if self.opset >= 13 else 1)
        axis = axis + r if axis < 0 else axis
        if self.opset >= 13 or axis == r - 1:
            self.emit(n, "softmax", [xt], {"axis": axis}, out=n.output[0], shape=self.shp(xt))
            return
        # Opset < 13: softmax over the flattened dims [axis, rank).
        s = self.shp(xt)
        flat = self.flatten_target(n, s, axis)
        f = self.emit(n, "reshape", [xt], {"shape": flat}, shape=self.reshape_shape(s, flat),
                      suffix="flatten")
        sm = self.emit(n, "softmax", [f], {"axis": 1}, shape=self.shp(f))
        back = self.dims_target(n, s)
        self.emit(n, "reshape", [sm], {"shape": back}, out=n.output[0], shape=s, suffix="unflatten")

    def dims_target(self, n, s):
        if s is None or None in s:
            self.fail(n, "needs the input shape to be static or symbolic, found an unknown dim")
        return list(s)

    def flatten_target(self, n, s, axis):
        if s is None:
            self.fail(n, "needs a known input rank")
        front, back = s[:axis], s[axis:]

        def one(part):
            if all(isinstance(v, int) for v in part):
                return math.prod(part)
            nonone = [v for v in part if v != 1]
            if len(nonone) == 1 and isinstance(nonone[0], str):
                return nonone[0]
            return None
        f, b = one(front), one(back)
        if f is not None and b is not None:
            return [f, b]
        if f is not None:
            return [f, -1]
        if b is not None:
            return [-1, b]
        self.fail(n, f"cannot express the flattened shape of {s} in kiln dims")

    def op_Flatten(self, n, at):
        xt = self.act(n, n.input[0])
        s = self.shp(xt)
        r = self.rank(n, xt)
        axis = at.get("axis", 1)
        axis = axis + r if axis < 0 else axis
        target = self.flatten_target(n, s, axis)
        self.emit(n, "reshape", [xt], {"shape": target}, out=n.output[0],
                  shape=self.reshape_shape(s, target))

    def op_Reshape(self, n, at):
        xt = self.act(n, n.input[0])
        tgt = self.const(n, n.input[1], "the target shape")
        if at.get("allowzero", 0) and any(isinstance(v, (int, np.integer)) and v == 0
                                          for v in tgt.flatten()):
            self.fail(n, "allowzero=1 with a 0 in the shape (an empty tensor) is not supported")
        target = []
        for v in tgt.flatten().tolist():
            target.append(int(v) if isinstance(v, (int, np.integer)) else v)
        if None in target:
            if target.count(None) == 1 and -1 not in target:
                target[target.index(None)] = -1
            else:
                self.fail(n, f"the target shape {target} has dims computed from run-time values")
        self.emit(n, "reshape", [xt], {"shape": target}, out=n.output[0],
                  shape=self.reshape_shape(self.shp(xt), target))

    def op_Transpose(self, n, at):
        xt = self.act(n, n.input[0])
        s = self.shp(xt)
        r = self.rank(n, xt)
        perm = list(at.get("perm", list(range(r))[::-1]))
        self.emit(n, "transpose", [xt], {"perm": perm}, out=n.output[0],
                  shape=[s[p] for p in perm])

    # -------- contractions
    def conv_pads(self, n, at, in_sizes, kernel, strides, dils):
        nsp = len(kernel)
        auto = at.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("NOTSET", ""):
            pads = list(at.get("pads", [0] * (2 * nsp)))
            return pads
        if auto == "VALID":
            return [0] * (2 * nsp)
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            self.fail(n, f"auto_pad '{auto}' is not supported")
        begin, end = [], []
        for size, k, s, d in zip(in_sizes, kernel, strides, dils):
            if not isinstance(size, int):
                self.fail(n, f"auto_pad {auto} needs static spatial dims, found {in_sizes}")
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin + end

    def op_Conv(self, n, at):
        xt = self.act(n, n.input[0])
        dt = self.dtype[xt]
        s = self.shp(xt)
        r = self.rank(n, xt)
        if r not in (3, 4):
            self.fail(n, f"only 1-D and 2-D convolutions are supported, found input rank {r}")
        if n.input[1] in self.consts:
            w = np.asarray(self.consts[n.input[1]], dtype=np.float64)
        else:
            self.fail(n, "the filter must be a constant")
        kernel = list(at.get("kernel_shape", w.shape[2:]))
        nsp = len(kernel)
        strides = list(at.get("strides", [1] * nsp))
        dils = list(at.get("dilations", [1] * nsp))
        groups = int(at.get("group", 1))
        pads = self.conv_pads(n, at, s[2:], kernel, strides, dils)
        if id(n) in self.extra_pads:  # a Pad folded into this conv
            pads = [p + e for p, e in zip(pads, self.extra_pads[id(n)])]
        bias = None
        if len(n.input) > 2 and n.input[2]:
            bias = self.act(n, n.input[2], dt)
        if nsp == 1:
            # [N, C, L] -> [N, C, 1, L], filter [K, C/g, 1, k], then back.
            x4 = self.emit(n, "reshape", [xt], {"shape": [0, 0, 1, -1]},
                           shape=[s[0], s[1], 1, s[2]], suffix="to2d")
            wname = self.derived(n.input[1] + "_2d")
            self.consts[wname] = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
            wt = self.materialize(n, wname, dt)
            ins = [x4, wt] + ([bias] if bias else [])
            lo = self.window(s[2], pads[0] + pads[1], kernel[0], strides[0], dils[0])
            c = self.emit(n, "conv2d", ins,
                          {"stride": [1, strides[0]], "padding": [0, pads[0], 0, pads[1]],
                           "dilation": [1, dils[0]], "groups": groups},
                          shape=[s[0], int(w.shape[0]), 1, lo])
            self.emit(n, "reshape", [c], {"shape": [0, 0, -1]}, out=n.output[0],
                      shape=[s[0], int(w.shape[0]), lo], suffix="to1d")
            return
        wt = self.materialize(n, n.input[1], dt)
        if self.layout == "NHWC":
            self.constants[wt]["layout"] = "NHWC"
        ins = [xt, wt] + ([bias] if bias else [])
        oh = self.window(s[2], pads[0] + pads[2], kernel[0], strides[0], dils[0])
        ow = self.window(s[3], pads[1] + pads[3], kernel[1], strides[1], dils[1])
        self.emit(n, "conv2d", ins,
                  {"stride": strides, "padding": pads, "dilation": dils, "groups": groups},
                  out=n.output[0], shape=[s[0], int(w.shape[0]), oh, ow])

    def mm_shape(self, sa, sb, ta=False, tb=False):
        if sa is None or sb is None:
            return None
        m = sa[-1] if ta else sa[-2]
        nn = sb[-2] if tb else sb[-1]
        return (self.bcast(sa[:-2], sb[:-2]) or []) + [m, nn]

    def op_MatMul(self, n, at):
        a, b = n.input
        dt = self.dtype[self.tmap[a]] if self.is_act(a) else (
            self.dtype[self.tmap[b]] if self.is_act(b) else None)
        squeeze_m = squeeze_n = False
        if a in self.consts and np.ndim(self.consts[a]) == 1:
            key = self.derived(a + "_row")
            self.consts[key] = self.consts[a].reshape(1, -1)
            a, squeeze_m = key, True
        if b in self.consts and np.ndim(self.consts[b]) == 1:
            key = self.derived(b + "_col")
            self.consts[key] = self.consts[b].reshape(-1, 1)
            b, squeeze_n = key, True
        at_, bt_ = self.act(n, a, dt), self.act(n, b, dt)
        if self.rank(n, at_) == 1:
            at_ = self.emit(n, "reshape", [at_], {"shape": [1, -1]},
                            shape=[1, self.shp(at_)[0]], suffix="row")
            squeeze_m = True
        if self.rank(n, bt_) == 1:
            bt_ = self.emit(n, "reshape", [bt_], {"shape": [-1, 1]},
                            shape=[self.shp(bt_)[0], 1], suffix="col")
            squeeze_n = True
        shape = self.mm_shape(self.shp(at_), self.shp(bt_))
        if not (squeeze_m or squeeze_n):
            self.emit(n, "matmul", [at_, bt_], out=n.output[0], shape=shape)
            return
        y = self.emit(n, "matmul", [at_, bt_], shape=shape)
        r = len(shape)
        target = [0] * (r - 2) + ([] if squeeze_m else [shape[-2]]) + ([] if squeeze_n else
                                                                       [shape[-1]])
        target = [v if v is not None else -1 for v in target]
        if not target:
            target = [1]
        out_shape = self.reshape_shape(shape, target)
        self.emit(n, "reshape", [y], {"shape": target}, out=n.output[0], shape=out_shape,
                  suffix="squeeze")

    def op_Gemm(self, n, at):
        a, b = n.input[0], n.input[1]
        c = n.input[2] if len(n.input) > 2 and n.input[2] else None
        alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
        ta, tb = int(at.get("transA", 0)), int(at.get("transB", 0))
        dt = self.dtype[self.tmap[a]] if self.is_act(a) else (
            self.dtype[self.tmap[b]] if self.is_act(b) else None)
        at_, bt_ = self.act(n, a, dt), self.act(n, b, dt)
        shape = self.mm_shape(self.shp(at_), self.shp(bt_), bool(ta), bool(tb))
        attrs = {"transpose_a": ta, "transpose_b": tb}
        ncols = shape[-1] if shape else None
        bias = None
        if c is not None and alpha == 1.0 and c in self.consts and not _is_sym_array(
                self.consts[c]):
            cv = np.asarray(self.consts[c])
            if cv.size == ncols and cv.ndim in (1, 2) and (cv.ndim == 1 or cv.shape[0] == 1):
                key = self.derived(c + "_bias")
                self.consts[key] = cv.reshape(-1).astype(np.float64) * beta
                bias = self.materialize(n, key, dt)
        if bias is not None:
            self.emit(n, "matmul", [at_, bt_, bias], attrs, out=n.output[0], shape=shape)
            return
        last = c is None and alpha == 1.0
        y = self.emit(n, "matmul", [at_, bt_], attrs, out=n.output[0] if last else None,
                      shape=shape)
        if last:
            return
        if alpha != 1.0:
            key = self.derived(f"{n.name or 'gemm'}_alpha")
            self.consts[key] = np.array(alpha, dtype=np.float32)
            last = c is None
            y = self.emit(n, "mul", [y, self.materialize(n, key, dt)],
                          out=n.output[0] if last else None, shape=shape, suffix="alpha")
            if last:
                return
        if c in self.consts and not _is_sym_array(self.consts[c]):
            key = self.derived(c + "_scaled")
            self.consts[key] = np.asarray(self.consts[c], dtype=np.float64) * beta
            ct = self.materialize(n, key, dt)
        else:
            ct = self.act(n, c, dt)
            if beta != 1.0:
                key = self.derived(f"{n.name or 'gemm'}_beta")
                self.consts[key] = np.array(beta, dtype=np.float32)
                ct = self.emit(n, "mul", [ct, self.materialize(n, key, dt)], shape=self.shp(ct),
                               suffix="beta")
        self.emit(n, "add", [y, ct], out=n.output[0], shape=self.bcast(shape, self.shp(ct)),
                  suffix="c")

    # -------- normalizations
    def op_BatchNormalization(self, n, at):
        if at.get("training_mode", 0):
            self.fail(n, "training_mode=1 is not supported (inference only)")
        self.no_extra_outputs(n)
        xt = self.act(n, n.input[0])
        dt = self.dtype[xt]
        ps = [self.act(n, t, dt) for t in n.input[1:5]]
        self.emit(n, "batchnorm", [xt] + ps, {"eps": float(at.get("epsilon", 1e-5))},
                  out=n.output[0], shape=self.shp(xt))

    def op_LayerNormalization(self, n, at):
        self.no_extra_outputs(n)
        xt = self.act(n, n.input[0])
        dt = self.dtype[xt]
        ins = [xt] + [self.act(n, t, dt) for t in n.input[1:3] if t]
        self.emit(n, "layernorm", ins, {"axis": int(at.get("axis", -1)),
                                        "eps": float(at.get("epsilon", 1e-5))},
                  out=n.output[0], shape=self.shp(xt))

    def op_InstanceNormalization(self, n, at):
        xt = self.act(n, n.input[0])
        dt = self.dtype[xt]
        ins = [xt] + [self.act(n, t, dt) for t in n.input[1:3] if t]
        self.emit(n, "instancenorm", ins, {"eps": float(at.get("epsilon", 1e-5))},
                  out=n.output[0], shape=self.shp(xt))

    def op_GroupNormalization(self, n, at):
        xt = self.act(n, n.input[0])
        dt = self.dtype[xt]
        s = self.shp(xt)
        groups = int(at["num_groups"])
        c = s[1] if s else None
        if not isinstance(c, int):
            self.fail(n, "needs a static channel count")
        ins = [xt]
        for t, what in zip(n.input[1:3], ("scale", "bias")):
            v = np.asarray(self.const(n, t, what), dtype=np.float64).reshape(-1)
            if v.size == c:
                per_channel = v  # opset 21 form ([C])
            elif v.size == groups:
                per_channel = np.repeat(v, c // groups)  # opset 18 form: one value per group
            else:
                self.fail(n, f"{what} has {v.size} values; expected {c} (channels) or {groups} "
                             f"(groups)")
            key = self.derived(t + "_per_channel")
            self.consts[key] = per_channel
            ins.append(self.materialize(n, key, dt))
        self.emit(n, "groupnorm", ins, {"groups": groups, "eps": float(at.get("epsilon", 1e-5))},
                  out=n.output[0], shape=s)

    # -------- windows
    def pool(self, n, at, kind):
        self.no_extra_outputs(n)
        xt = self.act(n, n.input[0])
        s = self.shp(xt)
        if self.rank(n, xt) != 4:
            self.fail(n, f"only 2-D pooling ([N, C, H, W]) is supported, found rank "
                         f"{self.rank(n, xt)}")
        kernel = list(at["kernel_shape"])
        strides = list(at.get("strides", [1, 1]))
        dils = list(at.get("dilations", [1, 1]))
        if dils != [1, 1]:
            self.fail(n, f"dilations {dils} are not supported")
        pads = self.conv_pads(n, at, s[2:], kernel, strides, dils)
        if at.get("ceil_mode", 0):
            if kind != "maxpool2d":
                self.fail(n, "ceil_mode=1 is supported for MaxPool only")
            for i in (0, 1):
                size = s[2 + i]
                if not isinstance(size, int):
                    self.fail(n, "ceil_mode=1 needs static spatial dims")
                span = size + pads[i] + pads[2 + i] - kernel[i]
                extra = (-span) % strides[i]
                # ONNX drops a last window that would start in the end padding.
                if extra and (span + extra) // strides[i] * strides[i] < size + pads[i]:
                    pads[2 + i] += extra
        attrs = {"kernel": kernel, "stride": strides, "padding": pads}
        if kind == "avgpool2d":
            attrs["count_include_pad"] = int(at.get("count_include_pad", 0))
        oh = self.window(s[2], pads[0] + pads[2], kernel[0], strides[0], 1)
        ow = self.window(s[3], pads[1] + pads[3], kernel[1], strides[1], 1)
        self.emit(n, kind, [xt], attrs, out=n.output[0], shape=[s[0], s[1], oh, ow])

    def op_MaxPool(self, n, at):
        self.pool(n, at, "maxpool2d")

    def op_AveragePool(self, n, at):
        self.pool(n, at, "avgpool2d")

    def op_GlobalAveragePool(self, n, at):
        xt = self.act(n, n.input[0])
        s = self.shp(xt)
        self.emit(n, "global_avgpool", [xt], out=n.output[0],
                  shape=s[:2] + [1] * (len(s) - 2) if s else None)

    def op_GlobalMaxPool(self, n, at):
        xt = self.act(n, n.input[0])
        s = self.shp(xt)
        r = self.rank(n, xt)
        self.emit(n, "reduce_max", [xt], {"axes": list(range(2, r)), "keepdims": 1},
                  out=n.output[0], shape=s[:2] + [1] * (r - 2))

    # -------- reductions
    def reduce(self, n, at, kop):
        xt = self.act(n, n.input[0])
        s = self.shp(xt)
        r = self.rank(n, xt)
        axes = at.get("axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            axes = [int(v) for v in np.asarray(self.const(n, n.input[1], "axes")).flatten()]
        axes = list(axes or [])
        keep = int(at.get("keepdims", 1))
        if not axes and at.get("noop_with_empty_axes", 0):
            self.tmap[n.output[0]] = xt
            if n.output[0] in self.graph_outputs:
                self.emit(n, "identity", [xt], out=n.output[0], shape=s)
            return
        red = {a % r for a in axes} if axes else set(range(r))
        shape = []
        for i in range(r):
            if i not in red:
                shape.append(s[i])
            elif keep:
                shape.append(1)
        self.emit(n, kop, [xt], {"axes": sorted(red), "keepdims": keep}, out=n.output[0],
                  shape=shape)

    def op_ReduceMean(self, n, at):
        self.reduce(n, at, "reduce_mean")

    def op_ReduceSum(self, n, at):
        self.reduce(n, at, "reduce_sum")

    def op_ReduceMax(self, n, at):
        self.reduce(n, at, "reduce_max")

    def op_ReduceMin(self, n, at):
        self.reduce(n, at, "reduce_min")


# ------------------------------------------------------------------------------------ main

def convert_file(model_path, out_dir, name=None, layout="NCHW", dtype=None):
    """Converts; returns (graph json path, weights path or None, warnings)."""
    try:
        import onnx
    except ImportError:
        raise ConvertError("the Python package 'onnx' is not installed "
                           "(pip install -r tools/requirements.txt)")
    if not os.path.isfile(model_path):
        raise ConvertError(f"{model_path}: no such file")
    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001 - protobuf errors vary
        raise ConvertError(f"{model_path}: not a readable ONNX model: {e}")
    if name is None:
        name = model.graph.name or os.path.splitext(os.path.basename(model_path))[0]
        if name in ("", "torch_jit", "main_graph", "torch-jit-export"):
            name = os.path.splitext(os.path.basename(model_path))[0]
    conv = Converter(model, name, layout=layout, dtype=dtype, source=model_path)
    graph = conv.convert()
    os.makedirs(out_dir, exist_ok=True)
    gpath = os.path.join(out_dir, conv.name + ".json")
    wpath = None
    if conv.weights:
        wpath = os.path.join(out_dir, conv.name + ".safetensors")
        write_safetensors(wpath, conv.weights)
    with open(gpath, "w") as f:
        json.dump(graph, f, indent=1)
        f.write("\n")
    return gpath, wpath, conv


# ------------------------------------------------------------------------------------ reuse

# A stamp in the output directory per (model path, options): the model's content hash, the
# options, this converter's own hash and the outputs it wrote (size, mtime). When all still match,
# the conversion is skipped: a deployment's warm start does not re-convert the same model
# (like ccache: content, not timestamps, decides about the input; outputs must be untouched).
def _stamp_path(model_path, out_dir, name, layout, dtype):
    import hashlib
    ident = json.dumps([os.path.abspath(model_path), name, layout, dtype])
    return os.path.join(out_dir, ".onnx2kiln-" + hashlib.sha1(ident.encode()).hexdigest()[:16] + ".json")


def _read_stamp(stamp_path):
    """The stamp's contents (a dict), or None when missing or unreadable."""
    try:
        with open(stamp_path) as f:
            stamp = json.load(f)
        return stamp if isinstance(stamp, dict) else None
    except (OSError, ValueError):
        return None


def _stamp_key(model_path, name, layout, dtype, stamp=None):
    """The key of this conversion. The model's content hash is reused from `stamp` when the model
    file's size and modification time are those it recorded (as make and ccache's direct mode do):
    an unchanged 100 MB model is not read again."""
    import hashlib
    model_sha1 = None
    try:
        if stamp and stamp.get("model_facts") == _file_facts(model_path):
            model_sha1 = stamp["key"]["model_sha1"]
    except (TypeError, KeyError, AttributeError):
        pass
    if model_sha1 is None:
        h = hashlib.sha1()
        with open(model_path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        model_sha1 = h.hexdigest()
    with open(os.path.abspath(__file__), "rb") as f:
        me = hashlib.sha1(f.read()).hexdigest()
    return {"model_sha1": model_sha1, "name": name, "layout": layout, "dtype": dtype,
            "converter_sha1": me}


def _file_facts(path):
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def _up_to_date(stamp, key):
    """The stamp's printed summary when the stamp matches and its outputs are untouched."""
    try:
        if not stamp or stamp.get("key") != key:
            return None
        for path, facts in stamp.get("outputs", {}).items():
            if _file_facts(path) != facts:
                return None
        return stamp.get("summary", [])
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _write_stamp(stamp_path, key, model_path, outputs, summary):
    tmp = f"{stamp_path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"key": key, "model_facts": _file_facts(model_path),
                   "outputs": {p: _file_facts(p) for p in outputs}, "summary": summary}, f, indent=1)
    os.replace(tmp, stamp_path)


def main(argv=None):
    p = argparse.ArgumentParser(prog="onnx2kiln", description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="the ONNX model file")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--name", help="graph name (default: the model's graph name or file stem)")
    p.add_argument("--layout", choices=["NCHW", "NHWC"], default="NCHW",
                   help="memory layout of 4-D inputs and conv filters (default NCHW)")
    p.add_argument("--dtype", choices=["f32", "f16", "bf16"],
                   help="store float inputs and weights in this dtype (default: as in the model)")
    p.add_argument("--force", action="store_true",
                   help="convert even when DIR holds this model's untouched conversion")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    stamp, key = None, None
    if os.path.isfile(args.model):
        stamp = _stamp_path(args.model, args.out, args.name, args.layout, args.dtype)
        old = _read_stamp(stamp)
        key = _stamp_key(args.model, args.name, args.layout, args.dtype, old)
        summary = None if args.force else _up_to_date(old, key)
        if summary is not None:
            print(f"up to date: {args.out} holds this conversion of {args.model} (same model "
                  "bytes, options and converter; outputs untouched): nothing to do (--force "
                  "converts again)")
            for line in summary:
                print(line)
            return 0
    _import_numpy()
    try:
        gpath, wpath, conv = convert_file(args.model, args.out, args.name, args.layout,
                                          args.dtype)
    except ConvertError as e:
        print(f"onnx2kiln: error: {e}", file=sys.stderr)
        return 2
    for w in conv.warnings:
        print(f"onnx2kiln: warning: {w}", file=sys.stderr)
    ins = ", ".join(f"{k} {v['dtype']} {v['shape']}" for k, v in conv.inputs.items())
    summary = [f"wrote {gpath} ({len(conv.nodes)} nodes; inputs: {ins}; outputs: "
               f"{', '.join(conv.outputs)})"]
    if wpath:
        summary.append(f"wrote {wpath} ({len(conv.weights)} tensors)")
    for line in summary:
        print(line)
    if stamp is not None:
        try:
            _write_stamp(stamp, key, args.model, [x for x in (gpath, wpath) if x], summary)
        except OSError as e:  # a stamp that cannot be written only costs the next import
            print(f"onnx2kiln: warning: cannot write {stamp}: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
