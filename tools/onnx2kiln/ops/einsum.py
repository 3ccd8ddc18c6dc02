"""Einsum, lowered to kiln transposes, reshapes, reduce_sums and matmuls.

The equation is parsed into one letter list per operand ('...' expands to letters of its own,
aligned from the right as numpy broadcasting aligns them) and the output's (implicit mode: the
letters that appear once, in alphabetical order, after the ellipsis). Then:

  one operand     letters not in the output are summed (reduce_sum), the rest transposed into
                  the output's order;
  two operands    letters only one side has and the output lacks are summed on that side first;
                  the others are batch (both sides and the output: kept as leading dims, which
                  kiln's matmul broadcasts), contracted (both sides, not the output: K), or free
                  (one side and the output: M for A, N for B). A becomes [batch, M, K], B
                  [batch, K, N] (one transpose and one reshape each, when needed), one matmul,
                  then a reshape to [batch, M..., N...] and a transpose into the output's order;
  more operands   contracted left to right, two at a time, each intermediate keeping the letters
                  the later operands or the output need.

A letter repeated within one operand (a diagonal, 'ii->i') is refused. On constant operands
Einsum folds (numpy's einsum; fold.py).
"""
import numpy as np

from ..registry import converter, folder
from ..shapes import bcast, reduced
from .. import symdim

ELLIPSIS_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # stand-ins for '...' dims (lower case first)


class EinsumError(ValueError):
    pass


def _split_term(term):
    """A term's letters and whether (and where) it has '...'."""
    if term.count("...") > 1:
        raise EinsumError(f"term '{term}' has more than one ellipsis")
    head, dots, tail = term.partition("...")
    for c in head + tail:
        if not c.isalpha():
            raise EinsumError(f"term '{term}': '{c}' is not a letter")
    return list(head), bool(dots), list(tail)


