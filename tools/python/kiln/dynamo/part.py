"""KilnPart: one kiln graph in place of an FX partition. The first call on the GPU compiles it
and checks everything once; later calls take the short path (_run_gpu), which touches only the
kiln inputs: dynamo's guards hold the dtypes, devices and shapes of the graph's inputs, and the
partition's inner values follow from them."""
import operator
import sys

import numpy as np
import torch

from .. import _kiln
from .. import engine as _engine
from . import state
from .registry import Unsupported

_STATS = state.STATS  # reset() zeroes it in place


def _cuda_ordinal(x):
    """The CUDA device ordinal of tensor x, None for a host tensor."""
    if not x.is_cuda:
        return None
    return x.device.index if x.device.index is not None else torch.cuda.current_device()


def _format(channels_last):
    return torch.channels_last if channels_last else torch.contiguous_format


class KilnPart(torch.nn.Module):
    """Runs one kiln graph in place of an FX partition: args as the partition's placeholders
    (constants among them are ignored: kiln holds them), returns its outputs."""

    def __init__(self, cx, single, arg_names, options, out_vals, fallback):
        super().__init__()
        for t in cx.g.outputs:
            if t.layout == "Strided":  # the per-call path allocates row-major or channels-last
                raise Unsupported(f"output {t.name} has explicit strides")
        self.graph, self.single = cx.g, single
        self.fallback = fallback  # the FX partition itself: runs eagerly if kiln cannot build it
        self.failed = None
        # the FX outputs' strides (row-major or channels-last), which later nodes may rely on
        self.out_formats = [_format(getattr(v, "dim", lambda: 0)() == 4 and not v.is_contiguous()
                                    and v.is_contiguous(memory_format=torch.channels_last))
                            for v in out_vals]
        # the outputs kiln writes in the other memory format (a copy per call)
        self.out_fix = [(j, f) for j, (t, f) in enumerate(zip(cx.g.outputs, self.out_formats))
                        if _format(t.layout == "NHWC") != f]
        # outputs the traced program holds on the host (computed from host tensors only, e.g.
        # Swin V2's coordinate table): kiln computes them on the GPU with the rest, and gives
        # them back on the host, where the eager code after them expects them
        self.on_host = [getattr(getattr(v, "device", None), "type", None) == "cpu" for v in out_vals]
        self.any_on_host = any(self.on_host)
        # a partition whose inputs are all constants (Swin V2's position-bias MLP over its
        # coordinate buffer) has no input to say where it runs: its outputs' devices do
        self.out_cuda = next((v.device for v in out_vals if isinstance(v, torch.Tensor) and
                              v.device.type == "cuda"), None)
        index = {name: i for i, name in enumerate(arg_names)}
        self.in_pos = [index[t.name] for t in cx.g.inputs]  # each kiln input's argument
        self.in_formats = [_format(t.layout == "NHWC") for t in cx.g.inputs]
        self.sym_pos = [(sym, index[name]) for name, sym in cx.sym_inputs.items()]
        self.options = options
        self.compiled = None
        self.device = None    # the torch device of the compiled graph
        self.host_in = []     # kiln inputs the program holds on the host (copied per call)
        self.in_checks = []   # (kiln input, memory format or None for row-major) checked per call
        self.plain = True     # outputs go back as kiln writes them
        state.STATS["kiln_graphs_built"] += 1
        state.GRAPHS.append(cx.g)

    def forward(self, *args):
        if self.device is not None:
            outs = self._run_gpu(args, self.in_pos, self.sym_pos)
        else:
            outs = self._first_or_host(args)
        return outs[0] if self.single else tuple(outs)

    def _run_gpu(self, args, in_pos, sym_pos):
        """The per-call path once compiled: in_pos / sym_pos index `args` (the partition's, or
        the whole graph's when the partition is the whole graph). It runs on every call of the
        compiled model, so what a partition never needs (host copies, layout fixes) is decided
        once, in _first_or_host."""
        xs = [args[i] for i in in_pos]
        for i in self.host_in:
            xs[i] = xs[i].to(device=self.device)
        for i, f in self.in_checks:
            x = xs[i]
            if not (x.is_contiguous() if f is None else x.is_contiguous(memory_format=f)):
                xs[i] = x.contiguous(memory_format=f or torch.contiguous_format)
        outs = self.compiled._launch(
            xs, self.device, tuple([(sym, int(args[i])) for sym, i in sym_pos]) if sym_pos else ())
        _STATS["kiln_runs"] += 1
        if self.plain:
            return outs
        if self.any_on_host:
            outs = [o.cpu() if host else o for o, host in zip(outs, self.on_host)]
        for j, f in self.out_fix:
            outs[j] = outs[j].contiguous(memory_format=f)
        return outs

    def _first_or_host(self, args):
        """A call before the graph runs on the GPU: compiles it when an input or an output is a
        CUDA tensor (then runs it), else runs kiln's CPU reference; a graph kiln cannot build runs its FX
        partition eagerly."""
        if self.failed is not None:
            return self._eager(args)
        xs = [args[i] for i in self.in_pos]
        ordinals = [_cuda_ordinal(x) for x in xs]
        device = next((o for o in ordinals if o is not None), None)
        if device is None and self.out_cuda is not None:
            device = self.out_cuda.index
            if device is None:
                device = torch.cuda.current_device()
        if device is None:
            state.STATS["reference_runs"] += 1
            outs = self._reference(xs, dict((s, int(args[i])) for s, i in self.sym_pos))
            return [o.contiguous(memory_format=f) for o, f in zip(outs, self.out_formats)]
        if not self._compile(device):
            return self._eager(args)
        self.host_in = [i for i, o in enumerate(ordinals) if o is None]
        # dynamo's guards hold the inputs' strides only while their shapes are static
        self.in_checks = [(i, None if f is torch.contiguous_format else f)
                          for i, f in enumerate(self.in_formats)]
        self.plain = not (self.any_on_host or self.out_fix)
        self.device = torch.device("cuda", device)
        return self._run_gpu(args, self.in_pos, self.sym_pos)

    def _eager(self, args):
        out = self.fallback(*args)
        return [out] if self.single else list(out)

    def _compile(self, device):
        """Compiles the kiln graph for the GPU; a graph kiln cannot build (a kiln.Error) runs
        eagerly from then on, said once on stderr and in stats()["fallbacks"]."""
        try:
            self.compiled = state.engine(self.options, device).compile(self.graph)
            state.COMPILED.add(self.compiled)
        except _kiln.Error as e:
            self.failed = str(e)
            state.STATS["fallbacks"] += 1
            print(f"kiln: graph '{self.graph.name}' runs in eager PyTorch: {e}", file=sys.stderr)
            return False
        state.STATS["engine_compiles"] += 1
        return True

    def _reference(self, xs, bindings):
        host = {}
        for t, x in zip(self.graph.inputs, xs):
            x = x.detach().contiguous()
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


