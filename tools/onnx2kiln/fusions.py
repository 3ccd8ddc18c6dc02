"""Pattern fusions: exporter idioms that become one kiln node.

A fusion registered for an op is tried when a node of that op is reached (its inputs are
converted by then); a match emits one kiln node defining the pattern's last output and marks the
later nodes of the pattern as taken (cx.skip). Earlier nodes that only fed the pattern are dropped
by prune(). The gelu patterns start in the middle (at the Erf or Tanh), so a pre-pass finds them
before conversion and registers what to emit at the last node (cx.replace).

Every intermediate value of a pattern must have no other use (single_consumer).
"""
import math

import numpy as np

from .ops.norms import norm_eps
from .registry import fusion
from .shapes import mm_shape


def prepass(cx):
    for n in cx.g.node:
        if n.op_type == "Erf":
            match_gelu(cx, n)
        elif n.op_type == "Tanh":
            match_gelu_tanh(cx, n)


# ------------------------------------------------------------------------------ gelu

def _gelu_input(cx, d):
    """x when node d computes x / sqrt(2) or x * (1/sqrt(2)) (either operand order), else None."""
    if d.op_type == "Div" and cx.scalar_is(d.input[1], math.sqrt(2)):
        return d.input[0]
    x = None
    if d.op_type == "Mul":
        for i in (0, 1):
            if cx.scalar_is(d.input[1 - i], 1 / math.sqrt(2)):
                x = d.input[i]
    return x


def _gelu_tail(cx, x, a, m1):
    """The last node of x * (1 + erf) * 0.5 after Add `a` and its Mul `m1`, in any of the three
    nestings, with the extra node of the (x * 0.5) * (1 + erf) form; (None, None) if no match."""
    o = cx.other(m1, a.output[0])
    if o == x:  # x * (1 + erf) * 0.5
        m2 = cx.single_consumer(m1.output[0], {"Mul"})
        if m2 is not None and cx.scalar_is(cx.other(m2, m1.output[0]), 0.5):
            return m2, None
    elif cx.scalar_is(o, 0.5):  # x * ((1 + erf) * 0.5)
        m2 = cx.single_consumer(m1.output[0], {"Mul"})
        if m2 is not None and cx.other(m2, m1.output[0]) == x:
            return m2, None
    else:  # (x * 0.5) * (1 + erf)
        h = cx.producer(o)
        if (h is not None and h.op_type == "Mul" and cx.single_consumer(o, {"Mul"}) is m1
                and cx.other(h, x) is not None and cx.scalar_is(cx.other(h, x), 0.5)):
            return m1, h
    return None, None


def match_gelu(cx, erf):
    """x * 0.5 * (1 + erf(x / sqrt(2)))  =>  gelu (approximate none)."""
    d = cx.producer(erf.input[0])
    if d is None or cx.single_consumer(erf.input[0], {"Erf"}) is None:
        return
    x = _gelu_input(cx, d)
    if x is None:
        return
    a = cx.single_consumer(erf.output[0], {"Add"})
    if a is None or not cx.scalar_is(cx.other(a, erf.output[0]), 1.0):
        return
    m1 = cx.single_consumer(a.output[0], {"Mul"})
    if m1 is None:
        return
    final, half = _gelu_tail(cx, x, a, m1)
    if final is None:
        return
    chain = [d, erf, a, m1] + ([half] if half is not None else [])
    if final is not m1:
        chain.append(final)
    _register_gelu(cx, x, chain, final, "none")


def _register_gelu(cx, x, chain, final, approximate):
    """Every node of the matched chain but its last taken; the last emits gelu(x)."""
    for n in chain:
        if n is not final:
            cx.skip.add(id(n))

    def emit_gelu(cx, n):
        cx.emit(n, "gelu", [cx.act(n, x)], {"approximate": approximate}, out=n.output[0])
    cx.replace[id(final)] = emit_gelu


def _scaled(cx, node, v):
    """The other operand of Mul `node` when one operand is the scalar v, else None."""
    if node is None or node.op_type != "Mul":
        return None
    for i in (0, 1):
        if cx.scalar_is(node.input[1 - i], v):
            return node.input[i]
    return None


