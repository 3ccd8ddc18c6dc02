"""ONNX import of Gather and GatherElements with run-time operands: an embedding lookup (a weight
initializer indexed by int64 ids, BERT-like with Add and LayerNormalization), gathers of run-time
data along several axes with run-time int32 / int64 indices, constant indices that become slices
(a scalar: slice + reshape; a step-1 range: a slice) or stay a gather, GatherElements; run with
the kiln CLI (CPU reference) and onnxruntime on the same inputs. Constant-on-constant Gather folds;
refusals and an index out of range at run time name the node (exit 2)."""
import subprocess

import numpy as np
from onnx import helper, numpy_helper

from conftest import KILN, KILN_ENV
from onnx2kiln.safetensors import write_safetensors
from test_onnx_int_bool import F, I32, I64, RNG, check, convert, model, ops_of, vi


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def frand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def ids(hi, *shape, lo=0, dtype=np.int64):
    return RNG.integers(lo, hi, size=shape, dtype=dtype)


def bert_embeddings(shape, positions):
    """word + token type (+ position, a constant-on-constant Gather that folds) embeddings, then
    LayerNormalization: the embedding block of BERT."""
    nodes = [helper.make_node("Gather", ["wte", "input_ids"], ["we"], name="word_embeddings"),
             helper.make_node("Gather", ["tte", "token_type_ids"], ["te"], name="token_type"),
             helper.make_node("Add", ["we", "te"], ["s"], name="add")]
    inits = [init("wte", frand(50, 16)), init("tte", frand(2, 16)),
             init("ln_s", frand(16) + 1.5), init("ln_b", frand(16))]
    last = "s"
    if positions:
        nodes += [helper.make_node("Gather", ["wpe", "pos"], ["pe"], name="position"),
                  helper.make_node("Add", ["s", "pe"], ["s2"], name="add_pos")]
        inits += [init("wpe", frand(12, 16)), init("pos", np.arange(shape[1])[None, :])]
        last = "s2"
    nodes.append(helper.make_node("LayerNormalization", [last, "ln_s", "ln_b"], ["y"], name="ln",
                                  axis=-1, epsilon=1e-12))
    return model(nodes, [vi("input_ids", shape, I64), vi("token_type_ids", shape, I64)],
                 [vi("y", None, F)], inits, opset=17)


def test_bert_embedding_lookup(tmp_path):
    m = bert_embeddings([2, 7], positions=True)
    g = check(tmp_path, m, {"input_ids": ids(50, 2, 7), "token_type_ids": ids(2, 2, 7)}, tol=1e-4)
    assert ops_of(g) == ["gather", "gather", "add", "add", "layernorm"], ops_of(g)
    assert g["nodes"][0]["inputs"][0] in g["constants"]  # the weight is a kiln constant
    # Symbolic batch and sequence; negative ids count from the end, as onnxruntime's do.
    m = bert_embeddings(["N", "S"], positions=False)
    g = check(tmp_path, m, {"input_ids": ids(50, 3, 5, lo=-50), "token_type_ids": ids(2, 3, 5)},
              tol=1e-4)
    assert ops_of(g) == ["gather", "gather", "add", "layernorm"], ops_of(g)


def test_gather_runtime_data_and_indices(tmp_path):
    nodes = [helper.make_node("Gather", ["x", "i64"], ["a0"], name="g0", axis=0),
             helper.make_node("Gather", ["x", "i32"], ["a1"], name="g1", axis=1),
             helper.make_node("Gather", ["x", "i32"], ["a2"], name="g2", axis=-1),
             helper.make_node("Relu", ["a2"], ["r"], name="relu")]
    m = model(nodes, [vi("x", ["N", 5, 6], F), vi("i64", [2, 3], I64), vi("i32", [4], I32)],
              [vi("a0", None, F), vi("a1", None, F), vi("r", None, F)])
    g = check(tmp_path, m, {"x": frand(4, 5, 6), "i64": ids(4, 2, 3, lo=-4),
                            "i32": ids(5, 4, lo=-5, dtype=np.int32)})
    assert ops_of(g) == ["gather", "gather", "gather", "relu"]
    assert [n["axis"] for n in g["nodes"][:3]] == [0, 1, 2]


