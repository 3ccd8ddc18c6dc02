#!/usr/bin/env python3
"""Whole-network benchmark (issue 7): ResNet-50 through ONNX -> kiln vs PyTorch, same run, one GPU.

The model is torchvision's ResNet-50 with random weights and random BatchNorm statistics, eval mode,
built exactly as tools/export_torchvision.py builds it (same code, same seed), exported to ONNX with
a dynamic batch dim N, then imported twice: `kiln import --dtype f16 --layout NHWC` (benchmarked)
and `--dtype f32` (the correctness check). Measured, in this order:

  1. time to first result: `kiln import` + `kiln run GRAPH --shape N=1 --device gpu`, wall time of
     each subprocess, on a fresh KILN_CACHE_DIR and a fresh output directory (cold), then again
     on the same cache and directory (warm: the import finds its up-to-date conversion);
  2. kiln throughput/latency at each --batches N: `kiln bench GRAPH --shape N=.. --json` without
     and with --cuda-graph (median of CUDA-event-timed runs, L2 flushed: timed as do_bench times
     the anchors, see runtime/event_timer.hpp);
  3. PyTorch f16 channels_last, cudnn.benchmark, inference_mode: eager, and eager captured in one
     torch.cuda.CUDAGraph on a static input, timed with triton.testing.do_bench (median), as
     bench/bench_memory.py does;
  4. correctness: kiln f32 vs torch f32 (TF32 off) and kiln f16 vs torch f16 on the same weights
     and --check-images random images: max |kiln - torch| / max |torch| (targets 1e-4 and 1e-2)
     and how many top-1 classes agree;
  5. torch.compile (default mode, inductor freezing on, dynamic=False, a fresh inductor cache):
     first-call time per N (compile included) and the do_bench median.

Writes OUT/bench_resnet50.json (rewritten after every step, so a run cut short keeps what it
measured), OUT/resnet50_images_per_s.png (when matplotlib is importable) and prints markdown
tables at the end. OUT is --out, else $OUT, else a new temporary directory. A failing step is
recorded (its error and the tail of the subprocess's stderr) and the rest still runs.

usage: bench/bench_resnet50.py [--kiln build/kiln] [--batches 1,32,128] [--no-compile]
                               [--no-check] [--check-images 256] [--out DIR] [--work DIR]
"""
import argparse
import copy
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

# (key, label) of every measured system, in table and plot order.
SYSTEMS = [
    ("kiln", "kiln"),
    ("kiln_graph", "kiln + CUDA graph"),
    ("eager", "PyTorch eager (cuDNN)"),
    ("eager_graph", "PyTorch eager + CUDA graph"),
    ("compile", "torch.compile (freezing)"),
]

F32_TARGET = 1e-4  # max |kiln - torch| / max |torch|, f32 graph vs torch f32 (TF32 off)
F16_TARGET = 1e-2  # the same, f16 graph vs torch f16


# ------------------------------------------------------------------------------- bookkeeping

class Results:
    """The JSON record, written again after every step (atomically: a run killed by its timeout
    leaves a complete file of what was measured so far)."""

    def __init__(self, path):
        self.path = path
        self.t0 = time.perf_counter()
        self.data = {"bench": "resnet50", "started": datetime.datetime.now().isoformat(timespec="seconds"),
                     "errors": [], "notes": []}

    def error(self, step, rec):
        """Notes a failed step: `rec` is its record (a run_cmd result or {"error": ...})."""
        e = {"step": step, "error": rec.get("error", "failed")}
        if rec.get("stderr_tail"):
            e["stderr_tail"] = rec["stderr_tail"]
        self.data["errors"].append(e)
        print(f"[{step}] FAILED: {e['error']}" + (f"\n{e['stderr_tail']}" if "stderr_tail" in e else ""),
              flush=True)

    def note(self, text):
        self.data["notes"].append(text)
        print(f"note: {text}", flush=True)

    def save(self):
        self.data["elapsed_s"] = round(time.perf_counter() - self.t0, 1)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)


def tail(text, n=1500):
    if text is None:
        return ""
    if isinstance(text, bytes):  # TimeoutExpired carries bytes even for text-mode pipes
        text = text.decode("utf-8", "replace")
    return text.strip()[-n:]


def kill_group(p):
    """Ends the process group run_cmd started (the child and what it spawned), by its id."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        p.kill()


def run_cmd(cmd, timeout, env=None):
    """Runs `cmd` bounded by `timeout` seconds. Returns (record, stdout): record has ok, rc,
    wall_s (time.perf_counter around the subprocess), cmd, and on failure error plus the tails of
    stderr/stdout. Never raises. The child gets its own process group so that a timeout also ends
    what it started (`kiln import` runs python3 as a child)."""
    cmd = [str(c) for c in cmd]
    rec = {"cmd": " ".join(shlex.quote(c) for c in cmd)}
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    except OSError as e:
        rec.update(ok=False, rc=None, wall_s=0.0, error=f"could not start {cmd[0]}: {e}")
        return rec, ""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        rec.update(ok=False, rc=None, wall_s=round(time.perf_counter() - t0, 3),
                   error=f"timed out after {timeout} s", stderr_tail=tail(err), stdout_tail=tail(out))
        return rec, out or ""
    except BaseException:  # SIGTERM (the step's timeout) or Ctrl-C while waiting: end the child too
        kill_group(p)
        p.wait()
        raise
    rec.update(ok=p.returncode == 0, rc=p.returncode, wall_s=round(time.perf_counter() - t0, 3))
    if p.returncode != 0:
        rec.update(error=f"exit status {p.returncode}", stderr_tail=tail(err), stdout_tail=tail(out, 600))
    return rec, out


def safe(fn):
    """fn() or the exception's text: a fact that could not be collected must not stop the run."""
    try:
        return fn()
    except Exception as e:
        return f"unknown ({e.__class__.__name__}: {e})"


