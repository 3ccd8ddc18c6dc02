"""Converters from core-ATen FX nodes to kiln ops: CONVERTERS[op overload packet name] =
fn(cx, node, args, kwargs) -> a kiln Tensor or a tuple of them. `args` are the node's arguments
with FX nodes replaced by their kiln tensors (or dim values for symbolic sizes). A converter raises
Unsupported with the reason for what kiln cannot take; the partitioner leaves that node to eager
PyTorch."""
import math

CONVERTERS = {}


class Unsupported(Exception):
    pass


def converter(*names):
    def reg(fn):
        for n in names:
            CONVERTERS[n] = fn
        return fn
    return reg


def need(cond, why):
    if not cond:
        raise Unsupported(why)


def _rank(cx, t):
    return len(t.shape)


def _axis(d, rank):
    return d + rank if d < 0 else d


# ---- pointwise
_UNARY = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu", "exp": "exp",
          "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "neg": "neg",
          "reciprocal": "reciprocal", "erf": "erf", "sin": "sin", "cos": "cos",
          "hardswish": "hardswish", "mish": "mish", "logical_not": "not", "bitwise_not": "not"}
for _a, _k in _UNARY.items():
    CONVERTERS[_a] = (lambda k: lambda cx, n, a, kw: cx.op(k, [a[0]]))(_k)


@converter("gelu")
def _gelu(cx, n, a, kw):
    return cx.op("gelu", [a[0]], {"approximate": kw.get("approximate", "none")})


@converter("hardsigmoid")
def _hardsigmoid(cx, n, a, kw):
    return cx.op("hardsigmoid", [a[0]], {"alpha": 1.0 / 6.0, "beta": 0.5})


@converter("leaky_relu")
def _leaky(cx, n, a, kw):
    return cx.op("leaky_relu", [a[0]], {"alpha": float(a[1] if len(a) > 1 else 0.01)})


@converter("elu")
def _elu(cx, n, a, kw):
    need(all(float(v) == 1.0 for v in a[2:4]), "elu with scale/input_scale other than 1")
    return cx.op("elu", [a[0]], {"alpha": float(a[1] if len(a) > 1 else 1.0)})


@converter("softplus")
def _softplus(cx, n, a, kw):
    need(len(a) < 2 or float(a[1]) == 1.0, "softplus with beta != 1")
    need(len(a) < 3 or float(a[2]) == 20.0, "softplus with threshold != 20")
    return cx.op("softplus", [a[0]])


@converter("clamp", "hardtanh", "clamp_min", "clamp_max")
def _clamp(cx, n, a, kw):
    name = cx.target_name(n)
    lo, hi = -math.inf, math.inf
    if name == "hardtanh":
        lo, hi = (a[1] if len(a) > 1 else -1.0), (a[2] if len(a) > 2 else 1.0)
    elif name == "clamp_min":
        lo = a[1]
    elif name == "clamp_max":
        hi = a[1]
    else:
        lo = a[1] if len(a) > 1 and a[1] is not None else kw.get("min", -math.inf)
        hi = a[2] if len(a) > 2 and a[2] is not None else kw.get("max", math.inf)
    need(not cx.is_tensor(lo) and not cx.is_tensor(hi), "clamp with tensor bounds")
    lo = -math.inf if lo is None else lo
    hi = math.inf if hi is None else hi
    return cx.op("clamp", [a[0]], {"min": float(lo), "max": float(hi)})


_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max",
           "minimum": "min", "pow": "pow", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le",
           "gt": "gt", "ge": "ge", "logical_and": "and", "logical_or": "or",
           "logical_xor": "xor", "bitwise_and": "and", "bitwise_or": "or", "remainder": "mod"}


def _binary(kop):
    def fn(cx, n, a, kw):
        x, y = a[0], a[1]
        if kop in ("add", "sub"):
            alpha = kw.get("alpha", a[2] if len(a) > 2 else 1)
            if alpha != 1:
                y = cx.op("mul", [cx.as_tensor(y, like=n), cx.scalar(alpha, n)])
                x = cx.as_tensor(x, like=n)
        if kop == "div":
            need(kw.get("rounding_mode") is None, "div with a rounding mode")
        if kop in ("and", "or", "xor") and cx.dtype_of(n) != "bool":
            raise Unsupported("bitwise ops on integers")
        # a Python number takes the dtype of the tensor operand (a comparison's result is bool)
        like = x if cx.is_tensor(x) else y if cx.is_tensor(y) else n
        xs = [cx.as_tensor(v, like=like, operand=True) for v in (x, y)]
        return cx.op(kop, xs)
    return fn


