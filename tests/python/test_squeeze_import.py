"""ONNX import of Squeeze/Unsqueeze on run-time tensors (ViT's class token, masks): reshapes
through symbolic dims, checked against onnxruntime; refusals name the node."""
import numpy as np
from onnx import helper

from test_onnx_import import check, convert, init, model, ops_of, rand, vi


def ints(name, v):
    return init(name, np.array(v, np.int64))


def test_unsqueeze_squeeze_of_activations(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Unsqueeze", ["r", "ax"], ["u"], name="unsq"),
             helper.make_node("Squeeze", ["u", "ax2"], ["s"], name="sq"),
             helper.make_node("Unsqueeze", ["s", "ax3"], ["y"], name="unsq_end")]
    m = model(nodes, [vi("x", ["N", 5, 7])], [vi("y", None)],
              [ints("ax", [0, 3]), ints("ax2", [0]), ints("ax3", [-1])], opset=13)
    g = check(tmp_path, m, {"x": rand(3, 5, 7)})
    assert ops_of(g) == ["relu", "reshape", "reshape", "reshape"]
    assert g["nodes"][3]["shape"] == ["N", 5, 1, 7, 1]
    # Opset 11: axes as an attribute; Squeeze without axes drops every static 1.
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Unsqueeze", ["r"], ["u"], name="unsq", axes=[1]),
             helper.make_node("Squeeze", ["u"], ["y"], name="sq", axes=[1])]
    m = model(nodes, [vi("x", [2, 5, 7])], [vi("y", None)], opset=11)
    check(tmp_path, m, {"x": rand(2, 5, 7)}, name="opset11")


def test_squeeze_of_a_dim_that_is_not_one_is_refused(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Squeeze", ["r", "ax"], ["y"], name="bad_sq")]
    m = model(nodes, [vi("x", ["N", 5, 7])], [vi("y", None)], [ints("ax", [1])], opset=13)
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "node 'bad_sq' (Squeeze): axis 1 has size 5, not 1" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1
