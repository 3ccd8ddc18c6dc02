"""The conversion driver: ONNX graph in, kiln graph (a JSON-ready dict) out.

    inputs -> Constant values -> pre-pass fusions (gelu) -> every node in order -> outputs -> prune

Each node is folded when it computes at conversion time (fold.py), else handed to the fusion
registered for its op (fusions.py) and, when that does not match, to its converter (ops/).
"""
import os

from . import fusions, model as onnx_model
from .context import Converter
from .errors import ConvertError
from .fold import try_fold
from .names import sanitize, sanitize_symbol
from .registry import CONVERTERS, FUSIONS, fold_only_ops, supported_ops


def convert(model, name, layout="NCHW", dtype=None, source="model.onnx"):
    """Checks and converts `model`; returns the Converter (its graph_json() is the graph file)."""
    onnx_model.check(model, source, supported_ops())
    cx = Converter(model, name, layout=layout, dtype=dtype, source=source)
    g = cx.g
    for init in g.initializer:
        cx.consts[init.name] = onnx_model.to_numpy(init, f"{source}: initializer '{init.name}'")
    init_names = {i.name for i in g.initializer}
    for vi in g.input:
        if vi.name not in init_names:
            add_input(cx, vi)
    # Constant nodes first: patterns look at their values.
    for n in g.node:
        if n.op_type == "Constant":
            cx.consts[n.output[0]] = constant_value(cx, n)
            cx.became[id(n)] = "folded"
    current = None
    try:
        fusions.prepass(cx)
        for n in g.node:
            current = n
            if id(n) in cx.skip:
                cx.became[id(n)] = "fused"
                continue
            if id(n) in cx.replace:
                cx.replace[id(n)](cx, n)
                cx.became[id(n)] = "converted"
                continue
            convert_node(cx, n)
        current = None
        add_outputs(cx)
        prune(cx)
    except ConvertError as e:
        e.cx, e.node = cx, current  # for --report: how far the conversion got
        raise
    return cx


def add_input(cx, vi):
    """A graph input: dtype from its element type, dims static or symbols."""
    tt = vi.type.tensor_type
    dtype = cx.tdtype(tt.elem_type, f"graph input '{vi.name}'")
    if not tt.HasField("shape"):
        raise ConvertError(f"{cx.source}: graph input '{vi.name}' has no shape (unknown "
                           f"rank); kiln inputs need a rank (dims may be symbolic)")
    kname = cx.tnames.get(vi.name)
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            if d.dim_value <= 0:
                raise ConvertError(f"{cx.source}: graph input '{vi.name}' dim {i}: "
                                   f"expected a positive size, found {d.dim_value}")
            dims.append(int(d.dim_value))
        elif d.dim_param:
            dims.append(sanitize_symbol(d.dim_param))
        else:
            dims.append(sanitize_symbol(f"{kname}_dim{i}"))
    spec = {"dtype": dtype, "shape": dims}
    if cx.layout == "NHWC" and len(dims) == 4:
        spec["layout"] = "NHWC"
    cx.inputs[kname] = spec
    cx.tmap[vi.name] = kname
    cx.shape[kname] = dims
    cx.dtype[kname] = dtype
    cx.input_map[kname] = vi.name


def constant_value(cx, n):
    """The value of a Constant node."""
    import numpy as np
    a = cx.attrs(n)
    if "value" in a:
        return onnx_model.to_numpy(a["value"], f"{cx.source}: {cx.where(n)}: attribute value")
    if "value_float" in a:
        return np.array(a["value_float"], dtype=np.float32)
    if "value_floats" in a:
        return np.array(a["value_floats"], dtype=np.float32)
    if "value_int" in a:
        return np.array(a["value_int"], dtype=np.int64)
    if "value_ints" in a:
        return np.array(a["value_ints"], dtype=np.int64)
    cx.fail(n, f"unsupported Constant attribute(s): {sorted(a)}")


def convert_node(cx, n):
    op = n.op_type
    if try_fold(cx, n):
        cx.became[id(n)] = "folded"
        return
    if op in fold_only_ops():
        runtime = [t for t in n.input if t and t not in cx.consts]
        why = (f"its input{'s' if len(runtime) > 1 else ''} "
               f"{', '.join(repr(t) for t in runtime)} {'are' if len(runtime) > 1 else 'is'} "
               f"computed at run time" if runtime and op != "Shape" else
               "the shape has dims that kiln cannot express")
        cx.fail(n, f"{op} is supported only where it can be computed at conversion time "
                   f"(shape computations over static sizes and dynamic dims); here {why}")
    cx.became[id(n)] = "converted"
    fuse = FUSIONS.get(op)
    if fuse is not None and fuse(cx, n):
        cx.became[id(n)] = "fused"  # unless it emitted kiln nodes of its own (report.py)
        return
    CONVERTERS[op](cx, n, cx.attrs(n))


class _OutputNode:
    """Stands in for an ONNX node where a graph output needs an `identity` node of its own."""
    op_type = "Identity"

    def __init__(self, name):
        self.name = name


def add_outputs(cx):
    """The graph outputs. One kiln tensor can be an output once, and never an input or constant
    itself: such outputs get an `identity` node."""
    used = set()
    for o in cx.g.output:
        if o.name in cx.tmap:
            kt = cx.tmap[o.name]
        elif o.name in cx.consts:
            kt = cx.materialize(o, o.name, cx.natural_dtype(o.name))
        else:
            raise ConvertError(f"{cx.source}: graph output '{o.name}' is not computed")
        if kt in used or kt in cx.inputs or kt in cx.constants:
            kt = cx.emit(_OutputNode(sanitize(o.name, False) + "_out"), "identity", [kt])
        used.add(kt)
        cx.outputs.append(kt)
        cx.output_map[kt] = o.name


def prune(cx):
    """Drops nodes and constants that no output depends on."""
    live = set(cx.outputs)
    keep = []
    for n in reversed(cx.nodes):
        if any(o in live for o in n["outputs"]):
            keep.append(n)
            live.update(n["inputs"])
    cx.nodes = list(reversed(keep))
    cx.constants = {k: v for k, v in cx.constants.items() if k in live}
    cx.weights = {k: v for k, v in cx.weights.items() if k in cx.constants}


def graph_json(cx):
    """The graph file's contents (format version 1)."""
    meta = {"converted_from": os.path.basename(cx.source), "onnx_opset": cx.opset,
            "inputs": cx.input_map, "outputs": cx.output_map}
    return {"kiln": 1, "name": cx.name, "metadata": {"onnx": meta}, "inputs": cx.inputs,
            "constants": cx.constants, "nodes": cx.nodes, "outputs": cx.outputs}