for _a, _k in _BINARY.items():
    CONVERTERS[_a] = _binary(_k)


@converter("scalar_tensor")
def _scalar_tensor(cx, n, a, kw):
    return cx.scalar(a[0], n)


@converter("where")
def _where(cx, n, a, kw):
    return cx.op("where", [a[0], cx.as_tensor(a[1], like=n), cx.as_tensor(a[2], like=n)])


@converter("_to_copy", "to")
def _to_copy(cx, n, a, kw):
    need(kw.get("device") is None or str(kw["device"]) == str(cx.val(n.args[0]).device),
         "a copy to another device")
    dt = cx.dtype_of(n)
    src = cx.dtype_of(n.args[0])
    return a[0] if dt == src else cx.op("cast", [a[0]], {"dtype": dt})


@converter("clone", "contiguous", "alias", "detach", "lift_fresh_copy")
def _identity(cx, n, a, kw):
    return a[0]


@converter("full_like", "zeros_like", "ones_like")
def _full_like(cx, n, a, kw):
    name = cx.target_name(n)
    v = a[1] if name == "full_like" else (0 if name == "zeros_like" else 1)
    need(not cx.is_tensor(v), "full_like with a tensor value")
    return cx.op("expand", [cx.scalar(v, n, rank=len(a[0].shape))], {"shape": cx.out_shape(n)})


# ---- contractions
@converter("convolution")
def _convolution(cx, n, a, kw):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = a[:9]
    need(len(x.shape) == 4, f"a {len(x.shape) - 2}-D convolution (kiln has 2-D ones)")
    ins = [x, w] + ([b] if b is not None else [])
    attrs = {"stride": list(stride), "padding": list(padding), "dilation": list(dilation),
             "groups": int(groups)}
    if transposed:
        attrs["output_padding"] = list(output_padding)
        return cx.op("conv_transpose2d", ins, attrs)
    need(not any(output_padding), "output_padding on a forward convolution")
    return cx.op("conv2d", ins, attrs)


@converter("addmm")
def _addmm(cx, n, a, kw):
    bias, m1, m2 = a[:3]
    beta, alpha = kw.get("beta", 1), kw.get("alpha", 1)
    need(beta == 1 and alpha == 1, "addmm with beta or alpha other than 1")
    if len(bias.shape) == 1:
        return cx.op("matmul", [m1, m2, bias])
    return cx.op("add", [cx.op("matmul", [m1, m2]), bias])


@converter("mm", "bmm", "matmul")
def _mm(cx, n, a, kw):
    return cx.op("matmul", [a[0], a[1]])


@converter("linear")
def _linear(cx, n, a, kw):
    ins = [a[0], a[1]] + ([a[2]] if len(a) > 2 and a[2] is not None else [])
    return cx.op("matmul", ins, {"transpose_b": 1})


def _sdpa(cx, n, q, k, v, mask, causal, scale, dropout):
    need(not causal, "causal attention (is_causal=True)")
    need(not dropout, "attention with dropout")
    d = q.shape[-1]
    need(isinstance(d, int), "attention with a symbolic head size")
    s = cx.op("matmul", [q, k], {"transpose_b": 1})
    s = cx.op("mul", [s, cx.scalar(scale if scale is not None else 1.0 / math.sqrt(d), q)])
    if mask is not None:
        need(cx.dtype_of_tensor(mask) != "bool", "a boolean attention mask")
        s = cx.op("add", [s, mask])
    return cx.op("matmul", [cx.op("softmax", [s], {"axis": -1}), v])


@converter("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
           "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
           "_scaled_dot_product_cudnn_attention")
def _attention(cx, n, a, kw):
    name = cx.target_name(n)
    q, k, v = a[:3]
    if name == "scaled_dot_product_attention":
        mask = a[3] if len(a) > 3 else kw.get("attn_mask")
        dropout = a[4] if len(a) > 4 else kw.get("dropout_p", 0.0)
        causal = a[5] if len(a) > 5 else kw.get("is_causal", False)
        out = _sdpa(cx, n, q, k, v, mask, causal, kw.get("scale"), dropout)
        return out
    if name in ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention"):
        dropout = a[3] if len(a) > 3 else kw.get("dropout_p", 0.0)
        causal = a[4] if len(a) > 4 else kw.get("is_causal", False)
        mask = kw.get("attn_mask")
    else:
        mask = a[3] if len(a) > 3 else kw.get("attn_bias")
        dropout = a[5] if len(a) > 5 else kw.get("dropout_p", 0.0)
        causal = a[6] if len(a) > 6 else kw.get("is_causal", False)
    out = _sdpa(cx, n, q, k, v, mask, causal, kw.get("scale"), dropout)
    return (out,) + (None,) * 8  # the other results (log-sum-exp, seeds) are never read


