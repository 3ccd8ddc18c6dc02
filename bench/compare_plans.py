#!/usr/bin/env python3
"""The kiln graph torch.compile(backend="kiln") builds for a zoo model against the model's ONNX
import, planned for sm_90 on this machine (no GPU): kernels and planned bytes of each, by kernel
family. The backend's acceptance is the import's speed with the same kernels; a difference here
(a copy, an unfused attention, a SIMT conv) is one to fix before any device time.

    python3 bench/compare_plans.py --models unet_small,maxvit_t [--batch 32] [--families 8]

The backend graph is traced at --batch in f16 (channels-last for images) with kiln's run mocked
out; the import is `kiln import --dtype f16 --layout NHWC` of bench_zoo's export. Symbols are
evaluated at N = --batch, S = --seq.
"""
import argparse
import collections
import copy
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def planned(kiln, path, shapes):
    """(kernels, bytes, {family: (count, bytes)}) of `kiln plan path`."""
    out = subprocess.run([kiln, "plan", path, "--arch", "sm_90"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"kiln plan {path}: {out.stderr.strip()[-300:]}")
    fams = collections.defaultdict(lambda: [0, 0])
    for line in out.stdout.splitlines():
        m = re.match(r"\s+group\s+\d+\s+(\S+)\s+grid=.*bytes=(\S+)", line)
        if not m:
            continue
        expr = m.group(2).replace("/", "//")  # kiln's Dim division is floor division
        for sym, v in shapes.items():
            expr = re.sub(rf"\b{sym}\b", str(v), expr)
        fam = re.sub(r"_g\d+$", "", m.group(1))
        fams[fam][0] += 1
        fams[fam][1] += int(eval(expr, {"__builtins__": {}}))  # the plan's integer arithmetic
    return sum(c for c, _ in fams.values()), sum(b for _, b in fams.values()), dict(fams)


def backend_graphs(torch, bz, e, args, batch):
    import kiln.dynamo as kd
    import kiln.dynamo.part as kp
    m = bz.build_model(torch, e, args.seed, args).half()
    xs = [x.half() if x.is_floating_point() else x
          for x in bz.make_inputs(torch, e, args, batch, torch.Generator().manual_seed(1))]
    if xs[0].dim() == 4:
        m = m.to(memory_format=torch.channels_last)
        xs = [x.contiguous(memory_format=torch.channels_last) for x in xs]
    kd.reset()
    torch._dynamo.reset()
    reference = kp.KilnPart._reference
    kp.KilnPart._reference = lambda self, xs, b: [torch.zeros(1)] * len(self.graph.outputs)
    try:
        with torch.no_grad():
            try:
                torch.compile(m, backend="kiln")(*xs)
            except RuntimeError:
                pass  # the eager code after a mocked kiln part: its graphs are built already
    finally:
        kp.KilnPart._reference = reference
    eager = sum(n["where"] == "eager" for r in kd.partition_report() for n in r["nodes"])
    return kd.kiln_graphs(), eager


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--families", type=int, default=6, help="kernel families shown per model")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    a = ap.parse_args()
    import torch
    import bench_zoo as bz
    from bench_resnet50 import kiln_import
    args = bz.parse_args([])
    print(f"{'model':26} {'backend kernels':>15} {'MB':>8} {'import kernels':>14} {'MB':>8} "
          f"{'eager ops':>9}")
    for name in a.models.split(","):
        e = bz.BY_NAME[name]
        with tempfile.TemporaryDirectory() as d:
            graphs, eager = backend_graphs(torch, bz, e, args, a.batch)
            shapes = {"N": a.batch, "S": args.seq}
            if len(graphs) != 1:
                print(f"{name:26} {len(graphs)} kiln graphs: not one plan to compare")
                continue
            bpath = os.path.join(d, "backend.json")
            graphs[0].save(bpath)
            onnx = os.path.join(d, "m.onnx")
            bz.export_model(torch, e, copy.deepcopy(bz.build_model(torch, e, args.seed, args)),
                            onnx, args)
            rec, ipath = kiln_import(a.kiln, onnx, d, "f16", "NHWC", os.path.join(d, "kc"), 600,
                                     name="m")
            if ipath is None:
                print(f"{name:26} kiln import failed: {rec.get('error')}")
                continue
            bk, bb, bf = planned(a.kiln, bpath, shapes)
            ik, ib, inf = planned(a.kiln, ipath, shapes)
        print(f"{name:26} {bk:15d} {bb / 1e6:8.0f} {ik:14d} {ib / 1e6:8.0f} {eager:9d}")
        for tag, fams in (("backend", bf), ("import", inf)):
            top = sorted(fams.items(), key=lambda kv: -kv[1][1])[:a.families]
            print(f"    {tag}: " + ", ".join(f"{f} x{c} {b / 1e6:.0f} MB" for f, (c, b) in top))


if __name__ == "__main__":
    main()
