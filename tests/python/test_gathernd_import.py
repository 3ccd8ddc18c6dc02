"""ONNX import of GatherND (batch_dims 0, 1, 2; index tuples of 1 to all entries; negative
indices; constant and run-time indices; symbolic dims, the GPT-2 mask idiom) and of shape values
used as data (transformers 5's `batch * S + kv` BERT mask index), converted with tools/onnx2kiln,
run with the kiln CLI (CPU reference) and compared with onnxruntime exactly. An index out of range
at run time is kiln's located error (exit 2), never a neighbouring element."""
import subprocess

import numpy as np
import pytest
from onnx import helper, numpy_helper

from conftest import KILN, KILN_ENV
from onnx2kiln.registry import CONVERTERS, load_all
from onnx2kiln.safetensors import write_safetensors
from test_onnx_int_bool import F, I64, RNG, check, convert, model, ops_of, vi


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def ids(lo, hi, *shape):
    return RNG.integers(lo, hi, size=shape, dtype=np.int64)


def frand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def _gnd(dshape, ishape, b=0, name="gnd"):
    nodes = [helper.make_node("GatherND", ["x", "i"], ["y"], name=name, batch_dims=b)]
    return model(nodes, [vi("x", dshape, F), vi("i", ishape, I64)], [vi("y", None, F)])


@pytest.mark.parametrize("dshape,ishape,b", [
    ([4, 5, 3], [2, 3, 2], 0),     # pairs into [4, 5], rows of 3
    ([4, 5, 3], [6, 1], 0),        # single entries: whole [5, 3] slabs
    ([4, 5, 3], [7, 3], 0),        # full tuples: scalars
    ([4, 5, 3], [3], 0),           # one tuple, no index dims: a scalar result
    ([3, 4, 5], [3, 2, 1], 1),     # per-batch rows
    ([3, 4, 5], [3, 2, 2], 1),
    ([2, 3, 4, 2], [2, 3, 5, 1], 2),
])
def test_gathernd_forms(tmp_path, dshape, ishape, b):
    x = frand(*dshape)
    k = ishape[-1]
    dims = dshape[b:b + k]
    # negative indices (from the end) in every position
    i = np.stack([ids(-d, d, *ishape[:-1]) for d in dims], axis=-1)
    g = check(tmp_path, _gnd(dshape, ishape, b), {"x": x, "i": i})
    assert ops_of(g)[-1] == "gather"


