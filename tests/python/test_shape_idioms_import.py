"""ONNX import of the exporters' shape and mask idioms: shape values folded symbolically
(polynomials over the dynamic dims, `N*S`), so that run-time-computed Reshape / Expand targets
become dim lists; comparisons, Where, Mod, Max over shapes; ScatterND / ScatterElements folded on
constants (every reduction) and refused on run-time data. Each converted model is run with kiln's
CPU reference and compared with onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from test_onnx_import import check, convert, init, model, ops_of, rand, vi
from test_onnx_int_bool import check as typed_check

I64 = TensorProto.INT64


def ints(name, v):
    return init(name, np.array(v, np.int64))


def shape_of(x, out, idx, name):
    """Shape(x)[idx] as a 1-element vector (Gather + Unsqueeze, as torch writes x.size(i))."""
    return [helper.make_node("Shape", [x], [f"{name}_s"], name=f"{name}_shape"),
            helper.make_node("Gather", [f"{name}_s", f"i{idx}"], [f"{name}_g"], name=f"{name}_gather",
                             axis=0),
            helper.make_node("Unsqueeze", [f"{name}_g", "ax0"], [out], name=f"{name}_unsq")]


IDX = [ints(f"i{i}", i) for i in range(4)] + [ints("ax0", [0])]


def test_reshape_target_from_shape_products(tmp_path):
    # [N, S, 12] -> [N * S, 12] -> [N, S, 3, 4]: the targets come from Shape/Gather/Mul/Concat
    # (a product of two run-time dims, refused before symbolic shape values).
    nodes = shape_of("x", "n", 0, "a") + shape_of("x", "s", 1, "b") + [
        helper.make_node("Mul", ["n", "s"], ["ns"], name="ns"),
        helper.make_node("Concat", ["ns", "twelve"], ["t1"], name="t1", axis=0),
        helper.make_node("Reshape", ["x", "t1"], ["flat"], name="flat"),
        helper.make_node("Relu", ["flat"], ["r"], name="relu"),
        helper.make_node("Concat", ["n", "s", "heads"], ["t2"], name="t2", axis=0),
        helper.make_node("Reshape", ["r", "t2"], ["y"], name="split_heads")]
    m = model(nodes, [vi("x", ["N", "S", 12])], [vi("y", None)],
              IDX + [ints("twelve", [12]), ints("heads", [3, 4])], opset=13)
    g = check(tmp_path, m, {"x": rand(2, 5, 12)})
    assert ops_of(g) == ["reshape", "relu", "reshape"]
    assert g["nodes"][0]["shape"] == ["N*S", 12] and g["nodes"][2]["shape"] == ["N", "S", 3, 4]
    check(tmp_path, m, {"x": rand(3, 1, 12)}, name="m2")


def test_reshape_target_with_sums_and_exact_division(tmp_path):
    # cat = [x, x] along dim 1 is [N, 2*S, 6]; Shape(cat)[1] / 2 is S (an exact division):
    # reshape to [N, S, 12]. cat2 = [z, c] is [S+1, 6]; Shape(cat2)[0] * 6 is 6*S+6.
    nodes = shape_of("x", "n", 0, "a") + [
        helper.make_node("Concat", ["x", "x"], ["cat"], name="cat", axis=1),
        helper.make_node("Shape", ["cat"], ["cs"], name="cs"),
        helper.make_node("Gather", ["cs", "i1"], ["s2"], name="s2"),
        helper.make_node("Div", ["s2", "two"], ["s"], name="half"),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["sv"], name="sv"),
        helper.make_node("Concat", ["n", "sv", "twelve"], ["t"], name="t", axis=0),
        helper.make_node("Reshape", ["cat", "t"], ["y1"], name="pairs"),
        helper.make_node("Concat", ["z", "c"], ["cat2"], name="cat2", axis=0),
        helper.make_node("Shape", ["cat2"], ["c2s"], name="c2s"),
        helper.make_node("Gather", ["c2s", "i0"], ["s1"], name="s1"),
        helper.make_node("Mul", ["s1", "six"], ["s6"], name="s6"),
        helper.make_node("Unsqueeze", ["s6", "ax0"], ["t2"], name="t2"),
        helper.make_node("Reshape", ["cat2", "t2"], ["y2"], name="flat")]
    m = model(nodes, [vi("x", ["N", "S", 6]), vi("z", ["S", 6])], [vi("y1", None), vi("y2", None)],
              IDX + [ints("two", 2), ints("six", 6), ints("twelve", [12]), init("c", rand(1, 6))],
              opset=13)
    g = check(tmp_path, m, {"x": rand(2, 3, 6), "z": rand(3, 6)})
    shapes = {n["name"]: n.get("shape") for n in g["nodes"]}
    assert shapes["pairs"] == ["N", "S", 12] and shapes["flat"] == ["6*S+6"]


def test_unfoldable_target_is_refused(tmp_path):
    # A target computed from data (a run-time tensor's values), not from shapes.
    nodes = [helper.make_node("Cast", ["t"], ["tt"], name="cast", to=I64),
             helper.make_node("Reshape", ["x", "tt"], ["y"], name="data_reshape")]
    m = model(nodes, [vi("x", ["N", 4]), vi("t", [2])], [vi("y", None)], opset=13)
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "data_reshape" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_expand_target_through_where_equal_minus_one(tmp_path):
    # torch's expand/repeat idiom: Where(Equal(shape, -1), ones, shape) -> Expand; and
    # ConstantOfShape + Mul(-1) making the -1s.
    nodes = shape_of("x", "n", 0, "a") + [
        helper.make_node("Concat", ["n", "rest"], ["want"], name="want", axis=0),
        helper.make_node("ConstantOfShape", ["three"], ["ones"], name="cos",
                         value=helper.make_tensor("v", I64, [1], [1])),
        helper.make_node("Mul", ["ones", "m1"], ["neg"], name="neg"),
        helper.make_node("Equal", ["want", "neg"], ["eq"], name="eq"),
        helper.make_node("Where", ["eq", "ones", "want"], ["tgt"], name="where"),
        helper.make_node("Expand", ["b", "tgt"], ["e"], name="expand"),
        helper.make_node("Add", ["x", "e"], ["y"], name="add")]
    m = model(nodes, [vi("x", ["N", 4, 5])], [vi("y", None)],
              IDX + [ints("rest", [4, 5]), ints("three", [3]), ints("m1", -1),
                     init("b", rand(1, 1, 5))], opset=13)
    g = check(tmp_path, m, {"x": rand(3, 4, 5)})
    assert ops_of(g) == ["expand", "add"] and g["nodes"][0]["shape"] == ["N", 4, 5]


def test_comparisons_mod_and_max_over_shapes_fold(tmp_path):
    # Swin's padding: pad = (7 - W % 7) % 7 on a static W; Max(S, 1) and Less(S, 0) on a symbol.
    nodes = shape_of("x", "w", 2, "a") + shape_of("x", "s", 1, "b") + [
        helper.make_node("Mod", ["w", "seven"], ["wm"], name="mod1"),
        helper.make_node("Sub", ["seven", "wm"], ["d"], name="sub"),
        helper.make_node("Mod", ["d", "seven"], ["pad"], name="mod2"),
        helper.make_node("Max", ["s", "one"], ["smax"], name="max"),
        helper.make_node("Less", ["s", "zero"], ["neg"], name="less"),
        helper.make_node("Not", ["neg"], ["pos"], name="not"),
        helper.make_node("Where", ["pos", "smax", "one"], ["s2"], name="where"),
        helper.make_node("Concat", ["zero4", "zero4", "zero4", "zero4", "zero4", "pad"], ["pads"],
                         name="pads", axis=0),
        helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="constant"),
        helper.make_node("Concat", ["n1", "s2", "m1"], ["t"], name="t", axis=0),
        helper.make_node("Reshape", ["p", "t"], ["y"], name="reshape")]
    m = model(nodes, [vi("x", [2, "S", 10])], [vi("y", None)],
              IDX + [ints("seven", [7]), ints("one", [1]), ints("zero", [0]), ints("zero4", [0]),
                     ints("n1", [2]), ints("m1", [-1])], opset=13)
    g = check(tmp_path, m, {"x": rand(2, 3, 10)})
    assert ops_of(g) == ["pad", "reshape"] and g["nodes"][0]["pads"] == [0, 0, 0, 0, 0, 4]
    assert g["nodes"][1]["shape"] == [2, "S", -1]


def test_gpt2_style_causal_mask_folds_on_a_static_sequence(tmp_path):
    # A lower-triangular mask from Range / Unsqueeze / LessOrEqual over Shape(x)[1], a Where of
    # the scores with the dtype's lowest value, then a softmax.
    nodes = shape_of("x", "s", 2, "a") + [
        helper.make_node("Squeeze", ["s", "ax0"], ["sc"], name="sq"),
        helper.make_node("Range", ["zero", "sc", "one"], ["r"], name="range"),
        helper.make_node("Unsqueeze", ["r", "ax0"], ["row"], name="row"),
        helper.make_node("Unsqueeze", ["r", "ax1"], ["col"], name="col"),
        helper.make_node("LessOrEqual", ["row", "col"], ["mask"], name="le"),
        helper.make_node("Where", ["mask", "x", "low"], ["mx"], name="where"),
        helper.make_node("Softmax", ["mx"], ["y"], name="softmax", axis=-1)]
    m = model(nodes, [vi("x", ["N", 6, 6])], [vi("y", None)],
              IDX + [ints("zero", 0), ints("one", 1), ints("ax1", [1]),
                     init("low", np.array(np.finfo(np.float32).min, np.float32))], opset=13)
    g = check(tmp_path, m, {"x": rand(2, 6, 6)})
    assert ops_of(g) == ["where", "softmax"]


def test_bert_extended_attention_mask(tmp_path):
    # mask [N, S] int64 -> [N, 1, 1, S] -> (1 - mask) * lowest, added to the scores.
    nodes = [helper.make_node("Unsqueeze", ["mask", "ax1"], ["m1"], name="u1"),
             helper.make_node("Unsqueeze", ["m1", "ax2"], ["m2"], name="u2"),
             helper.make_node("Cast", ["m2"], ["mf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["inv"], name="sub"),
             helper.make_node("Mul", ["inv", "low"], ["ext"], name="mul"),
             helper.make_node("Add", ["scores", "ext"], ["sm"], name="add"),
             helper.make_node("Softmax", ["sm"], ["y"], name="softmax", axis=-1)]
    m = model(nodes, [vi("scores", ["N", 2, "S", "S"]), vi("mask", ["N", "S"], I64)],
              [vi("y", None)],
              [ints("ax1", [1]), ints("ax2", [2]), init("one", np.array(1.0, np.float32)),
               init("low", np.array(-10000.0, np.float32))], opset=13)
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.int64)
    g = typed_check(tmp_path, m, {"scores": rand(2, 2, 4, 4), "mask": mask})
    assert ops_of(g)[:3] == ["reshape", "reshape", "cast"] and ops_of(g)[-1] == "softmax"


# ------------------------------------------------------------------------------ scatters

SCATTER_ND = [  # (data shape, indices, updates shape, reduction, opset)
    ([4, 5], [[1], [3]], [2, 5], "none", 13),
    ([4, 5], [[0, 1], [2, 3], [0, 1]], [3], "add", 16),
    ([4, 5], [[1, 2], [1, 2]], [2], "mul", 16),
    ([2, 3, 4], [[[0, 1]], [[1, 2]]], [2, 1, 4], "max", 18),
    ([2, 3, 4], [[1], [0]], [2, 3, 4], "min", 18),
    ([4, 5], [[-1, -2]], [1], "none", 13),  # negative indices count from the end
]


@pytest.mark.parametrize("case", range(len(SCATTER_ND)))
def test_scatter_nd_folds_on_constants(tmp_path, case):
    dshape, idx, ushape, red, opset = SCATTER_ND[case]
    attrs = {} if red == "none" else {"reduction": red}
    nodes = [helper.make_node("ScatterND", ["data", "idx", "upd"], ["mask"], name="scatter",
                              **attrs),
             helper.make_node("Add", ["x", "mask"], ["y"], name="add")]
    m = model(nodes, [vi("x", dshape)], [vi("y", None)],
              [init("data", rand(*dshape)), ints("idx", idx), init("upd", rand(*ushape))],
              opset=opset)
    g = check(tmp_path, m, {"x": rand(*dshape)})
    assert ops_of(g) == ["add"]


SCATTER_ELEMENTS = [  # (data shape, indices, axis, reduction, opset)
    ([3, 4], [[1, 0, 2, 0]], 0, "none", 13),
    ([3, 4], [[1, 3], [0, 0], [2, -1]], 1, "add", 16),
    ([3, 4], [[1, 1, 2, 2]], 0, "mul", 16),
    ([2, 3, 4], [[[0, 1, 2, 3]], [[3, 2, 1, 0]]], 2, "max", 18),
    ([2, 3, 4], [[[0], [2]]], 1, "min", 18),
]


@pytest.mark.parametrize("case", range(len(SCATTER_ELEMENTS)))
def test_scatter_elements_folds_on_constants(tmp_path, case):
    dshape, idx, axis, red, opset = SCATTER_ELEMENTS[case]
    attrs = {"axis": axis} if red == "none" else {"axis": axis, "reduction": red}
    ishape = list(np.array(idx).shape)
    nodes = [helper.make_node("ScatterElements", ["data", "idx", "upd"], ["mask"],
                              name="scatter", **attrs),
             helper.make_node("Mul", ["x", "mask"], ["y"], name="mul")]
    m = model(nodes, [vi("x", dshape)], [vi("y", None)],
              [init("data", rand(*dshape)), ints("idx", idx), init("upd", rand(*ishape))],
              opset=opset)
    g = check(tmp_path, m, {"x": rand(*dshape)})
    assert ops_of(g) == ["mul"]


def test_swin_style_shifted_window_mask_folds(tmp_path):
    # zeros(H, W) from the input's (static) spatial shape, slice regions numbered through
    # ScatterND of Range-made indices, then compared pairwise: a constant mask added to x.
    h = w = 6
    nodes = [helper.make_node("Shape", ["x"], ["sh"], name="shape"),
             helper.make_node("Slice", ["sh", "two", "four"], ["hw"], name="hw"),
             helper.make_node("ConstantOfShape", ["hw"], ["z"], name="zeros",
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
             helper.make_node("Range", ["r0", "r1", "one"], ["rows"], name="rows"),
             helper.make_node("Unsqueeze", ["rows", "ax1"], ["ridx"], name="ridx"),
             helper.make_node("ScatterND", ["z", "ridx", "upd"], ["regions"], name="scatter"),
             helper.make_node("Reshape", ["regions", "flat"], ["rf"], name="rf"),
             helper.make_node("Unsqueeze", ["rf", "ax1"], ["ra"], name="ra"),
             helper.make_node("Unsqueeze", ["rf", "ax0"], ["rb"], name="rb"),
             helper.make_node("Sub", ["ra", "rb"], ["diff"], name="diff"),
             helper.make_node("Equal", ["diff", "zf"], ["same"], name="same"),
             helper.make_node("Where", ["same", "zf", "big"], ["mask"], name="mask"),
             helper.make_node("Reshape", ["x", "flat3"], ["xf"], name="xf"),
             helper.make_node("MatMul", ["xf", "xt"], ["att"], name="att"),
             helper.make_node("Add", ["att", "mask"], ["y"], name="add")]
    m = model(nodes, [vi("x", ["N", 1, h, w])], [vi("y", None)],
              [ints("two", [2]), ints("four", [4]), ints("r0", 4), ints("r1", 6),
               ints("one", 1), ints("ax0", [0]), ints("ax1", [1]),
               init("upd", np.full((2, w), 1.0, np.float32)), ints("flat", [h * w]),
               init("zf", np.array(0.0, np.float32)), init("big", np.array(-100.0, np.float32)),
               ints("flat3", [-1, 1, h * w]), init("xt", rand(h * w, h * w))], opset=13)
    g = check(tmp_path, m, {"x": rand(2, 1, h, w)})
    assert ops_of(g) == ["reshape", "matmul", "add"]


def test_scatter_on_runtime_data_is_refused(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("ScatterND", ["r", "idx", "upd"], ["y"], name="rt_scatter")]
    m = model(nodes, [vi("x", ["N", 5])], [vi("y", None)],
              [ints("idx", [[0]]), init("upd", rand(1, 5))], opset=13)
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "node 'rt_scatter' (ScatterND)" in r.stderr and "conversion time" in r.stderr
    assert r.stderr.count("\n") == 1


def test_scatter_out_of_range_index_is_refused(tmp_path):
    nodes = [helper.make_node("ScatterND", ["data", "idx", "upd"], ["mask"], name="bad_scatter"),
             helper.make_node("Add", ["x", "mask"], ["y"], name="add")]
    m = model(nodes, [vi("x", [4, 5])], [vi("y", None)],
              [init("data", rand(4, 5)), ints("idx", [[4]]), init("upd", rand(1, 5))], opset=13)
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "node 'bad_scatter' (ScatterND)" in r.stderr and "out of range" in r.stderr


def test_constant_of_a_run_time_shape_is_an_expand(tmp_path):
    # ones(N, S) as a mask: ConstantOfShape of Shape(x)[:2] becomes kiln's expand.
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape", end=2),
             helper.make_node("ConstantOfShape", ["s"], ["ones"], name="ones",
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])),
             helper.make_node("Unsqueeze", ["ones", "ax2"], ["o3"], name="unsq"),
             helper.make_node("Mul", ["x", "o3"], ["y"], name="mul")]
    m = model(nodes, [vi("x", ["N", "S", 3])], [vi("y", None)], [ints("ax2", [2])], opset=15)
    g = check(tmp_path, m, {"x": rand(2, 5, 3)})
    assert ops_of(g)[0] == "expand" and g["nodes"][0]["shape"] == ["N", "S"]
