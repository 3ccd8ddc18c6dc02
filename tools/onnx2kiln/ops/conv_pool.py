"""Windowed ops: Conv (1-D and 2-D), ConvTranspose (2-D), MaxPool, AveragePool, the global pools, and Pad (which
folds into the padding of the conv it feeds when it can)."""
import math

import numpy as np

from ..model import str_attr
from ..registry import converter
from ..shapes import window_dims as _window_dims


INT32_MAX = 2**31 - 1


def _ints_attr(cx, n, at, key, default, count, least):
    """Integer-list attribute `key` (default `default`) with `count` entries, each >= `least`:
    the ONNX spec allows nothing else, and kiln would read any other value differently."""
    v = [int(x) for x in at.get(key, default)]
    if len(v) != count:
        cx.fail(n, f"{key} {v}: expected {count} values (one per spatial dim"
                   f"{', at the beginning and the end' if key == 'pads' else ''})")
    bad = [x for x in v if x < least]
    if bad:
        what = "negative" if least == 0 else ("zero or negative" if least == 1 else "too small")
        cx.fail(n, f"{key} {v}: {what} values are not allowed (each must be >= {least})")
    if any(x > INT32_MAX for x in v):
        cx.fail(n, f"{key} {v}: values above {INT32_MAX} are not supported (kiln's attributes "
                   f"are 32-bit)")
    return v


def window_pads(cx, n, at, in_sizes, kernel, strides, dils):
    """[begin..., end...] padding from `pads` or `auto_pad` (SAME_UPPER/SAME_LOWER need static
    spatial dims; SAME_UPPER puts the odd pixel at the end)."""
    nsp = len(kernel)
    auto = str_attr(at, "auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        return _ints_attr(cx, n, at, "pads", [0] * (2 * nsp), 2 * nsp, 0)
    if auto == "VALID":
        return [0] * (2 * nsp)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        cx.fail(n, f"auto_pad '{auto}' is not supported")
    begin, end = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dils):
        if not isinstance(size, int):
            cx.fail(n, f"auto_pad {auto} needs static spatial dims, found {in_sizes}")
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


def window_dims(cx, n, sizes, pads, kernel, strides, dils):
    """The output sizes of a conv or pool window; a static size below 1 (the window does not fit
    the padded input: onnxruntime gives an empty tensor, which kiln has no form for) is
    refused."""
    out = _window_dims(sizes, pads, kernel, strides, dils)
    nsp = len(kernel)
    for i, o in enumerate(out):
        if o is not None and o < 1:
            cx.fail(n, f"the window (kernel {kernel[i]}, dilation {dils[i]}) does not fit spatial "
                       f"dim {i} of size {sizes[i]} with padding {pads[i]} + {pads[nsp + i]}: "
                       f"the output would be empty")
    return out


# ------------------------------------------------------------------------------ conv

def _conv_filter(cx, n, r):
    """The filter: a constant of rank r ([K, C/group, kH, kW], or [K, C/group, k] for 1-D)."""
    w = cx.plain_const(n.input[1])
    if w is None:
        cx.fail(n, "the filter must be a constant")
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != r:
        form = "[K, C/group, kH, kW]" if r == 4 else "[K, C/group, k]"
        cx.fail(n, f"the filter '{n.input[1]}' has shape {list(w.shape)}; a {r - 2}-D conv "
                   f"needs a rank-{r} filter {form}")
    if 0 in w.shape:
        cx.fail(n, f"the filter '{n.input[1]}' has shape {list(w.shape)}: an empty dim")
    return w


def _conv_attrs(cx, n, at, s, w):
    """kernel, strides, dilations and group of a conv, checked against the spec and the filter."""
    nsp = w.ndim - 2
    kernel = _ints_attr(cx, n, at, "kernel_shape", w.shape[2:], nsp, 1)
    if kernel != list(w.shape[2:]):
        cx.fail(n, f"kernel_shape {kernel} differs from the filter's spatial dims "
                   f"{list(w.shape[2:])}")
    strides = _ints_attr(cx, n, at, "strides", [1] * nsp, nsp, 1)
    dils = _ints_attr(cx, n, at, "dilations", [1] * nsp, nsp, 1)
    groups = int(at.get("group", 1))
    k, cg = int(w.shape[0]), int(w.shape[1])
    if groups < 1 or k % groups:
        cx.fail(n, f"group {groups}: must be >= 1 and divide the filter count {k}")
    if isinstance(s[1], int) and s[1] != cg * groups:
        cx.fail(n, f"the input has {s[1]} channels but the filter expects {cg} x group {groups}"
                   f" = {cg * groups}")
    return kernel, strides, dils, groups


