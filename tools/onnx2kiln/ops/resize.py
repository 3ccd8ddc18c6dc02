"""Resize (opset 10-21) and Upsample (opset 7-9): kiln's `resize` of the spatial dims of
[N, C, spatial...] (1 to 3 of them). The output size is `scales` or `sizes`, each a constant or a
folded shape computation (sizes may hold the input's own symbolic N: `Shape -> Slice -> Concat`
of N, C with a constant H, W); roi is ignored (it only matters to tf_crop_and_resize, refused)."""
import numpy as np

from ..registry import converter
from .movement import _known_shape

_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _given(n, i):
    return len(n.input) > i and bool(n.input[i])


def _scales_input(cx, n, i):
    """Constant scales input i as floats, or None when absent or empty."""
    if not _given(n, i):
        return None
    v = np.asarray(cx.const(n, n.input[i], "the scales"))
    if v.dtype == object:
        cx.fail(n, f"the scales {v.tolist()} are computed from run-time values")
    return [float(s) for s in v.astype(np.float32).flatten()] if v.size else None


def _sizes_input(cx, n, i):
    if not _given(n, i):
        return None
    v = np.asarray(cx.const(n, n.input[i], "the sizes")).flatten().tolist()
    if not v:
        return None
    if any(s is None for s in v):
        cx.fail(n, f"the sizes {v} hold dims unknown at conversion time")
    return [int(s) if isinstance(s, (int, np.integer)) else s for s in v]


def _full_rank(cx, n, at, vals, r, fill, what):
    """Values over opset 18's `axes` (a subset of the dims) spread to every dim."""
    if "axes" not in at:
        if len(vals) != r:
            cx.fail(n, f"{what} {vals}: expected {r} values (one per dim)")
        return list(vals)
    axes = [cx.axis(n, int(a), r, "axes entry") for a in at["axes"]]
    if len(set(axes)) != len(axes) or len(axes) != len(vals):
        cx.fail(n, f"axes {list(at['axes'])} do not match the {len(vals)} {what}")
    out = list(fill)
    for a, v in zip(axes, vals):
        out[a] = v
    return out


def _out_dims(s, scales):
    """floor(in * scale) in f32 (as onnxruntime); a symbolic dim stays only at scale 1."""
    out = []
    for d, sc in zip(s, scales):
        if isinstance(d, int):
            out.append(int(np.floor(np.float32(d) * np.float32(sc))))
        else:
            out.append(d if sc == 1.0 else None)
    return out


def _check_spatial_only(cx, n, s, scales, sizes):
    for d in (0, 1):
        what = "batch" if d == 0 else "channel"
        if scales is not None and scales[d] != 1.0:
            cx.fail(n, f"resizing the {what} dim (scale {scales[d]}) is not supported; only the "
                       f"spatial dims from dim 2 on resize")
        if sizes is not None and sizes[d] != s[d]:
            cx.fail(n, f"resizing the {what} dim ({s[d]} to {sizes[d]}) is not supported; only "
                       f"the spatial dims from dim 2 on resize")


def _emit(cx, n, xt, s, mode, coord, nearest, scales=None, sizes=None):
    if len(s) < 3 or len(s) > 5:
        cx.fail(n, f"resize of {s}: kiln resizes [N, C, spatial...] with 1 to 3 spatial dims")
    _check_spatial_only(cx, n, s, scales, sizes)
    if scales is not None:
        for sc in scales:
            if not np.isfinite(sc) or sc <= 0:
                cx.fail(n, f"the scales {scales} must be positive")
        out = _out_dims(s, scales)
        if any(isinstance(d, int) and d < 1 for d in out):
            cx.fail(n, f"the scales {scales} of {s} give an empty output {out}")
        attrs = {"scales": [float(v) for v in scales]}
    else:
        if any(isinstance(v, int) and v < 1 for v in sizes):
            cx.fail(n, f"the sizes {sizes} hold an empty dim")
        out = list(sizes)
        attrs = {"sizes": list(sizes)}
    if out == list(s) and (scales is None or all(v == 1.0 for v in scales)):
        cx.alias(n, xt)  # every dim onto itself
        return
    attrs.update({"mode": mode, "coordinate_transformation_mode": coord, "nearest_mode": nearest})
    cx.emit(n, "resize", [xt], attrs, out=n.output[0], shape=out)


