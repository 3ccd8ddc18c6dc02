"""F.interpolate kept whole. aot_autograd decomposes nearest and bilinear upsampling into index
tensors, gathers and lerps in f32 (LR-ASPP, FCN and DeepLab heads, UNet decoders): several
passes over the upsampled tensor where kiln's resize makes one. Before lowering, each
interpolate of a 4-D tensor to static spatial sizes becomes kiln::resize2d, an opaque custom op
that runs F.interpolate when eager PyTorch runs it and converts to kiln's resize."""
import inspect
import math

import torch
import torch.nn.functional as F


@torch.library.custom_op("kiln::resize2d", mutates_args=())
def resize2d(x: torch.Tensor, size: list[int], mode: str, align_corners: bool) -> torch.Tensor:
    return F.interpolate(x, size=size, mode=mode,
                         align_corners=align_corners if mode == "bilinear" else None)


@resize2d.register_fake
def _resize2d_fake(x, size, mode, align_corners):
    cl = x.dim() == 4 and not x.is_contiguous() and \
        x.is_contiguous(memory_format=torch.channels_last)
    return x.new_empty(list(x.shape[:2]) + list(size)).contiguous(
        memory_format=torch.channels_last if cl else torch.contiguous_format)


_SIG = inspect.signature(F.interpolate)


def _resize_args(n):
    """(x, [H', W'], mode, align_corners) for an interpolate node kiln's resize computes the same,
    else None. A scale factor is only taken where size x scale is the output size exactly: torch
    maps coordinates by 1 / scale then (unless recompute_scale_factor), and by size ratios when
    a size is given."""
    try:
        b = _SIG.bind(*n.args, **n.kwargs)
    except TypeError:
        return None
    a = {**{k: p.default for k, p in _SIG.parameters.items()}, **b.arguments}
    x, out = a["input"], n.meta.get("example_value")
    xv = x.meta.get("example_value") if isinstance(x, torch.fx.Node) else None
    if a["mode"] not in ("nearest", "bilinear") or a["antialias"] or \
            not isinstance(xv, torch.Tensor) or xv.dim() != 4 or not isinstance(out, torch.Tensor):
        return None
    size = list(out.shape[2:])
    if not all(isinstance(d, int) for d in size + list(xv.shape[2:])):
        return None
    if a["size"] is None:
        s = a["scale_factor"]
        scales = list(s) if isinstance(s, (list, tuple)) else [s, s]
        if any(not isinstance(v, (int, float)) or d_in * v != d_out
               for v, d_in, d_out in zip(scales, xv.shape[2:], size)):
            return None
        # nearest floors dst * (1 / scale) in f32: the same rows as kiln's dst / (out / in)
        # only where 1 / scale is exact (powers of two); bilinear's weights differ by an ulp
        if a["mode"] == "nearest" and not a["recompute_scale_factor"] and \
                any(float(v) <= 0 or math.frexp(float(v))[0] != 0.5 for v in scales):
            return None
    return x, size, a["mode"], bool(a["align_corners"])


def keep_interpolate(gm):
    """Rewrites the interpolate calls of a dynamo graph in place; returns how many."""
    count = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not F.interpolate:
            continue
        args = _resize_args(n)
        if args is None:
            continue
        with gm.graph.inserting_before(n):
            new = gm.graph.call_function(torch.ops.kiln.resize2d.default, args)
        new.meta = dict(n.meta)
        n.replace_all_uses_with(new)
        gm.graph.erase_node(n)
        count += 1
    if count:
        gm.recompile()
    return count
