"""The importer's one kind of user error."""


class ConvertError(Exception):
    """A problem with the model or the arguments: the command line prints it as one line,
    `onnx2kiln: error: <where>: <what>`, and exits with status 2. The message is `<where>: <what>`,
    where <where> names the model file and, inside it, the node (name and op), graph input,
    initializer or output concerned. Any other exception is a bug in the importer (exit 1)."""


def describe(node):
    """`node 'conv1' (Conv)`: how messages name an ONNX node."""
    op = getattr(node, "op_type", "graph output")
    return f"node '{node.name or '(unnamed)'}' ({op})"


class ImporterBug(Exception):
    """Something the importer got wrong (not the model): exit status 1, with a traceback."""