@converter("Conv")
def conv(cx, n, at):
    """2-D: conv2d with pads [x1_begin, x2_begin, x1_end, x2_end] as kiln's [top, left, bottom,
    right]. 1-D: a conv2d of height 1 between reshapes. The filter must be a constant."""
    xt = cx.act(n, n.input[0])
    dt = cx.dtype[xt]
    s = cx.shp(xt)
    r = cx.rank(n, xt)
    if r not in (3, 4):
        cx.fail(n, f"only 1-D and 2-D convolutions are supported, found input rank {r}")
    w = _conv_filter(cx, n, r)
    kernel, strides, dils, groups = _conv_attrs(cx, n, at, s, w)
    pads = window_pads(cx, n, at, s[2:], kernel, strides, dils)
    if id(n) in cx.extra_pads:  # a Pad folded into this conv
        pads = [p + e for p, e in zip(pads, cx.extra_pads[id(n)])]
    bias = cx.act(n, n.input[2], dt) if len(n.input) > 2 and n.input[2] else None
    out_sizes = window_dims(cx, n, s[2:], pads, kernel, strides, dils)
    if r == 3:
        _conv1d(cx, n, xt, w, bias, s, pads, strides, dils, groups, out_sizes[0])
        return
    wt = cx.materialize(n, n.input[1], dt)
    if cx.layout == "NHWC":
        cx.constants[wt]["layout"] = "NHWC"
    cx.emit(n, "conv2d", [xt, wt] + ([bias] if bias else []),
            {"stride": strides, "padding": pads, "dilation": dils, "groups": groups},
            out=n.output[0], shape=[s[0], int(w.shape[0])] + out_sizes)


def _conv1d(cx, n, xt, w, bias, s, pads, strides, dils, groups, lo):
    """[N, C, L] -> [N, C, 1, L], filter [K, C/g, 1, k], conv2d, then back to [N, K, L']."""
    x4 = cx.emit(n, "reshape", [xt], {"shape": [0, 0, 1, -1]}, shape=[s[0], s[1], 1, s[2]],
                 suffix="to2d")
    key = cx.add_const(n.input[1] + "_2d", w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]))
    wt = cx.materialize(n, key, cx.dtype[xt])
    c = cx.emit(n, "conv2d", [x4, wt] + ([bias] if bias else []),
                {"stride": [1, strides[0]], "padding": [0, pads[0], 0, pads[1]],
                 "dilation": [1, dils[0]], "groups": groups},
                shape=[s[0], int(w.shape[0]), 1, lo])
    cx.emit(n, "reshape", [c], {"shape": [0, 0, -1]}, out=n.output[0],
            shape=[s[0], int(w.shape[0]), lo], suffix="to1d")


# ------------------------------------------------------------------------------ conv transpose

def _transpose_pads(cx, n, at, s, kernel, strides, dils, out_pad):
    """[top, left, bottom, right] of a ConvTranspose: `pads`, or from `output_shape` /
    SAME_UPPER / SAME_LOWER (output = input * stride) as the spec and onnxruntime compute them:
    total = (in - 1) * stride + output_padding + (k - 1) * dilation + 1 - out, the odd pixel at
    the end for SAME_UPPER, at the beginning otherwise."""
    auto = str_attr(at, "auto_pad", "NOTSET")
    if auto not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        cx.fail(n, f"auto_pad '{auto}' is not supported")
    want = at.get("output_shape")
    if want is not None:
        want = [int(v) for v in want]
        if len(want) == 4:  # [N, C, H, W] in some exporters
            want = want[2:]
        if len(want) != 2:
            cx.fail(n, f"output_shape {want}: expected 2 values (H, W)")
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        want = [None, None]
    else:
        if auto == "VALID":
            return [0, 0, 0, 0]
        return _ints_attr(cx, n, at, "pads", [0] * 4, 4, 0)
    begin, end = [], []
    for i in range(2):
        size = s[2 + i]
        if not isinstance(size, int):
            cx.fail(n, f"output_shape / auto_pad {auto} need static spatial dims, found {s[2:]}")
        out = want[i] if want[i] is not None else size * strides[i]
        total = (size - 1) * strides[i] + out_pad[i] + (kernel[i] - 1) * dils[i] + 1 - out
        if total < 0:
            cx.fail(n, f"output size {out} of spatial dim {i} is larger than the transposed "
                       f"convolution makes ({out + total}); raise output_padding instead")
        small, big = total // 2, total - total // 2
        upper = auto == "SAME_UPPER"
        begin.append(small if upper else big)
        end.append(big if upper else small)
    return begin + end


