"""The converter registry: CONVERTERS[op overload packet name] =
fn(cx, node, args, kwargs) -> a kiln Tensor or a tuple of them. `args` are the node's arguments
with FX nodes replaced by their kiln tensors (or dim values for symbolic sizes). A converter raises
Unsupported with the reason for what kiln cannot take; the partitioner leaves that node to eager
PyTorch. The converters are the modules of kiln/dynamo/ops/."""
CONVERTERS = {}


class Unsupported(Exception):
    pass


def converter(*names):
    def reg(fn):
        for n in names:
            CONVERTERS[n] = fn
        return fn
    return reg


def need(cond, why):
    if not cond:
        raise Unsupported(why)


def _axis(d, rank):
    return d + rank if d < 0 else d