def test_constant_indices_become_slices(tmp_path):
    nodes = [helper.make_node("Gather", ["x", "zero"], ["cls"], name="class_token", axis=1),
             helper.make_node("Gather", ["x", "last"], ["l"], name="last", axis=-1),
             helper.make_node("Gather", ["x", "run"], ["r"], name="run", axis=1),
             helper.make_node("Gather", ["x", "pick"], ["p"], name="pick", axis=1)]
    inits = [init("zero", np.array(0, np.int64)), init("last", np.array(-1, np.int64)),
             init("run", np.array([1, 2, 3], np.int64)), init("pick", np.array([[3, -5]], np.int32))]
    m = model(nodes, [vi("x", ["N", 5, 6], F)],
              [vi("cls", None, F), vi("l", None, F), vi("r", None, F), vi("p", None, F)], inits)
    g = check(tmp_path, m, {"x": frand(3, 5, 6)})
    # A scalar: slice + reshape (a view); a range of step 1: a slice; others: a gather.
    assert ops_of(g) == ["slice", "reshape", "slice", "reshape", "slice", "gather"], ops_of(g)
    assert g["nodes"][0]["starts"] == [0] and g["nodes"][2]["starts"] == [5]
    assert g["nodes"][4]["starts"] == [1] and g["nodes"][4]["ends"] == [4]


def test_constant_on_constant_gather_folds(tmp_path):
    nodes = [helper.make_node("Gather", ["table", "idx"], ["t"], name="fold", axis=0),
             helper.make_node("Add", ["x", "t"], ["y"], name="add")]
    m = model(nodes, [vi("x", [2, 3], F)], [vi("y", None, F)],
              [init("table", frand(4, 3)), init("idx", np.array([3, 0], np.int64))])
    g = check(tmp_path, m, {"x": frand(2, 3)})
    assert ops_of(g) == ["add"]


def test_gather_elements(tmp_path):
    nodes = [helper.make_node("GatherElements", ["x", "i"], ["a"], name="ge1", axis=1),
             helper.make_node("GatherElements", ["x", "c"], ["b"], name="ge0", axis=0)]
    m = model(nodes, [vi("x", [3, 4], F), vi("i", [3, 6], I64)], [vi("a", None, F), vi("b", None, F)],
              [init("c", np.array([[2, -1, 0, 1]], np.int32))])
    g = check(tmp_path, m, {"x": frand(3, 4), "i": ids(4, 3, 6, lo=-4)})
    assert ops_of(g) == ["gather_elements", "gather_elements"]


def test_refusals_name_the_node(tmp_path):
    nodes = [helper.make_node("Gather", ["x", "bad"], ["y"], name="oob", axis=1)]
    m = model(nodes, [vi("x", ["N", 5], F)], [vi("y", None, F)],
              [init("bad", np.array([0, 5], np.int64))])
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "oob" in r.stderr and "index out of range: indices[1] is 5, outside [-5, 5)" in r.stderr, \
        r.stderr
    nodes = [helper.make_node("Gather", ["x", "f"], ["y"], name="float_ids", axis=0)]
    m = model(nodes, [vi("x", [4, 5], F), vi("f", [2], F)], [vi("y", None, F)])
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "float_ids" in r.stderr and "int32 or int64" in r.stderr, r.stderr


def test_runtime_index_out_of_range_is_a_located_error(tmp_path):
    nodes = [helper.make_node("Gather", ["wte", "ids"], ["y"], name="word_embeddings")]
    m = model(nodes, [vi("ids", ["S"], I64)], [vi("y", None, F)], [init("wte", frand(10, 4))])
    graph, _ = convert(tmp_path, m)
    inp = tmp_path / "in.safetensors"
    write_safetensors(str(inp), {"ids": ("i64", np.array([1, 10, 2], np.int64))})
    r = subprocess.run([KILN, "run", str(graph), "--device", "cpu", "--inputs", str(inp),
                        "--output", str(tmp_path / "o.safetensors")], capture_output=True,
                       text=True, env=KILN_ENV)
    assert r.returncode == 2, r.stderr
    assert "word_embeddings" in r.stderr and "index out of range: indices[1] is 10" in r.stderr, \
        r.stderr
