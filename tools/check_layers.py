#!/usr/bin/env python3
"""Checks that every #include in kiln's layered sources points down the layer order of
tools/layers.txt, and names the include that breaks it.

  tools/check_layers.py [SOURCE_ROOT]     # exit 0, or 1 with one line per wrong-way include

The build enforces the same rule (each layer compiles against a view of what it may include);
this check also covers headers that no source of their own layer includes, and says which rule
an include breaks instead of "file not found".
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def read_layers(root):
    layers = []  # (name, kind, dirs, headers)
    for line in open(os.path.join(root, "tools", "layers.txt")):
        if not re.match(r"[a-z]", line):
            continue
        head, _, hdrs = line.partition("|")
        name, kind, *dirs = head.split()
        layers.append((name, kind, dirs, hdrs.split()))
    return layers


def allowed_sets(layers):
    """layer name -> (allowed directories, allowed public headers)."""
    out, dirs, hdrs, all_hdrs = {}, [], [], []
    for name, kind, ldirs, lhdrs in layers:
        all_hdrs += lhdrs
        if kind == "client":
            out[name] = (list(ldirs), None)  # None: every public header
        else:
            dirs += ldirs
            hdrs += lhdrs
            out[name] = (list(dirs), list(hdrs))
    return out


def owner(path, layers):
    """The layer a source path belongs to (longest directory match), or None."""
    best = None
    for name, kind, dirs, hdrs in layers:
        for d in dirs:
            if path == d or path.startswith(d + "/"):
                if best is None or len(d) > len(best[1]):
                    best = (name, d)
        if path.startswith("include/kiln/") and os.path.basename(path) in hdrs:
            best = (name, path)
    return best[0] if best else None


def check(root):
    layers = read_layers(root)
    allowed = allowed_sets(layers)
    internal_dirs = [d for _, _, dirs, _ in layers for d in dirs]
    bad = []
    scanned = 0
    for top in ["include/kiln"] + internal_dirs:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".hpp", ".h", ".cuh")):
                    continue
                rel = os.path.relpath(os.path.join(d, f), root)
                layer = owner(rel, layers)
                if layer is None:
                    continue
                scanned += 1
                dirs, hdrs = allowed[layer]
                for no, line in enumerate(open(os.path.join(d, f), errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc.startswith("kiln/"):
                        if hdrs is not None and inc[5:] not in hdrs:
                            where = owner("include/" + inc, layers) or "no layer"
                            bad.append(f"{rel}:{no}: includes {inc} (layer {where}): layer "
                                       f"{layer} may include only kiln/{{{', '.join(hdrs)}}}")
                        continue
                    target = owner(inc, layers)
                    if target is None and not any(inc.startswith(x + "/") for x in
                                                   ("tests", "bench", "include")):
                        continue  # a system or third-party header
                    if not any(inc == x or inc.startswith(x + "/") for x in dirs):
                        bad.append(f"{rel}:{no}: includes {inc} (layer {target or 'none'}): "
                                   f"layer {layer} may include only {', '.join(dirs)}"
                                   + (" and the public headers" if hdrs is None else ""))
    return bad, scanned


def main():
    args = sys.argv[1:]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, scanned = check(root)
    for b in bad:
        print(b)
    print(f"check_layers: {scanned} files, {len(bad)} wrong-way include{'s' * (len(bad) != 1)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
