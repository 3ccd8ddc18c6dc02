"""ONNX import of the byte-moving movement ops (Concat, Split, Slice, Expand, Tile, DepthToSpace,
SpaceToDepth, Pad reflect/edge, Trilu): converted, run with kiln's CPU reference and compared with
onnxruntime; constant inputs fold at import; refusals name the node."""
import numpy as np
from onnx import helper

from test_onnx_import import check, convert, init, model, ops_of, rand, vi


def ints(name, v):
    return init(name, np.array(v, np.int64))


def test_concat_densenet_and_class_token(tmp_path):
    # Two activations and a constant along channels.
    nodes = [helper.make_node("Relu", ["a"], ["ra"], name="relu"),
             helper.make_node("Concat", ["ra", "b", "c"], ["y"], name="cat", axis=1)]
    m = model(nodes, [vi("a", [2, 3, 4, 5]), vi("b", [2, 2, 4, 5])], [vi("y", None)],
              [init("c", rand(2, 1, 4, 5))])
    g = check(tmp_path, m, {"a": rand(2, 3, 4, 5), "b": rand(2, 2, 4, 5)})
    assert ops_of(g) == ["relu", "concat"] and g["nodes"][1]["axis"] == 1
    # ViT: a class token expanded to the batch (a folded shape computation) before the patches.
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="batch", axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"], name="unsq"),
             helper.make_node("Concat", ["n1", "one_d"], ["tgt"], name="tgt", axis=0),
             helper.make_node("Expand", ["cls", "tgt"], ["clsn"], name="expand"),
             helper.make_node("Concat", ["clsn", "x"], ["y"], name="prepend", axis=1)]
    m = model(nodes, [vi("x", ["N", 6, 8])], [vi("y", None)],
              [init("cls", rand(1, 1, 8)), ints("zero", 0), ints("ax0", [0]),
               ints("one_d", [1, 8])], opset=13)
    g = check(tmp_path, m, {"x": rand(3, 6, 8)}, name="vit")
    assert ops_of(g) == ["expand", "concat"]
    assert g["nodes"][0]["shape"] == ["N", 1, 8]


def test_split_every_opset(tmp_path):
    x = rand(2, 10, 3)
    cases = [  # (opset, node attrs, extra inputs and initializers, output count)
        (11, {"split": [3, 7]}, [], [], 2),
        (13, {}, ["sizes"], [ints("sizes", [4, 1, 5])], 3),
        (13, {}, [], [], 2),  # equal parts
        (18, {"num_outputs": 3}, [], [], 3),  # ceil(10 / 3) = 4: 4, 4, 2
    ]
    for i, (opset, attrs, extra, inits, k) in enumerate(cases):
        outs = [f"o{j}" for j in range(k)]
        nodes = [helper.make_node("Split", ["x"] + extra, outs, name="sp", axis=1, **attrs),
                 helper.make_node("Relu", [outs[-1]], ["r"], name="relu")]
        m = model(nodes, [vi("x", ["N", 10, 3])], [vi(o, None) for o in outs[:-1]] +
                  [vi("r", None)], inits, opset=opset)
        g = check(tmp_path, m, {"x": x}, name=f"split{i}")
        assert ops_of(g) == ["split", "relu"] and len(g["nodes"][0]["outputs"]) == k


def test_slice_bounds_steps_and_symbolic_dims(tmp_path):
    x = rand(2, 6, 9, 10)
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="sl")]
    m = model(nodes, [vi("x", ["N", 6, 9, 10])], [vi("y", None)],
              [ints("st", [1, -1, 0]), ints("en", [8, -100, 2 ** 63 - 1]), ints("ax", [2, 3, 0]),
               ints("sp", [2, -3, 1])], opset=13)
    g = check(tmp_path, m, {"x": x})
    # The whole symbolic batch is left alone; the other two axes are sliced.
    assert ops_of(g) == ["slice"] and g["nodes"][0]["axes"] == [2, 3]
    # Opset 9: attributes, no steps.
    nodes = [helper.make_node("Slice", ["x"], ["y"], name="sl9", starts=[2], ends=[-1], axes=[1])]
    m = model(nodes, [vi("x", [2, 6, 9, 10])], [vi("y", None)], opset=9)
    check(tmp_path, m, {"x": x}, name="sl9")
    # A start from the end of a symbolic dim is refused, naming the node (bounds from the
    # start become a gather: test_gathernd_import.py).
    nodes = [helper.make_node("Slice", ["x", "st", "en"], ["y"], name="dyn")]
    m = model(nodes, [vi("x", ["N", 6])], [vi("y", None)], [ints("st", [-2]), ints("en", [4])],
              opset=13)
    _, r = convert(tmp_path, m, name="dyn", expect_rc=2)
    assert "dyn" in r.stderr and "symbolic dim 0 (N)" in r.stderr, r.stderr


