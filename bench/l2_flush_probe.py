#!/usr/bin/env python3
"""How much of a memory-bound kernel's timed bandwidth the L2 flush costs (device measurement).

do_bench (and kiln's event timer, which copies it) flushes L2 before every timed call by writing
a 256 MiB buffer. The last ~L2-size bytes of that write can still be dirty in L2 when the timed
kernel starts, so the kernel's own reads evict them and DRAM absorbs that write-back inside the
timed region. For a 2 GiB copy this is ~1-3 % of the traffic; for the 84-268 MB problems of the
memory-bound table it can be 20-70 %. This script times a device-to-device copy of several sizes
three ways, median of CUDA-event-timed calls:
  write-flush  the do_bench way: zero a 256 MiB buffer before each call
  read-flush   read a 256 MiB buffer (a sum) before each call: L2 ends full of clean lines
  write+read   zero it, then read another 256 MiB buffer: the dirty lines are written back first
and prints GB/s (bytes read + written) for each.

usage: python3 bench/l2_flush_probe.py [--sizes-mb 42,134,2048] [--iters 200]
"""
import argparse
import json
import os
import statistics

import torch


def timed(fn, flush, iters, warmup=20):
    for _ in range(warmup):
        flush(); fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for s, e in ev:
        flush()
        s.record(); fn(); e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", default="42,84,134,268,2048")
    ap.add_argument("--iters", type=int, default=200)
    args = ap.parse_args()
    dev = "cuda"
    print(torch.cuda.get_device_name(), "L2", torch.cuda.get_device_properties(0).L2_cache_size >> 20, "MiB")
    flush_w = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    flush_r = torch.ones(64 << 20, dtype=torch.float32, device=dev)  # 256 MiB
    sink = torch.empty(1, dtype=torch.float32, device=dev)
    modes = {
        "write-flush": lambda: flush_w.zero_(),
        "read-flush": lambda: torch.sum(flush_r, dim=0, out=sink[0]),
        "write+read": lambda: (flush_w.zero_(), torch.sum(flush_r, dim=0, out=sink[0])),
    }
    rows = []
    print(f"| copy size (read) | {' | '.join(modes)} |  (GB/s, bytes read + written)")
    print("| --- |" + " --- |" * len(modes))
    for mb in (int(s) for s in args.sizes_mb.split(",")):
        n = mb * 1000 * 1000
        a = torch.randint(0, 255, (n,), dtype=torch.uint8, device=dev)
        b = torch.empty_like(a)
        row = {"mb": mb}
        for name, flush in modes.items():
            ms = timed(lambda: b.copy_(a), flush, args.iters)
            row[name] = round(2 * n / ms / 1e6, 1)
        rows.append(row)
        print(f"| {mb} MB | " + " | ".join(str(row[m]) for m in modes) + " |", flush=True)
        del a, b
    out = os.environ.get("OUT")
    if out:
        json.dump(rows, open(os.path.join(out, "l2_flush_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
