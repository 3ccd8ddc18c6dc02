"""ONNX import: build small ONNX models, convert them with the tools/onnx2kiln package, run them
with the kiln CLI (CPU reference) and compare with onnxruntime on the same inputs.

Needs onnx, onnxruntime, numpy (tools/requirements.txt) and a built kiln CLI: env KILN_CLI, else
build/kiln in the source tree.
"""
import json
import math
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

F = TensorProto.FLOAT
RNG = np.random.default_rng(1234)


@pytest.fixture(scope="session", autouse=True)
def _kiln_cli():
    if not os.access(KILN, os.X_OK):
        pytest.fail(f"kiln CLI not found at {KILN} (set KILN_CLI or build build/kiln)")


# ---------------------------------------------------------------------------- helpers

def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset <= 18 else 10
    onnx.checker.check_model(m) if all(o.type.tensor_type.HasField("shape") for o in outputs) else None
    return m


def convert(tmp_path, m, *extra, name="m", expect_rc=0):
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    out = tmp_path / "out"
    r = subprocess.run([*IMPORTER, str(path), "--out", str(out), "--name", name, "--kiln", KILN,
                        *extra], capture_output=True, text=True, env=IMPORTER_ENV)
    assert r.returncode == expect_rc, f"onnx2kiln exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return out / f"{name}.json", r


def kiln_run(tmp_path, graph, inputs, tag="run"):
    inp = tmp_path / f"in_{tag}.safetensors"
    outp = tmp_path / f"out_{tag}.safetensors"
    write_safetensors(str(inp), {k: ("f32", v) for k, v in inputs.items()})
    r = subprocess.run([KILN, "run", str(graph), "--device", "cpu", "--inputs", str(inp),
                        "--output", str(outp)], capture_output=True, text=True, env=KILN_ENV)
    assert r.returncode == 0, f"kiln run exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return read_safetensors(str(outp))


def ort_run(m, inputs):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, inputs)))


def rel_err(got, want):
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert not np.isnan(got).any(), "NaN in kiln output"
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-3))


def check(tmp_path, m, inputs, *extra, tol=1e-4, name="m"):
    """Converts m, runs it with kiln and onnxruntime, compares every output. Returns the graph."""
    graph, _ = convert(tmp_path, m, *extra, name=name)
    got = kiln_run(tmp_path, graph, inputs)
    want = ort_run(m, inputs)
    for k, v in want.items():
        key = sanitize(k)
        assert key in got, f"output {key} missing from kiln outputs {sorted(got)}"
        err = rel_err(got[key], v.astype(np.float32))
        assert err <= tol, f"output {k}: rel err {err:.3g} > {tol}"
    with open(graph) as f:
        return json.load(f)


def ops_of(g):
    return [n["op"] for n in g["nodes"]]


# ---------------------------------------------------------------------------- contractions

def test_conv_bn_relu_pads_strides_groups(tmp_path):
    x = rand(2, 4, 11, 9)
    w = rand(6, 2, 3, 3)
    b = rand(6)
    bn = [rand(6, lo=0.5, hi=1.5), rand(6), rand(6), rand(6, lo=0.5, hi=2.0)]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", pads=[1, 0, 2, 1],
                         strides=[2, 1], dilations=[1, 2], group=2),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"], name="bn1",
                         epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["y"], name="relu1"),
    ]
    inits = [init("w", w), init("b", b)] + [init(k, v) for k, v in zip(["s", "bb", "mu", "var"], bn)]
    m = model(nodes, [vi("x", [2, 4, 11, 9])], [vi("y", None)], inits)
    g = check(tmp_path, m, {"x": x})
    assert ops_of(g) == ["conv2d", "batchnorm", "relu"]
    conv = g["nodes"][0]
    assert conv["padding"] == [1, 0, 2, 1] and conv["stride"] == [2, 1]
    assert conv["dilation"] == [1, 2] and conv["groups"] == 2 and conv["name"] == "conv1"


def test_conv_auto_pad_same_and_no_bias(tmp_path):
    x = rand(1, 3, 10, 7)
    for mode in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad=mode,
                                  strides=[2, 2], kernel_shape=[4, 3])]
        m = model(nodes, [vi("x", [1, 3, 10, 7])], [vi("y", None)], [init("w", rand(5, 3, 4, 3))])
        check(tmp_path, m, {"x": x}, name=f"conv_{mode.lower()}")


def test_conv1d(tmp_path):
    x = rand(2, 4, 17)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c1d", pads=[2, 1],
                              strides=[2], group=2)]
    m = model(nodes, [vi("x", [2, 4, 17])], [vi("y", None)],
              [init("w", rand(6, 2, 3)), init("b", rand(6))])
    check(tmp_path, m, {"x": x})


