#!/usr/bin/env python3
"""Writes a one-layer graph file: conv2d (R x R, stride 1, same padding) + bias + residual add + relu,
f16 NHWC, seeded random weights: the ResNet-50 bottleneck's expansion conv (1x1 64 -> 256 at 56x56 by
default) as `kiln bench` / `kiln bench --autotune` time it (bench_contraction has no residual input).

usage: bench/conv_residual_graph.py OUT.json [--n 128] [--c 64] [--k 256] [--hw 56] [--r 1]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--c", type=int, default=64)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--hw", type=int, default=56)
    ap.add_argument("--r", type=int, default=1)
    a = ap.parse_args()
    pad = a.r // 2
    g = {"kiln": 1, "name": f"conv{a.r}x{a.r}_{a.c}_{a.k}_residual",
         "inputs": {"x": {"dtype": "f16", "shape": [a.n, a.c, a.hw, a.hw], "layout": "NHWC"},
                    "r": {"dtype": "f16", "shape": [a.n, a.k, a.hw, a.hw], "layout": "NHWC"}},
         "constants": {
             "w": {"dtype": "f16", "shape": [a.k, a.c, a.r, a.r], "layout": "NHWC",
                   "init": {"normal": {"mean": 0.0, "std": (2.0 / (a.c * a.r * a.r)) ** 0.5}, "seed": 1}},
             "b": {"dtype": "f16", "shape": [a.k], "init": {"normal": {"mean": 0.0, "std": 0.1}, "seed": 2}}},
         "nodes": [{"op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"], "stride": [1, 1],
                    "padding": [pad, pad]},
                   {"op": "add", "inputs": ["c", "r"], "outputs": ["s"]},
                   {"op": "relu", "inputs": ["s"], "outputs": ["y"]}],
         "outputs": ["y"]}
    json.dump(g, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