def test_expand_tile(tmp_path):
    nodes = [helper.make_node("Expand", ["x", "shp"], ["e"], name="ex"),
             helper.make_node("Tile", ["x", "rep"], ["t"], name="tl")]
    m = model(nodes, [vi("x", [3, 1, 5])], [vi("e", None), vi("t", None)],
              [ints("shp", [2, 1, 4, 1]), ints("rep", [2, 3, 1])], opset=13)
    g = check(tmp_path, m, {"x": rand(3, 1, 5)})
    assert ops_of(g) == ["expand", "tile"]


def test_depth_space(tmp_path):
    x = rand(2, 8, 3, 5)
    for mode in ("DCR", "CRD"):
        nodes = [helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=2,
                                  mode=mode)]
        m = model(nodes, [vi("x", ["N", 8, 3, 5])], [vi("y", None)], opset=13)
        g = check(tmp_path, m, {"x": x}, name=f"d2s_{mode}")
        assert g["nodes"][0]["mode"] == mode
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["y"], name="s2d", blocksize=2)]
    m = model(nodes, [vi("x", ["N", 3, 4, 6])], [vi("y", None)], opset=13)
    check(tmp_path, m, {"x": rand(2, 3, 4, 6)}, name="s2d")


def test_pad_reflect_edge(tmp_path):
    x = rand(2, 3, 5, 7)
    for mode in ("reflect", "edge"):
        nodes = [helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode=mode)]
        m = model(nodes, [vi("x", ["N", 3, 5, 7])], [vi("y", None)],
                  [ints("pads", [0, 0, 2, 3, 0, 0, 4, 6])], opset=13)
        g = check(tmp_path, m, {"x": x}, name=f"pad_{mode}")
        assert g["nodes"][0]["mode"] == mode


def test_trilu(tmp_path):
    x = rand(3, 5, 7)
    for i, (upper, k) in enumerate(((1, None), (0, -2), (1, 3))):
        ins = ["x"] + (["k"] if k is not None else [])
        nodes = [helper.make_node("Trilu", ins, ["y"], name="tri", upper=upper)]
        m = model(nodes, [vi("x", ["N", 5, 7])], [vi("y", None)],
                  [ints("k", k)] if k is not None else [], opset=14)
        g = check(tmp_path, m, {"x": x}, name=f"trilu{i}")
        assert g["nodes"][0]["k"] == (k or 0) and g["nodes"][0]["upper"] == upper


def test_constant_inputs_fold(tmp_path):
    # Tile, Trilu, DepthToSpace and Split of constants are computed at import: only the add runs.
    c = rand(1, 4, 1, 2)
    nodes = [helper.make_node("DepthToSpace", ["c"], ["d"], name="d2s", blocksize=2),
             helper.make_node("Tile", ["d", "rep"], ["t"], name="tile"),
             helper.make_node("Trilu", ["t"], ["u"], name="tri"),
             helper.make_node("Split", ["u", "sz"], ["u0", "u1"], name="sp", axis=3),
             helper.make_node("Add", ["x", "u1"], ["y"], name="add")]
    m = model(nodes, [vi("x", [1, 1, 4, 6])], [vi("y", None)],
              [init("c", c), ints("rep", [1, 1, 2, 2]), ints("sz", [2, 6])], opset=14)
    g = check(tmp_path, m, {"x": rand(1, 1, 4, 6)})
    assert ops_of(g) == ["add"]