@pytest.mark.parametrize("ta,tb,alpha,beta,c", [
    (0, 1, 1.0, 1.0, "bias1d"),
    (0, 0, 1.0, 1.0, "row"),
    (1, 0, 0.5, 2.0, "const2d"),
    (0, 1, 1.0, 0.3, "input2d"),
    (1, 1, 1.5, 1.0, None),
    (0, 0, 1.0, 1.0, None),
])
def test_gemm_variants(tmp_path, ta, tb, alpha, beta, c):
    m_, k_, n_ = 5, 7, 6
    a_shape = [k_, m_] if ta else [m_, k_]
    b_shape = [n_, k_] if tb else [k_, n_]
    inputs = {"a": rand(*a_shape)}
    ins = [vi("a", a_shape)]
    inits = [init("B", rand(*b_shape))]
    names = ["a", "B"]
    if c == "bias1d":
        inits.append(init("C", rand(n_)))
    elif c == "row":
        inits.append(init("C", rand(1, n_)))
    elif c == "const2d":
        inits.append(init("C", rand(m_, n_)))
    elif c == "input2d":
        ins.append(vi("C", [m_, n_]))
        inputs["C"] = rand(m_, n_)
    if c:
        names.append("C")
    nodes = [helper.make_node("Gemm", names, ["y"], name="fc", transA=ta, transB=tb, alpha=alpha,
                              beta=beta)]
    m = model(nodes, ins, [vi("y", None)], inits)
    g = check(tmp_path, m, inputs)
    if c in ("bias1d", "row") and alpha == 1.0:
        assert ops_of(g) == ["matmul"] and len(g["nodes"][0]["inputs"]) == 3


def test_matmul_batched_and_vector(tmp_path):
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm1"),
        helper.make_node("MatMul", ["h", "x2"], ["y"], name="mm2"),
        helper.make_node("MatMul", ["h", "v"], ["z"], name="mv"),
    ]
    m = model(nodes, [vi("x", [3, 4, 5]), vi("x2", [3, 6, 2])], [vi("y", None), vi("z", None)],
              [init("w", rand(5, 6)), init("v", rand(6))])
    check(tmp_path, m, {"x": rand(3, 4, 5), "x2": rand(3, 6, 2)})


# ---------------------------------------------------------------------------- normalizations

def test_layernorm(tmp_path):
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln", axis=-1,
                              epsilon=1e-6),
             helper.make_node("LayerNormalization", ["x", "s2"], ["z"], name="ln2", axis=1)]
    m = model(nodes, [vi("x", [2, 3, 8])], [vi("y", None), vi("z", None)],
              [init("s", rand(8)), init("b", rand(8)), init("s2", rand(3, 8))])
    g = check(tmp_path, m, {"x": rand(2, 3, 8, lo=-3, hi=3)})
    assert ops_of(g) == ["layernorm", "layernorm"]


@pytest.mark.parametrize("opset", [18, 21])
def test_groupnorm_opset_forms(tmp_path, opset):
    c, groups = 8, 4
    n_params = groups if opset < 21 else c
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="gn",
                              num_groups=groups, epsilon=1e-5)]
    m = model(nodes, [vi("x", [2, c, 5, 3])], [vi("y", None)],
              [init("s", rand(n_params)), init("b", rand(n_params))], opset=opset)
    g = check(tmp_path, m, {"x": rand(2, c, 5, 3)})
    assert ops_of(g) == ["groupnorm"] and g["nodes"][0]["groups"] == groups
    assert all(g["constants"][t]["shape"] == [c] for t in g["nodes"][0]["inputs"][1:])


def test_instancenorm(tmp_path):
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="inorm",
                              epsilon=1e-4)]
    m = model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None)], [init("s", rand(3)), init("b", rand(3))])
    check(tmp_path, m, {"x": rand(2, 3, 4, 5)})


def test_softmax_axes_and_old_opset(tmp_path):
    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)]
    m13 = model(nodes, [vi("x", [2, 3, 4])], [vi("y", None)], opset=13)
    check(tmp_path, m13, {"x": rand(2, 3, 4, lo=-4, hi=4)}, name="sm13")
    # Opset 11: softmax over the flattened dims [axis, rank).
    m11 = model(nodes, [vi("x", [2, 3, 4])], [vi("y", None)], opset=11)
    g = check(tmp_path, m11, {"x": rand(2, 3, 4, lo=-4, hi=4)}, name="sm11")
    assert ops_of(g) == ["reshape", "softmax", "reshape"]


# ---------------------------------------------------------------------------- windows

def test_pools(tmp_path):
    nodes = [
        helper.make_node("MaxPool", ["x"], ["mp"], name="mp", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["x"], ["mpc"], name="mpc", kernel_shape=[3, 2],
                         strides=[2, 2], ceil_mode=1),
        helper.make_node("AveragePool", ["x"], ["ap0"], name="ap0", kernel_shape=[3, 3],
                         strides=[2, 1], pads=[1, 0, 1, 2], count_include_pad=0),
        helper.make_node("AveragePool", ["x"], ["ap1"], name="ap1", kernel_shape=[2, 3],
                         pads=[1, 1, 0, 1], count_include_pad=1),
        helper.make_node("GlobalAveragePool", ["x"], ["gap"], name="gap"),
        helper.make_node("GlobalMaxPool", ["x"], ["gmp"], name="gmp"),
    ]
    outs = ["mp", "mpc", "ap0", "ap1", "gap", "gmp"]
    m = model(nodes, [vi("x", [2, 3, 10, 9])], [vi(o, None) for o in outs])
    check(tmp_path, m, {"x": rand(2, 3, 10, 9)})


# ---------------------------------------------------------------------------- movement, folding