def test_gathernd_constant_indices_and_int_data(tmp_path):
    nodes = [helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd_const")]
    m = model(nodes, [vi("x", [3, 4], I64)], [vi("y", None, I64)],
              [init("i", np.array([[0, 1], [2, -1], [1, 3]], np.int64))])
    check(tmp_path, m, {"x": ids(-100, 100, 3, 4)})


def test_gathernd_symbolic_dims(tmp_path):
    # data [N, S, 3], per-batch positions [N, P, 1] (batch_dims 1): strides and bounds are N, S
    m = _gnd(["N", "S", 3], ["N", 2, 1], b=1)
    for n, s in ((2, 5), (3, 7)):
        check(tmp_path, m, {"x": frand(n, s, 3), "i": ids(-s, s, n, 2, 1)})


def test_gpt2_mask_idiom(tmp_path):
    # transformers 5's packed-sequence check (dynamo export): position_ids = arange(S) expanded to
    # [N, S]; GatherND(position_ids, stack(batch [N, 1] and q [1, S] broadcast to [N, S]))
    c = {k: init(k, np.array(v, np.int64)) for k, v in
         {"zero": 0, "one": 1, "ax0": [0], "ax_last": [-1], "ax1": [1]}.items()}
    nodes = [helper.make_node("Shape", ["ids"], ["n"], start=0, end=1),
             helper.make_node("Shape", ["ids"], ["s"], start=1, end=2),
             helper.make_node("Squeeze", ["n"], ["n0"]), helper.make_node("Squeeze", ["s"], ["s0"]),
             helper.make_node("Range", ["zero", "s0", "one"], ["pos"]),
             helper.make_node("Unsqueeze", ["pos", "ax0"], ["pos1"]),
             helper.make_node("Concat", ["n", "s"], ["ns"], axis=0),
             helper.make_node("Expand", ["pos1", "ns"], ["position_ids"]),
             helper.make_node("Range", ["zero", "n0", "one"], ["bat"]),
             helper.make_node("Unsqueeze", ["bat", "ax1"], ["bat1"]),
             helper.make_node("Max", ["bat1", "pos1"], ["mx"]),
             helper.make_node("Shape", ["mx"], ["mxs"]),
             helper.make_node("Expand", ["bat1", "mxs"], ["be"]),
             helper.make_node("Expand", ["pos1", "mxs"], ["qe"]),
             helper.make_node("Unsqueeze", ["be", "ax_last"], ["be1"]),
             helper.make_node("Unsqueeze", ["qe", "ax_last"], ["qe1"]),
             helper.make_node("Concat", ["be1", "qe1"], ["bq"], axis=-1),
             helper.make_node("GatherND", ["position_ids", "bq"], ["got"], name="node_GatherND"),
             helper.make_node("LessOrEqual", ["got", "ids"], ["y"])]
    m = model(nodes, [vi("ids", ["N", "S"], I64)], [vi("y", None, 9), vi("got", None, I64)],
              list(c.values()))
    for n, s in ((1, 4), (2, 6)):
        g = check(tmp_path, m, {"ids": ids(0, 8, n, s)})
    assert "gather" in ops_of(g)


def test_shape_value_as_data(tmp_path):
    # BERT's flat mask index: Range(N) as [N, 1] * S + Range(S), S = Shape(x)[1] as data
    c = {k: init(k, np.array(v, np.int64)) for k, v in
         {"zero": 0, "one": 1, "i0": 0, "i1": 1, "ax1": [1]}.items()}
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Gather", ["sh", "i0"], ["n"], axis=0),
             helper.make_node("Gather", ["sh", "i1"], ["s"], axis=0),
             helper.make_node("Range", ["zero", "n", "one"], ["b"]),
             helper.make_node("Range", ["zero", "s", "one"], ["kv"]),
             helper.make_node("Unsqueeze", ["b", "ax1"], ["b1"]),
             helper.make_node("Mul", ["b1", "s"], ["bs"], name="mul_by_S"),
             helper.make_node("Add", ["bs", "kv"], ["y"]),
             helper.make_node("Mul", ["sh", "s"], ["z"], name="shape_times_S")]
    m = model(nodes, [vi("x", ["N", "S"], F)], [vi("y", None, I64), vi("z", None, I64)],
              list(c.values()))
    for n, s in ((2, 3), (3, 5)):
        g = check(tmp_path, m, {"x": frand(n, s)})
    assert "argmax" in ops_of(g) and "range" in ops_of(g)


def test_bert_mask_gather_of_flat_mask(tmp_path):
    load_all()
    if "Gather" not in CONVERTERS:
        pytest.skip("needs the run-time Gather converter (branch gather)")
    c = {k: init(k, np.array(v, np.int64)) for k, v in
         {"zero": 0, "one": 1, "i0": 0, "i1": 1, "ax": [1, 2, 3], "axk": [0, 1, 2]}.items()}
    nodes = [helper.make_node("Shape", ["mask"], ["sh"]),
             helper.make_node("Gather", ["sh", "i0"], ["n"], axis=0),
             helper.make_node("Gather", ["sh", "i1"], ["s"], axis=0),
             helper.make_node("Range", ["zero", "n", "one"], ["b"]),
             helper.make_node("Range", ["zero", "s", "one"], ["kv"]),
             helper.make_node("Unsqueeze", ["b", "ax"], ["b4"]),
             helper.make_node("Unsqueeze", ["kv", "axk"], ["kv4"]),
             helper.make_node("Flatten", ["mask"], ["flat"], axis=2),
             helper.make_node("Mul", ["b4", "s"], ["bs"]),
             helper.make_node("Add", ["kv4", "bs"], ["lin"]),
             helper.make_node("Gather", ["flat", "lin"], ["y"], axis=0)]
    m = model(nodes, [vi("mask", ["N", "S"], I64)], [vi("y", None, I64)], list(c.values()))
    for n, s in ((2, 3), (3, 6)):
        check(tmp_path, m, {"mask": ids(0, 2, n, s)})


def test_runtime_index_out_of_range_is_located(tmp_path):
    # [0, 5] into [4, 5] would be element [1, 0] of the flat data; kiln reports it instead
    graph, _ = convert(tmp_path, _gnd([4, 5], [2, 2], name="gnd_oob"))
    inp = tmp_path / "in.safetensors"
    write_safetensors(str(inp), {"x": ("f32", frand(4, 5)),
                                 "i": ("i64", np.array([[1, 2], [0, 5]], np.int64))})
    r = subprocess.run([KILN, "run", str(graph), "--device", "cpu", "--inputs", str(inp),
                        "--output", str(tmp_path / "o.safetensors")], capture_output=True,
                       text=True, env=KILN_ENV)
    assert r.returncode == 2, r.stderr
    assert "gnd_oob" in r.stderr and "index out of range" in r.stderr, r.stderr


