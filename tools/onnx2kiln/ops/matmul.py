"""Contractions without a window: MatMul (batched, broadcasting, 1-D operands) and Gemm. The
MatMul + Add(bias) idiom is a fusion (fusions.py)."""
import numpy as np

from ..fold import is_sym_array
from ..registry import converter
from ..shapes import bcast, mm_shape, reshape_shape


def _vector_const(cx, t, shape, suffix):
    """A 1-D constant operand as a matrix, reshaped at conversion time to `shape` (a row for A, a
    column for B). Returns (the operand, whether the added dim is squeezed from the result)."""
    if t in cx.consts and np.ndim(cx.consts[t]) == 1:
        return cx.add_const(t + suffix, cx.consts[t].reshape(shape)), True
    return t, False


@converter("MatMul")
def matmul(cx, n, at):
    """numpy matmul semantics: a 1-D operand is a row (a) or column (b) vector whose added dim is
    dropped from the result."""
    a, b = n.input
    dt = cx.act_dtype(a, b)
    a, squeeze_m = _vector_const(cx, a, (1, -1), "_row")
    b, squeeze_n = _vector_const(cx, b, (-1, 1), "_col")
    at_, bt_ = cx.act(n, a, dt), cx.act(n, b, dt)
    for t, kt in ((a, at_), (b, bt_)):
        if cx.rank(n, kt) == 0:
            cx.fail(n, f"input '{t}' is a scalar; MatMul needs operands of rank 1 or more")
    if cx.rank(n, at_) == 1:
        at_ = cx.emit(n, "reshape", [at_], {"shape": [1, -1]}, shape=[1, cx.shp(at_)[0]],
                      suffix="row")
        squeeze_m = True
    if cx.rank(n, bt_) == 1:
        bt_ = cx.emit(n, "reshape", [bt_], {"shape": [-1, 1]}, shape=[cx.shp(bt_)[0], 1],
                      suffix="col")
        squeeze_n = True
    shape = mm_shape(cx.shp(at_), cx.shp(bt_))
    if not (squeeze_m or squeeze_n):
        cx.emit(n, "matmul", [at_, bt_], out=n.output[0], shape=shape)
        return
    y = cx.emit(n, "matmul", [at_, bt_], shape=shape)
    r = len(shape)
    target = ([0] * (r - 2) + ([] if squeeze_m else [shape[-2]])
              + ([] if squeeze_n else [shape[-1]]))
    target = [v if v is not None else -1 for v in target] or [1]
    cx.emit(n, "reshape", [y], {"shape": target}, out=n.output[0],
            shape=reshape_shape(shape, target), suffix="squeeze")


def _gemm_bias(cx, n, c, alpha, beta, ncols, dt):
    """C as the matmul's bias when it can be: alpha 1 and a constant [N] or [1, N] C (scaled by
    beta). Returns the kiln constant or None."""
    if c is None or alpha != 1.0 or c not in cx.consts or is_sym_array(cx.consts[c]):
        return None
    cv = np.asarray(cx.consts[c])
    if cv.size == ncols and cv.ndim in (1, 2) and (cv.ndim == 1 or cv.shape[0] == 1):
        key = cx.add_const(c + "_bias", cv.reshape(-1).astype(np.float64) * beta)
        return cx.materialize(n, key, dt)
    return None


def _gemm_c(cx, n, c, beta, dt):
    """C as the operand of an add: a constant pre-scaled by beta, a run-time one times beta."""
    if c in cx.consts and not is_sym_array(cx.consts[c]):
        key = cx.add_const(c + "_scaled", np.asarray(cx.consts[c], dtype=np.float64) * beta)
        return cx.materialize(n, key, dt)
    ct = cx.act(n, c, dt)
    if beta != 1.0:
        key = cx.add_const(f"{n.name or 'gemm'}_beta", np.array(beta, dtype=np.float32))
        ct = cx.emit(n, "mul", [ct, cx.materialize(n, key, dt)], suffix="beta")
    return ct


@converter("Gemm")
def gemm(cx, n, at):
    """alpha * A' @ B' + beta * C: a matmul (transA/transB), then a mul by alpha when it is not 1
    and an add of C unless C became the matmul's bias."""
    a, b = n.input[0], n.input[1]
    c = n.input[2] if len(n.input) > 2 and n.input[2] else None
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    ta, tb = cx.flag(n, at, "transA", 0), cx.flag(n, at, "transB", 0)
    dt = cx.act_dtype(a, b)
    at_, bt_ = cx.act(n, a, dt), cx.act(n, b, dt)
    for t, kt in ((a, at_), (b, bt_)):
        if cx.shp(kt) is not None and len(cx.shp(kt)) != 2:
            cx.fail(n, f"input '{t}' has rank {len(cx.shp(kt))}; Gemm takes 2-D A and B")
    shape = mm_shape(cx.shp(at_), cx.shp(bt_), bool(ta), bool(tb))
    attrs = {"transpose_a": ta, "transpose_b": tb}
    bias = _gemm_bias(cx, n, c, alpha, beta, shape[-1] if shape else None, dt)
    if bias is not None:
        cx.emit(n, "matmul", [at_, bt_, bias], attrs, out=n.output[0], shape=shape)
        return
    last = c is None and alpha == 1.0
    y = cx.emit(n, "matmul", [at_, bt_], attrs, out=n.output[0] if last else None, shape=shape)
    if last:
        return
    if alpha != 1.0:
        key = cx.add_const(f"{n.name or 'gemm'}_alpha", np.array(alpha, dtype=np.float32))
        y = cx.emit(n, "mul", [y, cx.materialize(n, key, dt)],
                    out=n.output[0] if c is None else None, shape=shape, suffix="alpha")
        if c is None:
            return
    ct = _gemm_c(cx, n, c, beta, dt)
    cx.emit(n, "add", [y, ct], out=n.output[0], shape=bcast(shape, cx.shp(ct)), suffix="c")
