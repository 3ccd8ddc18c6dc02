"""The command line: `python3 -m onnx2kiln MODEL.onnx --out DIR [...]` (what `kiln import` runs).

Exit status: 0 converted (or up to date), 2 a problem with the model or the arguments, reported as
exactly one line `onnx2kiln: error: <where>: <what>` on stderr, 1 a bug in the importer (with a
traceback). Only the standard library is imported until the up-to-date check has passed, so a warm
`kiln import` does not pay for importing numpy and onnx.
"""
import argparse
import importlib
import os
import sys
import tempfile
import traceback
import warnings

from . import stamp as stamps
from .errors import ConvertError, one_line

DESCRIPTION = "convert an ONNX model to a kiln graph file (format version 1) plus its weights"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, like every other failure (argparse would print the usage first).
        raise ConvertError(f"command line: {message} (see --help)")


def parse_args(argv):
    p = _Parser(prog="onnx2kiln", description=DESCRIPTION)
    p.add_argument("model", help="the ONNX model file")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--name", help="graph name (default: the model's graph name or file stem)")
    p.add_argument("--layout", choices=["NCHW", "NHWC"], default="NCHW",
                   help="memory layout of 4-D inputs and conv filters (default NCHW)")
    p.add_argument("--dtype", choices=["f32", "f16", "bf16"],
                   help="store float inputs and weights in this dtype (default: as in the model)")
    p.add_argument("--force", action="store_true",
                   help="convert even when DIR holds this model's untouched conversion")
    p.add_argument("--report", action="store_true",
                   help="print the model's op histogram and what each ONNX op became (folded, "
                        "kiln ops, refused); converts even when DIR is up to date")
    p.add_argument("--kiln", metavar="PATH",
                   help="the kiln CLI that checks the written graph (default: the `kiln import` "
                        "that runs this, else an installed or built kiln, else kiln on PATH)")
    return p.parse_args(argv)


def main(argv=None):
    try:
        try:
            args = parse_args(argv)
        except SystemExit as e:  # --help
            return 2 if e.code else 0
        return run(args)
    except ConvertError as e:
        print(f"onnx2kiln: error: {one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - anything else is a bug in the importer
        traceback.print_exc()
        print(f"onnx2kiln: internal error (a bug in the importer): {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1


# ------------------------------------------------------------------------------ --out

def _nearest_existing(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def refuse_non_directory(out_dir):
    """--out must be a directory or not exist yet (it is created, with its parents)."""
    where = f"--out {out_dir}"
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConvertError(f"{where}: exists and is not a directory")
    parent = _nearest_existing(out_dir)
    if not os.path.isdir(parent):
        raise ConvertError(f"{where}: cannot create it: {parent} is not a directory")


def refuse_unwritable(out_dir):
    """--out (or the nearest ancestor that exists) must take new files. Checked before the
    conversion, which can take long for a big model."""
    where = f"--out {out_dir}"
    if not os.path.isdir(out_dir):
        parent = _nearest_existing(out_dir)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ConvertError(f"{where}: cannot create it: {parent} is not writable")
        return
    try:
        fd, probe = tempfile.mkstemp(prefix=".onnx2kiln-probe-", dir=out_dir)
    except OSError as e:
        raise ConvertError(f"{where}: cannot write to this directory: {e.strerror}")
    os.close(fd)
    os.remove(probe)


def require_packages():
    for pkg in ("numpy", "onnx"):
        try:
            importlib.import_module(pkg)
        except ImportError:
            raise ConvertError(f"python3 {sys.executable}: the package '{pkg}' is not installed "
                               f"(pip install -r tools/requirements.txt)")


def run(args):
    refuse_non_directory(args.out)
    stamp, key = None, None
    if os.path.isfile(args.model):
        stamp = stamps.stamp_path(args.model, args.out, args.name, args.layout, args.dtype)
        old = stamps.read_stamp(stamp)
        key = stamps.stamp_key(args.model, args.name, args.layout, args.dtype, old)
        summary = None if args.force or args.report else stamps.up_to_date(old, key)
        if summary is not None:
            print(f"up to date: {args.out} holds this conversion of {args.model} (same model "
                  "bytes, options and converter; outputs untouched): nothing to do (--force "
                  "converts again)")
            for line in summary:
                print(line)
            return 0
    refuse_unwritable(args.out)
    require_packages()
    summary, outputs = convert_file(args.model, args.out, args.name, args.layout, args.dtype,
                                    args.kiln, args.report)
    for line in summary:
        print(line)
    if stamp is not None:
        try:
            stamps.write_stamp(stamp, key, args.model, outputs, summary)
        except OSError as e:  # a stamp that cannot be written only costs the next import
            print(f"onnx2kiln: warning: cannot write {stamp}: {e}", file=sys.stderr)
    return 0


def convert_file(model_path, out_dir, name=None, layout="NCHW", dtype=None, kiln=None,
                 report=False):
    """Converts model_path into out_dir; prints warnings (and with `report` the op report, also
    when the conversion fails) and returns (the summary lines, the paths written)."""
    # What the onnx package warns while reading the model (an unknown external-data key) is
    # printed as the importer's own warning after a conversion, never beside an error line.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, cx, gpath, wpath, info, kiln = _convert(model_path, out_dir, name, layout, dtype,
                                                       kiln, report)
    for w in caught:
        print(f"onnx2kiln: warning: {one_line(model_path)}: {one_line(w.message)}",
              file=sys.stderr)
    for w in cx.warnings:
        print(f"onnx2kiln: warning: {one_line(w)}", file=sys.stderr)
    if kiln is None:
        print("onnx2kiln: warning: no kiln CLI found (--kiln PATH or kiln on PATH): the written "
              "graph is not checked by kiln", file=sys.stderr)
    return summary_lines(cx, gpath, wpath, info), [p for p in (gpath, wpath) if p]


def _convert(model_path, out_dir, name, layout, dtype, kiln, report):
    import numpy as np
    from . import kiln_check, model as onnx_model, writer
    from .convert import convert
    model = onnx_model.load(model_path)
    if name is None:
        name = onnx_model.default_name(model, model_path)
    cx = None
    try:
        # The model's NaNs and infinities stay what they are (a signaling NaN read as float64
        # is quieted): no numpy floating-point warning on stderr beside the one-line messages.
        with np.errstate(all="ignore"):
            cx = convert(model, name, layout=layout, dtype=dtype, source=model_path)
        kiln = kiln_check.find_kiln(kiln)
        gpath, wpath, info = writer.write_outputs(cx, out_dir, kiln)
    except ConvertError as e:
        if report:
            print_report(model, getattr(e, "cx", cx), model_path, getattr(e, "node", None))
        raise
    if report:
        print_report(model, cx, model_path)
    return model, cx, gpath, wpath, info, kiln


def print_report(model, cx, source, failed=None):
    from . import report
    from .registry import supported_ops
    for line in report.render(model, cx, supported_ops(), source, failed):
        print(line)
    sys.stdout.flush()


def summary_lines(cx, gpath, wpath, info):
    """What a conversion prints (and an up-to-date run prints again): the files with the graph's
    inputs and outputs; their types as kiln infers them when kiln checked the graph."""
    def typed(name, spec):
        layout = f" {spec['layout']}" if spec.get("layout", "NCHW") != "NCHW" else ""
        return f"{name} {spec['dtype']}[{','.join(str(d) for d in spec['shape'])}]{layout}"
    if info is not None:
        from .kiln_check import describe_tensor
        ins = [describe_tensor(info, k) for k in cx.inputs]
        outs = [describe_tensor(info, k) for k in cx.outputs]
    else:
        ins = [typed(k, v) for k, v in cx.inputs.items()]
        outs = list(cx.outputs)
    lines = [f"wrote {gpath} ({len(cx.nodes)} nodes; inputs: {', '.join(ins)}; outputs: "
             f"{', '.join(outs)})"]
    if wpath:
        lines.append(f"wrote {wpath} ({len(cx.weights)} tensors)")
    return lines
