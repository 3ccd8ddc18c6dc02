"""The importer's command line. What it refuses, and how: every refusal is exit status 2 with
exactly one line on stderr, `onnx2kiln: error: <where>: <what>`, and no Python traceback. Also the
final check of the written graph by `kiln check --json`, and the warm start.

Uses its own fixed values (no shared random stream), so that the models of test_onnx_import.py do
not depend on whether these tests run.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import IMPORTER, IMPORTER_ENV, KILN, KILN_ENV, TOOLS

F = TensorProto.FLOAT


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def conv_model(w_shape=(4, 3, 3, 3), x_shape=(1, 3, 8, 8), **attrs):
    w = np.full(w_shape, 0.5, np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", **attrs)]
    return model(nodes, [vi("x", list(x_shape))], [vi("y", None)],
                 [numpy_helper.from_array(w, "w")])


def run_importer(tmp_path, path, out=None, cmd=None):
    """The importer (python3 -m onnx2kiln --kiln KILN), or `cmd` (say [KILN, "import"])."""
    out = out if out is not None else str(tmp_path / "out")
    if cmd is None:
        cmd, extra, env = IMPORTER, ["--kiln", KILN], IMPORTER_ENV
    else:
        extra, env = [], KILN_ENV
    return subprocess.run([*cmd, str(path), "--out", out, *extra], capture_output=True, text=True,
                          env=env)


def expect_refusal(r, *needles):
    """Exit 2, one stderr line `onnx2kiln: error: ...` containing every needle, no traceback."""
    lines = r.stderr.splitlines()
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("onnx2kiln: error: "), r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    for s in needles:
        assert s in lines[0], f"{s!r} not in {lines[0]!r}"
    return lines[0]


def refuse_model(tmp_path, m, *needles):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    line = expect_refusal(run_importer(tmp_path, path), *needles)
    assert not (tmp_path / "out").exists()  # nothing written
    return line


# ---------------------------------------------------------------------------- files, --out

def test_empty_file(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    expect_refusal(run_importer(tmp_path, p), "empty.onnx", "empty")


@pytest.mark.parametrize("data", [b"hello, world\n", b"\x08\x07", b'{"ir_version": 8}'])
def test_not_an_onnx_file(tmp_path, data):
    # Text protobuf cannot parse, and bytes that parse as a message without a graph.
    p = tmp_path / "junk.onnx"
    p.write_bytes(data)
    expect_refusal(run_importer(tmp_path, p), "junk.onnx", "ONNX model")


def test_out_is_a_regular_file(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    f = tmp_path / "taken"
    f.write_text("not a directory")
    expect_refusal(run_importer(tmp_path, path, out=str(f)), "--out", "not a directory")
    expect_refusal(run_importer(tmp_path, path, out=str(f / "sub")), "--out", "not a directory")
    assert f.read_text() == "not a directory"


def _unwritable_dir(tmp_path):
    """A directory this process cannot create files in (root ignores mode bits: then a kernel
    directory that refuses new files, if there is one)."""
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
        return str(d)
    for d in ("/sys/kernel", "/proc/self"):
        try:
            open(os.path.join(d, "onnx2kiln_probe"), "w").close()
        except OSError:
            return d
    pytest.skip("no directory refuses new files to this (root) process")


def test_out_not_writable(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    d = _unwritable_dir(tmp_path)
    try:
        expect_refusal(run_importer(tmp_path, path, out=d), f"--out {d}", "cannot write")
    finally:
        if d.startswith(str(tmp_path)):
            os.chmod(d, 0o700)


# ---------------------------------------------------------------------------- the model

def test_model_without_outputs(tmp_path):
    m = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2])], [])
    refuse_model(tmp_path, m, "m.onnx", "no outputs")


@pytest.mark.parametrize("attrs,needles", [
    ({"strides": [0, 1]}, ["strides [0, 1]", "zero or negative"]),
    ({"dilations": [1, 0]}, ["dilations [1, 0]", "zero or negative"]),
    ({"dilations": [-1, 1]}, ["dilations [-1, 1]", "zero or negative"]),
    ({"kernel_shape": [3, 0]}, ["kernel_shape [3, 0]", "zero or negative"]),
    ({"kernel_shape": [3, 2]}, ["kernel_shape [3, 2]", "filter's spatial dims [3, 3]"]),
    ({"kernel_shape": [3]}, ["kernel_shape [3]", "expected 2 values"]),
    ({"strides": [1, 1, 1]}, ["strides [1, 1, 1]", "expected 2 values"]),
    ({"pads": [1, 1, -1, 1]}, ["pads [1, 1, -1, 1]", "negative"]),
    ({"group": 0}, ["group 0"]),
])
def test_conv_attributes_the_spec_forbids(tmp_path, attrs, needles):
    refuse_model(tmp_path, conv_model(**attrs), "node 'conv1' (Conv)", *needles)


@pytest.mark.parametrize("w_shape,x_shape,needles", [
    ((4, 3, 3), (1, 3, 8, 8), ["has shape [4, 3, 3]", "rank-4 filter"]),
    ((4, 3, 3, 3, 1), (1, 3, 8, 8), ["has shape [4, 3, 3, 3, 1]", "rank-4 filter"]),
    ((4, 3, 3, 3), (1, 3, 8), ["has shape [4, 3, 3, 3]", "1-D conv needs a rank-3 filter"]),
    ((4, 2, 3, 3), (1, 3, 8, 8), ["3 channels", "expects 2 x group 1"]),
])
def test_conv_filter_rank_and_channels(tmp_path, w_shape, x_shape, needles):
    refuse_model(tmp_path, conv_model(w_shape, x_shape), "node 'conv1' (Conv)", *needles)


def test_initializer_size_mismatch(tmp_path):
    # Built by hand: onnx.helper refuses to make such tensors, but files can hold them.
    m = conv_model()
    w = m.graph.initializer[0]
    w.raw_data = b"\0" * 400
    refuse_model(tmp_path, m, "initializer 'w'", "[4, 3, 3, 3]", "432 bytes", "400 bytes")
    w.ClearField("raw_data")
    w.float_data.extend([0.5] * 100)
    refuse_model(tmp_path, m, "initializer 'w'", "108 FLOAT values", "has 100")


def test_node_arity_and_required_attributes(tmp_path):
    m = model([helper.make_node("Conv", ["x"], ["y"], name="conv_alone")],
              [vi("x", [1, 3, 8, 8])], [vi("y", None)])
    refuse_model(tmp_path, m, "node 'conv_alone' (Conv)", "expected 2 to 3 inputs")
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="pool")],
              [vi("x", [1, 3, 8, 8])], [vi("y", None)])
    refuse_model(tmp_path, m, "node 'pool' (MaxPool)", "kernel_shape missing")


def test_attribute_of_the_wrong_type(tmp_path):
    refuse_model(tmp_path, conv_model(strides=[1.0, 1.0]), "node 'conv1' (Conv)",
                 "attribute strides is of type FLOATS", "INTS")


@pytest.mark.parametrize("node,needles", [
    (helper.make_node("ReduceMean", ["x"], ["y"], name="rm", axes=[4]),
     ["(ReduceMean)", "axes entry 4"]),
    (helper.make_node("Transpose", ["x"], ["y"], name="tr", perm=[0, 1, 1, 2]),
     ["(Transpose)", "perm [0, 1, 1, 2]"]),
    (helper.make_node("Flatten", ["x"], ["y"], name="fl", axis=-5), ["(Flatten)", "axis -5"]),
])
def test_axes_out_of_range_are_not_wrapped(tmp_path, node, needles):
    m = model([node], [vi("x", [2, 3, 4, 5])], [vi("y", None)])
    refuse_model(tmp_path, m, *needles)


def test_unsupported_ops_one_line(tmp_path):
    nodes = [helper.make_node("Det", ["x"], ["y"], name="det1"),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk_1")]
    m = model(nodes, [vi("x", [1, 1, 4, 4])], [vi("v", None), vi("y", None)],
              [numpy_helper.from_array(np.array([2], np.int64), "k")], opset=13)
    refuse_model(tmp_path, m, "unsupported ONNX ops", "Det (node 'det1')", "TopK (node 'topk_1')")


def test_graph_kiln_refuses_names_the_onnx_node(tmp_path):
    # Shapes that do not fit: kiln's check of the written graph refuses it, naming the node.
    w = numpy_helper.from_array(np.ones((4, 5), np.float32), "w")
    m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm/MatMul")],
              [vi("x", [2, 3])], [vi("y", None)], [w])
    refuse_model(tmp_path, m, "node 'mm/MatMul' (MatMul)", "kiln refuses the converted graph")


def test_kiln_import_passes_the_refusal_through(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    expect_refusal(run_importer(tmp_path, p, cmd=[KILN, "import"]), "empty.onnx")


def test_command_line_errors_are_one_line(tmp_path):
    r = subprocess.run([*IMPORTER, "m.onnx"], capture_output=True, text=True, env=IMPORTER_ENV)
    expect_refusal(r, "command line", "--out")
    r = subprocess.run([*IMPORTER, "m.onnx", "--out", "o", "--layout", "NCWH"],
                       capture_output=True, text=True, env=IMPORTER_ENV)
    expect_refusal(r, "command line", "--layout")


# ---------------------------------------------------------------------------- the final check

def test_summary_shows_types_from_kiln(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(x_shape=("N", 3, 8, 8), pads=[1, 1, 1, 1], strides=[2, 2]), str(path))
    r = run_importer(tmp_path, path)
    assert r.returncode == 0, r.stderr
    assert "inputs: x f32[N,3,8,8]; outputs: y f32[N,4,4,4])" in r.stdout, r.stdout
    assert r.stderr == ""
    assert not [f for f in os.listdir(tmp_path / "out") if f.startswith(".onnx2kiln-tmp")]


def test_up_to_date_run_imports_neither_numpy_nor_onnx(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    assert run_importer(tmp_path, path).returncode == 0
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from onnx2kiln.cli import main; "
             "rc = main(sys.argv[2:]); "
             "print('heavy:', sorted({'numpy', 'onnx'} & set(sys.modules))); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", probe, TOOLS, str(path), "--out",
                        str(tmp_path / "out"), "--kiln", KILN],
                       capture_output=True, text=True, env=IMPORTER_ENV)
    assert r.returncode == 0 and "up to date" in r.stdout, r.stdout + r.stderr
    assert "heavy: []" in r.stdout, r.stdout
