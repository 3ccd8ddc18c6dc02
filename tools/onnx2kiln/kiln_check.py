"""The final check of a written graph by kiln itself: `kiln check --json GRAPH`.

kiln's loader validates the file and infers every tensor's dtype, shape and layout. The importer
uses that (a) to refuse a conversion kiln would not load, naming the ONNX node behind the kiln
node it refuses (a model whose shapes do not fit together, say), (b) to cross-check the shapes
it derived during conversion (a difference is a bug in the importer: a Shape node may have folded
to a wrong value), and (c) for the output types in its summary.
"""
import json
import os
import re
import shutil
import subprocess

from . import symdim
from .errors import ConvertError, ImporterBug, describe

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def find_kiln(explicit=None):
    """The kiln CLI: `explicit` (--kiln), else the `kiln` process that runs this one (`kiln
    import`), else an installed one beside this package (<prefix>/bin/kiln for
    <prefix>/share/kiln/onnx2kiln), else the source tree's build/kiln, else `kiln` on PATH.
    None when there is none."""
    if explicit:
        return explicit
    candidates = []
    try:
        parent = os.readlink(f"/proc/{os.getppid()}/exe")
        if os.path.basename(parent) == "kiln":
            candidates.append(parent)
    except OSError:
        pass
    up2 = os.path.dirname(os.path.dirname(PACKAGE_DIR))
    candidates += [os.path.join(os.path.dirname(up2), "bin", "kiln"),  # installed
                   os.path.join(up2, "build", "kiln")]                 # source tree
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return shutil.which("kiln")


def run(kiln, graph_path, cx, shown_dir):
    """kiln's view of the graph at graph_path (the parsed JSON of `kiln check --json`), or None
    for a kiln without --json (with a warning). A graph kiln refuses is a ConvertError naming the
    ONNX node; paths under the graph's directory are shown as under `shown_dir` (where the files
    end up)."""
    try:
        r = subprocess.run([kiln, "check", "--json", graph_path], capture_output=True, text=True)
    except OSError as e:
        raise ConvertError(f"--kiln {kiln}: cannot run it to check the written graph: "
                           f"{e.strerror}")
    staged = os.path.dirname(graph_path)
    if r.returncode == 2 and "unknown flag '--json'" in r.stderr:
        cx.warnings.append(f"{kiln} is older than this importer (its `check` has no --json): "
                           f"the written graph is not checked by kiln")
        return None
    if r.returncode == 2:
        msg = " ".join(r.stderr.strip().splitlines()).replace(staged, shown_dir)
        msg = msg[len("kiln: "):] if msg.startswith("kiln: ") else msg
        raise ConvertError(f"{cx.source}: {_refused_node(cx, msg)}kiln refuses the converted "
                           f"graph: {msg}")
    if r.returncode != 0:
        raise ImporterBug(f"{kiln} check --json {graph_path} exited with status "
                          f"{r.returncode}: {r.stderr.strip()}")
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        raise ImporterBug(f"{kiln} check --json printed no JSON ({e}): {r.stdout[:200]!r}")


def _refused_node(cx, msg):
    """`node 'x' (Op): ` for the ONNX node behind the kiln node a message names (kiln names
    graph-file nodes as `nodes[i]`), else ''."""
    m = re.search(r"nodes\[(\d+)\]", msg)
    if m is None or int(m.group(1)) >= len(cx.nodes):
        return ""
    node = cx.origin.get(cx.nodes[int(m.group(1))]["name"])
    return f"{describe(node)}: " if node is not None else ""


def compare(cx, info):
    """Every dim the importer derived as a number must be kiln's number; a symbol must be kiln's
    symbol or expression (compared as polynomials). Dtypes match."""
    tensors = info.get("tensors", {})
    for name, shape in cx.shape.items():
        k = tensors.get(name)
        if k is None:
            continue  # a tensor prune() dropped
        if cx.dtype.get(name) != k["dtype"]:
            raise ImporterBug(f"tensor '{name}': the importer derived dtype {cx.dtype.get(name)}, "
                              f"kiln infers {k['dtype']}")
        if shape is None:
            continue
        if len(shape) != len(k["shape"]) or not all(
                _dim_agrees(a, b) for a, b in zip(shape, k["shape"])):
            raise ImporterBug(f"tensor '{name}': the importer derived shape {shape}, kiln "
                              f"infers {k['shape']}")


def _dim_agrees(mine, kilns):
    """Equal sizes: the same number, or the same polynomial (symdim's canonical form). A kiln
    expression the importer has no polynomial for (a floor-division atom) is taken as it is."""
    if mine is None:  # unknown to the importer
        return True
    if isinstance(kilns, str) and symdim.parse(kilns) is None:
        return True
    return symdim.same(mine, kilns)


def describe_tensor(info, name):
    """`y f32[N,5]` (with ` NHWC` for that layout), as kiln prints tensor types."""
    t = info["tensors"][name]
    dims = ",".join(str(d) for d in t["shape"])
    layout = f" {t['layout']}" if t["layout"] != "NCHW" else ""
    return f"{name} {t['dtype']}[{dims}]{layout}"