def parse_equation(eq, ranks):
    """(operand letter lists, output letter list) of equation `eq` for operands of `ranks`."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise EinsumError(f"equation '{eq}' has {len(terms)} operand terms for {len(ranks)} "
                          f"inputs")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in ELLIPSIS_LETTERS.lower() + ELLIPSIS_LETTERS if c not in used]
    parts = [_split_term(t) for t in terms]
    ell = 0
    for (head, dots, tail), r in zip(parts, ranks):
        n = r - len(head) - len(tail)
        if n < 0 or (n > 0 and not dots):
            raise EinsumError(f"term '{''.join(head)}{'...' if dots else ''}{''.join(tail)}' "
                              f"does not match an operand of rank {r}")
        ell = max(ell, n if dots else 0)
    if ell > len(spare):
        raise EinsumError("too many ellipsis dims")
    ell_letters = spare[:ell]
    ops = []
    for (head, dots, tail), r in zip(parts, ranks):
        n = r - len(head) - len(tail)
        ops.append(head + (ell_letters[ell - n:] if dots else []) + tail)
    if arrow:
        head, dots, tail = _split_term(rhs)
        out = head + (ell_letters if dots else []) + tail
        if not dots and ell:
            raise EinsumError(f"the output '{rhs}' drops the ellipsis dims")
    else:
        counts = {}
        for letters in ops:
            for c in letters:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters + sorted(c for c, k in counts.items() if k == 1 and c not in
                                   ell_letters)
    if len(set(out)) != len(out):
        raise EinsumError(f"the output '{rhs}' repeats a letter")
    for letters in ops:
        if len(set(letters)) != len(letters):
            raise EinsumError("a letter repeated within one operand (a diagonal or trace) is "
                              "not supported")
    for c in out:
        if not any(c in letters for letters in ops):
            raise EinsumError(f"output letter '{c}' is in no operand")
    return ops, out


# ------------------------------------------------------------------------------ emitting

class _Operand:
    """A kiln tensor with one letter per dim."""

    def __init__(self, kt, letters, shape):
        self.kt, self.letters, self.shape = kt, list(letters), list(shape)

    def size(self, c):
        return self.shape[self.letters.index(c)]


def _transpose(cx, n, x, order):
    if order == x.letters:
        return x
    perm = [x.letters.index(c) for c in order]
    shape = [x.shape[p] for p in perm]
    kt = cx.emit(n, "transpose", [x.kt], {"perm": perm}, shape=shape, suffix="perm")
    return _Operand(kt, order, shape)


def _reshape(cx, n, kt, shape, target, out=None):
    """A reshape of kiln tensor kt (shape `shape`) to `target` (dims of one group multiplied)."""
    if target == shape and out is None:
        return kt
    if None in target:
        cx.fail(n, f"cannot reshape {shape} to {target}: a dim is unknown at conversion time")
    return cx.emit(n, "reshape", [kt], {"shape": target}, out=out, shape=target,
                   suffix=None if out else "flat")


def _sum_out(cx, n, x, drop):
    """x with the letters `drop` summed away."""
    if not drop:
        return x
    axes = sorted(x.letters.index(c) for c in drop)
    shape = reduced(x.shape, set(axes), False)
    kt = cx.emit(n, "reduce_sum", [x.kt], {"axes": axes, "keepdims": 0}, shape=shape,
                 suffix="sum")
    return _Operand(kt, [c for c in x.letters if c not in drop], shape)


def _dims(x, group):
    return [x.size(c) for c in group]


def _contract(cx, n, a, b, keep):
    """a and b contracted over their shared letters that `keep` lacks; returns an _Operand whose
    letters are batch + M + N."""
    a = _sum_out(cx, n, a, [c for c in a.letters if c not in b.letters and c not in keep])
    b = _sum_out(cx, n, b, [c for c in b.letters if c not in a.letters and c not in keep])
    batch = [c for c in a.letters if c in b.letters and c in keep]
    contract = [c for c in a.letters if c in b.letters and c not in keep]
    m = [c for c in a.letters if c not in b.letters]
    nn = [c for c in b.letters if c not in a.letters]
    for c in contract:
        sa, sb = a.size(c), b.size(c)
        if not symdim.same(sa, sb) and sa is not None and sb is not None:
            cx.fail(n, f"contracted letter '{c}' has sizes {sa} and {sb}")
    a = _transpose(cx, n, a, batch + m + contract)
    b = _transpose(cx, n, b, batch + contract + nn)
    ab = _dims(a, batch)
    bb = _dims(b, batch)
    ma, kd, nd = _dims(a, m), _dims(a, contract), _dims(b, nn)
    mk = [symdim.product(ma), symdim.product(kd)]
    kn = [symdim.product(_dims(b, contract)), symdim.product(nd)]
    akt = _reshape(cx, n, a.kt, a.shape, ab + mk)
    bkt = _reshape(cx, n, b.kt, b.shape, bb + kn)
    batch_shape = bcast(ab, bb) if batch else []
    y = cx.emit(n, "matmul", [akt, bkt], shape=batch_shape + [mk[0], kn[1]], suffix="mm")
    full = batch_shape + ma + nd
    yk = _reshape(cx, n, y, batch_shape + [mk[0], kn[1]], full)
    return _Operand(yk, batch + m + nn, full)


def lower(cx, n, xs, ops, out):
    """Emits the einsum of kiln tensors xs (letter lists `ops`) into ONNX output n.output[0]."""
    cur = _Operand(xs[0], ops[0], cx.shp(xs[0]))
    for i in range(1, len(xs)):
        later = set(out).union(*[set(o) for o in ops[i + 1:]])
        cur = _contract(cx, n, cur, _Operand(xs[i], ops[i], cx.shp(xs[i])), later)
    cur = _sum_out(cx, n, cur, [c for c in cur.letters if c not in out])
    cur = _transpose(cx, n, cur, list(out))
    last = cx.nodes[-1] if cx.nodes else None
    if last is not None and last["outputs"] == [cur.kt] and cx.origin.get(last["name"]) is n:
        # The last kiln node defines the ONNX output itself (no identity for a graph output).
        kt = cx.tnames.get(n.output[0])
        last["outputs"] = [kt]
        cx.shape[kt], cx.dtype[kt] = cx.shape.pop(cur.kt), cx.dtype.pop(cur.kt)
        cx.tmap[n.output[0]] = kt
    else:
        cx.alias(n, cur.kt)


def _equation(cx, n, at):
    eq = at.get("equation")
    if eq is None:
        cx.fail(n, "Einsum needs its equation attribute")
    return eq.decode() if isinstance(eq, bytes) else eq


@converter("Einsum")
def einsum(cx, n, at):
    eq = _equation(cx, n, at)
    if not n.input:
        cx.fail(n, "Einsum needs at least one input")
    dt = cx.act_dtype(*n.input)
    xs = [cx.act(n, t, dt) for t in n.input]
    shapes = [cx.shp(x) for x in xs]
    if any(s is None for s in shapes):
        cx.fail(n, "needs the ranks of its inputs")
    try:
        ops, out = parse_equation(eq, [len(s) for s in shapes])
    except EinsumError as e:
        cx.fail(n, f"equation '{eq}': {e}")
    lower(cx, n, xs, ops, out)


@folder("Einsum")
def fold_einsum(ins, at):
    eq = at.get("equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    if any(isinstance(a, np.ndarray) and a.dtype == object for a in ins):
        return None
    parse_equation(eq, [np.ndim(a) for a in ins])  # the same refusals as the lowering
    return np.einsum(eq, *ins)