def kiln_env(cache_dir):
    env = dict(os.environ)
    env["KILN_CACHE_DIR"] = cache_dir
    return env


# ------------------------------------------------------------------------------- kiln steps

def kiln_import(kiln, onnx_path, out_dir, dtype, layout, cache_dir, timeout, name="resnet50"):
    """`kiln import` into out_dir as graph `name`; returns (record, graph path or None)."""
    rec, _ = run_cmd([kiln, "import", onnx_path, "--out", out_dir, "--dtype", dtype, "--layout", layout,
                      "--name", name], timeout, kiln_env(cache_dir))
    graph = os.path.join(out_dir, f"{name}.json")
    if rec["ok"] and not os.path.isfile(graph):
        rec.update(ok=False, error=f"kiln import exited 0 but wrote no {graph}")
    return rec, (graph if rec["ok"] else None)


def parse_run_time_line(stdout):
    """The facts of `kiln run`'s 'time: ...' line (tools/cli_run.cpp, tools/cli_gpu.cpp):
    {"line", "run_ms", "kernels", "cuda_init_ms", "compile_ms", "nvrtc", "memory_hits", "disk_hits",
    "first_run_ms"}, each when present."""
    line = next((l for l in (stdout or "").splitlines() if l.startswith("time:")), None)
    if line is None:
        return {}
    out = {"line": line.strip()}
    pats = {"run_ms": r"^time: ([\d.]+) ms", "kernels": r"\((\d+) kernels?;",
            "cuda_init_ms": r"CUDA init ([\d.]+) ms", "compile_ms": r"compile ([\d.]+) ms",
            "nvrtc": r"(\d+) nvrtc", "memory_hits": r"(\d+) memory", "disk_hits": r"(\d+) disk cache hits",
            "first_run_ms": r"first run ([\d.]+) ms"}
    for key, pat in pats.items():
        m = re.search(pat, line)
        if m:
            out[key] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
    return out


def kiln_first_result(kiln, onnx_path, graph_dir, cache_dir, timeout):
    """`kiln import` + `kiln run --shape N=1 --device gpu`, each timed as a whole subprocess.
    Returns (record, graph path or None)."""
    imp, graph = kiln_import(kiln, onnx_path, graph_dir, "f16", "NHWC", cache_dir, timeout)
    rec = {"import_s": imp["wall_s"], "import": imp}
    if graph is None:
        rec["error"] = "kiln import: " + imp.get("error", "failed")
        rec["stderr_tail"] = imp.get("stderr_tail", "")
        return rec, None
    run, out = run_cmd([kiln, "run", graph, "--shape", "N=1", "--device", "gpu", "--stats"], timeout,
                       kiln_env(cache_dir))
    rec.update(run_s=run["wall_s"], run=run, kiln_run=parse_run_time_line(out))
    stats = [l.strip() for l in out.splitlines() if l.startswith("stats:")]
    if stats:
        rec["kiln_run"]["stats"] = stats[0]
    build = [l.strip() for l in out.splitlines() if l.startswith("build:")]
    if build:  # where the Engine build went: passes, codegen, kernel cache, module loads
        rec["kiln_run"]["build"] = build[0]
    if not run["ok"]:
        rec["error"] = "kiln run: " + run.get("error", "failed")
        rec["stderr_tail"] = run.get("stderr_tail", "")
        return rec, graph
    rec["total_s"] = round(rec["import_s"] + rec["run_s"], 3)
    return rec, graph


