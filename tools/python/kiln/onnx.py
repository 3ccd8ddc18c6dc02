"""kiln.import_onnx: an ONNX model as a kiln Graph, through the importer kiln ships
(kiln.onnx2kiln, the one `kiln import` runs)."""
import os
import tempfile

from . import _kiln
from .graph import load_graph


def import_onnx(path, out_dir=None, name=None, layout="NCHW", dtype=None):
    """Converts the ONNX model at `path` (docs/ONNX.md) and loads the result. The graph file and
    its weights are written to `out_dir` (default: a temporary directory that lives as long as the
    returned graph, whose constants read it)."""
    from .onnx2kiln import model as onnx_model, writer
    from .onnx2kiln.convert import convert
    from .onnx2kiln.errors import ConvertError
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kiln_onnx_")
        out_dir = tmp.name
    try:
        model = onnx_model.load(str(path))
        name = name or onnx_model.default_name(model, str(path))
        cx = convert(model, name, layout=layout, dtype=dtype, source=str(path))
        gpath, _, _ = writer.write_outputs(cx, str(out_dir), None)
    except ConvertError as e:  # "<model file>: <where>: <what>", as `kiln import` prints it
        msg = str(e)
        raise _kiln.UserError(msg if str(path) in msg else f"{path}: {msg}") from None
    g = load_graph(os.fspath(gpath))
    g._onnx_dir = tmp  # the constants' safetensors file lives there
    return g
