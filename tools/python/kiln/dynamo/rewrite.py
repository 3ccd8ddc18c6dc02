"""FX rewrites before partitioning. The export path keeps a `_assert_tensor_metadata` node for
each dtype conversion (`x.to(dtype)`): a check of what the trace already fixed, dropped here.
aot_autograd lowers a linear layer on a [B, S, K] input to
view [B*S, K] -> addmm -> view [B, S, N]; kiln's matmul takes batch dims itself, and the views
around the 2-D contraction would stand between it and the ops after it (an activation, a
residual add) that kiln fuses into a contraction's epilogue. So the chain becomes
aten.matmul(x, w) (+ bias): the same values, runnable in eager PyTorch too. aten.matmul of
batched operands decomposes the same way: view [B*H, M, K] (after an expand) -> bmm -> view
[B, H, M, N]; it becomes aten.matmul over the batched operands again, so that a transposed
operand is read as such (no copy into the 3-D view) and kiln sees the batch dims."""
import torch

aten = torch.ops.aten
_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def drop_metadata_asserts(gm):
    """Erases aten._assert_tensor_metadata: it asserts the dtype and device that tracing saw,
    which dynamo's guards hold on every call; kiln has nothing to run for it."""
    op = getattr(aten, "_assert_tensor_metadata", None)
    if op is None:
        return
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is op.default and not n.users:
            gm.graph.erase_node(n)


def _shape(n):
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return list(v.shape) if isinstance(v, torch.Tensor) else None


def _finish(gm, count):
    """After `count` rewrites of gm's graph: the nodes they left unused go, the code follows."""
    if count:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return count


def _linear_chain(out_view):
    """(x, w, bias or None) when out_view is view(addmm|mm(view(x), w)) of a linear on x."""
    mm = out_view.args[0]
    if not isinstance(mm, torch.fx.Node) or len(mm.users) != 1:
        return None
    if mm.target is aten.addmm.default and not mm.kwargs and len(mm.args) == 3:
        bias, a, w = mm.args
    elif mm.target is aten.mm.default:
        bias, (a, w) = None, mm.args
    else:
        return None
    if not isinstance(a, torch.fx.Node) or a.target not in _VIEWS:
        return None
    x = a.args[0]
    xs, ws, outs = _shape(x), _shape(w), _shape(out_view)
    if xs is None or ws is None or outs is None or len(xs) < 3 or len(ws) != 2:
        return None
    if outs != xs[:-1] + [ws[1]]:
        return None
    if bias is not None and (_shape(bias) is None or len(_shape(bias)) != 1):
        return None
    return x, w, bias


def fold_linear_views(gm):
    """Rewrites every linear chain in place; returns how many."""
    count = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in _VIEWS:
            continue
        chain = _linear_chain(n)
        if chain is None:
            continue
        x, w, bias = chain
        with gm.graph.inserting_before(n):
            out = gm.graph.call_function(aten.matmul.default, (x, w))
            out.meta["val"] = n.meta["val"]
            if bias is not None:
                out = gm.graph.call_function(aten.add.Tensor, (out, bias))
                out.meta["val"] = n.meta["val"]
        n.replace_all_uses_with(out)
        count += 1
    return _finish(gm, count)


def _batched_operand(v, batch):
    """The [..., M, K] operand behind view [prod(batch), M, K] (of an expand to its own shape,
    or of the operand itself), else None."""
    if not isinstance(v, torch.fx.Node) or v.target not in _VIEWS or len(v.users) != 1:
        return None
    src = v.args[0]
    if isinstance(src, torch.fx.Node) and src.target is aten.expand.default and \
            len(src.users) == 1 and _shape(src) == _shape(src.args[0]):
        src = src.args[0]
    ss, vs = _shape(src), _shape(v)
    if ss is None or vs is None or len(ss) < 3 or ss[:-2] != batch or vs[1:] != ss[-2:]:
        return None
    return src


def fold_bmm_views(gm):
    """Rewrites view(bmm(view(a), view(b))) back into aten.matmul(a, b) in place; returns how
    many. Only where nothing broadcasts: the batch dims of a, b and the result agree."""
    count = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in _VIEWS:
            continue
        mm = n.args[0]
        if not isinstance(mm, torch.fx.Node) or mm.target is not aten.bmm.default or \
                len(mm.users) != 1:
            continue
        out = _shape(n)
        if out is None or len(out) < 4:
            continue
        batch = out[:-2]
        a, b = (_batched_operand(v, batch) for v in mm.args[:2])
        if a is None or b is None:
            continue
        with gm.graph.inserting_before(n):
            new = gm.graph.call_function(aten.matmul.default, (a, b))
        new.meta["val"] = n.meta["val"]
        n.replace_all_uses_with(new)
        count += 1
    return _finish(gm, count)


def _dtype(n):
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return getattr(v, "dtype", None)


def _is_cast(n):
    """A dtype conversion on the same device (x.to(dtype) in core ATen)."""
    if not (isinstance(n, torch.fx.Node) and n.op == "call_function" and
            n.target is aten._to_copy.default and len(n.args) == 1 and
            set(n.kwargs) <= {"dtype", "layout", "device"}):
        return False
    src = n.args[0].meta.get("val") if isinstance(n.args[0], torch.fx.Node) else None
    device = n.kwargs.get("device")
    if device is not None:
        device = torch.device(device)
        if src is None or device.type != src.device.type or \
                device.index not in (None, src.device.index):
            return False
    return n.kwargs.get("layout", torch.strided) == torch.strided


def _upcast_source(up):
    """The 16-bit tensor that `up` casts to f32 for its one reader, else None."""
    if not _is_cast(up) or len(up.users) != 1 or _dtype(up) != torch.float32:
        return None
    src = up.args[0]
    return src if _dtype(src) in (torch.float16, torch.bfloat16) else None