def test_reshape_flatten_transpose_with_shape_chain(tmp_path):
    # Exporter-style: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, dynamic batch.
    nodes = [
        helper.make_node("Shape", ["x"], ["sh"], name="shape"),
        helper.make_node("Gather", ["sh", "i0"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="unsq"),
        helper.make_node("Concat", ["n1", "tail"], ["target"], name="cat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="tr", perm=[0, 2, 1]),
        helper.make_node("Flatten", ["t"], ["f"], name="flat", axis=1),
        helper.make_node("Reshape", ["x", "shp2"], ["r2"], name="reshape0"),
        helper.make_node("Transpose", ["r2"], ["t2"], name="trdefault"),
    ]
    inits = [init("i0", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
             init("tail", np.array([6, -1], np.int64)), init("shp2", np.array([0, -1], np.int64))]
    m = model(nodes, [vi("x", ["batch", 3, 4, 2])], [vi("f", None), vi("t2", None)], inits)
    g = check(tmp_path, m, {"x": rand(5, 3, 4, 2)})
    assert g["inputs"]["x"]["shape"] == ["batch", 3, 4, 2]
    assert g["nodes"][0]["shape"] == ["batch", 6, -1]
    assert "Shape" not in json.dumps(g)


def test_erf_gelu_patterns(tmp_path):
    s2 = init("s2", np.array(math.sqrt(2), np.float32))
    r2 = init("r2", np.array(1 / math.sqrt(2), np.float32))
    one = init("one", np.array(1.0, np.float32))
    half = init("half", np.array(0.5, np.float32))
    nodes = [
        # A: (x * (1 + erf(x / sqrt2))) * 0.5 -- torch's export
        helper.make_node("Div", ["x", "s2"], ["a1"], name="a_div"),
        helper.make_node("Erf", ["a1"], ["a2"], name="a_erf"),
        helper.make_node("Add", ["a2", "one"], ["a3"], name="a_add"),
        helper.make_node("Mul", ["x", "a3"], ["a4"], name="a_mul"),
        helper.make_node("Mul", ["a4", "half"], ["ya"], name="a_gelu"),
        # B: x * ((1 + erf(x * 1/sqrt2)) * 0.5), operands swapped
        helper.make_node("Mul", ["r2", "x"], ["b1"], name="b_mul0"),
        helper.make_node("Erf", ["b1"], ["b2"], name="b_erf"),
        helper.make_node("Add", ["one", "b2"], ["b3"], name="b_add"),
        helper.make_node("Mul", ["half", "b3"], ["b4"], name="b_half"),
        helper.make_node("Mul", ["b4", "x"], ["yb"], name="b_gelu"),
        # C: (0.5 * x) * (1 + erf(x / sqrt2))
        helper.make_node("Mul", ["half", "x"], ["c0"], name="c_half"),
        helper.make_node("Div", ["x", "s2"], ["c1"], name="c_div"),
        helper.make_node("Erf", ["c1"], ["c2"], name="c_erf"),
        helper.make_node("Add", ["c2", "one"], ["c3"], name="c_add"),
        helper.make_node("Mul", ["c3", "c0"], ["yc"], name="c_gelu"),
    ]
    m = model(nodes, [vi("x", [4, 16])], [vi("ya", None), vi("yb", None), vi("yc", None)],
              [s2, r2, one, half])
    g = check(tmp_path, m, {"x": rand(4, 16, lo=-4, hi=4)})
    assert ops_of(g) == ["gelu", "gelu", "gelu"]
    assert [n["name"] for n in g["nodes"]] == ["a_gelu", "b_gelu", "c_gelu"]


def test_tanh_gelu_patterns(tmp_path):
    # HF gelu_new as torch exports it: (x * 0.5) * (1 + tanh(c * (x + 0.044715 * x^3))), and a
    # form with every operand order swapped; a third whose cube is also an output stays unfused.
    c = init("c", np.array(math.sqrt(2 / math.pi), np.float32))
    k = init("k", np.array(0.044715, np.float32))
    three = init("three", np.array(3.0, np.float32))
    one = init("one", np.array(1.0, np.float32))
    half = init("half", np.array(0.5, np.float32))

    def chain(p, swap):
        o = (lambda a, b: [b, a]) if swap else (lambda a, b: [a, b])
        return [helper.make_node("Mul", o("x", "half"), [p + "h"], name=p + "_half"),
                helper.make_node("Pow", ["x", "three"], [p + "p"], name=p + "_pow"),
                helper.make_node("Mul", o(p + "p", "k"), [p + "q"], name=p + "_mulk"),
                helper.make_node("Add", o("x", p + "q"), [p + "r"], name=p + "_add"),
                helper.make_node("Mul", o(p + "r", "c"), [p + "u"], name=p + "_mulc"),
                helper.make_node("Tanh", [p + "u"], [p + "t"], name=p + "_tanh"),
                helper.make_node("Add", o(p + "t", "one"), [p + "a"], name=p + "_add1"),
                helper.make_node("Mul", o(p + "h", p + "a"), ["y" + p], name=p + "_gelu")]
    nodes = chain("a", False) + chain("b", True) + chain("c", False)
    m = model(nodes, [vi("x", [4, 16])],
              [vi("ya", None), vi("yb", None), vi("yc", None), vi("cp", None)],
              [c, k, three, one, half])
    g = check(tmp_path, m, {"x": rand(4, 16, lo=-4, hi=4)})
    gelus = [n for n in g["nodes"] if n["op"] == "gelu"]
    assert [n["name"] for n in gelus] == ["a_gelu", "b_gelu"]
    assert all(n["approximate"] == "tanh" for n in gelus)
    assert "tanh" in ops_of(g) and "pow" in ops_of(g)  # chain c: its cube is read elsewhere


def test_folded_bool_expanded_to_runtime_shape_stays_bool(tmp_path):
    # transformers 5.17's ViT export: Where(Expand(GreaterOrEqual(consts), Shape(x)), ...). The
    # comparison folds to a bool constant; the expand (to a run-time shape) must keep it bool.
    nodes = [helper.make_node("GreaterOrEqual", ["r", "zero"], ["ge"], name="ge"),
             helper.make_node("Shape", ["x"], ["sh"], name="shape"),
             helper.make_node("Expand", ["ge", "sh"], ["e"], name="expand"),
             helper.make_node("Where", ["e", "x", "fill"], ["y"], name="where")]
    inits = [init("r", np.array([[-1, 0, 1, 2]], np.int64)), init("zero", np.array(0, np.int64)),
             init("fill", np.array(-5.0, np.float32))]
    m = model(nodes, [vi("x", ["N", 4])], [vi("y", None)], inits)
    g = check(tmp_path, m, {"x": rand(3, 4)})
    assert "where" in ops_of(g)


def test_gelu_op_opset20(tmp_path):
    nodes = [helper.make_node("Gelu", ["x"], ["y"], name="g0"),
             helper.make_node("Gelu", ["x"], ["z"], name="g1", approximate="tanh")]
    m = model(nodes, [vi("x", [3, 10])], [vi("y", None), vi("z", None)], opset=20)
    check(tmp_path, m, {"x": rand(3, 10, lo=-4, hi=4)})


def test_erf_not_gelu_stays_erf(tmp_path):
    # Erf whose result is also an output: no fusion.
    nodes = [helper.make_node("Div", ["x", "s2"], ["a1"], name="d"),
             helper.make_node("Erf", ["a1"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["y"], name="add")]
    m = model(nodes, [vi("x", [8])], [vi("y", None), vi("e", None)],
              [init("s2", np.array(math.sqrt(2), np.float32)), init("one", np.array(1.0, np.float32))])
    g = check(tmp_path, m, {"x": rand(8)})
    assert "erf" in ops_of(g) and "gelu" not in ops_of(g)


def test_clip_forms(tmp_path):
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip"),
             helper.make_node("Clip", ["x", "", "hi"], ["z"], name="cliphi")]
    m = model(nodes, [vi("x", [3, 5])], [vi("y", None), vi("z", None)],
              [init("lo", np.array(-0.3, np.float32)), init("hi", np.array(0.4, np.float32))])
    check(tmp_path, m, {"x": rand(3, 5)}, name="clip13")
    old = [helper.make_node("Clip", ["x"], ["y"], name="clip6", min=0.0, max=6.0)]
    m6 = model(old, [vi("x", [3, 5])], [vi("y", None)], opset=6)
    m6.ir_version = 3
    check(tmp_path, m6, {"x": rand(3, 5, lo=-8, hi=8)}, name="clip6")


@pytest.mark.parametrize("bound", ["Clip", "Max"])
def test_normalize_eps_survives_f16(tmp_path, bound):
    # F.normalize as exported (Swin V2's cosine attention): x / Expand(Clip(ReduceL2(x), 1e-12))
    # (the dynamo exporter: Max). In f16 the bound 1e-12 is 0, so a zero row (a padded window
    # token) became 0/0 = NaN; the clamp's result is kept in f32 and the zero row stays 0.
    nodes = [helper.make_node("ReduceL2", ["x"], ["n"], name="l2", axes=[1], keepdims=1),
             helper.make_node(bound, ["n", "eps"], ["c"], name="clip"),
             helper.make_node("Shape", ["x"], ["sh"], name="shape"),
             helper.make_node("Expand", ["c", "sh"], ["e"], name="expand"),
             helper.make_node("Div", ["x", "e"], ["y"], name="div")]
    m = model(nodes, [vi("x", ["N", 8])], [vi("y", None)], [init("eps", np.array(1e-12, np.float32))])
    graph, _ = convert(tmp_path, m, "--dtype", "f16")
    x = rand(3, 8)
    x[1] = 0.0  # the padded token
    inp, outp = tmp_path / "in16.safetensors", tmp_path / "out16.safetensors"
    write_safetensors(str(inp), {"x": ("f16", x)})
    r = subprocess.run([KILN, "run", str(graph), "--device", "cpu", "--inputs", str(inp),
                        "--output", str(outp)], capture_output=True, text=True, env=KILN_ENV)
    assert r.returncode == 0, r.stderr
    got = read_safetensors(str(outp))["y"]
    assert np.all(got[1] == 0.0), got[1]
    assert rel_err(got, ort_run(m, {"x": x})["y"]) <= 1e-2
    g = json.loads(graph.read_text())
    assert [n["dtype"] for n in g["nodes"] if n["op"] == "cast"] == ["f32"]


def test_reductions(tmp_path):
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["a"], name="rmean", axes=[1, 3], keepdims=1),
        helper.make_node("ReduceSum", ["x", "ax"], ["b"], name="rsum", keepdims=0),
        helper.make_node("ReduceMax", ["x"], ["c"], name="rmax", axes=[-1], keepdims=0),
        helper.make_node("ReduceSum", ["x"], ["d"], name="rall", keepdims=1),
    ]
    m = model(nodes, [vi("x", [2, 3, 4, 5])], [vi(o, None) for o in "abcd"],
              [init("ax", np.array([0, 2], np.int64))], opset=13)
    check(tmp_path, m, {"x": rand(2, 3, 4, 5)})


def test_cast_and_elementwise(tmp_path):
    nodes = [
        helper.make_node("Constant", [], ["k"], name="k", value=init("kv", rand(1, 6))),
        helper.make_node("Add", ["x", "k"], ["a"], name="add"),
        helper.make_node("Sub", ["a", "y"], ["b"], name="sub"),
        helper.make_node("Mul", ["b", "x"], ["c"], name="mul"),
        helper.make_node("Div", ["c", "d"], ["e"], name="div"),
        helper.make_node("Abs", ["e"], ["f"], name="abs"),
        helper.make_node("Sqrt", ["f"], ["g"], name="sqrt"),
        helper.make_node("Pow", ["g", "p"], ["h"], name="pow"),
        helper.make_node("Exp", ["h"], ["i"], name="exp"),
        helper.make_node("Log", ["i"], ["j"], name="log"),
        helper.make_node("Neg", ["j"], ["l"], name="neg"),
        helper.make_node("Sigmoid", ["l"], ["m"], name="sig"),
        helper.make_node("Reciprocal", ["m"], ["n"], name="rec"),
        helper.make_node("Tanh", ["n"], ["o"], name="tanh"),
        helper.make_node("Erf", ["o"], ["q"], name="erf"),
        helper.make_node("Identity", ["q"], ["q2"], name="ident"),
        helper.make_node("Dropout", ["q2"], ["q3"], name="drop"),
        helper.make_node("Cast", ["q3"], ["h16"], name="to16", to=TensorProto.FLOAT16),
        helper.make_node("Relu", ["h16"], ["r16"], name="relu16"),
        helper.make_node("Cast", ["r16"], ["out"], name="to32", to=F),
    ]
    m = model(nodes, [vi("x", [4, 6]), vi("y", [6])], [vi("out", None), vi("q", None)],
              [init("d", rand(4, 1, lo=0.5, hi=2)), init("p", np.array(1.5, np.float32))])
    g = check(tmp_path, m, {"x": rand(4, 6), "y": rand(6)}, tol=1e-3)
    assert "cast" in ops_of(g)


# ---------------------------------------------------------------------------- options, errors

def _small_cnn(batch="N"):
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    return model(nodes, [vi("x", [batch, 3, 8, 8])], [vi("y", [batch, 5])],
                 [init("w", rand(4, 3, 3, 3)), init("b", rand(4)), init("fw", rand(5, 4)),
                  init("fb", rand(5))])


def test_dynamic_batch_two_sizes(tmp_path):
    m = _small_cnn("batch_size")
    graph, _ = convert(tmp_path, m)
    g = json.loads(graph.read_text())
    assert g["inputs"]["x"]["shape"][0] == "batch_size"
    for n, tag in ((1, "n1"), (3, "n3")):
        x = rand(n, 3, 8, 8)
        got = kiln_run(tmp_path, graph, {"x": x}, tag=tag)
        want = ort_run(m, {"x": x})["y"]
        assert got["y"].shape == (n, 5)
        assert rel_err(got["y"], want) <= 1e-4


def test_missing_dim_becomes_symbol(tmp_path):
    m = _small_cnn(None)
    graph, _ = convert(tmp_path, m)
    g = json.loads(graph.read_text())
    sym = g["inputs"]["x"]["shape"][0]
    assert isinstance(sym, str) and sym.isidentifier()


def test_weights_file_and_inline_constants(tmp_path):
    m = _small_cnn()
    graph, _ = convert(tmp_path, m)
    g = json.loads(graph.read_text())
    st = read_safetensors(str(graph.with_suffix(".safetensors")))
    assert g["constants"]["w"]["file"] == "m.safetensors" and "w" in st
    np.testing.assert_array_equal(st["w"], numpy_helper.to_array(m.graph.initializer[0]))
    assert "data" in g["constants"]["b"]  # tiny: inline


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_dtype_conversion(tmp_path, dtype):
    m = _small_cnn()
    graph, _ = convert(tmp_path, m, "--dtype", dtype)
    g = json.loads(graph.read_text())
    assert g["inputs"]["x"]["dtype"] == dtype
    assert all(c["dtype"] == dtype for c in g["constants"].values())
    x = rand(2, 3, 8, 8)
    # kiln reads f32 inputs only in the declared dtype: write them converted.
    inp = tmp_path / "in16.safetensors"
    outp = tmp_path / "out16.safetensors"
    write_safetensors(str(inp), {"x": (dtype, x)})
    r = subprocess.run([KILN, "run", str(graph), "--device", "cpu", "--inputs", str(inp),
                        "--output", str(outp)], capture_output=True, text=True, env=KILN_ENV)
    assert r.returncode == 0, r.stderr
    got = read_safetensors(str(outp))["y"]
    assert rel_err(got, ort_run(m, {"x": x})["y"]) <= 3e-2


def test_layout_nhwc(tmp_path):
    m = _small_cnn()
    g = check(tmp_path, m, {"x": rand(2, 3, 8, 8)}, "--layout", "NHWC")
    assert g["inputs"]["x"]["layout"] == "NHWC"
    assert g["constants"]["w"]["layout"] == "NHWC"
    assert "layout" not in g["constants"]["fw"]


def test_unsupported_ops_listed(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="ok"),
             helper.make_node("TopK", ["r", "k"], ["v", "i"], name="topk_1", axis=-1),
             helper.make_node("Det", ["r"], ["z"], name="det_a"),
             helper.make_node("Det", ["r"], ["z2"], name="det_b")]
    m = model(nodes, [vi("x", [1, 1, 4, 4])], [vi("v", None), vi("z", None), vi("z2", None)],
              [init("k", np.array([2], np.int64))], opset=13)
    _, r = convert(tmp_path, m, expect_rc=2)
    msg = r.stderr
    assert "TopK" in msg and "topk_1" in msg
    assert "Det" in msg and "det_a" in msg and "det_b" in msg
    assert msg.count("error") == 1 and "Traceback" not in msg


