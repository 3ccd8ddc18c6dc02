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
    """The ModelProto in `path`. Refuses a missing, empty or unparsable file, a protobuf message
    that is no ONNX model (no IR version or no graph), and external data outside the model's
    directory (read_external_data)."""
    if not os.path.exists(path):
        raise ConvertError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise ConvertError(f"{path}: not a regular file")
    if os.path.getsize(path) == 0:
        raise ConvertError(f"{path}: the file is empty (0 bytes); expected an ONNX model")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf errors vary
        raise ConvertError(f"{path}: not a readable ONNX model: {one_line(e)}")
    # Protobuf parses many short byte strings as a message with unknown fields: a model must
    # still say which IR version it is and hold a graph.
    if model.ir_version <= 0 or not model.HasField("graph"):
        missing = "IR version" if model.ir_version <= 0 else "graph"
        raise ConvertError(f"{path}: not an ONNX model (the file parses as protobuf but has no "
                           f"{missing})")
    bad = non_text_field(model)
    if bad is not None:
        raise ConvertError(f"{path}: not a valid ONNX model: the string field {bad} is not UTF-8 "
                           f"text")
    read_external_data(model, path)
    return model


def non_text_field(msg, where="model"):
    """The path of the first string field of `msg` (recursively) that is not valid UTF-8, or
    None. Protobuf hands such a field to Python as bytes instead of str (ONNX is proto2, which
    does not check), and every name comparison would then fail in its own way."""
    from google.protobuf.descriptor import FieldDescriptor
    for field, value in msg.ListFields():
        repeated = _is_repeated(field)
        values = list(value) if repeated else [value]
        if field.type == FieldDescriptor.TYPE_STRING:
            if any(isinstance(v, bytes) for v in values):
                return f"{where}.{field.name}"
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for i, v in enumerate(values):
                bad = non_text_field(v, f"{where}.{field.name}" + (f"[{i}]" if repeated else ""))
                if bad is not None:
                    return bad
    return None


def _is_repeated(field):
    """Whether a protobuf field is repeated (protobuf >= 5.29 says so directly; older ones by
    its label)."""
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == field.LABEL_REPEATED


def one_line(e):
    """An exception's message on one line (protobuf and onnx messages span several)."""
    return " ".join(str(e).split()) or type(e).__name__


def _tensors(g):
    """Every TensorProto of graph g with where it is: initializers and tensor attributes."""
    for t in g.initializer:
        yield t, f"initializer '{t.name}'"
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t, f"{describe(n)}: attribute {a.name}"
            for t in a.tensors:
                yield t, f"{describe(n)}: attribute {a.name}"


def read_external_data(model, path):
    """Reads the data of tensors stored in files beside the model. A location must be a relative
    path naming a regular file inside the model's directory (after symlinks): an absolute path,
    `..` or a symlink out of the directory is refused before anything is opened, whatever the
    onnx package would allow."""
    base = os.path.dirname(os.path.abspath(path))
    real_base = os.path.realpath(base)
    external = [(t, w) for t, w in _tensors(model.graph)
                if t.data_location == onnx.TensorProto.EXTERNAL]
    for t, what in external:
        where = f"{path}: {what}"
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        parts = loc.replace("\\", "/").split("/")
        if not loc or "\0" in loc or os.path.isabs(loc) or ".." in parts:
            raise ConvertError(f"{where}: external data location {loc!r} is not a relative path "
                               f"inside the model's directory")
        real = os.path.realpath(os.path.join(base, loc))
        if not real.startswith(real_base + os.sep):
            raise ConvertError(f"{where}: external data location {loc!r} leads outside the "
                               f"model's directory")
        if not os.path.isfile(real):
            raise ConvertError(f"{where}: external data file {loc!r} does not exist or is not a "
                               f"regular file")
        for key in ("offset", "length"):
            v = info.get(key)
            if v is not None and not (v.isdigit() and len(v) < 19):
                raise ConvertError(f"{where}: external data {key} {v!r} is not a non-negative "
                                   f"integer")
        size = os.path.getsize(real)
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else size - offset
        if offset + length > size or length < 0:
            raise ConvertError(f"{where}: external data offset {offset} and length {length} "
                               f"exceed the file {loc!r} ({size} bytes)")
    if external:
        try:
            onnx.external_data_helper.load_external_data_for_model(model, base)
        except Exception as e:  # noqa: BLE001 - onnx's own checks and OS errors
            raise ConvertError(f"{path}: cannot read external data: {one_line(e)}")


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
    """A string attribute from attributes() (which gives them as bytes). Bytes that are not
    UTF-8 become U+FFFD, which no attribute value the importer accepts contains."""
    v = at.get(key, default)
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def elem_type_name(elem_type):
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"{elem_type} (unknown)"


