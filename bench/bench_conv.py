"""kiln conv2d / matmul kernels vs cuDNN / cuBLAS on the GPU machine, same run.

Usage (from the repository root, after building bench_contraction):
    python3 bench/bench_conv.py [--bin build/bench_contraction] [--batches 32,128] [--out results.json]

For the ResNet-50 layers at each batch size: conv + bias + ReLU, f16, NHWC activations, KRSC
filters. kiln: bench/bench_contraction.cpp (emit_contraction -> NVRTC -> CUDA-event timed
launches, median). Anchors (PyTorch, triton.testing.do_bench median, fresh random data):
torch.cudnn_convolution_relu (cuDNN's fused conv+bias+relu) and eager conv -> add bias -> relu.
Then matmul + bias + gelu(tanh), bf16, 8192x4096x16384 vs F.gelu(torch.addmm(...), 'tanh').
Prints one JSON line per case with TFLOP/s and the ratios kiln / anchor.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from triton.testing import do_bench

LAYERS = [  # name, C, K, H, R, stride, pad
    ("res2 3x3 64", 64, 64, 56, 3, 1, 1),
    ("res2 1x1 256->64", 256, 64, 56, 1, 1, 0),
    ("res3 3x3 128", 128, 128, 28, 3, 1, 1),
    ("res4 3x3 256", 256, 256, 14, 3, 1, 1),
    ("res4 1x1 1024->256", 1024, 256, 14, 1, 1, 0),
    ("res5 3x3 512", 512, 512, 7, 3, 1, 1),
    ("stem 7x7 3->64 s2", 3, 64, 224, 7, 2, 3),
]


def bench(fn):
    return do_bench(fn, warmup=50, rep=300, return_mode="median")


def run_kiln(binary, args):
    p = subprocess.run([binary] + [str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip()[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def conv_graph_json(n, C, K, H, R, s, p):
    """One conv + bias + relu layer as a kiln graph file (static batch): what a user's graph of that
    layer compiles to, graph passes included (e.g. the stem's channel padding)."""
    def const(shape, std, seed, layout=None):
        d = {"dtype": "f16", "shape": shape, "init": {"normal": {"mean": 0.0, "std": std}, "seed": seed}}
        if layout:
            d["layout"] = layout
        return d
    return {"kiln": 1, "name": f"conv{R}x{R}_{C}_{K}",
            "inputs": {"x": {"dtype": "f16", "shape": [n, C, H, H], "layout": "NHWC"}},
            "constants": {"w": const([K, C, R, R], 0.05, 1, "NHWC"), "b": const([K], 1.0, 2)},
            "nodes": [{"op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"], "stride": [s, s],
                       "padding": [p, p]},
                      {"op": "relu", "inputs": ["c"], "outputs": ["y"]}],
            "outputs": ["y"]}


def run_engine(kiln, graph, work):
    """`kiln bench` of a graph: the whole-graph median (every kernel the Engine builds for it)."""
    gpath = os.path.join(work, graph["name"] + f"_N{graph['inputs']['x']['shape'][0]}.json")
    jpath = gpath + ".bench.json"
    with open(gpath, "w") as f:
        json.dump(graph, f)
    p = subprocess.run([kiln, "bench", gpath, "--json", jpath], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip()[-2000:]}
    with open(jpath) as f:
        kb = json.load(f)
    names = [k["name"] for k in kb.get("kernels", [])]
    return {"kernel": " + ".join(names), "ms": float(kb["total_ms"])}


