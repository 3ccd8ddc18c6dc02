#!/usr/bin/env python3
"""Snapshot of every generated kernel source, for refactors that must not change codegen.

  tools/codegen_snapshot.py --kiln build/kiln --out DIR     # write DIR/kernels/... and DIR/MANIFEST
  tools/codegen_snapshot.py --compare OLD_DIR NEW_DIR       # exit 1 and list what differs

The corpus: the example graphs (as written, in f32/f16/bf16, and with their symbols bound to
static sizes, which selects the shape-specialized rules), the memory-bound and conv bench cases,
and every graph the ONNX import tests convert (tests/python, run with pytest into DIR/onnx).
Each graph is emitted with `kiln emit --candidates` (every autotune candidate of each conv/matmul
too) for sm_80 and sm_90 (sm_90a kernels there), under the default rules and under each
KILN_SCHEDULE setting that selects a live alternative. A variant the binary refuses (a schedule
key it does not have) is recorded as refused, so a comparison lists it instead of failing.
"""
import argparse
import ast
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHES = ["sm_80", "sm_90"]
# KILN_SCHEDULE settings that select a kernel other than the rules', each emitted for the graphs
# with one of the ops it concerns (None: every graph but the ONNX tests').
NORM = {"groupnorm", "instancenorm"}
CONTRACT = {"conv2d", "matmul"}
SCHEDULES = [
    ("", None),
    ("channelnorm.algo=split", NORM), ("channelnorm.algo=cluster", NORM),
    ("channelnorm.algo=pergroup", NORM), ("channelnorm.onewave=1", NORM),
    ("channelnorm.onewave=2", NORM), ("channelnorm.hints=2", NORM),
    ("contraction.im2col=2", CONTRACT), ("contraction.rowfold=2", CONTRACT),
    ("contraction.prefetch=2", CONTRACT), ("contraction.tmastore=2", CONTRACT),
    ("contraction.staged=1", CONTRACT), ("window.vec=2", {"maxpool2d", "avgpool2d",
                                                        "global_avgpool", "global_maxpool"}),
    ("attention.fused=2", {"softmax"}), ("stream.hints=1", None),
]
FLOAT_DTYPES = ("f32", "f16", "bf16")


def retype(graph, dtype):
    """The graph with every floating tensor (and cast target) in `dtype`; None if it reads a file."""
    g = copy.deepcopy(graph)
    for section in ("inputs", "constants"):
        for t in g.get(section, {}).values():
            if "file" in t or "data" in t:
                return None
            if t.get("dtype") in FLOAT_DTYPES:
                t["dtype"] = dtype
    for n in g.get("nodes", []):
        if n.get("to") in FLOAT_DTYPES:
            n["to"] = dtype
    g["name"] = f"{g.get('name', 'g')}_{dtype}"
    return g


def bind(graph, value):
    """The graph with every symbolic input dim bound to `value` (a static graph)."""
    g = copy.deepcopy(graph)
    bound = False
    for t in g.get("inputs", {}).values():
        shape = t.get("shape", [])
        for i, d in enumerate(shape):
            if isinstance(d, str):
                shape[i] = value
                bound = True
    g["name"] = f"{g.get('name', 'g')}_static{value}"
    return g if bound else None


def bench_conv_cases():
    """bench/bench_conv.py's LAYERS and conv_graph_json, read without importing torch."""
    src = open(os.path.join(ROOT, "bench", "bench_conv.py")).read()
    tree = ast.parse(src)
    keep = [n for n in tree.body
            if (isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "LAYERS" for t in n.targets))
            or (isinstance(n, ast.FunctionDef) and n.name == "conv_graph_json")]
    ns = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "bench_conv.py", "exec"), ns)
    out = {}
    for name, C, K, H, R, s, p in ns["LAYERS"]:
        for n in (1, 32):
            g = ns["conv_graph_json"](n, C, K, H, R, s, p)
            out[f"conv_{name.replace(' ', '_').replace('>', '')}_n{n}"] = g
    return out


def memory_cases():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_memory  # noqa: E402 (no torch at import)
    return {f"memory_{k}": c["graph"] for k, c in bench_memory.make_cases().items()}


def onnx_graphs(work, kiln):
    """Runs the ONNX import tests with their temporary files kept; returns the graphs they wrote."""
    base = os.path.join(work, "onnx")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", KILN_CLI=kiln)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"--basetemp={base}", os.path.join(ROOT, "tests", "python", "test_onnx_import.py")],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    print(f"onnx tests: exit {r.returncode}: {r.stdout.strip().splitlines()[-1] if r.stdout else ''}")
    found = {}
    for d, _, files in os.walk(base):
        for f in sorted(files):
            if not f.endswith(".json"):
                continue
            path = os.path.join(d, f)
            try:
                if json.load(open(path)).get("kiln") != 1:
                    continue
            except (ValueError, UnicodeDecodeError):
                continue
            rel = os.path.relpath(path, base).replace(os.sep, "_")
            found["onnx_" + rel[:-5]] = path
    return found