@converter("ConvTranspose")
def conv_transpose(cx, n, at):
    """2-D: conv_transpose2d with the filter [C, K/group, kH, kW] (a constant) and pads
    [x1_begin, x2_begin, x1_end, x2_end] as kiln's [top, left, bottom, right]."""
    xt = cx.act(n, n.input[0])
    dt = cx.dtype[xt]
    s = cx.shp(xt)
    if cx.rank(n, xt) != 4:
        cx.fail(n, f"only 2-D transposed convolutions are supported, found input rank "
                   f"{cx.rank(n, xt)}")
    w = _conv_filter(cx, n, 4)
    kernel = _ints_attr(cx, n, at, "kernel_shape", w.shape[2:], 2, 1)
    if kernel != list(w.shape[2:]):
        cx.fail(n, f"kernel_shape {kernel} differs from the filter's spatial dims "
                   f"{list(w.shape[2:])}")
    strides = _ints_attr(cx, n, at, "strides", [1, 1], 2, 1)
    dils = _ints_attr(cx, n, at, "dilations", [1, 1], 2, 1)
    out_pad = _ints_attr(cx, n, at, "output_padding", [0, 0], 2, 0)
    groups = int(at.get("group", 1))
    c, kg = int(w.shape[0]), int(w.shape[1])
    if groups < 1 or c % groups:
        cx.fail(n, f"group {groups}: must be >= 1 and divide the filter's {c} input channels")
    if isinstance(s[1], int) and s[1] != c:
        cx.fail(n, f"the input has {s[1]} channels but the filter '{n.input[1]}' expects {c}")
    for i in range(2):
        if out_pad[i] >= strides[i] and out_pad[i] >= dils[i]:
            cx.fail(n, f"output_padding {out_pad}: each value must be smaller than the stride "
                       f"{strides} or the dilation {dils}")
    pads = _transpose_pads(cx, n, at, s, kernel, strides, dils, out_pad)
    out_sizes = []
    for i in range(2):
        size = s[2 + i]
        extra = dils[i] * (kernel[i] - 1) + out_pad[i] + 1 - pads[i] - pads[2 + i]
        if isinstance(size, int):
            o = (size - 1) * strides[i] + extra
            if o < 1:
                cx.fail(n, f"the padding {pads} crops spatial dim {i} to {o}: the output would "
                           f"be empty")
            out_sizes.append(o)
        else:
            out_sizes.append(None)
    bias = cx.act(n, n.input[2], dt) if len(n.input) > 2 and n.input[2] else None
    wt = cx.materialize(n, n.input[1], dt)
    cx.emit(n, "conv_transpose2d", [xt, wt] + ([bias] if bias else []),
            {"stride": strides, "padding": pads, "dilation": dils, "output_padding": out_pad,
             "groups": groups},
            out=n.output[0], shape=[s[0], kg * groups] + out_sizes)


# ------------------------------------------------------------------------------ pools

def _ceil_mode_pads(cx, n, s, kernel, strides, pads):
    """ceil_mode=1 as extra end padding: enough for one more window where ONNX has one."""
    for i in (0, 1):
        size = s[2 + i]
        if not isinstance(size, int):
            cx.fail(n, "ceil_mode=1 needs static spatial dims")
        span = size + pads[i] + pads[2 + i] - kernel[i]
        extra = (-span) % strides[i]
        # ONNX drops a last window that would start in the end padding.
        if extra and (span + extra) // strides[i] * strides[i] < size + pads[i]:
            pads[2 + i] += extra
    return pads


def pool(cx, n, at, kind):
    """2-D max and average pools over [N, C, H, W]; no dilations."""
    cx.no_extra_outputs(n)
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    if cx.rank(n, xt) != 4:
        cx.fail(n, f"only 2-D pooling ([N, C, H, W]) is supported, found rank "
                   f"{cx.rank(n, xt)}")
    kernel = _ints_attr(cx, n, at, "kernel_shape", [], 2, 1)
    strides = _ints_attr(cx, n, at, "strides", [1, 1], 2, 1)
    dils = _ints_attr(cx, n, at, "dilations", [1, 1], 2, 1)
    if dils != [1, 1]:
        cx.fail(n, f"dilations {dils} are not supported")
    pads = window_pads(cx, n, at, s[2:], kernel, strides, dils)
    if cx.flag(n, at, "ceil_mode", 0):
        if kind != "maxpool2d":
            cx.fail(n, "ceil_mode=1 is supported for MaxPool only")
        pads = _ceil_mode_pads(cx, n, s, kernel, strides, pads)
    attrs = {"kernel": kernel, "stride": strides, "padding": pads}
    if kind == "avgpool2d":
        attrs["count_include_pad"] = cx.flag(n, at, "count_include_pad", 0)
    cx.emit(n, kind, [xt], attrs, out=n.output[0],
            shape=[s[0], s[1]] + window_dims(cx, n, s[2:], pads, kernel, strides, [1, 1]))


