#!/usr/bin/env python3
"""Writes the ONNX-importer regression corpus, tests/fuzz/corpus/onnx/: one small model file per
case, and EXPECTED.json saying what the importer does with each: a list of strings its one error
line must contain, or "converts".

The cases: issue 24's row 12 (an empty file, a file that is no ONNX model, a conv with stride 0,
an initializer whose dims do not match its bytes, a rank-3 conv weight) and every bug the fuzz
target (fuzz_onnx_importer.py) found, each as the smallest model that showed it. Files whose
external data must not be read point to ../outside/weights.bin (the replay puts a file there).
tests/python/test_onnx_fuzz_corpus.py replays them. Run from anywhere:
python3 tests/fuzz/make_onnx_corpus.py
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus", "onnx")
F = TensorProto.FLOAT

EXPECTED = {}


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def rand(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(
        np.float32) + 0.25


def conv(w_shape=(4, 3, 3, 3), x_shape=(1, 3, 8, 8), opset=17, **attrs):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", **attrs)]
    return model(nodes, [vi("x", list(x_shape))], [vi("y", None)], [init("w", rand(*w_shape))],
                 opset)


def one(op, inputs, shape=(2, 3, 4, 5), inits=(), opset=17, **attrs):
    """A model of one node `op` on graph input x of `shape`."""
    nodes = [helper.make_node(op, inputs, ["y"], name="n1", **attrs)]
    return model(nodes, [vi("x", list(shape))], [vi("y", None)], list(inits), opset)


def write(name, what, expect):
    """Writes case `name` (a ModelProto or bytes) and records what the importer must do."""
    data = what.SerializeToString() if isinstance(what, onnx.ModelProto) else what
    with open(os.path.join(CORPUS, name + ".onnx"), "wb") as f:
        f.write(data)
    EXPECTED[name + ".onnx"] = expect


def external(t, location, offset=0, length=None):
    """Makes initializer t's data external (at `location`), dropping its raw data."""
    n = len(t.raw_data)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in [("location", location), ("offset", str(offset)),
                 ("length", str(n if length is None else length))]:
        e = t.external_data.add()
        e.key, e.value = k, v


def replace_bytes(m, old, new):
    data = m.SerializeToString()
    assert data.count(old) == 1, old
    return data.replace(old, new)


def row12():
    """Issue 24's row 12."""
    write("empty", b"", ["the file is empty"])
    write("not_onnx", b"hello, world: no ONNX model here\n", ["ONNX model"])
    write("conv_stride_0", conv(strides=[0, 1]), ["node 'conv1' (Conv)", "strides [0, 1]"])
    m = conv()
    m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:400]
    write("init_dims_vs_bytes", m, ["initializer 'w'", "432 bytes", "400 bytes"])
    write("conv_weight_rank3", conv(w_shape=(4, 3, 3)), ["node 'conv1' (Conv)", "rank-4 filter"])