def corpus(work, kiln):
    """name -> graph file path."""
    gdir = os.path.join(work, "graphs")
    os.makedirs(gdir, exist_ok=True)
    graphs = {}

    def put(name, g):
        path = os.path.join(gdir, name + ".json")
        json.dump(g, open(path, "w"), indent=1)
        graphs[name] = path

    ex = os.path.join(ROOT, "examples", "graphs")
    for f in sorted(os.listdir(ex)):
        if not f.endswith(".json"):
            continue
        name = f[:-5]
        g = json.load(open(os.path.join(ex, f)))
        graphs[f"example_{name}"] = os.path.join(ex, f)
        for dt in FLOAT_DTYPES:
            r = retype(g, dt)
            if r is not None:
                put(f"example_{name}_{dt}", r)
        for v in (1, 16, 32):
            b = bind(g, v)
            if b is not None:
                put(f"example_{name}_static{v}", b)
    for name, g in {**memory_cases(), **bench_conv_cases()}.items():
        put(name, g)
        for dt in FLOAT_DTYPES:
            r = retype(g, dt)
            if r is not None and dt != "f16":
                put(f"{name}_{dt}", r)
    graphs.update(onnx_graphs(work, kiln))
    return graphs


def graph_ops(path):
    try:
        return {n.get("op") for n in json.load(open(path)).get("nodes", [])}
    except (OSError, ValueError):
        return set()


def emit_all(kiln, work):
    kdir = os.path.join(work, "kernels")
    manifest = {}
    graphs = corpus(work, kiln)
    for name, path in sorted(graphs.items()):
        ops = graph_ops(path)
        for arch in ARCHES:
            for sched, concerns in SCHEDULES:
                if sched and (name.startswith("onnx_") or (concerns and not ops & concerns)):
                    continue
                tag = f"{name}/{arch}" + (f"/{sched}" if sched else "")
                out = os.path.join(kdir, name, arch, sched or "rules")
                env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_")}
                env["KILN_CACHE_DIR"] = os.path.join(work, "cache")
                if sched:
                    env["KILN_SCHEDULE"] = sched
                r = subprocess.run([kiln, "emit", path, "--out", out, "--arch", arch, "--candidates"],
                                   capture_output=True, text=True, env=env)
                if r.returncode != 0:
                    msg = (r.stderr or r.stdout).strip().splitlines()
                    manifest[tag + "/<refused>"] = msg[-1] if msg else f"exit {r.returncode}"
                    shutil.rmtree(out, ignore_errors=True)
                    continue
                for f in sorted(os.listdir(out)):
                    data = open(os.path.join(out, f), "rb").read()
                    manifest[f"{tag}/{f}"] = hashlib.sha256(data).hexdigest()
    with open(os.path.join(work, "MANIFEST"), "w") as m:
        for k in sorted(manifest):
            m.write(f"{k}\t{manifest[k]}\n")
    kernels = sum(1 for k in manifest if not k.endswith("<refused>"))
    print(f"{len(graphs)} graphs, {kernels} kernel sources, "
          f"{len(manifest) - kernels} refused variants -> {work}/MANIFEST")


def read_manifest(d):
    out = {}
    for line in open(os.path.join(d, "MANIFEST")):
        k, v = line.rstrip("\n").split("\t", 1)
        out[k] = v
    return out


def source_path(d, key):
    """The kernel file of manifest key `graph/arch[/schedule]/file` in snapshot `d`."""
    parts = key.split("/")
    name, arch, f = parts[0], parts[1], parts[-1]
    sched = "/".join(parts[2:-1]) or "rules"
    return os.path.join(d, "kernels", name, arch, sched, f)


def without_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(l for l in (re.sub(r"//.*", "", x).rstrip() for x in text.split("\n")) if l)


def compare(a_dir, b_dir, replace=None):
    """`replace` (OLD_FILE, NEW_FILE): the first snapshot's sources read with OLD_FILE's text (an
    embedded device file) replaced by NEW_FILE's, so an intended change of that one file is shown
    to be the only difference."""
    a, b = read_manifest(a_dir), read_manifest(b_dir)
    if replace:
        old_text, new_text = (open(f).read() for f in replace)
        for k in set(a) & set(b):
            if a[k] != b[k] and not k.endswith("<refused>"):
                src = open(source_path(a_dir, k)).read().replace(old_text, new_text)
                if hashlib.sha256(src.encode()).hexdigest() == b[k]:
                    a[k] = b[k]
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    comments = [k for k in differ
                if without_comments(open(source_path(a_dir, k)).read())
                == without_comments(open(source_path(b_dir, k)).read())]
    changed = [k for k in differ if k not in set(comments)]
    same = len(set(a) & set(b)) - len(differ)
    if comments:
        print(f"differing only in comments: {len(comments)}")
    for title, keys in (("only in " + a_dir, only_a), ("only in " + b_dir, only_b),
                        ("different", changed)):
        if keys:
            print(f"{title}: {len(keys)}")
            for k in keys[:200]:
                print(f"  {k}" + (f"  ({a.get(k) if k in a else b.get(k)})" if "<refused>" in k else ""))
    print(f"{same} identical, {len(comments)} differing only in comments, {len(changed)} different, "
          f"{len(only_a)} only in the first, {len(only_b)} only in the second")
    return 0 if not (only_a or only_b or changed) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", help="the kiln CLI to emit with")
    ap.add_argument("--out", help="snapshot directory (emptied first)")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--replace", nargs=2, metavar=("OLD_FILE", "NEW_FILE"),
                    help="with --compare: read OLD's sources with this file's text replaced")
    a = ap.parse_args()
    if a.compare:
        return compare(*a.compare, replace=a.replace)
    if not (a.kiln and a.out):
        ap.error("--kiln and --out, or --compare OLD NEW")
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    emit_all(os.path.abspath(a.kiln), os.path.abspath(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