def _tanh_gelu_input(cx, u):
    """(x, nodes) when node u computes sqrt(2/pi) * (x + 0.044715 * x^3) (either operand order,
    the cube as Pow(x, 3)), else (None, None): HF's NewGELUActivation / gelu_new as exported."""
    r_out = _scaled(cx, u, math.sqrt(2 / math.pi))
    r = cx.producer(r_out) if r_out is not None else None
    if r is None or r.op_type != "Add" or cx.single_consumer(r_out, {"Mul"}) is not u:
        return None, None
    for j in (0, 1):
        x, q_out = r.input[j], r.input[1 - j]
        q = cx.producer(q_out)
        p_out = _scaled(cx, q, 0.044715)
        if p_out is None or cx.single_consumer(q_out, {"Add"}) is not r:
            continue
        p = cx.producer(p_out)
        if (p is not None and p.op_type == "Pow" and p.input[0] == x
                and cx.scalar_is(p.input[1], 3.0) and cx.single_consumer(p_out, {"Mul"}) is q):
            return x, [p, q, r, u]
    return None, None


def match_gelu_tanh(cx, tanh):
    """x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  =>  gelu (approximate tanh), so the
    kernel computes one fast sigmoid instead of powf and tanhf (GPT-2's MLP)."""
    u = cx.producer(tanh.input[0])
    if u is None or cx.single_consumer(tanh.input[0], {"Tanh"}) is None:
        return
    x, inner = _tanh_gelu_input(cx, u)
    if x is None:
        return
    a = cx.single_consumer(tanh.output[0], {"Add"})
    if a is None or not cx.scalar_is(cx.other(a, tanh.output[0]), 1.0):
        return
    m1 = cx.single_consumer(a.output[0], {"Mul"})
    if m1 is None:
        return
    final, half = _gelu_tail(cx, x, a, m1)
    if final is None:
        return
    chain = inner + [tanh, a, m1] + ([half] if half is not None else [])
    if final is not m1:
        chain.append(final)
    _register_gelu(cx, x, chain, final, "tanh")


# ------------------------------------------------------------------------------ groupnorm

def _channel_vector(cx, t, c, rank):
    """A constant broadcasting as one value per channel (dim 1) of a rank-`rank` tensor:
    shape [C, 1, ..., 1] (rank-1 dims) or [1, C, 1, ..., 1]. Returns it as [C] or None."""
    a = cx.plain_const(t)
    if a is None or a.size != c:
        return None
    if a.ndim == rank - 1 and a.shape[0] == c:
        return a.reshape(c)
    if a.ndim == rank and a.shape[0] == 1 and a.shape[1] == c:
        return a.reshape(c)
    return None


def _grouping_reshape(cx, n):
    """(x, groups) when n's input is Reshape(x, [0 or N, G, -1]) of a [N, C, ...] x with C % G
    == 0, and n normalizes with scale 1 and bias 0; else None."""
    r1 = cx.producer(n.input[0])
    if r1 is None or r1.op_type != "Reshape" or r1.input[0] not in cx.tmap:
        return None
    x = r1.input[0]
    s = cx.shp(cx.tmap[x])
    tgt = cx.plain_const(r1.input[1])
    if s is None or len(s) < 3 or not isinstance(s[1], int) or tgt is None or tgt.size != 3:
        return None
    groups = int(tgt.flatten()[1])
    if tgt.flatten()[2] != -1 or groups <= 0 or s[1] % groups:
        return None
    if tgt.flatten()[0] != 0 and tgt.flatten()[0] != s[0]:
        return None
    scale, bias = cx.plain_const(n.input[1]), cx.plain_const(n.input[2])
    if scale is None or bias is None or not (np.all(scale == 1) and np.all(bias == 0)):
        return None
    return x, groups


def _affine_tail(cx, r2, c, rank):
    """The Mul(w[C,1,1]) -> Add(b[C,1,1]) after the back-reshape r2: ([mul, add], [w, b]), or
    ([], []) when it is not there."""
    mul = cx.single_consumer(r2.output[0], {"Mul"})
    if mul is None:
        return [], []
    w = _channel_vector(cx, cx.other(mul, r2.output[0]), c, rank)
    add = cx.single_consumer(mul.output[0], {"Add"}) if w is not None else None
    b = _channel_vector(cx, cx.other(add, mul.output[0]), c, rank) if add else None
    if b is None:
        return [], []
    return [mul, add], [w, b]


