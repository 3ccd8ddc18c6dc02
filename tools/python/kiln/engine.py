"""kiln.Engine and kiln.CompiledGraph: compile a graph once, call it with torch CUDA tensors (on
torch's current stream, zero-copy) or with numpy arrays (kiln's CPU reference)."""
import numpy as np

from . import _kiln
from ._dtypes import NUMPY, bf16_bits_to_f32, f32_to_bf16_bits, to_numpy, torch_dtypes
from .graph import Graph

__all__ = ["Engine", "EngineOptions", "CompiledGraph", "run_reference"]

EngineOptions = _kiln.EngineOptions


def _options(options, kw):
    o = options if options is not None else _kiln.EngineOptions()
    for k, v in kw.items():
        if not hasattr(o, k):
            fields = [f for f in dir(o) if not f.startswith("_")]
            raise _kiln.UserError(f"Engine: unknown option '{k}' (valid: {', '.join(fields)})")
        setattr(o, k, v)
    return o


class Engine:
    """Plans, generates and compiles graphs (kiln::Engine). Options are EngineOptions fields:
    Engine(arch="sm_90", fusion=True, cuda_graphs=False, autotune=False, ...)."""

    def __init__(self, options=None, **kw):
        self.options = _options(options, kw)
        self.native = _kiln.Engine(self.options)

    def compile(self, graph):
        """Every kernel of `graph`, compiled (or from the kernel cache); a graph compiled before
        returns at once (stats()["graph_cache_hits"])."""
        if not isinstance(graph, Graph):
            raise _kiln.UserError(f"Engine.compile: expected a kiln.Graph, found "
                                  f"{type(graph).__name__}")
        return CompiledGraph(self, graph, self.native.compile(graph.native))

    def stats(self):
        """The engine's counters: plans, nvrtc_compiles, memory/disk/graph cache hits, ..."""
        return self.native.stats()

    @property
    def has_device(self):
        return self.native.has_device()

    @property
    def arch(self):
        return self.native.arch()

    @property
    def device(self):
        """The CUDA device ordinal the engine runs on (Engine(device=N); cuda:N in torch)."""
        return self.native.device()

    def explain(self, graph):
        return graph.explain(arch=self.arch, fusion=self.options.fusion,
                             schedule=self.options.schedule)


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _name_inputs(graph, args, kwargs, what):
    names = [t.name for t in graph.inputs]
    if len(args) > len(names):
        raise _kiln.UserError(f"graph '{graph.name}': {len(args)} positional inputs for {what}, "
                              f"the graph has {len(names)} ({', '.join(names)})")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise _kiln.UserError(f"graph '{graph.name}': no input named '{k}' (inputs: "
                                  f"{', '.join(names)})")
        if k in given:
            raise _kiln.UserError(f"graph '{graph.name}': input '{k}' given twice")
        given[k] = v
    missing = [n for n in names if n not in given]
    if missing:
        raise _kiln.UserError(f"graph '{graph.name}': missing input(s) {', '.join(missing)}")
    return given


def _check_shape(where, declared, shape):
    if len(declared) != len(shape):
        raise _kiln.UserError(f"{where}: expected rank {len(declared)} {declared}, found shape "
                              f"{list(shape)}")
    for i, (d, s) in enumerate(zip(declared, shape)):
        if isinstance(d, int) and d != s:
            raise _kiln.UserError(f"{where}: dim {i}: expected {d} (shape {declared}), found "
                                  f"{s} (shape {list(shape)})")


def _host_input(graph, t, value):
    where = f"graph '{graph.name}': input '{t.name}'"
    dt = t.dtype
    arr = np.asarray(value)
    if dt == "bf16" and arr.dtype == np.float32:
        arr = f32_to_bf16_bits(arr)
    elif dt == "bf16" and arr.dtype != np.uint16:
        raise _kiln.UserError(f"{where}: expected bf16 (float32 values or uint16 bits), found "
                              f"numpy {arr.dtype}")
    elif dt != "bf16" and arr.dtype != np.dtype(NUMPY[dt]):
        raise _kiln.UserError(f"{where}: expected {dt} ({np.dtype(NUMPY[dt])}), found numpy "
                              f"{arr.dtype}")
    _check_shape(where, t.shape, arr.shape)
    return (dt, list(arr.shape), np.ascontiguousarray(arr))


def run_reference(graph, inputs, bindings=None, threads=0):
    """Runs `graph` on kiln's CPU reference; inputs {name: numpy array}; returns {output name:
    numpy array} in logical (row-major) order, bf16 as float32."""
    given = _name_inputs(graph, (), inputs, "run_reference")
    host = {t.name: _host_input(graph, t, given[t.name]) for t in graph.inputs}
    out = _kiln._run_reference(graph.native, host, dict(bindings or {}), int(threads))
    return {t.name: to_numpy(*out[t.name]) for t in graph.outputs}


