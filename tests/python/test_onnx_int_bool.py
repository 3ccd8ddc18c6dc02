"""ONNX import of integer and bool tensors: int64 / int32 / bool graph inputs and initializers,
comparisons, logical ops, Where, Mod, Cast to and from the new types, and the shape folding
beside them. Each model runs with the kiln CLI (CPU reference) and onnxruntime on the same inputs;
integer and bool outputs must match exactly.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import IMPORTER, IMPORTER_ENV, KILN, KILN_ENV
from onnx2kiln.names import sanitize
from onnx2kiln.safetensors import read_safetensors, write_safetensors

F, I32, I64, B = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
KILN_DT = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
           np.dtype(np.bool_): "bool"}
RNG = np.random.default_rng(77)


@pytest.fixture(scope="session", autouse=True)
def _kiln_cli():
    if not os.access(KILN, os.X_OK):
        pytest.fail(f"kiln CLI not found at {KILN} (set KILN_CLI or build build/kiln)")


def vi(name, shape, elem):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    # Outputs without a shape (left to inference) are what the checker calls incomplete.
    if all(o.type.tensor_type.HasField("shape") for o in outputs):
        onnx.checker.check_model(m)
    return m


def convert(tmp_path, m, expect_rc=0):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    r = subprocess.run([*IMPORTER, str(path), "--out", str(tmp_path / "out"), "--name", "m",
                        "--kiln", KILN], capture_output=True, text=True, env=IMPORTER_ENV)
    assert r.returncode == expect_rc, f"onnx2kiln exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return tmp_path / "out" / "m.json", r


def kiln_run(tmp_path, graph, inputs):
    inp, outp = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    write_safetensors(str(inp), {k: (KILN_DT[v.dtype], v) for k, v in inputs.items()})
    r = subprocess.run([KILN, "run", str(graph), "--device", "cpu", "--inputs", str(inp),
                        "--output", str(outp)], capture_output=True, text=True, env=KILN_ENV)
    assert r.returncode == 0, f"kiln run exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return read_safetensors(str(outp))


def check(tmp_path, m, inputs, tol=1e-5):
    """Converts, runs both, compares: integers and bools exactly, floats to `tol`."""
    graph, _ = convert(tmp_path, m)
    got = kiln_run(tmp_path, graph, inputs)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))
    for k, w in want.items():
        g = got[sanitize(k)]
        assert g.shape == w.shape, f"{k}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "iub":
            assert g.dtype == w.dtype, f"{k}: dtype {g.dtype} != {w.dtype}"
            assert np.array_equal(g, w), f"{k}: {g} != {w}"
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=k)
    with open(graph) as f:
        return json.load(f)


def ops_of(g):
    return [n["op"] for n in g["nodes"]]


def test_comparisons_and_logical_ops(tmp_path):
    cmp = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
    nodes = [helper.make_node(op, ["a", "b"], [f"{op}_i"]) for op in cmp]
    nodes += [helper.make_node(op, ["x", "y"], [f"{op}_f"]) for op in cmp]
    nodes += [helper.make_node("Less", ["a", "b"], ["m1"]), helper.make_node("Equal", ["x", "y"], ["m2"])]
    nodes += [helper.make_node(op, ["m1", "m2"], [op]) for op in ["And", "Or", "Xor"]]
    nodes += [helper.make_node("Not", ["m1"], ["Not"])]
    outs = [vi(f"{op}_{s}", None, B) for op in cmp for s in "if"]
    outs += [vi(op, None, B) for op in ["And", "Or", "Xor", "Not"]]
    m = model(nodes, [vi("a", [3, 5], I64), vi("b", [5], I64), vi("x", [3, 5], F), vi("y", [5], F)],
              outs)
    a = RNG.integers(-3, 3, size=(3, 5), dtype=np.int64)
    b = RNG.integers(-3, 3, size=(5,), dtype=np.int64)
    x = RNG.integers(-2, 2, size=(3, 5)).astype(np.float32)  # equal values do occur
    y = RNG.integers(-2, 2, size=(5,)).astype(np.float32)
    g = check(tmp_path, m, {"a": a, "b": b, "x": x, "y": y})
    assert {"eq", "lt", "le", "gt", "ge", "and", "or", "xor", "not"} <= set(ops_of(g))


def test_where_mod_and_int_arithmetic(tmp_path):
    nodes = [helper.make_node("Mod", ["a", "b"], ["mod0"]),
             helper.make_node("Mod", ["a", "b"], ["mod1"], fmod=1),
             helper.make_node("Div", ["a", "b"], ["div"]),
             helper.make_node("Mul", ["a", "k"], ["mul"]),
             helper.make_node("Add", ["a", "big"], ["add"]),
             helper.make_node("Neg", ["a"], ["neg"]),
             helper.make_node("Abs", ["a"], ["abs"]),
             helper.make_node("Greater", ["a", "zero"], ["pos"]),
             helper.make_node("Where", ["pos", "a", "fill"], ["where_i"]),
             helper.make_node("Where", ["c", "x", "ninf"], ["where_f"])]
    inits = [numpy_helper.from_array(np.array([3], np.int64), "k"),
             numpy_helper.from_array(np.array(2**53 + 1, np.int64), "big"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "fill"),
             numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")]
    outs = [vi(n, None, I64) for n in ["mod0", "mod1", "div", "mul", "add", "neg", "abs", "where_i"]]
    outs += [vi("where_f", None, F)]
    m = model(nodes, [vi("a", [4, 6], I64), vi("b", [6], I64), vi("c", [4, 1], B),
                      vi("x", [4, 6], F)], outs, inits)
    a = RNG.integers(-20, 20, size=(4, 6), dtype=np.int64)
    b = np.array([3, -3, 5, -5, 7, 1], np.int64)  # nonzero: ORT traps on x / 0
    c = np.array([[True], [False], [True], [False]])
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    g = check(tmp_path, m, {"a": a, "b": b, "c": c, "x": x})
    assert ops_of(g).count("mod") == 2 and ops_of(g).count("where") == 2
    add = next(s for k, s in g["constants"].items() if s["dtype"] == "i64" and s.get("data") == [2**53 + 1])
    assert add["shape"] == []


def test_int32_inputs_and_casts_between_every_type(tmp_path):
    targets = {"f32": F, "i32": I32, "i64": I64, "bool": B}
    nodes, outs = [], []
    for src in ["x", "i", "l", "m"]:
        for tname, t in targets.items():
            nodes.append(helper.make_node("Cast", [src], [f"{src}_{tname}"], to=t))
            outs.append(vi(f"{src}_{tname}", None, t))
    m = model(nodes, [vi("x", [7], F), vi("i", [7], I32), vi("l", [7], I64), vi("m", [7], B)],
              outs)
    x = np.array([0.0, -0.0, 2.75, -2.75, 1.0, 300.5, -7.0], np.float32)  # toward zero
    i = np.array([0, 1, -1, 2**31 - 1, -2**31, 65536, 7], np.int32)
    l = np.array([0, 1, -1, 2**40 + 3, -2**40, 2**31 + 5, 7], np.int64)  # i32 casts wrap
    mk = np.array([True, False, True, True, False, False, True])
    g = check(tmp_path, m, {"x": x, "i": i, "l": l, "m": mk})
    assert ops_of(g).count("cast") == 12  # the four casts to the own type are dropped
    assert g["inputs"]["i"]["dtype"] == "i32" and g["inputs"]["m"]["dtype"] == "bool"


def test_attention_mask_from_token_ids(tmp_path):
    """ids -> (ids != pad) -> Where(mask, scores, -inf) -> Softmax: the usual padding mask, with
    the shape computation beside it still folded."""
    nodes = [helper.make_node("Equal", ["ids", "pad"], ["is_pad"]),
             helper.make_node("Not", ["is_pad"], ["keep"]),
             helper.make_node("Reshape", ["keep", "shape4"], ["keep4"]),
             helper.make_node("Where", ["keep4", "scores", "ninf"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
             helper.make_node("Shape", ["scores"], ["shp"]),
             helper.make_node("Gather", ["shp", "last"], ["seq"]),
             helper.make_node("Cast", ["seq"], ["seq_f"], to=F),
             helper.make_node("Div", ["p", "seq_f"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "pad"),
             numpy_helper.from_array(np.array([2, 1, 1, 8], np.int64), "shape4"),
             numpy_helper.from_array(np.array(-1e9, np.float32), "ninf"),
             numpy_helper.from_array(np.array(3, np.int64), "last")]
    m = model(nodes, [vi("ids", [2, 1, 8], I64), vi("scores", [2, 4, 8, 8], F)],
              [vi("y", None, F)], inits)
    ids = np.array([[[5, 9, 2, 0, 0, 0, 0, 0]], [[1, 2, 3, 4, 5, 6, 7, 0]]], np.int64)
    scores = RNG.standard_normal((2, 4, 8, 8)).astype(np.float32)
    g = check(tmp_path, m, {"ids": ids, "scores": scores})
    assert "where" in ops_of(g) and "softmax" in ops_of(g)
    assert "Shape" not in json.dumps(g["nodes"])  # folded at conversion time


def test_unsupported_element_type_is_one_error(tmp_path):
    m = model([helper.make_node("Identity", ["u"], ["y"])], [vi("u", [4], TensorProto.UINT8)],
              [vi("y", None, TensorProto.UINT8)])
    _, r = convert(tmp_path, m, expect_rc=2)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("onnx2kiln: error:"), r.stderr
    assert "UINT8" in err[0] and "i32, i64 or bool" in err[0], r.stderr


def test_float_op_on_int_tensor_is_located(tmp_path):
    m = model([helper.make_node("Relu", ["ids"], ["y"], name="act")], [vi("ids", [4], I64)],
              [vi("y", None, I64)], opset=14)
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "relu takes a floating tensor, got i64 'ids'" in r.stderr, r.stderr
