#!/usr/bin/env python3
"""The encoder stack and the UNet down block against PyTorch eager, in one run on the device.

Issue 7 asks that both match PyTorch within tolerance and beat eager PyTorch. For each model of
tools/export_torchvision.py (`encoder`: 4 ViT/BERT blocks, 197 x 768; `unet_down`: two GroupNorm
ResBlocks and a strided conv, 128 -> 256 channels at 64 x 64), built with the same seed:

  1. exported to ONNX with a dynamic batch N, `kiln import --dtype f16 --layout NHWC`;
  2. kiln: `kiln bench GRAPH --shape N=n --json` without and with --cuda-graph (median of CUDA-event
     timed runs, L2 flushed: timed as do_bench times the anchors);
  3. PyTorch f16 (channels_last for the UNet), inference_mode: eager and eager captured in one CUDA
     graph, triton's do_bench median;
  4. correctness: kiln f16 vs torch f16 on the same weights and 4 random inputs (max |a - b| /
     max |b|, target 1e-2).

Prints JSON rows, then a markdown table; writes OUT/bench_models.json.
    python3 bench/bench_models.py [--kiln build/kiln] [--batches 8,32] [--models encoder,unet_down]
"""
import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools"))

from bench_resnet50 import (KilnError, Results, capture_cuda_graph, compare,  # noqa: E402
                            do_bench_ms, export_onnx, kiln_bench, kiln_import, kiln_outputs,
                            rel_err_t)

F16_TARGET = 1e-2


def torch_rows(torch, m16, name, shape, n, args, res):
    """Eager and eager + CUDA graph at batch n."""
    rows = []
    x = torch.randn(n, *shape, device="cuda", dtype=torch.half)
    if len(shape) == 3:
        x = x.to(memory_format=torch.channels_last)
    try:
        with torch.inference_mode():
            y_ref = m16(x)
            ms = do_bench_ms(lambda: m16(x), args)
        rows.append({"model": name, "N": n, "system": "eager", "ms": round(ms, 4)})
        with torch.inference_mode():
            g, y = capture_cuda_graph(torch, m16, x)
            g.replay()
            torch.cuda.synchronize()
            err = rel_err_t(y, y_ref)
            ms = do_bench_ms(lambda: g.replay(), args)
        rows.append({"model": name, "N": n, "system": "eager_graph", "ms": round(ms, 4),
                     "check_vs_eager_rel_err": err})
    except Exception as e:  # noqa: BLE001 - recorded, the other rows still run
        rows.append({"model": name, "N": n, "system": "eager", "error": f"{e.__class__.__name__}: {e}"[:600]})
        res.error(f"{name} eager N={n}", rows[-1])
    torch.cuda.empty_cache()
    return rows


def run_model(torch, name, args, work, kiln, res):
    from export_torchvision import build_models
    torch.manual_seed(args.seed)
    m, shape = build_models([name])[name]
    m = m.eval()
    onnx_path = os.path.join(work, f"{name}.onnx")
    export_onnx(m, shape, onnx_path, args.opset)
    cache_dir = os.path.join(work, "kiln-cache")
    imp, graph = kiln_import(kiln, onnx_path, os.path.join(work, f"kiln_{name}"), "f16", "NHWC",
                             cache_dir, args.timeout)
    if graph is None:
        res.error(f"{name} import", imp)
        return [], None
    m16 = copy.deepcopy(m).half().cuda()
    if len(shape) == 3:
        m16 = m16.to(memory_format=torch.channels_last)
    rows = []
    for n in args.batch_list:
        for cuda_graph in (False, True):
            r = kiln_bench(kiln, graph, n, cuda_graph, work, cache_dir, args.timeout, str(args.kiln_warmup),
                           str(args.kiln_iters))
            r["model"] = name
            rows.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "stats"}), flush=True)
        for r in torch_rows(torch, m16, name, shape, n, args, res):
            rows.append(r)
            print(json.dumps(r), flush=True)
    # Correctness: the same 4 random inputs through both.
    gen = torch.Generator().manual_seed(args.seed + 1)
    X = torch.randn(4, *shape, generator=gen)
    check = {}
    try:
        with torch.inference_mode():
            x16 = X.half().cuda()
            if len(shape) == 3:
                x16 = x16.to(memory_format=torch.channels_last)
            ref = m16(x16).float().cpu().numpy()
        got = kiln_outputs(kiln, graph, X.half().numpy(), "f16", work, cache_dir, args.timeout, f"check_{name}")
        check = compare(got, ref)
        for k in ("top1_agree", "distinct_top1_classes_ref", "min_top1_margin_rel"):  # not classes
            check.pop(k, None)
        check["target"] = F16_TARGET
        check["pass"] = bool(check.get("max_rel_err", float("inf")) <= F16_TARGET)
    except KilnError as e:
        check = {"error": str(e), "stderr_tail": e.rec.get("stderr_tail", "")}
    except Exception as e:  # noqa: BLE001
        check = {"error": f"{e.__class__.__name__}: {e}"[:600]}
    print(json.dumps({"model": name, "check": check}), flush=True)
    return rows, check


