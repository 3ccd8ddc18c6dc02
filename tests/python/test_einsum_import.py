"""ONNX import of Einsum: lowered to kiln transposes, reshapes, reduce_sums and matmuls, run with
kiln's CPU reference and compared with onnxruntime for the equations models use; constant
operands fold; a diagonal is refused, naming the node."""
import numpy as np
import pytest
from onnx import helper

from test_onnx_import import check, convert, init, model, ops_of, rand, vi

CASES = [  # (equation, input shapes (symbols allowed), concrete shapes)
    ("bhid,bhjd->bhij", [["N", 3, 5, 4], ["N", 3, 6, 4]], [[2, 3, 5, 4], [2, 3, 6, 4]]),
    ("bhij,bhjd->bhid", [["N", 3, 5, 6], ["N", 3, 6, 4]], [[2, 3, 5, 6], [2, 3, 6, 4]]),
    ("bij,bjk->bik", [["N", 5, 7], ["N", 7, 3]], [[3, 5, 7], [3, 7, 3]]),
    ("ij->ji", [[5, 7]], [[5, 7]]),
    ("...ij,...jk->...ik", [["N", 2, 5, 7], ["N", 2, 7, 3]], [[2, 2, 5, 7], [2, 2, 7, 3]]),
    # Broadcast through the ellipsis: size-1 batch dims on either side.
    ("...ij,...jk->...ik", [[4, 1, 5, 7], [1, 3, 7, 2]], [[4, 1, 5, 7], [1, 3, 7, 2]]),
    # Free dims on both sides in an order that needs the final transpose; a summed letter.
    ("bchw,bkc->bhkw", [["N", 4, 3, 5], ["N", 6, 4]], [[2, 4, 3, 5], [2, 6, 4]]),
    ("bij,bjk->bk", [[2, 3, 4], [2, 4, 5]], [[2, 3, 4], [2, 4, 5]]),
    ("ij,j->i", [[5, 7], [7]], [[5, 7], [7]]),
    ("i,j->ij", [[5], [3]], [[5], [3]]),  # an outer product (K of 1)
    ("bij->bj", [["N", 5, 7]], [[3, 5, 7]]),  # a single operand summed
    ("bij->", [[2, 5, 7]], [[2, 5, 7]]),  # everything summed
    ("ij,jk", [[5, 7], [7, 3]], [[5, 7], [7, 3]]),  # implicit output: ik
    ("ab,bc,cd->ad", [[3, 4], [4, 5], [5, 2]], [[3, 4], [4, 5], [5, 2]]),  # three operands
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_einsum_against_onnxruntime(tmp_path, case):
    eq, shapes, concrete = CASES[case]
    names = [f"x{i}" for i in range(len(shapes))]
    nodes = [helper.make_node("Einsum", names, ["y"], name="ein", equation=eq)]
    m = model(nodes, [vi(nm, s) for nm, s in zip(names, shapes)], [vi("y", None)], opset=13)
    g = check(tmp_path, m, {nm: rand(*s) for nm, s in zip(names, concrete)}, tol=1e-5)
    assert set(ops_of(g)) <= {"transpose", "reshape", "matmul", "reduce_sum", "identity"}


def test_einsum_attention_lowering_is_one_matmul(tmp_path):
    # q @ k^T per head: a transposed k and one batched matmul, no reshape of a batch dim.
    nodes = [helper.make_node("Einsum", ["q", "k"], ["y"], name="qk", equation="bhid,bhjd->bhij")]
    m = model(nodes, [vi("q", ["N", 3, 5, 4]), vi("k", ["N", 3, 6, 4])], [vi("y", None)], opset=13)
    g = check(tmp_path, m, {"q": rand(2, 3, 5, 4), "k": rand(2, 3, 6, 4)})
    assert ops_of(g) == ["transpose", "matmul"]


def test_einsum_with_a_constant_operand_and_a_constant_fold(tmp_path):
    nodes = [helper.make_node("Einsum", ["x", "w"], ["h"], name="proj", equation="bsd,de->bse"),
             helper.make_node("Einsum", ["w", "w2"], ["ww"], name="const", equation="de,ef->df"),
             helper.make_node("Einsum", ["x", "ww"], ["y"], name="proj2", equation="bsd,df->bsf")]
    m = model(nodes, [vi("x", ["N", 5, 4])], [vi("h", None), vi("y", None)],
              [init("w", rand(4, 6)), init("w2", rand(6, 4))], opset=13)
    g = check(tmp_path, m, {"x": rand(2, 5, 4)})
    assert ops_of(g).count("matmul") == 2  # the constant einsum folded


def test_einsum_diagonal_is_refused(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Einsum", ["r"], ["y"], name="diag", equation="ii->i")]
    m = model(nodes, [vi("x", [4, 4])], [vi("y", None)], opset=13)
    _, r = convert(tmp_path, m, expect_rc=2)
    assert "node 'diag' (Einsum): equation 'ii->i'" in r.stderr and "diagonal" in r.stderr
    assert r.stderr.count("\n") == 1


def test_einsum_bad_equations_are_refused(tmp_path):
    for i, (eq, why) in enumerate([("ij,jk->ik", "2 operand terms for 1"),
                                   ("ijk->ij", "rank 2"), ("ij->iz", "'z' is in no operand")]):
        nodes = [helper.make_node("Einsum", ["x"], ["y"], name="bad", equation=eq)]
        m = model(nodes, [vi("x", [4, 5])], [vi("y", None)], opset=13)
        _, r = convert(tmp_path, m, name=f"bad{i}", expect_rc=2)
        assert "node 'bad' (Einsum)" in r.stderr and why in r.stderr, r.stderr