# ---- normalizations
@converter("_native_batch_norm_legit_no_training")
def _batchnorm(cx, n, a, kw):
    x, w, b, mean, var = a[:5]
    eps = a[6] if len(a) > 6 else kw.get("eps", 1e-5)
    c = x.shape[1]
    need(isinstance(c, int), "batch norm over a symbolic channel count")
    w = w if w is not None else cx.filled(1.0, [c], n)
    b = b if b is not None else cx.filled(0.0, [c], n)
    return (cx.op("batchnorm", [x, w, b, mean, var], {"eps": float(eps)}), None, None)


@converter("native_layer_norm")
def _layernorm(cx, n, a, kw):
    x, shape, w, b, eps = a[:5]
    ins = [x] + ([w] if w is not None else []) + ([b] if b is not None and w is not None else [])
    need(b is None or w is not None, "layer norm with a bias but no weight")
    return (cx.op("layernorm", ins, {"axis": -len(shape), "eps": float(eps)}), None, None)


@converter("native_group_norm")
def _groupnorm(cx, n, a, kw):
    x, w, b = a[:3]
    groups, eps = a[6], a[7]
    ins = [x] + ([w, b] if w is not None and b is not None else [])
    need((w is None) == (b is None), "group norm with only one of weight and bias")
    return (cx.op("groupnorm", ins, {"groups": int(groups), "eps": float(eps)}), None, None)


@converter("_fused_rms_norm", "rms_norm")
def _rmsnorm(cx, n, a, kw):
    x, shape, w = a[:3]
    eps = a[3] if len(a) > 3 and a[3] is not None else kw.get("eps")
    need(eps is not None, "rms norm without an explicit eps (torch's default depends on dtype)")
    ins = [x] + ([w] if w is not None else [])
    out = cx.op("rmsnorm", ins, {"axis": -len(shape), "eps": float(eps)})
    return (out, None) if cx.target_name(n) == "_fused_rms_norm" else out


@converter("_softmax", "softmax")
def _softmax(cx, n, a, kw):
    return cx.op("softmax", [a[0]], {"axis": int(a[1])})


@converter("_log_softmax", "log_softmax")
def _log_softmax(cx, n, a, kw):
    return cx.op("log_softmax", [a[0]], {"axis": int(a[1])})


# ---- reductions, pools
_REDUCE = {"mean": "reduce_mean", "sum": "reduce_sum", "amax": "reduce_max",
           "amin": "reduce_min", "prod": "reduce_prod"}


def _reduce(kop):
    def fn(cx, n, a, kw):
        x = a[0]
        dims = a[1] if len(a) > 1 else kw.get("dim", [])
        if dims is None:
            dims = []
        dims = [dims] if isinstance(dims, int) else list(dims)
        keep = a[2] if len(a) > 2 else kw.get("keepdim", False)
        need(kw.get("dtype") is None, "a reduction with a dtype")
        return cx.op(kop, [x], {"axes": dims, "keepdims": int(bool(keep))})
    return fn


for _a, _k in _REDUCE.items():
    CONVERTERS[_a] = _reduce(_k)


@converter("argmax", "argmin")
def _argmax(cx, n, a, kw):
    need(len(a) > 1 and a[1] is not None, "argmax over every element")
    keep = a[2] if len(a) > 2 else kw.get("keepdim", False)
    return cx.op(cx.target_name(n), [a[0]], {"axis": int(a[1]), "keepdims": int(bool(keep))})


def _pool_args(a, k_idx=1):
    kernel = list(a[1])
    kernel = kernel * 2 if len(kernel) == 1 else kernel
    stride = list(a[2]) if len(a) > 2 and a[2] else kernel
    stride = stride * 2 if len(stride) == 1 else stride
    pad = list(a[3]) if len(a) > 3 else [0, 0]
    pad = pad * 2 if len(pad) == 1 else pad
    return kernel, stride, pad


