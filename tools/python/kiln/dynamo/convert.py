"""FX (core ATen) graphs to kiln graphs. A Converter turns the nodes of one FX graph (a partition)
into one kiln Graph: tensor placeholders become kiln inputs, or constants when they hold
parameters or buffers (`constants`), symbolic sizes become kiln symbols ("s0", "2*s1"), and each
node goes through its converter (kiln/dynamo/ops/, registered in registry.py)."""
import operator

import torch
import torch.fx

from .. import _kiln
from ..graph import Graph, Tensor
from . import ops  # noqa: F401  (registers the converters)
from .registry import CONVERTERS, Unsupported

TORCH_TO_KILN = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                 torch.int32: "i32", torch.int64: "i64", torch.bool: "bool"}


def dim_of(s):
    """An int, or a SymInt as kiln dim text ("s0", "2*s1", "(s0+1)/2": kiln's / is floor)."""
    if isinstance(s, int):
        return s
    if isinstance(s, torch.SymInt):
        node = s.node
        if node.is_nested_int() if hasattr(node, "is_nested_int") else False:
            raise Unsupported("a nested-int size")
        try:
            return int(node.expr)
        except (TypeError, ValueError):
            pass
        text = str(node.expr).replace("//", "/").replace(" ", "")
        for bad in ("Mod", "Max", "Min", "ceiling", "floor", "**", "CeilToInt", "FloorToInt"):
            if bad in text:
                raise Unsupported(f"a size kiln cannot write: {node.expr}")
        return text
    raise Unsupported(f"a size of type {type(s).__name__}")


def target_name(n):
    t = n.target
    if isinstance(t, torch._ops.OpOverload):
        return t.overloadpacket.__name__
    if isinstance(t, torch._ops.OpOverloadPacket):
        return t.__name__
    return getattr(t, "__name__", str(t))


def val_of(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


class _Constant:
    """A constant placeholder not read yet: kiln copies a parameter's values only when a converted
    node reads it (one folded into another constant, t(weight), never is)."""
    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype):
        self.name, self.dtype = name, dtype


# Ops over constants computed at conversion (Converter._fold): movement and lookups only, so that
# arithmetic on weights and slices of them (a fused QKV weight) stay visible to kiln's passes.
_FOLDED_MOVES = {"t", "permute", "transpose", "view", "_unsafe_view", "reshape", "unsqueeze",
                 "squeeze", "clone", "contiguous", "alias", "detach", "index", "index_select",
                 "_unsafe_index"}
_MAX_FOLDED = 1 << 26  # elements: a 128 MB f16 weight


