"""Render relaxation expressions (:mod:`netgen.relax.expr`) as Python
source: straight-line assignments, each shared subexpression computed once
(bound to a name from a :class:`~netgen.codegen.literals.Namespace`),
constants written by the one literal writer.

Two renderers share the machinery of :class:`SourceRenderer`:

* :class:`TorchSource`: torch tensor code (the torch target's ``_swap``);
  clamps become ``clamp``/``clamp_min``/``clamp_max``.
* :class:`ScalarSource`: scalar code for numba ``njit`` and ``cuda.jit``
  kernels (``math`` functions, conditional expressions that compile to
  selects), in the kernel's float type. Its *rewrites* replace expressions
  by equivalent forms that vectorise or are cheaper, never changing what is
  computed beyond rounding: ``sigmoid`` and the normal CDF by one
  exponential, ART's 1/4 and 1/2 powers by square roots (sharing one root
  between phi and phi'), and in float32 the arctangent (Cephes range
  reduction and odd polynomial) and the normal CDF (exp times a fit of
  erfcx) inline, plus, with ``inline_exp``, the exponential of a
  non-positive argument without a libm call.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..relax.expr import LOWERINGS, E, abs_, const, exp, maximum, sqrt, where
from .literals import Namespace, literal

__all__ = ["SourceRenderer", "TorchSource", "ScalarSource", "scalar_literal"]

_ATOM = re.compile(r"^[\w.]+$")


def _wrap(text: str, atomic: bool) -> str:
    return text if atomic or _ATOM.match(text) else f"({text})"


class SourceRenderer:
    """Expressions -> lines of Python. Subclasses give ``leaf``, ``node``
    and optionally ``rewrite``; :meth:`render` does rewriting, sharing and
    ordering."""

    prefix = ""

    def __init__(self, env: dict[str, str], reserved=()) -> None:
        self.raw: list[str] = []
        self.env = dict(env)
        self.names = Namespace(set(reserved) | set(self.env.values()))
        self.lines: list[str] = []
        self._rw: dict[E, E] = {}
        self._bound: dict[E, str] = {}

    # -- hooks ------------------------------------------------------------
    def rewrite(self, e: E) -> E:
        """An equivalent expression to render instead of ``e`` (children
        already rewritten); default: composite ops by their lowering."""
        if e.op in LOWERINGS:
            return LOWERINGS[e.op](*e.args)
        return e

    def leaf(self, e: E) -> str:
        raise NotImplementedError

    def node(self, e: E, args: list[str]) -> tuple[str, bool]:
        """Source of ``e`` from its (wrapped) argument sources, and whether
        that text is atomic (needs no parentheses as an operand)."""
        raise NotImplementedError

    def statement(self, e: E, args: list[str]) -> str | None:
        """Optionally emit lines computing ``e`` and return the name bound;
        None renders ``e`` as an expression."""
        return None

    # -- machinery --------------------------------------------------------
    def bind(self, hint: str, text: str) -> str:
        name = self.names.create(self.prefix + hint)
        self.lines.append(f"{name} = {text}")
        return name

    def _rewritten(self, e: E) -> E:
        if e in self._rw:
            return self._rw[e]
        if e.op in ("var", "const", "big"):
            out = e
        else:
            kids = tuple(self._rewritten(c) if isinstance(c, E) else c for c in e.args)
            base = E(e.op, kids)
            out = self.rewrite(base)
            if out != base:
                out = self._rewritten(out)
        self._rw[e] = out
        return out

    def render(self, groups: list[dict[str, E]]) -> list[list[str]]:
        """Lines for each group of ``{output name: expression}``; later
        groups reuse what earlier ones computed."""
        groups = [{k: self._rewritten(v) for k, v in g.items()} for g in groups]
        uses: dict[E, int] = {}

        def count(e: E) -> None:
            uses[e] = uses.get(e, 0) + 1
            if uses[e] == 1 and e.op not in ("var", "const", "big"):
                for c in e.args:
                    if isinstance(c, E):
                        count(c)

        for g in groups:
            for e in g.values():
                count(e)
        for g in groups:
            for name in g:
                if name not in self.names:
                    self.names.define(name)
        out = []
        for g in groups:
            self.lines = []
            for name, e in g.items():
                text, _ = self._src(e, uses)
                self.lines.append(f"{name} = {text}")
            out.append(self.lines)
        return out

    def _src(self, e: E, uses: dict[E, int]) -> tuple[str, bool]:
        if e.op in ("var", "const", "big"):
            return self.leaf(e), True
        if e in self._bound:
            return self._bound[e], True
        pairs = [self._src(c, uses) if isinstance(c, E) else (repr(c), True) for c in e.args]
        args = [_wrap(*p) for p in pairs]
        self.raw = [text for text, _ in pairs]  # unparenthesised, for call arguments
        name = self.statement(e, self.raw)
        if name is None:
            text, atomic = self.node(e, args)
            if uses.get(e, 0) <= 1:
                return text, atomic
            name = self.bind(_HINT.get(e.op, "t"), text)
        self._bound[e] = name
        return name, True


_HINT = {"abs": "a", "exp": "e", "div": "r", "sqrt": "q", "where": "w", "max": "m", "min": "m", "pow": "w",
         "mul": "t", "add": "t", "sub": "t", "lt": "c", "le": "c", "gt": "c", "ge": "c", "atan": "at"}

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


# ------------------------------------------------------------------ torch
class TorchSource(SourceRenderer):
    """Torch tensor code; ``big`` names the dtype's largest finite value."""

    _FUNCS = {"exp": "torch.exp", "atan": "torch.atan", "erf": "torch.erf", "sqrt": "torch.sqrt",
              "sigmoid": "torch.sigmoid", "copysign": "torch.copysign", "where": "torch.where"}

    def __init__(self, env: dict[str, str], reserved=()) -> None:
        super().__init__({**env, "-big": "-big"}, reserved)

    def rewrite(self, e: E) -> E:
        if e.op == "neg" and e.args[0].op == "big":
            return E("var", ("-big",))  # a leaf: never bound to a temporary
        if e.op == "sigmoid":
            return e
        if e.op == "min" and self._scalar(e.args[1]) and e.args[0].op == "max" and self._scalar(e.args[0].args[1]):
            return E("clamp", (e.args[0].args[0], e.args[0].args[1], e.args[1]))
        return super().rewrite(e)

    def leaf(self, e: E) -> str:
        if e.op == "var":
            return self.env[e.args[0]]
        if e.op == "big":
            return "big"
        return literal(e.args[0])

    @staticmethod
    def _scalar(e: E) -> bool:
        return e.op in ("const", "big") or e == E("var", ("-big",)) or (e.op == "neg" and e.args[0].op == "big")

    def node(self, e: E, args: list[str]) -> tuple[str, bool]:
        op = e.op
        if op in _INFIX:
            return f"{args[0]} {_INFIX[op]} {args[1]}", False
        if op == "neg":
            return f"-{args[0]}", False
        if op == "abs":
            return f"{args[0]}.abs()", True
        if op == "clamp":
            return f"{args[0]}.clamp({self.raw[1]}, {self.raw[2]})", True
        if op in ("min", "max"):
            if self._scalar(e.args[1]):  # max(x, c) = x.clamp_min(c)
                return f"{args[0]}.clamp_{'max' if op == 'min' else 'min'}({self.raw[1]})", True
            return f"torch.{'minimum' if op == 'min' else 'maximum'}({', '.join(self.raw)})", True
        return f"{self._FUNCS[op]}({', '.join(self.raw)})", True