@converter("MaxPool")
def maxpool(cx, n, at):
    pool(cx, n, at, "maxpool2d")


@converter("AveragePool")
def avgpool(cx, n, at):
    pool(cx, n, at, "avgpool2d")


@converter("GlobalAveragePool")
def global_avgpool(cx, n, at):
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    cx.emit(n, "global_avgpool", [xt], out=n.output[0],
            shape=s[:2] + [1] * (len(s) - 2) if s else None)


@converter("GlobalMaxPool")
def global_maxpool(cx, n, at):
    """reduce_max over the spatial dims, kept as 1."""
    xt = cx.act(n, n.input[0])
    s = cx.shp(xt)
    r = cx.rank(n, xt)
    cx.emit(n, "reduce_max", [xt], {"axes": list(range(2, r)), "keepdims": 1},
            out=n.output[0], shape=s[:2] + [1] * (r - 2))


# ------------------------------------------------------------------------------ pad

def _pad_spec(cx, n, at, r):
    """(mode, pads [begin..., end...] over all r dims, value) from attributes (opset < 11) or
    inputs (pads, constant_value, axes)."""
    mode = str_attr(at, "mode", "constant")
    if "pads" in at:
        return mode, list(at["pads"]), float(at.get("value", 0.0))
    pads = [int(v) for v in np.asarray(cx.const(n, n.input[1], "pads")).flatten()]
    cv = cx.plain_const(n.input[2]) if len(n.input) > 2 and n.input[2] else None
    value = float(cv.reshape(-1)[0]) if cv is not None and cv.size else 0.0
    if len(n.input) > 3 and n.input[3]:
        axes = [cx.axis(n, int(v), r, "axes entry")
                for v in np.asarray(cx.const(n, n.input[3], "axes")).flatten()]
        full = [0] * (2 * r)
        for i, ax in enumerate(axes):
            full[ax], full[r + ax] = pads[i], pads[len(axes) + i]
        pads = full
    return mode, pads, value


def _conv_taking_pad(cx, n, mode, pads, value, r):
    """The 2-D Conv (without auto_pad) that is the only use of this zero padding of H and W."""
    conv_node = cx.single_consumer(n.output[0], {"Conv"})
    ok = (mode == "constant" and value == 0.0 and r == 4 and len(pads) == 8
          and all(p >= 0 for p in pads) and pads[0] == pads[1] == pads[4] == pads[5] == 0
          and conv_node is not None and conv_node.input[0] == n.output[0])
    if ok and str_attr(cx.attrs(conv_node), "auto_pad", "NOTSET") in ("NOTSET", ""):
        return conv_node
    return None


@converter("Pad")
def pad(cx, n, at):
    """Zero padding of H and W whose only use is a 2-D Conv folds into the conv's padding; any
    other padding (constant, reflect or edge; no cropping, static padded dims) becomes kiln's
    `pad` op."""
    xt = cx.act(n, n.input[0])
    r = cx.rank(n, xt)
    mode, pads, value = _pad_spec(cx, n, at, r)
    conv_node = _conv_taking_pad(cx, n, mode, pads, value, r)
    if conv_node is not None:
        cx.extra_pads[id(conv_node)] = [pads[2], pads[3], pads[6], pads[7]]
        cx.tmap[n.output[0]] = xt
        return
    if mode not in ("constant", "reflect", "edge"):
        cx.fail(n, f"Pad mode '{mode}' is not supported (only 'constant', 'reflect' and 'edge')")
    if len(pads) != 2 * r or any(p < 0 for p in pads):
        cx.fail(n, f"Pad with pads {pads}: negative pads (cropping) are not supported")
    if any(p > INT32_MAX for p in pads):
        cx.fail(n, f"Pad with pads {pads}: values above {INT32_MAX} are not supported")
    s = cx.shp(xt)
    if s is None:
        cx.fail(n, "Pad needs a known input shape")
    out_shape = []
    for i, d in enumerate(s):
        if pads[i] == 0 and pads[r + i] == 0:
            out_shape.append(d)
        elif isinstance(d, int):
            out_shape.append(d + pads[i] + pads[r + i])
        else:
            cx.fail(n, f"Pad of dim {i} ({d}) is not supported: a symbolic dim can not grow")
    if math.isnan(value):
        cx.fail(n, "Pad with a NaN value is not supported")
    jvalue = value if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    attrs = {"pads": [int(p) for p in pads], "value": jvalue}
    if mode != "constant":  # reflect and edge read the input only; kiln's default is constant
        attrs = {"pads": attrs["pads"], "mode": mode}
    cx.emit(n, "pad", [xt], attrs, out=n.output[0], shape=out_shape)
