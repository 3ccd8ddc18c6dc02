"""The backend's compile step: an aot_autograd inference graph partitioned (partition.py), each
kiln partition converted to a kiln graph (convert.py) and replaced by a KilnPart that runs it."""
import sys

import numpy as np
import torch

from .. import _kiln
from .._dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from ..engine import Engine
from .registry import Unsupported
from .convert import convert_graph, dim_of, target_name
from .partition import describe, partition
from .rewrite import fold_linear_views

# Ops kiln has whole: core ATen's decompositions of these are not applied.
_KEEP = {"silu", "hardswish", "hardsigmoid", "gelu", "mish", "softplus", "elu", "leaky_relu",
         "hardtanh", "upsample_nearest2d", "upsample_bilinear2d", "native_group_norm",
         "native_layer_norm", "_native_batch_norm_legit_no_training", "rms_norm",
         "_fused_rms_norm", "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
         "_scaled_dot_product_flash_attention_for_cpu", "_log_softmax", "_softmax"}

_STATS = {"graphs": 0, "kiln_graphs_built": 0, "engine_compiles": 0, "kiln_runs": 0,
          "reference_runs": 0, "fallbacks": 0}
_ENGINE = []
_GRAPHS = []  # the kiln graphs built, oldest first (kiln_graphs())


def stats():
    """Backend counters: FX graphs compiled, kiln graphs built and compiled, runs (on the GPU,
    on the CPU reference), graphs that fell back to eager because the Engine refused them, and
    the shared Engine's counters ("engine") once there is one."""
    out = dict(_STATS)
    if _ENGINE:
        out["engine"] = _ENGINE[0].stats()
    return out


def kiln_graphs():
    """The kiln graphs the backend built (kiln.Graph: explain(), save(), run_reference())."""
    return list(_GRAPHS)


def reset():
    for k in _STATS:
        _STATS[k] = 0
    _ENGINE.clear()
    _GRAPHS.clear()


def decompositions():
    from torch._decomp import core_aten_decompositions
    table = core_aten_decompositions()
    return {k: v for k, v in table.items()
            if getattr(getattr(k, "overloadpacket", None), "__name__", None) not in _KEEP}


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


def _engine(options, device=0):
    """The backend's engine for CUDA device `device` (one per device, made on first use)."""
    for e in _ENGINE:
        if e.device == device:
            return e
    _ENGINE.append(Engine(**dict(options, device=device)))
    return _ENGINE[-1]