@fusion("InstanceNormalization")
def groupnorm_from_instancenorm(cx, n):
    """torch's GroupNorm export: Reshape(x, [0, G, -1]) -> InstanceNormalization(ones, zeros)
    -> Reshape(., Shape(x)) [-> Mul(w[C,1,1]) -> Add(b[C,1,1])]  =>  groupnorm(G)."""
    m = _grouping_reshape(cx, n)
    if m is None:
        return False
    x, groups = m
    xt = cx.tmap[x]
    s = cx.shp(xt)
    r2 = cx.single_consumer(n.output[0], {"Reshape"})
    if r2 is None:
        return False
    sh = cx.producer(r2.input[1])
    back = cx.plain_const(r2.input[1])
    restores = sh is not None and sh.op_type == "Shape" and sh.input[0] == x and not sh.attribute
    if not restores and not (back is not None and back.tolist() == s):
        return False
    tail, params = _affine_tail(cx, r2, s[1], len(s))
    chain = [r2] + tail
    eps = norm_eps(cx, n, cx.attrs(n))
    dt = cx.dtype[xt]
    ins = [xt]
    for p, what in zip(params, ("scale", "bias")):
        key = cx.add_const(f"{n.name or 'groupnorm'}_{what}", p)
        ins.append(cx.materialize(n, key, dt))
    for m in chain:
        cx.skip.add(id(m))
    cx.emit(n, "groupnorm", ins, {"groups": groups, "eps": eps}, out=chain[-1].output[0], shape=s)
    return True


# ------------------------------------------------------------------------------ silu, linear

@fusion("Sigmoid")
def silu(cx, n):
    """x * sigmoid(x) (either operand order)  =>  silu."""
    x = n.input[0]
    m = cx.single_consumer(n.output[0], {"Mul"})
    if m is None or cx.other(m, n.output[0]) != x or x not in cx.tmap:
        return False
    cx.skip.add(id(m))
    cx.emit(m, "silu", [cx.tmap[x]], out=m.output[0])
    return True


@fusion("HardSigmoid")
def hardswish(cx, n):
    """x * HardSigmoid(x, alpha=1/6, beta=0.5) (either operand order)  =>  hardswish (torch's
    Hardswish export before opset 14)."""
    x = n.input[0]
    at = cx.attrs(n)
    if (abs(float(at.get("alpha", 0.2)) - 1 / 6) > 1e-6
            or abs(float(at.get("beta", 0.5)) - 0.5) > 1e-6):
        return False
    m = cx.single_consumer(n.output[0], {"Mul"})
    if m is None or cx.other(m, n.output[0]) != x or x not in cx.tmap:
        return False
    cx.skip.add(id(m))
    cx.emit(m, "hardswish", [cx.tmap[x]], out=m.output[0])
    return True


def _operand_shape(cx, t):
    return cx.shp(cx.tmap[t]) if t in cx.tmap else list(np.shape(cx.consts.get(t, [])))


@fusion("MatMul")
def matmul_bias(cx, n):
    """MatMul(a, b) -> Add(., bias[N])  =>  matmul with bias (torch's Linear on 3-D input)."""
    add = cx.single_consumer(n.output[0], {"Add"})
    if add is None:
        return False
    bias = cx.plain_const(cx.other(add, n.output[0]))
    a, b = n.input
    sa, sb = _operand_shape(cx, a), _operand_shape(cx, b)
    if bias is None or sa is None or sb is None or len(sa) < 2 or len(sb) < 2:
        return False
    ncols = sb[-1]
    rank = max(len(sa), len(sb))
    if not isinstance(ncols, int) or bias.size != ncols or bias.ndim > rank or (
            bias.ndim and bias.shape[-1] != ncols):
        return False
    dt = cx.act_dtype(a, b)
    at_, bt_ = cx.act(n, a, dt), cx.act(n, b, dt)
    key = cx.add_const(cx.other(add, n.output[0]) + "_vec", bias.reshape(ncols))
    cx.skip.add(id(add))
    cx.emit(n, "matmul", [at_, bt_, cx.materialize(n, key, dt)], out=add.output[0],
            shape=mm_shape(cx.shp(at_), cx.shp(bt_)))
    return True
