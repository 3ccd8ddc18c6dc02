"""kiln.Graph: the builder API over kiln's op table, with Tensor handles.

Every op of the table is reachable through ``add_op(op, inputs, attrs)`` (names and attributes as
in docs/graph_format.md); the methods below are shorthands. Shapes are checked and inferred as
nodes are added: a bad node raises kiln.UserError with kiln's located message.
"""
from . import _kiln
from ._dtypes import numpy_bytes

__all__ = ["Graph", "Tensor", "load_graph", "load_graph_string"]


class Tensor:
    """A tensor of one Graph (an input, a constant or a node's output)."""

    __slots__ = ("graph", "id")

    def __init__(self, graph, id):
        self.graph, self.id = graph, id

    def _info(self):
        return self.graph._tensor(self.id)

    @property
    def name(self):
        return self._info()["name"]

    @property
    def dtype(self):
        return self._info()["dtype"]

    @property
    def shape(self):
        """Static dims as ints, symbolic ones as their text ("N", "N*S")."""
        return self._info()["shape"]

    @property
    def layout(self):
        return self._info()["layout"]

    def __repr__(self):
        i = self._info()
        return f"kiln.Tensor({i['name']!r}: {i['dtype']}{i['shape']} {i['layout']})"

    def __eq__(self, other):
        return isinstance(other, Tensor) and other.graph is self.graph and other.id == self.id

    def __hash__(self):
        return hash((id(self.graph), self.id))


def _ids(graph, tensors, where):
    out = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor) or t.graph is not graph:
            raise _kiln.UserError(f"graph '{graph.name}': {where}: inputs[{i}] is not a tensor "
                                  f"of this graph (found {type(t).__name__})")
        out.append(t.id)
    return out


