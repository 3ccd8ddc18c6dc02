"""Reading the ONNX model and refusing what the importer cannot convert faithfully.

Everything here runs before conversion starts: a file that is no ONNX model, a graph without
outputs, unsupported ops (all of them in one message), nodes with the wrong number of inputs or a
missing required attribute, and initializers whose data does not fill their dims.
"""
import math
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .errors import ConvertError, describe

# ONNX element types the importer computes with: FLOAT, FLOAT16, BFLOAT16, DOUBLE (read as f32).
ONNX_FLOAT = {1: "f32", 10: "f16", 16: "bf16", 11: "f32"}
# Integer and bool element types kiln holds as they are: INT32, INT64, BOOL.
ONNX_INT = {6: "i32", 7: "i64", 9: "bool"}
INT_DTYPES = ("i32", "i64", "bool")
NUMPY_OF = {"i32": np.int32, "i64": np.int64, "bool": np.bool_}

# Graph names exporters give every model: the file stem names the graph instead.
EXPORTER_DEFAULT_NAMES = ("", "torch_jit", "main_graph", "torch-jit-export")

# The unsupported-ops message lists at most this many node names per op.
MAX_NAMES_SHOWN = 5


def load(path):
    """The ModelProto in `path`. Refuses a missing, empty or unparsable file, and a protobuf
    message that is no ONNX model (no IR version or no graph)."""
    if not os.path.exists(path):
        raise ConvertError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise ConvertError(f"{path}: not a regular file")
    if os.path.getsize(path) == 0:
        raise ConvertError(f"{path}: the file is empty (0 bytes); expected an ONNX model")
    try:
        model = onnx.load(path)
    except Exception as e:  # noqa: BLE001 - protobuf and external-data errors vary
        raise ConvertError(f"{path}: not a readable ONNX model: {e}")
    # Protobuf parses many short byte strings as a message with unknown fields: a model must
    # still say which IR version it is and hold a graph.
    if model.ir_version <= 0 or not model.HasField("graph"):
        missing = "IR version" if model.ir_version <= 0 else "graph"
        raise ConvertError(f"{path}: not an ONNX model (the file parses as protobuf but has no "
                           f"{missing})")
    return model


def default_name(model, path):
    """The graph's name, or the file stem when the graph name is an exporter default."""
    stem = os.path.splitext(os.path.basename(path))[0]
    name = model.graph.name or stem
    return stem if name in EXPORTER_DEFAULT_NAMES else name


def default_opset(model):
    """The model's opset of the default ONNX domain (1 when it declares none)."""
    opset = 1
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = imp.version
    return opset


def attributes(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def str_attr(at, key, default):
    """A string attribute from attributes() (which gives them as bytes)."""
    v = at.get(key, default)
    return v.decode() if isinstance(v, bytes) else v


def elem_type_name(elem_type):
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"{elem_type} (unknown)"


def to_numpy(tensor):
    """A TensorProto's value as a numpy array; bfloat16 and other numpy-less types as float32."""
    a = numpy_helper.to_array(tensor)
    if a.dtype.kind == "V" or "bfloat16" in str(a.dtype):
        a = a.astype(np.float32)
    return np.array(a)


# ------------------------------------------------------------------------------ checks

def check(model, source, supported):
    """Refuses a model the importer cannot convert, before conversion starts."""
    g = model.graph
    if not g.output:
        raise ConvertError(f"{source}: the graph has no outputs; a kiln graph needs at least one")
    check_ops(g, source, supported)
    opset = default_opset(model)
    for n in g.node:
        check_node_schema(n, source, opset)
    for t in g.initializer:
        check_initializer(t, source)


def check_ops(g, source, supported):
    """Unsupported ops: all of them, with their node names, in one message."""
    bad = {}
    for n in g.node:
        if n.domain not in ("", "ai.onnx") or n.op_type not in supported:
            op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
            bad.setdefault(op, []).append(n.name or "(unnamed)")
    if not bad:
        return
    parts = []
    for op, names in sorted(bad.items()):
        shown = ", ".join(f"'{s}'" for s in names[:MAX_NAMES_SHOWN])
        more = f" and {len(names) - MAX_NAMES_SHOWN} more" if len(names) > MAX_NAMES_SHOWN else ""
        parts.append(f"{op} (node{'s' if len(names) > 1 else ''} {shown}{more})")
    raise ConvertError(f"{source}: unsupported ONNX op{'s' if len(bad) > 1 else ''}: "
                       f"{'; '.join(parts)}")


def check_node_schema(n, source, opset):
    """The node's input and output counts, required attributes and attribute types against its
    ONNX schema (the opset's version of the op). An op the opset does not define is left to the
    converter."""
    try:
        schema = onnx.defs.get_schema(n.op_type, opset, "")
    except onnx.defs.SchemaError:
        return
    where = f"{source}: {describe(n)}"
    count = len(n.input)
    if count < schema.min_input or count > schema.max_input:
        want = (f"{schema.min_input}" if schema.min_input == schema.max_input else
                f"{schema.min_input} to {schema.max_input}")
        raise ConvertError(f"{where}: expected {want} inputs (opset {opset}), found {count}")
    for i in range(schema.min_input):
        if not n.input[i]:
            raise ConvertError(f"{where}: input {i} is required, found an empty name")
    if len(n.output) < schema.min_output or len(n.output) > schema.max_output:
        raise ConvertError(f"{where}: expected {schema.min_output} to {schema.max_output} "
                           f"outputs (opset {opset}), found {len(n.output)}")
    have = {a.name for a in n.attribute}
    missing = sorted(k for k, a in schema.attributes.items() if a.required and k not in have)
    if missing:
        raise ConvertError(f"{where}: required attribute{'s' if len(missing) > 1 else ''} "
                           f"{', '.join(missing)} missing")
    for a in n.attribute:
        want = schema.attributes.get(a.name)
        if want is not None and int(want.type) != a.type:
            raise ConvertError(f"{where}: attribute {a.name} is of type "
                               f"{onnx.AttributeProto.AttributeType.Name(a.type)}; the schema "
                               f"says {onnx.AttributeProto.AttributeType.Name(int(want.type))}")


def check_initializer(t, source):
    """The initializer's data holds exactly the elements its dims promise."""
    where = f"{source}: initializer '{t.name}'"
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise ConvertError(f"{where}: dims {dims} have a negative size")
    if t.data_type == onnx.TensorProto.STRING or t.data_type == onnx.TensorProto.UNDEFINED:
        return  # not data the importer reads as numbers; refused where used
    try:
        np_type = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
    except (KeyError, TypeError, ValueError):
        return
    count = math.prod(dims)
    tname = elem_type_name(t.data_type)
    if t.HasField("raw_data"):
        if t.data_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4):
            want = (count + 1) // 2  # two 4-bit values a byte
        else:
            want = count * np_type.itemsize
        if len(t.raw_data) != want:
            raise ConvertError(f"{where}: dims {dims} hold {count} {tname} values ({want} bytes), "
                               f"but its data has {len(t.raw_data)} bytes")
        return
    field = helper.tensor_dtype_to_field(t.data_type)
    found = len(getattr(t, field))
    # Complex values take two numbers; 16-bit and packed types still one int32 each.
    per = 2 if t.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128) else 1
    if t.data_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4):
        want = (count + 1) // 2
    else:
        want = count * per
    if found != want:
        raise ConvertError(f"{where}: dims {dims} hold {count} {tname} values, but its data "
                           f"({field}) has {found}")