def kiln_bench(kiln, graph, n, cuda_graph, work, cache_dir, timeout, warmup, iters, extra=()):
    """One `kiln bench` at batch n (plus the `extra` arguments); returns a throughput row (or one
    with an error)."""
    key = "kiln_graph" if cuda_graph else "kiln"
    jpath = os.path.join(work, f"bench_{key}_N{n}.json")
    cmd = [kiln, "bench", graph, "--shape", f"N={n}", "--warmup", warmup, "--iters", iters, "--json", jpath]
    if cuda_graph:
        cmd.append("--cuda-graph")
    cmd += list(extra)
    rec, _ = run_cmd(cmd, timeout, kiln_env(cache_dir))
    row = {"N": n, "system": key, "wall_s": rec["wall_s"]}
    if not rec["ok"]:
        row.update(error=rec.get("error"), stderr_tail=rec.get("stderr_tail", ""), cmd=rec["cmd"])
        return row
    try:
        with open(jpath) as f:
            kb = json.load(f)
        ms = float(kb["total_ms"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        row.update(error=f"unreadable kiln bench --json {jpath}: {e}", cmd=rec["cmd"])
        return row
    row.update(ms=round(ms, 4), images_per_s=images_per_s(n, ms),
               host_us_per_run=round(float(kb.get("host_us_per_run", float("nan"))), 2),
               kernels=len(kb.get("kernels", [])), sum_kernel_ms=round(float(kb.get("sum_kernel_ms", 0)), 4),
               arena_peak_bytes=kb.get("arena_peak_bytes"), compile_ms=round(float(kb.get("compile_ms", 0)), 1),
               stats=kb.get("stats"), arch=kb.get("arch"), breakdown=kernel_breakdown(kb.get("kernels", [])))
    if "specialized_ms" in kb:  # --specialize: the graph with its symbols bound, timed alongside
        row.update(specialized_ms=round(float(kb["specialized_ms"]), 4),
                   generic_ms=round(float(kb.get("generic_ms", float("nan"))), 4))
    return row


def kernel_breakdown(kernels):
    """Kernel time by family (the kernel name's first word and, for convs, the filter size) and the
    slowest kernels: where the time of a whole-network run goes."""
    fam = {}
    for k in kernels:
        parts = str(k.get("name", "?")).split("_")
        key = parts[0] + ("_" + parts[3] if parts[0] == "conv" and len(parts) > 3 else "")
        n, ms = fam.get(key, (0, 0.0))
        fam[key] = (n + 1, ms + float(k.get("median_ms", 0)))
    top = sorted(kernels, key=lambda k: -float(k.get("median_ms", 0)))[:16]
    return {"families": {k: {"kernels": n, "ms": round(ms, 4)} for k, (n, ms) in
                         sorted(fam.items(), key=lambda kv: -kv[1][1])},
            "slowest": [{"name": k.get("name"), "ms": round(float(k.get("median_ms", 0)), 4)} for k in top]}


def graph_io_names(graph_path):
    """(input name, output name) of an imported single-input, single-output graph."""
    with open(graph_path) as f:
        g = json.load(f)
    inputs = g.get("inputs", {})
    names = list(inputs.keys()) if isinstance(inputs, dict) else [i.get("name") for i in inputs]
    outputs = g.get("outputs", [])
    if len(names) != 1 or len(outputs) != 1:
        raise ValueError(f"{graph_path}: expected 1 input and 1 output, found {names} and {outputs}")
    return names[0], outputs[0]


class KilnError(Exception):
    def __init__(self, rec):
        super().__init__(rec.get("error", "kiln failed"))
        self.rec = rec


def kiln_outputs(kiln, graph, x, dtype, work, cache_dir, timeout, tag, device="gpu"):
    """Runs `graph` on the numpy batch x (logical NCHW, written in the graph's dtype) with
    `kiln run --inputs/--output`; returns its only output as float32 numpy. Raises KilnError."""
    from onnx2kiln.safetensors import read_safetensors, write_safetensors
    in_name, out_name = graph_io_names(graph)
    ipath = os.path.join(work, f"{tag}.inputs.safetensors")
    opath = os.path.join(work, f"{tag}.got.safetensors")
    write_safetensors(ipath, {in_name: (dtype, x)})
    if os.path.exists(opath):
        os.remove(opath)
    rec, _ = run_cmd([kiln, "run", graph, "--inputs", ipath, "--output", opath, "--device", device], timeout,
                     kiln_env(cache_dir))
    os.remove(ipath)  # 77 MB per 128 f32 images: do not keep them around
    if not rec["ok"]:
        raise KilnError(rec)
    got = read_safetensors(opath)
    if out_name not in got:
        raise KilnError({"error": f"{opath} has no output '{out_name}' (has {sorted(got)})"})
    return got[out_name]


# ------------------------------------------------------------------------------- numbers

def images_per_s(n, ms):
    return round(n / ms * 1e3, 1) if ms and ms > 0 else None


def compare(got, ref):
    """Max |got - ref| / max |ref|, top-1 agreement and facts that tell whether the top-1 test
    means something (with random weights every image may get the same class)."""
    import numpy as np
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    out = {"images": int(ref.shape[0])}
    if got.shape != ref.shape:
        out["error"] = f"shape {list(got.shape)} != reference {list(ref.shape)}"
        return out
    bad = int(np.count_nonzero(~np.isfinite(got)))
    if bad:
        out["nonfinite"] = bad
    out["max_rel_err"] = float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-30)) \
        if not bad else float("inf")
    top_g, top_r = got.argmax(axis=1), ref.argmax(axis=1)
    out["top1_agree"] = int(np.count_nonzero(top_g == top_r))
    out["distinct_top1_classes_ref"] = int(len(np.unique(top_r)))
    # The reference's top-1 lead over its runner-up, relative to max |ref|: an error larger than
    # this margin may legitimately flip an image's class.
    srt = np.sort(ref, axis=1)
    out["min_top1_margin_rel"] = float(np.min(srt[:, -1] - srt[:, -2]) / max(float(np.max(np.abs(ref))), 1e-30))
    return out


