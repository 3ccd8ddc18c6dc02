"""The backend's compile step: an aot_autograd inference graph partitioned (partition.py), each
kiln partition converted to a kiln graph (convert.py) and replaced by a KilnPart that runs it
(part.py); a graph that is one kiln partition becomes a WholeGraph, which dynamo calls directly."""
import operator
import unittest.mock

import torch

from .. import _kiln
from . import state
from .convert import convert_graph, dim_of
from .fold import fold_constants
from .part import KilnPart, WholeGraph, whole_graph
from .partition import describe, partition
from .registry import Unsupported
from .rewrite import (drop_gather_upcasts, drop_metadata_asserts, drop_softmax_upcasts,
                      fold_bmm_views, fold_linear_views, fuse_gelu_tanh)

# Ops kiln has whole: core ATen's decompositions of these are not applied.
_KEEP = {"silu", "hardswish", "hardsigmoid", "gelu", "mish", "softplus", "elu", "leaky_relu",
         "hardtanh", "upsample_nearest2d", "upsample_bilinear2d", "native_group_norm",
         "native_layer_norm", "_native_batch_norm_legit_no_training", "rms_norm",
         "_fused_rms_norm", "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
         "_scaled_dot_product_flash_attention_for_cpu", "_log_softmax", "_softmax"}

def decompositions():
    from torch._decomp import core_aten_decompositions
    table = core_aten_decompositions()
    return {k: v for k, v in table.items()
            if getattr(getattr(k, "overloadpacket", None), "__name__", None) not in _KEEP}


def export_inference(gm, example_inputs):
    """(gm lowered to core ATen, None), or (None, why) for a graph that needs aot_autograd's
    runtime wrappers: an input it mutates, an output that aliases an input. Without them, what
    dynamo calls is the backend's own function, a few microseconds less per call."""
    from torch._functorch.aot_autograd import aot_export_joint_simple
    from torch._guards import detect_fake_mode
    fake = detect_fake_mode(example_inputs)
    if fake is None:
        return None, "no fake mode among the example inputs"
    try:
        # dynamo hands real tensors: its fake mode converts them, as aot_autograd does
        with unittest.mock.patch.object(fake, "allow_non_fake_inputs", True), fake:
            return aot_export_joint_simple(gm, list(example_inputs), trace_joint=False,
                                           decompositions=decompositions()), None
    except Exception as e:  # what export refuses, aot_autograd's wrappers handle
        return None, f"{type(e).__name__}: {e}"


def unboxed(fn):
    """fn as dynamo calls it (one argument per graph input)."""
    if isinstance(fn, WholeGraph):
        return fn.call
    if not getattr(fn, "_boxed_call", False):
        return fn
    return lambda *args: fn(args)


def find_constants(gm, example_inputs):
    """{input index: tensor} of the graph inputs that are parameters or buffers of a module."""
    out = {}
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (n, t) in enumerate(zip(phs, example_inputs)):
        ga = n.meta.get("grapharg")
        src = ga.source.name if ga is not None and hasattr(ga, "source") else ""
        src = src() if callable(src) else str(src)
        if isinstance(t, torch.nn.Parameter) or "._parameters[" in src or "._buffers[" in src:
            out[i] = t
    return out


def _kiln_parts(fused, consts_by_name, options):
    """Replaces each fused_<i> submodule by a KilnPart; returns {partition name: reason} for
    those kiln could not build as a whole (they stay eager)."""
    failed = {}
    for call in [n for n in fused.graph.nodes if n.op == "call_module"]:
        sub = fused.get_submodule(call.target)
        phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
        consts = {}
        for ph, arg in zip(phs, call.args):
            if not isinstance(arg, torch.fx.Node):
                continue
            if arg.op == "placeholder" and arg.name in consts_by_name:
                consts[ph.name] = consts_by_name[arg.name]
            elif arg.op == "get_attr":  # a lifted tensor constant (torch.tensor(3) in forward)
                value = operator.attrgetter(arg.target)(fused)
                if isinstance(value, torch.Tensor):
                    consts[ph.name] = value
        try:
            cx, single = convert_graph(sub.graph, f"torch_{call.target}", consts)
            for ph in phs:
                v = ph.meta.get("val")
                if isinstance(v, torch.SymInt) and isinstance(dim_of(v), str) and \
                        dim_of(v).isidentifier():
                    cx.sym_inputs[ph.name] = dim_of(v)
            out = [n for n in sub.graph.nodes if n.op == "output"][0].args[0]
            out_vals = [a.meta.get("val") for a in ([out] if single else out)]
            part = KilnPart(cx, single, [p.name for p in phs], options, out_vals, sub)
        except (Unsupported, _kiln.Error) as e:
            failed[call.target] = str(e)
            continue
        setattr(fused, call.target, part)
    return failed


def compile_inference(gm, example_inputs, constants, n_inputs, options, on_report):
    state.STATS["graphs"] += 1
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    consts_by_name = {}
    if len(phs) == n_inputs:  # aot_autograd keeps dynamo's inputs, in order
        consts_by_name = {phs[i].name: t for i, t in constants.items()}
    drop_metadata_asserts(gm)
    fold_linear_views(gm)
    fold_bmm_views(gm)
    fold_constants(gm)
    drop_gather_upcasts(gm)
    drop_softmax_upcasts(gm)
    fuse_gelu_tanh(gm)
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    fused, why, where = partition(gm)
    # aot_autograd compiles under its FakeTensorMode: the constants' real values are read outside it
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        failed = _kiln_parts(fused, consts_by_name, options)
    fused.recompile()
    report = {"partitions": len({p for p in where.values()}) - len(failed), "nodes": []}
    for n in nodes:
        part = where.get(n.name)
        name = f"fused_{part}" if part is not None else None
        if part is not None and name not in failed:
            report["nodes"].append({"node": n.name, "target": describe(n),
                                    "where": f"kiln:{part}", "why": ""})
        else:
            reason = why.get(n.name) or failed.get(name, "")
            if part is not None:
                reason = f"its partition could not be built: {reason}"
            report["nodes"].append({"node": n.name, "target": describe(n), "where": "eager",
                                    "why": reason})
    on_report(report)
    return whole_graph(fused) or fused