class KilnPart(torch.nn.Module):
    """Runs one kiln graph in place of an FX partition: args as the partition's placeholders
    (constants among them are ignored: kiln holds them), returns its outputs."""

    def __init__(self, cx, single, arg_names, options, out_vals, fallback):
        super().__init__()
        self.graph, self.single = cx.g, single
        self.fallback = fallback  # the FX partition itself: runs eagerly if kiln cannot build it
        self.failed = None
        # the FX outputs' strides (row-major or channels-last), which later nodes may rely on
        self.channels_last = [getattr(v, "dim", lambda: 0)() == 4 and not v.is_contiguous() and
                              v.is_contiguous(memory_format=torch.channels_last)
                              for v in out_vals]
        # outputs the traced program holds on the host (computed from host tensors only, e.g.
        # Swin V2's coordinate table): kiln computes them on the GPU with the rest, and gives
        # them back on the host, where the eager code after them expects them
        self.on_host = [getattr(getattr(v, "device", None), "type", None) == "cpu" for v in out_vals]
        self.any_on_host = any(self.on_host)
        self.inputs = [t.name for t in cx.g.inputs]
        self.index = {name: i for i, name in enumerate(arg_names)}
        self.symbols = {name: sym for name, sym in cx.sym_inputs.items()}
        self.options = options
        self.compiled = None
        _STATS["kiln_graphs_built"] += 1
        _GRAPHS.append(cx.g)

    def _bindings(self, args):
        b = {}
        for name, sym in self.symbols.items():
            v = args[self.index[name]]
            b[sym] = int(v)
        return b

    def forward(self, *args):
        given = {name: args[self.index[name]] for name in self.inputs}
        if self.failed is not None:
            return self.fallback(*args)
        if self._on_gpu(given):
            if self.compiled is None and not self._compile(self._device(given)):
                return self.fallback(*args)
            _STATS["kiln_runs"] += 1
            if not all(t.is_cuda for t in given.values()):
                given = self._to_gpu(given)
            given = {t.name: self._layout(given[t.name], t.layout == "NHWC")
                     for t in self.graph.inputs}
            outs = self.compiled.run_torch(given, bindings=self._bindings(args))
            if self.any_on_host:
                outs = [o.cpu() if host else o for o, host in zip(outs, self.on_host)]
        else:
            _STATS["reference_runs"] += 1
            outs = self._reference(given, self._bindings(args))
        outs = [self._layout(o, cl) for o, cl in zip(outs, self.channels_last)]
        return outs[0] if self.single else tuple(outs)

    @staticmethod
    def _to_gpu(given):
        """A CPU tensor among a GPU partition's inputs is one the traced program holds on the
        host and eager PyTorch combines with CUDA tensors (a lifted 0-dim constant, a position
        index built by torch.arange without a device): kiln reads a device copy of it."""
        dev = next(t.device for t in given.values() if t.is_cuda)
        return {k: t if t.is_cuda else t.to(device=dev) for k, t in given.items()}

    @staticmethod
    def _on_gpu(given):
        return any(t.is_cuda for t in given.values())

    @staticmethod
    def _device(given):
        """The CUDA device ordinal of the call's tensors (the engine compiled for it)."""
        for t in given.values():
            if t.is_cuda:
                return t.device.index if t.device.index is not None else torch.cuda.current_device()
        return 0

    def _compile(self, device):
        """Compiles the kiln graph for the GPU; a graph kiln cannot build (a kiln.Error) runs
        eagerly from then on, said once on stderr and in stats()["fallbacks"]."""
        try:
            self.compiled = _engine(self.options, device).compile(self.graph)
        except _kiln.Error as e:
            self.failed = str(e)
            _STATS["fallbacks"] += 1
            print(f"kiln: graph '{self.graph.name}' runs in eager PyTorch: {e}", file=sys.stderr)
            return False
        _STATS["engine_compiles"] += 1
        return True

    @staticmethod
    def _layout(x, channels_last):
        """x in row-major or channels-last memory (a copy only when it is in the other)."""
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        return x if x.is_contiguous(memory_format=fmt) else x.contiguous(memory_format=fmt)

    def _reference(self, given, bindings):
        host = {}
        for t in self.graph.inputs:
            x = given[t.name].detach().contiguous()
            if x.dtype == torch.bfloat16:
                arr = x.view(torch.int16).numpy().view(np.uint16)
            else:
                arr = x.numpy()
            host[t.name] = (t.dtype, list(arr.shape), np.ascontiguousarray(arr))
        res = _kiln._run_reference(self.graph.native, host, bindings, 0)
        outs = []
        for t in self.graph.outputs:
            dt, shape, data = res[t.name]
            if dt == "bf16":
                a = np.frombuffer(data, dtype=np.uint16).reshape(shape).copy()
                outs.append(torch.from_numpy(a.view(np.int16)).view(torch.bfloat16))
            else:
                from .._dtypes import to_numpy
                outs.append(torch.from_numpy(to_numpy(dt, shape, data)))
        return outs


def _kiln_parts(fused, consts_by_name, options):
    """Replaces each fused_<i> submodule by a KilnPart; returns {partition name: reason} for
    those kiln could not build as a whole (they stay eager)."""
    failed = {}
    for call in [n for n in fused.graph.nodes if n.op == "call_module"]:
        sub = fused.get_submodule(call.target)
        phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
        consts = {}
        for ph, arg in zip(phs, call.args):
            if isinstance(arg, torch.fx.Node) and arg.op == "placeholder" and \
                    arg.name in consts_by_name:
                consts[ph.name] = consts_by_name[arg.name]
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
    _STATS["graphs"] += 1
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    consts_by_name = {}
    if len(phs) == n_inputs:  # aot_autograd keeps dynamo's inputs, in order
        consts_by_name = {phs[i].name: t for i, t in constants.items()}
    fold_linear_views(gm)
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
    return fused
