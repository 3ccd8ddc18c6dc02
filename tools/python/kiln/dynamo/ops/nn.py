"""Contractions, attention, normalizations, reductions and pools."""
import math

from ..registry import CONVERTERS, Unsupported, _axis, converter, need  # noqa: F401


# ---- contractions
@converter("convolution")
def _convolution(cx, n, a, kw):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = a[:9]
    if len(x.shape) == 3 and not transposed:
        return _conv1d(cx, n, x, w, b, stride, padding, dilation, groups)
    need(len(x.shape) == 4, f"a {len(x.shape) - 2}-D convolution (kiln has 2-D ones)")
    ins = [x, w] + ([b] if b is not None else [])
    attrs = {"stride": list(stride), "padding": list(padding), "dilation": list(dilation),
             "groups": int(groups)}
    if transposed:
        attrs["output_padding"] = list(output_padding)
        return cx.op("conv_transpose2d", ins, attrs)
    need(not any(output_padding), "output_padding on a forward convolution")
    return cx.op("conv2d", ins, attrs)


def _conv1d(cx, n, x, w, b, stride, padding, dilation, groups):
    """A 1-D convolution (Whisper's stem) as a 2-D one over [N, C, 1, L]: the filter gets a
    unit height (a constant filter is reshaped here, so that kiln's passes still see a constant)."""
    k, cg, r = w.shape
    wn = n.args[1]
    value = cx.constants.get(wn.name) if hasattr(wn, "name") else None
    if value is not None:
        w4 = cx.g.constant(f"{wn.name}_2d", value.detach().cpu().unsqueeze(2), cx.dtype_of(wn))
    else:
        w4 = cx.op("reshape", [w], {"shape": [k, cg, 1, r]})
    nb, c, length = x.shape
    x4 = cx.op("reshape", [x], {"shape": [nb, c, 1, length]})
    attrs = {"stride": [1, int(stride[0])], "padding": [0, int(padding[0])],
             "dilation": [1, int(dilation[0])], "groups": int(groups)}
    y = cx.op("conv2d", [x4, w4] + ([b] if b is not None else []), attrs)
    return cx.op("reshape", [y], {"shape": cx.out_shape(n)})


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


@converter("linalg_vector_norm")
def _vector_norm(cx, n, a, kw):
    """The 2-norm (F.normalize, cosine attention) is kiln's reduce_l2. Core ATen's decomposition
    takes the other orders apart (abs, sum, amax) before they get here."""
    order = a[1] if len(a) > 1 else kw.get("ord", 2)
    need(order == 2, f"a vector norm of order {order} (kiln has the 2-norm)")
    need(kw.get("dtype") is None, "a vector norm with a dtype")
    dims = a[2] if len(a) > 2 else kw.get("dim")
    dims = [] if dims is None else [dims] if isinstance(dims, int) else list(dims)
    keep = a[3] if len(a) > 3 else kw.get("keepdim", False)
    return cx.op("reduce_l2", [a[0]], {"axes": dims, "keepdims": int(bool(keep))})


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
