"""Symbolic dims: polynomials over kiln symbols with integer coefficients.

Shapes the importer derives hold ints, kiln symbols (`"N"`), expressions of them (`"N*S"`,
`"S+1"`) or None (unknown). Exporters compute shapes at run time (Shape -> Gather -> Mul ->
Concat -> Reshape); folding those computations with polynomials keeps such a target a dim list
kiln can read, and gives every size one canonical text, so that equal sizes compare equal however
they were built (`N*S*64/64` is `N*S`). The text follows kiln's canonical form (docs/graph_format.md:
higher degree first, then by the factors' text, the constant last), so a dim the importer writes
reads back from `kiln check` as the same string.

Only exact division is kept (a polynomial over an int that divides every coefficient, or over a
monomial that divides every term); anything else (floor division that does not divide, Mod of a
symbol) is unknown, None.
"""
import re

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")


class Poly:
    """sum(coef * prod(symbols)); `terms` maps a sorted tuple of symbols (a monomial, a symbol
    repeated for a power) to a non-zero int."""
    __slots__ = ("terms",)

    def __init__(self, terms=None):
        self.terms = {k: v for k, v in (terms or {}).items() if v != 0}

    # ---------------------------------------------------------------- making
    @staticmethod
    def const(c):
        return Poly({(): int(c)})

    @staticmethod
    def sym(s):
        return Poly({(s,): 1})

    @staticmethod
    def of(v):
        """The polynomial of a dim value (int, symbol or expression text, Poly); None when v is
        unknown or its text is no polynomial kiln and this module share."""
        if v is None or isinstance(v, bool):
            return None
        if isinstance(v, Poly):
            return v
        if isinstance(v, str):
            return parse(v)
        try:
            return Poly.const(int(v))
        except (TypeError, ValueError):
            return None

    # ---------------------------------------------------------------- arithmetic
    def __add__(self, o):
        t = dict(self.terms)
        for k, v in o.terms.items():
            t[k] = t.get(k, 0) + v
        return Poly(t)

    def __neg__(self):
        return Poly({k: -v for k, v in self.terms.items()})

    def __sub__(self, o):
        return self + (-o)

    def __mul__(self, o):
        t = {}
        for ka, va in self.terms.items():
            for kb, vb in o.terms.items():
                k = tuple(sorted(ka + kb))
                t[k] = t.get(k, 0) + va * vb
        return Poly(t)

    def __eq__(self, o):
        return isinstance(o, Poly) and self.terms == o.terms

    def __hash__(self):
        return hash(tuple(sorted(self.terms.items())))

    def div(self, o):
        """self / o when it divides exactly (a constant dividing every coefficient, or a monomial
        dividing every term), else None."""
        if len(o.terms) != 1:
            if self == o:
                return Poly.const(1)
            c = _ratio(self, o)
            return Poly.const(c) if c is not None else None
        (mk, mc), = o.terms.items()
        out = {}
        for k, v in self.terms.items():
            rest = list(k)
            for s in mk:
                if s not in rest:
                    return None
                rest.remove(s)
            if v % mc:
                return None
            out[tuple(rest)] = v // mc
        return Poly(out)

    # ---------------------------------------------------------------- reading
    def value(self):
        """The int this polynomial is, or None when it has symbols."""
        if not self.terms:
            return 0
        if list(self.terms) == [()]:
            return self.terms[()]
        return None

    def symbols(self):
        return sorted({s for k in self.terms for s in k})

    def dim(self):
        """An int when constant, else the canonical text (a bare symbol stays itself)."""
        v = self.value()
        return v if v is not None else text(self)

    def __repr__(self):
        return f"Poly({text(self)!r})"


def _ratio(a, b):
    """The int c with a == c * b, or None."""
    c = None
    if set(a.terms) != set(b.terms):
        return None
    for k, v in a.terms.items():
        if v % b.terms[k]:
            return None
        q = v // b.terms[k]
        if c is not None and q != c:
            return None
        c = q
    return c


def _term_text(k, c, first):
    factors = "*".join(k)
    mag = abs(c)
    body = factors if mag == 1 and factors else (f"{mag}*{factors}" if factors else str(mag))
    if first:
        return ("-" if c < 0 else "") + body
    return ("-" if c < 0 else "+") + body


def text(p):
    """kiln's canonical text: terms by degree (highest first), then by their factors' text; the
    constant last; the coefficient first in a term."""
    if not p.terms:
        return "0"
    keys = sorted(p.terms, key=lambda k: (-len(k), "*".join(k) + "*" if k else "~"))
    return "".join(_term_text(k, p.terms[k], i == 0) for i, k in enumerate(keys))


# ------------------------------------------------------------------------------ parsing