def test_runtime_shape_is_refused(tmp_path):
    # A Reshape whose target comes from a run-time tensor value: clear error, exit 2.
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn_reshape")]
    m = model(nodes, [vi("x", [2, 6]), vi("s", [2], TensorProto.INT64)], [vi("y", None)])
    _, r = convert(tmp_path, m, expect_rc=2)
    # An int64 input is a tensor kiln holds, but not a shape it can reshape by.
    assert "'s'" in r.stderr and "run-time tensor" in r.stderr


def test_bad_model_file(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"not a model")
    r = subprocess.run([*IMPORTER, str(p), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, env=IMPORTER_ENV)
    assert r.returncode == 2 and "junk.onnx" in r.stderr


def test_kiln_import_subcommand(tmp_path):
    m = _small_cnn()
    path = tmp_path / "cnn.onnx"
    onnx.save(m, str(path))
    out = tmp_path / "imp"
    r = subprocess.run([KILN, "import", str(path), "--out", str(out), "--name", "cnn", "--layout",
                        "NHWC"], capture_output=True, text=True, env=KILN_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    g = json.loads((out / "cnn.json").read_text())
    assert g["inputs"]["x"]["layout"] == "NHWC"
    r = subprocess.run([KILN, "import", str(tmp_path / "missing.onnx"), "--out", str(out)],
                       capture_output=True, text=True, env=KILN_ENV)
    assert r.returncode == 2 and "missing.onnx" in r.stderr


# ---------------------------------------------------------------------------- exporter-style graphs

def _torch_groupnorm(prefix, x, c, groups, nodes, inits):
    """torch.onnx's GroupNorm (opset 17): Reshape [0, G, -1] -> InstanceNormalization(ones,
    zeros) -> Reshape(Shape(x)) -> Mul(w[C,1,1]) -> Add(b[C,1,1])."""
    p = prefix
    inits += [init(f"{p}.shape", np.array([0, groups, -1], np.int64)),
              init(f"{p}.ones", np.ones(groups, np.float32)),
              init(f"{p}.zeros", np.zeros(groups, np.float32)),
              init(f"{p}.weight", rand(c, 1, 1, lo=0.5, hi=1.5)), init(f"{p}.bias", rand(c, 1, 1))]
    nodes += [
        helper.make_node("Reshape", [x, f"{p}.shape"], [f"{p}/r1"], name=f"{p}/Reshape"),
        helper.make_node("InstanceNormalization", [f"{p}/r1", f"{p}.ones", f"{p}.zeros"],
                         [f"{p}/in"], name=f"{p}/InstanceNormalization", epsilon=1e-5),
        helper.make_node("Shape", [x], [f"{p}/shape"], name=f"{p}/Shape"),
        helper.make_node("Reshape", [f"{p}/in", f"{p}/shape"], [f"{p}/r2"], name=f"{p}/Reshape_1"),
        helper.make_node("Mul", [f"{p}/r2", f"{p}.weight"], [f"{p}/mul"], name=f"{p}/Mul"),
        helper.make_node("Add", [f"{p}/mul", f"{p}.bias"], [f"{p}/out"], name=f"{p}/Add"),
    ]
    return f"{p}/out"


def test_torch_style_groupnorm_silu_conv_block(tmp_path):
    nodes, inits = [], []
    h = _torch_groupnorm("n1", "x", 8, 4, nodes, inits)
    nodes += [helper.make_node("Sigmoid", [h], ["sg"], name="silu/Sigmoid"),
              helper.make_node("Mul", [h, "sg"], ["act"], name="silu/Mul"),
              helper.make_node("Conv", ["act", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1],
                               strides=[2, 2])]
    inits += [init("cw", rand(6, 8, 3, 3)), init("cb", rand(6))]
    m = model(nodes, [vi("x", ["N", 8, 6, 6])], [vi("c", ["N", 6, 3, 3])], inits)
    g = check(tmp_path, m, {"x": rand(2, 8, 6, 6, lo=-2, hi=3)})
    assert ops_of(g) == ["groupnorm", "silu", "conv2d"]
    gn = g["nodes"][0]
    assert gn["groups"] == 4 and len(gn["inputs"]) == 3


def test_torch_style_attention_block(tmp_path):
    # Pre-LN attention as torch.onnx (opset 17) exports it, with b, s, d = x.shape.
    d, heads = 16, 2
    hd = d // heads
    inits = [init("i0", np.array(0, np.int64)), init("i1", np.array(1, np.int64)),
             init("ax0", np.array([0], np.int64)), init("heads", np.array([heads], np.int64)),
             init("hd", np.array([hd], np.int64)), init("dmodel", np.array([d], np.int64)),
             init("scale", np.array(math.sqrt(hd), np.float32)),
             init("ln.w", rand(d, lo=0.5, hi=1.5)), init("ln.b", rand(d)),
             init("s2", np.array(1.4142135, np.float32)), init("one", np.array(1.0, np.float32)),
             init("half", np.array(0.5, np.float32)),
             init("fc.w", rand(d, 2 * d)), init("fc.b", rand(2 * d))]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln.w", "ln.b"], ["ln"], name="ln", axis=-1),
        helper.make_node("Shape", ["ln"], ["shape"], name="Shape"),
        helper.make_node("Gather", ["shape", "i0"], ["b"], name="Gather_b", axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["s"], name="Gather_s", axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"], name="Unsq_b"),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"], name="Unsq_s"),
        helper.make_node("Concat", ["b1", "s1", "heads", "hd"], ["hshape"], name="Concat", axis=0),
        helper.make_node("Concat", ["b1", "s1", "dmodel"], ["mshape"], name="Concat_m", axis=0),
    ]
    for t in "qkv":
        inits += [init(f"{t}.w", rand(d, d)), init(f"{t}.b", rand(d))]
        nodes += [
            helper.make_node("MatMul", ["ln", f"{t}.w"], [f"{t}_mm"], name=f"{t}/MatMul"),
            helper.make_node("Add", [f"{t}.b", f"{t}_mm"], [f"{t}_lin"], name=f"{t}/Add"),
            helper.make_node("Reshape", [f"{t}_lin", "hshape"], [f"{t}_r"], name=f"{t}/Reshape"),
            helper.make_node("Transpose", [f"{t}_r"], [f"{t}_h"], name=f"{t}/Transpose",
                             perm=[0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("Transpose", ["k_h"], ["kT"], name="kT", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q_h", "kT"], ["att"], name="att/MatMul"),
        helper.make_node("Div", ["att", "scale"], ["atts"], name="att/Div"),
        helper.make_node("Softmax", ["atts"], ["p"], name="att/Softmax", axis=-1),
        helper.make_node("MatMul", ["p", "v_h"], ["o"], name="o/MatMul"),
        helper.make_node("Transpose", ["o"], ["oT"], name="o/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["oT", "mshape"], ["om"], name="o/Reshape"),
        helper.make_node("Add", ["x", "om"], ["res"], name="residual"),
        helper.make_node("MatMul", ["res", "fc.w"], ["f_mm"], name="fc/MatMul"),
        helper.make_node("Add", ["f_mm", "fc.b"], ["f"], name="fc/Add"),
        helper.make_node("Div", ["f", "s2"], ["g1"], name="gelu/Div"),
        helper.make_node("Erf", ["g1"], ["g2"], name="gelu/Erf"),
        helper.make_node("Add", ["g2", "one"], ["g3"], name="gelu/Add"),
        helper.make_node("Mul", ["f", "g3"], ["g4"], name="gelu/Mul"),
        helper.make_node("Mul", ["g4", "half"], ["y"], name="gelu/Mul_1"),
    ]
    m = model(nodes, [vi("x", ["batch", 5, d])], [vi("y", ["batch", 5, 2 * d])], inits)
    g = None
    for n in (1, 3):
        g = check(tmp_path, m, {"x": rand(n, 5, d)}, name=f"att{n}")
    ops = ops_of(g)
    assert ops.count("matmul") == 6 and "add" in ops and ops[-1] == "gelu"
    assert all(len(n["inputs"]) == 3 for n in g["nodes"] if n["op"] == "matmul"
               and n["name"] != "att_MatMul" and n["name"] != "o_MatMul")
    assert [n["shape"] for n in g["nodes"] if n["op"] == "reshape"] == [
        ["batch", 5, heads, hd]] * 3 + [["batch", 5, d]]


def test_shape_math_products_become_dim_expressions(tmp_path):
    # Reshape to [batch * seq, -1]: a product of two run-time dims is the dim expression
    # "batch*seq" (symdim.py); a target computed from data is refused (test_shape_idioms_import).
    nodes = [helper.make_node("Shape", ["x"], ["sh"], name="shape"),
             helper.make_node("Gather", ["sh", "i0"], ["b"], name="g0", axis=0),
             helper.make_node("Gather", ["sh", "i1"], ["s"], name="g1", axis=0),
             helper.make_node("Mul", ["b", "s"], ["bs"], name="bs_mul"),
             helper.make_node("Unsqueeze", ["bs", "ax0"], ["bs1"], name="unsq"),
             helper.make_node("Concat", ["bs1", "m1"], ["t"], name="cat", axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"], name="flat_reshape")]
    m = model(nodes, [vi("x", ["batch", "seq", 4])], [vi("y", None)],
              [init("i0", np.array(0, np.int64)), init("i1", np.array(1, np.int64)),
               init("ax0", np.array([0], np.int64)), init("m1", np.array([-1], np.int64))])
    g = check(tmp_path, m, {"x": rand(3, 2, 4)})
    assert g["nodes"][0]["shape"] == ["batch*seq", -1]


def test_pad_folds_into_conv(tmp_path):
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="constant"),
             helper.make_node("Conv", ["p", "w"], ["y"], name="conv", pads=[1, 0, 0, 1])]
    m = model(nodes, [vi("x", [1, 2, 6, 5])], [vi("y", None)],
              [init("pads", np.array([0, 0, 2, 1, 0, 0, 0, 3], np.int64)),
               init("w", rand(3, 2, 3, 3))], opset=13)
    g = check(tmp_path, m, {"x": rand(1, 2, 6, 5)})
    assert ops_of(g) == ["conv2d"] and g["nodes"][0]["padding"] == [3, 1, 0, 4]
    bad = [helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_alone", mode="wrap")]
    m2 = model(bad, [vi("x", [1, 2, 6, 5])], [vi("y", None)],
               [init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], opset=19)
    _, r = convert(tmp_path, m2, name="bad", expect_rc=2)
    assert "pad_alone" in r.stderr and "Pad" in r.stderr


def test_pad_op(tmp_path):
    # Constant padding that does not fold into a conv becomes kiln's pad op: channel padding with
    # a value, a symbolic batch left alone, and -inf padding before a max pool.
    nodes = [helper.make_node("Pad", ["x", "pads", "v"], ["p"], name="pad_c", mode="constant"),
             helper.make_node("Relu", ["p"], ["y"], name="relu")]
    m = model(nodes, [vi("x", ["N", 3, 5, 4])], [vi("y", None)],
              [init("pads", np.array([0, 0, 1, 0, 0, 5, 0, 2], np.int64)),
               init("v", np.array(0.5, np.float32))], opset=13)
    g = check(tmp_path, m, {"x": rand(2, 3, 5, 4)})
    assert ops_of(g) == ["pad", "relu"]
    assert g["nodes"][0]["pads"] == [0, 0, 1, 0, 0, 5, 0, 2] and g["nodes"][0]["value"] == 0.5
    nodes = [helper.make_node("Pad", ["x", "pads", "v"], ["p"], name="pad_inf", mode="constant"),
             helper.make_node("MaxPool", ["p"], ["y"], name="pool", kernel_shape=[3, 3],
                              strides=[2, 2])]
    m = model(nodes, [vi("x", [1, 2, 7, 6])], [vi("y", None)],
              [init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
               init("v", np.array(-np.inf, np.float32))], opset=13)
    g = check(tmp_path, m, {"x": rand(1, 2, 7, 6)}, name="mp")
    assert ops_of(g) == ["pad", "maxpool2d"] and g["nodes"][0]["value"] == "-inf"
    # A symbolic dim cannot grow; cropping is refused.
    for pads, what in (([1, 0, 0, 0, 0, 0, 0, 0], "symbolic"), ([0, 0, -1, 0, 0, 0, 0, 0], "crop")):
        bad = [helper.make_node("Pad", ["x", "pads"], ["y"], name="pad_bad", mode="constant")]
        m = model(bad, [vi("x", ["N", 3, 5, 4])], [vi("y", None)],
                  [init("pads", np.array(pads, np.int64))], opset=13)
        _, r = convert(tmp_path, m, name="bad_" + what, expect_rc=2)
        assert "pad_bad" in r.stderr and ("symbolic" in r.stderr or "crop" in r.stderr), r.stderr


def test_passthrough_and_repeated_outputs(tmp_path):
    # An input returned as is (through Identity) and one tensor returned twice.
    nodes = [helper.make_node("Identity", ["x"], ["same"], name="ident"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Identity", ["r"], ["r2"], name="ident2")]
    m = model(nodes, [vi("x", [2, 3])], [vi("same", None), vi("r", None), vi("r2", None)])
    g = check(tmp_path, m, {"x": rand(2, 3)})
    assert g["outputs"] == ["same", "r", "r2"]
    assert g["metadata"]["onnx"]["outputs"] == {"same": "same", "r": "r", "r2": "r2"}


def test_input_without_shape_is_refused(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    x = helper.make_tensor_value_info("x", F, None)
    m = model(nodes, [x], [vi("y", None)])
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "'x'" in r.stderr and "no shape" in r.stderr


def test_embedding_gather_converts(tmp_path):
    # A run-time index (an embedding lookup) and run-time data with constant indices convert
    # (tests/python/test_gather_import.py runs them against onnxruntime).
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed", axis=0)]
    m = model(nodes, [vi("ids", [4], TensorProto.INT64)], [vi("e", None)],
              [init("table", rand(10, 3))])
    graph, _ = convert(tmp_path, m)
    with open(graph) as f:
        assert ops_of(json.load(f)) == ["gather"]
    nodes = [helper.make_node("Gather", ["x", "i"], ["e"], name="gather_rows", axis=0)]
    m = model(nodes, [vi("x", [4, 3])], [vi("e", None)], [init("i", np.array([1, 2], np.int64))])
    graph, _ = convert(tmp_path, m, name="g2")
    with open(graph) as f:
        assert ops_of(json.load(f)) == ["slice"]  # a step-1 range of rows


def test_unchanged_model_is_not_converted_again(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu1")]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])
    graph, r = convert(tmp_path, m, name="r")
    assert "wrote" in r.stdout and "up to date" not in r.stdout
    # Same model bytes, options and converter, outputs untouched: nothing is rewritten.
    before = graph.stat().st_mtime_ns
    _, r = convert(tmp_path, m, name="r")
    assert "up to date" in r.stdout and "wrote" in r.stdout, r.stdout  # the summary is repeated
    assert graph.stat().st_mtime_ns == before
    # Other options, --force, an edited output or a changed model: converted again.
    _, r = convert(tmp_path, m, "--layout", "NHWC", name="r")
    assert "up to date" not in r.stdout
    _, r = convert(tmp_path, m, "--layout", "NHWC", "--force", name="r")
    assert "up to date" not in r.stdout
    with open(graph, "a") as f:
        f.write(" ")
    _, r = convert(tmp_path, m, name="r")
    assert "up to date" not in r.stdout
    nodes = [helper.make_node("Sigmoid", ["x"], ["y"], name="sig1")]
    _, r = convert(tmp_path, model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])]), name="r")
    assert "up to date" not in r.stdout
    assert json.loads(graph.read_text())["nodes"][0]["op"] == "sigmoid"