def fmt_num(v, digits=4):
    """`digits` significant digits for floats; '-' for a missing value."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}×"


def summarize(rows, batches):
    """Ratios per N: kiln / torch.compile images/s (both kiln variants), kiln+graph / eager+graph,
    and at N=1 the latency ratio kiln+graph / eager+graph (below 1: kiln answers sooner)."""
    by = {(r["N"], r["system"]): r for r in rows if r.get("ms")}
    out = {}
    for n in batches:
        r = {}

        def ratio(a, b):  # images/s of a over images/s of b = ms of b over ms of a
            if (n, a) in by and (n, b) in by:
                return round(by[(n, b)]["ms"] / by[(n, a)]["ms"], 3)
            return None
        r["kiln_over_compile_img_s"] = ratio("kiln", "compile")
        r["kiln_graph_over_compile_img_s"] = ratio("kiln_graph", "compile")
        r["kiln_over_eager_img_s"] = ratio("kiln", "eager")
        r["kiln_graph_over_eager_graph_img_s"] = ratio("kiln_graph", "eager_graph")
        if n == 1 and (1, "kiln_graph") in by and (1, "eager_graph") in by:
            r["kiln_graph_latency_over_eager_graph_latency"] = round(
                by[(1, "kiln_graph")]["ms"] / by[(1, "eager_graph")]["ms"], 3)
        out[str(n)] = r
    return out


def markdown(data, batches):
    """The tables printed at the end (docs/PERFORMANCE.md style)."""
    env = data.get("env", {})
    lines = [f"### ResNet-50 f16 inference, {env.get('gpu', 'GPU ?')} "
             f"(torch {env.get('torch', '?')}, git {data.get('git', '?')})", "",
             "| N | system | latency ms | images/s | images/s vs torch.compile | note |",
             "| --- | --- | --- | --- | --- | --- |"]
    rows = data.get("throughput", [])
    by = {(r["N"], r["system"]): r for r in rows}
    for n in batches:
        comp = by.get((n, "compile"), {}).get("ms")
        for key, label in SYSTEMS:
            r = by.get((n, key))
            if r is None:
                continue
            if r.get("ms"):
                vs = f"{comp / r['ms']:.2f}×" if comp else "-"
                note = []
                if "host_us_per_run" in r:
                    note.append(f"host {r['host_us_per_run']} µs/run, {r.get('kernels')} kernels")
                if r.get("check_vs_eager_rel_err") is not None:
                    note.append(f"output vs eager: rel diff {fmt_num(r['check_vs_eager_rel_err'], 2)}")
                lines.append(f"| {n} | {label} | {r['ms']:.3f} | {r['images_per_s']:.0f} | {vs} | "
                             f"{'; '.join(note)} |")
            elif "skipped" in r:
                lines.append(f"| {n} | {label} | skipped | - | - | {r['skipped']} |")
            else:
                lines.append(f"| {n} | {label} | ERR | - | - | {str(r.get('error', ''))[:80]} |")
    ratios = data.get("ratios", {})
    if any(v is not None for r in ratios.values() for v in r.values()):
        lines += ["", "| N | kiln / torch.compile | kiln+graph / torch.compile | kiln / eager | "
                      "kiln+graph / eager+graph |", "| --- | --- | --- | --- | --- |"]
        for n in batches:
            r = ratios.get(str(n), {})
            lines.append(f"| {n} | {fmt_ratio(r.get('kiln_over_compile_img_s'))} | "
                         f"{fmt_ratio(r.get('kiln_graph_over_compile_img_s'))} | "
                         f"{fmt_ratio(r.get('kiln_over_eager_img_s'))} | "
                         f"{fmt_ratio(r.get('kiln_graph_over_eager_graph_img_s'))} |")
        lat = ratios.get("1", {}).get("kiln_graph_latency_over_eager_graph_latency")
        if lat is not None:
            lines.append("")
            lines.append(f"N=1 latency, kiln + CUDA graph / PyTorch eager + CUDA graph: **{lat:.3f}** "
                         f"({'kiln faster' if lat < 1 else 'kiln slower'}); ratios above are images/s (>1: kiln faster).")
    fr = data.get("first_result", {})
    if fr:
        lines += ["", "| time to first result (N=1) | import s | run s | total s | detail |",
                  "| --- | --- | --- | --- | --- |"]
        for key, label in (("kiln_cold", "kiln, fresh KILN_CACHE_DIR"), ("kiln_warm", "kiln, same cache and import dir again")):
            r = fr.get(key)
            if not r:
                continue
            k = r.get("kiln_run", {})
            detail = (f"CUDA init {k.get('cuda_init_ms', '?')} ms, compile {k.get('compile_ms', '?')} ms "
                      f"({k.get('nvrtc', '?')} nvrtc, {k.get('disk_hits', '?')} disk hits)") if k else \
                str(r.get("error", ""))[:80]
            lines.append(f"| {label} | {fmt_num(r.get('import_s'), 3)} | {fmt_num(r.get('run_s'), 3)} | "
                         f"{fmt_num(r.get('total_s'), 3)} | {detail} |")
        for n, s in sorted(fr.get("torch_compile_first_call_s", {}).items(), key=lambda kv: int(kv[0])):
            lines.append(f"| torch.compile first call, N={n} | - | {fmt_num(s, 3)} | {fmt_num(s, 3)} | "
                         f"dynamo + inductor (cache: {data.get('inductor_cache', '?').split(' ')[0]}) + first run |")
        eager = next((r for r in data.get("throughput", []) if r["system"] == "eager" and "first_call_s" in r), None)
        if eager:
            lines.append(f"| PyTorch eager first call, N={eager['N']} | - | {fmt_num(eager['first_call_s'], 3)} | "
                         f"{fmt_num(eager['first_call_s'], 3)} | includes cudnn.benchmark's search |")
        if "export_s" in data.get("export", {}):
            lines.append(f"| (torch.onnx.export, once) | - | - | {fmt_num(data['export']['export_s'], 3)} | |")
    corr = data.get("correctness", {})
    if corr:
        lines += ["", f"| correctness, {corr.get('images', '?')} random images | max rel err | target | "
                      "top-1 agree | distinct top-1 (ref) | min top-1 margin (rel) |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for key, label, target in (("kiln_f32_vs_torch_f32", "kiln f32 vs torch f32 (TF32 off)", F32_TARGET),
                                   ("kiln_f16_vs_torch_f16", "kiln f16 vs torch f16", F16_TARGET),
                                   ("kiln_f16_vs_torch_f32", "kiln f16 vs torch f32", None),
                                   ("torch_f16_vs_torch_f32", "torch f16 vs torch f32 (context)", None),
                                   ("torch_f32_vs_cpu_f64", "torch f32 GPU vs torch f64 CPU (2 images)", None),
                                   ("kiln_f32_vs_cpu_f64", "kiln f32 vs torch f64 CPU (2 images)", None)):
            c = corr.get(key)
            if not c:
                continue
            if "max_rel_err" not in c:
                lines.append(f"| {label} | ERR | - | - | - | {str(c.get('error', ''))[:80]} |")
                continue
            ok = "" if target is None else (" ✓" if c["max_rel_err"] <= target else " ✗")
            lines.append(f"| {label} | {fmt_num(c['max_rel_err'], 3)}{ok} | {fmt_num(target, 1)} | "
                         f"{c['top1_agree']} / {c['images']} | {c['distinct_top1_classes_ref']} | "
                         f"{fmt_num(c['min_top1_margin_rel'], 2)} |")
    if data.get("errors"):
        lines += ["", "errors: " + "; ".join(f"{e['step']}: {e['error']}" for e in data["errors"])]
    return "\n".join(lines)


def plot(rows, batches, path, title):
    """images/s per batch size for each system; returns a note when there is no plot."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display on the GPU machine
        import matplotlib.pyplot as plt
    except Exception as e:  # ImportError, or a broken install
        return f"matplotlib is not importable ({e.__class__.__name__}: {e}): no plot written"
    try:
        return draw(plt, rows, batches, path, title)
    except Exception as e:  # an old matplotlib's API: the measurements matter more than the picture
        plt.close("all")
        return f"the plot failed ({e.__class__.__name__}: {e}): no plot written"