def put(r, prefix, res, flops, anchors):
    """One kiln measurement into row r as <prefix>_kernel/_ms/_TFLOP/s/_vs_<anchor> (or <prefix>_error)."""
    if "error" in res:
        r[prefix + "_error"] = res["error"]
        return
    r[prefix + "_kernel"] = res["kernel"]
    r[prefix + "_ms"] = round(res["ms"], 4)
    r[prefix + "_TFLOP/s"] = round(flops / res["ms"] / 1e9, 1)
    if res.get("tuned_from"):
        r[prefix + "_from"] = res["tuned_from"]
    for anchor in anchors:
        if anchor + "_ms" in r:
            r[f"{prefix}_vs_{anchor}"] = round(r[anchor + "_ms"] / res["ms"], 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=None, help="bench_contraction binary")
    ap.add_argument("--batches", default="32,128")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "bench_conv.json"))
    ap.add_argument("--skip-matmul", action="store_true")
    ap.add_argument("--no-static", action="store_true",
                    help="skip the run with a static batch dim (--static: tiles from the concrete M)")
    ap.add_argument("--configs", default="",
                    help="comma-separated wgmma tiles to time too (static shapes), e.g. "
                         "wg128x128x64_s5,wg256x128x64_s4")
    ap.add_argument("--autotune", action="store_true",
                    help="also time every candidate config at the exact (static) shape and report the "
                         "fastest (bench_contraction --static --autotune: what kiln bench --autotune "
                         "records in the tuning file for a static graph)")
    ap.add_argument("--no-mma-baseline", action="store_true",
                    help="skip the second kiln run per case with the mma.sync kernel (--mma)")
    ap.add_argument("--kiln", default=None,
                    help="the kiln CLI: also time each layer through the whole Engine (`kiln bench` of a "
                         "static one-layer graph file; graph passes such as the stem's channel padding "
                         "included) as kiln_engine")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench_conv_")
    binary = a.bin
    if binary is None:
        for cand in ("build/bench_contraction", "build-release/bench_contraction"):
            if os.path.exists(cand):
                binary = cand
                break
    if binary is None or not os.path.exists(binary):
        sys.exit("bench_conv.py: build bench_contraction first (ninja -C build bench_contraction) or pass --bin")

    torch.backends.cudnn.benchmark = True
    dev = "cuda"
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name()}), flush=True)
    rows = []

    def rec(r):
        rows.append(r)
        print(json.dumps(r), flush=True)
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)

    for n in [int(b) for b in a.batches.split(",")]:
        for name, C, K, H, R, s, p in LAYERS:
            P = (H + 2 * p - R) // s + 1
            flops = 2.0 * n * K * P * P * C * R * R
            x = torch.randn(n, C, H, H, device=dev, dtype=torch.half).to(memory_format=torch.channels_last)
            w = (torch.randn(K, C, R, R, device=dev, dtype=torch.half) * 0.05).to(memory_format=torch.channels_last)
            bias = torch.randn(K, device=dev, dtype=torch.half)
            r = {"case": f"{name} N={n}", "GFLOP": round(flops / 1e9, 2)}
            try:
                ms = bench(lambda: torch.cudnn_convolution_relu(x, w, bias, (s, s), (p, p), (1, 1), 1))
                r["cudnn_fused_ms"] = round(ms, 4)
                r["cudnn_fused_TFLOP/s"] = round(flops / ms / 1e9, 1)
            except Exception as e:  # some builds lack the fused op for a shape
                r["cudnn_fused_error"] = str(e)[:200]
            ms = bench(lambda: F.relu(F.conv2d(x, w, None, stride=s, padding=p) + bias.view(1, -1, 1, 1)))
            r["eager_ms"] = round(ms, 4)
            r["eager_TFLOP/s"] = round(flops / ms / 1e9, 1)
            del x, w, bias
            torch.cuda.empty_cache()
            conv = ["conv", n, C, K, H, H, R, s, p, "relu"]
            anchors = ("cudnn_fused", "eager")
            put(r, "kiln", run_kiln(binary, conv), flops, anchors)
            if not a.no_static:
                # The shape-specialized kernel (static N, what Engine hot-shape specialization and
                # static graphs compile): tiles chosen from the concrete M.
                put(r, "kiln_static", run_kiln(binary, conv + ["--static"]), flops, anchors)
            if a.kiln:
                # The whole Engine pipeline on a static one-layer graph (graph passes included).
                put(r, "kiln_engine", run_engine(a.kiln, conv_graph_json(n, C, K, H, R, s, p), work),
                    flops, anchors)
            if a.autotune:
                put(r, "kiln_tuned", run_kiln(binary, conv + ["--static", "--autotune"]), flops, anchors)
            for cfg in [c for c in a.configs.split(",") if c]:
                put(r, f"kiln_{cfg}", run_kiln(binary, conv + ["--static", "--config=" + cfg]), flops, anchors)
            if not a.no_mma_baseline:
                put(r, "kiln_mma", run_kiln(binary, conv + ["--mma"]), flops, anchors)
            rec(r)

    if not a.skip_matmul:
        M, N, Kd = 8192, 4096, 16384
        flops = 2.0 * M * N * Kd
        A = torch.randn(M, Kd, device=dev, dtype=torch.bfloat16)
        B = torch.randn(Kd, N, device=dev, dtype=torch.bfloat16)
        bias = torch.randn(N, device=dev, dtype=torch.bfloat16)
        r = {"case": f"matmul bf16 {M}x{N}x{Kd} +bias+gelu_tanh", "GFLOP": round(flops / 1e9, 1)}
        ms = bench(lambda: F.gelu(torch.addmm(bias, A, B), approximate="tanh"))
        r["cublas_epilogue_ms"] = round(ms, 4)
        r["cublas_epilogue_TFLOP/s"] = round(flops / ms / 1e9, 1)
        ms = bench(lambda: A @ B)
        r["cublas_matmul_only_ms"] = round(ms, 4)
        del A, B, bias
        torch.cuda.empty_cache()
        mm = ["matmul", M, N, Kd, "gelu_tanh", "bf16"]
        anchors = ("cublas_epilogue",)
        put(r, "kiln", run_kiln(binary, mm), flops, anchors)
        if not a.no_static:
            put(r, "kiln_static", run_kiln(binary, mm + ["--static"]), flops, anchors)
        if a.autotune:
            put(r, "kiln_tuned", run_kiln(binary, mm + ["--static", "--autotune"]), flops, anchors)
        for cfg in [c for c in a.configs.split(",") if c]:
            put(r, f"kiln_{cfg}", run_kiln(binary, mm + ["--static", "--config=" + cfg]), flops, anchors)
        if not a.no_mma_baseline:
            put(r, "kiln_mma", run_kiln(binary, mm + ["--mma"]), flops, anchors)
        rec(r)


if __name__ == "__main__":
    main()
