#!/usr/bin/env python3
"""torch.compile(model, backend="kiln") against the same kiln graph through the C++ path, on the
GPU (the issue's acceptance: within 5 % at batch 32, <= 20 us of host time per call over the C++
path). For each model: the backend's call (CUDA-event time per call over --iters calls), the kiln
graph it built called directly (kiln.CompiledGraph.run_torch), and `kiln bench` on that graph saved
as a file (the C++ path, its own timing). Host overhead: the wall time of one call of a tiny graph
through each Python path minus the direct native run (GPU idle, so the host side is what shows).

    python3 bench/bench_torch_backend.py [--models resnet50,mobilenet_v2] [--batch 32]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def cuda_ms(torch, fn, iters):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / iters


def host_us(torch, fn, iters=2000):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    dt = time.perf_counter() - t
    torch.cuda.synchronize()
    return dt / iters * 1e6


def cpp_ms(graph, shapes, kiln_cli):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.json")
        graph.save(path)
        args = [kiln_cli, "bench", path] + [a for k, v in shapes.items() for a in ("--shape", f"{k}={v}")]
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"kiln bench exit {r.returncode}: {r.stderr.strip()[-600:]}")
            return float("nan"), r.stdout
        out = r.stdout
    m = re.search(r"^whole graph \(median run\)\s+([0-9.]+)", out, re.M)
    return float(m.group(1)) if m else float("nan"), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,vit_b_16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    a = ap.parse_args()
    import torch
    import bench_zoo as bz
    import kiln
    import kiln.dynamo as kd
    args = bz.parse_args([])
    print(f"{'model':24} {'backend ms':>11} {'direct ms':>10} {'C++ ms':>8} {'eager ops':>9}")
    for name in a.models.split(","):
        e = bz.BY_NAME[name]
        m16 = bz.model16(torch, e, bz.build_model(torch, e, args.seed))
        xs = bz.to_device(torch, bz.make_inputs(torch, e, args, a.batch, torch.Generator()), True)
        torch._dynamo.reset()
        kd.reset()
        kd.clear_reports()
        with torch.no_grad():
            f = torch.compile(m16, backend="kiln")
            backend = cuda_ms(torch, lambda: f(*xs), a.iters)
        graphs = kd.kiln_graphs()
        eager = sum(n["where"] == "eager" for r in kd.partition_report() for n in r["nodes"])
        direct = cpp = float("nan")
        if len(graphs) == 1:
            g = graphs[0]
            cg = kiln.Engine().compile(g)
            given = dict(zip([t.name for t in g.inputs], xs))
            direct = cuda_ms(torch, lambda: cg.run_torch(given), a.iters)
            shapes = {s: int(v) for s, v in cg.native.bind({k: list(v.shape) for k, v in given.items()}, {}).items()}
            cpp, _ = cpp_ms(g, shapes, a.kiln)
        print(f"{name:24} {backend:11.3f} {direct:10.3f} {cpp:8.3f} {eager:9d}")
    # host time per call on a tiny graph (GPU idle)
    tiny = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).cuda().half().eval()
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    torch._dynamo.reset()
    kd.reset()
    with torch.no_grad():
        f = torch.compile(tiny, backend="kiln")
        t_backend = host_us(torch, lambda: f(x))
    g = kd.kiln_graphs()[0]
    cg = kiln.Engine().compile(g)
    given = {g.inputs[0].name: x}
    t_direct = host_us(torch, lambda: cg.run_torch(given))
    out = cg.run_torch(given)
    stream = torch.cuda.current_stream().cuda_stream
    ws = torch.empty(max(cg.native.workspace_size({}), 1), dtype=torch.uint8, device="cuda")
    ins = {g.inputs[0].name: (x.data_ptr(), list(x.shape))}
    outs = {g.outputs[0].name: (out[0].data_ptr(), list(out[0].shape))}
    t_native = host_us(torch, lambda: cg.native.run(ins, outs, stream, ws.data_ptr()))
    print(f"host per call (tiny graph): backend {t_backend:.1f} us, CompiledGraph {t_direct:.1f} us, "
          f"native run {t_native:.1f} us: backend adds {t_backend - t_native:.1f} us")


if __name__ == "__main__":
    main()