def _legacy_nearest(cx, n, scales):
    """onnxruntime's nearest before Resize-11 (asymmetric): the source coordinate truncated when
    upsampling, rounded up when downsampling."""
    spatial = [v for v in scales[2:] if v != 1.0]
    if all(v > 1.0 for v in spatial):
        return "floor"
    if all(v < 1.0 for v in spatial):
        return "ceil"
    cx.fail(n, f"the scales {scales} up- and downsample at once (opset < 11 rounds them "
               f"differently); not supported")


def _legacy(cx, n, at, scales):
    from ..model import str_attr
    xt = cx.act(n, n.input[0])
    s = _known_shape(cx, n, xt)
    mode = str_attr(at, "mode", "nearest")
    if mode not in ("nearest", "linear"):
        cx.fail(n, f"unsupported resize mode '{mode}' (nearest and linear are)")
    if scales is None or len(scales) != len(s):
        cx.fail(n, f"expected {len(s)} scales (one per dim), found {scales}")
    nearest = _legacy_nearest(cx, n, scales) if mode == "nearest" else "floor"
    _emit(cx, n, xt, s, mode, "asymmetric", nearest, scales=scales)


@converter("Upsample")
def upsample(cx, n, at):
    """Opset 7: `scales` an attribute; opset 9: a constant input."""
    if "scales" in at:
        scales = [float(v) for v in at["scales"]]
    else:
        scales = _scales_input(cx, n, 1)
    _legacy(cx, n, at, scales)


@converter("Resize")
def resize(cx, n, at):
    from ..model import str_attr
    if cx.opset < 11:
        _legacy(cx, n, at, _scales_input(cx, n, 1))
        return
    xt = cx.act(n, n.input[0])
    s = _known_shape(cx, n, xt)
    mode = str_attr(at, "mode", "nearest")
    if mode not in ("nearest", "linear"):
        cx.fail(n, f"unsupported resize mode '{mode}' (nearest and linear are)")
    coord = str_attr(at, "coordinate_transformation_mode", "half_pixel")
    if coord not in _COORD_MODES:
        cx.fail(n, f"unsupported coordinate_transformation_mode '{coord}' "
                   f"({', '.join(_COORD_MODES)} are)")
    nearest = str_attr(at, "nearest_mode", "round_prefer_floor")
    if nearest not in _NEAREST_MODES:
        cx.fail(n, f"unknown nearest_mode '{nearest}'")
    for key in ("antialias", "exclude_outside"):
        if int(at.get(key, 0)) != 0:
            cx.fail(n, f"{key}={int(at[key])} is not supported (only 0)")
    policy = str_attr(at, "keep_aspect_ratio_policy", "stretch")
    scales, sizes = _scales_input(cx, n, 2), _sizes_input(cx, n, 3)
    if (scales is None) == (sizes is None):
        cx.fail(n, "expected exactly one of scales and sizes, found "
                   f"{'neither' if scales is None else 'both'}")
    if scales is not None:
        scales = _full_rank(cx, n, at, scales, len(s), [1.0] * len(s), "scales")
        _emit(cx, n, xt, s, mode, coord, nearest, scales=scales)
        return
    if policy != "stretch":
        cx.fail(n, f"keep_aspect_ratio_policy '{policy}' is not supported (only stretch)")
    sizes = _full_rank(cx, n, at, sizes, len(s), s, "sizes")
    _emit(cx, n, xt, s, mode, coord, nearest, sizes=sizes)