# ------------------------------------------------------------------ scalar
def scalar_literal(v: float, ft: str) -> str:
    """A float literal of type ``ft`` in kernel code: plain for float64,
    ``np.float32(...)`` for float32 (a bare literal would promote float32
    arithmetic to float64)."""
    s = literal(float(v))
    return s if ft == "float64" else f"np.float32({s})"


# h(t) ~ erfcx(x) / t with t = 1 / (1 + x / 2), x >= 0, lowest degree first:
# a least-squares fit in relative error on t in (0, 1] (fit error 4e-8,
# ~2e-7 evaluated in float32); h(1) = erfcx(0) = 1, h(0) = 1 / sqrt(pi)
_ERFCX_T = (
    0.282094806432724, 0.2820930480957031, 0.24690276384353638, 0.17510701715946198,
    0.09474892914295197, -0.06389185786247253, 0.14271552860736847, -0.46980881690979004,
    0.5063961148262024, -0.24077945947647095, 0.04442194476723671,
)
# Cephes atanf: odd polynomial on the reduced range, error ~1 float32 ulp
_ATAN_P = (-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2)


def _horner(coefs, x: E) -> E:
    acc = const(coefs[-1])
    for c in reversed(coefs[:-1]):
        acc = acc * x + c
    return acc


def _nonpositive(e: E) -> bool:
    """``e`` is <= 0 by its form: -|x| or c * x * x with c < 0."""
    if e.op == "neg" and e.args[0].op == "abs":
        return True
    return (e.op == "mul" and e.args[0].op == "mul" and e.args[0].args[0].is_const()
            and e.args[0].args[0].args[0] < 0 and e.args[0].args[1] == e.args[1])


_ROOTS = {0.5: lambda x: sqrt(x), 0.25: lambda x: sqrt(sqrt(x)), 0.75: lambda x: sqrt(x) * sqrt(sqrt(x))}


