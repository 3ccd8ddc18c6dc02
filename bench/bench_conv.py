"""kiln conv2d / matmul kernels vs cuDNN / cuBLAS on the GPU machine, same run.

Usage (from the repository root, after building bench_contraction):
    python3 bench/bench_conv.py [--bin build/bench_contraction] [--batches 32,128] [--out results.json]

For the ResNet-50 layers at each batch size: conv + bias + ReLU, f16, NHWC activations, KRSC
filters. kiln: bench/bench_contraction.cpp (emit_contraction -> NVRTC -> CUDA-event timed
launches, median). Anchors (PyTorch, triton.testing.do_bench median, fresh random data):
torch.cudnn_convolution_relu (cuDNN's fused conv+bias+relu) and eager conv -> add bias -> relu.
Then matmul + bias + gelu(tanh), bf16, 8192x4096x16384 vs F.gelu(torch.addmm(...), 'tanh').
Prints one JSON line per case with TFLOP/s and the ratios kiln / anchor.

    python3 bench/bench_conv.py --suite gemm [--batches 32] [--autotune] [--configs ...]
The transformer GEMMs of the zoo (ViT-B/16 at 197 tokens, BERT-base / GPT-2 at 128) with their
bias and activation, f16, rows = batch x tokens, kiln's static-shape kernel against cuBLAS (torch
addmm, and torch._addmm_activation: cuBLASLt's fused bias + gelu epilogue).

    python3 bench/bench_conv.py --suite grouped [--batches 32]
The grouped and depthwise layers instead (ResNeXt-50 32x4d and RegNetY-800MF grouped 3x3,
MobileNetV2 and EfficientNet-B0 depthwise 3x3 / 5x5, ConvNeXt-T depthwise 7x7), f16 NHWC, conv +
bias + act fused in kiln against cuDNN's conv alone (torch F.conv2d, cudnn.benchmark on) and
cuDNN's conv with bias and act added by eager ops; prints a table of kiln ms, cuDNN ms and the
ratios per layer, with kiln's DRAM bandwidth (bytes of x, w, y over the kiln time).
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


# name, C, K, H, R, stride, groups, act: the distinct grouped / depthwise layers of each network
# at 224x224 input (count in the network in the name).
GROUPED_LAYERS = [
    ("resnext50 l1 x3 128 56 g32", 128, 128, 56, 3, 1, 32, "relu"),
    ("resnext50 l2.0 256 56 s2 g32", 256, 256, 56, 3, 2, 32, "relu"),
    ("resnext50 l2 x3 256 28 g32", 256, 256, 28, 3, 1, 32, "relu"),
    ("resnext50 l3.0 512 28 s2 g32", 512, 512, 28, 3, 2, 32, "relu"),
    ("resnext50 l3 x5 512 14 g32", 512, 512, 14, 3, 1, 32, "relu"),
    ("resnext50 l4.0 1024 14 s2 g32", 1024, 1024, 14, 3, 2, 32, "relu"),
    ("resnext50 l4 x2 1024 7 g32", 1024, 1024, 7, 3, 1, 32, "relu"),
    ("regnety800 s1.0 64 112 s2 g4", 64, 64, 112, 3, 2, 4, "relu"),
    ("regnety800 s2.0 144 56 s2 g9", 144, 144, 56, 3, 2, 9, "relu"),
    ("regnety800 s2 x2 144 28 g9", 144, 144, 28, 3, 1, 9, "relu"),
    ("regnety800 s3.0 320 28 s2 g20", 320, 320, 28, 3, 2, 20, "relu"),
    ("regnety800 s3 x7 320 14 g20", 320, 320, 14, 3, 1, 20, "relu"),
    ("regnety800 s4.0 784 14 s2 g49", 784, 784, 14, 3, 2, 49, "relu"),
    ("regnety800 s4 x1 784 7 g49", 784, 784, 7, 3, 1, 49, "relu"),
    ("mobilenetv2 dw 32 112", 32, 32, 112, 3, 1, 32, "relu"),
    ("mobilenetv2 dw 96 112 s2", 96, 96, 112, 3, 2, 96, "relu"),
    ("mobilenetv2 dw 144 56", 144, 144, 56, 3, 1, 144, "relu"),
    ("mobilenetv2 dw 144 56 s2", 144, 144, 56, 3, 2, 144, "relu"),
    ("mobilenetv2 dw x2 192 28", 192, 192, 28, 3, 1, 192, "relu"),
    ("mobilenetv2 dw 192 28 s2", 192, 192, 28, 3, 2, 192, "relu"),
    ("mobilenetv2 dw x4 384 14", 384, 384, 14, 3, 1, 384, "relu"),
    ("mobilenetv2 dw x2 576 14", 576, 576, 14, 3, 1, 576, "relu"),
    ("mobilenetv2 dw 576 14 s2", 576, 576, 14, 3, 2, 576, "relu"),
    ("mobilenetv2 dw x3 960 7", 960, 960, 7, 3, 1, 960, "relu"),
    ("effnetb0 dw 32 112", 32, 32, 112, 3, 1, 32, "silu"),
    ("effnetb0 dw 96 112 s2", 96, 96, 112, 3, 2, 96, "silu"),
    ("effnetb0 dw 144 56", 144, 144, 56, 3, 1, 144, "silu"),
    ("effnetb0 dw5 144 56 s2", 144, 144, 56, 5, 2, 144, "silu"),
    ("effnetb0 dw5 240 28", 240, 240, 28, 5, 1, 240, "silu"),
    ("effnetb0 dw 240 28 s2", 240, 240, 28, 3, 2, 240, "silu"),
    ("effnetb0 dw x2 480 14", 480, 480, 14, 3, 1, 480, "silu"),
    ("effnetb0 dw5 480 14", 480, 480, 14, 5, 1, 480, "silu"),
    ("effnetb0 dw5 x2 672 14", 672, 672, 14, 5, 1, 672, "silu"),
    ("effnetb0 dw5 672 14 s2", 672, 672, 14, 5, 2, 672, "silu"),
    ("effnetb0 dw5 x3 1152 7", 1152, 1152, 7, 5, 1, 1152, "silu"),
    ("effnetb0 dw 1152 7", 1152, 1152, 7, 3, 1, 1152, "silu"),
    ("convnext-t dw7 x3 96 56", 96, 96, 56, 7, 1, 96, "none"),
    ("convnext-t dw7 x3 192 28", 192, 192, 28, 7, 1, 192, "none"),
    ("convnext-t dw7 x9 384 14", 384, 384, 14, 7, 1, 384, "none"),
    ("convnext-t dw7 x3 768 7", 768, 768, 7, 7, 1, 768, "none"),
]


# name, tokens per sample, N, K, act: one row per distinct projection.
GEMM_LAYERS = [
    ("vit_b16 qkv", 197, 2304, 768, "none"),
    ("vit_b16 out proj", 197, 768, 768, "none"),
    ("vit_b16 fc1 gelu", 197, 3072, 768, "gelu"),
    ("vit_b16 fc2", 197, 768, 3072, "none"),
    ("bert qkv", 128, 2304, 768, "none"),
    ("bert fc1 gelu", 128, 3072, 768, "gelu"),
    ("bert fc2", 128, 768, 3072, "none"),
]


def gemm_suite(binary, batches, out, autotune, configs):
    """GEMM_LAYERS: kiln's matmul + bias + act (one kernel, static M) vs cuBLAS."""
    dev = "cuda"
    rows = []
    hdr = (f"{'layer':22s} {'M':>6s} {'kiln ms':>8s} {'TFLOP/s':>7s} {'cublas ms':>9s} {'ratio':>6s}"
           f" {'lt+act ms':>9s} {'ratio':>6s}  kernel")
    for n in batches:
        print(hdr, flush=True)
        for name, tokens, N, K, act in GEMM_LAYERS:
            M = n * tokens
            flops = 2.0 * M * N * K
            A = torch.randn(M, K, device=dev, dtype=torch.half)
            B = torch.randn(K, N, device=dev, dtype=torch.half) * 0.05
            bias = torch.randn(N, device=dev, dtype=torch.half)
            gelu = act == "gelu"
            plain = bench(lambda: F.gelu(torch.addmm(bias, A, B), approximate="tanh") if gelu
                          else torch.addmm(bias, A, B))
            lt = bench(lambda: torch._addmm_activation(bias, A, B, use_gelu=gelu))
            del A, B, bias
            torch.cuda.empty_cache()
            base = ["matmul", M, N, K, "gelu_tanh" if gelu else "none", "f16", "--static"]
            variants = [("kiln", base)] + ([("tuned", base + ["--autotune"])] if autotune else []) + \
                [(c, base + ["--config=" + c]) for c in configs]
            for label, args in variants:
                res = run_kiln(binary, args)
                r = {"case": f"{name} N={n}", "M": M, "variant": label, "GFLOP": round(flops / 1e9, 2),
                     "cublas_ms": round(plain, 4), "cublaslt_act_ms": round(lt, 4)}
                if "error" in res:
                    r["kiln_error"] = res["error"]
                    print(f"{name:22s} {label}: kiln error: {res['error'][:200]}", flush=True)
                else:
                    ms = res["ms"]
                    r.update({"kiln_kernel": res["kernel"], "kiln_ms": round(ms, 4),
                              "vs_cublas": round(plain / ms, 3), "vs_cublaslt_act": round(lt / ms, 3)})
                    print(f"{name:22s} {M:6d} {ms:8.4f} {flops / ms / 1e9:7.0f} {plain:9.4f} {plain / ms:6.2f}"
                          f" {lt:9.4f} {lt / ms:6.2f}  {label} {res['kernel']}", flush=True)
                rows.append(r)
            with open(out, "w") as f:
                json.dump(rows, f, indent=1)


