"""Index ops: Range with a run-time (symbolic) limit. A Range of constants folds to an
initializer (fold.py); ArgMax / ArgMin are in reduce.py."""
import numpy as np

from ..fold import is_sym_array
from ..registry import converter

# ONNX Range's output has the dtype of its inputs.
RANGE_DTYPES = {np.dtype(np.int64): "i64", np.dtype(np.int32): "i32",
                np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
                np.dtype(np.float64): "f32"}


def _scalar(cx, n, i, what):
    v = np.asarray(cx.const(n, n.input[i], what))
    if v.size != 1:
        cx.fail(n, f"{what} must be a scalar, found shape {list(v.shape)}")
    return v.reshape(()).item() if not is_sym_array(v) else v.reshape(-1)[0]


@converter("Range")
def range_op(cx, n, at):
    """Range(start, limit, delta) whose limit is a shape value of the model (a symbol, as
    GPT-2's and BERT's position ids Range(0, Shape(x)[1], 1)): kiln's range with length
    ceil((limit - start) / delta), which must be positive when the graph is bound. start and delta
    must be constant integers, delta positive."""
    if len(n.input) != 3 or not all(n.input):
        cx.fail(n, "expected 3 inputs (start, limit, delta)")
    start = _scalar(cx, n, 0, "start")
    limit = _scalar(cx, n, 1, "limit")
    delta = _scalar(cx, n, 2, "delta")
    for what, v in (("start", start), ("delta", delta)):
        if not isinstance(v, (int, np.integer)):
            cx.fail(n, f"{what} {v!r}: a Range with a run-time limit needs constant integer start "
                       f"and delta")
    start, delta = int(start), int(delta)
    if delta <= 0:
        cx.fail(n, f"delta {delta}: a Range with a run-time limit needs a positive delta")
    if not isinstance(limit, str):
        cx.fail(n, f"the limit is a run-time value kiln cannot express as a dim ({limit!r})")
    if delta == 1:
        length = limit if start == 0 else f"{limit}-{start}" if start > 0 else f"{limit}+{-start}"
    else:
        length = f"({limit}{-start + delta - 1:+d})/{delta}"
    dt = RANGE_DTYPES.get(np.asarray(cx.consts[n.input[0]]).dtype)
    if dt is None:
        cx.fail(n, f"start has dtype {np.asarray(cx.consts[n.input[0]]).dtype}; kiln ranges are "
                   f"i32, i64, f32 or f16")
    if dt in ("f32", "f16") and cx.force_dtype:
        dt = cx.force_dtype
    cx.emit(n, "range", [], {"start": start, "delta": delta, "length": [length], "dtype": dt},
            out=n.output[0], shape=[length], dtype=dt)
