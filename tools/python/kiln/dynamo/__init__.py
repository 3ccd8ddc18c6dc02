"""The torch.compile backend "kiln": torch.compile(model, backend="kiln") (registered through
the torch_dynamo_backends entry point when the package is installed).

Inference graphs (torch.no_grad / torch.inference_mode) are lowered to core ATen by
aot_autograd; the nodes kiln takes are grouped into partitions, each one kiln graph (parameters
and buffers as constants, dynamic dims as kiln symbols), and the rest runs in eager PyTorch. On a
GPU the kiln part runs on torch's current stream; without one it runs on kiln's CPU reference.
partition_report() (or KILN_DUMP=partition) says which nodes ran where and why; stats() counts
kiln graphs built and compiled.
"""
import functools
import sys

from .. import _kiln
from .backend import compile_inference, decompositions, export_inference, find_constants, unboxed
from .einsum import einsum_as_matmul
from .interpolate import keep_interpolate
from .state import check_errors, kiln_graphs, reset, stats

__all__ = ["kiln_backend", "partition_report", "format_report", "stats", "reset", "kiln_graphs",
           "clear_reports", "check_errors"]

_REPORTS = []
_NOT_EXPORTED = []  # why graphs went through aot_autograd's runtime wrappers (tests)


def kiln_backend(gm, example_inputs, **options):
    """The dynamo backend: options are Engine options (arch=..., cuda_graphs=...), given as
    torch.compile(m, backend="kiln", options={...})."""
    import torch
    options = dict(options.pop("options", None) or {}, **options)
    from torch._dynamo.backends.common import aot_autograd
    if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in example_inputs):
        _REPORTS.append({"graph": f"graph{len(_REPORTS)}", "training": True, "nodes": [
            {"node": n.name, "target": str(n.target), "where": "eager",
             "why": "gradients are needed: kiln takes inference graphs (torch.no_grad)"}
            for n in gm.graph.nodes if n.op == "call_function"]})
        _maybe_print(_REPORTS[-1])
        return gm.forward
    keep_interpolate(gm)
    einsum_as_matmul(gm)
    consts = find_constants(gm, example_inputs)
    fw = functools.partial(compile_inference, constants=consts, n_inputs=len(example_inputs),
                           options=options, on_report=_record)
    exported, why = export_inference(gm, example_inputs)
    if exported is not None:
        return unboxed(fw(exported, example_inputs))
    _NOT_EXPORTED.append(why)
    return aot_autograd(fw_compiler=fw, inference_compiler=fw,
                        decompositions=decompositions())(gm, example_inputs)


def _record(report):
    report["graph"] = f"graph{len(_REPORTS)}"
    _REPORTS.append(report)
    _maybe_print(report)


def _maybe_print(report):
    if _kiln._check_environment()["dump_partition"]:
        print(format_report([report]), file=sys.stderr)


def partition_report():
    """One dict per FX graph the backend compiled, oldest first: {"graph", "partitions": number
    of kiln graphs, "nodes": [{"node", "target", "where": "kiln:<i>" or "eager", "why"}]}."""
    return list(_REPORTS)


def format_report(reports=None):
    lines = []
    for r in (_REPORTS if reports is None else reports):
        nodes = r["nodes"]
        k = sum(1 for n in nodes if n["where"] != "eager")
        lines.append(f"kiln partition report, {r['graph']}: {k} of {len(nodes)} ops in kiln "
                     f"({r.get('partitions', 0)} kiln graph(s)), {len(nodes) - k} in eager PyTorch")
        for n in nodes:
            why = f"  ({n['why']})" if n["why"] else ""
            lines.append(f"  {n['where']:<8} {n['node']:<32} {n['target']}{why}")
    return "\n".join(lines)


def clear_reports():
    _REPORTS.clear()
