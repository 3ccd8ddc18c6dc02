"""ONNX import of Resize (opset 10-21) and Upsample (opset 7-9): converted, run with kiln's CPU
reference and compared with onnxruntime, in every coordinate and nearest mode, with scales and
sizes inputs (constants and a run-time shape computation); refusals name the node."""
import numpy as np
from onnx import helper

from test_onnx_import import check, convert, init, model, ops_of, rand, vi

COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
ROUNDS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def floats(name, v):
    return init(name, np.array(v, np.float32))


def ints(name, v):
    return init(name, np.array(v, np.int64))


def _resize(x_shape, attrs, scales=None, sizes=None, opset=13, name="rs"):
    ins, inits = ["x", ""], []
    if scales is not None:
        ins.append("sc")
        inits.append(floats("sc", scales))
    if sizes is not None:
        ins += [""] * (3 - len(ins)) + ["sz"]
        inits.append(ints("sz", sizes))
    nodes = [helper.make_node("Resize", ins, ["y"], name=name, **attrs)]
    return model(nodes, [vi("x", x_shape)], [vi("y", None)], inits, opset=opset)


def test_nearest_every_coordinate_and_nearest_mode(tmp_path):
    x = rand(2, 3, 5, 7)
    for i, coord in enumerate(COORDS):
        for j, rnd in enumerate(ROUNDS):
            attrs = {"mode": "nearest", "coordinate_transformation_mode": coord,
                     "nearest_mode": rnd}
            # Up along H, down along W: odd ratios put source coordinates on ties.
            m = _resize([2, 3, 5, 7], attrs, scales=[1, 1, 1.7, 0.6])
            g = check(tmp_path, m, {"x": x}, name=f"n_sc_{i}{j}")
            assert ops_of(g) == ["resize"] and g["nodes"][0]["nearest_mode"] == rnd
            assert g["nodes"][0]["coordinate_transformation_mode"] == coord
            m = _resize([2, 3, 5, 7], attrs, sizes=[2, 3, 10, 3])
            g = check(tmp_path, m, {"x": x}, name=f"n_sz_{i}{j}")
            assert g["nodes"][0]["sizes"] == [2, 3, 10, 3]


def test_linear_every_coordinate_mode(tmp_path):
    x = rand(2, 3, 5, 7)
    for i, coord in enumerate(COORDS):
        attrs = {"mode": "linear", "coordinate_transformation_mode": coord}
        # torchvision's FCN / LR-ASPP heads: bilinear x2 (align_corners=False).
        g = check(tmp_path, _resize([2, 3, 5, 7], attrs, scales=[1, 1, 2, 2]), {"x": x},
                  name=f"l_sc_{i}")
        assert g["nodes"][0]["mode"] == "linear" and g["nodes"][0]["scales"] == [1, 1, 2, 2]
        check(tmp_path, _resize([2, 3, 5, 7], attrs, sizes=[2, 3, 3, 11]), {"x": x},
              name=f"l_sz_{i}")
        # An output size of 1 (align_corners and pytorch_half_pixel read coordinate 0).
        check(tmp_path, _resize([2, 3, 5, 7], attrs, sizes=[2, 3, 1, 4]), {"x": x},
              name=f"l_one_{i}")


def test_one_and_three_spatial_dims(tmp_path):
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    check(tmp_path, _resize([2, 3, 9], attrs, scales=[1, 1, 2.5]), {"x": rand(2, 3, 9)},
          name="l1d")
    attrs = {"mode": "linear", "coordinate_transformation_mode": "align_corners"}
    check(tmp_path, _resize([1, 2, 3, 4, 5], attrs, sizes=[1, 2, 5, 3, 9]),
          {"x": rand(1, 2, 3, 4, 5)}, name="l3d")
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
             "nearest_mode": "floor"}
    check(tmp_path, _resize([1, 2, 3, 4, 5], attrs, scales=[1, 1, 2, 2, 2]),
          {"x": rand(1, 2, 3, 4, 5)}, name="n3d")


def test_unet_nearest_x2_dynamic_batch(tmp_path):
    # diffusers' Upsample2D: F.interpolate(scale_factor=2, mode="nearest") after a conv.
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
             "nearest_mode": "floor"}
    m = _resize(["N", 4, 6, 5], attrs, scales=[1, 1, 2, 2])
    for b in (1, 3):
        g = check(tmp_path, m, {"x": rand(b, 4, 6, 5)}, name=f"unet{b}")
    assert g["inputs"]["x"]["shape"] == ["N", 4, 6, 5]