def found_by_fuzzing():
    """One case per bug the fuzz target found (before the fix: exit 1 with a traceback, a
    numpy warning on stderr, or a huge allocation)."""
    # mm_shape indexed a rank-0 or rank-1 operand's dims: IndexError.
    write("matmul_scalar", one("MatMul", ["x", "s"], shape=(2, 3), inits=[init(
        "s", np.array(2.0, np.float32))]), ["node 'n1' (MatMul)", "is a scalar"])
    write("gemm_rank1", one("Gemm", ["x", "w"], shape=(3,), inits=[init("w", rand(3, 2))]),
          ["node 'n1' (Gemm)", "rank 1", "2-D A and B"])
    # GroupNormalization of a rank-1 input (IndexError), num_groups 0 (ZeroDivisionError), and
    # the op in an opset without it (its string num_groups reached int()).
    gn = [init("s", rand(3)), init("b", rand(3))]
    write("groupnorm_rank1", one("GroupNormalization", ["x", "s", "b"], shape=(3,), inits=gn,
                                 opset=21, num_groups=1), ["(GroupNormalization)", "rank 1"])
    write("groupnorm_groups_0", one("GroupNormalization", ["x", "s", "b"], inits=gn, opset=21,
                                    num_groups=0), ["(GroupNormalization)", "num_groups 0"])
    write("groupnorm_opset_7", one("GroupNormalization", ["x", "s", "b"], inits=gn, opset=7,
                                   num_groups="s"),
          ["(GroupNormalization)", "not an op of opset 7"])
    # A STRING initializer with raw_data: onnx's reader failed (ValueError).
    t = init("w", rand(3))
    t.data_type = TensorProto.STRING
    write("string_initializer", one("Add", ["x", "w"], shape=(3,), inits=[t]),
          ["initializer 'w'", "STRING tensor"])
    # A segmented initializer: onnx's reader refuses segments (ValueError).
    t = init("w", rand(3))
    t.segment.begin, t.segment.end = 0, 3
    write("segmented_initializer", one("Add", ["x", "w"], shape=(3,), inits=[t]),
          ["initializer 'w'", "segmented"])
    # A Constant whose tensor's dims do not match its data: only initializers were checked.
    c = numpy_helper.from_array(rand(2, 2), "c")
    c.raw_data = c.raw_data[:4]
    nodes = [helper.make_node("Constant", [], ["c"], name="k", value=c),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    write("constant_dims_vs_bytes", model(nodes, [vi("x", [2, 2])], [vi("y", None)]),
          ["node 'k' (Constant): attribute value", "16 bytes", "has 4 bytes"])
    # auto_pad bytes that are not UTF-8: UnicodeDecodeError.
    write("auto_pad_not_utf8", conv(auto_pad=b"SAME_\xa5UPPER"),
          ["node 'conv1' (Conv)", "auto_pad", "is not supported"])
    # An op type holding a carriage return: printed raw, it split the one error line in two.
    write("op_type_carriage_return", replace_bytes(one("Relu", ["x"]), b"Relu", b"\rRlu"),
          ["unsupported ONNX op", "\\rRlu"])
    # An op type that is not UTF-8: protobuf gives Python bytes, sorting them with str failed.
    m = replace_bytes(one("Relu", ["x"]), b"Relu", b"R\xffl\xfe")
    write("op_type_not_utf8", m, ["not UTF-8 text", "model.graph.node[0].op_type"])
    # Pow folded on a negative base: numpy's RuntimeWarning on stderr beside the summary.
    nodes = [helper.make_node("Pow", ["a", "e"], ["p"], name="pow"),
             helper.make_node("Add", ["x", "p"], ["y"], name="add")]
    write("fold_pow_nan", model(nodes, [vi("x", [2])], [vi("y", None)],
                                [init("a", np.array([-2.0, 4.0], np.float32)),
                                 init("e", np.array([0.5, 0.5], np.float32))]), "converts")
    # Size of a tensor of more than 2^63 elements: OverflowError in numpy.
    nodes = [helper.make_node("Size", ["x"], ["s"], name="size"),
             helper.make_node("Cast", ["s"], ["f"], name="cast", to=F),
             helper.make_node("Add", ["x", "f"], ["y"], name="add")]
    write("size_overflow", model(nodes, [vi("x", [2**62, 2**62])], [vi("y", None)]),
          ["node 'size' (Size)"])
    # Found with kiln checking the graphs (the refusal was kiln's, of a model onnxruntime runs):
    # a negative epsilon, and an empty constant (a Slice folded to shape [0, 3]).
    write("norm_epsilon_negative", one("InstanceNormalization", ["x", "s", "b"], inits=[
        init("s", rand(3)), init("b", rand(3))], epsilon=-1.0),
          ["node 'n1' (InstanceNormalization)", "epsilon -1.0"])
    nodes = [helper.make_node("Slice", ["d", "st", "en"], ["e"], name="slice"),
             helper.make_node("Add", ["x", "e"], ["y"], name="add")]
    write("empty_constant", model(nodes, [vi("x", [1, 3])], [vi("y", None)], [
        init("d", rand(2, 3)), init("st", np.array([1], np.int64)),
        init("en", np.array([1], np.int64))]), ["node 'add' (Add)", "is empty (shape [0, 3])"])
    # keepdims 2^32 + 1 went to kiln as it was (kiln refused the integer's range).
    write("reduce_keepdims_huge", one("ReduceMean", ["x"], opset=13, axes=[1],
                                      keepdims=2**32 + 1),
          ["node 'n1' (ReduceMean)", "keepdims 4294967297: expected 0 or 1"])
    # Clip: min above max went to kiln (which refuses it; ONNX gives max everywhere), a NaN bound
    # became -inf, and a bound of 2 values failed in numpy (ValueError).
    bounds = [init("lo", np.array(1.5, np.float32)), init("hi", np.array(-0.5, np.float32))]
    write("clip_min_above_max", one("Clip", ["x", "lo", "hi"], inits=bounds), "converts")
    write("clip_nan_bound", one("Clip", ["x", "lo"], inits=[init("lo", np.array(
        np.nan, np.float32))]), ["node 'n1' (Clip)", "NaN bound"])
    write("clip_bound_not_scalar", one("Clip", ["x", "lo"], inits=[init("lo", np.array(
        [0.0, 1.0], np.float32))]), ["node 'n1' (Clip)", "expected a scalar"])
    # A pool window larger than the input (onnxruntime: an empty output): kiln refused it; the
    # importer now does, saying why.
    write("pool_window_too_big", one("MaxPool", ["x"], shape=(1, 2, 1, 1), kernel_shape=[1, 2],
                                     strides=[1, 2]),
          ["node 'n1' (MaxPool)", "does not fit spatial dim 1 of size 1", "would be empty"])
    # A LayerNormalization scale of the input's whole shape (onnxruntime broadcasts it): kiln
    # refused the graph; the importer does, naming the scale.
    write("layernorm_scale_shape", one("LayerNormalization", ["x", "s"], inits=[
        init("s", rand(2, 3, 4, 5))]), ["node 'n1' (LayerNormalization)",
                                        "scale 's' has shape [2, 3, 4, 5]", "[5]"])
    # ... and over a dynamic dim (axis 0 of [N, 3]): no constant has the dim N.
    nodes = [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", axis=0)]
    write("layernorm_dynamic_dim", model(nodes, [vi("x", ["N", 3])], [vi("y", None)], [
        init("s", rand(1, 3))]), ["node 'ln' (LayerNormalization)",
                                  "expected the normalized dims ['N', 3]"])
    # Pool strides of 2^31 (onnxruntime takes 64-bit ones) went to kiln, which refused them.
    write("pool_stride_2_31", one("MaxPool", ["x"], shape=(1, 2, 7, 10), kernel_shape=[3, 2],
                                  strides=[2**31, 1]),
          ["node 'n1' (MaxPool)", "strides [2147483648, 1]", "above 2147483647"])
    # A signaling NaN in a conv filter: numpy warned "invalid value encountered in cast" on
    # stderr when reading it as float64 (found by the 10-minute fuzz run, a bit flip).
    m = conv()
    w = m.graph.initializer[0]
    w.raw_data = b"\x01\x00\x80\x7f" + w.raw_data[4:]
    write("conv_filter_signaling_nan", m, "converts")
    huge_folds()


def huge_folds():
    """Folds whose size comes from the model's numbers: allocated without a bound before."""
    for op, ins, inits in [
            ("ConstantOfShape", ["shp"], [init("shp", np.array([2**20, 2**20], np.int64))]),
            ("Expand", ["one", "shp"], [init("one", np.ones(1, np.float32)),
                                        init("shp", np.array([2**31 - 1, 4], np.int64))]),
            ("Range", ["a", "b", "d"], [init("a", np.array(0, np.int64)),
                                        init("b", np.array(2**40, np.int64)),
                                        init("d", np.array(1, np.int64))])]:
        nodes = [helper.make_node(op, ins, ["c"], name="big"),
                 helper.make_node("Add", ["x", "c"], ["y"], name="add")]
        write(f"fold_{op.lower()}_huge", model(nodes, [vi("x", [1])], [vi("y", None)], inits),
              [f"node 'big' ({op})", "more than 16777216 elements"])
    nodes = [helper.make_node("Range", ["a", "b", "d"], ["c"], name="big"),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    write("fold_range_delta_0", model(nodes, [vi("x", [1])], [vi("y", None)], [
        init("a", np.array(0, np.int64)), init("b", np.array(5, np.int64)),
        init("d", np.array(0, np.int64))]), ["node 'big' (Range)", "no finite length"])


def spec_violations():
    """What the ONNX spec forbids and the importer read some way before: refused now."""
    m = conv(strides=[1, 1])
    m.graph.node[0].attribute.append(helper.make_attribute("strides", [2, 2]))
    write("attribute_twice", m, ["node 'conv1' (Conv)", "strides is given 2 times"])
    write("attribute_unknown", conv(stride=[2, 2]),
          ["node 'conv1' (Conv)", "'stride' is not an attribute of Conv"])
    write("gelu_approximate_bogus", one("Gelu", ["x"], opset=20, approximate="bogus"),
          ["node 'n1' (Gelu)", "approximate 'bogus'"])
    m = conv()
    m.graph.initializer[0].float_data.extend([0.5] * 108)
    write("raw_and_typed_data", m, ["initializer 'w'", "raw_data, float_data"])
    m = conv()
    m.graph.initializer.append(m.graph.initializer[0])
    write("initializer_twice", m, ["initializer 'w' is defined twice"])
    nodes = [helper.make_node("Relu", ["x"], ["t"], name="r1"),
             helper.make_node("Neg", ["x"], ["t"], name="r2"),
             helper.make_node("Abs", ["t"], ["y"], name="r3")]
    write("output_defined_twice", model(nodes, [vi("x", [2])], [vi("y", None)]),
          ["node 'r2' (Neg)", "output 't' is already defined by node 'r1' (Relu)"])
    nodes = [helper.make_node("Relu", ["t"], ["u"], name="r1"),
             helper.make_node("Neg", ["u"], ["t"], name="r2")]
    write("cycle", model(nodes, [vi("x", [2])], [vi("t", None)]),
          ["node 'r1' (Relu)", "input 't' is not defined"])


def external_data():
    """External data: inside the model's directory it is read; anything leading outside is
    refused before a file is opened."""
    m = conv()
    w = m.graph.initializer[0]
    with open(os.path.join(CORPUS, "external_weights.bin"), "wb") as f:
        f.write(w.raw_data)
    external(w, "external_weights.bin")
    write("external_inside", m, "converts")
    for name, loc, needle in [("external_dotdot", "../outside/weights.bin", "not a relative path"),
                              ("external_absolute", "/etc/passwd", "not a relative path"),
                              ("external_symlink", "external_link.bin", "leads outside"),
                              ("external_missing", "missing.bin", "does not exist")]:
        m = conv()
        external(m.graph.initializer[0], loc)
        write(name, m, ["initializer 'w'", needle])
    link = os.path.join(CORPUS, "external_link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../outside/weights.bin", link)
    m = conv()
    external(m.graph.initializer[0], "external_weights.bin", offset=400)
    write("external_past_end", m, ["initializer 'w'", "exceed the file"])
    # An external-data key onnx does not know: onnx's UserWarning reached stderr beside the
    # error line (and unprefixed beside a summary); it is the importer's warning after a
    # conversion and nothing beside a refusal.
    for name, attrs, expect in [("external_unknown_key", {}, "converts"),
                                ("external_unknown_key_refused", {"strides": [0, 1]},
                                 ["node 'conv1' (Conv)", "strides [0, 1]"])]:
        m = conv(**attrs)
        external(m.graph.initializer[0], "external_weights.bin")
        e = m.graph.initializer[0].external_data.add()
        e.key, e.value = "off\x00et", "0"
        write(name, m, expect)


def main():
    os.makedirs(CORPUS, exist_ok=True)
    row12()
    found_by_fuzzing()
    spec_violations()
    external_data()
    with open(os.path.join(CORPUS, "EXPECTED.json"), "w") as f:
        json.dump(EXPECTED, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"make_onnx_corpus: {len(EXPECTED)} cases in {CORPUS}")


if __name__ == "__main__":
    main()
