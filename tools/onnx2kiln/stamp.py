"""The up-to-date stamp: a conversion that DIR already holds is not done again.

A stamp in the output directory per (model path, options) records the model's content hash, the
options, the converter's own hash and the outputs it wrote (size, mtime). When all still match,
the conversion is skipped: a deployment's warm start does not re-convert the same model (like
ccache: content, not timestamps, decides about the input; outputs must be untouched).

Standard library only: the warm path exits before numpy and onnx are imported.
"""
import hashlib
import json
import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def stamp_path(model_path, out_dir, name, layout, dtype):
    ident = json.dumps([os.path.abspath(model_path), name, layout, dtype])
    return os.path.join(out_dir,
                        ".onnx2kiln-" + hashlib.sha1(ident.encode()).hexdigest()[:16] + ".json")


def read_stamp(path):
    """The stamp's contents (a dict), or None when missing or unreadable."""
    try:
        with open(path) as f:
            stamp = json.load(f)
        return stamp if isinstance(stamp, dict) else None
    except (OSError, ValueError):
        return None


def converter_sha1():
    """The hash of the converter itself: every .py file of this package, by relative path."""
    h = hashlib.sha1()
    files = []
    for root, dirs, names in os.walk(PACKAGE_DIR):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files += [os.path.join(root, n) for n in names if n.endswith(".py")]
    for path in sorted(files):
        h.update(os.path.relpath(path, PACKAGE_DIR).encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def stamp_key(model_path, name, layout, dtype, stamp=None):
    """The key of this conversion. The model's content hash is reused from `stamp` when the model
    file's size and modification time are those it recorded (as make and ccache's direct mode do):
    an unchanged 100 MB model is not read again."""
    model_sha1 = None
    try:
        if stamp and stamp.get("model_facts") == file_facts(model_path):
            model_sha1 = stamp["key"]["model_sha1"]
    except (TypeError, KeyError, AttributeError):
        pass
    if model_sha1 is None:
        h = hashlib.sha1()
        with open(model_path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        model_sha1 = h.hexdigest()
    return {"model_sha1": model_sha1, "name": name, "layout": layout, "dtype": dtype,
            "converter_sha1": converter_sha1()}


def file_facts(path):
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


def up_to_date(stamp, key):
    """The stamp's printed summary when the stamp matches and its outputs are untouched."""
    try:
        if not stamp or stamp.get("key") != key:
            return None
        for path, facts in stamp.get("outputs", {}).items():
            if file_facts(path) != facts:
                return None
        return stamp.get("summary", [])
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def write_stamp(path, key, model_path, outputs, summary):
    """Written to a temporary name and renamed: a reader never sees half a stamp."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"key": key, "model_facts": file_facts(model_path),
                   "outputs": {p: file_facts(p) for p in outputs}, "summary": summary}, f, indent=1)
    os.replace(tmp, path)
