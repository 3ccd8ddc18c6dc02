#!/usr/bin/env python3
"""A/B of two kiln builds on the same graphs, same GPU, same run: did a change move any speed?

  bench/bench_ab.py --a OLD/kiln --b NEW/kiln [--models resnet50,encoder,unet_down] [--out DIR]

The graphs: the memory-bound cases of bench/bench_memory.py, the conv layers of bench/bench_conv.py
(conv + bias + relu, f16 NHWC, batch 32 and 128), and whole models exported by
tools/export_torchvision.py (needs torch) and imported once with --b (f16 NHWC), at N = 1, 32, 128.
Each graph is timed by `kiln bench --json` (the whole graph, do_bench's budget, L2 flushed; models
with --cuda-graph) in the order A B B A, each binary with its own warm kernel cache, and the table
gives each binary's median, B/A time and whether the change stays within --tolerance (default 3 %).
Writes DIR/bench_ab.json. Exit 1 when a case is outside the tolerance or a run fails.
"""
import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def memory_graphs():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_memory  # no torch at import
    return {f"memory {k}": (c["graph"], {}) for k, c in bench_memory.make_cases().items()}


def conv_graphs(batches):
    """bench/bench_conv.py's LAYERS and conv_graph_json, read without importing torch."""
    tree = ast.parse(open(os.path.join(ROOT, "bench", "bench_conv.py")).read())
    keep = [n for n in tree.body
            if (isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "LAYERS" for t in n.targets))
            or (isinstance(n, ast.FunctionDef) and n.name == "conv_graph_json")]
    ns = {}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "bench_conv.py", "exec"), ns)
    return {f"conv {name} n{n}": (ns["conv_graph_json"](n, C, K, H, R, s, p), {})
            for name, C, K, H, R, s, p in ns["LAYERS"] for n in batches}


def model_graphs(models, kiln_b, work):
    if not models:
        return {}
    mdir = os.path.join(work, "models")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torchvision.py"),
                        "--out", mdir, "--models", ",".join(models)], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"export failed: {(r.stderr or r.stdout)[-2000:]}")
        return {}
    out = {}
    for m in models:
        kdir = os.path.join(mdir, "kiln_" + m)
        r = subprocess.run([kiln_b, "import", os.path.join(mdir, m + ".onnx"), "--out", kdir,
                            "--dtype", "f16", "--layout", "NHWC"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"import {m} failed: {(r.stderr or r.stdout)[-2000:]}")
            continue
        for n in (1, 32, 128):
            out[f"{m} N={n}"] = (os.path.join(kdir, m + ".json"), {"N": n})
    return out


def bench_once(kiln, graph_path, shape, cache, json_path, cuda_graph, timeout):
    cmd = [kiln, "bench", graph_path, "--json", json_path]
    for k, v in shape.items():
        cmd += ["--shape", f"{k}={v}"]
    if cuda_graph:
        cmd.append("--cuda-graph")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_")}
    env["KILN_CACHE_DIR"] = cache
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-500:]
    return json.load(open(json_path))["total_ms"], ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="the old kiln CLI")
    ap.add_argument("--b", required=True, help="the new kiln CLI")
    ap.add_argument("--models", default="resnet50,encoder,unet_down")
    ap.add_argument("--conv-batches", default="32,128")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    a = ap.parse_args()
    a.a, a.b = os.path.abspath(a.a), os.path.abspath(a.b)
    work = tempfile.mkdtemp(prefix="kiln-ab-")
    gdir = os.path.join(work, "graphs")
    os.makedirs(gdir)
    cases = {**memory_graphs(), **conv_graphs([int(b) for b in a.conv_batches.split(",")])}
    paths = {}
    for name, (g, shape) in cases.items():
        p = os.path.join(gdir, name.replace(" ", "_").replace(">", "").replace("/", "_") + ".json")
        json.dump(g, open(p, "w"))
        paths[name] = (p, shape, False)
    for name, (p, shape) in model_graphs([m for m in a.models.split(",") if m], a.b, work).items():
        paths[name] = (p, shape, True)
    bins = {"A": a.a, "B": a.b}
    caches = {k: os.path.join(work, "cache_" + k) for k in bins}
    rows, bad = [], 0
    for name, (p, shape, cg) in paths.items():
        times = {"A": [], "B": []}
        err = ""
        for i, side in enumerate("ABBA"):
            ms, e = bench_once(bins[side], p, shape, caches[side], os.path.join(work, f"r{i}.json"),
                               cg, a.timeout)
            if ms is None:
                err = f"{side}: {e}"
                break
            times[side].append(ms)
        if err:
            rows.append({"case": name, "error": err})
            bad += 1
            print(f"{name:<40} error {err}", flush=True)
            continue
        ma, mb = statistics.median(times["A"]), statistics.median(times["B"])
        ok = mb <= ma * (1 + a.tolerance)
        bad += not ok
        rows.append({"case": name, "a_ms": ma, "b_ms": mb, "b_over_a": mb / ma, "ok": ok,
                     "a_runs": times["A"], "b_runs": times["B"]})
        print(f"{name:<40} A {ma:9.4f} ms  B {mb:9.4f} ms  B/A {mb / ma:6.3f} {'ok' if ok else 'SLOWER'}",
              flush=True)
    os.makedirs(a.out, exist_ok=True)
    json.dump({"a": bins["A"], "b": bins["B"], "tolerance": a.tolerance, "rows": rows},
              open(os.path.join(a.out, "bench_ab.json"), "w"), indent=1)
    print(f"\n| case | A ms | B ms | B/A |\n| --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | error | {r['error'][:60]} | |")
        else:
            print(f"| {r['case']} | {r['a_ms']:.4f} | {r['b_ms']:.4f} | {r['b_over_a']:.3f} |")
    print(f"{len(rows) - bad} within {a.tolerance:.0%}, {bad} outside or failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
