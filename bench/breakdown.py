#!/usr/bin/env python3
"""Where the time of each kiln row of a bench_models.json / bench_resnet50.json goes: kernel families
and the slowest kernels (the `breakdown` that bench_resnet50.kiln_bench records).
    python3 bench/breakdown.py OUT/bench_models.json
"""
import json
import sys


def main(path):
    with open(path) as f:
        d = json.load(f)
    for r in d.get("rows", []):
        if "breakdown" not in r:
            continue
        print(r.get("model", "resnet50"), r["N"], r["system"], r["ms"], "ms; kernels", r["kernels"],
              "summed", r.get("sum_kernel_ms"))
        print("  families", {k: v for k, v in r["breakdown"]["families"].items()})
        print("  slowest", [(x["name"][:60], x["ms"]) for x in r["breakdown"]["slowest"]])


if __name__ == "__main__":
    main(sys.argv[1])
