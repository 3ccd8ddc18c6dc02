#!/usr/bin/env python3
"""The ONNX-importer fuzz target (hypothesis): structure-aware models (onnx_models.py) imported
in-process and judged by the oracle (onnx_oracle.py).

    python3 tests/fuzz/fuzz_onnx_importer.py [--seconds N] [--kiln PATH | --no-kiln]
                                             [--crashes DIR] [--keep-going] [--seed S]
                                             [--batch-seed S]

runs batches of hypothesis examples with fresh seeds until N seconds (default 60) have passed,
then prints `executions: E` (every import) and exits 0; on a bug it prints the failure, writes
the case (shrunk with --shrink) to DIR (default build-fuzz/crashes/onnx_importer) as
crash-<hash>.onnx (with its side files in crash-<hash>.side/) and exits 1 (with --keep-going:
goes on with the next batch, and exits 1 at the end). Every success goes through `kiln check` when a kiln CLI is
found (build/kiln, or KILN_CLI, or --kiln).

Memory: the process's address space is limited (2 GiB above what it uses after start-up), so
that an unbounded allocation ends as a MemoryError (a bug) rather than the machine's memory.
"""
import argparse
import hashlib
import os
import random
import resource
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import onnx_models  # noqa: E402
import onnx_oracle  # noqa: E402
import hypothesis  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

BATCH = 200
EXTRA_ADDRESS_SPACE = 2 << 30


def write_case(case, workdir):
    """Lays out a case: workdir/model/m.onnx with its side files ("@NAME" is a symlink NAME to
    the value), and workdir/outside/ holding a file no model may read. Returns the model path."""
    model_dir, _, outside = onnx_oracle.case_dirs(workdir)
    os.makedirs(model_dir)
    os.makedirs(outside)
    with open(os.path.join(outside, onnx_models.DATA_FILE), "wb") as f:
        f.write(b"outside data: never to be read" * 64)
    for name, data in case.side.items():
        if name.startswith("@"):
            os.symlink(data, os.path.join(model_dir, name[1:]))
        else:
            with open(os.path.join(model_dir, name), "wb") as f:
                f.write(data)
    path = os.path.join(model_dir, onnx_models.MODEL_FILE)
    with open(path, "wb") as f:
        f.write(case.data)
    return path


class Runner:
    def __init__(self, kiln, crashes, deadline):
        self.kiln, self.crashes, self.deadline = kiln, crashes, deadline
        self.executions = 0
        self.outcomes = {"ok": 0, "refused": 0}
        self.last_failure = None
        self.shrinking = False
        self.base = tempfile.mkdtemp(prefix="onnxfuzz-")

    def one(self, case):
        """Imports one case; raises onnx_oracle.Bug."""
        if time.monotonic() > self.deadline and not self.shrinking:
            return  # the batch runs out quickly once time is up
        self.executions += 1
        work = tempfile.mkdtemp(dir=self.base)
        try:
            path = write_case(case, work)
            try:
                o = onnx_oracle.check_file(path, work, self.kiln)
            except onnx_oracle.Bug:
                self.last_failure = case
                self.shrinking = True  # only shrinking runs cases after this in the batch
                raise
            self.outcomes["ok" if o.rc == 0 else "refused"] += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def save(self, case):
        h = hashlib.sha1(case.data + repr(sorted(case.side.items())).encode()).hexdigest()[:12]
        os.makedirs(self.crashes, exist_ok=True)
        path = os.path.join(self.crashes, f"crash-{h}.onnx")
        with open(path, "wb") as f:
            f.write(case.data)
        if case.side:
            side = os.path.join(self.crashes, f"crash-{h}.side")
            os.makedirs(side, exist_ok=True)
            for name, data in case.side.items():
                with open(os.path.join(side, name.lstrip("@")), "wb") as f:
                    f.write(data.encode() if isinstance(data, str) else data)
        return path

    def batch(self, seed, shrink=False, examples=BATCH, derandomize=False):
        """One hypothesis run of `examples` cases from `seed` (derandomize: the same cases every
        time, hypothesis's own choice). Raises the first Bug."""
        phases = [Phase.generate] + ([Phase.shrink] if shrink else [])
        self.shrinking = False

        @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
                  suppress_health_check=list(HealthCheck), phases=phases, print_blob=False)
        @given(onnx_models.cases())
        def fuzz(case):
            self.one(case)
        if not derandomize:
            fuzz = hypothesis.seed(seed)(fuzz)
        fuzz()


