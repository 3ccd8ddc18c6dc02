"""Movement ops (views, permutes, cat / split / slice, pad, upsampling), indexing and
sources (arange, full)."""
import math

from ..registry import CONVERTERS, Unsupported, _axis, converter, need  # noqa: F401


# ---- movement
@converter("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten", "view_copy",
           "_reshape_alias", "expand_dims")
def _reshape(cx, n, a, kw):
    return _reshaped(cx, a[0], cx.out_shape(n))


def _reshaped(cx, x, shape):
    """x in `shape`; x itself when that is its shape (EfficientNet's squeeze-excite writes
    view(mean(x), same shape) before its 1x1 conv: a reshape there would read the channels-last
    pool output as a row-major [N, C, 1, 1] and give the conv a layout of its own)."""
    if list(shape) == list(x.shape):
        return x
    return cx.op("reshape", [x], {"shape": list(shape)})


@converter("permute")
def _permute(cx, n, a, kw):
    r = len(a[0].shape)
    return cx.op("transpose", [a[0]], {"perm": [_axis(d, r) for d in a[1]]})


@converter("t", "transpose", "numpy_T")
def _transpose(cx, n, a, kw):
    r = len(a[0].shape)
    if r < 2:
        return a[0]
    d0, d1 = (a[1], a[2]) if cx.target_name(n) == "transpose" else (0, 1)
    perm = list(range(r))
    perm[_axis(d0, r)], perm[_axis(d1, r)] = perm[_axis(d1, r)], perm[_axis(d0, r)]
    return cx.op("transpose", [a[0]], {"perm": perm})


@converter("expand")
def _expand(cx, n, a, kw):
    shape = cx.out_shape(n)
    if list(a[0].shape) == list(shape):  # aten.matmul's decomposition expands to the same shape
        return a[0]
    return cx.op("expand", [a[0]], {"shape": shape})


@converter("cat", "concat")
def _cat(cx, n, a, kw):
    xs = [t for t in a[0] if not (isinstance(t.shape, list) and 0 in t.shape)]
    dim = a[1] if len(a) > 1 else kw.get("dim", 0)
    return cx.op("concat", xs, {"axis": int(dim)})


@converter("split_with_sizes", "split")
def _split(cx, n, a, kw):
    x = a[0]
    dim = int(a[2] if len(a) > 2 else kw.get("dim", 0))
    size = x.shape[_axis(dim, len(x.shape))]
    need(isinstance(size, int), "a split of a symbolic dim")
    sizes = a[1]
    if isinstance(sizes, int):
        sizes = [min(sizes, size - i) for i in range(0, size, sizes)]
    if len(sizes) == 1:
        return (x,)
    return tuple(cx.op("split", [x], {"axis": dim, "split": list(sizes)}, multi=True))


# "To the end" of a slice: torch writes 2^63 - 1; the graph file's integers stop at 2^31 - 1 (a
# saved graph must load), and a bound past the dim clamps to it (ONNX Slice) either way.
_END = 2 ** 31 - 1


@converter("slice")
def _slice(cx, n, a, kw):
    x = a[0]
    dim = int(a[1]) if len(a) > 1 else 0
    start = a[2] if len(a) > 2 and a[2] is not None else 0
    end = a[3] if len(a) > 3 and a[3] is not None else _END
    step = a[4] if len(a) > 4 else 1
    need(all(isinstance(v, int) for v in (start, end, step)), "a slice with symbolic bounds")
    start, end = (max(-_END, min(v, _END)) for v in (start, end))
    size = x.shape[_axis(dim, len(x.shape))]
    if start == 0 and step == 1 and (end >= _END or (isinstance(size, int) and end >= size)):
        return x
    return cx.op("slice", [x], {"starts": [start], "ends": [end], "axes": [dim], "steps": [step]})


@converter("slice_scatter")
def _slice_scatter(cx, n, a, kw):
    """src written over input[start:end] along dim (step 1), as the concat of the input's parts
    before and after and src: what core ATen makes of an in-place slice assignment (Swin's
    shifted-window mask, built from zeros on every call)."""
    x, src = a[0], a[1]
    dim = int(a[2] if len(a) > 2 else kw.get("dim", 0))
    start = a[3] if len(a) > 3 else kw.get("start")
    end = a[4] if len(a) > 4 else kw.get("end")
    step = a[5] if len(a) > 5 else kw.get("step", 1)
    axis = _axis(dim, len(x.shape))
    size = x.shape[axis]
    need(isinstance(size, int) and all(isinstance(v, int) for v in (start or 0, end or 0, step)),
         "a slice_scatter with symbolic bounds")
    need(step == 1, "a slice_scatter with a step")
    start, end = (min(max(v + size if v < 0 else v, 0), size) for v in
                  (0 if start is None else start, size if end is None else end))
    parts = []
    if start > 0:
        parts.append(cx.op("slice", [x], {"starts": [0], "ends": [start], "axes": [axis],
                                         "steps": [1]}))
    if end > start:
        parts.append(src)
    if end < size:
        parts.append(cx.op("slice", [x], {"starts": [end], "ends": [size], "axes": [axis],
                                         "steps": [1]}))
    return parts[0] if len(parts) == 1 else cx.op("concat", parts, {"axis": axis})