def _replay_launch(in_pos, xs, templates, run, raw, index):
    """fixed_shape_launch with EngineOptions.cuda_graphs: kiln replays a graph captured per
    (addresses, shapes), and every call brings new tensors. So each stream gets kiln-owned
    inputs and outputs at fixed addresses, made on its first call. A call copies its inputs in,
    replays the captured graph on them, and hands back copies of the outputs. That is two copy
    kernels and one graph launch, where a graph of ~100 small kernels launches each one (copies
    and replay are in order on the one stream)."""
    empty_like = torch.empty_like
    statics = {}  # stream -> (kiln-owned inputs, outputs, their addresses)

    def launch(args):
        stream = raw(index)
        bufs = statics.get(stream)
        if bufs is None:
            ins = [empty_like(x) for x in xs]
            outs = [empty_like(t) if f is None else empty_like(t, memory_format=f)
                    for t, f in templates]
            bufs = statics[stream] = (ins, outs, [x.data_ptr() for x in ins],
                                      [o.data_ptr() for o in outs])
        ins, outs, in_ptrs, out_ptrs = bufs
        for buf, i in zip(ins, in_pos):
            buf.copy_(args[i])
        run(in_ptrs, out_ptrs, stream, 0)
        _STATS["kiln_runs"] += 1
        return [o.clone() for o in outs]

    return launch


