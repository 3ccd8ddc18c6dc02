"""The oracle of the ONNX-importer fuzz target: runs the importer in-process on one model file and
says whether what it did is allowed.

Allowed: exit status 0 with a graph file written (checked by `kiln check` when a kiln CLI is
given: the importer runs it itself, as `kiln import` does), or exit status 2 with exactly one
stderr line `onnx2kiln: error: ...` naming the model file. Everything else is a bug: exit status 1
(an exception in the importer, with its traceback), any other exception, more stderr lines (a
Python warning beside the error line), a case running past its time limit (a hang), a file opened
outside the model's directory and the output directory (external data must stay inside the
model's directory), and a graph kiln refuses although onnxruntime runs the model (the importer
wrote something kiln does not read as the model).

The importer is called through its command line's main() in the same process (no subprocess per
case, except the optional `kiln check`), so thousands of cases run a minute.
"""
import contextlib
import io
import os
import signal
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(ROOT, "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

from onnx2kiln import cli, kiln_check  # noqa: E402

# One case may take this long (seconds) before it counts as a hang.
CASE_TIME_LIMIT = 10.0

# The name of the directory, beside the model's, that holds files no model may read.
OUTSIDE = "outside"


class Bug(AssertionError):
    """The importer did something a user error is not allowed to do (see the module doc)."""


class CaseTimeout(BaseException):
    """A case ran past CASE_TIME_LIMIT (a BaseException, so the importer's main() cannot catch
    it as an internal error)."""


def default_kiln():
    """The built kiln CLI (env KILN_CLI, else build/kiln), or None when there is none."""
    # kiln warns about KILN_* variables it does not know: its checks run without this one.
    k = os.environ.pop("KILN_CLI", None) or os.path.join(ROOT, "build", "kiln")
    return k if os.path.isfile(k) and os.access(k, os.X_OK) else None


# ------------------------------------------------------------------------------ file opens

class _OpenWatch:
    """Records every file the process opens (an audit hook: Python's open() and os.open(), which
    onnx's external-data reader uses) whose real path is in one of the watched directories."""

    def __init__(self):
        self.watched = []
        self.seen = []
        sys.addaudithook(self._hook)

    def _hook(self, event, args):
        if event != "open" or not self.watched or not args or not isinstance(args[0], (str, bytes)):
            return
        path = os.fsdecode(args[0])
        real = os.path.realpath(path)
        for w in self.watched:
            if real == w or real.startswith(w + os.sep):
                self.seen.append(path)

    @contextlib.contextmanager
    def watching(self, dirs):
        self.watched, self.seen = [os.path.realpath(d) for d in dirs], []
        try:
            yield self.seen
        finally:
            self.watched = []


_WATCH = None


def _watch():
    global _WATCH
    if _WATCH is None:
        _WATCH = _OpenWatch()
    return _WATCH


def _alarm(signum, frame):
    raise CaseTimeout()


@contextlib.contextmanager
def time_limit(seconds):
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------------------ one case

class Outcome:
    def __init__(self, rc, stdout, stderr, out_dir):
        self.rc, self.stdout, self.stderr, self.out_dir = rc, stdout, stderr, out_dir

    @property
    def error_line(self):
        lines = self.stderr.splitlines()
        return lines[0] if self.rc == 2 and len(lines) == 1 else None


def case_dirs(workdir):
    """(model dir, output dir, the directory beside them no model may read)."""
    return (os.path.join(workdir, "model"), os.path.join(workdir, "out"),
            os.path.join(workdir, OUTSIDE))


def run_importer(model_path, out_dir, kiln=None):
    """cli.main() on model_path, kiln check with `kiln` (None: no check). Returns an Outcome;
    raises CaseTimeout past the time limit."""
    argv = [model_path, "--out", out_dir, "--force"] + (["--kiln", kiln] if kiln else [])
    out, err = io.StringIO(), io.StringIO()
    real_find = kiln_check.find_kiln
    kiln_check.find_kiln = (lambda explicit=None: explicit) if kiln is None else real_find
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings(record=True) as caught, time_limit(CASE_TIME_LIMIT):
            warnings.simplefilter("always")  # a fresh `kiln import` shows each warning once
            rc = cli.main(argv)
    finally:
        kiln_check.find_kiln = real_find
    stderr = err.getvalue()
    for w in caught:  # what Python would print on stderr
        stderr += f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}\n"
    return Outcome(rc, out.getvalue(), stderr, out_dir)


def check_file(model_path, workdir, kiln=None, ort_judge=True):
    """Imports model_path (inside workdir's model dir) into workdir's output dir and applies the
    oracle. Returns the Outcome; raises Bug."""
    model_dir, out_dir, outside = case_dirs(workdir)
    try:
        with _watch().watching([outside, "/etc", "/proc/self"]) as opened:
            o = run_importer(model_path, out_dir, kiln)
    except CaseTimeout:
        raise Bug(f"the import ran past {CASE_TIME_LIMIT} s (a hang)")
    if opened:
        raise Bug(f"the import opened {opened[0]}, outside the model's directory")
    if o.rc == 0:
        graphs = [f for f in os.listdir(out_dir) if f.endswith(".json")] if os.path.isdir(
            out_dir) else []
        if not graphs:
            raise Bug(f"exit status 0 but no graph file in {out_dir}:\n{o.stdout}{o.stderr}")
        stray = [ln for ln in o.stderr.splitlines() if not ln.startswith("onnx2kiln: warning: ")]
        if stray:
            raise Bug(f"a successful import printed more than its warnings:\n{o.stderr}")
        return o
    if o.rc != 2:
        raise Bug(f"exit status {o.rc} (not 0 or 2):\n{o.stderr}")
    line = o.error_line
    if line is None or not line.startswith("onnx2kiln: error: "):
        raise Bug(f"a refusal must be one line `onnx2kiln: error: ...`, found:\n{o.stderr}")
    if model_path not in line:
        raise Bug(f"the error line does not name the model file {model_path}: {line}")
    if "kiln refuses the converted graph" in line and ort_judge:
        why = onnxruntime_runs(model_path)
        if why is None:
            raise Bug(f"kiln refuses the graph converted from a model onnxruntime runs: {line}")
    return o


# ------------------------------------------------------------------------------ onnxruntime

def onnxruntime_runs(model_path):
    """None when onnxruntime loads the model and runs it on random inputs (symbolic dims 2), else
    why not (a string). A model onnxruntime cannot run may well be refused by kiln."""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        return "no onnxruntime"
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        feeds = {}
        for i in sess.get_inputs():
            shape = [d if isinstance(d, int) and d > 0 else 2 for d in (i.shape or [])]
            np_type = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
                       "tensor(double)": np.float64}.get(i.type)
            if np_type is None:
                return f"input {i.name} of type {i.type}"
            feeds[i.name] = rng.standard_normal(shape).astype(np_type)
        outs = sess.run(None, feeds)
        empty = [o.shape for o in outs if getattr(o, "size", 1) == 0]
        if empty:
            return f"onnxruntime computes an empty output (shape {list(empty[0])})"
    except Exception as e:  # noqa: BLE001 - any refusal by onnxruntime
        return f"onnxruntime: {type(e).__name__}: {str(e)[:200]}"
    return None