class ScalarSource(SourceRenderer):
    """Scalar kernel code in float type ``ft`` (see the module doc)."""

    prefix = "sw_"
    _FUNCS = {"abs": "abs", "exp": "math.exp", "atan": "math.atan", "erf": "math.erf", "sqrt": "math.sqrt",
              "copysign": "math.copysign", "min": "min", "max": "max"}

    def __init__(self, env, ft: str, inline_exp: bool = False, reserved=()) -> None:
        super().__init__(env, set(reserved) | {"math", "np"})
        self.ft = ft
        self.inline_exp = inline_exp and ft == "float32"

    def rewrite(self, e: E) -> E:
        op, a = e.op, e.args
        f32 = self.ft == "float32"
        if op == "abs" and a[0].op == "neg":
            return abs_(a[0].args[0])
        if op == "neg" and a[0].op == "big":
            return const(-float(np.finfo(self.ft).max))
        if op == "pow":
            x, q = a[0], a[1].args[0]
            if abs(q) in _ROOTS:
                if q > 0:
                    return _ROOTS[q](x)
                if x.op == "max" and x.args[1].is_const():
                    # max(x, c)^-q = 1 / max(x^q, c^q): the root is shared
                    c = float(np.dtype(self.ft).type(x.args[1].args[0]))
                    return 1.0 / maximum(_ROOTS[-q](x.args[0]), c ** -q)
                return 1.0 / _ROOTS[-q](x)
        if op == "mul" and a[0].is_const() and a[1].op == "div" and a[1].args[0].is_const(1.0):
            return E("div", (a[0], a[1].args[1]))  # c * (1 / x) = c / x
        if op == "atan" and f32:
            return self._atan(a[0])
        if op == "ncdf" and f32:
            return self._ncdf(a[0])
        return super().rewrite(e)

    @staticmethod
    def _atan(x: E) -> E:
        """Cephes atanf: |x| reduced to [0, tan(pi/8)] via pi/4 or pi/2."""
        ax = abs_(x)
        big, mid = ax > 2.414213562373095, ax > 0.41421356237309503
        num = where(big, -1.0, where(mid, ax - 1.0, ax))
        den = where(big, ax, where(mid, ax + 1.0, 1.0))
        y0 = where(big, math.pi / 2, where(mid, math.pi / 4, 0.0))
        xr = num / den
        zz = xr * xr
        at = y0 + _horner(_ATAN_P, zz) * zz * xr + xr
        return where(x >= 0.0, at, -at)

    @staticmethod
    def _ncdf(x: E) -> E:
        """1 - Phi(|x|) = exp(-x^2/2) t h(t) / 2, t = 1 / (1 + |x| / (2 sqrt 2))."""
        ez = exp(-0.5 * x * x)
        t = 1.0 / (1.0 + abs_(x) * (0.5 / math.sqrt(2.0)))
        tail = 0.5 * ez * t * _horner(_ERFCX_T, t)
        return where(x >= 0.0, 1.0 - tail, tail)

    def leaf(self, e: E) -> str:
        if e.op == "var":
            return self.env[e.args[0]]
        if e.op == "big":
            return scalar_literal(np.finfo(self.ft).max, self.ft)
        return scalar_literal(e.args[0], self.ft)

    def node(self, e: E, args: list[str]) -> tuple[str, bool]:
        op = e.op
        if op in _INFIX:
            return f"{args[0]} {_INFIX[op]} {args[1]}", False
        if op == "neg":
            return f"-{args[0]}", False
        if op == "where":
            return f"{args[1]} if {args[0]} else {args[2]}", False
        return f"{self._FUNCS[op]}({', '.join(self.raw)})", True

    def statement(self, e: E, args: list[str]) -> str | None:
        if not (self.inline_exp and e.op == "exp" and _nonpositive(e.args[0])):
            return None
        return self._exp_lines(args[0])

    def _exp_lines(self, arg: str) -> str:
        """float32 exp(arg) for arg <= 0 without a libm call (a loop over
        batch rows stays one vector loop): arg clamped to -87, arg = r - m
        ln2 with m in 0..126 and |r| <= ln2 / 2 (ln2 split in two, the first
        part exact in m * ln2_hi), exp(r) by its degree-7 Taylor polynomial
        (truncation 5e-9 relative), 2^-m from its bits (exponent field
        127 - m, an int32 viewed as float32, int32 throughout so it
        vectorises). ~1-2 ulp; below e^-87 reads as e^-87."""
        L = lambda v: scalar_literal(v, "float32")  # noqa: E731
        ex = self.bind("ex", f"max({arg}, {L(-87.0)})")
        em = self.bind("em", f"np.int32(-{ex} * {L(1.0 / math.log(2.0))} + {L(0.5)})")
        fm = self.bind("fm", f"np.float32({em})")
        er = self.bind("er", f"{ex} + {fm} * {L(0.693359375)} + {fm} * {L(-2.12194440e-4)}")
        poly = L(1.0 / math.factorial(7))
        for i in range(6, -1, -1):
            poly = f"({poly} * {er} + {L(1.0 / math.factorial(i))})"
        scale = f"np.int32((np.int32(127) - {em}) << np.int32(23)).view(np.float32)"
        return self.bind("e", f"{poly} * {scale}")