def drop_gather_upcasts(gm):
    """x.to(f32)[i, j].to(f16) is x[i, j] (a clone between them too): core ATen's nearest
    upsampling of a 16-bit tensor casts to f32 around its index, which moves the upsampled
    tensor twice more. A gather copies values, so it is exact in the narrow dtype. Rewrites in place; returns how many."""
    count = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in (aten.index.Tensor,
                                                       aten._unsafe_index.Tensor):
            continue
        src = _upcast_source(n.args[0])
        if src is None or not n.users:
            continue
        narrow = _dtype(src)
        chain = [n]  # the index, then clones of its value (a memory-format copy)
        while len(chain[-1].users) == 1 and next(iter(chain[-1].users)).target is \
                aten.clone.default:
            chain.append(next(iter(chain[-1].users)))
        downs = list(chain[-1].users)
        if not downs or not all(_is_cast(d) and _dtype(d) == narrow for d in downs):
            continue
        n.args = (src,) + tuple(n.args[1:])
        for c in chain:
            c.meta["val"] = c.meta["val"].to(narrow)
        for d in downs:
            d.replace_all_uses_with(chain[-1])
        count += 1
    return _finish(gm, count)


def drop_softmax_upcasts(gm):
    """x.to(f32).softmax(-1).to(f16) is kiln's softmax of x: its row-norm kernel computes in f32
    and rounds its output once, so the values are the same. Hugging Face's eager attention writes
    the upcast; without it the matmul -> scale -> softmax -> matmul chain is kiln's fused
    attention. Rewrites in place; returns how many."""
    count = 0
    for down in list(gm.graph.nodes):
        if not _is_cast(down):
            continue
        sm = down.args[0]
        if not isinstance(sm, torch.fx.Node) or sm.target is not aten._softmax.default or \
                len(sm.users) != 1 or sm.args[2]:
            continue
        src = _upcast_source(sm.args[0])
        if src is None or _dtype(down) != _dtype(src):
            continue
        sm.args = (src,) + tuple(sm.args[1:])
        sm.meta["val"] = down.meta["val"]
        down.replace_all_uses_with(sm)
        count += 1
    return _finish(gm, count)


# GPT-2's gelu_new (and BLOOM's, CodeGen's) writes the tanh approximation out:
# 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))). Eight pointwise ops in a
# contraction's epilogue cost the kernel more than kiln's one gelu (and pow takes the general
# path); matched from the tanh outwards, as onnx2kiln's fusion does for the same formula in ONNX.
_GELU_K = 0.7978845608028654


def _near(v, want):
    return isinstance(v, (int, float)) and abs(v - want) <= 1e-4 * abs(want)


def _scaled(n, value):
    """x when n is mul(x, value) or mul(value, x) (a Python scalar), else None."""
    if not isinstance(n, torch.fx.Node) or n.target is not aten.mul.Tensor or len(n.args) != 2:
        return None
    a, b = n.args
    if _near(b, value) and isinstance(a, torch.fx.Node):
        return a
    if _near(a, value) and isinstance(b, torch.fx.Node):
        return b
    return None


def _is_cube_of(n, x):
    if not isinstance(n, torch.fx.Node):
        return False
    if n.target is aten.pow.Tensor_Scalar and n.args[0] is x and _near(n.args[1], 3.0):
        return True
    if n.target is aten.mul.Tensor and len(n.args) == 2:  # x * (x * x) or (x * x) * x
        a, b = n.args
        sq = lambda m: isinstance(m, torch.fx.Node) and m.target is aten.mul.Tensor and \
            list(m.args) == [x, x]
        return (a is x and sq(b)) or (b is x and sq(a))
    return False


def _gelu_tanh_input(t):
    """x when tanh node t is tanh(k * (x + 0.044715 * x^3)), else None."""
    inner = _scaled(t.args[0], _GELU_K)
    if inner is None or inner.target is not aten.add.Tensor or len(inner.args) != 2:
        return None
    for x, cubic in (inner.args, inner.args[::-1]):
        c = _scaled(cubic, 0.044715)
        if isinstance(x, torch.fx.Node) and c is not None and _is_cube_of(c, x):
            return x
    return None


def _gelu_tanh_output(t, x):
    """The node computing 0.5 * x * (1 + t), when t's only use leads there, else None."""
    if len(t.users) != 1:
        return None
    one = next(iter(t.users))
    if one.target is not aten.add.Tensor or len(one.args) != 2 or len(one.users) != 1 or \
            not any(_near(a, 1.0) for a in one.args):
        return None
    out = next(iter(one.users))
    if out.target is not aten.mul.Tensor or len(out.args) != 2:
        return None
    other = out.args[1] if out.args[0] is one else out.args[0]
    if _scaled(other, 0.5) is x:  # (0.5 * x) * (1 + t)
        return out
    if other is x and len(out.users) == 1:  # (x * (1 + t)) * 0.5
        half = next(iter(out.users))
        return half if _scaled(half, 0.5) is out else None
    return None


def fuse_gelu_tanh(gm):
    """Rewrites each written-out tanh gelu into aten.gelu(x, approximate="tanh"); returns how
    many."""
    count = 0
    for t in list(gm.graph.nodes):
        if t.op != "call_function" or t.target is not aten.tanh.default:
            continue
        x = _gelu_tanh_input(t)
        out = _gelu_tanh_output(t, x) if x is not None else None
        if out is None:
            continue
        with gm.graph.inserting_before(out):
            g = gm.graph.call_function(aten.gelu.default, (x,), {"approximate": "tanh"})
            g.meta["val"] = out.meta.get("val")
        out.replace_all_uses_with(g)
        count += 1
    return _finish(gm, count)