@converter("select")
def _select(cx, n, a, kw):
    x, dim, idx = a[0], int(a[1]), a[2]
    need(isinstance(idx, int), "select with a symbolic index")
    s = cx.op("slice", [x], {"starts": [idx], "ends": [idx + 1 if idx != -1 else _END],
                             "axes": [dim], "steps": [1]})
    return cx.op("reshape", [s], {"shape": cx.out_shape(n)})


@converter("constant_pad_nd")
def _pad(cx, n, a, kw):
    x, pad = a[0], list(a[1])
    value = a[2] if len(a) > 2 else 0.0
    r = len(x.shape)
    need(all(p >= 0 for p in pad), "negative padding (a crop)")
    before, after = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        before[r - 1 - i], after[r - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return cx.op("pad", [x], {"pads": before + after, "value": float(value)})


@converter("embedding")
def _embedding(cx, n, a, kw):
    return cx.op("gather", [a[0], a[1]], {"axis": 0})


@converter("cumsum")
def _cumsum(cx, n, a, kw):
    need(kw.get("dtype") is None, "cumsum with a dtype")
    return cx.op("cumsum", [a[0]], {"axis": int(a[1])})


@converter("upsample_nearest2d")
def _up_nearest(cx, n, a, kw):
    return cx.op("resize", [a[0]], {"sizes": cx.out_shape(n), "mode": "nearest",
                                    "coordinate_transformation_mode": "asymmetric",
                                    "nearest_mode": "floor"})


@converter("resize2d")
def _resize2d(cx, n, a, kw):
    """kiln::resize2d (kiln/dynamo/interpolate.py): F.interpolate, nearest or bilinear."""
    if a[2] == "nearest":
        return _up_nearest(cx, n, a, kw)
    return cx.op("resize", [a[0]], {"sizes": cx.out_shape(n), "mode": "linear",
                                    "coordinate_transformation_mode":
                                        "align_corners" if a[3] else "pytorch_half_pixel"})


@converter("upsample_bilinear2d")
def _up_bilinear(cx, n, a, kw):
    align = a[2] if len(a) > 2 else kw.get("align_corners", False)
    return cx.op("resize", [a[0]], {"sizes": cx.out_shape(n), "mode": "linear",
                                    "coordinate_transformation_mode":
                                        "align_corners" if align else "pytorch_half_pixel"})


# ---- indexing and sources
@converter("gather")
def _gather(cx, n, a, kw):
    need(not kw.get("sparse_grad", False), "a sparse gather")
    return cx.op("gather_elements", [a[0], a[2]], {"axis": int(a[1])})


@converter("index_select")
def _index_select(cx, n, a, kw):
    return cx.op("gather", [a[0], a[2]], {"axis": int(a[1])})


@converter("index", "_unsafe_index")
def _index(cx, n, a, kw):
    idx = list(a[1])
    used = [i for i, t in enumerate(idx) if t is not None]
    need(all(cx.dtype_of_tensor(idx[k]) in ("i32", "i64") for k in used),
         "indexing with a boolean mask")
    if len(used) == 1:
        return cx.op("gather", [a[0], idx[used[0]]], {"axis": used[0]})
    nodes = [n.args[1][k] for k in used]
    if _is_nearest_upsample(cx, a[0], nodes, used):
        return _up_nearest(cx, n, a, kw)
    return _index_several(cx, a[0], [idx[k] for k in used], used)


def _nearest_source(out, size):
    """The rows kiln's nearest resize reads (engine/ir/resize_op.cpp: asymmetric, floor), in its
    float32 arithmetic."""
    import numpy as np
    scale = np.float32(out) / np.float32(size)
    src = np.floor(np.arange(out, dtype=np.float32) / scale)
    return np.clip(src, 0, size - 1).astype(np.int64)


def _is_nearest_upsample(cx, x, nodes, used):
    """Whether x[:, :, ih[:, None], iw] is core ATen's nearest upsampling (its indices folded to
    constants): then it is a resize, read channels-last in place, not a gather over row-major."""
    if len(x.shape) != 4 or used != [2, 3] or not all(isinstance(d, int) for d in x.shape[2:]):
        return False
    ih, iw = (cx.constants.get(getattr(nd, "name", None)) for nd in nodes)
    if ih is None or iw is None or ih.dim() != 2 or ih.shape[1] != 1 or iw.dim() != 1:
        return False
    import numpy as np
    return all(np.array_equal(v.reshape(-1).cpu().numpy(), _nearest_source(v.numel(), size))
               for v, size in ((ih, x.shape[2]), (iw, x.shape[3])))


def _index_several(cx, x, idx, used):
    """x[..., i0, i1, ...] with index tensors broadcast together: one gather along the indexed
    dims merged into one, at the flat index sum(i_j * stride_j). Index tensors that are apart
    put their dims first, as torch does (x moves them there). A component out of [-d, d) makes
    the flat index out of range, so the gather reports it rather than reading another element."""
    shape = list(x.shape)
    if used != list(range(used[0], used[0] + len(used))):
        rest = [d for d in range(len(shape)) if d not in used]
        x = cx.op("transpose", [x], {"perm": used + rest})
        shape = [shape[d] for d in used + rest]
        used = list(range(len(used)))
    dims = [shape[k] for k in used]
    need(all(isinstance(d, int) for d in dims), "indexing symbolic dims with several tensors")
    total = 1
    for d in dims:
        total *= d
    flat = valid = None
    stride = total
    for i, d in zip(idx, dims):
        stride //= d
        dt = cx.dtype_of_tensor(i)

        def c(v, like=i):
            return cx.scalar(v, like, rank=len(like.shape))
        wrapped = cx.op("where", [cx.op("lt", [i, c(0)]), cx.op("add", [i, c(d)]), i])
        ok = cx.op("and", [cx.op("ge", [i, c(-d)]), cx.op("lt", [i, c(d)])])
        if dt != "i64":
            wrapped = cx.op("cast", [wrapped], {"dtype": "i64"})
        term = wrapped if stride == 1 else cx.op("mul", [wrapped, c(stride, wrapped)])
        flat = term if flat is None else cx.op("add", [flat, term])
        valid = ok if valid is None else cx.op("and", [valid, ok])
    flat = cx.op("where", [valid, flat, cx.scalar(total, flat, rank=len(flat.shape))])
    first = used[0]
    merged = cx.op("reshape", [x], {"shape": shape[:first] + [total] + shape[first + len(used):]})
    return cx.op("gather", [merged, flat], {"axis": first})


@converter("arange")
def _arange(cx, n, a, kw):
    nums = [v for v in a if not cx.is_tensor(v)]
    start, end, step = (0, nums[0], 1) if len(nums) == 1 else (nums + [1])[:3]
    need(all(isinstance(v, (int, float)) for v in (start, step)), "a symbolic arange start/step")
    length = cx.out_shape(n)[0]
    return cx.op("range", [], {"start": float(start), "delta": float(step), "length": [length],
                               "dtype": cx.dtype_of(n)})


@converter("full")
def _full(cx, n, a, kw):
    v = a[1]
    need(not cx.is_tensor(v), "full with a tensor value")
    shape = cx.out_shape(n)
    return cx.op("expand", [cx.scalar(v, n, rank=len(shape))], {"shape": shape})


@converter("fmod")
def _fmod(cx, n, a, kw):
    like = a[0] if cx.is_tensor(a[0]) else n
    xs = [cx.as_tensor(v, like=like) for v in a[:2]]
    return cx.op("mod", xs, {"fmod": 1})


def _contiguous_strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _same_strides(shape, a, b):
    return all(d == 1 or x == y for d, x, y in zip(shape, a, b))


@converter("as_strided")
def _as_strided(cx, n, a, kw):
    """A row-major view of a row-major input (what avgpool's flatten leaves): a reshape."""
    src = cx.val(n.args[0])
    size, stride = list(a[1]), list(a[2])
    offset = a[3] if len(a) > 3 else kw.get("storage_offset", 0)
    need(all(isinstance(v, int) for v in size + stride + list(src.shape) + list(src.stride())),
         "as_strided with symbolic sizes")
    row_major = _same_strides(list(src.shape), list(src.stride()),
                              _contiguous_strides(list(src.shape)))
    need(not offset and row_major and src.numel() == math.prod(size) and
         _same_strides(size, stride, _contiguous_strides(size)),
         "as_strided that is not a row-major reshape")
    return _reshaped(cx, a[0], size)
