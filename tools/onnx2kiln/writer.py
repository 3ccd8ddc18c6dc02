"""Writing a conversion: DIR/NAME.json (the graph) and DIR/NAME.safetensors (its weights).

Both are written into a fresh directory inside DIR first and checked there by kiln
(kiln_check.py); only a graph kiln accepts is moved into place (weights first, so that a reader
of the new graph finds the new weights). When anything fails, nothing in DIR changes (and a DIR
created for the conversion is removed again).
"""
import json
import os
import shutil
import tempfile

from . import kiln_check
from .convert import graph_json
from .errors import ConvertError
from .safetensors import write_safetensors


def _missing_dirs(path):
    """The directories os.makedirs(path) creates, deepest first."""
    out, path = [], os.path.abspath(path)
    while not os.path.exists(path):
        out.append(path)
        path = os.path.dirname(path)
    return out


def write_outputs(cx, out_dir, kiln):
    """Writes, checks (when `kiln` is given) and moves the graph and weights into out_dir.
    Returns (graph path, weights path or None, kiln's view of the graph or None)."""
    where = f"--out {out_dir}"
    created = _missing_dirs(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".onnx2kiln-tmp-", dir=out_dir)
    except OSError as e:
        raise ConvertError(f"{where}: cannot write to this directory: {e.strerror}")
    names = ([cx.name + ".safetensors"] if cx.weights else []) + [cx.name + ".json"]
    done = False
    try:
        _write(cx, staging, names, where)
        info = None
        if kiln:
            info = kiln_check.run(kiln, os.path.join(staging, names[-1]), cx, out_dir)
            if info is not None:
                kiln_check.compare(cx, info)
        for name in names:
            try:
                os.replace(os.path.join(staging, name), os.path.join(out_dir, name))
            except OSError as e:
                raise ConvertError(f"{where}: cannot write {name}: {e.strerror}")
        done = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        for d in created if not done else []:  # a failed conversion leaves no new directory
            try:
                os.rmdir(d)
            except OSError:
                break
    paths = [os.path.join(out_dir, name) for name in names]
    return paths[-1], (paths[0] if cx.weights else None), info


def _write(cx, directory, names, where):
    """The weights (when there are any) and the graph file, as `names`, into `directory`."""
    try:
        if cx.weights:
            write_safetensors(os.path.join(directory, names[0]), cx.weights)
        with open(os.path.join(directory, names[-1]), "w") as f:
            json.dump(graph_json(cx), f, indent=1)
            f.write("\n")
    except OSError as e:
        raise ConvertError(f"{where}: cannot write {e.filename or 'the output'}: {e.strerror}")
