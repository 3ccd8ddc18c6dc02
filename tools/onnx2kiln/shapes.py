"""Shape arithmetic the converters need *during* conversion.

A shape here is a list of dims, each an int, a kiln symbol (str) or None (unknown). These shapes
decide conversions (a Shape node folds to them; a reshape target, a conv's padding, a fusion's
channel count are computed from them), so they cannot wait for kiln. kiln's own shape inference
checks them afterwards: the written graph goes through `kiln check --json` (check.py), and a dim
the importer got wrong is reported as a bug.
"""
from . import symdim


def bcast(a, b):
    """numpy broadcasting of two shapes. A symbol against an int takes the int (the symbol must
    be 1 or equal at run time; kiln checks)."""
    if a is None or b is None:
        return None
    r = max(len(a), len(b))
    a = [1] * (r - len(a)) + list(a)
    b = [1] * (r - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x == y:
            out.append(x)
        elif isinstance(x, int):
            out.append(x)
        elif isinstance(y, int):
            out.append(y)
        else:
            out.append(x if x is not None else y)
    return out


def window(size, pad_total, k, s, d):
    """Output size of a conv/pool window along one dim (None unless `size` is static)."""
    if not isinstance(size, int):
        return None
    return (size + pad_total - (d * (k - 1) + 1)) // s + 1


def window_dims(sizes, pads, kernel, strides, dils):
    """Output sizes of a conv/pool over spatial `sizes`; pads are [begin..., end...]."""
    nsp = len(kernel)
    return [window(sizes[i], pads[i] + pads[nsp + i], kernel[i], strides[i], dils[i])
            for i in range(nsp)]


def mm_shape(sa, sb, ta=False, tb=False):
    """The shape of matmul(a, b) (batch dims broadcast), with transposes of the last two dims."""
    if sa is None or sb is None:
        return None
    m = sa[-1] if ta else sa[-2]
    nn = sb[-2] if tb else sb[-1]
    return (bcast(sa[:-2], sb[:-2]) or []) + [m, nn]


def reshape_shape(x, target):
    """Output shape of a reshape (0 copies, -1 inferred) with symbols, None when unknown."""
    if x is None:
        return [None if (isinstance(v, int) and v == -1) else v for v in target]
    out = []
    for i, v in enumerate(target):
        out.append(x[i] if (isinstance(v, int) and v == 0 and i < len(x)) else v)
    if any(isinstance(v, int) and v == -1 for v in out):
        i = next(j for j, v in enumerate(out) if isinstance(v, int) and v == -1)
        out[i] = inferred_dim(x, [v for j, v in enumerate(out) if j != i])
    return out


def inferred_dim(x, known):
    """The dim a reshape's -1 stands for: the element count of x over that of the `known` dims,
    as a polynomial over the symbols (`[N, S, 64]` over `[64]` is `N*S`); None when unknown or
    not an exact quotient."""
    if None in x or None in known:
        return None
    return symdim.quotient(symdim.product(x), symdim.product(known))


def reduced(s, axes, keep):
    """The shape of a reduction of s over `axes` (a set), keeping them as 1 when `keep`."""
    out = []
    for i in range(len(s)):
        if i not in axes:
            out.append(s[i])
        elif keep:
            out.append(1)
    return out


def one_dim(part):
    """The dims of `part` multiplied into one kiln dim: an int, a symbol, or a product of them
    (`N*S`); None when a dim is unknown."""
    return symdim.product(part)
