"""FX rewrites before partitioning. The export path keeps a `_assert_tensor_metadata` node for
each dtype conversion (`x.to(dtype)`): a check of what the trace already fixed, dropped here.
aot_autograd lowers a linear layer on a [B, S, K] input to
view [B*S, K] -> addmm -> view [B, S, N]; kiln's matmul takes batch dims itself, and the views
around the 2-D contraction would stand between it and the ops after it (an activation, a
residual add) that kiln fuses into a contraction's epilogue. So the chain becomes
aten.matmul(x, w) (+ bias): the same values, runnable in eager PyTorch too."""
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
    if count:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return count
