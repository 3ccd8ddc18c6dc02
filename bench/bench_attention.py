"""kiln's fused attention vs torch SDPA (each backend) on the GPU machine, same run.

Usage (from the repository root, after building the kiln CLI):
    python3 bench/bench_attention.py [--kiln build/kiln] [--out results.json] [--md results.md]
    python3 bench/bench_attention.py --dry-run        # prints the cases, needs no GPU or torch

Each case is one attention, q @ k^T * (1 / sqrt(D)) -> [causal where] -> softmax -> @ v, written
as a kiln JSON graph with static shapes and timed with `kiln bench --json` (the whole-graph
median, L2 flushed before each run: tools/cli_bench.cpp), once with the schedule rules (sm_90a:
the wgmma kernel) and with KILN_SCHEDULE=attention.wgmma=2 (the mma.sync kernel); kiln's
ms is the attention kernel's own median (the causal graphs also run two copy kernels building
the [S, S] mask the fused kernel never reads: the whole graph is kiln_graph_ms). torch's
scaled_dot_product_attention runs under torch.nn.attention.sdpa_kernel with each backend
(flash, cuDNN, efficient) and timed with triton.testing.do_bench (median, L2 flushed), as
bench/bench_conv.py times its anchors. TFLOP/s count 4 B H Sq Sk D flops, half of that when
causal. Decode rows also run KILN_SCHEDULE=attention.splits=1 (no key split: the anchor of
flash-decoding) and report the K / V read rate, 4 B Hkv Sk D bytes over the kernel's ms, in GB/s. Ratios are anchor ms / kiln ms (> 1: kiln is faster). Prints one JSON line per case;
writes all rows as JSON (--out) and a markdown table (--md).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

DTYPES = ("f16", "bf16")
BACKENDS = ("flash", "cudnn", "efficient")
KILN_TIMEOUT_S = 120


def cases(args):
    """(name, dtype, B, Hq, Hkv, Sq, Sk, D, causal) of every case."""
    out = []
    seqs = [int(s) for s in args.seqs.split(",")]
    for dt in args.dtypes.split(","):
        for d in (int(x) for x in args.dims.split(",")):
            for s in seqs:
                b = max(1, 16384 // s)  # 16k tokens a batch
                hq = 2048 // d  # model width 2048
                for causal in (False, True):
                    out.append((f"prefill", dt, b, hq, hq, s, s, d, causal))
        for s in seqs:  # grouped-query: 32 query heads over 8 K / V heads
            for causal in (False, True):
                out.append(("gqa", dt, max(1, 16384 // s), 32, 8, s, s, 128, causal))
        # Decode (flash-decoding: the key axis split over CTAs): 1, 4 and 16 query rows over a
        # 32k-key cache, 32 heads; D 64; grouped-query (8 K / V heads); a batch of 8.
        for sq in (1, 4, 16):
            out.append(("decode", dt, 1, 32, 32, sq, 32768, 128, False))
        out.append(("decode", dt, 1, 32, 32, 1, 32768, 64, False))
        out.append(("decode", dt, 1, 32, 8, 1, 32768, 128, False))
        out.append(("decode", dt, 8, 32, 8, 1, 8192, 128, False))
    return out


def flops(c):
    _, _, b, hq, _, sq, sk, d, causal = c
    f = 4.0 * b * hq * sq * sk * d
    return f / 2 if causal else f


def graph_json(c):
    """The case as a kiln JSON graph (GQA: K / V broadcast over a head-group dim)."""
    name, dt, b, hq, hkv, sq, sk, d, causal = c
    if hq == hkv:
        qs, ks = [b, hq, sq, d], [b, hkv, sk, d]
    else:
        qs, ks = [b, hkv, hq // hkv, sq, d], [b, hkv, 1, sk, d]
    g = {"kiln": 1, "name": f"attn_{name}_{dt}_b{b}_h{hq}x{hkv}_d{d}_s{sq}x{sk}"
                            f"{'_causal' if causal else ''}",
         "inputs": {"q": {"dtype": dt, "shape": qs}, "k": {"dtype": dt, "shape": ks},
                    "v": {"dtype": dt, "shape": ks}},
         "constants": {"scale": {"dtype": dt, "shape": [], "data": [1.0 / math.sqrt(d)]}},
         "nodes": [{"op": "matmul", "inputs": ["q", "k"], "outputs": ["s0"], "transpose_b": 1},
                   {"op": "mul", "inputs": ["s0", "scale"], "outputs": ["s1"]}],
         "outputs": ["o"]}
    last = "s1"
    if causal:
        g["constants"]["yes"] = {"dtype": "bool", "shape": [], "data": [1]}
        g["constants"]["fill"] = {"dtype": dt, "shape": [], "data": ["-inf"]}
        g["nodes"] += [{"op": "expand", "inputs": ["yes"], "outputs": ["all"], "shape": [sq, sk]},
                       {"op": "trilu", "inputs": ["all"], "outputs": ["tri"], "upper": 0, "k": 0},
                       {"op": "where", "inputs": ["tri", "s1", "fill"], "outputs": ["s2"]}]
        last = "s2"
    g["nodes"] += [{"op": "softmax", "inputs": [last], "outputs": ["p"], "axis": -1},
                   {"op": "matmul", "inputs": ["p", "v"], "outputs": ["o"]}]
    return g


def run_kiln(kiln, c, work, schedule):
    g = graph_json(c)
    gpath = os.path.join(work, g["name"] + ".json")
    jpath = gpath + ("." + schedule.replace("=", "_") if schedule else "") + ".bench.json"
    with open(gpath, "w") as f:
        json.dump(g, f)
    env = dict(os.environ)
    if schedule:
        env["KILN_SCHEDULE"] = schedule
    try:  # a kernel that hangs costs its case, not the run
        p = subprocess.run([kiln, "bench", gpath, "--json", jpath], capture_output=True,
                           text=True, env=env, timeout=KILN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"kiln bench did not finish in {KILN_TIMEOUT_S} s"}
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip()[-2000:]}
    with open(jpath) as f:
        kb = json.load(f)
    # The causal graphs also build their [Sq, Sk] mask (expand, trilu: two copy kernels the
    # fused kernel never reads), so the attention kernel's own median is reported beside the
    # whole graph's and the ratios use it.
    att = [k for k in kb.get("kernels", []) if k["name"].startswith("attention_")]
    return {"kernel": " + ".join(k["name"] for k in kb.get("kernels", [])),
            "graph_ms": float(kb["total_ms"]),
            "ms": float(att[0]["median_ms"]) if len(att) == 1 else float(kb["total_ms"])}


def run_torch(c, backend, args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
    _, dt, b, hq, hkv, sq, sk, d, causal = c
    tdt = torch.float16 if dt == "f16" else torch.bfloat16
    q = torch.randn(b, hq, sq, d, device="cuda", dtype=tdt)
    k = torch.randn(b, hkv, sk, d, device="cuda", dtype=tdt)
    v = torch.randn(b, hkv, sk, d, device="cuda", dtype=tdt)
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]
    gqa = hq != hkv

    def fn():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    try:
        with sdpa_kernel([be]):
            fn()
            torch.cuda.synchronize()
            return float(do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms,
                                  return_mode="median"))
    except Exception as e:  # a backend that does not take the shape
        return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def measure(c, args, work):
    name, dt, b, hq, hkv, sq, sk, d, causal = c
    fl = flops(c)
    r = {"case": name, "dtype": dt, "B": b, "Hq": hq, "Hkv": hkv, "Sq": sq, "Sk": sk, "D": d,
         "causal": causal}
    for be in BACKENDS:
        ms = run_torch(c, be, args)
        if isinstance(ms, float):
            r[f"{be}_ms"] = round(ms, 4)
            r[f"{be}_TFLOP/s"] = round(fl / ms / 1e9, 1)
        else:
            r[f"{be}_error"] = ms
    best = [r[f"{be}_ms"] for be in BACKENDS if f"{be}_ms" in r]
    if best:
        r["best_torch_ms"] = min(best)
    variants = [("kiln", "")] + ([] if args.no_mma else [("kiln_mma", "attention.wgmma=2")])
    for v in args.variant:  # NAME:SCHEDULE, an A/B candidate beside the rule
        vname, _, sched = v.partition(":")
        variants.append(("kiln_" + vname, sched))
    if name == "decode":  # the anchor: one CTA per (batch, head), as before flash-decoding
        variants.append(("kiln_nosplit", "attention.splits=1"))
    for prefix, sched in variants:
        res = run_kiln(args.kiln, c, work, sched)
        if "error" in res:
            r[prefix + "_error"] = res["error"]
            continue
        r[prefix + "_kernel"] = res["kernel"]
        r[prefix + "_ms"] = round(res["ms"], 4)
        r[prefix + "_graph_ms"] = round(res["graph_ms"], 4)
        r[prefix + "_TFLOP/s"] = round(fl / res["ms"] / 1e9, 1)
        for be in BACKENDS + ("best_torch",):
            key = be + "_ms" if be != "best_torch" else "best_torch_ms"
            if key in r:
                r[f"{prefix}_vs_{be}"] = round(r[key] / res["ms"], 3)
    if name == "decode":  # K and V read once: the DRAM rate (the H200's peak is ~4.8 TB/s)
        for prefix in ("kiln", "kiln_nosplit"):
            if prefix + "_ms" in r:
                r[prefix + "_kv_GB/s"] = round(kv_bytes(c) / r[prefix + "_ms"] / 1e6, 1)
        if "kiln_ms" in r and "kiln_nosplit_ms" in r:
            r["kiln_vs_nosplit"] = round(r["kiln_nosplit_ms"] / r["kiln_ms"], 3)
    return r


def kv_bytes(c):
    _, _, b, _, hkv, _, sk, d, _ = c
    return 2 * b * hkv * sk * d * 2


def markdown(rows, variants=()):
    cols = ["case", "dtype", "B", "Hq", "Hkv", "Sq", "Sk", "D", "causal", "kiln_TFLOP/s",
            "kiln_mma_TFLOP/s"] + [f"kiln_{v.partition(':')[0]}_TFLOP/s" for v in variants] + [
             "flash_TFLOP/s", "cudnn_TFLOP/s", "efficient_TFLOP/s",
            "kiln_vs_best_torch", "kiln_kv_GB/s", "kiln_nosplit_kv_GB/s", "kiln_vs_nosplit",
            "kiln_kernel"]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default="build/kiln", help="the kiln CLI binary")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--seqs", default="512,1024,2048,4096,8192,16384",
                    help="sequence lengths of the prefill and GQA cases")
    ap.add_argument("--dims", default="64,128,256", help="head dims of the prefill cases")
    ap.add_argument("--only", default="", help="run only cases whose name (prefill, gqa, decode) "
                                               "is in this comma-separated list")
    ap.add_argument("--no-mma", action="store_true", help="no mma.sync row (the sm_80 path)")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME:KILN_SCHEDULE, a kiln variant timed beside the rule (its "
                         "kiln_NAME_TFLOP/s column in the table)")
    ap.add_argument("--warmup-ms", type=int, default=25)
    ap.add_argument("--rep-ms", type=int, default=100)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"),
                                                  "bench_attention.json"))
    ap.add_argument("--md", default=os.path.join(os.environ.get("OUT", "/tmp"),
                                                 "bench_attention.md"))
    ap.add_argument("--dry-run", action="store_true", help="print the cases and exit")
    ap.add_argument("--graphs", default="", help="with --dry-run: write each case's graph JSON "
                    "into this directory (to warm a kernel cache ahead with `kiln cache warm`)")
    args = ap.parse_args()
    todo = cases(args)
    if args.only:
        keep = set(args.only.split(","))
        todo = [c for c in todo if c[0] in keep]
    if args.dry_run:
        for c in todo:
            print(json.dumps({"case": c[0], "dtype": c[1], "B": c[2], "Hq": c[3], "Hkv": c[4],
                              "Sq": c[5], "Sk": c[6], "D": c[7], "causal": c[8],
                              "GFLOP": round(flops(c) / 1e9, 2),
                              "KV_MB": round(kv_bytes(c) / 1e6, 1),
                              "graph": graph_json(c)["name"]}))
            if args.graphs:
                os.makedirs(args.graphs, exist_ok=True)
                g = graph_json(c)
                with open(os.path.join(args.graphs, g["name"] + ".json"), "w") as f:
                    json.dump(g, f)
        print(f"{len(todo)} cases", file=sys.stderr)
        return 0
    import torch
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}),
          flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for c in todo:
            r = measure(c, args, work)
            rows.append(r)
            print(json.dumps(r), flush=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    with open(args.md, "w") as f:
        f.write(markdown(rows, args.variant))
    return 0


if __name__ == "__main__":
    sys.exit(main())
