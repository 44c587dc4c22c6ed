"""A small expression type for the relaxation formulas, and its evaluation
on torch tensors.

The formulas of :mod:`netgen.relax.formulas` (each distribution's cdf and
pdf, ART's phi and phi', the swap probability and its derivatives) are
built once from these nodes; renderers turn them into torch tensor ops
(:func:`evaluate`, used by the reference), torch source and scalar
numba/CUDA source (:mod:`netgen.codegen.render`). Nodes are immutable and
compare structurally, so equal subexpressions are shared (computed once)
by every renderer.

Operations (``E.op``): ``var`` (a named input), ``const`` (a float),
``big`` (the largest finite value of the compute dtype), ``add``, ``sub``,
``mul``, ``div``, ``neg``, ``pow`` (constant exponent), ``abs``, ``exp``,
``atan``, ``erf``, ``sqrt``, ``sigmoid``, ``ncdf`` (the standard normal
CDF), ``copysign``, ``min``, ``max``, ``where`` and the comparisons ``lt``,
``le``, ``gt``, ``ge``. Python operators build nodes (``z * z + 1``);
constant operands are folded where that is exact (``x + 0``, ``x * 1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Union

__all__ = [
    "E", "var", "const", "BIG", "abs_", "exp", "atan", "erf", "sqrt", "sigmoid", "ncdf",
    "copysign", "minimum", "maximum", "where", "clamp", "evaluate", "LOWERINGS", "UNARY", "BINARY",
]

UNARY = ("neg", "abs", "exp", "atan", "erf", "sqrt", "sigmoid", "ncdf")
BINARY = ("add", "sub", "mul", "div", "pow", "copysign", "min", "max", "lt", "le", "gt", "ge")

Operand = Union["E", float, int]


@dataclass(frozen=True)
class E:
    """An expression node: ``op`` and its ``args`` (child nodes, or the
    name of a ``var`` / the value of a ``const``)."""

    op: str
    args: tuple[Any, ...] = ()

    # arithmetic -----------------------------------------------------------
    def __add__(self, o: Operand) -> "E":
        o = _e(o)
        if o.is_const(0.0):
            return self
        return E("add", (self, o))

    def __radd__(self, o: Operand) -> "E":
        return _e(o) + self

    def __sub__(self, o: Operand) -> "E":
        o = _e(o)
        if o.is_const(0.0):
            return self
        return E("sub", (self, o))

    def __rsub__(self, o: Operand) -> "E":
        return _e(o) - self

    def __mul__(self, o: Operand) -> "E":
        o = _e(o)
        if o.is_const(1.0):
            return self
        if self.is_const(1.0):
            return o
        return E("mul", (self, o))

    def __rmul__(self, o: Operand) -> "E":
        return _e(o) * self

    def __truediv__(self, o: Operand) -> "E":
        o = _e(o)
        if o.is_const(1.0):
            return self
        return E("div", (self, o))

    def __rtruediv__(self, o: Operand) -> "E":
        return _e(o) / self

    def __neg__(self) -> "E":
        if self.op == "const":
            return const(-self.args[0])
        return E("neg", (self,))

    def __pow__(self, q: float) -> "E":
        q = float(q)
        if q == 1.0:
            return self
        return E("pow", (self, const(q)))

    # comparisons build nodes (structural equality stays ==) ------------------
    def __lt__(self, o: Operand) -> "E":  # type: ignore[override]
        return E("lt", (self, _e(o)))

    def __le__(self, o: Operand) -> "E":  # type: ignore[override]
        return E("le", (self, _e(o)))

    def __gt__(self, o: Operand) -> "E":  # type: ignore[override]
        return E("gt", (self, _e(o)))

    def __ge__(self, o: Operand) -> "E":  # type: ignore[override]
        return E("ge", (self, _e(o)))

    def is_const(self, value: float | None = None) -> bool:
        return self.op == "const" and (value is None or self.args[0] == value)

    def __repr__(self) -> str:
        if self.op in ("var", "const"):
            return str(self.args[0])
        if self.op == "big":
            return "BIG"
        return f"{self.op}({', '.join(map(repr, self.args))})"


def _e(x: Operand) -> E:
    if isinstance(x, E):
        return x
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"cannot use {type(x).__name__} in an expression")
    return const(x)


def var(name: str) -> E:
    return E("var", (name,))


def const(v: float) -> E:
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"expression constants must be finite, got {v}")
    return E("const", (v,))


#: the largest finite value of the compute dtype (clamps)
BIG = E("big")


def _unary(op: str):
    def f(x: Operand) -> E:
        return E(op, (_e(x),))

    f.__name__ = op
    return f


abs_ = _unary("abs")
exp = _unary("exp")
atan = _unary("atan")
erf = _unary("erf")
sqrt = _unary("sqrt")
sigmoid = _unary("sigmoid")
ncdf = _unary("ncdf")


def copysign(x: Operand, y: Operand) -> E:
    """|x| with the sign of y."""
    return E("copysign", (_e(x), _e(y)))


def minimum(x: Operand, y: Operand) -> E:
    return E("min", (_e(x), _e(y)))


def maximum(x: Operand, y: Operand) -> E:
    return E("max", (_e(x), _e(y)))


def where(c: E, a: Operand, b: Operand) -> E:
    return E("where", (c, _e(a), _e(b)))


def clamp(x: Operand, lo: Operand, hi: Operand) -> E:
    return minimum(maximum(x, lo), hi)


# -------------------------------------------------------------- torch tensors
def evaluate(exprs: dict[str, E], env: dict[str, Any], dtype) -> dict[str, Any]:
    """Evaluate ``exprs`` with torch on the tensors in ``env`` (all of
    ``dtype``); shared subexpressions are computed once."""
    import torch

    big = torch.finfo(dtype).max
    memo: dict[E, Any] = {}

    def ev(e: E):
        if e in memo:
            return memo[e]
        op, a = e.op, e.args
        if op == "var":
            out = env[a[0]]
        elif op == "const":
            out = a[0]
        elif op == "big":
            out = big
        elif op in _TORCH:
            out = _TORCH[op](torch, *[ev(c) for c in a])
        else:
            out = ev(LOWERINGS[op](*a))
        memo[e] = out
        return out

    return {name: ev(e) for name, e in exprs.items()}


def _min(torch, x, y):
    if not isinstance(y, torch.Tensor):
        return x.clamp_max(y)
    if not isinstance(x, torch.Tensor):
        return y.clamp_max(x)
    return torch.minimum(x, y)


def _max(torch, x, y):
    if not isinstance(y, torch.Tensor):
        return x.clamp_min(y)
    if not isinstance(x, torch.Tensor):
        return y.clamp_min(x)
    return torch.maximum(x, y)


# ------------------------------------------------------------------ lowerings
def lower_sigmoid(x: E) -> E:
    """1 / (1 + e^-x) from one exponential of -|x| (never overflows):
    1 / (1 + e^-|x|) for x >= 0, e^-|x| / (1 + e^-|x|) below."""
    ex = exp(-abs_(x))
    inv = 1.0 / (1.0 + ex)
    return where(x >= 0.0, inv, ex * inv)


def lower_ncdf(x: E) -> E:
    """The standard normal CDF by erf."""
    return 0.5 * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))


#: expression-level definitions of the composite ops, for renderers without
#: a native (or a rewritten) form of them
LOWERINGS = {"sigmoid": lower_sigmoid, "ncdf": lower_ncdf}

_TORCH = {
    "add": lambda t, x, y: x + y,
    "sub": lambda t, x, y: x - y,
    "mul": lambda t, x, y: x * y,
    "div": lambda t, x, y: x / y,
    "neg": lambda t, x: -x,
    "pow": lambda t, x, q: x**q,
    "abs": lambda t, x: x.abs(),
    "exp": lambda t, x: t.exp(x),
    "atan": lambda t, x: t.atan(x),
    "erf": lambda t, x: t.erf(x),
    "sqrt": lambda t, x: t.sqrt(x),
    "sigmoid": lambda t, x: t.sigmoid(x),
    "copysign": lambda t, x, y: t.copysign(x, y),
    "min": _min,
    "max": _max,
    "where": lambda t, c, a, b: t.where(c, a, b),
    "lt": lambda t, x, y: x < y,
    "le": lambda t, x, y: x <= y,
    "gt": lambda t, x, y: x > y,
    "ge": lambda t, x, y: x >= y,
}