def markdown(rows, checks):
    by = {(r.get("model"), r.get("N"), r.get("system")): r for r in rows}
    out = ["| model | N | kiln ms | kiln + CUDA graph ms | eager ms | eager + CUDA graph ms | "
           "kiln / eager (speed) | kiln+graph / eager+graph (speed) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    keys = sorted({(m, n) for (m, n, _) in by}, key=lambda k: (k[0] or "", k[1] or 0))
    for m, n in keys:
        ms = {s: by.get((m, n, s), {}).get("ms") for s in ("kiln", "kiln_graph", "eager", "eager_graph")}

        def f(v):
            return f"{v:.4f}" if isinstance(v, (int, float)) else "-"

        def ratio(a, b):
            return f"**{b / a:.2f}×**" if a and b else "-"
        out.append(f"| {m} | {n} | {f(ms['kiln'])} | {f(ms['kiln_graph'])} | {f(ms['eager'])} | "
                   f"{f(ms['eager_graph'])} | {ratio(ms['kiln'], ms['eager'])} | "
                   f"{ratio(ms['kiln_graph'], ms['eager_graph'])} |")
    out += ["", "| model | kiln f16 vs torch f16, max rel err | target |", "| --- | --- | --- |"]
    for m, c in checks.items():
        err = c.get("max_rel_err", c.get("error", "?"))
        out.append(f"| {m} | {err if isinstance(err, str) else f'{err:.3g}'}"
                   f"{'' if isinstance(err, str) else (' ✓' if c.get('pass') else ' ✗')} | {F16_TARGET} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "kiln"))
    ap.add_argument("--models", default="encoder,unet_down")
    ap.add_argument("--batches", default="8,32")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--warmup-ms", type=float, default=50)
    ap.add_argument("--rep-ms", type=float, default=300)
    ap.add_argument("--kiln-warmup", type=int, default=10)
    ap.add_argument("--kiln-iters", type=int, default=50)
    ap.add_argument("--timeout", type=int, default=240)
    args = ap.parse_args(argv)
    args.batch_list = [int(b) for b in args.batches.split(",") if b]
    out_dir = args.out or os.environ.get("OUT") or tempfile.mkdtemp(prefix="bench_models_out.")
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="bench_models.")
    res = Results(os.path.join(out_dir, "bench_models.json"))
    res.data["bench"] = "models"
    import torch
    torch.backends.cudnn.benchmark = True
    kiln = os.path.abspath(args.kiln)
    rows, checks = [], {}
    t0 = time.perf_counter()
    try:
        for name in args.models.split(","):
            r, c = run_model(torch, name, args, work, kiln, res)
            rows += r
            if c is not None:
                checks[name] = c
    finally:
        res.data.update(rows=rows, checks=checks, seconds=round(time.perf_counter() - t0, 1),
                        torch=torch.__version__, gpu=torch.cuda.get_device_name())
        res.save()
        print(markdown(rows, checks), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    ok = all(c.get("pass") for c in checks.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
