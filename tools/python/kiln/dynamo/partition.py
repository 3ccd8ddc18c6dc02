"""Which FX nodes kiln takes: each node is converted alone (kiln.dynamo.convert.try_node), and
the nodes kiln takes are grouped by torch.fx's CapabilityBasedPartitioner into partitions, each one
kiln graph; the rest runs in eager PyTorch. The reasons are kept for the partition report."""
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .convert import target_name, try_node


class KilnSupport(OperatorSupportBase):
    def __init__(self):
        super().__init__()
        self.why = {}  # node name -> reason it stays in PyTorch

    def is_node_supported(self, submodules, node):
        if node.op != "call_function":
            return False
        why = try_node(node)
        if why is not None:
            self.why[node.name] = why
        return why is None


def partition(gm):
    """(the graph module with kiln's partitions fused into submodules "fused_<i>", the reasons
    by node name of the nodes left out)."""
    support = KilnSupport()
    p = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    parts = p.propose_partitions()
    where = {}
    for part in parts:
        for n in part.nodes:
            where[n.name] = part.id
    fused = p.fuse_partitions(parts)
    return fused, support.why, where


def describe(n):
    return str(n.target) if n.op == "call_function" else n.op