def test_sizes_from_the_input_shape(tmp_path):
    # F.interpolate(x, size=(10, 14)): sizes = Concat(Shape(x)[0:2], [10, 14]) with a dynamic N.
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "b0", "b2", "ax0"], ["nc"], name="nc"),
             helper.make_node("Concat", ["nc", "hw"], ["sz"], name="sizes", axis=0),
             helper.make_node("Resize", ["x", "", "", "sz"], ["y"], name="up", mode="linear",
                              coordinate_transformation_mode="pytorch_half_pixel")]
    m = model(nodes, [vi("x", ["N", 3, 5, 7])], [vi("y", None)],
              [ints("b0", [0]), ints("b2", [2]), ints("ax0", [0]), ints("hw", [10, 14])],
              opset=13)
    g = check(tmp_path, m, {"x": rand(2, 3, 5, 7)})
    assert ops_of(g) == ["resize"] and g["nodes"][0]["sizes"] == ["N", 3, 10, 14]
    # Opset 11: the roi and scales inputs are given, empty.
    nodes[-1] = helper.make_node("Resize", ["x", "roi", "nosc", "sz"], ["y"], name="up11",
                                 mode="nearest")
    m = model(nodes, [vi("x", ["N", 3, 5, 7])], [vi("y", None)],
              [ints("b0", [0]), ints("b2", [2]), ints("ax0", [0]), ints("hw", [10, 14]),
               floats("roi", []), floats("nosc", [])], opset=11)
    check(tmp_path, m, {"x": rand(2, 3, 5, 7)}, name="op11")


def test_axes_opset18(tmp_path):
    nodes = [helper.make_node("Resize", ["x", "", "sc"], ["y"], name="ax", mode="linear",
                              axes=[2, 3])]
    m = model(nodes, [vi("x", [1, 3, 4, 6])], [vi("y", None)], [floats("sc", [2, 0.5])],
              opset=18)
    g = check(tmp_path, m, {"x": rand(1, 3, 4, 6)})
    assert g["nodes"][0]["scales"] == [1, 1, 2, 0.5]


def test_upsample_and_resize10(tmp_path):
    x = rand(2, 3, 4, 5)
    for mode in ("nearest", "linear"):
        nodes = [helper.make_node("Upsample", ["x", "sc"], ["y"], name="up9", mode=mode)]
        m = model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None)],
                  [floats("sc", [1, 1, 2, 3])], opset=9)
        g = check(tmp_path, m, {"x": x}, name=f"up9_{mode}")
        assert g["nodes"][0]["coordinate_transformation_mode"] == "asymmetric"
        nodes = [helper.make_node("Upsample", ["x"], ["y"], name="up7", mode=mode,
                                  scales=[1.0, 1.0, 2.0, 2.0])]
        m = model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None)], opset=7)
        check(tmp_path, m, {"x": x}, name=f"up7_{mode}")
        nodes = [helper.make_node("Resize", ["x", "sc"], ["y"], name="rs10", mode=mode)]
        m = model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None)],
                  [floats("sc", [1, 1, 2, 1.5])], opset=10)
        check(tmp_path, m, {"x": x}, name=f"rs10_{mode}")
    # Resize-10 downsampling (nearest rounds up there).
    nodes = [helper.make_node("Resize", ["x", "sc"], ["y"], name="down10", mode="nearest")]
    m = model(nodes, [vi("x", [2, 3, 4, 5])], [vi("y", None)], [floats("sc", [1, 1, 0.5, 0.6])],
              opset=10)
    check(tmp_path, m, {"x": x}, name="down10")


def test_refusals_name_the_node(tmp_path):
    cases = [
        ({"mode": "cubic"}, [1, 1, 2, 2], "unsupported resize mode 'cubic'"),
        ({"coordinate_transformation_mode": "tf_crop_and_resize"}, [1, 1, 2, 2],
         "unsupported coordinate_transformation_mode 'tf_crop_and_resize'"),
        ({"coordinate_transformation_mode": "tf_half_pixel_for_nn"}, [1, 1, 2, 2],
         "unsupported coordinate_transformation_mode 'tf_half_pixel_for_nn'"),
        ({}, [1, 2, 2, 2], "resizing the channel dim (scale 2.0) is not supported"),
        ({"exclude_outside": 1}, [1, 1, 2, 2], "exclude_outside=1 is not supported"),
    ]
    for i, (attrs, scales, msg) in enumerate(cases):
        m = _resize([1, 3, 4, 6], attrs, scales=scales, name="bad")
        _, r = convert(tmp_path, m, name=f"bad{i}", expect_rc=2)
        assert "bad" in r.stderr and msg in r.stderr, r.stderr
    nodes = [helper.make_node("Resize", ["x", "", "sc"], ["y"], name="aa", antialias=1)]
    m = model(nodes, [vi("x", [1, 3, 4, 6])], [vi("y", None)], [floats("sc", [1, 1, 0.5, 0.5])],
              opset=18)
    _, r = convert(tmp_path, m, name="aa", expect_rc=2)
    assert "aa" in r.stderr and "antialias=1 is not supported" in r.stderr, r.stderr