class CompiledGraph:
    """A compiled graph. Call it with torch CUDA tensors (positional in the graph's input order,
    or by name): returns the outputs as torch tensors (one, or a tuple), computed on torch's
    current stream. Call it with numpy arrays: runs on kiln's CPU reference and returns numpy
    arrays."""

    def __init__(self, engine, graph, native):
        self.engine, self.graph, self.native = engine, graph, native
        self._inputs = graph.inputs
        self._outputs = graph.outputs
        self._in_names = [t.name for t in self._inputs]
        self._out_names = [t.name for t in self._outputs]
        self._plans = {}       # (input shapes, extra bindings) -> _Plan
        self._own_workspace = engine.options.cuda_graphs  # kiln's captured graphs keep their own
        self._workspaces = {}  # CUDA stream -> the workspace tensor runs on that stream share

    def kernels(self):
        return self.native.kernels()

    def check_errors(self):
        """With Engine(deferred_errors=True): waits for the index checks of the runs so far and
        raises the located error a run would have raised (nothing to do otherwise)."""
        self.native.check_errors()

    def explain(self):
        return self.engine.explain(self.graph)

    def __call__(self, *args, **kwargs):
        given = _name_inputs(self.graph, args, kwargs, "the call")
        values = list(given.values())
        if any(_is_torch(v) for v in values):
            outs = self.run_torch(given)
        else:
            res = run_reference(self.graph, given)
            outs = [res[t.name] for t in self._outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    # ---- the GPU path
    def _check_torch(self, t, x, device):
        import torch
        where = f"graph '{self.graph.name}': input '{t.name}'"
        if not isinstance(x, torch.Tensor):
            raise _kiln.UserError(f"{where}: expected a torch tensor like the other inputs, found "
                                  f"{type(x).__name__}")
        want = torch_dtypes()[t.dtype]
        if x.dtype != want:
            raise _kiln.UserError(f"{where}: expected {t.dtype} ({want}), found {x.dtype}")
        _check_shape(where, t.shape, tuple(x.shape))
        layout = t.layout
        ok = (x.is_contiguous(memory_format=torch.channels_last) if layout == "NHWC" else
              x.is_contiguous() if layout == "NCHW" else False)
        if not ok:
            hint = ("x.contiguous(memory_format=torch.channels_last)" if layout == "NHWC" else
                    "x.contiguous()")
            raise _kiln.UserError(f"{where}: expected {layout} strides (the graph's layout) for "
                                  f"shape {list(x.shape)}, found strides {list(x.stride())}: "
                                  f"pass {hint}")
        if x.device.type != "cuda":
            raise _kiln.UserError(f"{where}: a {x.device} tensor given to a graph compiled for "
                                  f"the GPU: move it with .cuda(), or pass numpy arrays to run "
                                  f"on kiln's CPU reference")
        engine_device = self.engine.device
        index = x.device.index if x.device.index is not None else torch.cuda.current_device()
        if index != engine_device or (device is not None and x.device != device):
            raise _kiln.UserError(f"{where}: on {x.device}: this engine runs every tensor of a "
                                  f"call on cuda:{engine_device} (Engine(device=N) for cuda:N)")
        return x.device

    def run_torch(self, given, outputs=None, bindings=None):
        """Runs on the GPU on torch tensors: {input name: tensor}; returns the outputs in the
        graph's order (allocated by torch's allocator in each output's layout, or `outputs`, a
        list in the graph's output order). `bindings`: symbols no input shape binds."""
        import torch
        device = None
        for t in self._inputs:
            device = self._check_torch(t, given[t.name], device)
        device = device or torch.device("cuda", self.engine.device)
        xs = [given[n] for n in self._in_names]
        if outputs is None:
            for t in self._outputs:
                if t.layout == "Strided":
                    raise _kiln.UserError(f"graph '{self.graph.name}': output '{t.name}' has "
                                          f"explicit strides: pass its buffer "
                                          f"(run_torch(..., outputs=[...]))")
            return self._launch(xs, device, tuple(sorted((bindings or {}).items())))
        plan = self._plan(tuple(x.shape for x in xs), tuple(sorted((bindings or {}).items())))
        for t, o, (shape, _, _) in zip(self._outputs, outputs, plan.outs):
            self._check_torch(t, o, device)
            _check_shape(f"graph '{self.graph.name}': output '{t.name}'", shape, o.shape)
        self._enqueue(plan, xs, list(outputs), device)
        return list(outputs)

    def _plan(self, shapes, extra, device=None):
        """What a call with these input shapes (and extra bindings) allocates: bound once per
        distinct shape set, so a call with shapes seen before does no binding work."""
        key = (shapes, extra)
        plan = self._plans.get(key)
        if plan is None:
            plan = _Plan(self, shapes, dict(extra))
            if len(self._plans) >= _MAX_PLANS:  # a sweep over many shapes stays bounded
                self._plans.clear()
            self._plans[key] = plan
        if device is not None and plan.templates is None:
            plan.add_templates(device)
        return plan

    def _launch(self, xs, device, extra=()):
        """The per-call path: xs in the graph's input order, their dtypes, devices and layouts
        already checked (by run_torch, or by dynamo's guards for the torch.compile backend);
        returns fresh outputs from torch's allocator, computed on torch's current stream."""
        import torch
        shapes = tuple([x.shape for x in xs])
        plan = self._plans.get((shapes, extra))
        if plan is None or plan.templates is None:
            plan = self._plan(shapes, extra, device)
        empty_like = torch.empty_like
        outs = [empty_like(t) if f is None else empty_like(t, memory_format=f)
                for t, f in plan.templates]
        self._enqueue(plan, xs, outs, device)
        return outs

    def _enqueue(self, plan, xs, outs, device):
        stream = self._raw_stream(device)
        workspace = 0
        if plan.workspace_bytes and not self._own_workspace:
            workspace = self._workspace(stream, plan.workspace_bytes, device)
        plan.run.run([x.data_ptr() for x in xs], [o.data_ptr() for o in outs], stream, workspace)

    def _raw_stream(self, device):
        """torch's current stream on `device`, as a raw handle; the lookup is bound on first use
        (the device of a compiled graph's calls is its engine's)."""
        index = device.index
        if index is None:
            import torch
            index = torch.cuda.current_device()
        raw = _current_stream_fn()
        self._raw_stream = lambda _device: raw(index)
        return raw(index)

    def _workspace(self, stream, nbytes, device):
        """The device address of a workspace of at least nbytes for runs on `stream`. Runs on one
        stream execute in order, so they share one buffer, grown when a larger shape comes; each
        stream has its own. Torch's allocator holds it while this CompiledGraph lives."""
        import torch
        ws = self._workspaces.get(stream)
        if ws is None or ws.numel() < nbytes:
            ws = torch.empty(nbytes, dtype=torch.uint8, device=device)
            self._workspaces[stream] = ws
        return ws.data_ptr()


_MAX_PLANS = 256


class _Plan:
    """One binding of a compiled graph's input shapes: the input shapes as kiln takes them, each
    output's (shape, torch dtype, memory format), the workspace size, and the prepared native
    run that takes only the buffers' addresses. Once a call on a device needs them
    (add_templates), one template per output: (a tensor of the output's shape and dtype on that
    device, owning one element through a zero-stride view; the memory format to ask for, None
    for row-major). torch.empty_like on a template parses no shape, dtype or device: on the
    H200's host it takes 1.9 µs where torch.empty(shape, dtype=, device=, memory_format=) takes
    4.1 µs (docs/PERFORMANCE.md)."""
    __slots__ = ("in_shapes", "outs", "workspace_bytes", "run", "templates")

    def __init__(self, cg, shapes, extra):
        import torch
        self.in_shapes = [list(s) for s in shapes]
        in_shapes = dict(zip(cg._in_names, self.in_shapes))
        bindings = cg.native.bind(in_shapes, extra)
        out_shapes = cg.native.output_shapes(bindings)
        dts = torch_dtypes()
        self.outs = [(out_shapes[t.name], dts[t.dtype],
                      torch.channels_last if t.layout == "NHWC" else torch.contiguous_format)
                     for t in cg._outputs]
        self.workspace_bytes = cg.native.workspace_size(bindings)
        self.run = cg.native.prepare(in_shapes, out_shapes)
        self.templates = None

    def add_templates(self, device):
        self.templates = [_template(s, d, f, device) for s, d, f in self.outs]


def _template(shape, dtype, memory_format, device):
    """A zero-stride view (it has no strides for empty_like to keep: kiln's shapes have no
    empty dim) and the memory format to ask for."""
    import torch
    view = torch.empty((1,) * len(shape), dtype=dtype, device=device).expand(shape)
    return view, None if memory_format is torch.contiguous_format else memory_format


def _current_stream_fn():
    """torch's lookup of the raw handle of the current CUDA stream on a device ordinal (what
    torch's generated code reads: torch.cuda.current_stream() builds a Python Stream object on
    every call)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw or (lambda i: torch.cuda.current_stream(i).cuda_stream)