def _ceil_pads(x, kernel, stride, pad):
    """ceil_mode as extra bottom / right padding ([top, left, bottom, right]): PyTorch's output
    size ceil((H + 2p - k) / s) + 1, less one when the last window would start in the padding."""
    extra = []
    for i, size in enumerate(x.shape[2:]):
        need(isinstance(size, int), "a ceil_mode pool over a symbolic size")
        k, s, p = kernel[i], stride[i], pad[i]
        out = -(-(size + 2 * p - k) // s) + 1
        if (out - 1) * s >= size + p:
            out -= 1
        extra.append(max(0, (out - 1) * s + k - (size + 2 * p)))
    return [pad[0], pad[1], pad[0] + extra[0], pad[1] + extra[1]]


@converter("max_pool2d_with_indices", "max_pool2d")
def _maxpool(cx, n, a, kw):
    kernel, stride, pad = _pool_args(a)
    dil = list(a[4]) if len(a) > 4 else [1, 1]
    need(all(d == 1 for d in dil), "a dilated max pool")
    if a[5] if len(a) > 5 else False:
        pad = _ceil_pads(a[0], kernel, stride, pad)
    out = cx.op("maxpool2d", [a[0]], {"kernel": kernel, "stride": stride, "padding": pad})
    return (out, None) if cx.target_name(n) == "max_pool2d_with_indices" else out


@converter("avg_pool2d")
def _avgpool(cx, n, a, kw):
    kernel, stride, pad = _pool_args(a)
    need(not (a[4] if len(a) > 4 else False), "avg pool with ceil_mode")
    cip = a[5] if len(a) > 5 else True
    need((a[6] if len(a) > 6 else None) is None, "avg pool with divisor_override")
    return cx.op("avgpool2d", [a[0]], {"kernel": kernel, "stride": stride, "padding": pad,
                                       "count_include_pad": int(bool(cip))})


@converter("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def _adaptive_avg(cx, n, a, kw):
    x, size = a[0], list(a[1])
    size = size * 2 if len(size) == 1 else size
    if size == [1, 1]:
        return cx.op("global_avgpool", [x])
    hw = x.shape[2:]
    need(all(isinstance(d, int) for d in hw), "adaptive average pool over a symbolic size")
    if hw == size:
        return x
    if all(d % o == 0 for d, o in zip(hw, size)):  # equal windows: a plain average pool
        k = [d // o for d, o in zip(hw, size)]
        return cx.op("avgpool2d", [x], {"kernel": k, "stride": k})
    if hw == [1, 1]:  # every window is the one pixel
        return cx.op("expand", [x], {"shape": cx.out_shape(n)})
    raise Unsupported(f"adaptive average pool from {hw} to {size} (unequal windows)")


# ---- movement
@converter("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten", "view_copy",
           "_reshape_alias", "expand_dims")
def _reshape(cx, n, a, kw):
    return cx.op("reshape", [a[0]], {"shape": cx.out_shape(n)})


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
    return cx.op("expand", [a[0]], {"shape": cx.out_shape(n)})


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


@converter("slice")
def _slice(cx, n, a, kw):
    x = a[0]
    dim = int(a[1]) if len(a) > 1 else 0
    start = a[2] if len(a) > 2 and a[2] is not None else 0
    end = a[3] if len(a) > 3 and a[3] is not None else 2 ** 62
    step = a[4] if len(a) > 4 else 1
    need(all(isinstance(v, int) for v in (start, end, step)), "a slice with symbolic bounds")
    size = x.shape[_axis(dim, len(x.shape))]
    if start == 0 and step == 1 and (end >= 2 ** 62 or (isinstance(size, int) and end >= size)):
        return x
    return cx.op("slice", [x], {"starts": [start], "ends": [min(end, 2 ** 62)], "axes": [dim],
                                "steps": [step]})


@converter("select")
def _select(cx, n, a, kw):
    x, dim, idx = a[0], int(a[1]), a[2]
    need(isinstance(idx, int), "select with a symbolic index")
    s = cx.op("slice", [x], {"starts": [idx], "ends": [idx + 1 if idx != -1 else 2 ** 62],
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


@converter("index")
def _index(cx, n, a, kw):
    idx = list(a[1])
    used = [i for i, t in enumerate(idx) if t is not None]
    need(len(used) == 1, "indexing with several index tensors")
    k = used[0]
    need(cx.dtype_of_tensor(idx[k]) in ("i32", "i64"), "indexing with a boolean mask")
    return cx.op("gather", [a[0], idx[k]], {"axis": k})


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
    return cx.op("reshape", [a[0]], {"shape": size})
