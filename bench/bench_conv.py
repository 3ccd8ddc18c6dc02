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
    a = ap.parse_args()
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
            k = run_kiln(binary, ["conv", n, C, K, H, H, R, s, p, "relu"])
            if not a.no_static:
                # The shape-specialized kernel (static N, what Engine hot-shape specialization and
                # static graphs compile): tiles chosen from the concrete M.
                ks = run_kiln(binary, ["conv", n, C, K, H, H, R, s, p, "relu", "--static"])
                if "error" in ks:
                    r["kiln_static_error"] = ks["error"]
                else:
                    r["kiln_static_kernel"] = ks["kernel"]
                    r["kiln_static_TFLOP/s"] = round(flops / ks["ms"] / 1e9, 1)
                    if "cudnn_fused_ms" in r:
                        r["kiln_static_vs_cudnn_fused"] = round(r["cudnn_fused_ms"] / ks["ms"], 3)
            if a.autotune:
                kt = run_kiln(binary, ["conv", n, C, K, H, H, R, s, p, "relu", "--static", "--autotune"])
                if "error" in kt:
                    r["kiln_tuned_error"] = kt["error"]
                else:
                    r["kiln_tuned_kernel"] = kt["kernel"]
                    r["kiln_tuned_TFLOP/s"] = round(flops / kt["ms"] / 1e9, 1)
                    r["kiln_tuned_from"] = kt.get("tuned_from")
                    if "cudnn_fused_ms" in r:
                        r["kiln_tuned_vs_cudnn_fused"] = round(r["cudnn_fused_ms"] / kt["ms"], 3)
                    if "eager_ms" in r:
                        r["kiln_tuned_vs_eager"] = round(r["eager_ms"] / kt["ms"], 3)
            for cfg in [c for c in a.configs.split(",") if c]:
                kc = run_kiln(binary, ["conv", n, C, K, H, H, R, s, p, "relu", "--static", "--config=" + cfg])
                if "error" not in kc and "cudnn_fused_ms" in r:
                    r[f"kiln_{cfg}_vs_cudnn_fused"] = round(r["cudnn_fused_ms"] / kc["ms"], 3)
            if not a.no_mma_baseline:
                km = run_kiln(binary, ["conv", n, C, K, H, H, R, s, p, "relu", "--mma"])
                if "error" in km:
                    r["kiln_mma_error"] = km["error"]
                else:
                    r["kiln_mma_kernel"] = km["kernel"]
                    r["kiln_mma_TFLOP/s"] = round(flops / km["ms"] / 1e9, 1)
                    if "cudnn_fused_ms" in r:
                        r["kiln_mma_vs_cudnn_fused"] = round(r["cudnn_fused_ms"] / km["ms"], 3)
            if "error" in k:
                r["kiln_error"] = k["error"]
            else:
                r["kiln_kernel"] = k["kernel"]
                r["kiln_ms"] = round(k["ms"], 4)
                r["kiln_TFLOP/s"] = round(flops / k["ms"] / 1e9, 1)
                if "cudnn_fused_ms" in r:
                    r["kiln_vs_cudnn_fused"] = round(r["cudnn_fused_ms"] / k["ms"], 3)
                r["kiln_vs_eager"] = round(r["eager_ms"] / k["ms"], 3)
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
        k = run_kiln(binary, ["matmul", M, N, Kd, "gelu_tanh", "bf16"])
        if not a.no_static:
            ks = run_kiln(binary, ["matmul", M, N, Kd, "gelu_tanh", "bf16", "--static"])
            if "error" in ks:
                r["kiln_static_error"] = ks["error"]
            else:
                r["kiln_static_kernel"] = ks["kernel"]
                r["kiln_static_vs_cublas_epilogue"] = round(r["cublas_epilogue_ms"] / ks["ms"], 3)
        if a.autotune:
            kt = run_kiln(binary, ["matmul", M, N, Kd, "gelu_tanh", "bf16", "--static", "--autotune"])
            if "error" in kt:
                r["kiln_tuned_error"] = kt["error"]
            else:
                r["kiln_tuned_kernel"] = kt["kernel"]
                r["kiln_tuned_vs_cublas_epilogue"] = round(r["cublas_epilogue_ms"] / kt["ms"], 3)
        if not a.no_mma_baseline:
            km = run_kiln(binary, ["matmul", M, N, Kd, "gelu_tanh", "bf16", "--mma"])
            if "error" in km:
                r["kiln_mma_error"] = km["error"]
            else:
                r["kiln_mma_kernel"] = km["kernel"]
                r["kiln_mma_TFLOP/s"] = round(flops / km["ms"] / 1e9, 1)
        if "error" in k:
            r["kiln_error"] = k["error"]
        else:
            r["kiln_kernel"] = k["kernel"]
            r["kiln_ms"] = round(k["ms"], 4)
            r["kiln_TFLOP/s"] = round(flops / k["ms"] / 1e9, 1)
            r["kiln_vs_cublas_epilogue"] = round(r["cublas_epilogue_ms"] / k["ms"], 3)
        rec(r)


if __name__ == "__main__":
    main()