def load_case(path):
    """A saved case: the model file and the side files in PATH's .side directory (a text file
    whose name was "@NAME" is written back as a symlink only by the corpus; here: a file)."""
    with open(path, "rb") as f:
        data = f.read()
    side = {}
    side_dir = os.path.splitext(path)[0] + ".side"
    if os.path.isdir(side_dir):
        for name in os.listdir(side_dir):
            with open(os.path.join(side_dir, name), "rb") as f:
                side[name] = f.read()
    return onnx_models.Case(data, side, os.path.basename(path))


def replay(paths, kiln):
    """Runs saved cases through the oracle; prints each result. Returns the number of bugs."""
    bugs = 0
    for p in paths:
        work = tempfile.mkdtemp(prefix="onnxfuzz-replay-")
        try:
            o = onnx_oracle.check_file(write_case(load_case(p), work), work, kiln)
            print(f"{p}: ok (exit {o.rc}) {o.stderr.strip().splitlines()[-1:] }")
        except onnx_oracle.Bug as e:
            bugs += 1
            print(f"{p}: BUG: {e}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return bugs


def limit_memory():
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * resource.getpagesize()
    limit = vm + EXTRA_ADDRESS_SPACE
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--kiln", help="the kiln CLI for `kiln check` (default: build/kiln, KILN_CLI)")
    p.add_argument("--no-kiln", action="store_true", help="no kiln check of the written graphs")
    p.add_argument("--crashes", default=os.path.join(onnx_oracle.ROOT, "build-fuzz", "crashes",
                                                     "onnx_importer"))
    p.add_argument("--keep-going", action="store_true")
    p.add_argument("--seed", type=int, help="the first batch's seed (default: random)")
    p.add_argument("--batch-seed", type=int,
                   help="run the one batch a BUG line names (its batch seed) and stop")
    p.add_argument("--summary", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--shrink", action="store_true",
                   help="shrink a failing case (slow; the deadline does not stop it)")
    p.add_argument("--replay", nargs="+", metavar="CASE",
                   help="run these saved cases (crash-*.onnx) instead of fuzzing")
    args = p.parse_args(argv)
    kiln = None if args.no_kiln else (args.kiln or onnx_oracle.default_kiln())
    if args.replay:
        return 1 if replay(args.replay, kiln) else 0
    import onnx2kiln.convert  # noqa: F401  (imported before the memory limit and the clock)
    import onnxruntime  # noqa: F401
    limit_memory()
    start = time.monotonic()
    r = Runner(kiln, args.crashes, start + args.seconds)
    rng = random.Random(args.seed)
    print(f"fuzz_onnx_importer: {args.seconds:g} s, kiln check: {kiln or 'none'}", flush=True)
    failures = 0
    try:
        while time.monotonic() < r.deadline:
            s = args.batch_seed if args.batch_seed is not None else rng.randrange(2**32)
            try:
                r.batch(s, args.shrink)
            except Exception as e:  # noqa: BLE001 - hypothesis re-raises the shrunk failure
                failures += 1
                case = r.last_failure
                path = r.save(case) if case is not None else "(no case)"
                print(f"fuzz_onnx_importer: BUG (batch seed {s}, {case.what if case else '?'}): "
                      f"{type(e).__name__}: {e}\n  input: {path}", flush=True)
                if args.summary:
                    print("SIGNATURE", str(e).strip().splitlines()[-1][:300], flush=True)
                if not args.keep_going:
                    break
            if args.batch_seed is not None:
                break
    finally:
        shutil.rmtree(r.base, ignore_errors=True)
    took = time.monotonic() - start
    print(f"fuzz_onnx_importer: executions: {r.executions} ({r.executions / took:.0f}/s) in "
          f"{took:.0f} s; converted {r.outcomes['ok']}, refused {r.outcomes['refused']}; "
          f"bugs: {failures}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