def test_gathernd_refusals(tmp_path):
    def refused(dshape, ishape, b, what):
        _, r = convert(tmp_path, _gnd(dshape, ishape, b, name="gnd_bad"), expect_rc=2)
        assert "gnd_bad" in r.stderr and what in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    refused([4, 5], [2, 3], 0, "takes 1 to 2")
    refused([4, 5], [4, 2], 1, "takes 1 to 1")
    refused([4, 5], [3, 1], 1, "batch dim 0: data has 4, indices 3")
    refused([4, 5], [2, "K"], 0, "last dim must be a static size")


def test_bounded_slices_of_symbolic_dims(tmp_path):
    # GPT-2 (dynamo): position_ids[:, 0:1], then cat(...)[..., :S] of an [N, S+1] tensor; and a
    # slice to the end from 1 with step 2, and to -1
    def c(name, v):
        return init(name, np.array(v, np.int64))
    inits = [c("z", [0]), c("o", [1]), c("ax", [1]), c("big", [2 ** 62]), c("two", [2]),
             c("m1", [-1]), c("k", [1])]
    nodes = [helper.make_node("Slice", ["x", "z", "o", "ax"], ["first"], name="first"),
             helper.make_node("Concat", ["first", "x"], ["cat"], axis=1),
             helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Slice", ["cat", "z", "s", "ax"], ["head"], name="head"),
             helper.make_node("Slice", ["x", "o", "big", "ax", "two"], ["odd"], name="odd"),
             helper.make_node("Slice", ["x", "k", "m1", "ax"], ["inner"], name="inner")]
    m = model(nodes, [vi("x", ["N", "S"], I64)],
              [vi(o, None, I64) for o in ("first", "head", "odd", "inner")], inits)
    for n, s in ((2, 5), (1, 8)):
        g = check(tmp_path, m, {"x": ids(-9, 9, n, s)})
    assert "slice" not in ops_of(g) and ops_of(g).count("gather") == 4


def test_slice_past_a_symbolic_dim_is_a_run_time_error(tmp_path):
    nodes = [helper.make_node("Slice", ["x", "z", "e", "ax"], ["y"], name="head4")]
    m = model(nodes, [vi("x", ["S"], F)], [vi("y", None, F)],
              [init("z", np.array([0], np.int64)), init("e", np.array([4], np.int64)),
               init("ax", np.array([0], np.int64))])
    check(tmp_path, m, {"x": frand(6)})
    graph, _ = convert(tmp_path, m)
    inp = tmp_path / "in3.safetensors"
    write_safetensors(str(inp), {"x": ("f32", frand(3))})
    r = subprocess.run([KILN, "run", str(graph), "--device", "cpu", "--inputs", str(inp),
                        "--output", str(tmp_path / "o.safetensors")], capture_output=True,
                       text=True, env=KILN_ENV)
    assert r.returncode == 2 and "head4" in r.stderr and "index out of range" in r.stderr, r.stderr


def test_integer_cumsum_of_a_bool_cast(tmp_path):
    # GPT-2's packed-sequence ids: cumsum(cast(position_ids diff != 1, int64)), in f32 exactly
    nodes = [helper.make_node("Equal", ["x", "one"], ["e"]), helper.make_node("Not", ["e"], ["ne"]),
             helper.make_node("Cast", ["ne"], ["c"], to=7),
             helper.make_node("CumSum", ["c", "ax"], ["y"], name="cs")]
    inits = [init("one", np.array(1, np.int64)), init("ax", np.array(1, np.int64))]
    m = model(nodes, [vi("x", ["N", "S"], I64)], [vi("y", None, I64)], inits)
    g = check(tmp_path, m, {"x": ids(0, 3, 2, 9)})
    assert "cumsum" in ops_of(g)
    nodes = [helper.make_node("CumSum", ["x", "ax"], ["y"], name="cs_int")]
    m = model(nodes, [vi("x", ["N", "S"], I64)], [vi("y", None, I64)], inits[1:])
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "cs_int" in r.stderr and "cast of a bool" in r.stderr, r.stderr