class _Parser:
    def __init__(self, s):
        self.toks = []
        for m in _TOKEN.finditer(s):
            if m.group(0).strip() == "":
                continue
            self.toks.append(m.group(1) or m.group(2) or m.group(3))
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def eat(self, t):
        if self.peek() == t:
            self.i += 1
            return True
        return False

    def sum(self):
        p = self.product()
        while True:
            if self.eat("+"):
                p = p + self.product()
            elif self.eat("-"):
                p = p - self.product()
            else:
                return p

    def product(self):
        p = self.atom()
        while True:
            if self.eat("*"):
                p = p * self.atom()
            elif self.eat("/"):
                q = p.div(self.atom())
                if q is None:
                    raise ValueError("inexact division")
                p = q
            else:
                return p

    def atom(self):
        t = self.peek()
        if t is None:
            raise ValueError("unexpected end")
        self.i += 1
        if t == "-":
            return -self.atom()
        if t == "(":
            p = self.sum()
            if not self.eat(")"):
                raise ValueError("')' expected")
            return p
        if t.isdigit():
            return Poly.const(int(t))
        if t[0].isalpha() or t[0] == "_":
            return Poly.sym(t)
        raise ValueError(f"unexpected {t!r}")


def parse(s):
    """The polynomial of dim text s, or None (not a polynomial: a floor division that does not
    divide, a syntax kiln would refuse)."""
    try:
        p = _Parser(s)
        out = p.sum()
        return out if p.peek() is None else None
    except (ValueError, RecursionError):
        return None


# ------------------------------------------------------------------------------ dims

def canon(v):
    """Dim value v in canonical form: an int, a canonical text, or None (unknown)."""
    p = Poly.of(v)
    return None if p is None else p.dim()


def is_dim_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def same(a, b):
    """Whether dims a and b are equal sizes (None is equal to nothing)."""
    pa, pb = Poly.of(a), Poly.of(b)
    return pa is not None and pa == pb


def binop(op, a, b):
    """ONNX integer arithmetic (Add, Sub, Mul, Div truncating, Mod of ints) on dim values; the
    result in canonical form, None when it is no polynomial or an operand is unknown."""
    pa, pb = Poly.of(a), Poly.of(b)
    if pa is None or pb is None:
        return None
    va, vb = pa.value(), pb.value()
    if op == "Add":
        return (pa + pb).dim()
    if op == "Sub":
        return (pa - pb).dim()
    if op == "Mul":
        return (pa * pb).dim()
    if op == "Div":
        if va is not None and vb is not None:
            return int(va / vb) if vb else None
        q = pa.div(pb)
        return q.dim() if q is not None else None
    if op in ("Max", "Min"):
        return _max_min(op, pa, pb)
    if op == "Mod" and vb is not None and vb != 0:
        if va is not None:
            return va % vb  # ONNX Mod with fmod 0: the divisor's sign, as Python's %
        if all(c % vb == 0 for c in pa.terms.values()):
            return 0
    return None


def _max_min(op, pa, pb):
    """Max / Min of two dims when decided: ints, equal sizes, or a number at most a size's least
    value (Max(N, 1) is N)."""
    va, vb = pa.value(), pb.value()
    if va is not None and vb is not None:
        return max(va, vb) if op == "Max" else min(va, vb)
    if pa == pb:
        return pa.dim()
    for p, v in ((pa, vb), (pb, va)):
        lo = least(p)
        if v is not None and lo is not None and v <= lo:
            return p.dim() if op == "Max" else v
    return None


def total(dims):
    """The sum of dims (canonical), None when one is unknown."""
    out = Poly.const(0)
    for d in dims:
        p = Poly.of(d)
        if p is None:
            return None
        out = out + p
    return out.dim()


def product(dims):
    """The product of dims (canonical), None when one is unknown."""
    out = Poly.const(1)
    for d in dims:
        p = Poly.of(d)
        if p is None:
            return None
        out = out * p
    return out.dim()


def quotient(a, b):
    """a / b when exact (canonical), else None."""
    pa, pb = Poly.of(a), Poly.of(b)
    if pa is None or pb is None:
        return None
    q = pa.div(pb)
    return q.dim() if q is not None else None


def compare(op, a, b):
    """Equal / Less / ... of two dims when it is decided at conversion time (ints, or equal
    polynomials for Equal), else None. Sizes are positive: `N == 1` is undecided."""
    pa, pb = Poly.of(a), Poly.of(b)
    if pa is None or pb is None:
        return None
    va, vb = pa.value(), pb.value()
    if va is not None and vb is not None:
        return {"Equal": va == vb, "Less": va < vb, "LessOrEqual": va <= vb,
                "Greater": va > vb, "GreaterOrEqual": va >= vb}[op]
    if pa == pb:
        return op in ("Equal", "LessOrEqual", "GreaterOrEqual")
    # A size against a number below its least value (every symbol is at least 1): N == -1 is
    # False, N > 0 is True.
    if vb is not None and (lo := least(pa)) is not None and vb < lo:
        return {"Equal": False, "Less": False, "LessOrEqual": False, "Greater": True,
                "GreaterOrEqual": True}[op]
    if va is not None and (lo := least(pb)) is not None and va < lo:
        return {"Equal": False, "Less": True, "LessOrEqual": True, "Greater": False,
                "GreaterOrEqual": False}[op]
    return None


def least(p):
    """The least value of a size polynomial whose coefficients are all positive (each symbol
    at least 1): the sum of its coefficients; None when a coefficient is negative."""
    if any(c < 0 for c in p.terms.values()):
        return None
    return sum(p.terms.values())