def draw(plt, rows, batches, path, title):
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    drawn = 0
    for key, label in SYSTEMS:
        pts = sorted((r["N"], r["images_per_s"]) for r in rows if r["system"] == key and r.get("images_per_s"))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                    linestyle="-" if key.startswith("kiln") else "--")
            drawn += 1
    if not drawn:
        plt.close(fig)
        return "no throughput measured: no plot written"
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])
    ax.minorticks_off()
    ax.set_xlabel("batch size N")
    ax.set_ylabel("images / s (higher is better)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# ------------------------------------------------------------------------------- PyTorch

def build_resnet50(seed):
    """torchvision's ResNet-50 (eval, f32, CPU) with the weights tools/export_torchvision.py gives
    it for the same seed: its build_models, then the same random BatchNorm statistics."""
    import torch
    from export_torchvision import build_models
    torch.manual_seed(seed)
    m, shape = build_models(["resnet50"])["resnet50"]
    m = m.eval()
    for mod in m.modules():  # as export_torchvision.export: exercise the BN math (not identity)
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    return m, shape


def export_onnx(m, shape, path, opset):
    """The export of tools/export_torchvision.py: input x, output y, dynamic batch dim N."""
    import torch
    x = torch.randn(2, *shape)
    kw = dict(input_names=["x"], output_names=["y"], opset_version=opset,
              dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, do_constant_folding=True)
    with torch.no_grad():
        try:
            torch.onnx.export(m, (x,), path, dynamo=False, **kw)
        except TypeError:  # torch < 2.5 has no `dynamo`
            torch.onnx.export(m, (x,), path, **kw)


def do_bench_ms(fn, args):
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms, return_mode="median"))


