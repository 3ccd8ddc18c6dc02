#!/usr/bin/env python3
"""torch.compile(model, backend="kiln") against the same kiln graph through the C++ path, on the
GPU (the issue's acceptance: within 5 % at batch 32, <= 20 us of host time per call over the C++
path). For each model: the backend's call (the median CUDA-event time of --iters calls, L2
flushed before each, as `kiln bench` times), the kiln graph it built called directly
(kiln.CompiledGraph.run_torch), and `kiln bench` on that graph saved as a file (the C++ path,
its own timing). Host overhead: the wall time of one call of a tiny graph
through each Python path minus the direct native run, in a fresh process (host_table: interleaved
rounds, the least of each, GC off), with its parts. The "import ms" column is the model through
ONNX (`kiln import --dtype f16 --layout NHWC`, `kiln bench`): the acceptance's comparison.

    python3 bench/bench_torch_backend.py [--models resnet50,mobilenet_v2] [--batch 32]
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def cuda_ms(torch, fn, iters, hide_host=False):
    """The median over `iters` calls of each call's CUDA-event time, the L2 flushed before each
    (a 256 MB write outside the timed window), as `kiln bench` times the import: host time
    before a call's first launch shows as GPU idle inside its window. With `hide_host`, the GPU
    also sleeps 1 ms before each window, so that the window holds the GPU's work alone."""
    for _ in range(5):
        fn()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(iters)]
    torch.cuda.synchronize()
    for a, b in pairs:
        flush.zero_()
        if hide_host:
            torch.cuda._sleep(SLEEP_CYCLES)
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) for a, b in pairs)
    return times[len(times) // 2]


SLEEP_CYCLES = 2_000_000  # about 1 ms at the H200's clock: longer than any call's host time


def busy_host_us(torch, fn, iters=30):
    """The least wall time of one call of `fn` while the GPU is busy with ~1 ms of work queued
    ahead: the call never waits for the GPU, so this is its host time alone."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(iters):
        torch.cuda._sleep(SLEEP_CYCLES)
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        torch.cuda.synchronize()
    return best * 1e6


def latency_row(torch, kiln, kd, bz, args, a, name):
    """Where a model's call window goes (--latency): the host time of one call (GPU busy ahead)
    through the backend, dynamo with a backend that does nothing (its guards and frame), the
    same with torch's guard filter, and the backend's graph called directly; then the call
    windows as the table times them, and with the host hidden (the GPU's work alone)."""
    e = bz.BY_NAME[name]
    m16 = bz.model16(torch, e, bz.build_model(torch, e, args.seed))
    xs = bz.to_device(torch, bz.make_inputs(torch, e, args, a.batch, torch.Generator()), True)
    torch._dynamo.reset()
    kd.reset()
    all_filter = compile_options(torch, "all")
    with torch.no_grad():
        f = torch.compile(m16, backend="kiln")
        ys = f(*xs)
        fa = torch.compile(copy.deepcopy(m16), backend="kiln", options=all_filter)
        fa(*xs)
        nothing = torch.compile(copy.deepcopy(m16), backend=lambda gm, ex: (lambda *z: ys))
        nothing(*xs)
        res = {"backend": busy_host_us(torch, lambda: f(*xs)),
               "backend, guard filter all": busy_host_us(torch, lambda: fa(*xs)),
               "dynamo, backend doing nothing": busy_host_us(torch, lambda: nothing(*xs))}
        g = kd.kiln_graphs()[0]
        cg = kiln.Engine().compile(g)
        given = dict(zip([t.name for t in g.inputs], xs))
        res["direct run_torch"] = busy_host_us(torch, lambda: cg.run_torch(given))
        win = {"backend": cuda_ms(torch, lambda: f(*xs), a.iters),
               "backend, host hidden": cuda_ms(torch, lambda: f(*xs), a.iters, True),
               "backend, guard filter all": cuda_ms(torch, lambda: fa(*xs), a.iters),
               "direct": cuda_ms(torch, lambda: cg.run_torch(given), a.iters),
               "direct, host hidden": cuda_ms(torch, lambda: cg.run_torch(given), a.iters, True)}
    print(f"{name}: {len(kd.kiln_graphs())} kiln graphs, "
          f"{sum(p.numel() for p in m16.parameters()) / 1e6:.1f} M parameters in "
          f"{len(list(m16.parameters()))} tensors, {len(list(m16.modules()))} modules")
    for k, v in res.items():
        print(f"  host per call, {k:32} {v:8.1f} us")
    for k, v in win.items():
        print(f"  call window,   {k:32} {v:8.3f} ms")


def host_table(torch, fns, rounds=15, iters=500):
    """{name: µs per call}: each callable's wall time per call, the least over `rounds` rounds
    that time every callable in turn (interleaved, so a slow phase of the host's clock or
    scheduler hits all of them alike), with the garbage collector off as timeit has it. The GPU
    work of the tiny graph is shorter than a call, so the host side is what shows."""
    import gc
    for fn in fns.values():
        for _ in range(50):
            fn()
    best = dict.fromkeys(fns, float("inf"))
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in fns.items():
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(iters):
                    fn()
                best[name] = min(best[name], time.perf_counter() - t)
    finally:
        gc.enable()
    torch.cuda.synchronize()
    return {k: v / iters * 1e6 for k, v in best.items()}


PLANS = None  # --plans DIR: `kiln plan` of each timed graph is written there


def save_plan(kiln_cli, path, tag):
    if PLANS:
        os.makedirs(PLANS, exist_ok=True)
        r = subprocess.run([kiln_cli, "plan", path], capture_output=True, text=True)
        with open(os.path.join(PLANS, f"{tag}.plan.txt"), "w") as f:
            f.write(r.stdout + r.stderr)


def bench_cli(kiln_cli, path, shapes):
    args = [kiln_cli, "bench", path] + [a for k, v in shapes.items() for a in ("--shape", f"{k}={v}")]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"kiln bench exit {r.returncode}: {r.stderr.strip()[-600:]}")
        return float("nan")
    m = re.search(r"^whole graph \(median run\)\s+([0-9.]+)", r.stdout, re.M)
    return float(m.group(1)) if m else float("nan")


def cpp_ms(graph, shapes, kiln_cli, tag="backend"):
    """`kiln bench` of the backend's own kiln graph, saved as a file."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.json")
        graph.save(path)
        save_plan(kiln_cli, path, tag)
        return bench_cli(kiln_cli, path, shapes)


def import_ms(torch, bz, e, m, batch, kiln_cli, imports=None):
    """The model through ONNX: export, `kiln import --dtype f16 --layout NHWC`, `kiln bench`;
    with `imports` (a bench_zoo --work directory after --stages export,import --keep), the f16
    graph imported there."""
    from bench_resnet50 import kiln_import
    args = bz.parse_args([])
    done = os.path.join(imports, e.name, "kiln_f16", f"{e.name}.json") if imports else ""
    if os.path.isfile(done):
        save_plan(kiln_cli, done, f"{e.name}.import")
        shapes = {"N": batch}
        if bz.shape_flags(done, args.seq):
            shapes["S"] = args.seq
        return bench_cli(kiln_cli, done, shapes)
    with tempfile.TemporaryDirectory() as d:
        onnx = os.path.join(d, "m.onnx")
        try:
            bz.export_model(torch, e, m, onnx, args)
        except RuntimeError as ex:
            print(f"{e.name}: export failed: {str(ex)[:300]}")
            return float("nan")
        rec, graph = kiln_import(kiln_cli, onnx, d, "f16", "NHWC", os.environ.get(
            "KILN_CACHE_DIR", os.path.join(d, "kc")), 600, name="m")
        if graph is None:
            print(f"{e.name}: kiln import failed: {rec.get('error')}")
            return float("nan")
        shapes = {"N": batch}
        if bz.shape_flags(graph, args.seq):
            shapes["S"] = args.seq
        save_plan(kiln_cli, graph, f"{e.name}.import")
        return bench_cli(kiln_cli, graph, shapes)


def host_breakdown(torch, kd, kiln):
    """Host time per call on a tiny graph (Linear + ReLU, f16), whole and in parts, in a process
    that has compiled nothing else: the backend; dynamo with a backend that does nothing; dynamo
    with a backend that only allocates the output and calls kiln's native run (what any Python
    backend over the C++ path does per call); the backend's own callable (WholeGraph.call) and
    CompiledGraph._launch; the native run, the C++ path's entry (the acceptance's baseline)."""
    import kiln.dynamo.backend as kb
    tiny = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).cuda().half().eval()
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    wholes = []
    orig = kb.whole_graph
    kb.whole_graph = lambda fused: wholes.append(orig(fused)) or wholes[-1]
    with torch.no_grad():
        f = torch.compile(tiny, backend="kiln")
        y = f(x)
    kb.whole_graph = orig
    w = wholes[0]
    cg = w.part.compiled
    plan = next(iter(cg._plans.values()))
    template, run = plan.templates[0][0], plan.run.run
    stream = torch.cuda.current_stream().cuda_stream

    def floor(*args):
        out = torch.empty_like(template)
        run([x.data_ptr()], [out.data_ptr()], stream, 0)
        return (out,)

    g = cg.graph
    out = torch.empty_like(template)
    ins = {g.inputs[0].name: (x.data_ptr(), list(x.shape))}
    outs = {g.outputs[0].name: (out.data_ptr(), list(out.shape))}
    args = [x] * (max(w.in_pos) + 1)
    with torch.no_grad():
        nothing = torch.compile(tiny, backend=lambda gm, ex: (lambda *a: (y,)))
        fl = torch.compile(tiny, backend=lambda gm, ex: floor)
        nothing(x), fl(x)
        res = host_table(torch, {
            "backend": lambda: f(x),
            "dynamo, a backend doing nothing": lambda: nothing(x),
            "dynamo + allocation + native run": lambda: fl(x),
            "WholeGraph.call": lambda: w.call(*args),
            "CompiledGraph._launch": lambda: cg._launch([x], w.part.device),
            "native run": lambda: cg.native.run(ins, outs, stream, 0),
            "torch.empty_like (CUDA)": lambda: torch.empty_like(template),
            "eager module": lambda: tiny(x)})
    for k, v in res.items():
        print(f"host per call, {k:34} {v:7.1f} us")
    print(f"backend adds {res['backend'] - res['native run']:.1f} us over the native run "
          f"(the C++ path's entry); a backend that only allocates and runs adds "
          f"{res['dynamo + allocation + native run'] - res['native run']:.1f} us; dynamo "
          f"itself takes {res['dynamo, a backend doing nothing']:.1f} us")


def compile_options(torch, guard_filter):
    """torch.compile's options: dynamo's guards cost about 0.6 µs per parameter per call (about
    200 µs for MobileNetV3's 312 tensors), which torch's own guard filters skip."""
    fn = {"none": None, "inbuilt": "skip_guard_on_inbuilt_nn_modules_unsafe",
          "all": "skip_guard_on_all_nn_modules_unsafe"}[guard_filter]
    return {"guard_filter_fn": getattr(torch.compiler, fn)} if fn else {}


def model_row(torch, kiln, kd, bz, args, a, name):
    """One model's row: the backend, its kiln graph called directly and through `kiln bench`,
    the ONNX import through `kiln bench`, and the backend / import ratio."""
    e = bz.BY_NAME[name]
    m = bz.build_model(torch, e, args.seed)
    m16 = bz.model16(torch, e, copy.deepcopy(m))
    xs = bz.to_device(torch, bz.make_inputs(torch, e, args, a.batch, torch.Generator()), True)
    torch._dynamo.reset()
    kd.reset()
    kd.clear_reports()
    with torch.no_grad():
        opts = compile_options(torch, a.guard_filter)
        if a.cuda_graphs:
            opts["cuda_graphs"] = True
        f = torch.compile(m16, backend="kiln", options=opts)
        backend = cuda_ms(torch, lambda: f(*xs), a.iters)
    graphs = kd.kiln_graphs()
    eager = sum(n["where"] == "eager" for r in kd.partition_report() for n in r["nodes"])
    direct = cpp = float("nan")
    if len(graphs) == 1 and len(graphs[0].inputs) == len(xs):
        g = graphs[0]
        cg = kiln.Engine().compile(g)
        given = dict(zip([t.name for t in g.inputs], xs))
        direct = cuda_ms(torch, lambda: cg.run_torch(given), a.iters)
        shapes = {s: int(v) for s, v in
                  cg.native.bind({k: list(v.shape) for k, v in given.items()}, {}).items()}
        cpp = cpp_ms(g, shapes, a.kiln, f"{name}.backend")
    imp = float("nan") if a.no_import else import_ms(torch, bz, e, m.cpu().eval(), a.batch,
                                                    a.kiln, a.imports)
    return (f"{name:24} {backend:11.3f} {direct:10.3f} {cpp:8.3f} {imp:10.3f} "
            f"{backend / imp:14.3f} {eager:9d}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,vit_b_16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--no-import", action="store_true", help="skip the ONNX / kiln import column")
    ap.add_argument("--imports", default=None,
                    help="a bench_zoo --work directory holding the models' f16 imports "
                         "(bench_zoo.py --stages export,import --keep): no export here")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--guard-filter", choices=["none", "inbuilt", "all"], default="none",
                    help="torch.compile's guard_filter_fn: skip dynamo's guards on the "
                         "parameters of torch.nn's modules (inbuilt) or of all modules (all)")
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="the backend with EngineOptions.cuda_graphs (replays on kiln-owned "
                         "buffers)")
    ap.add_argument("--plans", default=None,
                    help="write `kiln plan` of each model's backend graph and import here")
    ap.add_argument("--latency", action="store_true",
                    help="per model: the host time of one call and its parts, and the call "
                         "window with the host hidden (instead of the table)")
    ap.add_argument("--no-host", action="store_true", help="no host-time breakdown after the models")
    ap.add_argument("--host-only", action="store_true",
                    help="only the host-time breakdown (run in a fresh process after the models)")
    a = ap.parse_args()
    global PLANS
    PLANS = a.plans
    import torch
    import kiln
    import kiln.dynamo as kd
    if a.host_only:
        host_breakdown(torch, kd, kiln)
        return
    import bench_zoo as bz
    args = bz.parse_args([])
    if a.latency:
        for name in [m for m in a.models.split(",") if m]:
            latency_row(torch, kiln, kd, bz, args, a, name)
        return
    print(f"{'model':24} {'backend ms':>11} {'direct ms':>10} {'C++ ms':>8} {'import ms':>10} "
          f"{'backend/import':>14} {'eager ops':>9}")
    for name in [m for m in a.models.split(",") if m]:
        try:
            row = model_row(torch, kiln, kd, bz, args, a, name)
        except Exception as ex:  # one model's failure is a row, the others still run
            row = f"{name:24} failed: {type(ex).__name__}: {str(ex)[:200]}"
        print(row, flush=True)
    sys.stdout.flush()
    # a fresh process: the models compiled above leave dynamo caches and a large heap behind
    if not a.no_host:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--host-only"], check=False)


if __name__ == "__main__":
    main()