class WholeGraph:
    """The compiled function when one KilnPart is the whole FX graph: dynamo's arguments go
    straight to the part (no GraphModule, no submodule call), and the graph's outputs are the
    part's outputs or its own arguments. Called boxed (one list of arguments), as aot_autograd
    calls its compilers' results."""
    _boxed_call = True

    def __init__(self, part, call_pos, out_map, fused, consts):
        self.part, self.fused, self.out_map = part, fused, out_map
        # the part's arguments: positions in the graph's arguments, or None for a constant
        # (consts holds its value: the first call's conversion reads it)
        self.call_pos, self.consts = call_pos, consts
        self.in_pos = [call_pos[i] for i in part.in_pos]
        self.sym_pos = [(s, call_pos[i]) for s, i in part.sym_pos]
        # what call() runs once the part has run on the GPU: fixed_shape_launch, or __call__
        # where that does not apply (decided once)
        self.fixed = None
        # the graph's outputs are the part's, in its order
        self.direct = out_map == [(True, j) for j in range(len(part.graph.outputs))]

    def __call__(self, args):
        part = self.part
        if part.device is not None:
            outs = part._run_gpu(args, self.in_pos, self.sym_pos)
        else:
            outs = part._first_or_host([c if i is None else args[i]
                                        for i, c in zip(self.call_pos, self.consts)])
        if self.direct:
            return outs
        return [outs[j] if from_part else args[j] for from_part, j in self.out_map]

    def call(self, *args):
        """Called unboxed (one argument per graph input), as dynamo calls a backend's result."""
        fixed = self.fixed
        if fixed is not None:
            return fixed(args)
        part = self.part
        if part.device is None:
            return self(args)
        launch = fixed_shape_launch(part, self.in_pos, args) if self.direct else None
        self.fixed = launch or self.__call__
        return self(args)


def fixed_shape_launch(part, in_pos, args):
    """The per-call path of a compiled part whose kiln inputs have no symbolic dim, bound once
    (None when it does not apply): dynamo compiled the FX graph for these sizes, and its guards
    hold each input's sizes and strides, so every later call has the shapes, the plan and the
    layouts of this one. What is left per call is the outputs' allocation, the addresses, the
    current stream and the native run. `args` (a call on the GPU that has run once) shows the
    layouts: an input that needed a copy into kiln's layout keeps the checked path."""
    if part.sym_pos or part.host_in or not part.plain:
        return None
    if any(isinstance(d, str) for t in part.graph.inputs for d in t.shape):
        return None
    xs = [args[i] for i in in_pos]
    if not all(x.is_contiguous(memory_format=f) for x, f in zip(xs, part.in_formats)):
        return None
    cg, device = part.compiled, part.device
    plan = cg._plan(tuple([x.shape for x in xs]), (), device)
    templates, run, nbytes = plan.templates, plan.run.run, plan.workspace_bytes
    raw = _engine._current_stream_fn()
    index = device.index
    if cg._own_workspace:
        return _replay_launch(in_pos, xs, templates, run, raw, index)
    empty_like = torch.empty_like
    workspace = cg._workspace

    def launch(args):
        outs = [empty_like(t) if f is None else empty_like(t, memory_format=f)
                for t, f in templates]
        stream = raw(index)
        run([args[i].data_ptr() for i in in_pos], [o.data_ptr() for o in outs], stream,
            workspace(stream, nbytes, device) if nbytes else 0)
        _STATS["kiln_runs"] += 1
        return outs

    return launch


def whole_graph(fused):
    """A WholeGraph for `fused` when its only computation is one KilnPart whose arguments are
    graph inputs, else None."""
    phs = {}
    call = None
    for n in fused.graph.nodes:
        if n.op == "placeholder":
            phs[n.name] = len(phs)
        elif n.op == "get_attr":  # a constant (folded or lifted): kiln holds it
            continue
        elif n.op == "call_module" and call is None:
            call = n
        elif n.op == "call_function" and n.target is operator.getitem and n.args[0] is call:
            continue
        elif n.op != "output":
            return None
    if call is None or not isinstance(fused.get_submodule(call.target), KilnPart):
        return None
    if call.kwargs or not all(isinstance(a, torch.fx.Node) and (a.name in phs or a.op == "get_attr")
                              for a in call.args):
        return None
    part = fused.get_submodule(call.target)
    out = [n for n in fused.graph.nodes if n.op == "output"][0].args[0]
    out_map = []
    for o in (out if isinstance(out, (list, tuple)) else [out]):
        if o is call and part.single:
            out_map.append((True, 0))
        elif isinstance(o, torch.fx.Node) and o.op == "call_function" and o.args[0] is call:
            out_map.append((True, o.args[1]))
        elif isinstance(o, torch.fx.Node) and o.name in phs:
            out_map.append((False, phs[o.name]))
        else:
            return None
    call_pos = [phs.get(a.name) if a.op == "placeholder" else None for a in call.args]
    consts = [operator.attrgetter(a.target)(fused) if a.op == "get_attr" else None for a in call.args]
    if any(call_pos[i] is None for i in part.in_pos):  # a kiln input that is not an argument
        return None
    return WholeGraph(part, call_pos, out_map, fused, consts)
