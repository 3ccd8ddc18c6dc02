"""The importer's one kind of user error."""


class ConvertError(Exception):
    """A problem with the model or the arguments: the command line prints it as one line,
    `onnx2kiln: error: <where>: <what>`, and exits with status 2. The message is `<where>: <what>`,
    where <where> names the model file and, inside it, the node (name and op), graph input,
    initializer or output concerned. Any other exception is a bug in the importer (exit 1)."""


def one_line(message):
    """`message` as one printable line: newlines become spaces, and every other character that
    would break or hide the line (carriage returns, other control characters, Unicode line and
    paragraph separators, as a model's names may hold) is written as its escape."""
    out = []
    for ch in " ".join(str(message).split("\n")):
        if ch == " " or (ch.isprintable() and len(("x" + ch + "x").splitlines()) == 1):
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def describe(node):
    """`node 'conv1' (Conv)`: how messages name an ONNX node."""
    op = getattr(node, "op_type", "graph output")
    return f"node '{node.name or '(unnamed)'}' ({op})"


class ImporterBug(Exception):
    """Something the importer got wrong (not the model): exit status 1, with a traceback."""
