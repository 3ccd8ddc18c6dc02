"""The tables that say what the importer does with each ONNX op type.

    @converter("Conv")                 # ops/conv_pool.py: emits kiln nodes for one ONNX node
    def conv(cx, n, at): ...

    @fusion("Sigmoid")                 # fusions.py: tried first; True when it matched a pattern
    def silu(cx, n): ...

    @folder("Gather")                  # fold.py: evaluates the node at conversion time
    def gather(ins, at): ...           # (with reads_shape=True: fn(cx, node, attrs), for Shape)

`cx` is the Converter (context.py), `n` the ONNX NodeProto, `at` its attributes as a dict. An op
with a folder but no converter is supported only where it folds (shape computations). The set of
supported ops, which the model check uses to list every unsupported op at once, is derived from
these tables.
"""

CONVERTERS = {}  # ONNX op type -> fn(cx, node, attrs)
FUSIONS = {}     # ONNX op type -> fn(cx, node) -> bool
FOLDERS = {}     # ONNX op type -> fn(inputs, attrs) -> numpy array, or None when it cannot fold


def _register(table, kind, ops):
    def add(fn):
        for op in ops:
            if op in table:
                raise AssertionError(f"two {kind}s for ONNX op {op}")
            table[op] = fn
        return fn
    return add


def converter(*ops):
    """Registers the decorated function as the converter of each ONNX op type in `ops`."""
    return _register(CONVERTERS, "converter", ops)


def fusion(*ops):
    """Registers a pattern fusion that starts at each ONNX op type in `ops`."""
    return _register(FUSIONS, "fusion", ops)


def folder(*ops, reads_shape=False):
    """Registers a conversion-time evaluation of each ONNX op type in `ops`: fn(inputs, attrs),
    called when every input is a known constant; or, with reads_shape, fn(cx, node, attrs), called
    for every such node (Shape and Size read the shape of a run-time tensor)."""
    def add(fn):
        fn.reads_shape = reads_shape
        return _register(FOLDERS, "folder", ops)(fn)
    return add


def load_all():
    """Imports every module that registers something (idempotent)."""
    from . import fold, fusions, ops  # noqa: F401  (imported for their registrations)


def fold_only_ops():
    """Ops that are supported only where they compute at conversion time."""
    load_all()
    return set(FOLDERS) - set(CONVERTERS)


def supported_ops():
    """Every ONNX op type (default domain) the importer accepts. Constant is evaluated up front."""
    load_all()
    return set(CONVERTERS) | set(FOLDERS) | {"Constant"}