class Graph:
    """A kiln graph: inputs, constants, nodes and outputs (over the C++ kiln::Graph, `native`)."""

    def __init__(self, name="graph", native=None):
        self.native = native if native is not None else _kiln.Graph(name)

    @property
    def name(self):
        return self.native.name

    @name.setter
    def name(self, v):
        self.native.name = v

    def __repr__(self):
        return (f"kiln.Graph({self.name!r}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, "
                f"{len(self.outputs)} outputs)")

    def _tensor(self, i):
        return self.native._tensor(i)

    def symbols(self):
        return self.native.symbols()

    def to_json(self):
        """The graph-file form (docs/graph_format.md)."""
        return self.native.to_json()

    def save(self, path):
        self.native.save(str(path))

    # ---- building
    def input(self, name, dtype, shape, layout="NCHW"):
        """A graph input; dims are ints or symbols ("N") bound at run time."""
        return Tensor(self, self.native._input(name, dtype, list(shape), layout))

    def constant(self, name, data, dtype=None, layout="NCHW"):
        """A constant from an array (numpy, or a CPU torch tensor): its values, converted to
        `dtype` (default: the array's). kiln keeps its own copy."""
        arr, dt = numpy_bytes(data, dtype)
        return Tensor(self, self.native._constant(name, dt, list(arr.shape), arr, layout))

    def constant_random(self, name, dtype, shape, dist="normal", a=0.0, b=1.0, seed=1,
                        layout="NCHW"):
        """A seeded random constant (dist "normal": mean a, std b; "uniform": [a, b))."""
        return Tensor(self, self.native._constant_random(name, dtype, list(shape), dist, float(a),
                                                  float(b), int(seed), layout))

    def add_op(self, op, inputs, attrs=None, name="", output_names=()):
        """Adds a node of any op of the table; returns its output Tensor, or a list of them for
        several outputs (split)."""
        outs = self.native._add_op(op, _ids(self, inputs, op), attrs or {}, name, list(output_names))
        ts = [Tensor(self, o) for o in outs]
        return ts[0] if len(ts) == 1 else ts

    def output(self, *tensors):
        for t in tensors:
            self.native._output(_ids(self, [t], "output")[0])

    # ---- inspection
    def tensor(self, name):
        i = self.native._find(name)
        if i < 0:
            raise _kiln.UserError(f"graph '{self.name}': no tensor named '{name}'")
        return Tensor(self, i)

    @property
    def inputs(self):
        return [Tensor(self, i) for i in self.native._inputs()]

    @property
    def outputs(self):
        return [Tensor(self, i) for i in self.native._outputs()]

    @property
    def nodes(self):
        """[{op, name, inputs: [tensor ids], outputs, attrs (defaults filled in)}]."""
        return self.native._nodes()

    def explain(self, arch="sm_90", fusion=True, schedule=""):
        """The fusion plan kiln builds for this graph (no GPU needed): a dict with "text" (what
        `kiln plan` prints), "passes", "groups" (kind, nodes, why each boundary) and "kernels"."""
        return _kiln._explain(self.native, arch, fusion, schedule)

    def run_reference(self, inputs=None, bindings=None, threads=0, **kw):
        """Runs on kiln's CPU reference (f64 math rounded to each dtype) with numpy arrays by
        input name; returns {output name: numpy array} (bf16 outputs as float32)."""
        from .engine import run_reference
        return run_reference(self, dict(inputs or {}, **kw), bindings, threads)

    # ---- shorthands for common ops (every op: add_op)
    def conv2d(self, x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
        ins = [x, w] + ([bias] if bias is not None else [])
        return self.add_op("conv2d", ins, {"stride": list(stride), "padding": list(padding),
                                           "dilation": list(dilation), "groups": groups})

    def matmul(self, a, b, bias=None, transpose_a=False, transpose_b=False):
        ins = [a, b] + ([bias] if bias is not None else [])
        return self.add_op("matmul", ins, {"transpose_a": int(transpose_a),
                                           "transpose_b": int(transpose_b)})

    def batchnorm(self, x, scale, bias, mean, var, eps=1e-5):
        return self.add_op("batchnorm", [x, scale, bias, mean, var], {"eps": eps})

    def layernorm(self, x, scale=None, bias=None, axis=-1, eps=1e-5):
        ins = [x] + [t for t in (scale, bias) if t is not None]
        return self.add_op("layernorm", ins, {"axis": axis, "eps": eps})

    def rmsnorm(self, x, scale=None, axis=-1, eps=1e-6):
        return self.add_op("rmsnorm", [x] + ([scale] if scale is not None else []),
                           {"axis": axis, "eps": eps})

    def groupnorm(self, x, groups, scale=None, bias=None, eps=1e-5):
        ins = [x] + [t for t in (scale, bias) if t is not None]
        return self.add_op("groupnorm", ins, {"groups": groups, "eps": eps})

    def softmax(self, x, axis=-1):
        return self.add_op("softmax", [x], {"axis": axis})

    def gelu(self, x, approximate="none"):
        return self.add_op("gelu", [x], {"approximate": approximate})

    def reshape(self, x, shape):
        return self.add_op("reshape", [x], {"shape": list(shape)})

    def transpose(self, x, perm):
        return self.add_op("transpose", [x], {"perm": list(perm)})

    def concat(self, xs, axis):
        return self.add_op("concat", list(xs), {"axis": axis})

    def maxpool2d(self, x, kernel, stride=(), padding=(0, 0)):
        return self.add_op("maxpool2d", [x], {"kernel": list(kernel), "stride": list(stride),
                                              "padding": list(padding)})

    def avgpool2d(self, x, kernel, stride=(), padding=(0, 0), count_include_pad=False):
        return self.add_op("avgpool2d", [x], {"kernel": list(kernel), "stride": list(stride),
                                              "padding": list(padding),
                                              "count_include_pad": int(count_include_pad)})


def _unary(op):
    def method(self, x, **attrs):
        return self.add_op(op, [x], attrs)
    method.__name__ = op
    method.__doc__ = f"The {op} op (docs/graph_format.md); attributes as keywords."
    return method


def _binary(op):
    def method(self, a, b):
        return self.add_op(op, [a, b])
    method.__name__ = op
    method.__doc__ = f"The {op} op (docs/graph_format.md), numpy broadcasting."
    return method


_UNARY = ["relu", "leaky_relu", "elu", "silu", "sigmoid", "tanh", "softplus", "clamp", "exp", "log",
          "sqrt", "rsqrt", "abs", "neg", "reciprocal", "erf", "identity", "cast", "hardswish",
          "hardsigmoid", "mish", "sin", "cos", "global_avgpool", "log_softmax", "instancenorm"]
_BINARY = ["add", "sub", "mul", "div", "max", "min", "pow", "prelu"]
for _op in _UNARY:
    if not hasattr(Graph, _op):
        setattr(Graph, _op, _unary(_op))
for _op in _BINARY:
    setattr(Graph, _op, _binary(_op))


def load_graph(path):
    """Loads and validates a graph file (docs/graph_format.md)."""
    return Graph(native=_kiln._load_graph(str(path)))


def load_graph_string(text, source_name="<string>", base_dir="."):
    return Graph(native=_kiln._load_graph_string(text, source_name, str(base_dir)))
