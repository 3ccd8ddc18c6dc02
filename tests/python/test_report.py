"""`--report` (python3 -m onnx2kiln and kiln import): the op histogram and what each ONNX op
became (folded, fused, kiln ops, unsupported, refused, not reached), also when the conversion
fails."""
import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import IMPORTER, IMPORTER_ENV, KILN, KILN_ENV
from test_onnx_import import init, model, rand, vi


def ints(name, v):
    return init(name, np.array(v, np.int64))


def _model():
    # A Shape -> Gather -> Concat -> Reshape chain (folded), a gelu pattern (Div/Erf/Add fused
    # into the last Mul), a MatMul + Add bias (the Add fused), an Identity (alias).
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "i0"], ["n"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="unsq"),
             helper.make_node("Concat", ["n1", "m1"], ["t"], name="cat", axis=0),
             helper.make_node("Reshape", ["x", "t"], ["flat"], name="flat"),
             helper.make_node("MatMul", ["flat", "w"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "b"], ["h"], name="bias"),
             helper.make_node("Div", ["h", "s2"], ["d"], name="gelu_div"),
             helper.make_node("Erf", ["d"], ["e"], name="gelu_erf"),
             helper.make_node("Add", ["e", "one"], ["e1"], name="gelu_add"),
             helper.make_node("Mul", ["h", "e1"], ["g"], name="gelu_mul"),
             helper.make_node("Mul", ["g", "half"], ["gg"], name="gelu_mul2"),
             helper.make_node("Identity", ["gg"], ["y"], name="id")]
    return model(nodes, [vi("x", ["N", 2, 3])], [vi("y", None)],
                 [ints("i0", 0), ints("ax0", [0]), ints("m1", [-1]), init("w", rand(6, 4)),
                  init("b", rand(4)), init("s2", np.array(np.sqrt(2), np.float32)),
                  init("one", np.array(1.0, np.float32)), init("half", np.array(0.5, np.float32))])


def _run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, env=IMPORTER_ENV)


def _rows(stdout):
    """{op: became} from the report's table."""
    rows = {}
    for line in stdout.splitlines():
        parts = line.split(None, 2)
        if line.startswith("    ") or len(parts) < 3 or not parts[1].isdigit():
            continue
        rows[parts[0]] = (int(parts[1]), parts[2])
    return rows


def test_report_of_a_conversion(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), str(path))
    r = _run([*IMPORTER, str(path), "--out", str(tmp_path / "out"), "--kiln", KILN, "--report"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"report: {path}: 13 ONNX nodes of 11 op types -> 4 kiln nodes")
    rows = _rows(r.stdout)
    assert rows["Shape"] == (1, "folded 1") and rows["Concat"] == (1, "folded 1")
    assert rows["Reshape"] == (1, "reshape 1") and rows["MatMul"] == (1, "matmul 1")
    assert rows["Add"] == (2, "fused 2") and rows["Erf"] == (1, "fused 1")
    assert rows["Mul"] == (2, "gelu 1, fused 1") and rows["Identity"] == (1, "identity 1")
    assert "  kiln ops: gelu 1, identity 1, matmul 1, reshape 1\n" in r.stdout
    assert "wrote " in r.stdout  # the usual summary follows
    # Up to date: --report converts again (and reports) instead of skipping.
    r2 = _run([*IMPORTER, str(path), "--out", str(tmp_path / "out"), "--kiln", KILN, "--report"])
    assert r2.returncode == 0 and r2.stdout.startswith("report: ") and "up to date" not in r2.stdout


def test_report_when_the_conversion_fails(tmp_path):
    # An unsupported op: the report lists it, then the one-line error.
    m = _model()
    m.graph.node.insert(5, helper.make_node("Hardmax", ["flat"], ["hm"], name="hm"))
    path = tmp_path / "bad.onnx"
    onnx.save(m, str(path))
    r = _run([*IMPORTER, str(path), "--out", str(tmp_path / "out"), "--kiln", KILN, "--report"])
    assert r.returncode == 2 and r.stderr.startswith("onnx2kiln: error:"), r.stderr
    rows = _rows(r.stdout)
    assert rows["Hardmax"] == (1, "unsupported 1") and rows["Shape"] == (1, "not reached 1")
    # A refused node: what came before it, the node, what was not reached.
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Squeeze", ["r", "ax"], ["q"], name="bad_sq"),
             helper.make_node("Relu", ["q"], ["y"], name="relu2")]
    m2 = model(nodes, [vi("x", ["N", 5])], [vi("y", None)], [ints("ax", [1])], opset=13)
    path2 = tmp_path / "refused.onnx"
    onnx.save(m2, str(path2))
    r = _run([*IMPORTER, str(path2), "--out", str(tmp_path / "out2"), "--kiln", KILN, "--report"])
    assert r.returncode == 2 and "node 'bad_sq' (Squeeze)" in r.stderr
    rows = _rows(r.stdout)
    assert rows["Relu"] == (2, "relu 1, not reached 1")
    assert rows["Squeeze"] == (1, "refused 1")


def test_kiln_import_passes_report_on(tmp_path):
    h = subprocess.run([KILN, "import", "--help"], capture_output=True, text=True, env=KILN_ENV)
    if "--report" not in h.stdout + h.stderr:
        pytest.skip("this kiln binary predates `kiln import --report` (tools/cli_import.cpp)")
    path = tmp_path / "m.onnx"
    onnx.save(_model(), str(path))
    r = subprocess.run([KILN, "import", str(path), "--out", str(tmp_path / "out"), "--report"],
                       capture_output=True, text=True, env=KILN_ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("report: ") and _rows(r.stdout)["Shape"] == (1, "folded 1")