def rel_err_t(a, b):
    """max |a - b| / max |b| of two torch tensors, in f32."""
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def capture_cuda_graph(torch, model, x):
    """model(x) captured in one CUDA graph on the static input x. Warm-up on a side stream first
    (cudnn.benchmark must pick its algorithms before capture, where it cannot run)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    return g, y


def torch_eager_rows(torch, m16, batches, args, res):
    """Eager and eager + CUDA graph rows per N; also the first eager call (cudnn.benchmark)."""
    rows = []
    for n in batches:
        x = torch.randn(n, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
        try:
            with torch.inference_mode():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                y_ref = m16(x)  # includes cudnn.benchmark's algorithm search for this shape
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                ms = do_bench_ms(lambda: m16(x), args)
            rows.append({"N": n, "system": "eager", "ms": round(ms, 4), "images_per_s": images_per_s(n, ms),
                         "first_call_s": round(first, 3)})
            print(json.dumps(rows[-1]), flush=True)
        except Exception as e:
            rows.append({"N": n, "system": "eager", "error": f"{e.__class__.__name__}: {e}"[:600]})
            res.error(f"eager N={n}", rows[-1])
            continue
        try:
            with torch.inference_mode():
                g, y = capture_cuda_graph(torch, m16, x)
                g.replay()
                torch.cuda.synchronize()
                err = rel_err_t(y, y_ref)  # the replay computes what eager computed
                ms = do_bench_ms(lambda: g.replay(), args)
            rows.append({"N": n, "system": "eager_graph", "ms": round(ms, 4), "images_per_s": images_per_s(n, ms),
                         "check_vs_eager_rel_err": err})
            g = y = None  # frees the graph's memory pool (with empty_cache below)
        except Exception as e:
            rows.append({"N": n, "system": "eager_graph", "error": f"{e.__class__.__name__}: {e}"[:600]})
            res.error(f"eager+graph N={n}", rows[-1])
        print(json.dumps(rows[-1]), flush=True)
        x = y_ref = None
        torch.cuda.empty_cache()
    return rows


def torch_compile_rows(torch, m16, batches, args, res, deadline):
    """torch.compile (default mode, freezing) per N: first-call time and do_bench median. Skips a
    batch size when less than --compile-reserve-s is left of --budget-s (a compile of ResNet-50
    takes ~15-20 s), so that the run ends with its tables instead of at the step timeout."""
    import torch._inductor.config as icfg
    icfg.freezing = True  # weights become constants: what a deployment would compile
    mc = torch.compile(m16, dynamic=False)  # one specialized graph per batch size, as deployed
    rows, first_calls = [], {}
    for n in batches:
        left = deadline - time.perf_counter()
        if left < args.compile_reserve_s:
            rows.append({"N": n, "system": "compile",
                         "skipped": f"time budget: {left:.0f} s left of --budget-s {args.budget_s}"})
            res.note(f"torch.compile N={n} skipped ({rows[-1]['skipped']})")
            continue
        x = torch.randn(n, 3, 224, 224, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
        try:
            with torch.inference_mode():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                y = mc(x)
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                err = rel_err_t(y, m16(x))  # freezing folds BN into the convs: small f16 differences
                ms = do_bench_ms(lambda: mc(x), args)
            first_calls[str(n)] = round(first, 3)
            rows.append({"N": n, "system": "compile", "ms": round(ms, 4), "images_per_s": images_per_s(n, ms),
                         "first_call_s": round(first, 3), "check_vs_eager_rel_err": err})
        except Exception as e:
            rows.append({"N": n, "system": "compile", "error": f"{e.__class__.__name__}: {e}"[:600]})
            res.error(f"torch.compile N={n}", rows[-1])
        print(json.dumps(rows[-1]), flush=True)
        x = None
        torch.cuda.empty_cache()
    return rows, first_calls


class Fp32Ieee:
    """TF32 off for cuDNN convolutions inside the block (PyTorch's default lets f32 convs use TF32,
    ~1e-3 relative error: not a reference for a 1e-4 check); restored on exit so that nothing else
    in the run sees a changed setting. cuBLAS matmuls are IEEE f32 by default (checked, recorded)."""

    def __init__(self, torch):
        self.torch = torch
        self.conv = getattr(torch.backends.cudnn, "conv", None)
        self.new_api = self.conv is not None and hasattr(self.conv, "fp32_precision")

    def __enter__(self):
        if self.new_api:  # torch >= 2.9; the allow_tf32 flags are the deprecated form
            self.old = self.conv.fp32_precision
            self.conv.fp32_precision = "ieee"
        else:
            self.old = self.torch.backends.cudnn.allow_tf32
            self.torch.backends.cudnn.allow_tf32 = False
        return self

    def __exit__(self, *exc):
        if self.new_api:
            self.conv.fp32_precision = self.old
        else:
            self.torch.backends.cudnn.allow_tf32 = self.old
        return False

    def describe(self):
        return {"cudnn_conv": "fp32_precision=ieee" if self.new_api else "allow_tf32=False",
                "float32_matmul_precision": self.torch.get_float32_matmul_precision()}


def correctness(torch, m, m16, kiln, graphs, args, work, cache_dir, res):
    """kiln f32 / f16 vs torch f32 / f16 on the same weights and args.check_images random images,
    in chunks of args.check_chunk (one `kiln run` per chunk and dtype)."""
    import numpy as np
    out = {"images": args.check_images, "chunk": args.check_chunk}
    gen = torch.Generator().manual_seed(args.seed + 1)
    X = torch.randn(args.check_images, 3, 224, 224, generator=gen)  # CPU f32, logical NCHW
    m32 = copy.deepcopy(m).cuda()
    fp32 = Fp32Ieee(torch)
    out["torch_f32_settings"] = fp32.describe()
    chunks = [(i, min(i + args.check_chunk, args.check_images)) for i in range(0, args.check_images, args.check_chunk)]
    ref32, ref16 = [], []
    with torch.inference_mode(), fp32:
        for a, b in chunks:
            ref32.append(m32(X[a:b].cuda()).float().cpu().numpy())
    with torch.inference_mode():
        for a, b in chunks:
            x16 = X[a:b].half().cuda().to(memory_format=torch.channels_last)
            ref16.append(m16(x16).float().cpu().numpy())
    ref32, ref16 = np.concatenate(ref32), np.concatenate(ref16)
    del m32
    torch.cuda.empty_cache()
    out["torch_f16_vs_torch_f32"] = compare(ref16, ref32)

    # What the f32 reference itself is worth: torch f32 on the GPU vs f64 on the CPU, 2 images.
    f64_ref = None
    try:
        t0 = time.perf_counter()
        with torch.inference_mode():
            f64_ref = copy.deepcopy(m).double()(X[:2].double()).numpy()
        out["torch_f32_vs_cpu_f64"] = compare(ref32[:2], f64_ref)
        out["torch_f32_vs_cpu_f64"]["seconds"] = round(time.perf_counter() - t0, 2)
    except Exception as e:
        out["torch_f32_vs_cpu_f64"] = {"error": f"{e.__class__.__name__}: {e}"[:400]}

    for dtype in ("f32", "f16"):
        graph = graphs.get(dtype)
        key = f"kiln_{dtype}_vs_torch_{dtype}"
        if graph is None:
            out[key] = {"error": f"no {dtype} graph (kiln import failed)"}
            continue
        got = []
        try:
            t0 = time.perf_counter()
            for a, b in chunks:
                x = X[a:b].numpy() if dtype == "f32" else X[a:b].half().numpy()
                got.append(kiln_outputs(kiln, graph, x, dtype, work, cache_dir, args.timeout,
                                        f"check_{dtype}_{a}"))
            got = np.concatenate(got)
            out[f"kiln_{dtype}_run_s"] = round(time.perf_counter() - t0, 2)
        except KilnError as e:
            out[key] = {"error": str(e), "stderr_tail": e.rec.get("stderr_tail", "")}
            res.error(f"correctness {dtype}", out[key])
            continue
        except Exception as e:  # an unreadable output file, ...: the other dtype still runs
            out[key] = {"error": f"{e.__class__.__name__}: {e}"[:600]}
            res.error(f"correctness {dtype}", out[key])
            continue
        if dtype == "f32":
            out[key] = compare(got, ref32)
            out[key]["target"] = F32_TARGET
            if f64_ref is not None:
                out["kiln_f32_vs_cpu_f64"] = compare(got[:2], f64_ref)
        else:
            out[key] = compare(got, ref16)
            out[key]["target"] = F16_TARGET
            out["kiln_f16_vs_torch_f32"] = compare(got, ref32)
        c = out[key]
        c["pass"] = bool(c.get("max_rel_err", float("inf")) <= c["target"])
        print(f"correctness {key}: max rel err {c.get('max_rel_err')} (target {c['target']}), "
              f"top-1 {c.get('top1_agree')} / {c['images']} agree", flush=True)
    return out


# ------------------------------------------------------------------------------- main

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "kiln"), help="the kiln CLI (default build/kiln)")
    ap.add_argument("--batches", default="1,32,128", help="comma-separated batch sizes (default 1,32,128)")
    ap.add_argument("--out", default=None, help="where the JSON and the plot go (default $OUT, else a temp dir)")
    ap.add_argument("--work", default=None, help="scratch directory for ONNX/graphs/caches (default: a new temp "
                                                 "dir, removed at the end unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    ap.add_argument("--no-cold", action="store_true", help="skip the time-to-first-result measurement")
    ap.add_argument("--check-images", type=int, default=256, help="random images of the correctness check")
    ap.add_argument("--check-chunk", type=int, default=128, help="images per `kiln run` of the check")
    ap.add_argument("--seed", type=int, default=0, help="model seed (as export_torchvision.py --seed)")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--warmup-ms", type=float, default=50, help="do_bench warmup (ms), as bench_memory.py")
    ap.add_argument("--rep-ms", type=float, default=300, help="do_bench rep (ms), as bench_memory.py")
    ap.add_argument("--kiln-warmup", type=int, default=10, help="kiln bench --warmup")
    ap.add_argument("--kiln-iters", type=int, default=50, help="kiln bench --iters")
    ap.add_argument("--kiln-bench-args", default="",
                    help="more arguments of every `kiln bench`, e.g. --kiln-bench-args=--autotune")
    ap.add_argument("--timeout", type=int, default=240, help="limit of each kiln subprocess (s)")
    ap.add_argument("--budget-s", type=float, default=420,
                    help="soft limit of the whole run (s): torch.compile batch sizes that would start with "
                         "less than --compile-reserve-s left are skipped")
    ap.add_argument("--compile-reserve-s", type=float, default=40)
    args = ap.parse_args(argv)
    try:
        args.batch_list = [int(b) for b in args.batches.split(",") if b.strip()]
    except ValueError:
        ap.error(f"--batches: expected comma-separated positive integers, found '{args.batches}'")
    if not args.batch_list or min(args.batch_list) < 1:
        ap.error(f"--batches: expected comma-separated positive integers, found '{args.batches}'")
    if args.check_images < 1 or args.check_chunk < 1:
        ap.error("--check-images and --check-chunk must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    out_dir = args.out or os.environ.get("OUT") or tempfile.mkdtemp(prefix="bench_resnet50_out.")
    os.makedirs(out_dir, exist_ok=True)
    work = args.work or tempfile.mkdtemp(prefix="bench_resnet50.")
    os.makedirs(work, exist_ok=True)
    res = Results(os.path.join(out_dir, "bench_resnet50.json"))
    res.data["args"] = {k: v for k, v in vars(args).items() if k != "batch_list"}
    res.data["out_dir"], res.data["work_dir"] = out_dir, work
    # `timeout` (tools/device_run.sh) sends SIGTERM: turn it into SystemExit so that the partial
    # results are still saved and printed below.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return run_all(args, res, out_dir, work)
    except (KeyboardInterrupt, SystemExit) as e:
        res.error("run", {"error": f"interrupted ({e.__class__.__name__} {getattr(e, 'code', '')}): "
                                   f"the results are partial"})
        res.data["ratios"] = summarize(res.data.get("throughput", []), args.batch_list)
        print(markdown(res.data, args.batch_list), flush=True)
        return 1
    finally:
        res.save()
        if not args.keep and not args.work:  # ~400 MB of ONNX, graphs, weights and caches
            shutil.rmtree(work, ignore_errors=True)


def run_all(args, res, out_dir, work):
    deadline = time.perf_counter() + args.budget_s
    d = res.data
    kiln = os.path.abspath(args.kiln)
    batches = args.batch_list

    # A fresh inductor cache (Triton's lives inside it), so that torch.compile's first call is a
    # cold compile like kiln's cold run; must be set before torch is imported.
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "inductor-cache")
        d["inductor_cache"] = "fresh (" + os.environ["TORCHINDUCTOR_CACHE_DIR"] + ")"
    else:
        d["inductor_cache"] = "given by TORCHINDUCTOR_CACHE_DIR (may be warm): " + os.environ["TORCHINDUCTOR_CACHE_DIR"]
    cache_dir = os.path.join(work, "kiln-cache")  # fresh: the cold measurement is the first use

    g, gout = run_cmd(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], 10)
    d["git"] = gout.strip() if g["ok"] else "unknown"
    v, vout = run_cmd([kiln, "--version"], 20)
    d["kiln_version"] = vout.strip() if v["ok"] else v.get("error")
    if not v["ok"]:
        res.error("kiln --version", v)
    res.save()

    try:
        import numpy  # the safetensors helpers and the comparison need it
        import torch
        import torchvision
        import triton
        import triton.testing  # noqa: F401
    except Exception as e:
        res.error("import torch/torchvision/triton/numpy", {"error": f"{e.__class__.__name__}: {e}"})
        res.save()
        print(markdown(d, batches))
        return 1
    if not torch.cuda.is_available():
        res.error("torch.cuda", {"error": "torch sees no CUDA device"})
        res.save()
        return 1
    torch.backends.cudnn.benchmark = True
    d["env"] = {"gpu": safe(torch.cuda.get_device_name), "torch": torch.__version__,
                "torchvision": torchvision.__version__, "triton": triton.__version__,
                "cuda": torch.version.cuda, "cudnn": safe(torch.backends.cudnn.version),
                "numpy": numpy.__version__, "python": sys.version.split()[0]}
    print(json.dumps(d["env"]), flush=True)

    # ---- the model and its ONNX export
    onnx_path = os.path.join(work, "resnet50.onnx")
    m = None
    try:
        t0 = time.perf_counter()
        m, shape = build_resnet50(args.seed)
        export_onnx(m, shape, onnx_path, args.opset)
        d["export"] = {"onnx": onnx_path, "export_s": round(time.perf_counter() - t0, 2), "opset": args.opset,
                       "seed": args.seed, "bytes": os.path.getsize(onnx_path)}
        print(f"exported {onnx_path} in {d['export']['export_s']} s", flush=True)
    except Exception as e:
        d["export"] = {"error": f"{e.__class__.__name__}: {e}"[:1000]}
        res.error("export", d["export"])
        onnx_path = None
    res.save()

    # ---- kiln: time to first result (cold, then warm), the graphs
    graphs = {}
    d["first_result"] = {}
    if onnx_path:
        shutil.rmtree(cache_dir, ignore_errors=True)
        if not args.no_cold:
            # Warm: a second process on the same files: the kernel disk cache is warm and
            # `kiln import` finds its own up-to-date conversion (content-hash stamp); the import
            # and run parts are reported separately.
            for key, gdir in (("kiln_cold", "kiln_f16"), ("kiln_warm", "kiln_f16")):
                rec, graph = kiln_first_result(kiln, onnx_path, os.path.join(work, gdir), cache_dir, args.timeout)
                d["first_result"][key] = rec
                if "error" in rec:
                    res.error(f"first result ({key})", rec)
                else:
                    k = rec["kiln_run"]
                    print(f"{key}: import {rec['import_s']:.2f} s + run {rec['run_s']:.2f} s "
                          f"({k.get('nvrtc', '?')} nvrtc, compile {k.get('compile_ms', '?')} ms; "
                          f"{k.get('build', 'no build line')})", flush=True)
                if graph and "f16" not in graphs:
                    graphs["f16"] = graph
                res.save()
        def import_as(dtype):
            rec, graph = kiln_import(kiln, onnx_path, os.path.join(work, "kiln_" + dtype), dtype, "NHWC",
                                     cache_dir, args.timeout)
            d.setdefault("import", {})[dtype] = rec
            if graph:
                graphs[dtype] = graph
            else:
                res.error("kiln import " + dtype, rec)

        if "f16" not in graphs:  # --no-cold, or the cold import failed: one more try
            import_as("f16")
        if not args.no_check:
            import_as("f32")
    d["graphs"] = graphs
    res.save()

    # ---- kiln throughput / latency
    rows = []
    d["throughput"] = rows
    for n in batches:
        for cg in (False, True):
            key = "kiln_graph" if cg else "kiln"
            if "f16" not in graphs:
                rows.append({"N": n, "system": key, "error": "no f16 graph (export or kiln import failed)"})
                continue
            row = kiln_bench(kiln, graphs["f16"], n, cg, work, cache_dir, args.timeout, args.kiln_warmup,
                             args.kiln_iters, shlex.split(args.kiln_bench_args))
            rows.append(row)
            if "error" in row:
                res.error(f"kiln bench N={n}{' --cuda-graph' if cg else ''}", row)
            print(json.dumps({k: v for k, v in row.items() if k != "stats"}), flush=True)
            res.save()

    # ---- PyTorch eager and eager + CUDA graph
    m16 = None
    if m is not None:
        try:
            m16 = copy.deepcopy(m).half().cuda().to(memory_format=torch.channels_last)
        except Exception as e:
            res.error("torch model to GPU", {"error": f"{e.__class__.__name__}: {e}"[:600]})
    if m16 is not None:
        rows.extend(torch_eager_rows(torch, m16, batches, args, res))
    res.save()

    # ---- correctness
    if not args.no_check and m16 is not None:
        try:
            d["correctness"] = correctness(torch, m, m16, kiln, graphs, args, work, cache_dir, res)
        except Exception as e:
            d["correctness"] = {"error": f"{e.__class__.__name__}: {e}"[:1000]}
            res.error("correctness", d["correctness"])
        res.save()

    # ---- torch.compile
    if not args.no_compile and m16 is not None:
        try:
            crow, first_calls = torch_compile_rows(torch, m16, batches, args, res, deadline)
            rows.extend(crow)
            d["first_result"]["torch_compile_first_call_s"] = first_calls
        except Exception as e:
            res.error("torch.compile", {"error": f"{e.__class__.__name__}: {e}"[:1000]})
        res.save()

    # ---- summary
    d["ratios"] = summarize(rows, batches)
    png = os.path.join(out_dir, "resnet50_images_per_s.png")
    why = plot(rows, batches, png, f"ResNet-50 f16 inference, {d['env']['gpu']}")
    if why:
        res.note(why)
    else:
        d["plot"] = png
    res.save()
    print()
    print(markdown(d, batches))
    print(f"\nwrote {res.path}" + (f" and {png}" if not why else ""))
    return 0 if not d["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
