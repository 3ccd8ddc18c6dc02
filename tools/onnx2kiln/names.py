"""Names: ONNX tensor, node and dim names sanitized to what a kiln graph file accepts."""
import re


def sanitize(name, allow_dot=True, fallback="t"):
    """`name` with every character outside [A-Za-z0-9_] (and `.` when allowed) replaced by `_`,
    runs of `_` collapsed and leading/trailing separators dropped; it starts with a letter or `_`
    (`fallback` is prefixed otherwise, and used alone for an empty result)."""
    pat = r"[^A-Za-z0-9_.]" if allow_dot else r"[^A-Za-z0-9_]"
    s = re.sub(pat, "_", name or "")
    s = re.sub(r"_+", "_", s).strip("_.")
    if not s:
        s = fallback
    if not (s[0].isalpha() or s[0] == "_"):
        s = fallback + "_" + s
    return s


def sanitize_symbol(name):
    """A kiln dim symbol: an identifier."""
    return sanitize(name, allow_dot=False, fallback="d")


class Names:
    """Unique sanitized names: a clash gets `_1`, `_2`, ... in the order names are asked for (so
    the order of get() calls is part of the output)."""

    def __init__(self, allow_dot=True):
        self.used = set()
        self.allow_dot = allow_dot

    def get(self, raw, fallback="t"):
        base = sanitize(raw, self.allow_dot, fallback)
        s, i = base, 1
        while s in self.used:
            s = f"{base}_{i}"
            i += 1
        self.used.add(s)
        return s
