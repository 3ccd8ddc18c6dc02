"""The backend's process-wide state: its counters, the kiln graphs it built and one Engine per
CUDA device, shared by every graph torch.compile hands it."""
import weakref

from ..engine import Engine

STATS = {"graphs": 0, "kiln_graphs_built": 0, "engine_compiles": 0, "kiln_runs": 0,
         "reference_runs": 0, "fallbacks": 0}
ENGINES = []
GRAPHS = []  # the kiln graphs built, oldest first (kiln_graphs())
COMPILED = weakref.WeakSet()  # the compiled graphs alive (check_errors())


def stats():
    """Backend counters: FX graphs compiled, kiln graphs built and compiled, runs (on the GPU,
    on the CPU reference), graphs that fell back to eager because the Engine refused them, and
    the shared Engine's counters ("engine") once there is one."""
    out = dict(STATS)
    if ENGINES:
        out["engine"] = ENGINES[0].stats()
    return out


def kiln_graphs():
    """The kiln graphs the backend built (kiln.Graph: explain(), save(), run_reference())."""
    return list(GRAPHS)


def reset():
    for k in STATS:
        STATS[k] = 0
    ENGINES.clear()
    GRAPHS.clear()


def engine(options, device=0):
    """The backend's engine for CUDA device `device` (one per device, made on first use). Its
    runs check their gathers' indices without waiting (deferred_errors), as torch's own kernels
    report a device-side assert at a later call: a model with an embedding otherwise waits for
    the GPU at every call, and the next call's host work (dynamo's guards) cannot overlap it."""
    for e in ENGINES:
        if e.device == device:
            return e
    ENGINES.append(Engine(**{"deferred_errors": True, **options, "device": device}))
    return ENGINES[-1]


def check_errors():
    """Waits for the deferred error checks of every compiled kiln graph: raises kiln's located
    error (an index out of range in an earlier call) when one reported."""
    for cg in list(COMPILED):
        cg.check_errors()
