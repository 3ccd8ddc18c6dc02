"""`--report`: the model's op histogram and what each ONNX op became.

For every ONNX op type of the graph, in order of first appearance: how many nodes, and what the
importer made of them:

  folded        computed at conversion time (shape computations, constants)
  fused         part of a pattern whose kiln node another of its nodes emits (gelu, silu,
                matmul + bias, ...)
  <kiln ops>    the kiln nodes it emitted that are in the written graph, counted by op
  alias         an alias of its input (Identity, Dropout, a no-op Cast), no node of its own
  unused        its kiln nodes were dropped: no graph output depends on them
  unsupported   no converter or folder for the op (the model check refuses the model)
  refused       the node whose conversion failed (the error follows the report)
  not reached   after the refused node

The report is printed also when the conversion fails, up to the node that failed.
"""
from collections import Counter, OrderedDict

FOLDED, FUSED, CONVERTED, REFUSED = "folded", "fused", "converted", "refused"


def outcomes(model, cx, supported, failed=None):
    """{op type: Counter of what its nodes became} for the model's nodes, in first-seen order."""
    kops = {}
    if cx is not None:
        for kn in cx.nodes:  # after prune(): only what the written graph holds
            src = cx.origin.get(kn["name"])
            if src is not None:
                kops.setdefault(id(src), []).append(kn["op"])
    table = OrderedDict()
    reached = True
    for n in model.graph.node:
        op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
        c = table.setdefault(op, Counter())
        status = cx.became.get(id(n)) if cx is not None else None
        if n.domain not in ("", "ai.onnx") or n.op_type not in supported:
            c["unsupported"] += 1
        elif failed is not None and n is failed:
            c["refused"] += 1
            reached = False
        elif status is None or (not reached and n.op_type != "Constant"):
            c["not reached"] += 1
        elif kops.get(id(n)):  # a fusion's kiln node counts for the node that emitted it
            for k in kops[id(n)]:
                c[k] += 1
        elif status == CONVERTED:
            c["alias" if id(n) in cx.aliases else "unused"] += 1
        else:
            c[status] += 1
    return table


ORDER = ("folded", "fused", "alias", "unused", "unsupported", "refused", "not reached")


def _became(counter):
    kiln = sorted((k, v) for k, v in counter.items() if k not in ORDER)
    parts = [f"{k} {v}" for k, v in kiln]
    parts += [f"{k} {counter[k]}" for k in ORDER if counter.get(k)]
    return ", ".join(parts)


def render(model, cx, supported, source, failed=None):
    """The report's lines."""
    table = outcomes(model, cx, supported, failed)
    total = len(model.graph.node)
    kiln_total = Counter()
    for c in table.values():
        kiln_total.update({k: v for k, v in c.items() if k not in ORDER})
    width = max([len(op) for op in table] + [7])
    lines = [f"report: {source}: {total} ONNX nodes of {len(table)} op types"
             + (f" -> {sum(kiln_total.values())} kiln nodes" if cx is not None else ""),
             f"  {'ONNX op':{width}}  {'nodes':>5}  became"]
    for op, c in table.items():
        lines.append(f"  {op:{width}}  {sum(c.values()):>5}  {_became(c)}")
    if kiln_total:
        lines.append("  kiln ops: " + ", ".join(f"{k} {v}" for k, v in sorted(kiln_total.items())))
    return lines
