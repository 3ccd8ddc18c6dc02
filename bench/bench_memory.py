#!/usr/bin/env python3
"""Memory-bound fusion benchmark (the JIT-pipeline issue): kiln vs PyTorch eager and torch.compile, same run.

For each case: copy bandwidth (the ceiling, 2 GiB device-to-device copy; and a copy of the case's own bytes,
half read and half written, timed the same way: under do_bench's L2 flush a small copy cannot reach the 2 GiB
rate; docs/PERFORMANCE.md has the L2-flush measurements), PyTorch eager and torch.compile
(triton.testing.do_bench median, CUDA events, L2 flushed), and kiln (`kiln bench`: median of CUDA-event-timed runs
after warm-up on fresh random inputs) plus `kiln run --check` (GPU vs CPU reference, max abs/rel error).
Prints a table and writes $OUT/bench_memory.json.

With --variants, kiln is also measured (and checked) under each schedule override of VARIANTS
(KILN_SCHEDULE, heuristics/schedule.hpp), in the same process run as the anchors.

usage: bench/bench_memory.py [--kiln build/kiln] [--cases a,b] [--no-compile] [--variants]
"""
import argparse, json, os, subprocess, sys, tempfile

def graph(name, inputs, constants, nodes, outputs):
    return {"kiln": 1, "name": name, "inputs": inputs, "constants": constants, "nodes": nodes,
            "outputs": outputs}


def t(dtype, shape, layout=None):
    d = {"dtype": dtype, "shape": shape}
    if layout:
        d["layout"] = layout
    return d


def init(dtype, shape, mean, std, seed):
    return {"dtype": dtype, "shape": shape, "init": {"normal": {"mean": mean, "std": std}, "seed": seed}}


def make_cases():
    R, D = 16384, 4096
    cases = {}
    cases["add_layernorm_gelu"] = dict(
        title="add + layernorm + gelu, bf16 16384x4096",
        graph=graph("add_ln_gelu", {"x": t("bf16", [R, D]), "r": t("bf16", [R, D])},
                    {"g": init("bf16", [D], 1, .1, 1), "b": init("bf16", [D], 0, .1, 2)},
                    [{"op": "add", "inputs": ["x", "r"], "outputs": ["s"]},
                     {"op": "layernorm", "inputs": ["s", "g", "b"], "outputs": ["n"], "eps": 1e-5},
                     {"op": "gelu", "inputs": ["n"], "outputs": ["y"]}], ["y"]),
        bytes=3 * R * D * 2 + 2 * D * 2, target=0.85)
    cases["bias_gelu"] = dict(
        title="bias + gelu, bf16 16384x4096",
        graph=graph("bias_gelu", {"x": t("bf16", [R, D])}, {"b": init("bf16", [D], 0, .1, 3)},
                    [{"op": "add", "inputs": ["x", "b"], "outputs": ["s"]},
                     {"op": "gelu", "inputs": ["s"], "outputs": ["y"]}], ["y"]),
        bytes=2 * R * D * 2 + D * 2, target=0.85)
    cases["rmsnorm"] = dict(
        title="rmsnorm, bf16 16384x4096",
        graph=graph("rmsnorm", {"x": t("bf16", [R, D])}, {"g": init("bf16", [D], 1, .1, 4)},
                    [{"op": "rmsnorm", "inputs": ["x", "g"], "outputs": ["y"], "eps": 1e-6}], ["y"]),
        bytes=2 * R * D * 2 + D * 2, target=0.85)
    N, C, H = 16, 320, 64
    cases["groupnorm_silu"] = dict(
        title="groupnorm(32) + silu, f16 NHWC 16x320x64x64",
        graph=graph("gn_silu", {"x": t("f16", [N, C, H, H], "NHWC")},
                    {"g": init("f16", [C], 1, .1, 5), "b": init("f16", [C], 0, .1, 6)},
                    [{"op": "groupnorm", "inputs": ["x", "g", "b"], "outputs": ["n"], "groups": 32, "eps": 1e-5},
                     {"op": "silu", "inputs": ["n"], "outputs": ["y"]}], ["y"]),
        bytes=2 * N * C * H * H * 2 + 2 * C * 2, target=0.75)
    S = 8192
    cases["softmax"] = dict(
        title="softmax, f16 8192x8192",
        graph=graph("softmax", {"x": t("f16", [S, S])}, {},
                    [{"op": "softmax", "inputs": ["x"], "outputs": ["y"], "axis": -1}], ["y"]),
        bytes=2 * S * S * 2, target=0.80)
    return cases


# Schedule overrides measured with --variants, per case (the rule's own choice is measured too).
VARIANTS = {
    "add_layernorm_gelu": ["rownorm.threads=128"],
    "bias_gelu": ["pointwise.vecs=4", "pointwise.threads=128"],
    "rmsnorm": ["rownorm.threads=128"],
    "groupnorm_silu": ["channelnorm.onewave=2", "channelnorm.algo=split"],
}


def kiln_bench(kiln, gpath, work, name, schedule="", check=True):
    """kiln bench (+ run --check) of one graph; KILN_SCHEDULE=schedule when given."""
    env = dict(os.environ)
    if schedule:
        env["KILN_SCHEDULE"] = schedule
    tag = name + ("." + schedule.replace(",", "_").replace("=", "-") if schedule else "")
    kjson = os.path.join(work, tag + ".bench.json")
    r = subprocess.run([kiln, "bench", gpath, "--json", kjson], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"kiln_error": (r.stderr or r.stdout)[-400:]}
    kb = json.load(open(kjson))
    out = {"kiln_ms": round(kb["total_ms"], 4),
           "kiln_kernels": [(k["name"], round(k["median_ms"], 4)) for k in kb["kernels"]]}
    if check:
        r = subprocess.run([kiln, "run", gpath, "--check", "--device", "gpu"], capture_output=True, text=True,
                           env=env)
        out["check"] = "ok" if r.returncode == 0 else "FAIL"
        out["check_out"] = r.stdout.strip().splitlines()[-3:] if r.stdout else r.stderr[-300:]
    return out