class Converter:
    def __init__(self, name, constants=None):
        self.g = Graph(name)
        self.env = {}
        self.constants = constants or {}  # placeholder name -> real tensor
        self._scalars = 0
        self.sym_inputs = {}              # placeholder name -> symbol (SymInt arguments)

    # ---- helpers for converters
    target_name = staticmethod(target_name)
    val = staticmethod(val_of)

    def is_tensor(self, v):
        return isinstance(v, Tensor)

    def dtype_of(self, n):
        v = val_of(n)
        dt = TORCH_TO_KILN.get(getattr(v, "dtype", None))
        if dt is None:
            raise Unsupported(f"dtype {getattr(v, 'dtype', type(v).__name__)} (kiln has "
                              "f32, f16, bf16, i32, i64, bool)")
        return dt

    def dtype_of_tensor(self, t):
        return t.dtype

    def out_shape(self, n):
        return [dim_of(s) for s in val_of(n).shape]

    def op(self, kop, inputs, attrs=None, multi=False):
        out = self.g.add_op(kop, inputs, attrs or {})
        return out if multi or not isinstance(out, list) else out

    def scalar(self, v, like, rank=0):
        """A constant holding one value in the dtype of FX node `like` (broadcasts)."""
        self._scalars += 1
        dt = like.dtype if isinstance(like, Tensor) else self.dtype_of(like)
        import numpy as np
        from .._dtypes import numpy_bytes
        arr, dt = numpy_bytes(np.full([1] * rank, v, dtype=np.float64 if dt in ("f32", "f16",
                              "bf16") else np.int64), dt)
        return self.g.constant(f"scalar{self._scalars}", arr, dt)

    def filled(self, v, shape, like):
        import numpy as np
        self._scalars += 1
        return self.g.constant(f"fill{self._scalars}", np.full(shape, v, dtype=np.float64),
                               self.dtype_of(like))

    def as_tensor(self, v, like, operand=False):
        if isinstance(v, Tensor):
            return v
        if isinstance(v, (bool, int, float)):
            return self.scalar(v, like)
        raise Unsupported(f"an operand of type {type(v).__name__}")

    # ---- the graph
    def placeholder(self, n):
        v = val_of(n)
        if isinstance(v, torch.SymInt):
            self.env[n] = dim_of(v)
            return
        if not isinstance(v, torch.Tensor):
            raise Unsupported(f"an input of type {type(v).__name__}")
        dt = TORCH_TO_KILN.get(v.dtype)
        if dt is None:
            raise Unsupported(f"dtype {v.dtype}")
        if n.name in self.constants:
            self.env[n] = _Constant(n.name, dt)  # made when a converted node reads it
        else:
            # channels-last tensors stay so: kiln reads them in place (its NHWC kernels)
            cl = v.dim() == 4 and not v.is_contiguous() and \
                v.is_contiguous(memory_format=torch.channels_last)
            self.env[n] = self.g.input(n.name, dt, [dim_of(s) for s in v.shape],
                                       "NHWC" if cl else "NCHW")

    def resolve(self, a):
        if isinstance(a, torch.fx.Node):
            if a not in self.env:
                raise Unsupported(f"the value of {a.name} is not available to kiln")
            v = self.env[a]
            if isinstance(v, _Constant):  # first read: kiln's copy of the value
                v = self.env[a] = self.g.constant(v.name, self.constants[v.name].detach().cpu(),
                                                  v.dtype)
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(self.resolve(x) for x in a)
        if isinstance(a, torch.SymInt):
            return dim_of(a)
        return a

    def node(self, n):
        v = val_of(n)
        if n.target is operator.getitem:
            src = self.resolve(n.args[0])
            out = src[n.args[1]]
            if out is None:
                raise Unsupported(f"result {n.args[1]} of {n.args[0].name}")
            self.env[n] = out
            return
        if isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
            self.env[n] = dim_of(v)  # size arithmetic: kiln infers sizes itself
            return
        if self._fold(n):
            return
        fn = CONVERTERS.get(target_name(n))
        if fn is None or n.op != "call_function":
            raise Unsupported(f"no kiln converter for {n.target}")
        for t in (v if isinstance(v, (tuple, list)) else [v]):
            if isinstance(t, torch.Tensor):
                if t.dtype not in TORCH_TO_KILN:
                    raise Unsupported(f"dtype {t.dtype}")
                if t.device.type not in ("cpu", "cuda", "meta"):
                    raise Unsupported(f"a tensor on {t.device}")
        args = self.resolve(n.args)
        kwargs = {k: self.resolve(x) for k, x in n.kwargs.items()}
        self.env[n] = fn(self, n, list(args), kwargs)

    def _fold(self, n):
        """A movement or lookup whose operands are all constants (parameters among them) is a
        constant here: a linear layer's t(weight) becomes the [K, N] filter kiln's import has,
        Swin's relative-position bias lookups a table. Values are computed with torch once;
        nothing is kept on the torch side."""
        if n.op != "call_function" or target_name(n) not in _FOLDED_MOVES:
            return False
        operands = []
        torch.fx.node.map_arg((n.args, n.kwargs), operands.append)
        if not operands or any(a.name not in self.constants for a in operands):
            return False
        v = val_of(n)
        if not isinstance(v, torch.Tensor) or v.dtype not in TORCH_TO_KILN or \
                not all(isinstance(d, int) for d in v.shape) or v.numel() > _MAX_FOLDED:
            return False
        args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: self.constants[a.name])
        try:
            value = n.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - converted as an op instead
            return False
        value = value.detach().contiguous()
        self.constants[n.name] = value
        self.env[n] = self.g.constant(n.name, value.cpu(), TORCH_TO_KILN[value.dtype])
        return True

    def outputs(self, out_args):
        """Marks the FX output values as kiln outputs; returns their kiln tensors in order."""
        outs = []
        for a in out_args:
            t = self.resolve(a) if isinstance(a, torch.fx.Node) and a in self.env else None
            if not isinstance(t, Tensor):
                raise Unsupported(f"output {a} is not a tensor kiln computes")
            want = self.dtype_of(a)
            if t.dtype != want:  # a value kept in f32 inside the graph (_clamp): its FX dtype
                t = self.g.add_op("cast", [t], {"dtype": want})
            role = self.g._tensor(t.id)["role"]
            if role != "intermediate" or t in outs:
                t = self.g.add_op("identity", [t])
            self.g.output(t)
            outs.append(t)
        return outs


def convert_graph(fx_graph, name, constants):
    """A kiln Graph for the whole of `fx_graph`; returns (graph, Converter)."""
    cx = Converter(name, constants)
    out_args = None
    for n in fx_graph.nodes:
        if n.op == "placeholder":
            cx.placeholder(n)
        elif n.op == "output":
            out_args = n.args[0]
        else:
            cx.node(n)
    single = not isinstance(out_args, (tuple, list))
    cx.outputs([out_args] if single else list(out_args))
    return cx, single


def _probe_input(cx, a):
    v = val_of(a)
    if isinstance(v, torch.Tensor):
        dt = TORCH_TO_KILN.get(v.dtype)
        if dt is None:
            raise Unsupported(f"an input of dtype {v.dtype}")
        cx.env[a] = cx.g.input(a.name, dt, [dim_of(s) for s in v.shape])
    elif isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
        cx.env[a] = dim_of(v)
    else:
        raise Unsupported(f"an input of type {type(v).__name__} ({a.name})")


def try_node(n):
    """Converts node `n` alone (its tensor arguments as kiln inputs): None when kiln takes it,
    else the reason. A getitem is taken when kiln computes that result of its producer."""
    cx = Converter("probe")
    try:
        v = val_of(n)
        if isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
            return "size arithmetic (stays in PyTorch; kiln binds sizes from its inputs)"
        probe = n.args[0] if n.target is operator.getitem else n
        if not isinstance(probe, torch.fx.Node) or probe.op != "call_function":
            return "not an op"
        for a in probe.all_input_nodes:
            _probe_input(cx, a)
        cx.node(probe)
        if n.target is operator.getitem:
            out = cx.env[probe]
            if not isinstance(out, tuple) or out[n.args[1]] is None:
                return f"result {n.args[1]} of {probe.target} (kiln computes only the first)"
        return None
    except Unsupported as e:
        return str(e)
    except _kiln.Error as e:
        return f"kiln refuses it: {e}"
