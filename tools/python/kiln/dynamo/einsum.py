"""Batched-matmul einsums as matmuls, before lowering. aot_autograd decomposes torch.einsum into
permutes, unit-dim views and a bmm (MaxViT's "BGHID,BGHJD->BGHIJ"): views that stand between
the contraction and its softmax, so kiln's attention pattern never sees them (MaxViT ran 44
matmuls, 22 softmaxes and 216 transposes where its ONNX import runs 22 attention kernels). An
einsum of two operands that share their leading batch letters with the output, each with one
more letter and one contracted letter, is matmul(a, b) with transposes where the letters are
the other way round, as kiln's import writes it."""
import torch


def _matmul_form(eq, ranks):
    """(transpose a, transpose b) for a batched-matmul equation, else None."""
    eq = eq.replace(" ", "")
    if "->" not in eq or "." in eq:
        return None
    ins, out = eq.split("->")
    terms = ins.split(",")
    if len(terms) != 2 or [len(t) for t in terms] != ranks:
        return None
    a, b = terms
    if len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(out)) != len(out):
        return None
    nb = len(out) - 2
    batch = out[:nb]
    if nb < 0 or a[:nb] != batch or b[:nb] != batch or len(a) != nb + 2 or len(b) != nb + 2:
        return None
    m, n = out[nb:]
    shared = set(a[nb:]) & set(b[nb:])
    if len(shared) != 1 or m not in a[nb:] or n not in b[nb:] or m == n:
        return None
    c = shared.pop()
    if c in out or set(a[nb:]) != {m, c} or set(b[nb:]) != {c, n}:
        return None
    return a[nb:] != m + c, b[nb:] != c + n


def einsum_as_matmul(gm):
    """Rewrites the batched-matmul einsums of a dynamo graph in place; returns how many."""
    count = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not torch.einsum or n.kwargs or \
                len(n.args) != 3 or not isinstance(n.args[0], str):
            continue
        eq, a, b = n.args
        vals = [x.meta.get("example_value") if isinstance(x, torch.fx.Node) else None
                for x in (a, b)]
        if not all(isinstance(v, torch.Tensor) for v in vals):
            continue
        form = _matmul_form(eq, [v.dim() for v in vals])
        if form is None:
            continue
        ta, tb = form
        g = gm.graph
        with g.inserting_before(n):
            if ta:
                a = g.call_function(torch.transpose, (a, -1, -2))
            if tb:
                b = g.call_function(torch.transpose, (b, -1, -2))
            new = g.call_function(torch.matmul, (a, b))
        new.meta = dict(n.meta)
        n.replace_all_uses_with(new)
        g.erase_node(n)
        count += 1
    if count:
        gm.recompile()
    return count