def torch_fns(name):
    import torch
    import torch.nn.functional as F
    dev = "cuda"
    R, D = 16384, 4096
    if name == "add_layernorm_gelu":
        x = torch.randn(R, D, device=dev, dtype=torch.bfloat16); r = torch.randn_like(x)
        g = torch.randn(D, device=dev, dtype=torch.bfloat16); b = torch.randn_like(g)
        return (lambda x, r: F.gelu(F.layer_norm(x + r, (D,), g, b, 1e-5))), (x, r)
    if name == "bias_gelu":
        x = torch.randn(R, D, device=dev, dtype=torch.bfloat16); b = torch.randn(D, device=dev, dtype=torch.bfloat16)
        return (lambda x: F.gelu(x + b)), (x,)
    if name == "rmsnorm":
        x = torch.randn(R, D, device=dev, dtype=torch.bfloat16); g = torch.randn(D, device=dev, dtype=torch.bfloat16)
        return (lambda x: F.rms_norm(x, (D,), g, 1e-6)), (x,)
    if name == "groupnorm_silu":
        x = torch.randn(16, 320, 64, 64, device=dev, dtype=torch.half).to(memory_format=torch.channels_last)
        g = torch.randn(320, device=dev, dtype=torch.half); b = torch.randn_like(g)
        return (lambda x: F.silu(F.group_norm(x, 32, g, b, 1e-5))), (x,)
    if name == "softmax":
        x = torch.randn(8192, 8192, device=dev, dtype=torch.half)
        return (lambda x: torch.softmax(x, -1)), (x,)
    raise KeyError(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(os.path.dirname(__file__), "..", "build", "kiln"))
    ap.add_argument("--cases", default=",".join(make_cases().keys()))
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--no-check", action="store_true", help="skip kiln run --check")
    ap.add_argument("--variants", action="store_true", help="also measure kiln under VARIANTS")
    ap.add_argument("--json", default="bench_memory.json", help="results file name under $OUT")
    args = ap.parse_args()
    out_dir = os.environ.get("OUT", tempfile.mkdtemp())
    cases = make_cases()
    rows = []
    import torch
    from triton.testing import do_bench
    bench = lambda fn: do_bench(fn, warmup=50, rep=300, return_mode="median")
    a = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
    copy_ms = bench(lambda: b.copy_(a)); copy_gbs = 2 * a.numel() / copy_ms / 1e6
    del a, b
    print(f"copy 2GiB d2d: {copy_ms:.4f} ms = {copy_gbs:.1f} GB/s (the ceiling)", flush=True)
    work = tempfile.mkdtemp()
    for name in args.cases.split(","):
        c = cases[name]
        gpath = os.path.join(work, name + ".json")
        json.dump(c["graph"], open(gpath, "w"), indent=1)
        row = {"case": name, "title": c["title"], "bytes": c["bytes"], "copy_GBps": round(copy_gbs, 1)}
        half = c["bytes"] // 2
        a = torch.empty(half, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
        row["same_copy_GBps"] = round(2 * half / bench(lambda: b.copy_(a)) / 1e6, 1)
        del a, b
        fn, inputs = torch_fns(name)
        eager = bench(lambda: fn(*inputs)); row["eager_ms"] = round(eager, 4)
        if not args.no_compile:
            cfn = torch.compile(fn); cfn(*inputs)
            comp = bench(lambda: cfn(*inputs)); row["compile_ms"] = round(comp, 4)
        del inputs
        torch.cuda.empty_cache()
        specs = [""] + (VARIANTS.get(name, []) if args.variants else [])
        base = row
        for spec in specs:
            row = dict(base, variant=spec or "rules")
            row.update(kiln_bench(args.kiln, gpath, work, name, spec, not args.no_check))
            if "kiln_ms" in row:
                row["kiln_GBps"] = round(c["bytes"] / row["kiln_ms"] / 1e6, 1)
                row["kiln_pct_copy"] = round(100 * row["kiln_GBps"] / copy_gbs, 1)
                row["kiln_pct_same_copy"] = round(100 * row["kiln_GBps"] / row["same_copy_GBps"], 1)
                row["target_pct"] = 100 * c["target"]
                row["vs_eager"] = round(eager / row["kiln_ms"], 2)
                if "compile_ms" in row:
                    row["vs_compile"] = round(row["compile_ms"] / row["kiln_ms"], 2)
            rows.append(row); print(json.dumps(row), flush=True)
    json.dump(rows, open(os.path.join(out_dir, args.json), "w"), indent=1)
    print()
    print(f"| case | kiln schedule | eager ms | torch.compile ms | kiln ms | kiln GB/s | % of copy ({copy_gbs:.0f} GB/s) | target | same-size copy GB/s | % of it | vs compile | check |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['title']} | {r.get('variant', 'rules')} | {r.get('eager_ms')} | {r.get('compile_ms', '-')} | {r.get('kiln_ms', 'ERR')} | "
              f"{r.get('kiln_GBps', '-')} | {r.get('kiln_pct_copy', '-')} | {r.get('target_pct', '-')} | "
              f"{r.get('same_copy_GBps', '-')} | {r.get('kiln_pct_same_copy', '-')} | "
              f"{r.get('vs_compile', '-')} | {r.get('check', '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
