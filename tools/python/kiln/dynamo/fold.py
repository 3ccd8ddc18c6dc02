"""Constant folding before partitioning: a node whose every tensor operand is a lifted constant
(a get_attr) or a folded node, and that has static shapes, is computed once here with torch and
becomes a get_attr of its value. Swin's shifted-window masks (zeros, ninety slice assignments of
Python ints) and the position and index tensors of masks and upsampling (arange, its arithmetic)
are built so on every call otherwise, in kiln or in eager PyTorch. Parameters are not folded
into: their computations stay visible to kiln's passes (filter layouts, epilogue fusion), and a
folded copy of a weight would double its memory."""
import operator

import torch

# Values that are not functions of the operands: never folded.
_RANDOM = ("rand", "bernoulli", "normal", "uniform", "dropout", "empty", "multinomial", "poisson")
MAX_FOLDED_ELEMENTS = 1 << 22  # a larger result is cheaper to compute than to hold


def _foldable_target(n):
    name = getattr(getattr(n.target, "overloadpacket", None), "__name__", str(n.target))
    return n.op == "call_function" and not any(r in name for r in _RANDOM)


def _static_tensor(v):
    return isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in v.shape) and \
        v.numel() <= MAX_FOLDED_ELEMENTS


def _nodes_in(args):
    out = []
    torch.fx.node.map_arg(args, out.append)
    return out


def _static_args(args):
    """No SymInt or SymFloat among the Python values (a symbolic size is a run-time value)."""
    flat, _ = torch.utils._pytree.tree_flatten(args)
    return not any(isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) for v in flat)


def fold_constants(gm):
    """Folds in place; returns how many nodes became constants."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    values = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            v = operator.attrgetter(n.target)(gm)
            if isinstance(v, torch.Tensor):
                values[n] = v
    folded = 0
    with unset_fake_temporarily():
        for n in list(gm.graph.nodes):
            if n.op != "call_function" or not _foldable_target(n):
                continue
            operands = _nodes_in((n.args, n.kwargs))
            if any(a not in values for a in operands) or not _static_args((n.args, n.kwargs)):
                continue
            if not _static_tensor(n.meta.get("val")):
                continue
            args, kwargs = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: values[a])
            try:
                v = n.target(*args, **kwargs)
            except Exception:  # noqa: BLE001 - an op that cannot run here is left to run later
                continue
            if not isinstance(v, torch.Tensor):
                continue
            values[n] = v.clone() if v._is_view() else v
            folded += 1
    if not folded:
        return 0
    # Replace the folded nodes that something unfolded reads; the rest die with them. A graph
    # output keeps its node: each call returns a fresh tensor, never the folded value itself.
    def reads(u):
        return u not in values and u.op != "output"

    kept = 0
    for n in list(gm.graph.nodes):
        if n not in values or n.op == "get_attr":
            continue
        if not any(reads(u) for u in n.users):
            continue
        name = f"_kiln_folded_{kept}"
        while hasattr(gm, name):
            kept += 1
            name = f"_kiln_folded_{kept}"
        gm.register_buffer(name, values[n].contiguous())
        with gm.graph.inserting_before(n):
            c = gm.graph.get_attr(name)
        c.meta = dict(n.meta)
        n.replace_all_uses_with(c, delete_user_cb=reads)
        kept += 1
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return folded
