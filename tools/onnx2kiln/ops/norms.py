"""Normalizations: BatchNormalization, LayerNormalization, InstanceNormalization and
GroupNormalization (torch's opset <= 17 GroupNorm idiom is a fusion, see fusions.py)."""
import math

import numpy as np

from ..registry import converter


def norm_eps(cx, n, at):
    """The epsilon attribute (default 1e-5): finite and >= 0, as kiln's norms take it (ONNX
    names no bound; onnxruntime computes NaN from a negative one where the variance is small)."""
    eps = float(at.get("epsilon", 1e-5))
    if not (math.isfinite(eps) and eps >= 0):
        cx.fail(n, f"epsilon {eps}: kiln's norms need a finite epsilon >= 0")
    return eps


def _params(cx, n, names, dt):
    """The node's parameter inputs (skipping empty optional ones) as kiln tensors in dtype dt."""
    return [cx.act(n, t, dt) for t in names if t]


@converter("BatchNormalization")
def batchnorm(cx, n, at):
    """Inference form: scale, bias, mean, var; the running-statistics outputs must be unused."""
    if cx.flag(n, at, "training_mode", 0):
        cx.fail(n, "training_mode=1 is not supported (inference only)")
    cx.no_extra_outputs(n)
    xt = cx.act(n, n.input[0])
    ps = [cx.act(n, t, cx.dtype[xt]) for t in n.input[1:5]]
    cx.emit(n, "batchnorm", [xt] + ps, {"eps": norm_eps(cx, n, at)}, out=n.output[0])


def _layernorm_param(cx, n, t, what, s, axis):
    """A constant scale or bias must have the normalized dims s[axis:] (leading 1s are dropped;
    no constant has a dynamic dim): kiln's layernorm takes no other shape, and onnxruntime
    broadcasts some it should refuse.
    Returns the ONNX tensor to use (a reshaped copy when leading 1s were dropped)."""
    v = cx.plain_const(t)
    if v is None or s is None or not -len(s) <= axis < len(s):
        return t
    want = list(s[axis if axis >= 0 else axis + len(s):])
    have = list(v.shape)
    while len(have) > len(want) and have[0] == 1:
        have = have[1:]
    if len(have) != len(want) or any(h != w for h, w in zip(have, want)):
        cx.fail(n, f"{what} '{t}' has shape {list(v.shape)}; expected the normalized dims {want}")
    return t if have == list(v.shape) else cx.add_const(t + "_flat", v.reshape(have))


@converter("LayerNormalization")
def layernorm(cx, n, at):
    """Over the dims from `axis` on, optional bias; Mean/InvStdDev outputs must be unused."""
    cx.no_extra_outputs(n)
    xt = cx.act(n, n.input[0])
    params = [_layernorm_param(cx, n, t, what, cx.shp(xt), int(at.get("axis", -1)))
              for t, what in zip(n.input[1:3], ("scale", "bias"))]
    ins = [xt] + _params(cx, n, params, cx.dtype[xt])
    cx.emit(n, "layernorm", ins,
            {"axis": int(at.get("axis", -1)), "eps": norm_eps(cx, n, at)}, out=n.output[0])


@converter("InstanceNormalization")
def instancenorm(cx, n, at):
    xt = cx.act(n, n.input[0])
    ins = [xt] + _params(cx, n, n.input[1:3], cx.dtype[xt])
    cx.emit(n, "instancenorm", ins, {"eps": norm_eps(cx, n, at)}, out=n.output[0])


@converter("GroupNormalization")
def groupnorm(cx, n, at):
    """Opset 18 gives scale and bias per group (repeated here to per channel), opset 21 per
    channel; kiln takes them per channel."""
    xt = cx.act(n, n.input[0])
    dt = cx.dtype[xt]
    s = cx.shp(xt)
    groups = int(at["num_groups"])
    if cx.rank(n, xt) < 2:
        cx.fail(n, f"the input has rank {cx.rank(n, xt)}; expected [N, C, ...]")
    c = s[1]
    if not isinstance(c, int):
        cx.fail(n, "needs a static channel count")
    if groups < 1 or c % groups:
        cx.fail(n, f"num_groups {groups}: must be >= 1 and divide the channel count {c}")
    ins = [xt]
    for t, what in zip(n.input[1:3], ("scale", "bias")):
        v = np.asarray(cx.const(n, t, what), dtype=np.float64).reshape(-1)
        if v.size == c:
            per_channel = v
        elif v.size == groups:
            per_channel = np.repeat(v, c // groups)
        else:
            cx.fail(n, f"{what} has {v.size} values; expected {c} (channels) or {groups} "
                       f"(groups)")
        key = cx.add_const(t + "_per_channel", per_channel)
        ins.append(cx.materialize(n, key, dt))
    cx.emit(n, "groupnorm", ins, {"groups": groups, "eps": norm_eps(cx, n, at)}, out=n.output[0])