def to_numpy(tensor, where="tensor"):
    """A TensorProto's value as a numpy array; bfloat16 and other numpy-less types as float32.
    check_tensor() has accepted it; a tensor onnx still cannot read is refused at `where`."""
    try:
        a = numpy_helper.to_array(tensor)
    except Exception as e:  # noqa: BLE001 - onnx's reader refuses in many ways
        raise ConvertError(f"{where}: cannot read the tensor's data: {one_line(e)}")
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
    check_names(g, source)
    for t, what in _tensors(g):
        check_tensor(t, f"{source}: {what}")


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
    where = f"{source}: {describe(n)}"
    try:
        schema = onnx.defs.get_schema(n.op_type, opset, "")
    except onnx.defs.SchemaError:
        raise ConvertError(f"{where}: {n.op_type} is not an op of opset {opset} (the model's "
                           f"opset of the default domain)")
    names = [a.name for a in n.attribute]
    dup = sorted({a for a in names if names.count(a) > 1})
    if dup or "" in names:
        what = f"attribute {dup[0]} is given {names.count(dup[0])} times" if dup else (
            "an attribute has an empty name")
        raise ConvertError(f"{where}: {what}")
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
        if want is None:  # a misspelt attribute would silently take its default
            raise ConvertError(f"{where}: {a.name!r} is not an attribute of {n.op_type} (opset "
                               f"{opset})")
        if int(want.type) != a.type:
            raise ConvertError(f"{where}: attribute {a.name} is of type "
                               f"{onnx.AttributeProto.AttributeType.Name(a.type)}; the schema "
                               f"says {onnx.AttributeProto.AttributeType.Name(int(want.type))}")


def check_names(g, source):
    """Every tensor is defined once: by a graph input, an initializer (which may also be a graph
    input, its default value) or one node output. A second definition would silently replace
    the first."""
    seen = {}
    inits = set()
    for t in g.initializer:
        if t.name in inits:
            raise ConvertError(f"{source}: initializer '{t.name}' is defined twice")
        if not t.name:
            raise ConvertError(f"{source}: an initializer has an empty name")
        inits.add(t.name)
    for vi in g.input:
        if vi.name in seen:
            raise ConvertError(f"{source}: graph input '{vi.name}' is listed twice")
        if not vi.name:
            raise ConvertError(f"{source}: a graph input has an empty name")
        seen[vi.name] = f"graph input '{vi.name}'"
    for name in inits:
        seen.setdefault(name, f"initializer '{name}'")
    for n in g.node:
        for o in n.output:
            if not o:
                continue
            if o in seen:
                raise ConvertError(f"{source}: {describe(n)}: output '{o}' is already defined "
                                   f"by {seen[o]}")
            seen[o] = describe(n)


def check_tensor(t, where):
    """A tensor's data holds exactly the elements its dims promise, in one form: raw_data or the
    typed field of its data type (never both, never a segment)."""
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise ConvertError(f"{where}: dims {dims} have a negative size")
    if t.HasField("segment"):
        raise ConvertError(f"{where}: segmented tensors are not supported")
    if t.data_type == onnx.TensorProto.STRING:
        raise ConvertError(f"{where}: a STRING tensor; the importer reads numeric tensors only")
    try:
        np_type = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
        field = helper.tensor_dtype_to_field(t.data_type)
    except (KeyError, TypeError, ValueError):
        raise ConvertError(f"{where}: data type {elem_type_name(t.data_type)} is not a numeric "
                           f"ONNX type the importer reads")
    count = math.prod(dims)
    tname = elem_type_name(t.data_type)
    typed = [f.name for f, v in t.ListFields() if f.name.endswith("_data") and
             f.name not in ("raw_data", "external_data") and len(v)]
    forms = ["raw_data"] * t.HasField("raw_data") + typed
    if len(forms) > 1 or typed and typed != [field]:
        raise ConvertError(f"{where}: its data is in {', '.join(forms)}; a {tname} tensor holds "
                           f"it in raw_data or {field} only")
    packed = t.data_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4)
    if t.HasField("raw_data"):
        want = (count + 1) // 2 if packed else count * np_type.itemsize
        if len(t.raw_data) != want:
            raise ConvertError(f"{where}: dims {dims} hold {count} {tname} values ({want} bytes), "
                               f"but its data has {len(t.raw_data)} bytes")
        return
    found = len(getattr(t, field))
    # Complex values take two numbers; 16-bit and packed types still one int32 each.
    per = 2 if t.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128) else 1
    want = (count + 1) // 2 if packed else count * per
    if found != want:
        raise ConvertError(f"{where}: dims {dims} hold {count} {tname} values, but its data "
                           f"({field}) has {found}")
