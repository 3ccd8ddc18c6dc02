"""kiln: graph-based operation fusion with JIT CUDA kernels (docs/PYTHON.md).

    import kiln
    g = kiln.Graph("mlp")
    x = g.input("x", "f32", ["N", 64])
    w = g.constant("w", np.random.randn(64, 32).astype(np.float32))
    g.output(g.relu(g.matmul(x, w)))
    cg = kiln.Engine().compile(g)
    y = cg(x_cuda_tensor)        # on the GPU, torch's current stream
    y = cg(x_numpy_array)        # on kiln's CPU reference

and torch.compile(model, backend="kiln") (kiln.dynamo). Importing kiln needs no GPU and does not
import torch.
"""
from . import _kiln
from ._kiln import (DriverError, EngineOptions, Error, InternalError, UserError, cuda_available,
                    op_names)
from .engine import CompiledGraph, Engine, run_reference
from .graph import Graph, Tensor, load_graph, load_graph_string
from .onnx import import_onnx

__version__ = _kiln.__version__

__all__ = ["Graph", "Tensor", "Engine", "EngineOptions", "CompiledGraph", "Error", "UserError",
           "InternalError", "DriverError", "load_graph", "load_graph_string", "import_onnx",
           "run_reference", "op_names", "cuda_available", "check_environment",
           "partition_report"]


def check_environment():
    """Checks every KILN_* variable (kiln.UserError naming a bad one); returns what they set."""
    return _kiln._check_environment()


def partition_report():
    """The torch.compile backend's reports, one per FX graph it compiled: which nodes ran in kiln
    and which in eager PyTorch, and why (kiln.dynamo.partition_report)."""
    from .dynamo import partition_report as report
    return report()