def eager_act(y, act):
    return F.relu(y) if act == "relu" else F.silu(y) if act == "silu" else y


def grouped_suite(binary, batches, out, only=""):
    """The GROUPED_LAYERS table: kiln (conv + bias + act in one kernel) vs cuDNN."""
    dev = "cuda"
    rows = []
    hdr = f"{'layer':34s} {'kiln ms':>8s} {'cudnn ms':>9s} {'ratio':>6s} {'+b+act ms':>9s} {'ratio':>6s} {'GB/s':>6s}  kernel"
    for n in batches:
        print(hdr, flush=True)
        for name, C, K, H, R, s, g, act in GROUPED_LAYERS:
            if only and not any(o in name for o in only.split(",")):
                continue
            p = R // 2
            P = (H + 2 * p - R) // s + 1
            x = torch.randn(n, C, H, H, device=dev, dtype=torch.half).to(memory_format=torch.channels_last)
            w = (torch.randn(K, C // g, R, R, device=dev, dtype=torch.half) * 0.05).to(
                memory_format=torch.channels_last)
            bias = torch.randn(K, device=dev, dtype=torch.half)
            conv = lambda: F.conv2d(x, w, None, stride=s, padding=p, groups=g)
            cudnn = bench(conv)
            eager = bench(lambda: eager_act(conv() + bias.view(1, -1, 1, 1), act))
            del x, w, bias
            torch.cuda.empty_cache()
            res = run_kiln(binary, ["conv", n, C, K, H, H, R, s, p, act, f"--groups={g}"])
            nbytes = 2.0 * (n * C * H * H + n * K * P * P + K * (C // g) * R * R)
            r = {"case": f"{name} N={n}", "cudnn_ms": round(cudnn, 4), "cudnn_bias_act_ms": round(eager, 4),
                 "GFLOP": round(2.0 * n * K * P * P * (C // g) * R * R / 1e9, 3), "MB": round(nbytes / 1e6, 2)}
            if "error" in res:
                r["kiln_error"] = res["error"]
                print(f"{name:34s} kiln error: {res['error'][:200]}", flush=True)
            else:
                ms = res["ms"]
                r.update({"kiln_kernel": res["kernel"], "kiln_ms": round(ms, 4),
                          "vs_cudnn": round(cudnn / ms, 3), "vs_cudnn_bias_act": round(eager / ms, 3),
                          "kiln_GB/s": round(nbytes / ms / 1e6, 1)})
                print(f"{name:34s} {ms:8.4f} {cudnn:9.4f} {cudnn / ms:6.2f} {eager:9.4f} {eager / ms:6.2f} "
                      f"{nbytes / ms / 1e6:6.0f}  {res['kernel']}", flush=True)
            rows.append(r)
            with open(out, "w") as f:
                json.dump(rows, f, indent=1)


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
    ap.add_argument("--suite", default="dense", choices=("dense", "grouped", "gemm"),
                    help="dense: the ResNet-50 layers and the matmul; grouped: GROUPED_LAYERS; "
                         "gemm: GEMM_LAYERS")
    ap.add_argument("--layers", default="",
                    help="--suite grouped: only the layers whose name contains one of these "
                         "comma-separated strings (e.g. 'dw' for the depthwise ones)")
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
    if a.suite == "grouped":
        grouped_suite(binary, [int(b) for b in a.batches.split(",")], a.out, a.layers)
        return
    if a.suite == "gemm":
        gemm_suite(binary, [int(b) for b in a.batches.split(",")], a.out, a.autotune,
                   [c for c in a.configs.split(",") if c])
        return

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
