"""ONNX import of ConvTranspose (2-D: strides, pads, output_padding, dilations, groups, auto_pad,
output_shape), ArgMax / ArgMin (ties, NaN, integer inputs) and Range (constant: folded; a symbolic
limit: kiln's range op), converted with tools/onnx2kiln, run with the kiln CLI (CPU reference)
and compared with onnxruntime on the same inputs (integer outputs exactly)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from test_onnx_import import convert, init, model, ops_of, rand, vi
from test_onnx_int_bool import check as check_exact

I64 = TensorProto.INT64


def _convt(name, **attrs):
    return helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name=name, **attrs)


@pytest.mark.parametrize("attrs,c,kg,k", [
    ({}, 3, 4, 3),
    ({"strides": [2, 2]}, 4, 6, 2),
    ({"strides": [2, 3], "pads": [1, 0, 0, 2], "output_padding": [1, 2]}, 4, 5, 3),
    ({"strides": [2, 2], "dilations": [2, 1], "group": 2}, 6, 2, 3),
    ({"strides": [3, 3], "group": 8}, 8, 1, 3),
    ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, 3, 2, 3),
    ({"strides": [2, 2], "auto_pad": "SAME_LOWER"}, 3, 2, 3),
    ({"strides": [2, 2], "auto_pad": "VALID"}, 3, 2, 4),
    ({"strides": [2, 2], "output_shape": [12, 9]}, 3, 2, 3),
    ({"strides": [2, 2], "output_shape": [12, 9], "auto_pad": "SAME_UPPER"}, 3, 2, 3),
])
def test_conv_transpose_forms(tmp_path, attrs, c, kg, k):
    groups = attrs.get("group", 1)
    x = rand(2, c, 6, 5)
    nodes = [_convt("up", kernel_shape=[k, k], **attrs),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    inits = [init("w", rand(c, kg, k, k)), init("b", rand(kg * groups))]
    m = model(nodes, [vi("x", [2, c, 6, 5])], [vi("z", None)], inits)
    g = check_exact(tmp_path, m, {"x": x}, tol=1e-4)
    assert ops_of(g) == ["conv_transpose2d", "relu"]
    assert g["nodes"][0]["groups"] == groups


def test_conv_transpose_refusals(tmp_path):
    def refused(attrs, wshape, what, xshape=(1, 4, 5, 5)):
        nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up_bad", **attrs)]
        m = model(nodes, [vi("x", list(xshape))], [vi("y", None)], [init("w", rand(*wshape))])
        _, r = convert(tmp_path, m, expect_rc=2)
        assert "up_bad" in r.stderr and what in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    refused({"kernel_shape": [2, 2]}, (4, 2, 3, 3), "kernel_shape [2, 2] differs")
    refused({"strides": [2, 2], "output_padding": [2, 0]}, (4, 2, 3, 3),
            "output_padding [2, 0]: each value must be smaller than the stride")
    refused({}, (6, 2, 3, 3), "the input has 4 channels but the filter 'w' expects 6")
    refused({"pads": [3, 3, 3, 3]}, (4, 2, 1, 1), "the output would be empty")
    refused({}, (4, 2, 3), "only 2-D transposed convolutions", xshape=(1, 4, 5))


def test_argmax_argmin_ties_nan_and_ints(tmp_path):
    x = np.array([[1, 5, 5, 2], [np.nan, 1, 2, 0], [3, np.nan, 0, 0]], np.float32)
    nodes = []
    outs = []
    for op in ("ArgMax", "ArgMin"):
        for axis in (0, 1, -1):
            for keep in (0, 1):
                for last in (0, 1):
                    o = f"{op}_{axis + 1}_{keep}_{last}"
                    nodes.append(helper.make_node(op, ["x"], [o], name=o, axis=axis,
                                                  keepdims=keep, select_last_index=last))
                    outs.append(vi(o, None, I64))
    m = model(nodes, [vi("x", [3, 4])], outs, opset=13)
    g = check_exact(tmp_path, m, {"x": x})
    assert set(ops_of(g)) == {"argmax", "argmin"}
    ints = np.array([[4, 4, -1], [7, 2, 7]], np.int64)
    m = model([helper.make_node("ArgMax", ["i"], ["a"], name="am", axis=1, select_last_index=1),
               helper.make_node("ArgMin", ["i"], ["b"], name="an", keepdims=0)],
              [vi("i", [2, 3], I64)], [vi("a", None, I64), vi("b", None, I64)], opset=13)
    check_exact(tmp_path, m, {"i": ints})


def test_range_constant_folds_and_symbolic_limit(tmp_path):
    # Position ids as GPT-2 and BERT export them: Range(0, Shape(x)[1], 1) on a dynamic length.
    z = init("zero", np.array(0, np.int64))
    one = init("one", np.array(1, np.int64))
    two = init("two", np.array(2, np.int64))
    idx = init("idx", np.array(1, np.int64))
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "idx"], ["len"], name="len", axis=0),
             helper.make_node("Range", ["zero", "len", "one"], ["pos"], name="pos"),
             helper.make_node("Range", ["two", "len", "two"], ["even"], name="even")]
    m = model(nodes, [vi("x", [2, "S"])], [vi("pos", None, I64), vi("even", None, I64)],
              [z, one, two, idx], opset=13)
    for s in (5, 8):
        g = check_exact(tmp_path, m, {"x": rand(2, s)})
    rng = [n for n in g["nodes"] if n["op"] == "range"]
    assert [n["length"] for n in rng] == [["S"], ["(S-1)/2"]]
    assert rng[0]["dtype"] == "i64"
    # A Range of constants folds to an initializer (no range node).
    nodes = [helper.make_node("Range", ["zero", "two", "one"], ["c"], name="const_range"),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    m = model(nodes, [vi("x", [3, 2], I64)], [vi("y", None, I64)], [z, one, two], opset=13)
    g = check_exact(tmp_path, m, {"x": np.arange(6, dtype=np.int64).reshape(3, 2)})
    assert ops_of(g) == ["add"]


def test_range_with_run_time_start_is_refused(tmp_path):
    nodes = [helper.make_node("Range", ["a", "b", "c"], ["y"], name="rng_bad")]
    m = model(nodes, [vi("a", [], I64)], [vi("y", None, I64)],
              [init("b", np.array(5, np.int64)), init("c", np.array(1, np.int64))], opset=13)
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "rng_bad" in r.stderr and "must be a constant" in r.stderr, r.stderr
