"""ONNX import of the floating-point ops added for real models (HardSwish, HardSigmoid, Mish, Sin,
Cos, PRelu, LogSoftmax, ReduceL2, ReduceProd, CumSum): converted with tools/onnx2kiln, run with
the kiln CLI (CPU reference) and compared with onnxruntime on the same inputs."""
import numpy as np
import pytest
from onnx import helper

from test_onnx_import import check, convert, init, model, ops_of, rand, vi


def test_hard_activations_mish_sin_cos(tmp_path):
    # The kinks of hardswish/hardsigmoid and large |x| for mish, next to random values.
    edge = np.array([-3, 3, -2.5, 2.5, -30, 30, -100, 100], np.float32)
    x = np.concatenate([edge, rand(56, lo=-6, hi=6)]).reshape(4, 16)
    nodes = [helper.make_node("HardSwish", ["x"], ["hs"], name="hswish"),
             helper.make_node("HardSigmoid", ["x"], ["hg"], name="hsig"),
             helper.make_node("HardSigmoid", ["x"], ["hg6"], name="hsig6", alpha=1.0 / 6, beta=0.5),
             helper.make_node("Mish", ["x"], ["mi"], name="mish"),
             helper.make_node("Sin", ["x"], ["si"], name="sin"),
             helper.make_node("Cos", ["x"], ["co"], name="cos")]
    outs = [vi(n, None) for n in ["hs", "hg", "hg6", "mi", "si", "co"]]
    m = model(nodes, [vi("x", [4, 16])], outs, opset=18)
    g = check(tmp_path, m, {"x": x})
    assert ops_of(g) == ["hardswish", "hardsigmoid", "hardsigmoid", "mish", "sin", "cos"]
    assert g["nodes"][1]["alpha"] == pytest.approx(0.2)
    assert g["nodes"][2]["alpha"] == pytest.approx(1.0 / 6)


def test_prelu_per_channel_after_conv_and_scalar(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c", "slope"], ["y"], name="prelu_c"),
             helper.make_node("PRelu", ["y", "slope1"], ["z"], name="prelu_1")]
    inits = [init("w", rand(6, 3, 3, 3)), init("slope", rand(6, 1, 1, lo=0.05, hi=0.5)),
             init("slope1", np.array([0.3], np.float32))]
    m = model(nodes, [vi("x", [2, 3, 8, 8])], [vi("z", None)], inits)
    g = check(tmp_path, m, {"x": rand(2, 3, 8, 8)})
    assert ops_of(g) == ["conv2d", "prelu", "prelu"]


def test_prelu_slope_that_does_not_broadcast_is_refused(tmp_path):
    # A [C] slope on NCHW broadcasts along W in ONNX: with W != C the model is invalid.
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu_bad")]
    m = model(nodes, [vi("x", [2, 4, 5, 5])], [vi("y", None)],
              [init("slope", rand(4, lo=0.1, hi=0.2))])
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "prelu_bad" in r.stderr and "does not broadcast" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("opset", [11, 13])
def test_log_softmax_each_opset(tmp_path, opset):
    # Opset 11 flattens [axis, rank) (a reshape around a 2-D log_softmax), 13 takes one axis.
    x = rand(2, 3, 4, lo=-20, hi=20)
    x[0, 0, 0] = 80.0  # exp() overflows in f32 without the max
    nodes = [helper.make_node("LogSoftmax", ["x"], ["a"], name="lsm_axis1", axis=1),
             helper.make_node("LogSoftmax", ["x"], ["b"], name="lsm_default")]
    m = model(nodes, [vi("x", [2, 3, 4])], [vi("a", None), vi("b", None)], opset=opset)
    g = check(tmp_path, m, {"x": x})
    assert ops_of(g).count("log_softmax") == 2
    assert ("reshape" in ops_of(g)) == (opset == 11)


@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_l2_prod_axes_attribute_or_input(tmp_path, opset):
    x = rand(3, 4, 5, lo=0.5, hi=1.5)
    inits = []
    if opset >= 18:
        inits = [init("ax", np.array([1], np.int64)), init("ax2", np.array([0, 2], np.int64))]
        nodes = [helper.make_node("ReduceL2", ["x", "ax"], ["l2"], name="l2"),
                 helper.make_node("ReduceProd", ["x", "ax2"], ["pr"], name="prod", keepdims=0)]
    else:
        nodes = [helper.make_node("ReduceL2", ["x"], ["l2"], name="l2", axes=[1]),
                 helper.make_node("ReduceProd", ["x"], ["pr"], name="prod", axes=[0, 2],
                                  keepdims=0)]
    nodes.append(helper.make_node("ReduceL2", ["x"], ["all"], name="l2_all"))
    m = model(nodes, [vi("x", [3, 4, 5])], [vi("l2", None), vi("pr", None), vi("all", None)],
              inits, opset=opset)
    g = check(tmp_path, m, {"x": x})
    assert ops_of(g) == ["reduce_l2", "reduce_prod", "reduce_l2"]


def test_cumsum_flags_and_axes(tmp_path):
    nodes, outs, inits = [], [], [init("a1", np.array(1, np.int64)),
                                  init("am1", np.array([-1], np.int32))]
    for excl in (0, 1):
        for rev in (0, 1):
            for ax in ("a1", "am1"):
                o = f"y_{excl}{rev}_{ax}"
                nodes.append(helper.make_node("CumSum", ["x", ax], [o], name=f"cs_{o}",
                                              exclusive=excl, reverse=rev))
                outs.append(vi(o, None))
    m = model(nodes, [vi("x", [2, 37, 5])], outs, inits, opset=14)
    g = check(tmp_path, m, {"x": rand(2, 37, 5)})
    assert ops_of(g) == ["cumsum"] * 8
    assert {n["axis"] for n in g["nodes"]} == {1, 2}


def test_cumsum_axis_that_is_no_constant_is_refused(tmp_path):
    # The axis from a dynamic dim (N): known only at run time. And an axis of two values.
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("CumSum", ["x", "n"], ["y"], name="cs_dyn")]
    m = model(nodes, [vi("x", ["N", 5])], [vi("y", None)],
              [init("zero", np.array(0, np.int64))])
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "cs_dyn" in r.stderr and "constant integer" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    nodes = [helper.make_node("CumSum", ["x", "two"], ["y"], name="cs_two")]
    m = model(nodes, [vi("x", [4, 5])], [vi("y", None)], [init("two", np.array([0, 1], np.int64))])
    _, r = convert(tmp_path, m, name="two", expect_rc=2)
    assert "cs_two" in r.stderr and "one constant integer" in r.stderr, r.stderr


def test_hardswish_from_hardsigmoid_mul(tmp_path):
    # torch's Hardswish before opset 14: x * HardSigmoid(x, 1/6, 0.5); other alphas stay apart.
    nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], name="hs", alpha=1.0 / 6, beta=0.5),
             helper.make_node("Mul", ["x", "h"], ["y"], name="hswish"),
             helper.make_node("HardSigmoid", ["x"], ["h2"], name="hs2"),
             helper.make_node("Mul", ["h2", "x"], ["z"], name="not_hswish")]
    m = model(nodes, [vi("x", [3, 20])], [vi("y", None), vi("z", None)], opset=13)
    g = check(tmp_path, m, {"x": rand(3, 20, lo=-5, hi=5)})
    assert ops_of(g) == ["hardswish", "hardsigmoid", "mul"]
    assert g["nodes"][0]["name"] == "hswish"
